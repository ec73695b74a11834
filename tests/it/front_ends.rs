//! One session operation, one outcome and one error, whichever front end asks: the HTTP API of
//! `gosling agent` and ACP on stdio (`gosling acp`, whose connection code also serves the `/acp`
//! WebSocket), as two processes on one config and state dir, with server-everything (the MCP
//! reference server, from the pinned peers) as the extensions. Each test does an operation on
//! one front end and opens the session, or does the same thing, on the other.

use crate::require_peers;
use crate::support::{bin, everything_stdio_config, start_session, work_dir, Peers, Server, ServerOpts, TempDir};
use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one ACP answer may take (extensions start before `session/new` answers).
const ANSWER: Duration = Duration::from_secs(90);

/// `gosling acp` on the same dirs as the HTTP server of `home`, spoken to line by line.
pub(crate) struct Acp {
    child: Child,
    stdin: ChildStdin,
    pub(crate) lines: Receiver<Value>,
    next: u64,
    /// The agent's requests to the client seen so far (each answered "reject once").
    asked: Vec<Value>,
    /// The agent's notifications seen while waiting for answers (`session/update`s).
    pub(crate) notes: Vec<Value>,
}

impl Acp {
    fn start(home: &TempDir) -> Acp {
        Acp::start_with(home, &[])
    }

    /// With `env` added (the model's settings).
    pub(crate) fn start_with(home: &TempDir, env: &[(String, String)]) -> Acp {
        let mut cmd = Command::new(bin());
        cmd.arg("acp")
            .env("GOSLING_CONFIG_DIR", home.join("config"))
            .env("GOSLING_STATE_DIR", home.join("state"))
            .env("GOSLING_SESSION_TITLES", "first_message")
            .env("HOME", home.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for k in ["GOOSE_SERVER__SECRET_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOSE_PROVIDER", "GOOSE_MODEL"] {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd.spawn().expect("start gosling acp");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { return };
                let v: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut a = Acp { child, stdin, lines, next: 0, asked: Vec::new(), notes: Vec::new() };
        let init = a.call("initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        a
    }

    /// Sends a request and returns its answer (the whole message: `result` or `error`).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let until = Instant::now() + ANSWER;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let v = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to {method} within {ANSWER:?}"));
            if v.get("method").is_none() && v["id"] == id {
                return v;
            }
            if v.get("method").is_some() && v.get("id").is_some() {
                // A question to the person: declined, so a test that expects none fails on
                // its assertion rather than waiting.
                let outcome = json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}});
                self.send(json!({"jsonrpc": "2.0", "id": v["id"], "result": outcome}));
                self.asked.push(v);
            } else if v.get("method").is_some() {
                self.notes.push(v);
            }
        }
    }

    fn send(&mut self, message: Value) {
        self.stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
    }

    pub(crate) fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    fn new_session(&mut self, cwd: &str) -> (String, Vec<String>) {
        let r = self.ok("session/new", json!({"cwd": cwd, "mcpServers": []}));
        (r["sessionId"].as_str().unwrap().to_string(), started(&r["_meta"]["extensionResults"]))
    }

    pub(crate) fn load(&mut self, id: &str, cwd: &str) -> Vec<String> {
        let r = self.ok("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []}));
        started(&r["_meta"]["extensionResults"])
    }

    /// The names in the session's stored extension set (`_goose/unstable/session/extensions/list`).
    fn stored(&mut self, id: &str) -> Vec<String> {
        let r = self.ok("_goose/unstable/session/extensions/list", json!({"sessionId": id}));
        // goose's GooseExtension: an MCP server's name is the server's.
        let name = |e: &Value| e["name"].as_str().or(e["server"]["name"].as_str()).unwrap().to_string();
        let mut names: Vec<String> = r["extensions"].as_array().unwrap().iter().map(name).collect();
        names.sort();
        names
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait(); // wait: killed just above
    }
}

/// The names of the extensions that started, sorted (goose's `extension_results`, either front end).
fn started(results: &Value) -> Vec<String> {
    let mut names: Vec<String> = results
        .as_array()
        .unwrap_or_else(|| panic!("no extension results: {results}"))
        .iter()
        .filter(|r| r["success"] == true)
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// The names in the session's stored extension set, as the HTTP API shows the session.
fn stored_over_http(s: &Server, id: &str) -> Vec<String> {
    let r = s.get(&format!("/sessions/{id}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let list = r.json()["extension_data"]["enabled_extensions.v0"]["extensions"].clone();
    let mut names: Vec<String> =
        list.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    names
}

fn resume(s: &Server, id: &str) -> Vec<String> {
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    started(&r.json()["extension_results"])
}

/// The extension prefixes of the session's tools (`GET /agent/tools`).
fn tool_owners(s: &Server, id: &str) -> Vec<String> {
    let r = s.get(&format!("/agent/tools?session_id={id}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let mut owners: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| Some(t["name"].as_str()?.split("__").next()?.to_string()))
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

/// `names` of server-everything in the config, switched on.
fn configure(s: &Server, peers: &Peers, names: &[&str]) {
    for name in names {
        let config = everything_stdio_config(peers, name);
        let r = s.post("/config/extensions", json!({"name": name, "enabled": true, "config": config}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn an_extension_whose_secret_is_not_stored_is_refused_with_the_same_words() {
    let peers = require_peers!();
    let home = TempDir::new("fe-secret");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts::default());
    let id = start_session(&s, Path::new(&cwd), Some(vec![]));
    let mut needy = everything_stdio_config(peers, "needy");
    needy["env_keys"] = json!(["FE_NOTES_TOKEN"]);
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": needy}));
    assert_eq!(r.status, 400, "{}", r.text());
    let said = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        said.starts_with("Failed to add extension: secret(s) FE_NOTES_TOKEN not stored")
            && said.contains("/config/upsert"),
        "it says what to store and how: {said}"
    );
    // The same extension, as Goose Desktop 1.41+ adds it over ACP.
    let mut a = Acp::start(&s.home);
    let (sid, _) = a.new_session(&cwd);
    let server = json!({"name": "needy", "command": needy["cmd"], "args": needy["args"], "env": []});
    let goose = json!({"type": "mcp", "name": "needy", "server": server, "envKeys": ["FE_NOTES_TOKEN"]});
    let e = a.call("_goose/unstable/session/extensions/add", json!({"sessionId": sid, "extension": goose}));
    assert_eq!(e["error"]["code"], -32602, "a mistake of the client's: {e}");
    assert_eq!(e["error"]["message"], said.as_str(), "the same words on both front ends");
    // Neither kept it in the session's set.
    assert_eq!(stored_over_http(&s, &id), Vec::<String>::new());
    assert_eq!(a.stored(&sid), Vec::<String>::new());
    // Both front ends refuse it for a session that is not running alike too.
    let r =
        s.post("/agent/add_extension", json!({"session_id": "nope", "config": everything_stdio_config(peers, "x")}));
    let e = a.call(
        "_goose/unstable/session/extensions/add",
        json!({"sessionId": "nope", "extension": {"type": "mcp", "name": "x", "server": server}}),
    );
    assert_eq!(r.status, 424, "{}", r.text());
    assert_eq!(e["error"]["code"], -32002, "{e}");
}

#[test]
fn an_extension_removed_on_one_front_end_stays_removed_when_the_other_opens_the_session() {
    let peers = require_peers!();
    let home = TempDir::new("fe-remove");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts::default());
    configure(&s, peers, &["alpha", "beta"]);
    // Removed over HTTP, opened in an editor.
    let id = start_session(&s, Path::new(&cwd), None);
    let r = s.post("/agent/remove_extension", json!({"session_id": id, "name": "beta"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(tool_owners(&s, &id), strings(&["alpha"]));
    let mut a = Acp::start(&s.home);
    assert_eq!(a.load(&id, &cwd), strings(&["alpha"]), "ACP starts the set as the person left it");
    assert_eq!(a.stored(&id), strings(&["alpha"]));
    // Removed in an editor, opened over HTTP.
    let (sid, first) = a.new_session(&cwd);
    assert_eq!(first, strings(&["alpha", "beta"]));
    a.ok("_goose/unstable/session/extensions/remove", json!({"sessionId": sid, "name": "alpha"}));
    assert_eq!(stored_over_http(&s, &sid), strings(&["beta"]));
    assert_eq!(resume(&s, &sid), strings(&["beta"]), "HTTP starts the set as the person left it");
    assert_eq!(tool_owners(&s, &sid), strings(&["beta"]));
    // Removing from a session that is not running: the same refusal.
    let r = s.post("/agent/remove_extension", json!({"session_id": "nope", "name": "alpha"}));
    let e = a.call("_goose/unstable/session/extensions/remove", json!({"sessionId": "nope", "name": "alpha"}));
    assert_eq!((r.status, e["error"]["code"].clone()), (424, json!(-32002)), "{} / {e}", r.text());
}

#[test]
fn a_session_deleted_on_one_front_end_is_gone_on_the_other() {
    let _peers = require_peers!();
    let home = TempDir::new("fe-delete");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts::default());
    let mut a = Acp::start(&s.home);
    let from_http = start_session(&s, Path::new(&cwd), Some(vec![]));
    let (from_acp, _) = a.new_session(&cwd);
    a.ok("session/delete", json!({"sessionId": from_http}));
    assert_eq!(s.get(&format!("/sessions/{from_http}")).status, 404);
    let r = s.delete(&format!("/sessions/{from_acp}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let e = a.call("session/load", json!({"sessionId": from_acp, "cwd": cwd, "mcpServers": []}));
    assert_eq!(e["error"]["code"], -32002, "{e}");
    let listed = a.ok("session/list", json!({}));
    assert_eq!(listed["sessions"], json!([]), "neither is listed");
    // Deleting what is not there: the same error, in the same words.
    let r = s.delete("/sessions/nope");
    let e = a.call("session/delete", json!({"sessionId": "nope"}));
    assert_eq!(r.status, 404);
    assert_eq!(e["error"]["code"], -32002, "{e}");
    let (http_said, acp_said) = (r.json()["message"].as_str().unwrap().to_string(), e["error"]["message"].to_string());
    assert!(
        http_said.contains("Session nope not found") && acp_said.contains("Session nope not found"),
        "{http_said} / {acp_said}"
    );
}

#[test]
fn an_extension_deleted_from_or_switched_off_in_the_config_is_not_started_by_resume_or_load() {
    let peers = require_peers!();
    let home = TempDir::new("fe-consent");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts::default());
    configure(&s, peers, &["alpha", "beta"]);
    let id = start_session(&s, Path::new(&cwd), None);
    // One added to this session alone: the person's choice for it, kept.
    let r =
        s.post("/agent/add_extension", json!({"session_id": id, "config": everything_stdio_config(peers, "gamma")}));
    assert_eq!(r.status, 200, "{}", r.text());
    let (sid, first) = Acp::start(&s.home).new_session(&cwd);
    assert_eq!(first, strings(&["alpha", "beta"]));
    // The person takes back alpha and switches beta off, in the config.
    assert_eq!(s.delete("/config/extensions/alpha").status, 200);
    let beta = everything_stdio_config(peers, "beta");
    let r = s.post("/config/extensions", json!({"name": "beta", "enabled": false, "config": beta}));
    assert_eq!(r.status, 200, "{}", r.text());
    // A later process opens the stored sessions.
    let home = s.kill();
    let s = Server::start_in(home, ServerOpts::default());
    assert_eq!(resume(&s, &id), strings(&["gamma"]), "HTTP resume");
    assert_eq!(tool_owners(&s, &id), strings(&["gamma"]));
    let r = s.post("/agent/restart", json!({"session_id": id}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(started(&r.json()["extension_results"]), strings(&["gamma"]), "HTTP restart");
    assert_eq!(resume(&s, &sid), Vec::<String>::new(), "HTTP resume of the editor's session");
    let mut a = Acp::start(&s.home);
    assert_eq!(a.load(&id, &cwd), strings(&["gamma"]), "ACP load");
    assert_eq!(a.load(&sid, &cwd), Vec::<String>::new(), "ACP load of its own session");
    // The set as the person left it is kept: switched on again, beta starts again.
    let r = s.post("/config/extensions", json!({"name": "beta", "enabled": true, "config": beta}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(a.load(&sid, &cwd), strings(&["beta"]));
    assert_eq!(a.stored(&id), strings(&["alpha", "beta", "gamma"]));
}

#[test]
fn always_allow_given_over_http_holds_when_the_editor_runs_the_next_turn() {
    use crate::fake_llm::{text_turn, tool_turn, FakeLlm};
    use crate::reply::{user_text, ReplyStream};
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        tool_turn("ask1", "everything__echo", "{\"message\":\"from http\"}"),
        text_turn("http done"),
        tool_turn("ask2", "everything__echo", "{\"message\":\"from acp\"}"),
        text_turn("acp done"),
    ]);
    let home = TempDir::new("fe-always");
    let cwd = work_dir(&home);
    let mut env = llm.env("gpt-4o");
    env.push(("GOOSE_MODE".into(), "approve".into()));
    let s = Server::start_in(home, ServerOpts { env: env.clone(), ..Default::default() });
    let id = start_session(&s, Path::new(&cwd), Some(vec![everything_stdio_config(peers, "everything")]));
    assert_eq!(resume(&s, &id), strings(&["everything"]));
    let mut stream = ReplyStream::open(&s, &id, user_text("echo, with permission"));
    let ask = stream.until(|e| e.to_string().contains("toolConfirmation"));
    let items = ask["message"]["content"].as_array().unwrap();
    let request = items.iter().find(|c| c["type"] == "actionRequired").unwrap()["data"]["id"].clone();
    let r =
        s.post("/action-required/tool-confirmation", json!({"id": request, "action": "always_allow", "sessionId": id}));
    assert_eq!((r.status, r.json()["status"].clone()), (200, json!("delivered")), "{}", r.text());
    let rest = stream.all();
    assert!(rest.iter().any(|e| e.to_string().contains("http done")), "{rest:?}");
    let home = s.kill();
    // The editor opens the session in another process: the tool runs without asking.
    let mut a = Acp::start_with(&home, &env);
    assert_eq!(a.load(&id, &cwd), strings(&["everything"]));
    let done = a.ok("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "again"}]}));
    assert_eq!(done["stopReason"], "end_turn");
    assert_eq!(a.asked, Vec::<Value>::new(), "no permission asked in the editor");
    let session: Value = {
        let s = Server::start_in(home, ServerOpts::default());
        s.get(&format!("/sessions/{id}")).json()
    };
    let results: Vec<&Value> = session["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|c| c["type"] == "toolResponse")
        .collect();
    assert_eq!(results.len(), 2, "both turns ran the tool: {session}");
    assert!(results[1].to_string().contains("Echo: from acp"), "{}", results[1]);
}

#[test]
fn a_turn_is_stopped_from_the_other_front_end() {
    use crate::llmock::Llmock;
    use crate::reply::user_text;
    use crate::support::wait_for;
    use crate::websocket::Client;
    let _peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    mock.script(json!([{"type": "slow_first_token", "seconds": 60}, {"type": "slow_first_token", "seconds": 60}]));
    let home = TempDir::new("fe-cancel");
    let cwd = work_dir(&home);
    let env = vec![
        ("GOOSE_PROVIDER".to_string(), "openai".to_string()),
        ("GOOSE_MODEL".to_string(), "mock-model".to_string()),
        ("OPENAI_HOST".to_string(), mock.openai_host()),
    ];
    let s = Server::start_in(home, ServerOpts { env, ..Default::default() });
    // An editor's prompt (ACP over /acp of this server), stopped over HTTP.
    let mut ws = Client::connect(&s);
    ws.initialize(1);
    let new = ws.call(2, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{new}")).to_string();
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "slowly"}]});
    ws.send_text(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}));
    // 404 until the prompt's turn is there to stop (its event stream made).
    let stopped = wait_for(Duration::from_secs(30), || {
        let r = s.post(&format!("/sessions/{sid}/cancel"), json!({"request_id": "the editor's"}));
        (r.status == 200).then_some(())
    });
    assert!(stopped.is_some(), "POST /sessions/{sid}/cancel was answered 200");
    let answer = loop {
        let m = ws.text();
        if m["id"] == 3 && m.get("method").is_none() {
            break m;
        }
    };
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // A turn started over HTTP (the session API), stopped by the editor's session/cancel.
    let reply = |request_id: &str| {
        s.post(
            &format!("/sessions/{sid}/reply"),
            json!({"request_id": request_id, "user_message": user_text("slowly")}),
        )
    };
    let r = reply("0196b3f2-7c1a-7d2e-9f00-0123456789a1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(reply("0196b3f2-7c1a-7d2e-9f00-0123456789a2").status, 400, "busy while it runs");
    ws.send_text(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}));
    let freed = wait_for(Duration::from_secs(10), || {
        let r = reply("0196b3f2-7c1a-7d2e-9f00-0123456789a3");
        (r.status == 200).then_some(())
    });
    assert!(freed.is_some(), "the editor's cancel stopped the HTTP turn and freed the session");
}

/// Writes a stored session `id` in `cwd` whose messages say `texts`, alternately the person's
/// and the model's, created one second apart from `t0`.
fn write_session(home: &TempDir, id: &str, cwd: &str, t0: i64, texts: &[&str]) {
    use std::os::unix::fs::MetadataExt;
    let dir = home.join("state").join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let mut lines = String::new();
    for (i, t) in texts.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let m = json!({"id": format!("{id}-{i}"), "role": role, "created": t0 + i as i64, "content": [{"type": "text", "text": t}], "metadata": {"userVisible": true, "agentVisible": true}});
        lines.push_str(&format!("{m}\n"));
    }
    let file = dir.join(format!("{id}.jsonl"));
    std::fs::write(&file, lines).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    let session = json!({"id": id, "name": format!("session {id}"), "working_dir": cwd, "created_at": "2026-11-28T10:00:00Z",
        "updated_at": format!("2026-11-28T10:00:0{}Z", id.len() % 10), "extension_data": {}, "message_count": texts.len(), "session_type": "user",
        "gosling_conversation_file": {"bytes": meta.len(), "ino": meta.ino()}});
    std::fs::write(dir.join(format!("{id}.meta.json")), session.to_string()).unwrap();
}

/// The texts of a session's conversation as `GET /sessions/{id}` gives it.
fn texts_over_http(s: &Server, id: &str) -> Vec<String> {
    let r = s.get(&format!("/sessions/{id}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let c = r.json()["conversation"].clone();
    c.as_array().unwrap().iter().map(|m| m["content"][0]["text"].as_str().unwrap().to_string()).collect()
}

/// The web page's history features on the HTTP API — search over what was said, "fork from
/// here", "edit and resend" (truncate) — and ACP's give one outcome and the same refusals:
/// both are the core's operations (`Host::search_sessions`, `agent::history`).
#[test]
fn search_fork_and_truncate_give_one_outcome_over_http_and_acp() {
    let _peers = require_peers!();
    let home = TempDir::new("fe-history");
    let cwd = work_dir(&home);
    let t0 = 1_763_900_000;
    write_session(&home, "20261128_1", &cwd, t0, &["hello", "Where the Zebra sleeps", "and then?", "it wakes up"]);
    write_session(&home, "20261128_2", &cwd, t0, &["nothing of note", "indeed"]);
    let s = Server::start_in(home, ServerOpts::default());
    let mut a = Acp::start(&s.home);
    // Search: by what was said, any case; not the JSON around it.
    for (q, want) in
        [("zEBRA", vec!["20261128_1"]), ("INDEED", vec!["20261128_2"]), ("assistant", vec![]), ("giraffe", vec![])]
    {
        let r = s.get(&format!("/sessions/search?query={q}&limit=50"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("X-Search-Complete"), Some("true"));
        let over_http: Vec<String> =
            r.json().as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
        let listed = a.ok("session/list", json!({"_meta": {"query": q}}));
        let over_acp: Vec<String> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(over_http, want, "HTTP search for {q:?}");
        assert_eq!(over_acp, want, "ACP search for {q:?}");
    }
    // Fork from the third message: the first two, in a new session, either way.
    let r = s.post("/sessions/20261128_1/fork", json!({"before": t0 + 2}));
    assert_eq!(r.status, 200, "{}", r.text());
    let by_http = r.json()["session"]["id"].as_str().unwrap().to_string();
    let forked = a.ok(
        "session/fork",
        json!({"sessionId": "20261128_1", "cwd": cwd, "mcpServers": [], "_meta": {"conversationBefore": t0 + 2}}),
    );
    let by_acp = forked["sessionId"].as_str().unwrap().to_string();
    let first_two = vec!["hello".to_string(), "Where the Zebra sleeps".to_string()];
    assert_eq!(texts_over_http(&s, &by_http), first_two);
    assert_eq!(texts_over_http(&s, &by_acp), first_two);
    assert_eq!(texts_over_http(&s, "20261128_1").len(), 4, "the source is left as it was");
    // Edit and resend: cut from the second message on, either way.
    let r = s.post(&format!("/sessions/{by_http}/truncate"), json!({"from": t0 + 1}));
    assert_eq!((r.status, r.json()["kept"].clone()), (200, json!(1)), "{}", r.text());
    a.ok("_goose/unstable/session/conversation/truncate", json!({"sessionId": by_acp, "truncateFrom": t0 + 1}));
    assert_eq!(texts_over_http(&s, &by_http), vec!["hello".to_string()]);
    assert_eq!(texts_over_http(&s, &by_acp), vec!["hello".to_string()]);
    // The same refusals, in the same words.
    let r = s.post("/sessions/nope/truncate", json!({"from": t0}));
    let e = a.call("_goose/unstable/session/conversation/truncate", json!({"sessionId": "nope", "truncateFrom": t0}));
    assert_eq!((r.status, e["error"]["code"].clone()), (404, json!(-32002)), "{} / {e}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("Session nope not found"), "{}", r.text());
    assert!(e["error"]["message"].as_str().unwrap().contains("Session nope not found"), "{e}");
    let r = s.post("/sessions/nope/fork", json!({}));
    assert_eq!(r.status, 404, "{}", r.text());
    let r = s.post("/sessions/20261128_1/steer", json!({"run_id": "run_0", "text": "x"}));
    let e = a.call(
        "_goose/unstable/session/steer",
        json!({"sessionId": "20261128_1", "expectedRunId": "run_0", "prompt": [{"type": "text", "text": "x"}]}),
    );
    assert_eq!(r.status, 409, "{}", r.text());
    for said in [r.json()["message"].to_string(), e["error"]["message"].to_string()] {
        assert!(said.contains("no active run to steer") && said.contains("new prompt"), "{said}");
    }
    // Bad input over HTTP says what to send (422: JSON of the wrong shape, as goose answers).
    for (path, body, status, words) in [
        ("/sessions/20261128_1/truncate", json!({}), 422, "from"),
        ("/sessions/20261128_1/truncate", json!({"from": "yesterday"}), 422, "from"),
        ("/sessions/20261128_1/fork", json!({"before": "x"}), 422, "before"),
        ("/sessions/20261128_1/fork", json!({"cwd": "/"}), 422, "cwd"),
        ("/sessions/20261128_1/steer", json!({"run_id": "run_0", "text": "  "}), 400, "`text` is empty"),
        ("/sessions/20261128_1/steer", json!({"text": "x"}), 422, "run_id"),
    ] {
        let r = s.post(path, body.clone());
        assert_eq!(r.status, status, "{path} {body}: {}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains(words), "{path} {body}: {}", r.text());
    }
}

/// Steering over HTTP: the turn started by `POST /sessions/{id}/reply` is named by its
/// `X-Gosling-Run-Id`; a message steered into it is added before the model's next call, and
/// the model answers it in the same turn (`Host::steer`, as ACP's steer).
#[test]
fn a_message_steered_over_http_is_answered_in_the_running_turn() {
    use crate::fake_llm::{oa_finish, oa_text, text_turn, FakeLlm, Reply, Step, OA_DONE};
    use crate::reply::user_text;
    use crate::support::wait_for;
    let _peers = require_peers!();
    // The first answer waits a little after the model is asked, so the steer comes while it runs.
    let slow = Reply::sse(&[oa_text("Working on it.")])
        .then(Step::Sleep(Duration::from_secs(3)))
        .then(Step::Send(oa_finish("stop").into_bytes()))
        .then(Step::Send(OA_DONE.to_string().into_bytes()));
    let llm = FakeLlm::start(vec![slow, text_turn("Bye then.")]);
    let home = TempDir::new("fe-steer");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts { env: llm.env("gpt-4o"), ..Default::default() });
    let sid = start_session(&s, Path::new(&cwd), Some(vec![]));
    let r = s.post(
        &format!("/sessions/{sid}/reply"),
        json!({"request_id": "0196b3f2-7c1a-7d2e-9f00-0123456789b1", "user_message": user_text("start")}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let run = r.header("X-Gosling-Run-Id").expect("the reply names its run").to_string();
    assert!(
        wait_for(Duration::from_secs(30), || (!llm.requests().is_empty()).then_some(())).is_some(),
        "the model was asked"
    );
    let r = s.post(&format!("/sessions/{sid}/steer"), json!({"run_id": run, "text": "and say bye"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["run_id"], json!(run));
    let done = wait_for(Duration::from_secs(60), || {
        let texts = texts_over_http(&s, &sid);
        (texts.last().map(String::as_str) == Some("Bye then.")).then_some(texts)
    });
    assert_eq!(
        done.expect("the steered message was answered in the same turn"),
        vec!["start", "Working on it.", "and say bye", "Bye then."]
    );
    let second = llm.requests()[1].body.to_string();
    assert!(second.contains("and say bye"), "the model's second call carries the steered message");
    let r = s.post(&format!("/sessions/{sid}/steer"), json!({"run_id": run, "text": "too late"}));
    assert_eq!(r.status, 409, "the run has ended: {}", r.text());
}
