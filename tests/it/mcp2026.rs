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
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What the person answered, and how many times they were asked.
struct Person {
    asked: Mutex<Vec<Value>>,
}

fn options(person: &Arc<Person>) -> ClientOptions {
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
fn connect(peers: &Peers, sdk: Sdk, http: bool, person: &Arc<Person>) -> (Client, Option<PeerProc>) {
    let (program, mut args) = match sdk {
        Sdk::Python(_) => (peers.python().to_string(), vec![peers.get("MCP_PEER_PY_SERVER").to_string()]),
        Sdk::TypeScript => (peers.node().to_string(), vec![peers.get("MCP_PEER_TS2_SERVER").to_string()]),
    };
    if sdk == Sdk::Python(true) {
        args.push("legacy".into());
    }
    if http {
        let port = free_port();
        let mut cmd = std::process::Command::new(&program);
        cmd.args(&args).arg("http").arg(port.to_string());
        let peer = spawn_http_peer(cmd, port, "/mcp");
        let spec =
            HttpSpec { uri: peer.url.clone(), headers: vec![], timeout: TIMEOUT, extension: "py".into(), auth: None };
        (gosling::mcp::connect_http(&spec, options(person)).expect("connect over HTTP"), Some(peer))
    } else {
        let spec = StdioSpec { cmd: program, args, ..Default::default() };
        (gosling::mcp::connect_stdio(&spec, options(person)).expect("connect over stdio"), None)
    }
}

fn text(result: &Value) -> String {
    result["content"].as_array().map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect()).unwrap_or_default()
}

fn names(tools: &[Value]) -> Vec<String> {
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_string)).collect()
}

/// One server, one era, one transport: everything a session does with it.
fn speaks(sdk: Sdk, http: bool) {
    let peers = require_peers!();
    let person = Arc::new(Person { asked: Mutex::new(Vec::new()) });
    let (c, _peer) = connect(peers, sdk, http, &person);
    let legacy = sdk == Sdk::Python(true);
    let name = match sdk {
        Sdk::Python(true) => "legacy Python",
        Sdk::Python(false) => "dual-era Python",
        Sdk::TypeScript => "TypeScript v2",
    };
    let what = format!("{name} server over {}", if http { "HTTP" } else { "stdio" });

    // The era: modern when offered, else the handshake; and why.
    if legacy {
        assert_eq!(c.protocol_version(), "2025-06-18", "{what}");
        assert!(c.negotiation().starts_with("legacy: server/discover"), "{what}: {}", c.negotiation());
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
    assert_eq!(text(&r), "42", "{what}: {r}");
    let (uri, greeting) =
        if sdk == Sdk::TypeScript { ("greeting://world", "Hello, world!") } else { ("greeting://bob", "Hello, bob!") };
    let r = c.read_resource(uri).unwrap();
    assert_eq!(r["contents"][0]["text"], greeting, "{what}: {r}");
    let r = c.get_prompt("review", Some(json!({"code": "x = 1"}))).unwrap();
    assert!(r["messages"][0]["content"]["text"].as_str().unwrap().contains("x = 1"), "{what}: {r}");

    // An elicitation inside a tool: a modern server returns input-required and gets the
    // answer on the retry; a legacy one asks with elicitation/create. Same handler either way.
    let r = c.call_tool("greet", Some(json!({})), &CallContext::default()).unwrap();
    assert_eq!(text(&r), "Hello, Ada!", "{what}: {r}");
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{what}: asked once: {asked:?}");
    assert_eq!(asked[0]["message"], "What is your name?", "{what}");

    // Roots, asked the same two ways (Python only: the TypeScript peer has no roots tool).
    if sdk != Sdk::TypeScript {
        let r = c.call_tool("roots", Some(json!({})), &CallContext::default()).unwrap();
        assert_eq!(text(&r), "file:///srv/gosling-roots-test", "{what}: {r}");
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
    assert_eq!(text(&r), "fresh:hi", "{what}: {r}");
    c.close();
}

#[test]
fn a_dual_era_server_over_stdio_is_spoken_to_in_2026_07_28() {
    speaks(Sdk::Python(false), false);
}

#[test]
fn a_dual_era_server_over_http_is_spoken_to_in_2026_07_28() {
    speaks(Sdk::Python(false), true);
}

#[test]
fn a_legacy_server_over_stdio_gets_the_initialize_handshake() {
    speaks(Sdk::Python(true), false);
}

#[test]
fn a_legacy_server_over_http_gets_the_initialize_handshake() {
    speaks(Sdk::Python(true), true);
}

#[test]
fn a_typescript_sdk_v2_server_over_stdio_is_spoken_to_in_2026_07_28() {
    speaks(Sdk::TypeScript, false);
}

#[test]
fn a_typescript_sdk_v2_server_over_http_is_spoken_to_in_2026_07_28() {
    speaks(Sdk::TypeScript, true);
}

/// `gosling probe` says which revision it chose and why, for both eras.
#[test]
fn probe_prints_the_negotiated_revision_and_why() {
    let peers = require_peers!();
    let home = TempDir::new("probe2026");
    for (legacy, version, why) in [
        (false, "2026-07-28", "server/discover offered 2026-07-28"),
        (true, "2025-06-18", "legacy: server/discover answered -32601; initialize"),
    ] {
        let mut cmd = gosling(&home);
        cmd.args(["probe", "--", peers.python(), peers.get("MCP_PEER_PY_SERVER")]);
        if legacy {
            cmd.arg("legacy");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["protocolVersion"], version, "{v}");
        assert!(v["negotiation"].as_str().unwrap().contains(why), "{v}");
    }
    // Over HTTP, a legacy server refuses the session-less modern request with a 4xx.
    let port = free_port();
    let mut cmd = std::process::Command::new(peers.python());
    cmd.args([peers.get("MCP_PEER_PY_SERVER"), "legacy", "http", &port.to_string()]);
    let peer = spawn_http_peer(cmd, port, "/mcp");
    let out = gosling(&home).args(["probe", &peer.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protocolVersion"], "2025-06-18", "{v}");
    assert!(v["negotiation"].as_str().unwrap().starts_with("legacy: server/discover got HTTP 4"), "{v}");
}
