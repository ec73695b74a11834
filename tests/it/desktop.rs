//! Goose Desktop 1.34's call sequences against gosling, as Desktop makes them: gosling started
//! as `agent` with no GOOSE_TLS (so HTTPS), the `GOOSED_CERT_FINGERPRINT=` line read from
//! stdout and pinned (a client that accepts exactly that certificate), then the flows of
//! desktop-1.34: (a) start, (f) open a session, (b) send a message, with a tool confirmation,
//! (c) cancel mid-turn then send again, (d) the extensions page, (e) a deep link — asserting
//! the fields Desktop reads and goose's schemas (contract.rs) on every body; and the session
//! event stream's replay, its followers, and elicitation.

use crate::contract;
use crate::fake_llm::*;
use crate::llmock::Llmock;
use crate::require_peers;
use crate::support::*;
use crate::tls::{connect, exchange_json, fingerprint_line, Tls};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Desktop's view of a backend it spawned: `https://127.0.0.1:<port>` and a pinned certificate.
struct Desktop {
    server: Server,
    pin: String,
}

struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

impl Desktop {
    /// Starts gosling the way Desktop does: `agent`, GOOSE_PORT, a secret, no GOOSE_TLS.
    fn start(env: &[(&str, String)]) -> Desktop {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        // A port of its own, as Desktop picks one: `free_port` lets go of it, and another
        // process may take it first; then the start is tried again on another (three tries).
        let mut tries = Vec::new();
        let server = loop {
            let mut env = env.clone();
            env.push(("GOOSE_PORT".into(), free_port().to_string()));
            let opts = ServerOpts { env, default_tls: true, ..ServerOpts::default() };
            match Server::try_start_in(TempDir::new("srv"), opts) {
                Ok(s) => break s,
                Err((_, e)) if e.contains("Address already in use") && tries.len() < 2 => tries.push(e),
                Err((_, e)) => panic!("{e}\n(earlier tries: {tries:?})"),
            }
        };
        assert!(server.tls, "gosling serves HTTPS by default, as goosed 1.34");
        let pin = fingerprint_line(&server);
        Desktop { server, pin }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        let mut conn = BufReader::new(connect(&self.server.addr, &self.pin).expect("the pinned handshake"));
        let r = exchange_json(&mut conn, method, path, Some(SECRET), body.as_ref()).expect("an HTTPS exchange");
        Answer { status: r.status, body: r.body }
    }

    fn get(&self, path: &str) -> Answer {
        self.call("GET", path, None)
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, Some(body))
    }

    /// GET, 200, checked against goose's schema for `template`; the body.
    fn get_ok(&self, path: &str, template: &str) -> Value {
        let a = self.get(path);
        assert_eq!(a.status, 200, "GET {path}: {}", a.body);
        let v = a.json();
        contract::check("GET", template, 200, &v);
        v
    }

    /// POST, 200, checked against goose's schema for the route (an empty body: the status is
    /// one goose documents, without content); the body (Null when empty).
    fn post_ok(&self, path: &str, body: Value) -> Value {
        let a = self.post(path, body);
        assert_eq!(a.status, 200, "POST {path}: {}", a.body);
        let v = if a.body.is_empty() { Value::Null } else { a.json() };
        // goose documents no responses at all for /config/set_provider.
        if path != "/config/set_provider" {
            contract::check("POST", path, 200, &v);
        }
        v
    }

    /// A response goose documents for `template` by its status alone (no content).
    fn check_status(method: &str, template: &str, a: &Answer) {
        assert!(a.body.is_empty() || a.status >= 400, "{method} {template}: {}", a.body);
        contract::check(method, template, a.status, &Value::Null);
    }

    fn events(&self, session: &str, last_event_id: Option<u64>) -> Events {
        Events::open(self, session, last_event_id)
    }

    /// `POST /reply` with `body`, its SSE answer left to read line by line.
    fn reply_stream(&self, body: &Value) -> BufReader<Tls> {
        let mut conn = connect(&self.server.addr, &self.pin).unwrap();
        let payload = body.to_string();
        write!(
            conn,
            "POST /reply HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
            payload.len()
        )
        .unwrap();
        BufReader::new(conn)
    }

    /// `POST /sessions/{id}/reply` with a fresh request id; the id.
    fn send(&self, session: &str, text: &str) -> String {
        let rid = request_id();
        let r = self
            .post(&format!("/sessions/{session}/reply"), json!({"request_id": rid, "user_message": user_text(text)}));
        assert_eq!(r.status, 200, "{}", r.body);
        contract::check("POST", "/sessions/{id}/reply", 200, &r.json());
        assert_eq!(r.json()["request_id"], rid.as_str());
        rid
    }
}

/// A UUIDv7-shaped request id, as Desktop makes them.
fn request_id() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    format!("0196b3f2-7c1a-7d2e-9f00-{:012x}", N.fetch_add(1, Ordering::Relaxed))
}

fn user_text(t: &str) -> Value {
    json!({"id": format!("u-{}", request_id()), "role": "user", "created": 1735725600, "content": [{"type": "text", "text": t}], "metadata": {"userVisible": true, "agentVisible": true}})
}

/// One frame of the session event stream.
#[derive(Debug, Clone)]
enum Frame {
    Ping(u64),
    Event { id: Option<u64>, data: Value },
}

/// `GET /sessions/{id}/events` read frame by frame over its own pinned connection.
struct Events {
    conn: BufReader<Tls>,
    buf: String,
    /// Bytes left in the current chunk.
    left: usize,
}

impl Events {
    fn open(d: &Desktop, session: &str, last_event_id: Option<u64>) -> Events {
        let mut tls = connect(&d.server.addr, &d.pin).expect("the pinned handshake");
        let mut head = format!(
            "GET /sessions/{session}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Secret-Key: {SECRET}\r\nAccept: text/event-stream\r\n"
        );
        if let Some(id) = last_event_id {
            head.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        head.push_str("\r\n");
        tls.write_all(head.as_bytes()).unwrap();
        tls.flush().unwrap();
        let mut conn = BufReader::new(tls);
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "events: {line}");
        let mut headers = Vec::new();
        loop {
            line.clear();
            conn.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            headers.push(line.trim_end().to_ascii_lowercase());
        }
        assert!(headers.iter().any(|h| h == "content-type: text/event-stream"), "{headers:?}");
        assert!(headers.iter().any(|h| h == "cache-control: no-cache"), "{headers:?}");
        assert!(headers.iter().any(|h| h == "transfer-encoding: chunked"), "{headers:?}");
        Events { conn, buf: String::new(), left: 0 }
    }

    /// Reads more of the chunked body; false at its end.
    fn fill(&mut self) -> bool {
        if self.left == 0 {
            let mut line = String::new();
            if self.conn.read_line(&mut line).unwrap_or(0) == 0 {
                return false;
            }
            if line.trim().is_empty() {
                line.clear();
                self.conn.read_line(&mut line).unwrap_or(0);
            }
            self.left = usize::from_str_radix(line.trim(), 16).unwrap_or_else(|_| panic!("chunk size {line:?}"));
            if self.left == 0 {
                return false;
            }
        }
        let mut chunk = vec![0u8; self.left.min(8192)];
        let n = self.conn.read(&mut chunk).expect("the stream keeps sending (pings every 500 ms)");
        if n == 0 {
            return false;
        }
        self.left -= n;
        self.buf.push_str(std::str::from_utf8(&chunk[..n]).expect("UTF-8 frames"));
        true
    }

    /// The next frame; None when the server closed the stream.
    fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let frame: String = self.buf.drain(..pos + 2).collect();
                return Some(parse_frame(frame.trim_end()));
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Events (pings skipped) until one matches `pred`, within `within`; all of them.
    fn until(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Vec<(Option<u64>, Value)> {
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        loop {
            assert!(Instant::now() < deadline, "no matching event within {within:?}; got {out:?}");
            match self.next().expect("the stream stays open") {
                Frame::Ping(_) => {}
                Frame::Event { id, data } => {
                    let done = pred(&data);
                    out.push((id, data));
                    if done {
                        return out;
                    }
                }
            }
        }
    }
}

fn parse_frame(text: &str) -> Frame {
    if let Some(n) = text.strip_prefix(": ping ") {
        return Frame::Ping(n.parse().unwrap_or_else(|_| panic!("ping frame {text:?}")));
    }
    let mut id = None;
    let mut data = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().unwrap_or_else(|_| panic!("id line {line:?}")));
        } else if let Some(v) = line.strip_prefix("data: ") {
            assert!(data.is_none(), "one data line per frame: {text:?}");
            data = Some(serde_json::from_str::<Value>(v).unwrap_or_else(|e| panic!("data is not JSON ({e}): {v}")));
        } else {
            panic!("unexpected line {line:?} in frame {text:?} (no event:/retry: lines)");
        }
    }
    let data = data.unwrap_or_else(|| panic!("frame without data: {text:?}"));
    let errs = contract::validate(&json!({"$ref": "#/components/schemas/MessageEvent"}), &data, "$");
    assert!(errs.is_empty(), "not a goose MessageEvent: {errs:?}\n{data}");
    Frame::Event { id, data }
}

fn is_finish(e: &Value) -> bool {
    e["type"] == "Finish"
}

fn contents(events: &[(Option<u64>, Value)], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|(_, e)| e["type"] == "Message")
        .flat_map(|(_, e)| e["message"]["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == kind)
        .collect()
}

/// What Desktop reads from each event of request `rid`: the id line, the request ids, a
/// message id and metadata on every Message.
fn assert_desktop_fields(events: &[(Option<u64>, Value)], rid: &str) {
    for (id, e) in events {
        assert!(id.is_some_and(|n| n > 0), "every event has an id: line: {e}");
        assert_eq!(e["chat_request_id"], rid, "{e}");
        if e["type"] == "Message" {
            assert_eq!(e["request_id"], rid, "{e}");
            assert!(e["message"]["id"].is_string(), "{e}");
            assert!(e["message"]["metadata"]["userVisible"].is_boolean(), "metadata is always there: {e}");
            assert!(e["token_state"]["accumulatedTotalTokens"].is_number(), "{e}");
        }
    }
    let ids: Vec<u64> = events.iter().filter_map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[1] > w[0]), "ids increase: {ids:?}");
}

fn llm_env(host: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GOOSE_PROVIDER", "openai".into()),
        ("GOOSE_MODEL", "mock-model".into()),
        ("OPENAI_HOST", host.into()),
        ("GOSLING_LLM_MAX_RETRY_WAIT_SECS", "5".into()),
    ]
}

/// Flow (a) up to `/agent/start` with `extensions`, then flow (f); the session id.
fn start_and_open(d: &Desktop, extensions: Vec<Value>) -> String {
    let work = std::env::temp_dir();
    let started = d.post_ok("/agent/start", json!({"working_dir": work, "extension_overrides": extensions}));
    let id = started["id"].as_str().unwrap().to_string();
    let resumed = d.post_ok("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert!(resumed["session"]["conversation"].is_array(), "{resumed}");
    id
}

#[test]
fn a_start_and_f_open_a_session() {
    let peers = require_peers!();
    let d = Desktop::start(&[]);
    // (a) readiness, then the settings Desktop reads on a fresh install.
    let status = d.get("/status");
    assert_eq!((status.status, status.body.as_str()), (200, "ok"));
    for key in ["GOOSE_TELEMETRY_ENABLED", "GOOSE_PROVIDER", "GOOSE_MODEL", "voice_dictation_provider"] {
        let r = d.post("/config/read", json!({"key": key, "is_secret": false}));
        assert_eq!((r.status, r.json()), (200, Value::Null), "{key}: a missing key is 200 null");
    }
    let config = d.get_ok("/config", "/config");
    assert!(config["config"].is_object());
    let providers = d.get_ok("/config/providers", "/config/providers");
    let names: Vec<&str> = providers.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["openai", "anthropic", "ollama"]);
    for p in providers.as_array().unwrap() {
        assert!(p["metadata"]["display_name"].is_string() && p["metadata"]["default_model"].is_string());
        assert!(!p["metadata"]["known_models"].as_array().unwrap().is_empty());
    }
    let ollama = providers.as_array().unwrap().iter().find(|p| p["name"] == "ollama").unwrap();
    let openai = providers.as_array().unwrap().iter().find(|p| p["name"] == "openai").unwrap();
    assert_eq!(ollama["is_configured"], true, "ollama needs no key");
    assert_eq!(openai["is_configured"], false, "openai without a key or a host is not configured");
    // The bundled-extension sync: goose's builtins, gosling's among them.
    for (name, enabled) in [
        ("developer", true),
        ("computercontroller", true),
        ("autovisualiser", false),
        ("memory", false),
        ("tutorial", false),
    ] {
        let config = json!({"type": "builtin", "name": name, "description": "", "display_name": name, "timeout": 300, "bundled": true});
        let r = d.post("/config/extensions", json!({"name": name, "config": config, "enabled": enabled}));
        assert_eq!(r.status, 200, "{name}: {}", r.body);
    }
    let exts = d.get_ok("/config/extensions", "/config/extensions");
    assert_eq!(exts["extensions"].as_array().unwrap().len(), 5);
    assert!(exts["extensions"].as_array().unwrap().iter().all(|e| e["bundled"] == true && e["type"] == "builtin"));
    let features = d.get_ok("/features", "/features");
    assert!(features["features"].is_object());
    d.get_ok("/sessions", "/sessions");
    let insights = d.get_ok("/sessions/insights", "/sessions/insights");
    assert_eq!((insights["totalSessions"].as_u64(), insights["totalTokens"].as_i64()), (Some(0), Some(0)));
    let info = d.post_ok("/config/canonical-model-info", json!({"provider": "openai", "model": "gpt-4o"}));
    assert_eq!(info["model_info"]["context_limit"], 128_000);
    let unknown = d.post_ok("/config/canonical-model-info", json!({"provider": "openai", "model": "my-local-model"}));
    assert!(unknown["model_info"].is_null() && unknown["source"].as_str().unwrap().contains("unknown"), "{unknown}");
    // Conditional calls: dictation, telemetry (accepted and dropped), set_provider.
    let dictation = d.get_ok("/dictation/config", "/dictation/config");
    assert_eq!(dictation, json!({}), "no dictation provider is configured");
    let t = d.post("/telemetry/event", json!({"event_name": "app_started", "properties": {"x": 1}}));
    assert_eq!((t.status, t.body.as_str()), (202, ""));
    Desktop::check_status("POST", "/telemetry/event", &t);
    d.post_ok("/config/set_provider", json!({"provider": "ollama", "model": "qwen3"}));
    let r = d.post("/config/read", json!({"key": "GOOSE_PROVIDER", "is_secret": false}));
    assert_eq!(r.json(), "ollama");
    let bad = d.post("/config/set_provider", json!({"provider": "bedrock", "model": "x"}));
    assert_eq!(bad.status, 400);
    assert!(bad.json()["message"].as_str().unwrap().contains("not supported by gosling"), "{}", bad.body);
    let bad = d.post("/config/set_provider", json!({"provider": "openai", "model": " "}));
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["message"], "`model` must name a model");
    // The first message: /agent/start with the enabled extensions (a real MCP server too).
    let enabled: Vec<Value> = exts["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["enabled"] == true)
        .map(|e| {
            let mut c = e.clone();
            c.as_object_mut().unwrap().remove("enabled");
            c
        })
        .chain([everything_stdio_config(peers, "everything")])
        .collect();
    let work = std::env::temp_dir();
    let started = d.post_ok("/agent/start", json!({"working_dir": work, "extension_overrides": enabled}));
    let id = started["id"].as_str().unwrap().to_string();
    let listed = d.get_ok("/sessions", "/sessions");
    let s = listed["sessions"].as_array().unwrap().iter().find(|s| s["id"] == id.as_str()).expect("listed");
    assert!(s["name"].is_string() && s["created_at"].is_string() && s["message_count"].is_u64());
    // (f) opening it: the event stream first, then resume and the rest.
    let mut events = d.events(&id, None);
    assert!(matches!(events.next(), Some(Frame::Ping(0))), "a ping at once, n from 0");
    let resumed = d.post_ok("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    let results = resumed["extension_results"].as_array().unwrap();
    let by_name = |n: &str| results.iter().find(|r| r["name"] == n).unwrap_or_else(|| panic!("{n} in {results:?}"));
    assert_eq!(by_name("developer")["success"], true);
    assert_eq!(by_name("everything")["success"], true);
    let cc = by_name("computercontroller");
    assert_eq!(cc["success"], false, "goose's own builtin is reported, not fatal");
    assert!(cc["error"].as_str().unwrap().contains("not available in gosling"), "{cc}");
    assert!(resumed["session"]["conversation"].is_array());
    let r = d.post("/agent/update_from_session", json!({"session_id": id}));
    assert_eq!(r.status, 200, "{}", r.body);
    Desktop::check_status("POST", "/agent/update_from_session", &r);
    let apps = d.get_ok(&format!("/agent/list_apps?session_id={id}"), "/agent/list_apps");
    assert!(apps["apps"].is_array());
    let tools = d.get(&format!("/agent/tools?session_id={id}"));
    assert_eq!(tools.status, 200);
    assert!(tools.json().as_array().unwrap().len() > 5, "developer and everything tools");
    let session = d.get_ok(&format!("/sessions/{id}"), "/sessions/{session_id}");
    assert!(session["working_dir"].is_string() && session["name"].is_string());
    let sx = d.get_ok(&format!("/sessions/{id}/extensions"), "/sessions/{session_id}/extensions");
    let names: Vec<&str> = sx["extensions"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"everything") && names.contains(&"developer"), "{names:?}");
    // The mode menu and search.
    let r = d.post("/agent/update_session", json!({"session_id": id, "goose_mode": "approve"}));
    assert_eq!(r.status, 200, "{}", r.body);
    Desktop::check_status("POST", "/agent/update_session", &r);
    assert_eq!(d.get(&format!("/sessions/{id}")).json()["goose_mode"], "approve");
    let r = d.post("/agent/update_session", json!({"session_id": id, "goose_mode": "yolo"}));
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("is not a mode"), "{}", r.body);
    Desktop::check_status("POST", "/agent/update_session", &r);
    let r = d.post("/agent/update_session", json!({"session_id": "20000101_1", "goose_mode": "auto"}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "Session 20000101_1 not found");
    let found = d.get_ok("/sessions/search?query=new%20chat", "/sessions/search");
    assert!(found.as_array().unwrap().iter().any(|s| s["id"] == id.as_str()), "{found}");
    let none = d.get_ok("/sessions/search?query=zebra-unicorn", "/sessions/search");
    assert_eq!(none, json!([]));
    let q = d.get("/sessions/search");
    assert_eq!(q.status, 400);
    assert!(q.json()["message"].as_str().unwrap().contains("missing the `query` query parameter"), "{}", q.body);
    Desktop::check_status("GET", "/sessions/search", &q);
    let q = d.get("/sessions/search?query=x&limit=many");
    assert_eq!(q.status, 400);
    assert_eq!(q.json()["message"], "limit=\"many\" is not a number");
    let slash = d.get_ok("/config/slash_commands", "/config/slash_commands");
    assert!(slash["commands"].is_array());
    // Unknown sessions: 404 for the stream (empty body) and the extensions.
    let r = d.get("/sessions/20000101_1/events");
    assert_eq!((r.status, r.body.as_str()), (404, ""));
    Desktop::check_status("GET", "/sessions/{id}/events", &r);
    let r = d.get("/sessions/20000101_1/extensions");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "Session 20000101_1 not found");
    Desktop::check_status("GET", "/sessions/{session_id}/extensions", &r);
    let r = d.post("/agent/update_from_session", json!({"session_id": "20000101_1"}));
    assert_eq!(r.status, 424);
    assert!(r.json()["message"].as_str().unwrap().contains("Agent not initialized"), "{}", r.body);
    Desktop::check_status("POST", "/agent/update_from_session", &r);
    drop(events);
}

#[test]
fn b_a_message_calls_a_real_tool_after_confirmation_two_followers_and_a_reconnect() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let d = Desktop::start(&llm_env(&mock.openai_host()));
    let mut everything = everything_stdio_config(peers, "everything");
    everything["available_tools"] = json!(["echo"]);
    // Settings given in the environment read as goose reads them; credentials never do.
    let read = |key: &str| d.post("/config/read", json!({"key": key, "is_secret": false})).json();
    assert_eq!(read("GOOSE_PROVIDER"), "openai", "Desktop skips its provider picker");
    assert_eq!(read("GOOSE_MODEL"), "mock-model");
    assert_eq!(read("GOOSE_SERVER__SECRET_KEY"), Value::Null, "the secret key is never read back");
    assert_eq!(read("OPENAI_HOST"), Value::Null, "only GOOSE_* settings come from the environment");
    let id = start_and_open(&d, vec![everything]);
    d.post_ok("/agent/update_session", json!({"session_id": id, "goose_mode": "approve"}));
    // Two clients follow the session; a third will leave mid-turn and come back.
    let mut first = d.events(&id, None);
    let mut second = d.events(&id, None);
    let mut leaving = d.events(&id, None);
    let rid = d.send(&id, "Please echo hello through the tool");
    let ask = first.until(Duration::from_secs(60), |e| {
        e["type"] == "Message" && e["message"]["content"][0]["type"] == "actionRequired"
    });
    let data = &ask.last().unwrap().1["message"]["content"][0]["data"];
    assert_eq!(data["actionType"], "toolConfirmation");
    assert_eq!(data["toolName"], "everything__echo");
    // The one that leaves has seen the confirmation request, then goes.
    let seen = leaving.until(Duration::from_secs(30), |e| e["message"]["content"][0]["type"] == "actionRequired");
    let last_id = seen.last().unwrap().0.unwrap();
    drop(leaving);
    // A second message while this one runs: goose's 400.
    let busy =
        d.post(&format!("/sessions/{id}/reply"), json!({"request_id": request_id(), "user_message": user_text("x")}));
    assert_eq!(busy.status, 400);
    assert_eq!(busy.json()["message"], "Session already has an active request. Cancel it first.");
    Desktop::check_status("POST", "/sessions/{id}/reply", &busy);
    // A new follower now learns which request is in flight.
    let mut late = d.events(&id, Some(last_id));
    match late.next() {
        Some(Frame::Event { id: None, data }) => {
            assert_eq!(data, json!({"type": "ActiveRequests", "request_ids": [rid]}));
        }
        other => panic!("ActiveRequests first, without an id: line: {other:?}"),
    }
    let r = d.post(
        "/action-required/tool-confirmation",
        json!({"sessionId": id, "id": data["id"], "action": "allow_once", "principalType": "Tool"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "delivered");
    let rest = first.until(Duration::from_secs(60), is_finish);
    let all_first: Vec<(Option<u64>, Value)> = ask.into_iter().chain(rest).collect();
    assert_desktop_fields(&all_first, &rid);
    let responses = contents(&all_first, "toolResponse");
    assert_eq!(responses.len(), 1, "{all_first:?}");
    assert_eq!(responses[0]["toolResult"]["status"], "success");
    assert!(responses[0]["toolResult"]["value"]["content"][0]["text"].as_str().unwrap().contains("Echo"));
    assert!(!contents(&all_first, "text").is_empty(), "the model answered after the tool result");
    assert_eq!(all_first.last().unwrap().1["reason"], "stop");
    // The second follower saw exactly the same events.
    let all_second = second.until(Duration::from_secs(30), is_finish);
    assert_eq!(all_second, all_first, "two followers, one stream");
    // The reconnect with Last-Event-ID got exactly what came after it.
    let resumed = late.until(Duration::from_secs(30), is_finish);
    let after: Vec<(Option<u64>, Value)> = all_first.iter().filter(|(i, _)| i.unwrap() > last_id).cloned().collect();
    assert_eq!(resumed, after, "nothing lost, nothing repeated");
    // A client that was away for long enough is told to reload: its id is older than the
    // buffer only after 512 more events, so here a replay from 0 gives everything instead.
    let mut replay = d.events(&id, None);
    let everything_again = replay.until(Duration::from_secs(30), is_finish);
    assert_eq!(everything_again, all_first);
    // The stream stays open after Finish: pings keep coming, numbered, every 500 ms. The
    // interval is measured over four of them: one ping read late (a loaded machine) moves it
    // by a quarter of that delay, where a single gap would take all of it.
    let mut pings = Vec::new();
    while pings.len() < 6 {
        if let Some(Frame::Ping(n)) = replay.next() {
            pings.push((n, Instant::now()));
        }
    }
    let numbers: Vec<u64> = pings.iter().map(|p| p.0).collect();
    assert_eq!(numbers, (pings[0].0..pings[0].0 + 6).collect::<Vec<_>>(), "numbered in order");
    let gap = (pings[5].1 - pings[1].1) / 4;
    assert!(gap > Duration::from_millis(300) && gap < Duration::from_millis(1500), "every 500 ms: {gap:?}");
    let saved = d.get_ok(&format!("/sessions/{id}"), "/sessions/{session_id}");
    assert!(saved["message_count"].as_u64().unwrap() >= 4, "{saved}");
}

#[test]
fn c_cancel_mid_turn_then_a_new_message() {
    let peers = require_peers!();
    // A slow stream (a token every 200 ms for 20 s), then a tool call that runs for 30 s,
    // then a quick answer.
    let mut slow = Reply::sse(&[oa_text("thinking")]);
    for _ in 0..100 {
        slow = slow.then(Step::Sleep(Duration::from_millis(200))).then(Step::Send(oa_text(".").into_bytes()));
    }
    let llm = FakeLlm::start(vec![
        slow,
        Reply::sse(&[
            oa_tool(
                0,
                Some(("long", "everything__trigger-long-running-operation")),
                "{\"duration\": 30, \"steps\": 30}",
            ),
            oa_finish("tool_calls"),
            OA_DONE.to_string(),
        ]),
        text_turn("fresh answer"),
    ]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let mut everything = everything_stdio_config(peers, "everything");
    everything["available_tools"] = json!(["trigger-long-running-operation"]);
    let id = start_and_open(&d, vec![everything]);
    let mut events = d.events(&id, None);
    // Cancel while the model streams: the LLM connection is dropped, Finish follows.
    let rid = d.send(&id, "think hard");
    events.until(Duration::from_secs(30), |e| e["type"] == "Message");
    let t = Instant::now();
    let r = d.post(&format!("/sessions/{id}/cancel"), json!({"request_id": rid}));
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    Desktop::check_status("POST", "/sessions/{id}/cancel", &r);
    let finish = events.until(Duration::from_secs(30), is_finish);
    assert_eq!(finish.last().unwrap().1["chat_request_id"], rid.as_str());
    assert!(wait_for(Duration::from_secs(30), || llm.client_gone().then_some(())).is_some(), "LLM stream dropped");
    assert_well_under(t.elapsed(), Duration::from_secs(20), "the model's stream dropped at the cancel, not at its end");
    // Cancel while a tool runs: the MCP server gets notifications/cancelled.
    let rid = d.send(&id, "run the long thing");
    events.until(Duration::from_secs(20), |e| {
        e["type"] == "Notification" && e["message"]["method"] == "notifications/progress"
    });
    let r = d.post(&format!("/sessions/{id}/cancel"), json!({"request_id": rid}));
    assert_eq!(r.status, 200);
    let finish = events.until(Duration::from_secs(30), is_finish);
    assert_eq!(finish.last().unwrap().1["chat_request_id"], rid.as_str());
    let cancelled = wait_for(Duration::from_secs(30), || {
        d.server.stderr().contains("abandoned (operation cancelled)").then_some(())
    });
    assert!(cancelled.is_some(), "the tool call was cancelled with notifications/cancelled");
    // A new message is accepted right after, and answered.
    let rid = d.send(&id, "and now?");
    let done = events.until(Duration::from_secs(20), is_finish);
    assert_desktop_fields(&done, &rid);
    let text: String = contents(&done, "text").iter().map(|c| c["text"].as_str().unwrap().to_string()).collect();
    assert_eq!(text, "fresh answer");
    assert_eq!(llm.requests().len(), 3);
    // The refusals Desktop can meet, each with goose's message.
    let r = d.post(&format!("/sessions/{id}/reply"), json!({"request_id": "42", "user_message": user_text("x")}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "request_id must be a valid UUID");
    Desktop::check_status("POST", "/sessions/{id}/reply", &r);
    let r = d.post("/sessions/20000101_1/reply", json!({"request_id": request_id(), "user_message": user_text("x")}));
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "Session 20000101_1 not found");
    Desktop::check_status("POST", "/sessions/{id}/reply", &r);
    let other = start_and_open(&d, vec![]);
    let r = d.post(&format!("/sessions/{other}/cancel"), json!({"request_id": request_id()}));
    assert_eq!(r.status, 404, "no event stream yet");
    assert!(r.json()["message"].as_str().unwrap().contains("no event stream"), "{}", r.body);
    // A session whose agent was stopped: goose's 424.
    assert_eq!(d.post("/agent/stop", json!({"session_id": other})).status, 200);
    let r = d
        .post(&format!("/sessions/{other}/reply"), json!({"request_id": request_id(), "user_message": user_text("x")}));
    assert_eq!(r.status, 424);
    assert!(r.json()["message"].as_str().unwrap().starts_with("Agent not initialized"), "{}", r.body);
    Desktop::check_status("POST", "/sessions/{id}/reply", &r);
}

#[test]
fn d_extensions_page_and_e_a_deep_link() {
    let peers = require_peers!();
    let d = Desktop::start(&[]);
    let id = start_and_open(&d, vec![]);
    // No model configured: the request is accepted, its Error says what to set, Finish follows.
    let mut events = d.events(&id, None);
    let rid = d.send(&id, "hello?");
    let failed = events.until(Duration::from_secs(30), is_finish);
    assert_desktop_fields(&failed, &rid);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].1["type"], "Error");
    assert!(failed[0].1["error"].as_str().unwrap().contains("GOOSE_PROVIDER"), "{failed:?}");
    drop(events);
    // (d) Add: the env var as a secret, then the extension, then the two GETs.
    let r = d.post_ok("/config/upsert", json!({"key": "EVERYTHING_TOKEN", "value": "t0k3n", "is_secret": true}));
    assert!(r.is_string());
    let mut config = everything_stdio_config(peers, "Everything");
    config["env_keys"] = json!(["EVERYTHING_TOKEN"]);
    d.post_ok("/config/extensions", json!({"name": "Everything", "config": config, "enabled": true}));
    d.get_ok("/config", "/config");
    let listed = d.get_ok("/config/extensions", "/config/extensions");
    let e = listed["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "Everything").unwrap().clone();
    assert_eq!((e["enabled"].as_bool(), e["type"].as_str()), (Some(true), Some("stdio")));
    assert!(!listed.to_string().contains("t0k3n"), "secrets are never shown");
    // Toggle off and on.
    for enabled in [false, true] {
        d.post_ok("/config/extensions", json!({"name": "Everything", "config": config, "enabled": enabled}));
        let listed = d.get_ok("/config/extensions", "/config/extensions");
        let e = listed["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "Everything").unwrap().clone();
        assert_eq!(e["enabled"], enabled);
    }
    // The menu under the chat box: into the running session and out again.
    let r = d.post("/agent/add_extension", json!({"session_id": id, "config": config}));
    assert_eq!(r.status, 200, "{}", r.body);
    let tools = d.get(&format!("/agent/tools?session_id={id}")).json();
    assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "everything__echo"), "{tools}");
    let sx = d.get_ok(&format!("/sessions/{id}/extensions"), "/sessions/{session_id}/extensions");
    assert!(sx["extensions"].as_array().unwrap().iter().any(|e| e["name"] == "Everything"));
    let r = d.post("/agent/remove_extension", json!({"session_id": id, "name": "Everything"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(d.get(&format!("/agent/tools?session_id={id}")).json().as_array().unwrap().is_empty());
    // Errors there carry a message (Desktop shows it in a toast).
    let r = d.post(
        "/agent/add_extension",
        json!({"session_id": id, "config": {"type": "stdio", "name": "x", "description": "", "cmd": "", "args": []}}),
    );
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("cmd"), "{}", r.body);
    // Remove.
    let r = d.call("DELETE", "/config/extensions/Everything", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = d.get_ok("/config/extensions", "/config/extensions");
    assert!(!listed["extensions"].as_array().unwrap().iter().any(|e| e["name"] == "Everything"));
    // (e) goose://extension?url=…: not installed yet → Desktop posts a streamable_http config.
    let peer = everything_http(peers);
    let installed = d.get_ok("/config/extensions", "/config/extensions");
    assert!(!installed.to_string().contains(&peer.url));
    let link_config = json!({"type": "streamable_http", "name": "linked", "description": "from a deep link", "uri": peer.url, "timeout": 300});
    d.post_ok("/config/extensions", json!({"name": "linked", "config": link_config, "enabled": true}));
    d.get_ok("/config", "/config");
    let installed = d.get_ok("/config/extensions", "/config/extensions");
    let e = installed["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "linked").unwrap().clone();
    assert_eq!((e["type"].as_str(), e["uri"].as_str()), (Some("streamable_http"), Some(peer.url.as_str())));
    // It works in a new session.
    let id = start_and_open(&d, vec![link_config]);
    let tools = d.get(&format!("/agent/tools?session_id={id}")).json();
    assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "linked__echo"), "{tools}");
}

#[test]
fn elicitation_reaches_the_person_and_their_answer_the_extension() {
    let peers = require_peers!();
    let call = || tool_turn("el", "everything__trigger-elicitation-request", "{}");
    let llm = FakeLlm::start(vec![call(), text_turn("thanks"), call(), text_turn("ok"), call(), text_turn("gave up")]);
    let mut env = llm_env(&llm.url());
    env.push(("GOSLING_ELICITATION_TIMEOUT_SECS", "2".into()));
    let d = Desktop::start(&env);
    let mut everything = everything_stdio_config(peers, "everything");
    everything["available_tools"] = json!(["trigger-elicitation-request"]);
    let id = start_and_open(&d, vec![everything]);
    let tools = d.get(&format!("/agent/tools?session_id={id}")).json();
    assert_eq!(tools[0]["name"], "everything__trigger-elicitation-request", "gosling declares elicitation");
    let tool_text = |events: &[(Option<u64>, Value)]| -> String {
        let r = contents(events, "toolResponse");
        assert_eq!(r.len(), 1, "{events:?}");
        r[0]["toolResult"]["value"]["content"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect()
    };
    let is_elicitation = |e: &Value| e["message"]["content"][0]["data"]["actionType"] == "elicitation";
    let mut events = d.events(&id, None);

    // 1. On the session stream, answered through /sessions/{id}/reply: accept with content.
    let rid = d.send(&id, "ask me");
    let asked = events.until(Duration::from_secs(20), is_elicitation);
    let data = asked.last().unwrap().1["message"]["content"][0]["data"].clone();
    assert!(data["message"].as_str().unwrap().contains("Please provide"), "{data}");
    assert_eq!(data["requested_schema"]["required"], json!(["name"]));
    let response = json!({"id": format!("u-{}", request_id()), "role": "user", "created": 1735725601, "metadata": {"userVisible": false, "agentVisible": false},
        "content": [{"type": "actionRequired", "data": {"actionType": "elicitationResponse", "id": data["id"], "user_data": {"name": "Ada Lovelace", "check": true}}}]});
    let answered =
        d.post(&format!("/sessions/{id}/reply"), json!({"request_id": request_id(), "user_message": response}));
    assert_eq!(answered.status, 200, "answers the elicitation instead of starting a request: {}", answered.body);
    let done = events.until(Duration::from_secs(20), is_finish);
    assert_desktop_fields(&done, &rid);
    let text = tool_text(&done);
    assert!(text.contains("User provided the requested information") && text.contains("Ada Lovelace"), "{text}");

    // 2. On a /reply stream, answered through the confirmation route: deny → decline.
    let body = json!({"session_id": id, "user_message": user_text("ask me again")});
    let mut reply = d.reply_stream(&body);
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let elicit_id = loop {
        assert!(Instant::now() < deadline, "no elicitation on /reply: {seen}");
        let mut line = String::new();
        reply.read_line(&mut line).unwrap();
        seen.push_str(&line);
        if let Some(j) = line.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(j.trim()).unwrap();
            if is_elicitation(&v) {
                break v["message"]["content"][0]["data"]["id"].as_str().unwrap().to_string();
            }
        }
    };
    let r =
        d.post("/action-required/tool-confirmation", json!({"sessionId": id, "id": elicit_id, "action": "deny_once"}));
    assert_eq!(r.json()["status"], "delivered", "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains("\"Finish\"") {
        assert!(Instant::now() < deadline, "no Finish on /reply: {seen}");
        let mut line = String::new();
        if reply.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    assert!(seen.contains("User declined to provide the requested information"), "{seen}");
    drop(reply);
    // An elicitation answer on /reply starts no turn; a late one reaches nobody.
    let late = json!({"role": "user", "created": 1735725602, "content": [{"type": "actionRequired", "data": {"actionType": "elicitationResponse", "id": elicit_id, "user_data": {"name": "late"}}}]});
    let r = d.post("/reply", json!({"session_id": id, "user_message": late}));
    assert_eq!(r.status, 200);
    let frames: Vec<&str> = r.body.split("\n\n").filter(|f| f.starts_with("data: ")).collect();
    assert_eq!(frames.len(), 1, "{}", r.body);
    assert!(frames[0].contains("\"Finish\""), "{}", r.body);
    assert!(d.server.stderr().contains("nothing is waiting for it"), "the late answer is logged");
    assert_eq!(llm.requests().len(), 4, "no model call for an answer");

    // 3. Nobody answers: cancelled at the deadline, and the turn goes on.
    let rid = d.send(&id, "ask me once more");
    events.until(Duration::from_secs(20), is_elicitation);
    let done = events.until(Duration::from_secs(20), is_finish);
    assert_desktop_fields(&done, &rid);
    assert!(tool_text(&done).contains("User cancelled the elicitation dialog"), "{done:?}");
    assert!(d.server.stderr().contains("no answer within"), "the timeout is logged");
}

/// The same flow with a 2026-07-28 server (issue 17): its elicitation is an input-required
/// result, not a request of its own, and reaches the person the same way.
#[test]
fn an_input_required_elicitation_of_a_2026_server_reaches_the_person() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![tool_turn("g", "py__greet", "{}"), text_turn("done")]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let py = json!({"type": "stdio", "name": "py", "description": "", "cmd": peers.python(), "args": [peers.get("MCP_PEER_PY_SERVER")], "timeout": 60,
        "protocol_version": "2026-07-28"});
    let id = start_and_open(&d, vec![py]);
    let mut events = d.events(&id, None);
    let rid = d.send(&id, "greet me");
    let (asked, text) = answer_the_elicitation(&d, &id, &mut events, &rid, json!({"name": "Grace"}));
    assert_eq!(asked["requested_schema"]["required"], json!(["name"]), "{asked}");
    assert_eq!(text, "Hello, Grace!", "the retry carried the answer");
}

/// Waits for the turn's elicitation (it must ask "What is your name?"), answers it with
/// `user_data` as Desktop does, and waits for the turn's end: the question, and the text of the
/// one tool result.
fn answer_the_elicitation(d: &Desktop, id: &str, events: &mut Events, rid: &str, user_data: Value) -> (Value, String) {
    let is_elicitation = |e: &Value| e["message"]["content"][0]["data"]["actionType"] == "elicitation";
    let asked = events.until(Duration::from_secs(30), is_elicitation);
    let data = asked.last().unwrap().1["message"]["content"][0]["data"].clone();
    assert_eq!(data["message"], "What is your name?", "{data}");
    let response = json!({"id": format!("u-{}", request_id()), "role": "user", "created": 1735725601, "metadata": {"userVisible": false, "agentVisible": false},
        "content": [{"type": "actionRequired", "data": {"actionType": "elicitationResponse", "id": data["id"], "user_data": user_data}}]});
    let answered =
        d.post(&format!("/sessions/{id}/reply"), json!({"request_id": request_id(), "user_message": response}));
    assert_eq!(answered.status, 200, "{}", answered.body);
    let done = events.until(Duration::from_secs(30), is_finish);
    assert_desktop_fields(&done, rid);
    let r = contents(&done, "toolResponse");
    assert_eq!(r.len(), 1, "{done:?}");
    let text =
        r[0]["toolResult"]["value"]["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect();
    (data, text)
}

/// Issue 28: a server written for sessions asks with `ctx.elicit()` (the Python SDK 2.3); on
/// gosling's default revision the request reaches the person through the HTTP API's event
/// stream, and the answer reaches the tool.
#[test]
fn a_ctx_elicit_of_a_session_server_reaches_the_person_by_default() {
    let peers = require_peers!();
    let llm = FakeLlm::start(vec![tool_turn("h", "py__hello", "{}"), text_turn("done")]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let peer = crate::support::py_http(peers, "");
    let py = json!({"type": "streamable_http", "name": "py", "description": "", "uri": peer.url, "timeout": 60});
    let id = start_and_open(&d, vec![py]);
    let mut events = d.events(&id, None);
    let rid = d.send(&id, "say hello");
    let (_, text) = answer_the_elicitation(&d, &id, &mut events, &rid, json!({"name": "Ada"}));
    assert_eq!(text, "Hello Ada!", "the person's answer reached the tool");
}

/// The person's answer to the sampling question open on `events` (checked to name `extension`
/// and show `shown`); `user_data` null declines, `{}` allows once, `{"always": true}` grants.
fn answer_sampling(d: &Desktop, id: &str, events: &mut Events, extension: &str, shown: &str, user_data: Value) {
    let is_ask = |e: &Value| e["type"] == "Message" && e["message"]["content"][0]["type"] == "actionRequired";
    let answer = |data: &Value, user_data: Value| {
        let response = json!({"id": format!("u-{}", request_id()), "role": "user", "created": 1735725601, "metadata": {"userVisible": false, "agentVisible": false},
            "content": [{"type": "actionRequired", "data": {"actionType": "elicitationResponse", "id": data["id"], "user_data": user_data}}]});
        let r = d.post(&format!("/sessions/{id}/reply"), json!({"request_id": request_id(), "user_message": response}));
        assert_eq!(r.status, 200, "{}", r.body);
    };
    // The question this test caused is the one showing `shown`; another (an extension's own
    // sampling request, e.g. the flood server's unprompted one when it lands in the turn) is
    // declined and the wait goes on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let data = loop {
        let asked = events.until(deadline.saturating_duration_since(Instant::now()), is_ask);
        let data = asked.last().unwrap().1["message"]["content"][0]["data"].clone();
        assert_eq!(data["actionType"], "elicitation", "{data}");
        let message = data["message"].as_str().unwrap();
        if message.contains(shown) {
            assert!(message.contains(&format!("{extension} wants to use the model")), "{message}");
            break data;
        }
        answer(&data, Value::Null);
    };
    assert_eq!(data["requested_schema"]["properties"]["always"]["type"], "boolean", "{data}");
    answer(&data, user_data);
}

/// An extension's `sampling/createMessage` (issue 16) goes to the session's model only when
/// the person allows it, in every mode (issue 27): auto mode asks too, approve mode asks after
/// the tool's confirmation; a denial reaches the server as an error; every request is audited.
#[test]
fn sampling_goes_to_the_session_model_and_approve_mode_asks_first() {
    let peers = require_peers!();
    let call = || tool_turn("c", "py__capital", "{}");
    let text = text_turn;
    // Auto: the turn's call, the server's sampling request once allowed, the final answer.
    // Approve: the same after the tool's confirmation; then a call whose sampling is denied.
    let llm = FakeLlm::start(vec![
        call(),
        text("Paris"),
        text("done"),
        call(),
        text("Lyon"),
        text("ok"),
        call(),
        text("denied"),
    ]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let py = json!({"type": "stdio", "name": "py", "description": "", "cmd": peers.python(), "args": [peers.get("MCP_PEER_PY_SERVER")], "timeout": 60});
    let id = start_and_open(&d, vec![py]);
    let mut events = d.events(&id, None);
    let tool_text = |done: &[(Option<u64>, Value)]| -> String {
        let r = contents(done, "toolResponse");
        assert_eq!(r.len(), 1, "{done:?}");
        r[0]["toolResult"].to_string()
    };

    // Auto mode: no tool confirmation, but the sampling request is asked about.
    d.send(&id, "capital?");
    answer_sampling(&d, &id, &mut events, "py", "capital of France", json!({}));
    let done = events.until(Duration::from_secs(30), is_finish);
    assert!(tool_text(&done).contains("The model said: Paris"), "{done:?}");
    let sampled = &llm.requests()[1].body;
    assert_eq!(sampled["messages"][0]["content"], "Answer in one word.", "the server's system prompt: {sampled}");
    assert!(sampled["messages"][1].to_string().contains("capital of France"), "{sampled}");
    assert!(sampled.get("tools").is_none(), "a sampling request offers the model no tools: {sampled}");
    assert_eq!(sampled["max_tokens"], 50, "the server's maxTokens: {sampled}");
    assert!(llm.requests()[0].body.get("max_tokens").is_none(), "a turn sets no cap");

    // Approve mode: the tool is confirmed, then the sampling request is asked about.
    d.post_ok("/agent/update_session", json!({"session_id": id, "goose_mode": "approve"}));
    // The tool's confirmation: the question this turn causes first (not any question).
    let is_confirmation = |e: &Value| {
        e["type"] == "Message"
            && e["message"]["content"][0]["type"] == "actionRequired"
            && e["message"]["content"][0]["data"]["actionType"] == "toolConfirmation"
    };
    let confirm_then_answer = |events: &mut Events, allow: bool| {
        let asked = events.until(Duration::from_secs(30), is_confirmation);
        let data = asked.last().unwrap().1["message"]["content"][0]["data"].clone();
        assert_eq!(data["actionType"], "toolConfirmation", "{data}");
        let r = d.post(
            "/action-required/tool-confirmation",
            json!({"sessionId": id, "id": data["id"], "action": "allow_once", "principalType": "Tool"}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        answer_sampling(&d, &id, events, "py", "capital of France", if allow { json!({}) } else { Value::Null });
        events.until(Duration::from_secs(30), is_finish)
    };
    d.send(&id, "capital again?");
    let done = confirm_then_answer(&mut events, true);
    assert!(tool_text(&done).contains("The model said: Lyon"), "{done:?}");
    d.send(&id, "and once more?");
    let done = confirm_then_answer(&mut events, false);
    let t = tool_text(&done);
    assert!(
        t.contains("User rejected sampling request") && t.contains("declined"),
        "the denial reaches the server: {t}"
    );
    assert_eq!(llm.requests().len(), 8, "3 + 3 + 2: no model call for the denied sampling");

    let audit = std::fs::read_to_string(d.server.home.join("state/audit.jsonl")).unwrap();
    let sampling: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["tool"] == "sampling/createMessage")
        .collect();
    let statuses: Vec<&str> = sampling.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["ok", "ok", "refused"], "{audit}");
    assert!(sampling.iter().all(|e| e["extension"] == "py" && e["session"] == id.as_str()), "{audit}");
}

/// A stdio extension (the fake server's `sampling_flood` mode) whose tool `flood` sends
/// sampling requests; the tool's result summarises the answers.
fn flood_extension() -> Value {
    let script = manifest_dir().join("tests/fakes/bad_mcp_stdio.py");
    json!({"type": "stdio", "name": "fl", "description": "", "cmd": "python3", "args": [script, "sampling_flood"], "timeout": 120})
}

/// A server asking for sampling on its own, outside any turn, is refused and told why: in chat
/// mode because chat mode runs no sampling, otherwise because no turn runs to ask the person.
#[test]
fn unprompted_sampling_is_refused_with_the_reason() {
    for (mode, why) in [("chat", "chat mode"), ("auto", "no turn is running")] {
        let llm = FakeLlm::start(vec![]);
        let mut env = llm_env(&llm.url());
        env.push(("GOOSE_MODE", mode.into()));
        let d = Desktop::start(&env);
        let record = d.server.home.join("fl-record.jsonl");
        let mut ext = flood_extension();
        ext["args"].as_array_mut().unwrap().push(json!(record));
        // The record is outside the working dir: granted to the confined server (issue 36).
        std::fs::write(&record, "").unwrap();
        ext["sandbox"] = json!({"paths": [record]});
        start_and_open(&d, vec![ext]);
        let deadline = Instant::now() + Duration::from_secs(30);
        let answer = loop {
            let text = std::fs::read_to_string(&record).unwrap_or_default();
            let found = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|m| m["id"] == "s-unprompted" && m.get("method").is_none());
            if let Some(a) = found {
                break a;
            }
            assert!(Instant::now() < deadline, "{mode}: no answer to the unprompted request: {text}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let message = answer["error"]["message"].as_str().unwrap_or_else(|| panic!("{mode}: {answer}"));
        assert!(message.contains("User rejected sampling request") && message.contains(why), "{mode}: {message}");
        assert!(llm.requests().is_empty(), "{mode}: the model was not used");
    }
}

fn flood_call(args: Value) -> Reply {
    tool_turn("f", "fl__flood", &args.to_string())
}

/// The `flood` tool's summary in a finished turn: `{"ok": [...], "errors": {...}, "meta": [...]}`.
fn flood_summary(done: &[(Option<u64>, Value)]) -> Value {
    let r = contents(done, "toolResponse");
    assert_eq!(r.len(), 1, "{done:?}");
    let text = r[0]["toolResult"]["value"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{r:?}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// "Always" on the sampling question grants that extension sampling for the session: later
/// requests are answered without asking, at most 10 a turn (the rest refused with the reason);
/// a huge `maxTokens` reaches the model as 4,096 and the answer's `_meta` says it was clipped;
/// a prompt over 1 MiB is refused.
#[test]
fn a_sampling_grant_skips_the_question_but_not_the_bounds() {
    let text = text_turn;
    let mut script = vec![flood_call(json!({"count": 1, "maxTokens": 4_000_000_000u64})), text("first"), text("done")];
    script.push(flood_call(json!({"count": 12, "sequential": true})));
    script.extend((0..10).map(|i| text(&format!("answer {i}"))));
    script.push(text("done again"));
    script.push(flood_call(json!({"count": 1, "padding": 1_100_000})));
    script.push(text("done at last"));
    let llm = FakeLlm::start(script);
    let d = Desktop::start(&llm_env(&llm.url()));
    let id = start_and_open(&d, vec![flood_extension()]);
    let mut events = d.events(&id, None);

    d.send(&id, "flood once");
    answer_sampling(&d, &id, &mut events, "fl", "flood question 0", json!({"always": true}));
    let done = events.until(Duration::from_secs(30), is_finish);
    let summary = flood_summary(&done);
    assert_eq!(summary["ok"], json!(["first"]), "{summary}");
    assert_eq!(llm.requests()[1].body["max_tokens"], 4096, "maxTokens clipped: {}", llm.requests()[1].body);
    let clipped = &summary["meta"][0]["gosling/maxTokensClipped"];
    assert_eq!(
        (clipped["requested"].as_u64(), clipped["used"].as_u64()),
        (Some(4_000_000_000), Some(4096)),
        "{summary}"
    );

    // Granted: 12 requests one after another, none asked about, 10 answered, 2 over the limit.
    d.send(&id, "flood twelve");
    let done = events.until(Duration::from_secs(60), is_finish);
    let asked = done.iter().filter(|(_, e)| e["message"]["content"][0]["type"] == "actionRequired").count();
    assert_eq!(asked, 0, "a granted extension is not asked again: {done:?}");
    let summary = flood_summary(&done);
    let ok: Vec<String> = (0..10).map(|i| format!("answer {i}")).collect();
    assert_eq!(summary["ok"], json!(ok), "{summary}");
    let errors = summary["errors"].as_object().unwrap();
    assert_eq!(errors.len(), 1, "{summary}");
    let (why, n) = errors.iter().next().unwrap();
    assert!(why.contains("per-turn limit") && why.contains("10"), "{why}");
    assert_eq!(n, 2, "{summary}");
    assert_eq!(llm.requests().len(), 3 + 12, "no model call for the refused ones");

    // A prompt over 1 MiB is refused, grant or not, without reaching the model.
    d.send(&id, "flood a big one");
    let done = events.until(Duration::from_secs(60), is_finish);
    let summary = flood_summary(&done);
    let why = summary["errors"].as_object().unwrap().keys().next().cloned().unwrap_or_default();
    assert!(why.contains("at most 1048576 bytes"), "{summary}");
    assert_eq!(llm.requests().len(), 3 + 12 + 2, "no model call for the oversized one");
}

/// A server that sends 200 sampling requests at once gets a bounded number asked about (nobody
/// answers them here, so they are refused after the elicitation deadline) and every other one
/// refused at once, with the reason; gosling's threads and peak memory stay bounded.
#[test]
fn a_sampling_flood_is_refused_with_bounded_threads_and_memory() {
    let text = text_turn;
    let llm = FakeLlm::start(vec![flood_call(json!({"count": 200, "maxTokens": 100})), text("done")]);
    let mut env = llm_env(&llm.url());
    env.push(("GOSLING_ELICITATION_TIMEOUT_SECS", "2".into()));
    let d = Desktop::start(&env);
    let id = start_and_open(&d, vec![flood_extension()]);
    let mut events = d.events(&id, None);
    let pid = d.server.pid();
    let (threads_before, hwm_before) = (proc_status(pid, "Threads:"), proc_status(pid, "VmHWM:"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(Ordering::SeqCst) {
                most = most.max(proc_status(pid, "Threads:"));
                std::thread::sleep(Duration::from_millis(5));
            }
            most
        })
    };
    d.send(&id, "flood");
    let done = events.until(Duration::from_secs(60), is_finish);
    stop.store(true, Ordering::SeqCst);
    let most_threads = watcher.join().unwrap();
    let summary = flood_summary(&done);
    assert_eq!(summary["ok"], json!([]), "nobody allowed any: {summary}");
    let errors = summary["errors"].as_object().unwrap();
    let total: u64 = errors.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(total, 200, "every request is answered with an error: {summary}");
    let count =
        |needle: &str| errors.iter().filter(|(k, _)| k.contains(needle)).map(|(_, n)| n.as_u64().unwrap()).sum::<u64>();
    assert!((1..=4).contains(&count("nobody answered")), "a few were asked and timed out: {summary}");
    assert!(count("too many") >= 196, "the rest were refused at once: {summary}");
    assert_eq!(llm.requests().len(), 2, "no request reached the model");
    assert!(most_threads <= threads_before + 12, "threads {threads_before} → at most {most_threads}");
    let hwm_after = proc_status(pid, "VmHWM:");
    assert!(hwm_after < hwm_before + 32 * 1024, "peak memory {hwm_before} kB → {hwm_after} kB");
}

/// The same round trip with llmock as the model: it calls the one tool offered, the server
/// asks for sampling, the person allows it, llmock answers that request (no tools offered), the tool returns it.
#[test]
fn sampling_round_trip_through_llmock() {
    let peers = require_peers!();
    let Some(mock) = Llmock::start(&[]) else { return };
    let d = Desktop::start(&llm_env(&mock.openai_host()));
    let py = json!({"type": "stdio", "name": "py", "description": "", "cmd": peers.python(), "args": [peers.get("MCP_PEER_PY_SERVER")], "timeout": 60, "available_tools": ["capital"]});
    let id = start_and_open(&d, vec![py]);
    let mut events = d.events(&id, None);
    d.send(&id, "What is the capital of France? Use the tool.");
    answer_sampling(&d, &id, &mut events, "py", "capital of France", json!({}));
    let done = events.until(Duration::from_secs(60), is_finish);
    let r = contents(&done, "toolResponse");
    assert_eq!(r.len(), 1, "{done:?}");
    let text = r[0]["toolResult"]["value"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let said = text.strip_prefix("The model said: ").unwrap_or_else(|| panic!("{r:?}"));
    assert!(!said.trim().is_empty(), "llmock's answer came back: {text}");
    let audit = std::fs::read_to_string(d.server.home.join("state/audit.jsonl")).unwrap();
    assert!(audit.lines().any(|l| l.contains("\"sampling/createMessage\"") && l.contains("\"ok\"")), "{audit}");
}

/// One turn per session, whichever route starts it: a `/reply` while the session API's turn
/// runs is refused on its stream (nothing saved), and the session API answers goose's busy 400
/// while a `/reply` turn runs.
#[test]
fn one_turn_per_session_across_reply_and_the_session_api() {
    let slow = || {
        let mut r = Reply::sse(&[oa_text("thinking")]);
        for _ in 0..100 {
            r = r.then(Step::Sleep(Duration::from_millis(200))).then(Step::Send(oa_text(".").into_bytes()));
        }
        r
    };
    let llm = FakeLlm::start(vec![slow(), slow()]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let id = start_and_open(&d, vec![]);
    let mut events = d.events(&id, None);

    // The session API's turn runs; a /reply meanwhile is refused and saves nothing.
    d.send(&id, "think hard");
    events.until(Duration::from_secs(30), |e| e["type"] == "Message");
    let r = d.post("/reply", json!({"session_id": id, "user_message": user_text("the second message")}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("already answering a message"), "{}", r.body);
    let conversation = d.get(&format!("/sessions/{id}")).json()["conversation"].to_string();
    assert!(!conversation.contains("the second message"), "{conversation}");
    d.post(&format!("/sessions/{id}/cancel"), json!({"request_id": ""}));
    events.until(Duration::from_secs(30), is_finish);

    // A /reply turn runs; the session API answers busy meanwhile.
    let mut reply = d.reply_stream(&json!({"session_id": id, "user_message": user_text("think again")}));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "the /reply turn never streamed");
        let mut line = String::new();
        reply.read_line(&mut line).unwrap();
        if line.starts_with("data: ") && line.contains("\"Message\"") {
            break;
        }
    }
    let r = d.post(
        &format!("/sessions/{id}/reply"),
        json!({"request_id": request_id(), "user_message": user_text("meanwhile")}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("already has an active request"), "{}", r.body);
    drop(reply);
    assert_eq!(llm.requests().len(), 2, "no model call for a refused message");
}

/// A client may send its next message the moment it sees Finish, on the event stream or on a
/// /reply stream: the session is free, and the turn's tokens saved, before Finish is sent.
#[test]
fn the_next_message_is_taken_the_moment_finish_is_seen() {
    const ROUNDS: usize = 12;
    let answer = |i: usize| {
        Reply::sse(&[oa_text(&format!("answer {i}")), oa_finish("stop"), oa_usage(10, 1), OA_DONE.to_string()])
    };
    let llm = FakeLlm::start((0..2 * ROUNDS).map(answer).collect());
    let d = Desktop::start(&llm_env(&llm.url()));
    let id = start_and_open(&d, vec![]);
    let mut events = d.events(&id, None);
    for round in 0..ROUNDS {
        // `send` asserts the message was taken (200), not refused as busy (400).
        d.send(&id, &format!("question {round}"));
        events.until(Duration::from_secs(30), is_finish);
        let session = d.get(&format!("/sessions/{id}")).json();
        assert_eq!(session["accumulated_output_tokens"], json!(2 * round + 1), "tokens saved before Finish");
        let mut reply =
            d.reply_stream(&json!({"session_id": id, "user_message": user_text(&format!("again {round}"))}));
        let mut seen = String::new();
        while !seen.contains("\"Finish\"") {
            let mut line = String::new();
            assert!(reply.read_line(&mut line).unwrap() > 0, "the /reply stream ended without Finish: {seen}");
            assert!(!line.contains("\"Error\""), "{line}");
            seen.push_str(&line);
        }
        // The next round's `send` follows at once.
        drop(reply);
    }
    assert_eq!(llm.requests().len(), 2 * ROUNDS);
}

/// Followers of a session's event stream hold no request slot: with room for one request at a
/// time, two windows can follow a session and requests are still served.
#[test]
fn event_stream_followers_hold_no_request_slot() {
    let d = Desktop::start(&[("GOSLING_MAX_REQUESTS", "1".into())]);
    let id = start_and_open(&d, vec![]);
    let _first = d.events(&id, None);
    let _second = d.events(&id, None);
    // A request that found the one slot held would wait for it (the server's slot wait) and
    // then be answered 503 with Retry-After, since the followers never end: a 200 says it got
    // the slot.
    let mut conn = BufReader::new(connect(&d.server.addr, &d.pin).expect("the pinned handshake"));
    let r = exchange_json(&mut conn, "GET", "/sessions", Some(SECRET), None).expect("an HTTPS exchange");
    assert_eq!(r.status, 200, "served, not refused for want of a slot: {}", r.body);
}

#[test]
fn mcp_apps_are_the_ui_resources_of_the_session_extensions() {
    let d = Desktop::start(&[]);
    let script = manifest_dir().join("tests/fakes/ui_app_mcp.py");
    let ext = json!({"type": "stdio", "name": "Clock App", "description": "", "cmd": "python3", "args": [script], "timeout": 30});
    let id = start_and_open(&d, vec![ext]);
    let apps = d.get_ok(&format!("/agent/list_apps?session_id={id}"), "/agent/list_apps");
    assert_eq!(
        apps,
        json!({"apps": [{"uri": "ui://clock/app", "name": "clock", "description": "A clock",
                         "mimeType": "text/html;profile=mcp-app", "mcpServers": ["clockapp"],
                         "width": 800, "height": 600, "resizable": true}]}),
        "only ui:// resources are apps"
    );
    // Without a session (or for one with no agent): none.
    assert_eq!(d.get_ok("/agent/list_apps", "/agent/list_apps"), json!({"apps": []}));
    assert_eq!(d.get_ok("/agent/list_apps?session_id=20000101_1", "/agent/list_apps"), json!({"apps": []}));
}

#[test]
fn a_follower_older_than_the_replay_buffer_is_told_to_reload() {
    let peers = require_peers!();
    let mut chunks: Vec<String> = (0..600).map(|i| oa_text(&format!("w{i} "))).collect();
    chunks.push(oa_finish("stop"));
    chunks.push(OA_DONE.to_string());
    let llm = FakeLlm::start(vec![Reply::sse(&chunks)]);
    let d = Desktop::start(&llm_env(&llm.url()));
    let mut everything = everything_stdio_config(peers, "everything");
    everything["available_tools"] = json!(["echo"]);
    let id = start_and_open(&d, vec![everything]);
    let mut events = d.events(&id, None);
    d.send(&id, "talk a lot");
    let all = events.until(Duration::from_secs(60), is_finish);
    assert_eq!(all.len(), 601, "600 chunks and Finish");
    let last = all.last().unwrap().0.unwrap();
    // Within the buffer: exactly the rest.
    let mut near = d.events(&id, Some(last - 3));
    let rest = near.until(Duration::from_secs(30), is_finish);
    assert_eq!(rest.iter().map(|(i, _)| i.unwrap()).collect::<Vec<_>>(), vec![last - 2, last - 1, last]);
    // Older than the 512 kept: one `id: 0` Error frame, then the stream ends.
    let mut far = d.events(&id, Some(1));
    let frames: Vec<Frame> = std::iter::from_fn(|| far.next()).collect();
    let errors: Vec<&Frame> = frames.iter().filter(|f| matches!(f, Frame::Event { .. })).collect();
    assert_eq!(errors.len(), 1, "{frames:?}");
    let Frame::Event { id: Some(0), data } = errors[0] else { panic!("id: 0 on the frame: {frames:?}") };
    assert_eq!(*data, json!({"type": "Error", "error": "Client too far behind — reload conversation"}));
}
