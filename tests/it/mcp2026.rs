//! MCP 2026-07-28 (issue 17): gosling's client against the Python SDK 2.x server
//! (scripts/peers/py_server.py), which is dual-era by default and legacy-only with `legacy`,
//! and the TypeScript SDK v2 server (scripts/peers/ts2_server.mjs), over stdio and Streamable
//! HTTP. Modern servers are spoken to in 2026-07-28 (server/discover,
//! `_meta` on every request, input-required results, subscriptions/listen); legacy ones get
//! the initialize handshake. The code above the client is the same for both: these tests use
//! the one `Client` API, and `gosling probe` for what a person sees.

use crate::require_peers;
use crate::support::*;
use gosling::mcp::client::{CallContext, Client, ClientOptions, ElicitationHandler};
use gosling::mcp::stdio::StdioSpec;
use gosling::mcp::streamable_http::HttpSpec;
use gosling::wire::mcp_types::{CallToolResult, ContentBlock, Tool};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What the person answered, and how many times they were asked.
struct Person {
    asked: Mutex<Vec<Value>>,
}

fn options(person: &Arc<Person>, pin: Option<&str>) -> ClientOptions {
    let p = person.clone();
    let elicit: ElicitationHandler = Arc::new(move |params: &Value| {
        p.asked.lock().unwrap().push(params.clone());
        json!({"action": "accept", "content": {"name": "Ada"}})
    });
    ClientOptions {
        extension: "py".into(),
        timeout: TIMEOUT,
        roots: Some(vec![std::path::PathBuf::from("/srv/gosling-roots-test")]),
        elicitation: Some(elicit),
        sampling: None,
        client_name: "gosling-test".into(),
        client_version: "0".into(),
        protocol_version: pin.map(str::to_string),
    }
}

/// Which peer server.
#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    /// The Python SDK 2.x; `true`: in its legacy-only mode.
    Python(bool),
    /// The TypeScript SDK v2.
    TypeScript,
}

/// A connected client, and the HTTP server process when there is one.
fn connect(peers: &Peers, sdk: Sdk, http: bool, person: &Arc<Person>, pin: Option<&str>) -> (Client, Option<PeerProc>) {
    let (program, mut args) = match sdk {
        Sdk::Python(_) => (peers.python().to_string(), vec![peers.get("MCP_PEER_PY_SERVER").to_string()]),
        Sdk::TypeScript => (peers.node().to_string(), vec![peers.get("MCP_PEER_TS2_SERVER").to_string()]),
    };
    if sdk == Sdk::Python(true) {
        args.push("legacy".into());
    }
    if http {
        let peer = spawn_http_peer("/mcp", |port| {
            let mut cmd = std::process::Command::new(&program);
            cmd.args(&args).arg("http").arg(port.to_string());
            cmd
        });
        let spec =
            HttpSpec { uri: peer.url.clone(), headers: vec![], timeout: TIMEOUT, extension: "py".into(), auth: None };
        (gosling::mcp::connect_http(&spec, options(person, pin)).expect("connect over HTTP"), Some(peer))
    } else {
        let spec = StdioSpec { cmd: program, args, ..Default::default() };
        (gosling::mcp::connect_stdio(&spec, options(person, pin)).expect("connect over stdio"), None)
    }
}

fn text(result: &Value) -> String {
    result["content"].as_array().map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect()).unwrap_or_default()
}

fn call_text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(ContentBlock::as_text).collect()
}

fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.clone()).collect()
}

/// One server, one era, one transport: everything a session does with it.
/// `pin`: the extension's `protocol_version` is 2026-07-28 (else gosling chooses).
fn speaks(sdk: Sdk, http: bool, pin: bool) {
    let peers = require_peers!();
    let person = Arc::new(Person { asked: Mutex::new(Vec::new()) });
    let (c, _peer) = connect(peers, sdk, http, &person, pin.then_some("2026-07-28"));
    let name = match sdk {
        Sdk::Python(true) => "legacy Python",
        Sdk::Python(false) => "dual-era Python",
        Sdk::TypeScript => "TypeScript v2",
    };
    let what = format!("{name} server over {}", if http { "HTTP" } else { "stdio" });

    // The era: the legacy handshake for a legacy server, and by default for a dual-era one
    // (its session keeps elicitation, sampling and state); the modern one when pinned.
    if !pin {
        assert_eq!(c.protocol_version(), "2025-11-25", "{what}");
        assert!(c.negotiation().starts_with("initialize answered 2025-11-25"), "{what}: {}", c.negotiation());
    } else {
        assert_eq!(c.protocol_version(), "2026-07-28", "{what}");
        assert!(c.negotiation().contains("server/discover offered 2026-07-28"), "{what}: {}", c.negotiation());
        let server = if sdk == Sdk::TypeScript { "ts2-peer" } else { "py-peer" };
        assert_eq!(c.server_info()["name"], server, "{what}: serverInfo from discover's _meta");
    }

    // Tools, resources, prompts.
    let tools = names(&c.list_tools().unwrap());
    for t in ["add", "echo", "greet", "add_tool"] {
        assert!(tools.contains(&t.to_string()), "{what}: {tools:?}");
    }
    let r = c.call_tool("add", Some(json!({"a": 20, "b": 22})), &CallContext::default()).unwrap();
    assert_eq!(call_text(&r), "42", "{what}: {r}");
    let (uri, greeting) =
        if sdk == Sdk::TypeScript { ("greeting://world", "Hello, world!") } else { ("greeting://bob", "Hello, bob!") };
    let r = c.read_resource(uri).unwrap();
    assert_eq!(r.contents[0].as_text(), Some(greeting), "{what}: {r}");
    let r = c.get_prompt("review", Some(json!({"code": "x = 1"}))).unwrap();
    assert!(r.messages[0].content.as_text().unwrap().contains("x = 1"), "{what}: {r}");

    // An elicitation inside a tool: a modern server returns input-required and gets the
    // answer on the retry; a legacy one asks with elicitation/create. Same handler either way.
    let r = c.call_tool("greet", Some(json!({})), &CallContext::default()).unwrap();
    assert_eq!(call_text(&r), "Hello, Ada!", "{what}: {r}");
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{what}: asked once: {asked:?}");
    assert_eq!(asked[0]["message"], "What is your name?", "{what}");

    // Roots, asked the same two ways (Python only: the TypeScript peer has no roots tool).
    if sdk != Sdk::TypeScript {
        let r = c.call_tool("roots", Some(json!({})), &CallContext::default()).unwrap();
        assert_eq!(call_text(&r), "file:///srv/gosling-roots-test", "{what}: {r}");
    }

    // List freshness: a tool added at run time shows up without a restart (modern:
    // subscriptions/listen; legacy: notifications/tools/list_changed).
    c.call_tool("add_tool", Some(json!({"name": "fresh"})), &CallContext::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = names(&c.list_tools().unwrap());
        if tools.contains(&"fresh".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: the new tool never appeared: {tools:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = c.call_tool("fresh", Some(json!({"text": "hi"})), &CallContext::default()).unwrap();
    assert_eq!(call_text(&r), "fresh:hi", "{what}: {r}");
    c.close();
}

#[test]
fn a_dual_era_server_over_stdio_is_spoken_to_in_2026_07_28_when_pinned() {
    speaks(Sdk::Python(false), false, true);
}

#[test]
fn a_dual_era_server_over_http_is_spoken_to_in_2026_07_28_when_pinned() {
    speaks(Sdk::Python(false), true, true);
}

#[test]
fn a_dual_era_server_over_stdio_gets_2025_11_25_by_default() {
    speaks(Sdk::Python(false), false, false);
}

#[test]
fn a_dual_era_server_over_http_gets_2025_11_25_by_default() {
    speaks(Sdk::Python(false), true, false);
}

#[test]
fn a_legacy_server_over_stdio_gets_the_initialize_handshake() {
    speaks(Sdk::Python(true), false, false);
}

#[test]
fn a_legacy_server_over_http_gets_the_initialize_handshake() {
    speaks(Sdk::Python(true), true, false);
}

#[test]
fn a_typescript_sdk_v2_server_over_stdio_is_spoken_to_in_2026_07_28_when_pinned() {
    speaks(Sdk::TypeScript, false, true);
}

#[test]
fn a_typescript_sdk_v2_server_over_http_is_spoken_to_in_2026_07_28_when_pinned() {
    speaks(Sdk::TypeScript, true, true);
}

/// `gosling probe` says which revision it chose and why, for both eras.
#[test]
fn probe_prints_the_negotiated_revision_and_why() {
    let peers = require_peers!();
    let home = TempDir::new("probe2026");
    // A legacy server and a dual-era one get the handshake first; a pinned legacy revision
    // too. (The modern revision when pinned: over HTTP, below.)
    for (legacy, pin, version, why) in [
        (false, None, "2025-11-25", "initialize answered 2025-11-25"),
        (true, None, "2025-11-25", "initialize answered 2025-11-25"),
        (true, Some("2025-06-18"), "2025-06-18", "protocol_version 2025-06-18 set for the extension"),
    ] {
        let mut cmd = gosling(&home);
        cmd.arg("probe");
        if let Some(p) = pin {
            cmd.args(["--protocol-version", p]);
        }
        cmd.args(["--", peers.python(), peers.get("MCP_PEER_PY_SERVER")]);
        if legacy {
            cmd.arg("legacy");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["protocolVersion"], version, "{v}");
        assert!(v["negotiation"].as_str().unwrap().contains(why), "{v}");
    }
    // A pin the server cannot speak is refused with what to do.
    let py = [peers.python(), peers.get("MCP_PEER_PY_SERVER"), "legacy"];
    let out = gosling(&home).args(["probe", "--protocol-version", "2026-07-28", "--"]).args(py).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("protocol_version is 2026-07-28") && err.contains("remove protocol_version"), "{err}");
    // A revision gosling does not know is a usage error.
    let out = gosling(&home).args(["probe", "--protocol-version", "2030-01-01", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2025-11-25, 2026-07-28"));
    // Over HTTP, the legacy server's session; and the dual-era server pinned to the modern
    // revision. (Pinned, gosling's first request is server/discover, which it gives at most
    // 10 s; over stdio those 10 s would include the Python server's start, which a loaded
    // machine can take longer for. Here the server listens before the probe starts.)
    let legacy = py_http(peers, "legacy");
    let dual = py_http(peers, "");
    for (url, pin, version, why) in [
        (&legacy.url, None, "2025-11-25", "initialize answered 2025-11-25"),
        (&dual.url, Some("2026-07-28"), "2026-07-28", "server/discover offered 2026-07-28"),
    ] {
        let mut cmd = gosling(&home);
        cmd.arg("probe").args(pin.map(|p| ["--protocol-version", p]).iter().flatten()).arg(url);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["protocolVersion"], version, "{v}");
        assert!(v["negotiation"].as_str().unwrap().starts_with(why), "{v}");
    }
}

/// issue 28: the subscriptions/listen stream stays open as long as the server keeps it, not
/// just the extension's timeout (+ 10 s, as the whole-body bound of every answer had it).
#[test]
fn the_listen_stream_stays_open_past_three_times_the_timeout() {
    let peers = require_peers!();
    let peer = py_http(peers, "");
    let person = Arc::new(Person { asked: Mutex::new(Vec::new()) });
    let timeout = Duration::from_secs(3);
    let spec = HttpSpec { uri: peer.url.clone(), headers: vec![], timeout, extension: "py".into(), auth: None };
    let c = gosling::mcp::connect_http(&spec, ClientOptions { timeout, ..options(&person, Some("2026-07-28")) })
        .expect("connect");
    let listens = || call_text(&c.call_tool("listens", Some(json!({})), &CallContext::default()).unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while listens() != "1" {
        assert!(Instant::now() < deadline, "no subscriptions/listen opened: {}", listens());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Past 3× the timeout and past timeout + 10 s (the old whole-body bound) from its opening:
    // still the one stream, watched all along for a second one.
    let reopened = wait_for(timeout * 3 + Duration::from_secs(8), || (listens() != "1").then(listens));
    assert_eq!(reopened, None, "the listen stream was opened again");
    // And it still carries the server's list changes.
    c.call_tool("add_tool", Some(json!({"name": "late"})), &CallContext::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !names(&c.list_tools().unwrap()).contains(&"late".to_string()) {
        assert!(Instant::now() < deadline, "the list change never came over the listen stream");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(listens(), "1");
    c.close();
}

/// issue 28: an argument the tool's schema marks `x-mcp-header` goes as an `Mcp-Param-*`
/// header too (the SDK refuses a modern call without it, -32020): through probe and the HTTP
/// API, with the extension pinned to 2026-07-28.
#[test]
fn an_x_mcp_header_argument_is_sent_as_an_mcp_param_header() {
    let peers = require_peers!();
    let peer = py_http(peers, "");
    let home = TempDir::new("xmcp");
    let out = gosling(&home)
        .args(["probe", "--protocol-version", "2026-07-28", "--call", "route", "--args"])
        .arg(r#"{"region": "eu-west-1", "text": "hi"}"#)
        .arg(&peer.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(text(&v), "eu-west-1 (header: eu-west-1): hi", "{v}");
    // A value that is not a plain header value travels base64-wrapped, and still matches.
    let out = gosling(&home)
        .args(["probe", "--protocol-version", "2026-07-28", "--call", "route", "--args"])
        .arg(r#"{"region": "zürich ", "text": "hi"}"#)
        .arg(&peer.url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(text(&v), "zürich  (header: =?base64?esO8cmljaCA=?=): hi", "{v}");

    let s = Server::start();
    let work = TempDir::new("xmcp-work");
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let ext = json!({"type": "streamable_http", "name": "py", "description": "", "uri": peer.url, "timeout": 30,
        "protocol_version": "2026-07-28"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = s.post(
        "/agent/call_tool",
        json!({"session_id": id, "name": "py__route", "arguments": {"region": "us-east-2", "text": "yo"}}),
    );
    assert_eq!(call.status, 200, "{}", call.text());
    assert!(call.text().contains("us-east-2 (header: us-east-2): yo"), "{}", call.text());
    // A protocol_version gosling does not speak is refused with the fix.
    let mut bad = ext.clone();
    bad["protocol_version"] = json!("2030-01-01");
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": bad}));
    assert_eq!(add.status, 400, "{}", add.text());
    assert!(add.text().contains("protocol_version") && add.text().contains("2026-07-28"), "{}", add.text());
}

/// issue 28: by default a dual-era server keeps what its session gives: `ctx.elicit()` reaches
/// the person (probe answers with the schema's defaults), and a per-session counter counts.
/// Pinned to 2026-07-28 the same server cannot ask (no session), which is why that is not the
/// default.
#[test]
fn by_default_a_session_keeps_elicitation_and_state() {
    let peers = require_peers!();
    let peer = py_http(peers, "");
    let home = TempDir::new("session-default");
    let hello = |pin: Option<&str>| {
        let mut cmd = gosling(&home);
        cmd.arg("probe");
        if let Some(p) = pin {
            cmd.args(["--protocol-version", p]);
        }
        let out = cmd.args(["--call", "hello", &peer.url]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        text(&serde_json::from_slice(&out.stdout).unwrap())
    };
    assert_eq!(hello(None), "Hello Ada!");
    assert!(hello(Some("2026-07-28")).starts_with("Hello Unknown!"));
    // Over stdio too.
    let out = gosling(&home)
        .args(["probe", "--call", "hello", "--", peers.python(), peers.get("MCP_PEER_PY_SERVER")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text(&serde_json::from_slice(&out.stdout).unwrap()), "Hello Ada!");

    // The counter through probe: three calls on its one connection, 1, 2, 3 by default; pinned
    // to 2026-07-28 (no session) the server cannot keep it.
    let counts = |pin: Option<&str>| {
        let mut cmd = gosling(&home);
        cmd.arg("probe");
        if let Some(p) = pin {
            cmd.args(["--protocol-version", p]);
        }
        let out = cmd.args(["--call", "count", "--times", "3", &peer.url]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array().unwrap().iter().map(text).collect::<Vec<String>>()
    };
    assert_eq!(counts(None), ["1", "2", "3"]);
    assert_ne!(counts(Some("2026-07-28")), ["1", "2", "3"]);

    // The counter, through the HTTP API: one session, 1, 2, 3.
    let s = Server::start();
    let work = TempDir::new("session-work");
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let ext = json!({"type": "streamable_http", "name": "py", "description": "", "uri": peer.url, "timeout": 30});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext}));
    assert_eq!(add.status, 200, "{}", add.text());
    let counts: Vec<String> = (0..3)
        .map(|_| {
            let call = s.post("/agent/call_tool", json!({"session_id": id, "name": "py__count", "arguments": {}}));
            assert_eq!(call.status, 200, "{}", call.text());
            text(&call.json())
        })
        .collect();
    assert_eq!(counts, ["1", "2", "3"]);

    // A legacy-only server (2025-11-25) through the same API.
    let legacy = py_http(peers, "legacy");
    let ext = json!({"type": "streamable_http", "name": "old", "description": "", "uri": legacy.url, "timeout": 30});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = s.post("/agent/call_tool", json!({"session_id": id, "name": "old__add", "arguments": {"a": 2, "b": 3}}));
    assert_eq!(call.status, 200, "{}", call.text());
    assert_eq!(text(&call.json()), "5");
}
