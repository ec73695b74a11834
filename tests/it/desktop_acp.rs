//! Goose Desktop 1.41+'s ACP sequence against the real binary, every answer checked against
//! the schemas Desktop validates with: goose's own methods against goose 1.45's published ACP
//! schema (`tests/contract/goose-acp-schema-1.45.json`), the standard ones against the ACP v1
//! schema of the pinned ACP SDK (scripts/peers). The checker is the pinned Python `jsonschema`
//! (`tests/contract/validate.py`).
//!
//! Desktop's sequence runs over `wss://…/acp` on `gosling serve` started as Desktop starts it
//! (`connect_wss`); the other tests use `gosling acp` on stdio (`connect`), the same agent.

use crate::fake_llm::{oa_finish, oa_text, oa_tool, oa_usage, FakeLlm, Reply, OA_DONE};
use crate::require_peers;
use crate::support::{bin, manifest_dir, reap_within, wait_for, work_dir, Peers, TempDir};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// One ACP connection: JSON-RPC messages out and in.
pub(crate) trait Wire {
    fn send(&mut self, m: &Value);
    fn recv(&mut self, timeout: Duration) -> Option<Value>;
}

struct StdioWire {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
}

impl Wire for StdioWire {
    fn send(&mut self, m: &Value) {
        let stdin = self.stdin.as_mut().expect("open");
        writeln!(stdin, "{m}").and_then(|_| stdin.flush()).expect("write to gosling acp");
    }
    fn recv(&mut self, timeout: Duration) -> Option<Value> {
        self.rx.recv_timeout(timeout).ok()
    }
}

impl Drop for StdioWire {
    fn drop(&mut self) {
        // `gosling acp` ends at the end of its input.
        drop(self.stdin.take());
        reap_within(&mut self.child, Duration::from_secs(10));
    }
}

/// The one transport function: a new ACP connection to gosling over `env`'s dirs and model.
fn connect(env: &[(String, String)]) -> Box<dyn Wire> {
    let mut cmd = Command::new(bin());
    cmd.arg("acp").env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<Value>(&line) {
                Ok(v) => {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                Err(e) => panic!("gosling acp wrote a line that is not JSON ({e}): {line}"),
            }
        }
    });
    let stdin = child.stdin.take();
    Box::new(StdioWire { child, stdin, rx })
}

/// One ACP connection over `wss://…/acp?token=…` with `Origin: file://`, pinned to the
/// fingerprint `gosling serve` printed: how Desktop 1.41+ talks to it.
struct WssWire(crate::websocket::Client);

impl Wire for WssWire {
    fn send(&mut self, m: &Value) {
        self.0.send_text(m);
    }
    /// The next message; the socket's read timeout (30 s) bounds the wait, and a closed socket
    /// fails the test with the close code.
    fn recv(&mut self, _timeout: Duration) -> Option<Value> {
        Some(self.0.text())
    }
}

fn connect_wss(serve: &crate::serve::Serve) -> Box<dyn Wire> {
    Box::new(WssWire(serve.acp()))
}

/// Desktop's side: requests with ids, the permission answers it will give (by option kind),
/// and everything it received, for the schema check.
struct Desktop {
    wire: Box<dyn Wire>,
    next: i64,
    answers: VecDeque<&'static str>,
    /// (schema, definition, value) of everything to check.
    checks: Vec<(&'static str, String, Value)>,
    /// Notifications and requests from gosling, in order.
    seen: Vec<Value>,
}

/// goose's response type of each of its methods (goose-acp-meta-1.45.json).
fn goose_response_type(method: &str) -> String {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(manifest_dir().join("tests/contract/goose-acp-meta-1.45.json")).unwrap())
            .unwrap();
    meta["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == method)
        .and_then(|m| m["responseType"].as_str())
        .unwrap_or_else(|| panic!("goose 1.45 has no method {method}"))
        .to_string()
}

/// The ACP v1 response type of a standard method.
fn acp_response_type(method: &str) -> &'static str {
    match method {
        "initialize" => "InitializeResponse",
        "session/new" => "NewSessionResponse",
        "session/load" => "LoadSessionResponse",
        "session/list" => "ListSessionsResponse",
        "session/prompt" => "PromptResponse",
        "session/set_config_option" => "SetSessionConfigOptionResponse",
        "session/delete" => "DeleteSessionResponse",
        "session/close" => "CloseSessionResponse",
        other => panic!("no ACP response type for {other}"),
    }
}

impl Desktop {
    fn new(env: &[(String, String)]) -> Desktop {
        Desktop::over(connect(env))
    }

    fn over(wire: Box<dyn Wire>) -> Desktop {
        Desktop { wire, next: 0, answers: VecDeque::new(), checks: Vec::new(), seen: Vec::new() }
    }

    /// Handles one message from gosling that is not the answer awaited.
    fn take(&mut self, m: Value) {
        match (m.get("method").and_then(Value::as_str), m.get("id")) {
            (Some("session/request_permission"), Some(id)) => {
                self.checks.push(("acp", "RequestPermissionRequest".into(), m["params"].clone()));
                let id = id.clone();
                self.seen.push(m.clone());
                if let Some(kind) = self.answers.pop_front() {
                    let option = m["params"]["options"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|o| o["kind"] == kind)
                        .unwrap_or_else(|| panic!("no option of kind {kind}: {m}"));
                    let answer = json!({"jsonrpc":"2.0","id":id,"result":{"outcome":{"outcome":"selected","optionId":option["optionId"]}}});
                    self.wire.send(&answer);
                }
            }
            (Some("session/update"), None) => {
                self.checks.push(("acp", "SessionNotification".into(), m["params"].clone()));
                self.seen.push(m);
            }
            (Some("_goose/unstable/session/update"), None) => {
                self.checks.push(("goose", "GooseSessionNotification_unstable".into(), m["params"].clone()));
                self.seen.push(m);
            }
            _ => panic!("Desktop did not expect {m}"),
        }
    }

    fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next;
        self.next += 1;
        self.wire.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        id
    }

    /// The error answered to `method` (which must fail).
    fn call_err(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let m = self.message(id, method);
        m.get("error").cloned().unwrap_or_else(|| panic!("{method} should fail: {m}"))
    }

    /// The answer message to request `id` (within 60 s), taking everything before it.
    fn message(&mut self, id: i64, method: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.wire.recv(left).unwrap_or_else(|| panic!("no answer to {method} within 60 s"));
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return m;
            }
            self.take(m);
        }
    }

    /// The result answered to request `id` (within 60 s), taking everything before it.
    fn answer(&mut self, id: i64, method: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.wire.recv(left).unwrap_or_else(|| panic!("no answer to {method} within 60 s"));
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                let result = m.get("result").cloned().unwrap_or_else(|| panic!("{method} failed: {m}"));
                let (schema, def) = if method.starts_with("_goose/") {
                    ("goose", goose_response_type(method))
                } else {
                    ("acp", acp_response_type(method).to_string())
                };
                self.checks.push((schema, def, result.clone()));
                return result;
            }
            self.take(m);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.answer(id, method)
    }

    /// A new session in `cwd` with the `enabled` extensions (Desktop's `enabledExtensions`): its id.
    fn new_session(&mut self, cwd: &str, enabled: &[Value]) -> String {
        let new = self.call("session/new", json!({"cwd":cwd,"mcpServers":[],"_meta":{"enabledExtensions":enabled}}));
        new["sessionId"].as_str().unwrap_or_else(|| panic!("no sessionId: {new}")).to_string()
    }

    /// (tool call id, status) of every terminal `tool_call_update` (completed or failed), in order.
    fn finals(&self) -> Vec<(&str, &str)> {
        self.updates("tool_call_update")
            .into_iter()
            .filter(|u| matches!(u["status"].as_str(), Some("completed" | "failed")))
            .map(|u| (u["toolCallId"].as_str().unwrap(), u["status"].as_str().unwrap()))
            .collect()
    }

    fn updates(&self, kind: &str) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind)
            .map(|m| &m["params"]["update"])
            .collect()
    }
}

/// The environment of a `gosling acp` (or `serve`) over `home`'s dirs, its sessions named
/// from their first message, plus `more`.
fn home_env(home: &TempDir, more: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("GOSLING_CONFIG_DIR", home.join("config").display().to_string()),
        ("GOSLING_STATE_DIR", home.join("state").display().to_string()),
        ("GOSLING_SESSION_TITLES", "first_message".to_string()),
        ("HOME", home.path().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    env.extend(more);
    env
}

/// gpt-4o at the fake `llm`, tool calls in goose's `mode` (`approve` asks before each one).
fn model_env(llm: &FakeLlm, mode: &str) -> Vec<(String, String)> {
    let mut env = llm.env("gpt-4o");
    env.push(("GOOSE_MODE".into(), mode.into()));
    env
}

/// server-everything over stdio, as Desktop passes an enabled extension.
fn everything(peers: &Peers) -> Value {
    json!({"type":"mcp","server":{"name":"everything","command":peers.node(),"args":[peers.get("MCP_PEER_EVERYTHING"),"stdio"],"env":[]},"envKeys":[]})
}

/// Every collected value against its schema definition; panics listing the problems.
fn check_schemas(peers: &Peers, checks: &[(&'static str, String, Value)]) {
    let acp = format!("{}/schema/v1/schema.json", peers.get("ACP_SDK_DIR"));
    let goose = manifest_dir().join("tests/contract/goose-acp-schema-1.45.json");
    let req = json!({
        "schemas": {"acp": acp, "goose": goose},
        "items": checks.iter().map(|(s, d, v)| json!([s, d, v])).collect::<Vec<_>>(),
    });
    let mut child = Command::new(peers.python())
        .arg(manifest_dir().join("tests/contract/validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(req.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "validate.py failed");
    let problems: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(problems.is_empty(), "{} answers do not fit the schema:\n{}", problems.len(), problems.join("\n"));
}

/// A model turn that calls server-everything's echo.
fn echo_call(id: &str) -> Reply {
    Reply::sse(&[
        oa_tool(0, Some((id, "everything__echo")), r#"{"message":"#),
        oa_tool(0, None, r#""hi"}"#),
        oa_finish("tool_calls"),
        oa_usage(100, 10),
        OA_DONE.to_string(),
    ])
}

fn text(t: &str) -> Reply {
    Reply::sse(&[oa_text(t), oa_finish("stop"), oa_usage(120, 5), OA_DONE.to_string()])
}

#[test]
fn desktop_sequence_fits_goose_and_acp_schemas() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![
        echo_call("call_1"),
        text("echoed it"),
        echo_call("call_2"),
        text("not run"),
        echo_call("call_3"),
    ]);
    let home = TempDir::new("desktop-acp");
    let cwd = work_dir(&home);
    let env = home_env(&home, model_env(&llm, "approve"));

    // Started as Desktop 1.41+ starts its bundled goose: `serve --tls --platform desktop --host
    // 127.0.0.1 --port P`, the secret in the environment; stdout read for the fingerprint,
    // `/status` polled pinned to it; then `wss://…/acp?token=…` with `Origin: file://`.
    let serve = crate::serve::start_as_desktop_with(&home, &[], &env);

    let initialize = json!({"protocolVersion":1,"_meta":{"goose/useLoginShellPath":true},
        "clientCapabilities":{"elicitation":{"form":{}},"_meta":{"goose":{"mcpHostCapabilities":{"extensions":{}},"customNotifications":true,"recipeParameterRequests":true}}},
        "clientInfo":{"name":"goose-app","version":"1.45.0"}});
    let mut d = Desktop::over(connect_wss(&serve));
    let init = d.call("initialize", initialize.clone());
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["sessionCapabilities"], json!({"list":{},"close":{},"delete":{},"resume":{}}));
    assert!(!init["authMethods"].as_array().unwrap().is_empty());

    let all = d.call("_goose/unstable/config/read-all", json!({}));
    assert_eq!(all["config"]["GOOSE_PROVIDER"], "openai", "{all}");
    let providers = d.call("_goose/unstable/providers/list", json!({}));
    let ids: Vec<&str> =
        providers["entries"].as_array().unwrap().iter().map(|e| e["providerId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["openai", "anthropic", "ollama"]);
    assert_eq!(providers["entries"][0]["configured"], true);
    // Both Desktops' required keys: 1.41–1.45's `category`, 1.5x's `available`,
    // `visibleInSetup` and `deprecated`.
    for e in providers["entries"].as_array().unwrap() {
        assert_eq!(e["available"], e["configured"], "{e}");
        assert_eq!(
            (&e["visibleInSetup"], &e["deprecated"], &e["category"]),
            (&json!(true), &json!(false), &json!("model"))
        );
    }
    // Desktop syncs its bundled extensions at start, then lists them.
    d.call(
        "_goose/unstable/config/extensions/add",
        json!({"extension":{"type":"builtin","name":"memory","description":"notes"},"enabled":false}),
    );
    let exts = d.call("_goose/unstable/config/extensions/list", json!({}));
    assert_eq!(
        exts["extensions"][0],
        json!({"extension":{"type":"builtin","name":"memory","description":"notes","display_name":null,"timeout":null,"bundled":null},"enabled":false,"configKey":"memory"})
    );
    let defaults = d.call("_goose/unstable/defaults/read", json!({}));
    assert_eq!(defaults, json!({"providerId":"openai","modelId":"gpt-4o"}));
    let list = d.call("session/list", json!({"_meta":{"types":["user","scheduled"]}}));
    assert_eq!(list["sessions"], json!([]));

    let new = d.call(
        "session/new",
        json!({"cwd":cwd,"mcpServers":[],"_meta":{"client":"goose-desktop","enabledExtensions":[everything(peers)]}}),
    );
    let sid = new["sessionId"].as_str().unwrap().to_string();
    // Desktop's enabled extension, and serve's default `--with-builtin developer`.
    let mut results = new["_meta"]["extensionResults"].as_array().unwrap().clone();
    results.sort_by_key(|r| r["name"].as_str().unwrap_or_default().to_string());
    assert_eq!(
        results,
        [json!({"name":"developer","success":true}), json!({"name":"everything","success":true})],
        "{new}"
    );
    assert_eq!(new["_meta"]["workingDir"], cwd);
    let info = d.call("_goose/unstable/session/info", json!({"sessionId":sid}));
    assert_eq!(info["session"]["cwd"], cwd);
    assert_eq!(info["session"]["_meta"]["sessionType"], "user");
    let set = d.call("session/set_config_option", json!({"sessionId":sid,"configId":"model","value":"gpt-4o-mini"}));
    let model = set["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "model").unwrap();
    assert_eq!(model["currentValue"], "gpt-4o-mini");
    assert_eq!(d.updates("config_option_update").len(), 1, "config_option_update before the answer");

    // A prompt whose tool call asks: allowed once; the next: rejected once.
    d.answers.extend(["allow_once", "reject_once"]);
    let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"echo hi"}]}));
    assert_eq!(r["stopReason"], "end_turn");
    let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"again"}]}));
    assert_eq!(r["stopReason"], "end_turn");
    let titles: Vec<&str> = d.updates("session_info_update").iter().filter_map(|u| u["title"].as_str()).collect();
    assert_eq!(titles, ["echo hi"], "the first message names the session, once");
    let calls = d.updates("tool_call");
    assert_eq!(
        calls[0]["_meta"]["goose"]["toolCall"],
        json!({"toolName":"everything__echo","extensionName":"everything"})
    );
    assert_eq!(d.finals(), [("call_1", "completed"), ("call_2", "failed")]);
    // Every chunk of one message keeps that message's id.
    let chunks = d.updates("agent_message_chunk");
    assert!(!chunks.is_empty());
    for c in &chunks {
        assert_eq!(c["messageId"], c["_meta"]["goose"]["messageId"], "{c}");
        assert!(c["messageId"].as_str().is_some_and(|m| !m.is_empty()), "{c}");
    }
    assert!(d.seen.iter().any(|m| m["method"] == "_goose/unstable/session/update"), "the usage update");

    // Cancel while the tool call waits for the person: `cancelled` (the question would wait
    // 30 minutes: the answer within this wait's deadline is the cancel's), and the call closed.
    let id = d.send_request("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"once more"}]}));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d
        .seen
        .iter()
        .any(|m| m["method"] == "session/request_permission" && m["params"]["toolCall"]["toolCallId"] == "call_3")
    {
        let m = d.wire.recv(deadline.saturating_duration_since(Instant::now())).expect("the permission question");
        d.take(m);
    }
    d.wire.send(&json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":sid}}));
    let r = d.answer(id, "session/prompt");
    assert_eq!(r["stopReason"], "cancelled");
    assert!(
        d.updates("tool_call_update").iter().any(|u| u["toolCallId"] == "call_3" && u["status"] == "failed"),
        "the cancelled call gets a terminal update"
    );
    let mut checks = std::mem::take(&mut d.checks);
    drop(d);

    // Reconnect: a new WebSocket to the same server, initialize, then the session is loaded
    // with its replay.
    let mut d = Desktop::over(connect_wss(&serve));
    d.call("initialize", initialize);
    let info = d.call("_goose/unstable/session/info", json!({"sessionId":sid}));
    assert!(info["session"]["_meta"]["messageCount"].as_u64().unwrap() >= 6, "{info}");
    let list = d.call("session/list", json!({"_meta":{"types":["user","scheduled"]}}));
    assert_eq!(list["sessions"][0]["sessionId"], sid);
    let loaded = d.call("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    assert_eq!(loaded["_meta"]["workingDir"], cwd);
    let replayed: Vec<&str> =
        d.updates("user_message_chunk").iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert_eq!(replayed, ["echo hi", "again", "once more"]);
    assert!(d.updates("tool_call_update").iter().any(|u| u["toolCallId"] == "call_1" && u["status"] == "completed"));
    d.call("session/delete", json!({"sessionId":sid}));
    let list = d.call("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
    checks.append(&mut d.checks);
    check_schemas(peers, &checks);
}

/// Issue 26, one session model: "always allow" answered over ACP holds when the HTTP API
/// runs the next turn of the session (another process on the same dirs, later), and that
/// HTTP turn is in the replay an ACP client gets when it loads the session.
#[test]
fn always_allow_and_turns_cross_front_ends() {
    use crate::reply::{user_text, ReplyStream};
    use crate::support::{Server, ServerOpts};
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![echo_call("call_a"), text("acp done"), echo_call("call_b"), text("http done")]);
    let home = TempDir::new("one-model");
    let cwd = work_dir(&home);
    let model = model_env(&llm, "approve");
    let env = home_env(&home, model.clone());

    // ACP: the tool is allowed "always".
    let mut d = Desktop::new(&env);
    d.call("initialize", json!({"protocolVersion":1}));
    let sid = d.new_session(&cwd, &[everything(peers)]);
    d.answers.push_back("allow_always");
    assert_eq!(
        d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"from acp"}]}))["stopReason"],
        "end_turn"
    );
    assert_eq!(d.seen.iter().filter(|m| m["method"] == "session/request_permission").count(), 1);
    drop(d);

    // HTTP, the same session: the same tool runs without asking.
    let s = Server::start_in(home, ServerOpts { env: model, ..Default::default() });
    let r = s.post("/agent/resume", json!({"session_id": sid, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    let events = ReplyStream::open(&s, &sid, user_text("from http")).all();
    let asked = events.iter().any(|e| e.to_string().contains("toolConfirmation"));
    assert!(!asked, "no confirmation asked: {events:?}");
    let responses: Vec<&Value> = events
        .iter()
        .flat_map(|e| e["message"]["content"].as_array().into_iter().flatten())
        .filter(|c| c["type"] == "toolResponse")
        .collect();
    assert_eq!(responses.len(), 1, "{events:?}");
    assert_eq!(responses[0]["toolResult"]["status"], "success", "the tool ran: {events:?}");
    let home = s.kill();

    // ACP again: loading the session replays the HTTP turn.
    let mut d = Desktop::new(&env);
    d.call("initialize", json!({"protocolVersion":1}));
    d.call("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    let users: Vec<&str> =
        d.updates("user_message_chunk").iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert_eq!(users, ["from acp", "from http"]);
    let agent: String = d.updates("agent_message_chunk").iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert!(agent.contains("acp done") && agent.contains("http done"), "{agent}");
    drop(home);
}

/// The message of an error, checked to name what to fix.
fn says(e: &Value, code: i64, words: &[&str]) {
    assert_eq!(e["code"], code, "{e}");
    let m = e["message"].as_str().unwrap_or("");
    for w in words {
        assert!(m.contains(w), "{w:?} in {m:?}");
    }
}

/// goose's settings, providers, extension and tool methods: what they store, what they show,
/// and each bad input refused with what to fix. Every answer is checked against the schemas.
#[test]
fn goose_methods_keep_settings_extensions_and_refuse_bad_input() {
    let peers = require_peers!();
    let home = TempDir::new("goose-methods");
    let cwd = work_dir(&home);
    let env = home_env(&home, Vec::new());
    let mut d = Desktop::new(&env);
    d.call("initialize", json!({"protocolVersion":1}));
    const BAD: i64 = -32602;

    // Settings: secrets are masked and never in read-all; `extensions` is not a setting.
    d.call(
        "_goose/unstable/config/upsert",
        json!({"key":"ANTHROPIC_API_KEY","value":"sk-ant-secret-1","isSecret":true}),
    );
    assert_eq!(
        d.call("_goose/unstable/config/read", json!({"key":"ANTHROPIC_API_KEY","isSecret":true}))["value"],
        "********"
    );
    d.call("_goose/unstable/config/upsert", json!({"key":"GOOSE_MODE","value":"approve"}));
    let all = d.call("_goose/unstable/config/read-all", json!({}));
    assert_eq!(all["config"]["GOOSE_MODE"], "approve");
    assert!(!all.to_string().contains("sk-ant-secret-1"), "{all}");
    says(
        &d.call_err("_goose/unstable/config/upsert", json!({"key":"extensions","value":{}})),
        BAD,
        &["extension calls"],
    );
    says(&d.call_err("_goose/unstable/config/read", json!({})), BAD, &["`key`"]);
    d.call("_goose/unstable/config/remove", json!({"key":"GOOSE_MODE"}));
    assert_eq!(d.call("_goose/unstable/config/read", json!({"key":"GOOSE_MODE"}))["value"], Value::Null);

    // Defaults and provider settings.
    assert_eq!(d.call("_goose/unstable/defaults/read", json!({})), json!({"providerId":null,"modelId":null}));
    says(
        &d.call_err("_goose/unstable/defaults/save", json!({"providerId":"bogus"})),
        BAD,
        &["bogus", "openai, anthropic or ollama"],
    );
    let saved = d.call("_goose/unstable/defaults/save", json!({"providerId":"anthropic"}));
    assert_eq!(saved, json!({"providerId":"anthropic","modelId":"claude-sonnet-4-5"}));
    let fields = d.call("_goose/unstable/providers/config/read", json!({"providerId":"anthropic"}));
    assert_eq!(
        fields["fields"][0],
        json!({"key":"ANTHROPIC_API_KEY","value":"********","isSet":true,"isSecret":true,"required":true})
    );
    says(
        &d.call_err(
            "_goose/unstable/providers/config/save",
            json!({"providerId":"ollama","fields":[{"key":"OPENAI_API_KEY","value":"x"}]}),
        ),
        BAD,
        &["not a setting of ollama", "OLLAMA_HOST"],
    );
    let r = d.call(
        "_goose/unstable/providers/config/save",
        json!({"providerId":"ollama","fields":[{"key":"OLLAMA_HOST","value":"http://127.0.0.1:9"}]}),
    );
    assert_eq!(r["status"], json!({"providerId":"ollama","isConfigured":true}));
    let r = d.call("_goose/unstable/providers/config/delete", json!({"providerId":"anthropic"}));
    assert_eq!(r["status"], json!({"providerId":"anthropic","isConfigured":false}));
    d.call("_goose/unstable/defaults/clear", json!({}));

    // The extension config: added under the trust policy, listed, switched, removed.
    let inline = json!({"type":"mcp","server":{"name":"inline","command":"python3","args":["-c","print(1)"],"env":[]},"envKeys":[]});
    says(
        &d.call_err("_goose/unstable/config/extensions/add", json!({"extension":inline,"enabled":true})),
        BAD,
        &["extension inline"],
    );
    says(
        &d.call_err(
            "_goose/unstable/config/extensions/add",
            json!({"extension":{"type":"mcp","server":{"type":"sse","name":"old","url":"http://x"}}}),
        ),
        BAD,
        &["not supported"],
    );
    let everything = everything(peers);
    d.call("_goose/unstable/config/extensions/add", json!({"extension":everything,"enabled":true}));
    d.call("_goose/unstable/config/extensions/set-enabled", json!({"configKey":"everything","enabled":false}));
    let list = d.call("_goose/unstable/config/extensions/list", json!({}));
    assert_eq!(list["extensions"][0]["enabled"], false);
    assert_eq!(list["extensions"][0]["extension"]["server"]["command"], peers.node());
    says(
        &d.call_err("_goose/unstable/config/extensions/set-enabled", json!({"configKey":"nope","enabled":true})),
        BAD,
        &["\"nope\""],
    );
    d.call("_goose/unstable/config/extensions/remove", json!({"configKey":"everything"}));
    assert_eq!(d.call("_goose/unstable/config/extensions/list", json!({}))["extensions"], json!([]));

    // A session whose chosen server cannot start is reported in extensionResults; the inline
    // one is refused by the policy like every other path.
    says(
        &d.call_err("session/new", json!({"cwd":cwd,"mcpServers":[],"_meta":{"enabledExtensions":[inline]}})),
        BAD,
        &["enabledExtensions[0]"],
    );
    let broken = json!({"type":"mcp","server":{"name":"broken","command":peers.node(),"args":[home.join("missing.js").display().to_string()],"env":[]},"envKeys":[]});
    let new =
        d.call("session/new", json!({"cwd":cwd,"mcpServers":[],"_meta":{"enabledExtensions":[broken, everything]}}));
    let results = new["_meta"]["extensionResults"].as_array().unwrap();
    assert_eq!(results[0]["name"], "broken");
    assert_eq!(results[0]["success"], false);
    assert!(results[0]["error"].as_str().is_some_and(|e| !e.is_empty()), "{new}");
    assert_eq!(results[1], json!({"name":"everything","success":true}));
    let sid = new["sessionId"].as_str().unwrap().to_string();

    // The session's extensions and tools.
    d.call(
        "_goose/unstable/session/extensions/add",
        json!({"sessionId":sid,"extension":{"type":"builtin","name":"memory"}}),
    );
    // One entry that Desktop 1.41–1.45 (a bare GooseExtension, checked against 1.45's schema
    // here) and 1.5x (`{extension, extensionKey}`) both accept.
    let keys = |d: &mut Desktop| -> Vec<String> {
        let list = d.call("_goose/unstable/session/extensions/list", json!({"sessionId":sid}));
        list["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e["extension"]["type"], e["type"], "{e}");
                e["extensionKey"].as_str().unwrap_or_else(|| panic!("no extensionKey: {e}")).to_string()
            })
            .collect()
    };
    let mut names = keys(&mut d);
    names.sort();
    assert_eq!(names, ["broken", "everything", "memory"]);
    says(
        &d.call_err("_goose/unstable/session/extensions/remove", json!({"sessionId":sid})),
        BAD,
        &["`extensionKey`", "`name`"],
    );
    // 1.5x removes by extensionKey, 1.45 by name.
    d.call("_goose/unstable/session/extensions/remove", json!({"sessionId":sid,"extensionKey":"memory"}));
    assert_eq!(keys(&mut d), ["broken", "everything"]);
    d.call(
        "_goose/unstable/session/extensions/add",
        json!({"sessionId":sid,"extension":{"type":"builtin","name":"memory"}}),
    );
    d.call("_goose/unstable/session/extensions/remove", json!({"sessionId":sid,"name":"memory"}));
    assert_eq!(keys(&mut d), ["broken", "everything"]);
    let tools = d.call("_goose/unstable/tools/list", json!({"sessionId":sid,"extensionName":"everything"}));
    let echo =
        tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == "everything__echo").expect("echo").clone();
    assert_eq!(echo["parameters"], json!(["message"]));
    assert!(tools["tools"].as_array().unwrap().iter().all(|t| t["name"].as_str().unwrap().starts_with("everything__")));
    says(
        &d.call_err(
            "_goose/unstable/tools/permissions/set",
            json!({"toolPermissions":[{"toolName":"everything__echo","permission":"sometimes"}]}),
        ),
        BAD,
        &["always_allow, ask_before or never_allow"],
    );
    d.call(
        "_goose/unstable/tools/permissions/set",
        json!({"toolPermissions":[{"toolName":"everything__echo","permission":"never_allow"}]}),
    );
    let tools = d.call("_goose/unstable/tools/list", json!({"sessionId":sid}));
    let echo = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == "everything__echo").unwrap().clone();
    assert_eq!(echo["permission"], "never_allow");

    // Preferences, rename, export, config options.
    d.call("_goose/unstable/preferences/save", json!({"values":[{"key":"gooseThinkingEffort","value":"high"}]}));
    let prefs = d.call("_goose/unstable/preferences/read", json!({"keys":["gooseThinkingEffort"]}));
    assert_eq!(prefs["values"], json!([{"key":"gooseThinkingEffort","value":"high"}]));
    says(
        &d.call_err("_goose/unstable/preferences/read", json!({"keys":["colour"]})),
        BAD,
        &["unknown preference", "gooseThinkingEffort"],
    );
    d.call("_goose/unstable/session/rename", json!({"sessionId":sid,"title":"Refactor plan"}));
    assert_eq!(d.updates("session_info_update").last().unwrap()["title"], "Refactor plan");
    let info = d.call("_goose/unstable/session/info", json!({"sessionId":sid}));
    assert_eq!(
        (info["session"]["title"].as_str(), info["session"]["_meta"]["userSetName"].as_bool()),
        (Some("Refactor plan"), Some(true))
    );
    let export = d.call("_goose/unstable/session/export", json!({"sessionId":sid}));
    assert!(export["data"].as_str().unwrap().contains(&sid));
    says(&d.call_err("_goose/unstable/session/rename", json!({"sessionId":"nope","title":"x"})), -32002, &["nope"]);
    says(
        &d.call_err("session/set_config_option", json!({"sessionId":sid,"configId":"colour","value":"red"})),
        BAD,
        &["provider, mode, model and thinking_effort"],
    );
    // The mode as a config option: kept on the session, announced both ways.
    let set = d.call("session/set_config_option", json!({"sessionId":sid,"configId":"mode","value":"chat"}));
    let mode = set["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "mode").unwrap().clone();
    assert_eq!(mode["currentValue"], "chat", "{mode}");
    assert!(mode["options"].as_array().unwrap().iter().all(|o| o["description"].is_string()), "{mode}");
    assert_eq!(d.updates("current_mode_update").last().unwrap()["currentModeId"], "chat");
    says(
        &d.call_err("session/set_config_option", json!({"sessionId":sid,"configId":"mode","value":"yolo"})),
        BAD,
        &["yolo", "auto, approve, smart_approve or chat"],
    );
    d.call("session/set_config_option", json!({"sessionId":sid,"configId":"mode","value":"approve"}));
    says(
        &d.call_err("session/set_config_option", json!({"sessionId":sid,"configId":"provider","value":"bogus"})),
        BAD,
        &["bogus"],
    );
    let set = d.call("session/set_config_option", json!({"sessionId":sid,"configId":"thinking_effort","value":"low"}));
    assert!(set["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["id"] == "thinking_effort" && o["currentValue"] == "low"));

    // What Desktop polls on load answers empty; what gosling lacks is method-not-found.
    assert_eq!(d.call("_goose/unstable/recipes/list", json!({})), json!({"recipes":[]}));
    assert_eq!(d.call("_goose/unstable/schedules/list", json!({})), json!({"jobs":[]}));
    assert_eq!(d.call("_goose/unstable/slash-commands/list", json!({})), json!({"availableCommands":[]}));
    assert_eq!(d.call("_goose/unstable/agent-mentions/list", json!({})), json!({"agents":[]}));
    says(&d.call_err("_goose/unstable/dictation/config", json!({})), -32601, &["not served by gosling"]);

    // session/list: a query, and pages of 50.
    for _ in 0..50 {
        d.call("session/new", json!({"cwd":cwd,"mcpServers":[],"_meta":{"enabledExtensions":[]}}));
    }
    let found = d.call("session/list", json!({"_meta":{"types":["user"],"query":"refactor"}}));
    assert_eq!(found["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(found["sessions"][0]["sessionId"], sid);
    let first = d.call("session/list", json!({}));
    assert_eq!(first["sessions"].as_array().unwrap().len(), 50);
    let next = first["nextCursor"].as_str().expect("a next page").to_string();
    let second = d.call("session/list", json!({"cursor":next}));
    assert_eq!(second["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(second["nextCursor"], Value::Null);
    says(&d.call_err("session/list", json!({"cursor":"x"})), BAD, &["nextCursor"]);
    assert!(d.call("session/list", json!({"_meta":{"types":["scheduled"]}}))["sessions"]
        .as_array()
        .unwrap()
        .is_empty());
    d.call("session/close", json!({"sessionId":sid}));
    says(&d.call_err("session/delete", json!({"sessionId":"nope"})), -32002, &["nope"]);
    let checks = std::mem::take(&mut d.checks);
    check_schemas(peers, &checks);
}

/// goose's four permission options: `reject_always` declines this call and every later call of
/// the tool in the session, without asking again.
#[test]
fn reject_always_holds_for_the_session() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![echo_call("call_1"), text("refused"), echo_call("call_2"), text("refused again")]);
    let home = TempDir::new("reject-always");
    let cwd = work_dir(&home);
    let env = home_env(&home, model_env(&llm, "approve"));
    let mut d = Desktop::new(&env);
    d.call("initialize", json!({"protocolVersion":1}));
    let sid = d.new_session(&cwd, &[everything(peers)]);
    d.answers.push_back("reject_always");
    for text in ["first", "second"] {
        let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":text}]}));
        assert_eq!(r["stopReason"], "end_turn");
    }
    let kinds: Vec<Vec<&str>> = d
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .map(|m| m["params"]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect())
        .collect();
    assert_eq!(kinds.len(), 1, "asked once: {kinds:?}");
    for k in ["allow_once", "allow_always", "reject_once", "reject_always"] {
        assert!(kinds[0].contains(&k), "{k} offered: {kinds:?}");
    }
    assert_eq!(d.finals(), [("call_1", "failed"), ("call_2", "failed")]);
    let checks = std::mem::take(&mut d.checks);
    check_schemas(peers, &checks);
}

/// goose's stored tool permissions hold in every turn: `never_allow` declines the call even in
/// auto mode, without asking.
#[test]
fn a_never_allow_tool_permission_declines_without_asking() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![echo_call("call_1"), text("declined")]);
    let home = TempDir::new("never-allow");
    let cwd = work_dir(&home);
    let env = home_env(&home, model_env(&llm, "auto"));
    let mut d = Desktop::new(&env);
    d.call("initialize", json!({"protocolVersion":1}));
    d.call(
        "_goose/unstable/tools/permissions/set",
        json!({"toolPermissions":[{"toolName":"everything__echo","permission":"never_allow"}]}),
    );
    let sid = d.new_session(&cwd, &[everything(peers)]);
    let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"echo"}]}));
    assert_eq!(r["stopReason"], "end_turn");
    assert!(!d.seen.iter().any(|m| m["method"] == "session/request_permission"), "nothing asked");
    let finals: Vec<&str> = d
        .updates("tool_call_update")
        .iter()
        .filter(|u| u["toolCallId"] == "call_1")
        .filter_map(|u| u["status"].as_str())
        .filter(|s| matches!(*s, "completed" | "failed"))
        .collect();
    assert_eq!(finals, ["failed"]);
}

/// Issue 26, one session model, within one process: a turn an ACP client starts over the
/// WebSocket reaches a follower of the session's `GET /sessions/{id}/events`.
#[test]
fn an_acp_turn_over_the_websocket_reaches_an_events_follower() {
    use crate::support::{Server, ServerOpts, SECRET};
    use std::io::Read;
    let llm = FakeLlm::start(vec![text("words from the model")]);
    let s = Server::start_with(ServerOpts { env: llm.env("gpt-4o"), ..ServerOpts::default() });
    let cwd = work_dir(&s.home);
    let mut c = crate::websocket::Client::connect(&s);
    c.call(1, "initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let new = c.call(2, "session/new", json!({"cwd":cwd,"mcpServers":[]}));
    let sid = new["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{new}")).to_string();

    // The follower, over its own connection, attached before the turn starts: its stream's
    // first ping is written once it follows the session's events.
    let mut follower = std::net::TcpStream::connect(&s.addr).unwrap();
    follower.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        follower,
        "GET /sessions/{sid}/events HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    /// Reads `follower` into `raw` until `done` holds, it ends, or 60 s pass.
    fn read_until(follower: &mut std::net::TcpStream, raw: &mut String, done: impl Fn(&str) -> bool) {
        let (deadline, mut buf) = (Instant::now() + Duration::from_secs(60), [0u8; 4096]);
        while !done(raw) && Instant::now() < deadline {
            match follower.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
    }
    let mut raw = String::new();
    read_until(&mut follower, &mut raw, |r| r.contains(": ping"));
    assert!(raw.contains(": ping"), "the follower's stream did not start: {raw}");
    let seen = std::thread::spawn(move || {
        read_until(&mut follower, &mut raw, |r| {
            r.contains("words from the model") && r.contains("\"type\":\"Finish\"")
        });
        raw
    });
    let r = c.call(3, "session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"say something"}]}));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let raw = seen.join().unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("\"type\":\"Message\"") && raw.contains("words from the model"), "the model's answer: {raw}");
    assert!(raw.contains("\"type\":\"Finish\""), "and the end of the turn: {raw}");
}

#[test]
fn the_apps_page_lists_the_mcp_apps_of_live_sessions() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![]);
    let home = TempDir::new("desktop-apps");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    assert_eq!(d.call("_goose/unstable/apps/list", json!({}))["apps"], json!([]), "no live session, no app");
    let script = manifest_dir().join("tests/fakes/ui_app_mcp.py").display().to_string();
    let app = json!({"type":"mcp","server":{"name":"clockwork","command":peers.python(),"args":[script],"env":[]},"envKeys":[]});
    let sid = d.new_session(&cwd, &[app]);
    // The extension's `ui://` resource (not its other one), with its HTML.
    let apps = d.call("_goose/unstable/apps/list", json!({"sessionId":sid}))["apps"].clone();
    assert_eq!(
        apps,
        json!([{"uri":"ui://clock/app","name":"clock","description":"A clock","mimeType":"text/html;profile=mcp-app",
            "text":"<p>12:00</p>","mcpServers":["clockwork"],"width":800,"height":600,"resizable":true}])
    );
    // Without a session: every live session's apps, each once.
    d.new_session(&cwd, &[]);
    assert_eq!(d.call("_goose/unstable/apps/list", json!({}))["apps"], apps);
    // A session that is not live offers none.
    assert_eq!(d.call("_goose/unstable/apps/list", json!({"sessionId":"20200101_1"}))["apps"], json!([]));
    check_schemas(peers, &d.checks);
}

#[test]
fn history_search_finds_sessions_by_what_was_said() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![text("Stripes, mostly."), text("Noted.")]);
    let home = TempDir::new("desktop-search");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let zebra = d.new_session(&cwd, &[]);
    d.call("session/prompt", json!({"sessionId":zebra,"prompt":[{"type":"text","text":"hello"}]}));
    d.call("session/prompt", json!({"sessionId":zebra,"prompt":[{"type":"text","text":"What does a Zebra wear?"}]}));
    d.new_session(&cwd, &[]);
    let ids = |d: &mut Desktop, q: &str| -> Vec<String> {
        let r = d.call("session/list", json!({"_meta":{"types":["user"],"query":q}}));
        assert_eq!(r["_meta"]["searchComplete"], true, "{r}");
        r["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap().to_string()).collect()
    };
    // Not in the title ("hello"): in the second message, and in the model's answer; any case.
    assert_eq!(ids(&mut d, "zebra"), std::slice::from_ref(&zebra));
    assert_eq!(ids(&mut d, "STRIPES"), std::slice::from_ref(&zebra));
    assert_eq!(ids(&mut d, "hello"), std::slice::from_ref(&zebra), "the title still counts");
    // What the stored JSON says around the messages is not something said.
    assert_eq!(ids(&mut d, "assistant"), Vec::<String>::new());
    assert_eq!(ids(&mut d, "giraffe"), Vec::<String>::new());
    // Without a query every session is listed, and no search is reported.
    let all = d.call("session/list", json!({"_meta":{"types":["user"]}}));
    assert_eq!(all["sessions"].as_array().unwrap().len(), 2, "{all}");
    assert!(all.get("_meta").is_none(), "{all}");
    check_schemas(peers, &d.checks);
}

/// Desktop's steer path: each turn is a run announced in `session_info_update`
/// (`_meta.goose.activeRunId`, null when it ends); a message steered into it while a tool call
/// waits for permission reaches the model with the tool's result, and comes back as the
/// person's chunk marked `steer`. The answer carries the turn's tokens, the meter the model's
/// real window; the session records its provider and model when it is created.
#[test]
fn desktop_steers_a_running_turn_and_sees_its_usage() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![echo_call("c1"), text("Both done."), text("Later.")]);
    let home = TempDir::new("desktop-steer");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "approve")));
    let init = d.call(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{"_meta":{"goose":{"customNotifications":true}}}}),
    );
    assert_eq!(init["agentCapabilities"]["auth"], json!({}), "{init}");
    let sid = d.new_session(&cwd, &[everything(peers)]);
    let info = d.call("_goose/unstable/session/info", json!({"sessionId":sid}));
    assert_eq!(
        (&info["session"]["_meta"]["providerId"], &info["session"]["_meta"]["modelId"]),
        (&json!("openai"), &json!("gpt-4o")),
        "recorded at creation: {info}"
    );
    const BAD: i64 = -32602;
    says(
        &d.call_err(
            "_goose/unstable/session/steer",
            json!({"sessionId":sid,"expectedRunId":"run_0","prompt":[{"type":"text","text":"x"}]}),
        ),
        BAD,
        &["no active run", "new prompt"],
    );

    let prompt = d.send_request("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"echo hi"}]}));
    // Until the permission request: the run's id, announced first.
    let (mut run, mut asked) = (None, None);
    while asked.is_none() {
        let m = d.wire.recv(Duration::from_secs(60)).expect("the turn goes on");
        let update = &m["params"]["update"];
        if update["sessionUpdate"] == "session_info_update" && update["_meta"]["goose"]["activeRunId"].is_string() {
            run = update["_meta"]["goose"]["activeRunId"].as_str().map(str::to_string);
        }
        if m["method"] == "session/request_permission" {
            assert!(run.is_some(), "the run is announced before its first tool call");
            asked = Some(m.clone());
        }
        d.take(m);
    }
    let run = run.unwrap();
    says(
        &d.call_err(
            "_goose/unstable/session/steer",
            json!({"sessionId":sid,"expectedRunId":"run_old","prompt":[{"type":"text","text":"x"}]}),
        ),
        BAD,
        &["not the active run"],
    );
    says(
        &d.call_err(
            "_goose/unstable/session/steer",
            json!({"sessionId":sid,"expectedRunId":run,"prompt":[{"type":"image","data":"","mimeType":"image/png"}]}),
        ),
        BAD,
        &["image"],
    );
    let steered = d.call(
        "_goose/unstable/session/steer",
        json!({"sessionId":sid,"expectedRunId":run,"prompt":[{"type":"text","text":"and say bye"}]}),
    );
    assert_eq!(steered["runId"], run.as_str(), "{steered}");
    let asked = asked.unwrap();
    let option = asked["params"]["options"].as_array().unwrap().iter().find(|o| o["kind"] == "allow_once").unwrap()
        ["optionId"]
        .clone();
    d.wire
        .send(&json!({"jsonrpc":"2.0","id":asked["id"],"result":{"outcome":{"outcome":"selected","optionId":option}}}));
    let answer = d.answer(prompt, "session/prompt");
    assert_eq!(answer["stopReason"], "end_turn");
    // Two model calls: 100 + 120 in, 10 + 5 out.
    assert_eq!(answer["usage"], json!({"totalTokens":235,"inputTokens":220,"outputTokens":15}), "{answer}");

    // The second model call had the tool's result, then the steered message.
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "one more answer for the steered message, no third call");
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles[roles.len() - 2..], ["tool", "user"], "{messages:?}");
    assert_eq!(messages.last().unwrap()["content"], "and say bye");
    let chunks: Vec<&Value> = d.updates("user_message_chunk");
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    assert_eq!(chunks[0]["messageId"], steered["messageId"]);
    assert_eq!(chunks[0]["_meta"]["goose"]["steer"], true);
    let runs: Vec<Value> = d
        .updates("session_info_update")
        .iter()
        .filter_map(|u| u["_meta"]["goose"].get("activeRunId").cloned())
        .collect();
    assert_eq!(runs, [json!(run), Value::Null], "announced, then ended");
    // The meter: the last call's 125 tokens of gpt-4o's 128,000, in goose's and ACP's update.
    let usage = d.updates("usage_update");
    assert_eq!(usage.last().map(|u| (&u["used"], &u["size"])), Some((&json!(125), &json!(128_000))), "{usage:?}");
    let goose = d.seen.iter().rfind(|m| m["method"] == "_goose/unstable/session/update").expect("goose's meter");
    assert_eq!(goose["params"]["update"]["contextLimit"], 128_000, "{goose}");
    assert_eq!(goose["params"]["update"]["accumulatedInputTokens"], 220, "{goose}");
    // The run is over: a late steer is refused, not sent to the next turn.
    says(
        &d.call_err(
            "_goose/unstable/session/steer",
            json!({"sessionId":sid,"expectedRunId":run,"prompt":[{"type":"text","text":"x"}]}),
        ),
        BAD,
        &["no active run"],
    );
    check_schemas(peers, &d.checks);
}

/// The Prompts settings (list, get, save, reset; the saved system prompt is what the next turn
/// sends), the Skills page's sources, provider readiness and live voice: what gosling answers,
/// and each bad input refused with what to fix.
#[test]
fn prompts_sources_readiness_and_live_voice() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![text("Brief."), text("Default.")]);
    let home = TempDir::new("desktop-prompts");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    const BAD: i64 = -32602;
    let g = |m: &str| format!("_goose/unstable/{m}");

    let list = d.call(&g("config/prompts/list"), json!({}));
    let system = &list["prompts"][0];
    assert_eq!((&system["name"], &system["isCustomized"]), (&json!("system.md"), &json!(false)), "{list}");
    let default = system["defaultContent"].as_str().unwrap().to_string();
    assert!(default.contains("gosling"), "{default}");
    let saved = d.call(&g("config/prompts/save"), json!({"name":"system.md","content":"You are terse. Say little."}));
    assert!(saved["message"].as_str().unwrap().contains("system.md"), "{saved}");
    let got = d.call(&g("config/prompts/get"), json!({"name":"system.md"}));
    assert_eq!(
        got,
        json!({"name":"system.md","content":"You are terse. Say little.","defaultContent":default,"isCustomized":true})
    );
    assert_eq!(d.call(&g("config/prompts/list"), json!({}))["prompts"][0]["userContent"], "You are terse. Say little.");
    let sid = d.new_session(&cwd, &[]);
    d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"hi"}]}));
    d.call(&g("config/prompts/reset"), json!({"name":"system.md"}));
    assert_eq!(d.call(&g("config/prompts/get"), json!({"name":"system.md"}))["isCustomized"], false);
    d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"again"}]}));
    let system_of = |r: &crate::fake_llm::Recorded| r.body["messages"][0]["content"].as_str().unwrap_or("").to_string();
    let sent: Vec<String> = llm.requests().iter().map(system_of).collect();
    assert!(sent[0].starts_with("You are terse. Say little."), "{sent:?}");
    assert!(sent[1].starts_with(&default), "{sent:?}");
    says(&d.call_err(&g("config/prompts/get"), json!({"name":"compaction.md"})), BAD, &["system.md"]);
    says(&d.call_err(&g("config/prompts/save"), json!({"name":"../system.md","content":"x"})), BAD, &["system.md"]);
    says(
        &d.call_err(&g("config/prompts/save"), json!({"name":"system.md","content":"  "})),
        BAD,
        &["non-empty", "reset"],
    );
    says(&d.call_err(&g("config/prompts/save"), json!({"name":"system.md"})), BAD, &["`content`"]);
    says(&d.call_err(&g("config/prompts/reset"), json!({})), BAD, &["`name`"]);

    // gosling loads no skills: the Skills page lists no sources.
    assert_eq!(d.call(&g("sources/list"), json!({})), json!({"sources":[]}));
    // Readiness is for ACP agent providers; gosling's are model APIs (goose refuses them too).
    says(
        &d.call_err(&g("providers/readiness/check"), json!({"providerId":"openai"})),
        BAD,
        &["not an ACP agent provider", "providers/list"],
    );
    says(&d.call_err(&g("providers/readiness/check"), json!({"providerId":"claude-acp"})), BAD, &["not supported"]);
    says(&d.call_err(&g("providers/readiness/check"), json!({})), BAD, &["providerId"]);
    // Live voice: unavailable, and a start is refused with what to do instead.
    let id = d.send_request(&g("session/live-voice/availability"), json!({"sessionId":sid}));
    let voice = d.message(id, "live-voice/availability");
    assert_eq!(voice["result"]["status"], "unavailable", "{voice}");
    says(
        &d.call_err(&g("session/live-voice/start"), json!({"sessionId":sid,"offerSdp":"v=0"})),
        BAD,
        &["no live voice"],
    );
    check_schemas(peers, &d.checks);
}

/// Image prompts: advertised while the configured provider is sent images; an image reaches
/// OpenAI as a data URL with the text, comes back in a load's replay, and a session switched to
/// a provider that is not sent images refuses one with the reason, before any model call.
#[test]
fn an_image_prompt_reaches_a_provider_that_takes_images() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![text("A red dot.")]);
    let home = TempDir::new("desktop-image");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    let init = d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    assert_eq!(init["agentCapabilities"]["promptCapabilities"]["image"], true, "{init}");
    let sid = d.new_session(&cwd, &[]);
    let png = json!({"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"});
    d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"what is this?"},png]}));
    let requests = llm.requests();
    let user = requests[0].body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        user["content"],
        json!([{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}])
    );
    const BAD: i64 = -32602;
    says(
        &d.call_err(
            "session/prompt",
            json!({"sessionId":sid,"prompt":[{"type":"image","data":"<svg/>","mimeType":"image/svg+xml"}]}),
        ),
        BAD,
        &["image/png"],
    );
    d.call("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    let replayed: Vec<&Value> =
        d.updates("user_message_chunk").into_iter().filter(|u| u["content"]["type"] == "image").collect();
    assert_eq!(replayed.len(), 1, "{:?}", d.updates("user_message_chunk"));
    assert_eq!(replayed[0]["content"]["mimeType"], "image/png");
    d.call("session/set_config_option", json!({"sessionId":sid,"configId":"provider","value":"ollama"}));
    says(&d.call_err("session/prompt", json!({"sessionId":sid,"prompt":[png]})), BAD, &["ollama", "not sent images"]);
    assert_eq!(llm.requests().len(), 1, "a refused image costs no model call");
    check_schemas(peers, &d.checks);
}

/// Desktop 1.5x's sign-in settings of an MCP server (`clientId`, `clientSecretKey` — the name of
/// a stored secret — and `scopes`) are kept with the extension and shown again; on a stdio
/// server, or malformed, they are refused with what to fix.
#[test]
fn mcp_sign_in_settings_are_kept_and_checked() {
    let peers = require_peers!();
    let home = TempDir::new("desktop-sign-in");
    let mut d = Desktop::new(&home_env(&home, Vec::new()));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let remote = json!({"type":"mcp","server":{"type":"http","name":"remote","url":"https://mcp.example/mcp","headers":[]},
        "envKeys":[],"clientId":"gosling-desktop","clientSecretKey":"REMOTE_CLIENT_SECRET","scopes":["read","write"]});
    d.call("_goose/unstable/config/extensions/add", json!({"extension":remote,"enabled":false}));
    let list = d.call("_goose/unstable/config/extensions/list", json!({}));
    let entry = list["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["configKey"] == "remote")
        .unwrap_or_else(|| panic!("no remote: {list}"))["extension"]
        .clone();
    assert_eq!(
        (&entry["clientId"], &entry["clientSecretKey"], &entry["scopes"]),
        (&json!("gosling-desktop"), &json!("REMOTE_CLIENT_SECRET"), &json!(["read", "write"])),
        "{entry}"
    );
    const BAD: i64 = -32602;
    let stdio = json!({"type":"mcp","server":{"name":"local","command":peers.node(),"args":[],"env":[]},"envKeys":[],"clientId":"x"});
    says(&d.call_err("_goose/unstable/config/extensions/add", json!({"extension":stdio})), BAD, &["http server"]);
    let mut bad = remote.clone();
    bad["scopes"] = json!("read write");
    says(&d.call_err("_goose/unstable/config/extensions/add", json!({"extension":bad})), BAD, &["`scopes`"]);
    check_schemas(peers, &d.checks);
}

/// The text of every terminal tool call update seen so far, as one string per call.
fn tool_outputs(d: &Desktop) -> Vec<String> {
    d.updates("tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .map(|u| u.to_string())
        .collect()
}

/// `session/working-dir/update`: the dir is checked (absolute, existing, a directory) and kept
/// on the session; a call under way when it moves finishes where it started (its shell's `pwd`
/// says so), and the running developer extension starts again in the new dir before its next
/// call (the core's move, `SessionRuntime::move_to`; goosed's HTTP route does the same).
#[test]
fn a_working_dir_update_moves_the_extensions_without_cutting_a_call() {
    let _peers = require_peers!();
    // Where the shell runs, and which developer process runs it (the shell's parent).
    let pwd = r#"{"command":"pwd; echo ppid=$PPID"}"#;
    // The first call says it started, then waits for the test's go (after the move).
    let waits = r#"{"command":"touch started; while [ ! -e go ]; do sleep 0.05; done; pwd; echo ppid=$PPID"}"#;
    let llm = FakeLlm::start(vec![
        crate::fake_llm::tool_turn("call_1", "developer__shell", waits),
        text("first"),
        crate::fake_llm::tool_turn("call_2", "developer__shell", pwd),
        text("second"),
        crate::fake_llm::tool_turn("call_3", "developer__shell", pwd),
        text("third"),
    ]);
    let home = TempDir::new("desktop-workdir");
    let cwd = work_dir(&home);
    let moved = format!("{cwd}/moved");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::write(format!("{cwd}/a-file"), "x").unwrap();
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let g = |m: &str| format!("_goose/unstable/{m}");
    let developer = json!({"type":"builtin","name":"developer","description":""});
    let sid = d.new_session(&cwd, std::slice::from_ref(&developer));
    let ask = |d: &mut Desktop| {
        let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"where am I"}]}));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
        tool_outputs(d).pop().expect("a finished tool call")
    };

    // The move while the first call runs: answered at once, the call not cut.
    let prompt = d.send_request("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"wait"}]}));
    let started =
        wait_for(Duration::from_secs(30), || std::path::Path::new(&format!("{cwd}/started")).exists().then_some(()));
    assert!(started.is_some(), "the first shell call started");
    d.call(&g("session/working-dir/update"), json!({"sessionId":sid,"workingDir":moved}));
    let info = d.call(&g("session/info"), json!({"sessionId":sid}));
    assert_eq!(info["session"]["cwd"], moved);
    std::fs::write(format!("{cwd}/go"), "").unwrap();
    let r = d.answer(prompt, "session/prompt");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(d.finals(), vec![("call_1", "completed")], "the call under way finished");
    let first = tool_outputs(&d).pop().expect("the first call's output");
    assert!(first.contains(&cwd) && !first.contains(&moved), "{first}");

    // The next call: the developer extension started again, in the new dir.
    let ppid = |out: &str| out.split("ppid=").nth(1).map(|p| p.split_whitespace().next().unwrap_or("").to_string());
    let second = ask(&mut d);
    assert!(second.contains(&moved), "{second}");
    assert_ne!(ppid(&first), ppid(&second), "a new developer process: {first} / {second}");
    // And only once: the call after runs in the same process.
    let third = ask(&mut d);
    assert!(third.contains(&moved), "{third}");
    assert_eq!(ppid(&second), ppid(&third), "{second} / {third}");

    const BAD: i64 = -32602;
    let update = |d: &mut Desktop, dir: &str| {
        d.call_err(&g("session/working-dir/update"), json!({"sessionId":sid,"workingDir":dir}))
    };
    says(&update(&mut d, "relative/dir"), BAD, &["relative path", "absolute"]);
    says(&update(&mut d, &format!("{cwd}/no-such-dir")), BAD, &["does not exist"]);
    says(&update(&mut d, &format!("{cwd}/a-file")), BAD, &["not a directory"]);
    says(&update(&mut d, ""), BAD, &["empty"]);
    says(&d.call_err(&g("session/working-dir/update"), json!({"sessionId":sid})), BAD, &["`workingDir`"]);
    let unknown = d.call_err(&g("session/working-dir/update"), json!({"sessionId":"20200101_1","workingDir":moved}));
    says(&unknown, -32002, &["20200101_1", "session/list"]);
    // Refused ones changed nothing.
    assert_eq!(d.call(&g("session/info"), json!({"sessionId":sid}))["session"]["cwd"], moved);
    check_schemas(_peers, &d.checks);
}

/// `session/import` of goose 1.52's own export (`tests/contract/goose-export-1.52.json`): the
/// conversation and the name come in; the file's extension, its `auto` mode and its recipe do
/// not (the session runs the extensions the config has switched on, as a new one does). Bad
/// input is refused with what to send.
#[test]
fn an_import_brings_the_conversation_not_the_consent() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![text("after the import")]);
    let home = TempDir::new("desktop-import");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "approve")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let g = |m: &str| format!("_goose/unstable/{m}");
    d.call(
        &g("config/extensions/add"),
        json!({"extension":{"type":"builtin","name":"developer","description":""},"enabled":true}),
    );
    let export = std::fs::read_to_string(manifest_dir().join("tests/contract/goose-export-1.52.json")).unwrap();
    let file: Value = serde_json::from_str(&export).unwrap();
    let count = file["conversation"].as_array().unwrap().len();
    let imported = d.call(&g("session/import"), json!({"input":export,"source":"json"}));
    assert_eq!(imported["messageCount"], count, "{imported}");
    assert_eq!(imported["title"], "Renamed");
    let sid = imported["sessionId"].as_str().unwrap().to_string();
    let info = d.call(&g("session/info"), json!({"sessionId":sid}))["session"].clone();
    assert_eq!(info["_meta"]["hasRecipe"], false, "{info}");
    assert_ne!(info["cwd"], "/nonexistent/goose-user/project", "a dir that is not here is not kept");
    // The stored set is the config's (developer), not the file's (everything).
    let names = |list: &Value| -> Vec<String> {
        list["extensions"].as_array().unwrap().iter().map(|e| e["extensionKey"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&d.call(&g("session/extensions/list"), json!({"sessionId":sid}))), ["developer"]);
    let load = d.call("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    assert_eq!(load["modes"]["currentModeId"], "approve", "the file's auto mode is not taken: {load}");
    let said: Vec<String> = d
        .updates("user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect();
    assert!(said.iter().any(|t| t == "hello to the zebra"), "the conversation replays: {said:?}");
    let running = d.call(&g("diagnostics/get"), json!({"sessionId":sid}));
    assert_eq!(running["report"]["extensions"]["enabled"], json!(["developer"]), "{running}");
    let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"go on"}]}));
    assert_eq!(r["stopReason"], "end_turn");
    // The model saw the imported conversation, then the new message.
    let sent = llm.requests()[0].body["messages"].to_string();
    assert!(sent.contains("hello to the zebra") && sent.contains("go on"), "{sent}");

    const BAD: i64 = -32602;
    let import = |d: &mut Desktop, input: &str, source: &str| {
        d.call_err(&g("session/import"), json!({"input":input,"source":source}))
    };
    says(&import(&mut d, "not a session", "json"), BAD, &["not an exported session", "export"]);
    says(&import(&mut d, "{}", "auto"), BAD, &["not an exported session", "missing field"]);
    says(&import(&mut d, "nostr:nevent1abc", "nostr"), BAD, &["does not fetch shared links", "\"json\""]);
    says(&import(&mut d, &export, "yaml"), BAD, &["auto, json, nostr"]);
    let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(gosling_agent::import::MAX_IMPORT));
    says(&import(&mut d, &huge, "json"), BAD, &["bytes", "the most gosling imports"]);
    says(&d.call_err(&g("session/import"), json!({"source":"json"})), BAD, &["`input`"]);
    let list = d.call("session/list", json!({}));
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "refused imports create nothing: {list}");
    check_schemas(peers, &d.checks);
}

/// `diagnostics/get`: the version, platform, provider and model, each extension with its state
/// (one that failed to start, with its error), and never a secret's value — neither a stored
/// secret nor an extension's environment value, even where the failing extension printed it.
#[test]
fn diagnostics_names_states_and_never_a_secret() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![]);
    let home = TempDir::new("desktop-diagnostics");
    let cwd = work_dir(&home);
    let mut d = Desktop::new(&home_env(&home, model_env(&llm, "auto")));
    d.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let g = |m: &str| format!("_goose/unstable/{m}");
    const STORED: &str = "stored-secret-value-8731";
    const ENV: &str = "env-secret-value-5519";
    d.call(&g("config/upsert"), json!({"key":"OPENAI_API_KEY","value":STORED,"isSecret":true}));
    // An extension that prints its environment value and the stored secret, then fails.
    let script = home.join("leaky.js");
    let js = format!("process.stderr.write('token=' + process.env.API_TOKEN + ' {STORED}\\n'); process.exit(3);\n");
    std::fs::write(&script, js).unwrap();
    let failing = json!({"type":"mcp","server":{"name":"leaky","command":peers.node(),"args":[script.display().to_string()],
        "env":[{"name":"API_TOKEN","value":ENV}]},"envKeys":[]});
    let sid = d.new_session(&cwd, &[everything(peers), failing]);
    for level in [json!(null), json!("summary"), json!("full")] {
        let mut params = json!({"sessionId":sid});
        if !level.is_null() {
            params["level"] = level.clone();
        }
        let r = d.call(&g("diagnostics/get"), params);
        let text = r.to_string();
        // The extension printed both; the report passes its words on with them blotted out.
        assert!(text.contains("token=[secret] [secret]"), "{text}");
        assert!(!text.contains(STORED) && !text.contains(ENV), "a secret in the report: {text}");
        let report = &r["report"];
        assert_eq!(report["system"]["app_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!((&report["system"]["provider"], &report["system"]["model"]), (&json!("openai"), &json!("gpt-4o")));
        let states: Vec<(String, String)> = report["extensions"]["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap().into(), s["state"].as_str().unwrap().into()))
            .collect();
        assert!(states.contains(&("everything".into(), "running".into())), "{states:?}");
        assert!(states.contains(&("leaky".into(), "failed".into())), "{states:?}");
        let errors = report["errors"].as_array().unwrap();
        assert!(errors.iter().any(|e| e.as_str().unwrap().starts_with("extension leaky failed")), "{errors:?}");
        let full = level == "full";
        assert_eq!(report["session"]["id"].as_str() == Some(&sid), full, "the session only at level full: {report}");
        assert_eq!(report["level"], if full { "full" } else { "summary" });
    }
    const BAD: i64 = -32602;
    says(&d.call_err(&g("diagnostics/get"), json!({"sessionId":sid,"level":"all"})), BAD, &["summary or full"]);
    says(&d.call_err(&g("diagnostics/get"), json!({})), BAD, &["`sessionId`"]);
    says(&d.call_err(&g("diagnostics/get"), json!({"sessionId":"20200101_1"})), -32002, &["20200101_1"]);
    check_schemas(peers, &d.checks);
}

/// goose's per-message usage (`message_usage` on `_goose/unstable/session/update`): after each
/// model call, on the assistant message it wrote (the id its chunks carry), its tokens and
/// timing; only to clients that declare `customNotifications`.
#[test]
fn each_model_call_reports_its_usage_on_its_message() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![echo_call("call_1"), text("echoed it"), echo_call("call_2"), text("again")]);
    let home = TempDir::new("desktop-message-usage");
    let cwd = work_dir(&home);
    let env = home_env(&home, model_env(&llm, "auto"));
    let custom = json!({"protocolVersion":1,"clientCapabilities":{"_meta":{"goose":{"customNotifications":true}}}});
    let mut d = Desktop::new(&env);
    d.call("initialize", custom);
    let sid = d.new_session(&cwd, &[everything(peers)]);
    let r = d.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"echo hi"}]}));
    assert_eq!(r["stopReason"], "end_turn");
    let usages: Vec<Value> = d
        .seen
        .iter()
        .filter(|m| m["method"] == "_goose/unstable/session/update")
        .map(|m| m["params"]["update"].clone())
        .filter(|u| u["sessionUpdate"] == "message_usage")
        .collect();
    assert_eq!(usages.len(), 2, "one per model call: {usages:?}");
    // The tool-calling call: its tokens, on the message of its tool call (no text streamed).
    let call = &d.updates("tool_call")[0];
    assert_eq!(usages[0]["messageId"], call["_meta"]["goose"]["messageId"], "{usages:?} {call}");
    let u = &usages[0]["usage"];
    assert_eq!((&u["inputTokens"], &u["outputTokens"], &u["totalTokens"]), (&json!(100), &json!(10), &json!(110)));
    assert!(u["elapsedMs"].is_u64() && u.get("timeToFirstTokenMs").is_none(), "{u}");
    // The answering call: on the message its text chunks carry, with its time to first token.
    let chunk = &d.updates("agent_message_chunk")[0];
    assert_eq!(usages[1]["messageId"], chunk["messageId"], "{usages:?}");
    let u = &usages[1]["usage"];
    assert_eq!((&u["inputTokens"], &u["outputTokens"], &u["isCompaction"]), (&json!(120), &json!(5), &json!(false)));
    assert!(u["timeToFirstTokenMs"].as_u64().unwrap() <= u["elapsedMs"].as_u64().unwrap(), "{u}");
    check_schemas(peers, &d.checks);

    // A client without goose's custom notifications gets none.
    let mut plain = Desktop::new(&env);
    plain.call("initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    let sid = plain.new_session(&cwd, &[everything(peers)]);
    plain.call("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"echo hi"}]}));
    assert!(!plain.seen.iter().any(|m| m["method"] == "_goose/unstable/session/update"), "{:?}", plain.seen);
}
