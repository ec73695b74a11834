//! Issue 27 finding 7: every activation re-checks the trust policy in force. A session's
//! stored extension that the allowlist (`<config dir>/allowlist.json`) no longer admits does
//! not start — on `/agent/resume`, `/agent/restart`, `/agent/update_working_dir` or ACP
//! `session/load`, after a server restart or with the file changed under a running server — and
//! the answer says why.

use crate::fake_llm::FakeLlm;
use crate::require_peers;
use crate::sessions_store::Acp;
use crate::support::*;
use serde_json::{json, Value};

fn refused(result: &Value, name: &str) {
    assert_eq!(result["name"], name, "{result}");
    assert_eq!(result["success"], false, "{result}");
    let e = result["error"].as_str().unwrap_or_default();
    assert!(e.contains("trust policy") && e.contains("allowlist"), "the refusal names the rule: {e}");
}

fn tool_names(s: &Server, id: &str) -> Vec<String> {
    let r = s.get(&format!("/agent/tools?session_id={id}"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn an_extension_the_allowlist_no_longer_admits_does_not_start_on_resume_restart_or_load() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let wd = work.path().to_str().unwrap().to_string();
    let dev = json!({"type":"builtin","name":"developer","description":"","timeout":300,"bundled":true});
    let everything = everything_stdio_config(peers, "everything");
    let r = s.post("/agent/start", json!({"working_dir": wd, "extension_overrides": [everything, dev]}));
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true})).json();
    assert!(r["extension_results"].as_array().unwrap().iter().all(|x| x["success"] == true), "{r}");
    assert!(tool_names(&s, &id).iter().any(|t| t.starts_with("everything__")));

    // The operator writes an allowlist that does not list the extension's command, and
    // restarts the server (the allowlist is read at start-up).
    let home = s.kill();
    let list = json!({"commands": ["gosling mcp memory"], "urls": []}).to_string();
    std::fs::write(home.join("config/allowlist.json"), list).unwrap();
    let s = Server::start_in(home, ServerOpts::default());

    // Resume: the stored extension is refused, the builtin (not a command) still starts.
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    let results = r.json()["extension_results"].as_array().unwrap().clone();
    refused(results.iter().find(|x| x["name"] == "everything").expect("a result for it"), "everything");
    assert_eq!(results.iter().find(|x| x["name"] == "developer").unwrap()["success"], true, "{results:?}");
    let names = tool_names(&s, &id);
    assert!(!names.iter().any(|t| t.starts_with("everything__")), "{names:?}");
    assert!(names.iter().any(|t| t.starts_with("developer__")), "{names:?}");
    let call = s
        .post("/agent/call_tool", json!({"session_id": id, "name": "everything__echo", "arguments": {"message": "x"}}));
    assert_ne!(call.status, 200, "{}", call.text());
    assert!(s.stderr().contains("trust policy refuses it"), "the server log says why");

    // Restart and a new working dir activate again, and refuse again.
    let r = s.post("/agent/restart", json!({"session_id": id}));
    assert_eq!(r.status, 200, "{}", r.text());
    let results = r.json()["extension_results"].as_array().unwrap().clone();
    refused(results.iter().find(|x| x["name"] == "everything").unwrap(), "everything");
    let other = TempDir::new("work2");
    let r = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": other.path()}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!tool_names(&s, &id).iter().any(|t| t.starts_with("everything__")));

    // ACP `session/load` over the same files: refused there too, with the reason.
    let home = s.kill();
    let llm = FakeLlm::start(vec![]);
    let mut acp = Acp::start(&home, &llm);
    let load = acp.call("session/load", json!({"sessionId": id, "cwd": other.path(), "mcpServers": []}));
    let results = load["_meta"]["extensionResults"].as_array().expect("extension results").clone();
    refused(results.iter().find(|x| x["name"] == "everything").expect("a result for it"), "everything");
    assert_eq!(results.iter().find(|x| x["name"] == "developer").unwrap()["success"], true, "{results:?}");
}

/// Issue 27 item 6, "the current policy": the allowlist is read again when its file changes, so
/// the next activation is judged by it without a restart — tightened, loosened, and refused with
/// the reason when the file no longer reads.
#[test]
fn a_changed_allowlist_is_in_force_at_the_next_activation_without_a_restart() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let wd = work.path().to_str().unwrap().to_string();
    let everything = everything_stdio_config(peers, "everything");
    let r = s.post("/agent/start", json!({"working_dir": wd, "extension_overrides": [everything]}));
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let restart = |what: &str| {
        let r = s.post("/agent/restart", json!({"session_id": id}));
        assert_eq!(r.status, 200, "{what}: {}", r.text());
        let results = r.json()["extension_results"].as_array().unwrap().clone();
        results.into_iter().find(|x| x["name"] == "everything").unwrap_or_else(|| panic!("{what}: no result"))
    };
    assert_eq!(restart("no allowlist")["success"], true);

    // Tightened while the server runs: the next activation is refused, saying why.
    let file = s.home.join("config/allowlist.json");
    std::fs::write(&file, json!({"commands": ["gosling mcp memory"], "urls": []}).to_string()).unwrap();
    refused(&restart("an allowlist without its command"), "everything");
    assert!(!tool_names(&s, &id).iter().any(|t| t.starts_with("everything__")));

    // A file that no longer reads: refused, naming the file and the problem.
    std::fs::write(&file, "{ not json").unwrap();
    let r = restart("a malformed allowlist");
    assert_eq!(r["success"], false, "{r}");
    let e = r["error"].as_str().unwrap_or_default();
    assert!(e.contains("allowlist.json") && e.contains("cannot be used"), "{e}");

    // Removed: no allowlist again, and it starts.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(restart("the allowlist removed")["success"], true);
    assert!(tool_names(&s, &id).iter().any(|t| t.starts_with("everything__")));
}
