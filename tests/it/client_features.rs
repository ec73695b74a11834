// What servers rely on from a client: `logging/setLevel` at gosling's level, tools that need
// task augmentation left out, and `structuredContent` checked against the tool's
// `outputSchema`, a mismatch reaching the model as an error result.

use crate::fake_llm::*;
use crate::support::*;
use serde_json::{json, Value};

fn records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn set_level_task_only_tools_and_output_schema() {
    let llm = FakeLlm::start(vec![tool_turn("c1", "features__weather", "{}"), text_turn("done")]);
    let s = Server::start_with(ServerOpts {
        env: [vec![("RUST_LOG".into(), "debug".into())], llm.env("m")].concat(),
        ..Default::default()
    });
    let work = TempDir::new("work");
    // In the working dir: a confined extension writes only there (issue 36).
    let record = work.join("features.jsonl");
    let script = manifest_dir().join("tests/fakes/features_mcp_stdio.py");
    let ext =
        json!({"type":"stdio","name":"features","description":"","cmd":"python3","args":[script, record],"timeout":30});
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext}));
    assert_eq!(add.status, 200, "{}", add.text());

    // The server was told to log at our level (debug).
    let set = records(&record).into_iter().find(|m| m["method"] == "logging/setLevel");
    assert_eq!(set.as_ref().map(|m| m["params"]["level"].clone()), Some(json!("debug")), "{:?}", records(&record));

    // The task-only tool is not offered.
    let tools = s.get(&format!("/agent/tools?session_id={id}")).json();
    let names: Vec<&str> = tools.as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"features__weather") && !names.contains(&"features__task_only"), "{names:?}");

    // A matching result passes untouched; a mismatch is an error result.
    let good = s.post("/agent/call_tool", json!({"session_id": id, "name": "features__good_weather", "arguments": {}}));
    assert_eq!(good.json()["isError"], false, "{}", good.text());
    let bad = s.post("/agent/call_tool", json!({"session_id": id, "name": "features__weather", "arguments": {}}));
    assert_eq!(bad.json()["isError"], true, "{}", bad.text());
    assert!(
        bad.text().contains("does not match its declared outputSchema") && bad.text().contains("$.temp"),
        "{}",
        bad.text()
    );

    // Through a turn, the model sees the mismatch.
    let events = crate::reply::ReplyStream::open(&s, &id, crate::reply::user_text("weather?")).all();
    assert_eq!(events.last().unwrap()["type"], "Finish", "{events:?}");
    let second = llm.requests()[1].body.to_string();
    assert!(second.contains("does not match its declared outputSchema"), "{second}");
}
