//! Issue 27 finding 11: an MCP server's OAuth metadata cannot make gosling send requests where
//! only gosling can reach (this machine, the link-local cloud metadata address), nor over plain
//! http to another host, and an authorization server's error text is summarised, never echoed.
//! The MCP server (tests/fakes/oauth_ssrf_mcp.py) listens on this machine's non-loopback
//! address; the "internal" service is a listener on 127.0.0.1 that counts connections. A second
//! part checks that a stored token goes only to the server and issuer it was issued for.

use crate::support::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// This machine's address on its default route (never loopback).
fn outward_ip() -> IpAddr {
    let ip = ["192.0.2.1:9", "198.51.100.1:9", "10.255.255.1:9"].iter().find_map(|target| {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        s.connect(target).ok()?; // UDP connect sends nothing: it only picks the route
        Some(s.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
    });
    ip.expect("this test needs a non-loopback IPv4 address with a route (the MCP server must not be on loopback)")
}

/// A listener on 127.0.0.1 that answers every request 200 `{}` and counts what it received:
/// connections and the request heads.
struct Recorder {
    url: String,
    hits: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    status_line: &'static str,
}

fn recorder(status_line: &'static str, extra: &'static str) -> Recorder {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    let hits = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (h, hd) = (hits.clone(), heads.clone());
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = vec![0u8; 16 << 10];
            let n = c.read(&mut buf).unwrap_or(0);
            hd.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).to_string());
            let _ = write!(c, "{status_line}\r\nContent-Type: application/json\r\n{extra}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}");
        }
    });
    Recorder { url, hits, heads, status_line }
}

fn ssrf_fake(ip: IpAddr, mode: &str, internal: &str) -> PeerProc {
    use std::os::unix::process::CommandExt;
    let port = free_port();
    let mut cmd = Command::new("python3");
    cmd.arg(manifest_dir().join("tests/fakes/oauth_ssrf_mcp.py")).args([
        &ip.to_string(),
        &port.to_string(),
        mode,
        internal,
    ]);
    cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let child = cmd.spawn().expect("spawn the fake");
    let ok = wait_for(Duration::from_secs(30), || TcpStream::connect((ip, port)).ok());
    assert!(ok.is_some(), "the fake did not listen on {ip}:{port}");
    PeerProc { child, url: format!("http://{ip}:{port}/mcp"), port }
}

fn session(s: &Server) -> String {
    let work = TempDir::new("ssrf-work");
    let id = start_session(s, work.path(), None);
    std::mem::forget(work); // the session's working dir outlives this helper
    id
}

/// Adds the remote extension; its status and message.
fn add(s: &Server, id: &str, uri: &str) -> (u16, String) {
    let mut config = crate::sign_in::remote(uri);
    config["timeout"] = json!(10);
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": config}));
    (r.status, r.json()["message"].as_str().unwrap_or_default().to_string())
}

#[test]
fn metadata_cannot_send_sign_in_requests_to_internal_addresses() {
    let ip = outward_ip();
    let internal = recorder("HTTP/1.1 200 OK", "");
    let s = Server::start();
    let id = session(&s);

    // The control: everything on the server's own host works up to the person's sign-in.
    let fake = ssrf_fake(ip, "honest", &internal.url);
    let (status, msg) = add(&s, &id, &fake.url);
    assert_eq!(status, 424, "{msg}");
    assert!(msg.contains("needs sign-in") && msg.contains(&format!("http://{ip}:")), "{msg}");
    drop(fake);

    // Each way of pointing at an internal or plain-http endpoint is refused before anything
    // is sent there, with what was refused and why.
    let cases = [
        ("challenge", "protected-resource metadata", "loopback"),
        ("issuer", "authorization server", "loopback"),
        ("localhost", "authorization server", "loopback"),
        ("token", "token endpoint", "loopback"),
        ("register", "registration endpoint", "loopback"),
        ("authorize", "authorization endpoint", "loopback"),
        ("revoke", "revocation endpoint", "loopback"),
        ("linklocal", "token endpoint", "link-local"),
        ("plainhttp", "token endpoint", "not https"),
    ];
    for (mode, what, why) in cases {
        let fake = ssrf_fake(ip, mode, &internal.url);
        let (status, msg) = add(&s, &id, &fake.url);
        assert_ne!(status, 200, "{mode}: {msg}");
        assert!(msg.contains(&format!("refusing to contact the {what}")) && msg.contains(why), "{mode}: {msg}");
        assert_eq!(internal.hits.load(Ordering::SeqCst), 0, "{mode}: the internal service was contacted");
    }

    // An authorization server's error answer is summarised (status and a registered code or
    // "an unrecognised error"), never repeated.
    let fake = ssrf_fake(ip, "echo", &internal.url);
    let (status, msg) = add(&s, &id, &fake.url);
    assert_ne!(status, 200, "{msg}");
    assert!(msg.contains("answered 400: an unrecognised error"), "{msg}");
    assert!(!msg.contains("hunter2") && !msg.contains("/srv/internal"), "{msg}");
    assert!(!s.stderr().contains("hunter2"), "the log repeats the error text");
    assert_eq!(internal.hits.load(Ordering::SeqCst), 0);
    let _ = internal.status_line;
}

/// A sign-in record of the store: the access token and who it is for.
fn record(token: &str, resource: &str, issuer: &str) -> Value {
    json!({"access_token": token, "issued_at": 0, "scope": "", "issuer": issuer, "resource": resource,
           "token_endpoint": format!("{issuer}/token"), "client_id": "c", "auth_method": "none"})
}

#[test]
fn a_stored_token_goes_only_to_the_server_and_issuer_it_was_issued_for() {
    // The MCP server records every request head and answers 401 (no metadata anywhere).
    let server = recorder("HTTP/1.1 401 Unauthorized", "WWW-Authenticate: Bearer\r\n");
    let uri = format!("{}/mcp", server.url);
    let other = "http://127.0.0.1:9/mcp";
    let issuer = "http://127.0.0.1:9";
    let cases = [
        // (key's resource, key's issuer, record, sent?)
        ("bound", uri.as_str(), issuer, record("tok-bound", &uri, issuer), true),
        ("another resource", uri.as_str(), issuer, record("tok-other-resource", other, issuer), false),
        ("another issuer", uri.as_str(), issuer, record("tok-other-issuer", &uri, "https://as.example"), false),
    ];
    for (what, key_resource, key_issuer, rec, sent) in cases {
        let home = TempDir::new("oauth-bind");
        std::fs::create_dir_all(home.join("config")).unwrap();
        let secrets = json!({ format!("oauth:{key_resource} {key_issuer}"): rec.to_string() });
        let path = home.join("config/secrets.json");
        std::fs::write(&path, secrets.to_string()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = Server::start_in(home, ServerOpts::default());
        let id = session(&s);
        server.heads.lock().unwrap().clear();
        let _ = add(&s, &id, &uri);
        let token = rec["access_token"].as_str().unwrap();
        let heads = server.heads.lock().unwrap().clone();
        assert!(!heads.is_empty(), "{what}: the server got no request");
        let got = heads.iter().any(|h| h.contains(&format!("Bearer {token}")));
        assert_eq!(got, sent, "{what}: token sent = {got}; heads: {heads:?}");
    }
}
