//! Secret hygiene: with every log at trace level, a full round of use — config, a session
//! with an extension that gets an env value and an env_keys secret, a tool call, a /reply
//! against a fake LLM with a provider key — must not print any of those values.

use crate::fake_llm::*;
use crate::support::*;
use serde_json::json;

const PROVIDER_KEY: &str = "sk-hygiene-provider-key-1234567890";
const ENV_VALUE: &str = "env-value-hygiene-4567";
const STORED_SECRET: &str = "stored-secret-hygiene-7890";

#[test]
fn no_secret_reaches_the_log_at_trace_level() {
    let llm = FakeLlm::start(vec![tool_turn("c1", "fake__echo", "{\"message\":\"via the model\"}"), text_turn("done")]);
    let s = Server::start_with(ServerOpts {
        env: [vec![("RUST_LOG".into(), "trace".into()), ("OPENAI_API_KEY".into(), PROVIDER_KEY.into())], llm.env("m")]
            .concat(),
        ..Default::default()
    });
    assert_eq!(
        s.post("/config/upsert", json!({"key": "FAKE_TOKEN", "value": STORED_SECRET, "is_secret": true})).status,
        200
    );
    let script = manifest_dir().join("tests/fakes/bad_mcp_stdio.py");
    let ext = json!({"type":"stdio","name":"fake","description":"","cmd":"python3","args":[script, "ok"],"envs":{"FAKE_ENV":ENV_VALUE},"env_keys":["FAKE_TOKEN"],"timeout":30});
    assert_eq!(s.post("/config/extensions", json!({"name":"fake","enabled":true,"config":ext})).status, 200);
    let work = TempDir::new("work");
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let res = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true})).json();
    assert_eq!(res["extension_results"][0]["success"], true, "{res}");
    let call =
        s.post("/agent/call_tool", json!({"session_id": id, "name": "fake__echo", "arguments": {"message": "x"}}));
    assert_eq!(call.status, 200);
    let events = crate::reply::ReplyStream::open(&s, &id, crate::reply::user_text("use the tool")).all();
    assert_eq!(events.last().unwrap()["type"], "Finish", "{events:?}");
    assert!(llm.requests()[0].header("authorization").is_some_and(|h| h.contains(PROVIDER_KEY)), "the key was used");
    // An extension that prints the values it was given and fails to start: its stderr reaches
    // the log and the error with each of them blotted out.
    let leaky = work.path().join("leaky.py");
    std::fs::write(
        &leaky,
        "import os, sys\nsys.stderr.write('given ' + os.environ['FAKE_ENV'] + ' ' + os.environ['FAKE_TOKEN'] + '\\n')\nsys.exit(3)\n",
    )
    .unwrap();
    let leaky = json!({"type":"stdio","name":"leaky","description":"","cmd":"python3","args":[leaky],"envs":{"FAKE_ENV":ENV_VALUE},"env_keys":["FAKE_TOKEN"],"timeout":30});
    let added = s.post("/agent/add_extension", json!({"session_id": id, "config": leaky}));
    let said = added.text();
    assert!(said.contains("given [secret] [secret]"), "the extension's words, values blotted out: {said}");
    assert!(!said.contains(ENV_VALUE) && !said.contains(STORED_SECRET), "a value in the error: {said}");
    assert_eq!(s.get("/config").status, 200);
    // The whole log: stop the server (its stderr goes straight to the file, unbuffered).
    let log_path = s.stderr_path.clone();
    let _home = s.kill();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("TRACE"), "the log really is at trace level");
    for (what, secret) in [
        ("secret key", SECRET),
        ("provider key", PROVIDER_KEY),
        ("extension env value", ENV_VALUE),
        ("stored secret", STORED_SECRET),
    ] {
        assert!(!log.contains(secret), "the {what} appears in the log");
    }
}
