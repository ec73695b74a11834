//! Sessions and the extension runtime over HTTP, with real peers (issue 6).

use crate::contract;
use crate::require_peers;
use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

fn start_session(s: &Server, working_dir: &str, overrides: Vec<Value>) -> String {
    let r = s.post("/agent/start", json!({"working_dir": working_dir, "extension_overrides": overrides}));
    assert_eq!(r.status, 200, "{}", r.text());
    contract::check("POST", "/agent/start", 200, &r.json());
    r.json()["id"].as_str().unwrap().to_string()
}

fn resume(s: &Server, id: &str) -> Value {
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    contract::check("POST", "/agent/resume", 200, &r.json());
    r.json()
}

fn tools(s: &Server, id: &str, ext: Option<&str>) -> Vec<Value> {
    let q = ext.map(|e| format!("&extension_name={e}")).unwrap_or_default();
    let r = s.get(&format!("/agent/tools?session_id={id}{q}"));
    assert_eq!(r.status, 200, "{}", r.text());
    contract::check("GET", "/agent/tools", 200, &r.json());
    r.json().as_array().unwrap().clone()
}

fn call(s: &Server, id: &str, name: &str, args: Value) -> (u16, Value) {
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": name, "arguments": args}));
    let body = r.json();
    if r.status == 200 {
        contract::check("POST", "/agent/call_tool", 200, &body);
    }
    (r.status, body)
}

fn text_of(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_session_with_stdio_http_and_builtin_extensions() {
    let peers = require_peers!();
    let py = py_http(peers, "");
    let s = Server::start();
    let work = TempDir::new("work");
    std::fs::write(work.join("hello.txt"), "hello from the working dir\n").unwrap();
    let id = start_session(
        &s,
        work.path().to_str().unwrap(),
        vec![
            everything_stdio_config(peers, "everything"),
            json!({"type":"streamable_http","name":"py","description":"","uri":py.url,"timeout":60}),
            json!({"type":"builtin","name":"developer","description":"","timeout":60}),
        ],
    );
    let resumed = resume(&s, &id);
    let results = resumed["extension_results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r["success"] == true), "{results:?}");

    let all = tools(&s, &id, None);
    let names: Vec<&str> = all.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in ["everything__echo", "py__add", "developer__shell"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");
    let echo = all.iter().find(|t| t["name"] == "everything__echo").unwrap();
    assert_eq!(echo["parameters"], json!(["message"]));
    let only_py = tools(&s, &id, Some("py"));
    assert!(!only_py.is_empty() && only_py.iter().all(|t| t["name"].as_str().unwrap().starts_with("py__")));

    let (st, r) = call(&s, &id, "everything__echo", json!({"message": "hi"}));
    assert_eq!(st, 200);
    assert_eq!(r["isError"], false);
    assert!(text_of(&r).contains("hi"));
    let (_, r) = call(&s, &id, "py__add", json!({"a": 2, "b": 40}));
    assert!(text_of(&r).contains("42"), "{r}");
    let (_, r) = call(&s, &id, "developer__text_editor", json!({"command": "view", "path": "hello.txt"}));
    assert!(text_of(&r).contains("hello from the working dir"), "{r}");

    // An MCP tool error is a 200 with isError, not an HTTP error.
    let (st, r) = call(&s, &id, "py__add", json!({"a": "x"}));
    assert_eq!(st, 200);
    assert_eq!(r["isError"], true);
    let (st, r) = call(&s, &id, "nope__tool", json!({}));
    assert_eq!(st, 404, "{r}");

    // Resources: a text resource of server-everything and a template of the Python server.
    let rr = s.post("/agent/read_resource", json!({"session_id": id, "extension_name": "everything", "uri": "demo://resource/static/document/architecture.md"}));
    assert_eq!(rr.status, 200, "{}", rr.text());
    contract::check("POST", "/agent/read_resource", 200, &rr.json());
    assert!(!rr.json()["text"].as_str().unwrap().is_empty());
    let rr = s.post("/agent/read_resource", json!({"session_id": id, "extension_name": "py", "uri": "greeting://Ada"}));
    assert_eq!(rr.json()["text"], "Hello, Ada!");

    // Add and remove at run time.
    let add = s.post(
        "/agent/add_extension",
        json!({"session_id": id, "config": {"type":"builtin","name":"memory","description":""}}),
    );
    assert_eq!(add.status, 200, "{}", add.text());
    contract::check_resp("POST", "/agent/add_extension", &add);
    assert!(tools(&s, &id, None).iter().any(|t| t["name"].as_str().unwrap().starts_with("memory__")));
    let rm = s.post("/agent/remove_extension", json!({"session_id": id, "name": "memory"}));
    assert_eq!(rm.status, 200);
    contract::check_resp("POST", "/agent/remove_extension", &rm);
    assert!(!tools(&s, &id, None).iter().any(|t| t["name"].as_str().unwrap().starts_with("memory__")));

    let children = descendants(s.pid());
    assert!(!children.is_empty());
    let stop = s.post("/agent/stop", json!({"session_id": id}));
    assert_eq!(stop.status, 200);
    contract::check_resp("POST", "/agent/stop", &stop);
    let gone = wait_for(Duration::from_secs(15), || children.iter().all(|p| !pid_alive(*p)).then_some(()));
    assert!(
        gone.is_some(),
        "children left running: {:?}",
        children.iter().filter(|p| pid_alive(**p)).collect::<Vec<_>>()
    );
    let again = s.post("/agent/stop", json!({"session_id": id}));
    assert_eq!(again.status, 404);
    contract::check_resp("POST", "/agent/stop", &again);
    assert_eq!(s.get(&format!("/agent/tools?session_id={id}")).status, 424);
}

#[test]
fn a_failing_extension_does_not_fail_the_session() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let id = start_session(
        &s,
        work.path().to_str().unwrap(),
        vec![
            everything_stdio_config(peers, "everything"),
            json!({"type":"stdio","name":"broken","cmd":"/nonexistent/mcp-server","args":[]}),
            json!({"type":"sse","name":"legacy","uri":"http://127.0.0.1:9/sse"}),
            json!({"type":"builtin","name":"nosuchbuiltin"}),
        ],
    );
    let results = resume(&s, &id)["extension_results"].as_array().unwrap().clone();
    let by = |n: &str| results.iter().find(|r| r["name"] == n).unwrap().clone();
    assert_eq!(by("everything")["success"], true);
    assert_eq!(by("broken")["success"], false);
    assert!(by("broken")["error"].as_str().unwrap().contains("/nonexistent/mcp-server"), "{results:?}");
    assert!(by("legacy")["error"].as_str().unwrap().contains("SSE is unsupported, migrate to streamable_http"));
    let nb = by("nosuchbuiltin")["error"].as_str().unwrap().to_string();
    assert!(nb.contains("developer") && nb.contains("memory"), "lists the known builtins: {nb}");
    assert_eq!(call(&s, &id, "everything__echo", json!({"message":"still works"})).0, 200);
}

#[test]
fn working_dir_update_reaches_roots() {
    let peers = require_peers!();
    let s = Server::start();
    let a = TempDir::new("wd-a");
    let b = TempDir::new("wd-b");
    // server-filesystem started without directories takes its allowed dirs from roots/list.
    let fs =
        json!({"type":"stdio","name":"fs","cmd":peers.node(),"args":[peers.get("MCP_PEER_FILESYSTEM")],"timeout":60});
    let id = start_session(&s, a.path().to_str().unwrap(), vec![fs]);
    resume(&s, &id);
    // The server asks for roots on its own after initialize, so its list may still be empty
    // ("Allowed directories:") for a moment: wait for the directory itself.
    let allowed = |s: &Server| {
        let (_, r) = call(s, &id, "fs__list_allowed_directories", json!({}));
        text_of(&r)
    };
    let a_name = a.path().file_name().unwrap().to_str().unwrap().to_string();
    let before = wait_for(Duration::from_secs(20), || Some(allowed(&s)).filter(|t| t.contains(&a_name)));
    assert!(before.is_some(), "roots/list answered with the first working dir: {}", allowed(&s));
    let bad = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": "/nonexistent/dir"}));
    assert_eq!(bad.status, 400);
    contract::check_resp("POST", "/agent/update_working_dir", &bad);
    assert!(bad.json()["message"].as_str().unwrap().contains("Invalid directory path"));
    let empty = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": "  "}));
    assert_eq!(empty.json()["message"], "Working directory cannot be empty");
    let ok = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": b.path().to_str().unwrap()}));
    assert_eq!(ok.status, 200, "{}", ok.text());
    contract::check_resp("POST", "/agent/update_working_dir", &ok);
    let after = wait_for(Duration::from_secs(20), || {
        let t = allowed(&s);
        t.contains(b.path().file_name().unwrap().to_str().unwrap()).then_some(t)
    });
    assert!(after.is_some(), "roots/list answered with the new working dir");
    let sess = s.get(&format!("/sessions/{id}"));
    contract::check("GET", "/sessions/{session_id}", 200, &sess.json());
    assert_eq!(sess.json()["working_dir"], b.path().to_str().unwrap());
}

#[test]
fn sessions_survive_a_server_restart() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let id = start_session(&s, work.path().to_str().unwrap(), vec![everything_stdio_config(peers, "everything")]);
    resume(&s, &id);
    assert_eq!(call(&s, &id, "everything__echo", json!({"message":"one"})).0, 200);
    let list = s.get("/sessions");
    contract::check("GET", "/sessions", 200, &list.json());
    assert!(list.json()["sessions"].as_array().unwrap().iter().any(|x| x["id"] == id.as_str()));
    let home = s.kill();
    let s = Server::start_in(home, ServerOpts::default());
    assert_eq!(s.get(&format!("/agent/tools?session_id={id}")).status, 424, "no agent until resumed");
    let r = resume(&s, &id);
    assert_eq!(r["session"]["id"], id.as_str());
    let (st, res) = call(&s, &id, "everything__echo", json!({"message":"two"}));
    assert_eq!(st, 200);
    assert!(text_of(&res).contains("two"));
    let restarted = s.post("/agent/restart", json!({"session_id": id}));
    assert_eq!(restarted.status, 200);
    contract::check("POST", "/agent/restart", 200, &restarted.json());
    assert_eq!(restarted.json()["extension_results"][0]["success"], true);
    assert_eq!(s.post("/agent/resume", json!({"session_id":"nope","load_model_and_extensions":false})).status, 404);
    let del = s.delete(&format!("/sessions/{id}"));
    assert_eq!(del.status, 200);
    contract::check_resp("DELETE", "/sessions/{session_id}", &del);
    assert_eq!(s.get(&format!("/sessions/{id}")).status, 404);
}

#[test]
fn sixteen_sessions_used_concurrently() {
    let peers = require_peers!();
    let s = std::sync::Arc::new(Server::start());
    let work = TempDir::new("work");
    let ids: Vec<String> = (0..16)
        .map(|_| start_session(&s, work.path().to_str().unwrap(), vec![everything_stdio_config(peers, "everything")]))
        .collect();
    let threads: Vec<_> = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let s = s.clone();
            std::thread::spawn(move || {
                resume(&s, &id);
                for j in 0..5 {
                    let msg = format!("client {i} call {j}");
                    let (st, r) = call(&s, &id, "everything__echo", json!({"message": msg}));
                    assert_eq!(st, 200);
                    assert!(text_of(&r).contains(&msg), "answer reached the wrong caller: {r}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_killed_child_is_restarted_and_calls_are_audited() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let id = start_session(&s, work.path().to_str().unwrap(), vec![everything_stdio_config(peers, "everything")]);
    resume(&s, &id);
    assert_eq!(call(&s, &id, "everything__echo", json!({"message":"before"})).0, 200);
    let kids = child_pids(s.pid());
    assert_eq!(kids.len(), 1, "one extension child: {kids:?}");
    let _ = std::process::Command::new("kill").arg("-KILL").arg(kids[0].to_string()).status();
    // Calls fail fast while it restarts, then work again.
    let back = wait_for(Duration::from_secs(30), || {
        let (st, r) = call(&s, &id, "everything__echo", json!({"message":"after"}));
        if st != 200 {
            let m = r["message"].as_str().unwrap_or("").to_string();
            assert!(m.contains("everything"), "the error names the extension: {m}");
        }
        (st == 200 && text_of(&r).contains("after")).then_some(())
    });
    assert!(back.is_some(), "the extension came back");
    assert!(tools(&s, &id, None).iter().any(|t| t["name"] == "everything__echo"));
    let audit = std::fs::read_to_string(s.home.join("state/audit.jsonl")).unwrap();
    let lines: Vec<Value> = audit.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2);
    for l in &lines {
        for k in ["time", "session", "extension", "tool", "args_sha256", "status", "duration_ms"] {
            assert!(l.get(k).is_some(), "audit line has {k}: {l}");
        }
    }
    assert!(!audit.contains("before"), "arguments are hashed, not logged");
}

#[test]
fn children_do_not_inherit_the_secret_key() {
    let peers = require_peers!();
    let s = Server::start_with(ServerOpts {
        env: vec![("OPENAI_API_KEY".into(), "sk-test-provider-key".into())],
        ..Default::default()
    });
    let work = TempDir::new("work");
    let id = start_session(&s, work.path().to_str().unwrap(), vec![everything_stdio_config(peers, "everything")]);
    resume(&s, &id);
    let (_, r) = call(&s, &id, "everything__get-env", json!({}));
    let env = text_of(&r);
    assert!(env.contains("PATH"), "get-env works: {env}");
    assert!(!env.contains(SECRET), "the secret key leaked into the child");
    assert!(!env.contains("sk-test-provider-key"), "a provider key leaked into the child");
}

#[test]
fn children_get_the_original_descriptor_limit() {
    // The server raises its soft limit (256) to the hard one (4096) for its connections; an
    // extension and what it runs get 256 back, as if gosling had not touched it.
    let s = Server::start_with(ServerOpts { fd_limit: Some((256, 4096)), ..Default::default() });
    let work = TempDir::new("work");
    let id = start_session(
        &s,
        work.path().to_str().unwrap(),
        vec![json!({"type":"builtin","name":"developer","description":"","timeout":60})],
    );
    assert_eq!(resume(&s, &id)["extension_results"][0]["success"], true);
    let (st, r) = call(&s, &id, "developer__shell", json!({"command": "ulimit -n; ulimit -Hn"}));
    assert_eq!(st, 200, "{r}");
    let out = text_of(&r);
    assert!(out.contains("256") && out.contains("4096"), "{out}");
    assert!(s.stderr().contains("file descriptor limit 4096"), "the server raised its own: {}", s.stderr());
}

#[test]
fn unknown_sessions_and_bad_requests() {
    let s = Server::start();
    assert_eq!(s.get("/agent/tools").status, 400);
    assert_eq!(s.get("/agent/tools?session_id=nope").status, 424);
    let r = s.post("/agent/call_tool", json!({"session_id":"nope","name":"x__y","arguments":{}}));
    assert_eq!(r.status, 424);
    contract::check("POST", "/agent/call_tool", 424, &r.json());
    assert_eq!(s.post("/agent/restart", json!({"session_id":"nope"})).status, 404);
    let up = s.post("/agent/update_provider", json!({"session_id":"nope","provider":"openai","model":"m"}));
    assert_eq!(up.status, 424);
    contract::check_resp("POST", "/agent/update_provider", &up);
    let id = start_session(&s, "/tmp", vec![]);
    let up = s.post("/agent/update_provider", json!({"session_id": id, "provider":"openai","model":"m"}));
    assert_eq!(up.status, 200, "{}", up.text());
    contract::check_resp("POST", "/agent/update_provider", &up);
    assert_eq!(s.get(&format!("/sessions/{id}")).json()["provider_name"], "openai");
    let bad = s.post("/agent/update_provider", json!({"session_id": id, "provider":"nonsense","model":"m"}));
    assert_eq!(bad.status, 400);
    contract::check_resp("POST", "/agent/update_provider", &bad);
    assert!(bad.json()["message"].as_str().unwrap().contains("use openai, ollama or anthropic"));
    assert_eq!(s.get("/sessions/nope").status, 404);
    assert_eq!(s.get("/sessions/..%2Fetc").status, 404);
    let bad = s.post(
        "/agent/start",
        json!({"working_dir": "/tmp", "extension_overrides": [{"type":"streamable_http","name":"r","url":"http://x"}]}),
    );
    assert_eq!(bad.status, 400);
    assert!(bad.json()["message"].as_str().unwrap().contains("use `uri`"));
}

const INLINE_SERVER: &str = "from mcp.server import MCPServer\n\nmcp = MCPServer(\"inline\")\n\n@mcp.tool()\ndef shout(text: str) -> str:\n    \"\"\"Upper-case the text.\"\"\"\n    return text.upper()\n\nif __name__ == \"__main__\":\n    mcp.run()\n";

#[test]
fn inline_python_runs_with_the_configured_python() {
    let peers = require_peers!();
    // No uvx on PATH here: the configured Python (the peers' venv, which has `mcp`) runs it.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_PYTHON".into(), peers.python().into()), ("PATH".into(), "/usr/bin:/bin".into())],
        ..Default::default()
    });
    let work = TempDir::new("work");
    let cfg = json!({"type":"inline_python","name":"inline","description":"","code":INLINE_SERVER,"timeout":60});
    let id = start_session(&s, work.path().to_str().unwrap(), vec![cfg]);
    let r = resume(&s, &id);
    assert_eq!(r["extension_results"][0]["success"], true, "{r}");
    let (st, res) = call(&s, &id, "inline__shout", json!({"text": "quiet"}));
    assert_eq!(st, 200);
    assert!(text_of(&res).contains("QUIET"), "{res}");
}

#[test]
fn inline_python_without_python_or_uvx_is_a_clear_error() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_PYTHON".into(), "/nonexistent/python3".into()), ("PATH".into(), "/nonexistent".into())],
        ..Default::default()
    });
    let work = TempDir::new("work");
    let cfg = json!({"type":"inline_python","name":"inline","description":"","code":INLINE_SERVER});
    let id = start_session(&s, work.path().to_str().unwrap(), vec![cfg]);
    let r = resume(&s, &id);
    let err = r["extension_results"][0]["error"].as_str().unwrap().to_string();
    assert!(err.contains("uvx") && err.contains("GOSLING_PYTHON"), "{err}");
}

#[test]
fn no_child_outlives_the_server() {
    let peers = require_peers!();
    for signal in ["-TERM", "-KILL"] {
        let s = Server::start();
        let work = TempDir::new("work");
        let id = start_session(
            &s,
            work.path().to_str().unwrap(),
            vec![everything_stdio_config(peers, "everything"), json!({"type":"builtin","name":"memory"})],
        );
        resume(&s, &id);
        let children = descendants(s.pid());
        assert!(children.len() >= 2, "{children:?}");
        let _ = std::process::Command::new("kill").arg(signal).arg(s.pid().to_string()).status();
        let gone = wait_for(Duration::from_secs(15), || children.iter().all(|p| !pid_alive(*p)).then_some(()));
        assert!(
            gone.is_some(),
            "after {signal}: children left running: {:?}",
            children.iter().filter(|p| pid_alive(**p)).collect::<Vec<_>>()
        );
    }
}

/// A working dir must be an existing absolute directory, `~` expanded against HOME: a missing
/// one, a relative path and a file are refused with a 400 naming the problem, on /agent/start
/// and /agent/update_working_dir alike (one rule, `config::working_dir`); `~/work` is stored
/// expanded.
#[test]
fn working_dir_must_be_an_existing_absolute_directory() {
    let s = Server::start();
    let file = s.home.join("notes.txt");
    std::fs::write(&file, "x").unwrap();
    std::fs::create_dir_all(s.home.join("work")).unwrap();
    let file = file.to_str().unwrap().to_string();
    for (dir, says) in [
        ("/nonexistent/dir", "does not exist"),
        ("relative/dir", "relative path"),
        (file.as_str(), "is not a directory"),
        ("~/missing-here", "does not exist"),
    ] {
        let r = s.post("/agent/start", json!({"working_dir": dir}));
        assert_eq!(r.status, 400, "/agent/start {dir}: {}", r.text());
        contract::check_resp("POST", "/agent/start", &r);
        let m = r.json()["message"].as_str().unwrap().to_string();
        assert!(m.contains(says) && m.contains("working directory"), "/agent/start {dir}: {m}");
    }
    let id = start_session(&s, "~/work", vec![]);
    let expanded = s.home.join("work").to_str().unwrap().to_string();
    assert_eq!(s.get(&format!("/sessions/{id}")).json()["working_dir"], expanded.as_str());
    for (dir, says) in [("relative", "relative path"), (file.as_str(), "is not a directory")] {
        let r = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": dir}));
        assert_eq!(r.status, 400, "update_working_dir {dir}: {}", r.text());
        let m = r.json()["message"].as_str().unwrap().to_string();
        assert!(m.contains("Invalid directory path") && m.contains(says), "update_working_dir {dir}: {m}");
    }
    let r = s.post("/agent/update_working_dir", json!({"session_id": id, "working_dir": "~"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(s.get(&format!("/sessions/{id}")).json()["working_dir"], s.home.path().to_str().unwrap());
}

/// An idle session's extensions stop after `GOSLING_IDLE_STOP_SECS` (their processes end) and
/// start again when the session is used: a tool call works and the child is back.
#[test]
fn idle_extensions_stop_and_start_again_on_use() {
    let peers = require_peers!();
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IDLE_STOP_SECS".into(), "2".into())],
        ..ServerOpts::default()
    });
    let work = TempDir::new("idle-work");
    let id = start_session(&s, work.path().to_str().unwrap(), vec![everything_stdio_config(peers, "everything")]);
    let resumed = resume(&s, &id);
    assert!(resumed["extension_results"].as_array().unwrap().iter().all(|r| r["success"] == true), "{resumed}");
    let (st, r) = call(&s, &id, "everything__echo", json!({"message": "before"}));
    assert_eq!(st, 200, "{r}");
    assert!(!descendants(s.pid()).is_empty(), "the stdio extension runs");
    let gone = wait_for(Duration::from_secs(30), || descendants(s.pid()).is_empty().then_some(()));
    assert!(gone.is_some(), "idle for 2 s: the extension's processes stop: {:?}", descendants(s.pid()));
    assert!(s.stderr().contains("stopping its 1 extension"), "the stop is logged: {}", s.stderr());
    let (st, r) = call(&s, &id, "everything__echo", json!({"message": "after"}));
    assert_eq!(st, 200, "the session's next use starts the extension again: {r}");
    assert!(text_of(&r).contains("after"), "{r}");
    assert!(!descendants(s.pid()).is_empty(), "the child is back");
    assert!(!tools(&s, &id, Some("everything")).is_empty(), "its tools are listed again");
}
