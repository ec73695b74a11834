// The Streamable HTTP transport against real peers (server-everything, the Python SDK server in
// its three modes) and against misbehaving fakes (tests/fakes/bad_mcp_http.py), each error
// message asserted.

use crate::require_peers;
use crate::support::*;
use crossbeam_channel::Receiver;
use gosling::mcp::streamable_http::{HttpSpec, HttpTransport};
use gosling::mcp::transport::{Inbound, Transport};
use gosling::wire::jsonrpc::{Id, Message};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One of the misbehaving servers of tests/fakes/bad_mcp_http.py.
pub fn start_fake(mode: &str) -> PeerProc {
    start_script("bad_mcp_http.py", mode)
}

/// A python script of tests/fakes that prints "PORT <n>" once it listens.
fn start_script(name: &str, arg: &str) -> PeerProc {
    let script = manifest_dir().join("tests/fakes").join(name);
    let mut child = Command::new("python3")
        .arg(script)
        .arg(arg)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 =
        line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("fake printed {line:?}")).parse().unwrap();
    PeerProc { child, url: format!("http://127.0.0.1:{port}/mcp"), port }
}

/// A minimal JSON-RPC driver over the transport (the client proper is tested elsewhere):
/// answers the server's requests, waits for responses by id.
pub struct Driver {
    pub t: Arc<HttpTransport>,
    rx: Receiver<Inbound>,
    next: i64,
    pub notifications: Vec<Message>,
}

impl Driver {
    pub fn new(url: &str, timeout: Duration) -> Driver {
        init_log();
        let (tx, rx) = crossbeam_channel::unbounded();
        let spec = HttpSpec {
            uri: url.to_string(),
            headers: vec![("X-Test".into(), "1".into())],
            timeout,
            extension: "remote".into(),
            auth: None,
        };
        let t = HttpTransport::connect(&spec, tx).expect("connect");
        Driver { t, rx, next: 0, notifications: Vec::new() }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next += 1;
        let id = Id::Num(self.next);
        self.t.send(&Message::request(id.clone(), method, Some(params))).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Inbound::Message(Message::Response { id: rid, result })) if rid == id => return Ok(result),
                Ok(Inbound::Message(Message::Error { id: Some(rid), error })) if rid == id => return Err(error.message),
                Ok(Inbound::Message(Message::Request { id: sid, method, .. })) => {
                    let result = match method.as_str() {
                        "roots/list" => json!({"roots": []}),
                        _ => json!({}),
                    };
                    self.t.send(&Message::Response { id: sid, result }).map_err(|e| e.to_string())?;
                }
                Ok(Inbound::Message(m @ Message::Notification { .. })) => self.notifications.push(m),
                Ok(Inbound::Message(other)) => panic!("unexpected message {other:?}"),
                Ok(Inbound::Closed(e)) => return Err(e.to_string()),
                Err(_) => return Err(format!("no answer to {method} within 60 s")),
            }
        }
    }

    pub fn initialize(&mut self) -> Result<Value, String> {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "gosling-test", "version": "0"}}),
        )?;
        self.t.send(&Message::notification("notifications/initialized", None)).map_err(|e| e.to_string())?;
        Ok(r)
    }

    /// Reads messages (answering server requests) until `count` notifications named `method`
    /// have arrived in total, or `timeout` passes; returns how many arrived.
    fn wait_notifications(&mut self, method: &str, count: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let seen = |d: &Driver| d.notifications.iter().filter(|m| m.method() == Some(method)).count();
        while seen(self) < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Inbound::Message(m @ Message::Notification { .. })) => self.notifications.push(m),
                Ok(Inbound::Message(Message::Request { id, .. })) => {
                    let _ = self.t.send(&Message::Response { id, result: json!({}) });
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        seen(self)
    }

    fn tool_names(&mut self) -> Vec<String> {
        let tools = self.request("tools/list", json!({})).expect("tools/list");
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    }

    fn call_text(&mut self, name: &str, args: Value) -> String {
        let r = self
            .request("tools/call", json!({"name": name, "arguments": args}))
            .unwrap_or_else(|e| panic!("tools/call {name}: {e}"));
        r["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text in {r}")).to_string()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.t.close();
    }
}

#[test]
fn server_everything_over_streamable_http() {
    let peers = require_peers!();
    let peer = everything_http(peers);
    let mut d = Driver::new(&peer.url, Duration::from_secs(30));
    let init = d.initialize().unwrap();
    assert!(init["serverInfo"]["name"].is_string(), "{init}");
    assert!(d.t.session_id().is_some(), "server-everything issues a session id");
    let names = d.tool_names();
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert_eq!(d.call_text("echo", json!({"message": "hi there"})), "Echo: hi there");
    // A second request on the same session, after the GET stream is open.
    let r = d.request("resources/list", json!({})).unwrap();
    assert!(r["resources"].is_array(), "{r}");
    // Progress arrives on the POST's SSE stream, in order, before the response.
    let r = d
        .request("tools/call", json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3}, "_meta": {"progressToken": "p1"}}))
        .unwrap();
    assert!(r["content"][0]["text"].as_str().unwrap().contains("completed"), "{r}");
    let progress: Vec<f64> = d
        .notifications
        .iter()
        .filter_map(|m| match m {
            Message::Notification { method, params: Some(p) }
                if method == "notifications/progress" && p["progressToken"] == "p1" =>
            {
                p["progress"].as_f64()
            }
            _ => None,
        })
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0]);
    // A server request (roots/list) during a call is answered by POST and the call completes.
    let roots = d.call_text("get-roots-list", json!({}));
    assert!(!roots.is_empty());
    // Messages the server sends on its own (every 5 s) come over the GET stream.
    d.call_text("toggle-simulated-logging", json!({}));
    let before = d.notifications.iter().filter(|m| m.method() == Some("notifications/message")).count();
    // The first is sent at once, the next ones 5 s apart, outside any request.
    let got = d.wait_notifications("notifications/message", before + 2, Duration::from_secs(30));
    assert!(got >= before + 2, "no periodic log message arrived on the GET stream within 30 s ({got})");
}

fn python_round_trip(mode: &str) -> (Driver, PeerProc) {
    let peers = peers().unwrap();
    let peer = py_http(peers, mode);
    let mut d = Driver::new(&peer.url, Duration::from_secs(30));
    let init = d.initialize().unwrap_or_else(|e| panic!("initialize ({mode}): {e}"));
    assert_eq!(init["serverInfo"]["name"], "py-peer");
    let names = d.tool_names();
    assert!(names.iter().any(|n| n == "add") && names.iter().any(|n| n == "echo"), "{names:?}");
    assert_eq!(d.call_text("add", json!({"a": 2, "b": 3})), "5");
    assert_eq!(d.call_text("echo", json!({"message": "héllo"})), "héllo");
    let r = d.request("resources/read", json!({"uri": "greeting://ada"})).unwrap();
    assert_eq!(r["contents"][0]["text"], "Hello, ada!");
    (d, peer)
}

#[test]
fn python_server_sse_answers() {
    let _peers = require_peers!();
    let (d, _peer) = python_round_trip("");
    assert!(d.t.session_id().is_some());
}

#[test]
fn python_server_json_answers() {
    let _peers = require_peers!();
    let (d, _peer) = python_round_trip("json");
    assert!(d.t.session_id().is_some());
}

#[test]
fn python_server_stateless() {
    let _peers = require_peers!();
    let (d, _peer) = python_round_trip("stateless");
    assert_eq!(d.t.session_id(), None, "a stateless server issues no session");
}

#[test]
fn python_server_expired_session_is_reinitialized_transparently() {
    let peers = require_peers!();
    let peer = py_http(peers, "");
    let mut d = Driver::new(&peer.url, Duration::from_secs(30));
    d.initialize().unwrap();
    assert_eq!(d.call_text("add", json!({"a": 1, "b": 1})), "2");
    let old = d.t.session_id().expect("session");
    // End the session behind the transport's back, as a server restart or expiry would.
    let del = http_with(
        "DELETE",
        &peer.url,
        &[("Mcp-Session-Id", old.as_str()), ("MCP-Protocol-Version", "2025-06-18")],
        None,
    );
    assert!(del.status < 300, "DELETE: {}", del.status);
    let stale = http_with(
        "POST",
        &peer.url,
        &[
            ("Mcp-Session-Id", old.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ],
        Some(br#"{"jsonrpc":"2.0","id":99,"method":"tools/list"}"#),
    );
    assert_eq!(stale.status, 404, "the Python server answers 404 for a gone session");
    // The next call gets that 404, initializes again and retries, invisibly.
    assert_eq!(d.call_text("add", json!({"a": 20, "b": 22})), "42");
    let new = d.t.session_id().expect("new session");
    assert_ne!(new, old);
    assert_eq!(d.call_text("echo", json!({"message": "again"})), "again");
}

fn init_error(url: &str, timeout: Duration) -> String {
    let mut d = Driver::new(url, timeout);
    let e = d.initialize().expect_err("initialize must fail");
    eprintln!("{e}");
    assert!(e.contains("extension `remote`"), "the message names the extension: {e}");
    e
}

#[test]
fn connection_refused_is_explained() {
    let port = free_port();
    let e = init_error(&format!("http://127.0.0.1:{port}/mcp"), Duration::from_secs(10));
    assert!(e.contains("connection refused") && e.contains("start the server"), "{e}");
}

#[test]
fn unknown_host_is_explained() {
    let e = init_error("http://no-such-host.invalid/mcp", Duration::from_secs(30));
    assert!(e.contains("cannot resolve the host name") && e.contains("no-such-host.invalid"), "{e}");
}

#[test]
fn tls_failure_is_explained() {
    // A plain-HTTP server reached with https:// fails the handshake.
    let fake = start_fake("ok");
    let e = init_error(&fake.url.replace("http://", "https://"), Duration::from_secs(10));
    assert!(e.contains("TLS failure") && e.contains("SSL_CERT_FILE"), "{e}");
}

#[test]
fn timeout_is_explained() {
    let fake = start_fake("stall");
    // The extension's 2 s timeout answers, not the driver's own 60 s wait ("no answer to").
    let e = init_error(&fake.url, Duration::from_secs(2));
    assert!(e.contains("no answer from") && e.contains("raise the extension's timeout"), "{e}");
}

#[test]
fn unauthorized_shows_the_challenge() {
    let fake = start_fake("401");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(
        e.contains("401 Unauthorized")
            && e.contains(r#"WWW-Authenticate: Bearer realm="fake", error="invalid_token""#)
            && e.contains("headers"),
        "{e}"
    );
}

#[test]
fn forbidden_is_explained() {
    let fake = start_fake("403");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(e.contains("403 Forbidden") && e.contains("credentials"), "{e}");
}

#[test]
fn not_found_suggests_the_path() {
    let fake = start_fake("404");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(e.contains("404 Not Found") && e.contains("path"), "{e}");
}

#[test]
fn html_page_is_not_mcp() {
    let fake = start_fake("html");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(e.contains("not an MCP endpoint") && e.contains("HTML page") && e.contains("Welcome"), "{e}");
}

#[test]
fn server_error_shows_the_body() {
    let fake = start_fake("500");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(e.contains("HTTP 500") && e.contains("database is down") && e.contains("logs"), "{e}");
}

#[test]
fn redirect_is_not_followed_blindly() {
    let fake = start_fake("redirect");
    let e = init_error(&fake.url, Duration::from_secs(10));
    assert!(e.contains("redirects (307) to /mcp") && e.contains("uri"), "{e}");
}

#[test]
fn truncated_stream_fails_the_request_not_the_wait() {
    let fake = start_fake("truncated");
    // The stream's end is the error, not the timeout's "no answer from".
    let e = init_error(&fake.url, Duration::from_secs(30));
    assert!(e.contains("ended the answer stream") && e.contains("without answering"), "{e}");
    assert!(!e.contains("no answer from"), "{e}");
}

#[test]
fn dropped_stream_is_resumed_and_replays_are_dropped() {
    let fake = start_fake("resume");
    let mut d = Driver::new(&fake.url, Duration::from_secs(30));
    d.initialize().unwrap();
    assert_eq!(d.call_text("slow", json!({})), "resumed");
    assert_eq!(d.notifications.len(), 1, "the replayed progress is dropped: {:?}", d.notifications);
    // The duplicate response is dropped too: the next answer is the next request's own.
    let r = d.request("tools/list", json!({})).unwrap();
    assert_eq!(r, json!({"tools": []}));
}

#[test]
fn untrusted_certificate_is_explained() {
    let fake = start_fake("ok-tls");
    let e = init_error(&fake.url.replace("http://", "https://"), Duration::from_secs(10));
    assert!(e.contains("TLS failure") && e.contains("UnknownIssuer") && e.contains("SSL_CERT_FILE"), "{e}");
}

#[test]
fn extra_ca_bundle_from_ssl_cert_file_is_trusted() {
    let fake = start_fake("ok-tls");
    let url = fake.url.replace("http://", "https://");
    let home = TempDir::new("tls");
    let ca = manifest_dir().join("tests/fakes/tls/ca.pem");
    let ok = gosling(&home)
        .arg("probe")
        .arg(&url)
        .env("SSL_CERT_FILE", &ca)
        .env_remove("MCP_CONFORMANCE_SCENARIO")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "probe with SSL_CERT_FILE: {}\n{stdout}", String::from_utf8_lossy(&ok.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("probe prints JSON ({e}): {stdout}"));
    assert_eq!(v["serverInfo"]["name"], "fake", "{stdout}");
    let missing = gosling(&home).arg("probe").arg(&url).env("SSL_CERT_FILE", home.join("nope.pem")).output().unwrap();
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && err.contains("cannot read SSL_CERT_FILE"), "{err}");
}

#[test]
fn https_proxy_and_no_proxy_are_honoured() {
    let fake = start_fake("ok");
    let home = TempDir::new("proxy");
    let log = home.join("tunnels.log");
    let proxy = start_script("connect_proxy.py", log.to_str().unwrap());
    let proxy_url = proxy.url.trim_end_matches("/mcp").to_string();
    let target = fake.url.trim_start_matches("http://").trim_end_matches("/mcp").to_string();
    let probe = |no_proxy: Option<&str>| {
        let mut c = gosling(&home);
        c.arg("probe").arg(&fake.url).env("HTTPS_PROXY", &proxy_url);
        for k in [
            "ALL_PROXY",
            "all_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "NO_PROXY",
            "no_proxy",
            "MCP_CONFORMANCE_SCENARIO",
        ] {
            c.env_remove(k);
        }
        if let Some(n) = no_proxy {
            c.env("NO_PROXY", n);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "probe (NO_PROXY={no_proxy:?}): {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(&log).unwrap_or_default()
    };
    let through = probe(None);
    assert!(through.lines().any(|l| l == target), "the request went through the proxy: {through:?} vs {target}");
    let tunnels = through.lines().count();
    let bypassed = probe(Some("127.0.0.1"));
    assert_eq!(bypassed.lines().count(), tunnels, "NO_PROXY bypasses the proxy: {bypassed:?}");
}

#[test]
fn unknown_protocol_version_is_explained() {
    let fake = start_fake("version");
    let home = TempDir::new("version");
    let out = gosling(&home).arg("probe").arg(&fake.url).env_remove("MCP_CONFORMANCE_SCENARIO").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("protocol version \"1999-01-01\"")
            && err.contains("2025-06-18")
            && err.contains("update the server"),
        "{err}"
    );
}

// Through the real server: /agent/add_extension activates streamable_http and sse configs.

fn agent_session(s: &Server) -> String {
    let work = TempDir::new("http-work");
    let r = s.post("/agent/start", json!({"working_dir": work.path().to_str().unwrap(), "extension_overrides": []}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

#[test]
fn sse_extension_fails_fast_without_network_io() {
    let s = Server::start();
    let id = agent_session(&s);
    // A listener of our own as the sse server: activation must not even connect to it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let uri = format!("http://{}/sse", listener.local_addr().unwrap());
    let r = s.post(
        "/agent/add_extension",
        json!({"session_id": id, "config": {"type":"sse","name":"legacy","description":"","uri":uri}}),
    );
    assert!(r.status >= 400, "{} {}", r.status, r.text());
    assert!(
        r.text().contains("SSE is unsupported, migrate to streamable_http") && r.text().contains("uri"),
        "{}",
        r.text()
    );
    assert!(listener.accept().is_err(), "no connection was made to the sse server");
}

#[test]
fn streamable_http_extension_end_to_end_with_headers_and_errors() {
    let peers = require_peers!();
    let py = py_http(peers, "");
    let s = Server::start();
    let id = agent_session(&s);
    let cfg = json!({"type":"streamable_http","name":"py","description":"","uri":py.url,"envs":{"TOKEN":"t0k"},"headers":{"X-Token":"${TOKEN}"},"timeout":60});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 200, "{}", add.text());
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "py__add", "arguments": {"a": 40, "b": 2}}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("42"), "{}", r.text());
    // An unresolved variable names itself; a secret's value never appears in errors or logs.
    let cfg = json!({"type":"streamable_http","name":"py2","description":"","uri":py.url,"envs":{"TOKEN":"t0k"},"headers":{"Authorization":"Bearer ${MISSING_TOKEN}"},"timeout":60});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert!(add.status >= 400 && add.text().contains("MISSING_TOKEN"), "{} {}", add.status, add.text());
    // A 401 with its challenge reaches the API caller intact.
    let fake = start_fake("401");
    let cfg = json!({"type":"streamable_http","name":"locked","description":"","uri":fake.url,"timeout":20});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert!(add.status >= 400, "{}", add.text());
    assert!(
        add.text().contains("401 Unauthorized") && add.text().contains("WWW-Authenticate: Bearer realm"),
        "{}",
        add.text()
    );
    assert!(!s.stderr().contains("t0k"), "a header value was logged");
}

// The shared client over this transport, in-process.

/// `pin`: the extension's `protocol_version`.
fn client_for(url: &str, pin: Option<&str>) -> (gosling::mcp::client::Client, Arc<HttpTransport>) {
    use gosling::mcp::client::{Client, ClientOptions};
    init_log();
    let (tx, rx) = crossbeam_channel::bounded(256);
    let spec = HttpSpec {
        uri: url.to_string(),
        headers: Vec::new(),
        timeout: Duration::from_secs(30),
        extension: "py".into(),
        auth: None,
    };
    let t = HttpTransport::connect(&spec, tx).unwrap();
    let opts = ClientOptions {
        extension: "py".into(),
        timeout: Duration::from_secs(30),
        roots: None,
        elicitation: None,
        sampling: None,
        client_name: "gosling-test".into(),
        client_version: "0".into(),
        protocol_version: pin.map(str::to_string),
    };
    (Client::connect(t.clone(), rx, opts).expect("initialize"), t)
}

fn add_via(client: &gosling::mcp::client::Client, a: i64, b: i64) -> String {
    let r = client.call_tool("add", Some(json!({"a": a, "b": b})), &Default::default()).expect("tools/call add");
    r.content.first().and_then(|b| b.as_text()).unwrap_or_else(|| panic!("{r}")).to_string()
}

#[test]
fn shared_client_over_python_server_in_every_mode() {
    let peers = require_peers!();
    // The dual-era server: pinned to 2026-07-28 in its three modes, and by default (a session).
    for (mode, pin) in [
        ("", Some("2026-07-28")),
        ("json", Some("2026-07-28")),
        ("stateless", Some("2026-07-28")),
        ("", None),
        ("legacy", None),
        ("legacy json", None),
    ] {
        let py = py_http(peers, mode);
        let (client, t) = client_for(&py.url, pin);
        let names: Vec<String> = client.list_tools().unwrap().iter().map(|t| t.name.clone()).collect();
        assert!(names.contains(&"add".to_string()) && names.contains(&"echo".to_string()), "mode {mode:?}: {names:?}");
        assert_eq!(add_via(&client, 2, 3), "5", "mode {mode:?}");
        let r = client.read_resource("greeting://Ada").unwrap();
        assert_eq!(r.contents[0].as_text(), Some("Hello, Ada!"), "mode {mode:?}");
        // Sessions are a legacy thing: a 2026-07-28 exchange has none.
        let legacy = pin.is_none();
        assert_eq!(client.protocol_version() == "2026-07-28", !legacy, "mode {mode:?}");
        assert_eq!(t.session_id().is_some(), legacy, "mode {mode:?}");
        client.close();
    }
}

#[test]
fn shared_client_survives_an_expired_session() {
    let peers = require_peers!();
    let py = py_http(peers, "legacy json");
    let (client, t) = client_for(&py.url, None);
    assert_eq!(add_via(&client, 1, 2), "3");
    let old = t.session_id().unwrap();
    let del =
        http_with("DELETE", &py.url, &[("Mcp-Session-Id", old.as_str()), ("MCP-Protocol-Version", "2025-06-18")], None);
    assert!(del.status < 300, "DELETE: {}", del.status);
    assert_eq!(add_via(&client, 3, 4), "7", "the 404 was absorbed by a transparent re-initialize");
    assert_ne!(t.session_id().unwrap(), old);
    client.close();
}
