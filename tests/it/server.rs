//! The HTTP foundation: auth, readiness, proxy pages, limits, panics, slow clients, start-up.

use crate::contract;
use crate::support::{gosling, http, http_with, rss_kib, wait_for, Resp, Server, ServerOpts, TempDir, SECRET};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Every protected route with a body that is valid for it (or none).
fn protected_routes() -> Vec<(&'static str, &'static str, Option<serde_json::Value>)> {
    vec![
        ("GET", "/config", None),
        ("GET", "/config/extensions", None),
        (
            "POST",
            "/config/extensions",
            Some(json!({"name":"a","enabled":false,"config":{"type":"builtin","name":"a"}})),
        ),
        ("DELETE", "/config/extensions/a", None),
        ("POST", "/config/upsert", Some(json!({"key":"K","value":"v","is_secret":false}))),
        ("POST", "/config/read", Some(json!({"key":"K","is_secret":false}))),
        ("POST", "/config/remove", Some(json!({"key":"K","is_secret":false}))),
    ]
}

#[test]
fn every_protected_route_needs_the_secret() {
    let s = Server::start();
    for (method, path, body) in protected_routes() {
        let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
        let none = http(method, &s.url(path), None, bytes.as_deref());
        assert_eq!(none.status, 401, "{method} {path} without key");
        let wrong = http(method, &s.url(path), Some("wrong-secret-0123456789"), bytes.as_deref());
        assert_eq!(wrong.status, 401, "{method} {path} with a wrong key");
        let short = http(method, &s.url(path), Some("t"), bytes.as_deref());
        assert_eq!(short.status, 401, "{method} {path} with a prefix of the key");
        let ok = http(method, &s.url(path), Some(SECRET), bytes.as_deref());
        assert_eq!(ok.status, 200, "{method} {path} with the key: {}", ok.text());
    }
    // Unknown paths are behind auth too: 401 without, 404 JSON with.
    assert_eq!(http("GET", &s.url("/nope"), None, None).status, 401);
    let nf = s.get("/nope");
    assert_eq!(nf.status, 404);
    assert!(nf.json()["message"].as_str().unwrap().contains("/nope"));
    let wrong_method = http("PUT", &s.url("/config"), Some(SECRET), None);
    assert_eq!(wrong_method.status, 405);
    assert!(wrong_method.json()["message"].as_str().unwrap().contains("GET"));
}

#[test]
fn status_and_proxies_are_open() {
    let s = Server::start();
    let st = http("GET", &s.url("/status"), None, None);
    assert_eq!((st.status, st.text().as_str()), (200, "ok"));
    contract::check_resp("GET", "/status", &st);
    for p in ["/mcp-ui-proxy", "/mcp-app-proxy"] {
        assert_eq!(http("GET", &s.url(p), None, None).status, 401, "{p} without secret");
        assert_eq!(http("GET", &s.url(&format!("{p}?secret=nope")), None, None).status, 401, "{p} wrong secret");
        let ok = http("GET", &s.url(&format!("{p}?secret={SECRET}")), None, None);
        assert_eq!(ok.status, 200, "{p}");
        assert!(ok.header("content-type").unwrap().starts_with("text/html"));
        assert!(ok.text().starts_with("<!DOCTYPE html>"));
        if p == "/mcp-ui-proxy" {
            contract::check_resp("GET", p, &ok);
        }
    }
    let app = http(
        "GET",
        &s.url(&format!("/mcp-app-proxy?secret={SECRET}&connect_domains=https://api.example.com,%20")),
        None,
        None,
    );
    assert!(app.text().contains("connect-src 'self' https://api.example.com;"), "{}", app.text());
    assert_eq!(app.header("referrer-policy"), Some("no-referrer"));
    // Guest pages: handed over once.
    let body = json!({"secret": SECRET, "html": "<p>hi</p>", "csp": "default-src 'none'"}).to_string();
    let posted = http("POST", &s.url("/mcp-app-guest"), None, Some(body.as_bytes()));
    assert_eq!(posted.status, 200);
    let nonce = posted.json()["nonce"].as_str().unwrap().to_string();
    let page = http("GET", &s.url(&format!("/mcp-app-guest?secret={SECRET}&nonce={nonce}")), None, None);
    assert_eq!((page.status, page.text().as_str()), (200, "<p>hi</p>"));
    assert_eq!(page.header("content-security-policy"), Some("default-src 'none'"));
    assert_eq!(http("GET", &s.url(&format!("/mcp-app-guest?secret={SECRET}&nonce={nonce}")), None, None).status, 404);
}

#[test]
fn generated_secret_is_written_0600_and_works() {
    use std::os::unix::fs::PermissionsExt;
    let s = Server::start_with(ServerOpts { secret: None, ..Default::default() });
    let path = s.home.join("state/secret-key");
    let secret = std::fs::read_to_string(&path).unwrap();
    assert_eq!(secret.len(), 64);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(s.stderr().contains("secret-key"), "the server says where the key is");
    assert_eq!(http("GET", &s.url("/config"), Some(&secret), None).status, 200);
    assert_eq!(http("GET", &s.url("/config"), Some("test"), None).status, 401, "no fixed default");
}

#[test]
fn a_panicking_handler_is_a_500_and_the_server_lives() {
    let s =
        Server::start_with(ServerOpts { env: vec![("GOSLING_TEST_FAULTS".into(), "1".into())], ..Default::default() });
    let r = s.get("/debug/panic");
    assert_eq!(r.status, 500);
    assert!(r.json()["message"].as_str().unwrap().contains("internal error"));
    assert_eq!(s.get("/config").status, 200);
    assert!(s.stderr().contains("panicked"));
}

#[test]
fn oversized_bodies_are_413() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_BODY_BYTES".into(), "1000".into())],
        ..Default::default()
    });
    let big = format!("{{\"key\":\"K\",\"value\":\"{}\",\"is_secret\":false}}", "x".repeat(2000));
    let r = http("POST", &s.url("/config/upsert"), Some(SECRET), Some(big.as_bytes()));
    assert_eq!(r.status, 413);
    assert!(r.json()["message"].as_str().unwrap().contains("GOSLING_MAX_BODY_BYTES"));
    // Without Content-Length (chunked) the limit holds too. One write for the whole request:
    // the server may answer and close before reading all of it, and a later write would fail.
    let mut c = TcpStream::connect(&s.addr).unwrap();
    let rq = format!("POST /config/upsert HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
    c.write_all(rq.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 413"), "{out}");
    // A declared length far beyond memory is refused unread, and the server lives on (tiny_http
    // used to allocate the declared remainder to drain it, and aborted).
    let mut c = TcpStream::connect(&s.addr).unwrap();
    write!(c, "POST /config/upsert HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{{").unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    drop(c);
    assert_eq!(s.get("/config").status, 200);
    assert!(!s.stderr().contains("memory allocation"), "{}", s.stderr());
}

#[test]
fn oversized_request_heads_are_431() {
    let s = Server::start();
    // A header line that never ends, and a flood of small headers: both stop at the 64 KiB
    // bound on the request head (tiny_http read heads without one; memory grew with the input).
    let line = format!("X-Junk: {}", "a".repeat(1 << 20));
    let many: String = (0..5000).map(|i| format!("X-H{i}: {}\r\n", "v".repeat(40))).collect();
    for junk in [line, many] {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        let _ = c.write_all(format!("GET /status HTTP/1.1\r\nHost: localhost\r\n{junk}").as_bytes());
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431"), "{out:?}");
    }
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
}

#[test]
fn bad_bodies_get_clear_errors() {
    let s = Server::start();
    let not_json = http_with(
        "POST",
        &s.url("/config/upsert"),
        &[("X-Secret-Key", SECRET), ("Content-Type", "application/json")],
        Some(b"{nope"),
    );
    assert_eq!(not_json.status, 400);
    assert!(not_json.json()["message"].as_str().unwrap().contains("not valid JSON"));
    let form = http_with(
        "POST",
        &s.url("/config/upsert"),
        &[("X-Secret-Key", SECRET), ("Content-Type", "text/plain")],
        Some(b"{}"),
    );
    assert_eq!(form.status, 415);
    assert!(form.json()["message"].as_str().unwrap().contains("application/json"));
    let shape = s.post("/config/upsert", json!({"key": 3}));
    assert_eq!(shape.status, 422);
}

fn slow_request(addr: &str) -> TcpStream {
    // Headers complete, a large body promised but not sent: holds a handler thread reading it
    // (tiny_http reads bodies up to 1 KiB itself, on its own connection thread).
    let mut c = TcpStream::connect(addr).unwrap();
    write!(c, "POST /config/upsert HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{{").unwrap();
    c
}

/// Sends more of the body on each slow request — well above the server's minimum body rate —
/// so neither the per-read timeout nor the rate check frees them while the test still needs
/// them to hold their handler threads, however loaded the machine is.
fn trickle(slow: &mut [TcpStream]) {
    for c in slow {
        let _ = c.write_all(&[b' '; 4096]);
    }
}

#[test]
fn slow_clients_cannot_starve_status_and_the_cap_answers_503() {
    let cap = 4;
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_REQUESTS".into(), cap.to_string()), ("GOSLING_IO_TIMEOUT_SECS".into(), "3".into())],
        ..Default::default()
    });
    // 200 idle connections (no request at all, slow-loris style) never take a request slot.
    let idle = idle_connections(&s.addr, 200);
    // `cap` slow bodies hold every request slot: the next request waits briefly for a slot,
    // then is refused with 503 + Retry-After...
    let mut slow: Vec<TcpStream> = (0..cap).map(|_| slow_request(&s.addr)).collect();
    let busy = wait_for(Duration::from_secs(20), || {
        trickle(&mut slow);
        let r = s.get("/config");
        (r.status == 503).then_some(r)
    })
    .expect("a request past the cap gets 503");
    assert_eq!(busy.header("retry-after"), Some("1"));
    assert!(busy.json()["message"].as_str().unwrap().contains("retry"));
    // ...while /status needs no slot and still answers (one that waited for a slot would get
    // the 503 above: every slot stays held).
    trickle(&mut slow);
    let st = http("GET", &s.url("/status"), None, None);
    assert_eq!((st.status, st.text().as_str()), (200, "ok"));
    // One slow client leaves: its slot is given back, and with cap - 1 slow bodies still holding
    // theirs (the 503 above showed them all held), requests are served, at once.
    drop(slow.pop());
    let freed = wait_for(Duration::from_secs(20), || {
        trickle(&mut slow);
        (s.get("/config").status == 200).then_some(())
    });
    assert!(freed.is_some(), "the slot of the slow client that left was not given back");
    trickle(&mut slow);
    assert_eq!(s.get("/config").status, 200, "served with the freed slot, not refused 503");
    // Once the slow clients go quiet, the read timeout frees them (408) and the server serves again.
    let mut buf = String::new();
    slow[0].set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = slow[0].read_to_string(&mut buf);
    assert!(buf.starts_with("HTTP/1.1 408"), "slow body answered {buf:?}");
    let mut seen = Vec::new();
    let back = wait_for(Duration::from_secs(20), || {
        let r = s.get("/config");
        seen.push(r.status);
        (r.status == 200).then_some(())
    });
    assert!(back.is_some(), "the server serves again after the slow clients timed out: {seen:?} {}", s.stderr());
    drop(idle);
}

/// Keep-alive clients that together use every request slot, each sending its next request as
/// soon as it has the answer to the last: a connection between requests holds no slot, so
/// none of them ever gets 503 (wrk at 64 connections against a cap of 64 used to get ~100 per
/// 6 s: a slot was given back only after the next request had been read).
#[test]
fn keep_alive_clients_at_the_cap_never_get_503() {
    let cap = 2;
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_REQUESTS".into(), cap.to_string())],
        ..Default::default()
    });
    let clients: Vec<_> = (0..cap)
        .map(|_| {
            let addr = s.addr.clone();
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(&addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let rq = format!("GET /config HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n");
                let mut statuses = std::collections::BTreeMap::new();
                let mut buf = Vec::new();
                for _ in 0..1500 {
                    c.write_all(rq.as_bytes()).unwrap();
                    let (status, rest) = read_response(&mut c, std::mem::take(&mut buf));
                    buf = rest;
                    *statuses.entry(status).or_insert(0) += 1;
                }
                statuses
            })
        })
        .collect();
    for c in clients {
        let statuses = c.join().unwrap();
        assert_eq!(statuses.keys().copied().collect::<Vec<u16>>(), [200], "statuses: {statuses:?}");
    }
}

/// Reads one response (with a Content-Length body) from `c`; returns its status and any bytes
/// read past it.
fn read_response(c: &mut TcpStream, buf: Vec<u8>) -> (u16, Vec<u8>) {
    let (status, _, rest) = read_response_parts(c, buf);
    (status, rest)
}

/// One response (Content-Length framed) on a connection kept open: its status and body.
fn read_response_body(c: &mut TcpStream) -> (u16, String) {
    let (status, body, rest) = read_response_parts(c, Vec::new());
    assert!(rest.is_empty(), "nothing follows the answer: {rest:?}");
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Reads one response from `buf` and then `c`: its status, its body and what follows it.
fn read_response_parts(c: &mut TcpStream, mut buf: Vec<u8>) -> (u16, Vec<u8>, Vec<u8>) {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let status = head[9..12].parse().unwrap();
                let rest = buf.split_off(end + 4 + len);
                let body = buf.split_off(end + 4);
                return (status, body, rest);
            }
        }
        let n = c.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn corrupt_config_refuses_to_start_and_is_untouched() {
    let home = TempDir::new("corrupt");
    std::fs::create_dir_all(home.join("config")).unwrap();
    let path = home.join("config/config.json");
    std::fs::write(&path, b"{\"extensions\": {oops").unwrap();
    let out = gosling(&home).args(["agent", "--port", "0"]).env("GOOSE_SERVER__SECRET_KEY", SECRET).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.json") && err.contains("not valid"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"extensions\": {oops");
}

#[test]
fn bad_port_is_a_clear_error() {
    let home = TempDir::new("port");
    let out =
        gosling(&home).arg("agent").env("GOOSE_PORT", "http").env("GOOSE_SERVER__SECRET_KEY", SECRET).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GOOSE_PORT"));
}

#[test]
fn status_body_matches_contract() {
    let s = Server::start();
    let r = s.get("/config");
    contract::check("GET", "/config", r.status, &r.json());
}

#[test]
fn slow_loris_headers_are_cut_off_at_the_io_timeout() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "1".into())],
        ..Default::default()
    });
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut out = String::new();
    // The connection is closed without an answer (an unsolicited 408 on a keep-alive
    // connection would be read by clients as the answer to their next request).
    let n = c.read_to_string(&mut out).expect("closed by the server, not by our read timeout");
    assert_eq!((n, out.as_str()), (0, ""));
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
}

/// Sends `byte` every ~`every` (under the server's 1 s read timeout) for up to 60 s (a
/// deadline for the test, 30 times the server's), until the server answers a whole head or
/// closes the connection; returns whether the server did (rather than the deadline passing)
/// and what it sent.
fn trickle_until_cut_off(c: &mut TcpStream, byte: &[u8], every: Duration) -> (bool, String) {
    c.set_read_timeout(Some(every)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        if out.windows(4).any(|w| w == b"\r\n\r\n") {
            return (true, String::from_utf8_lossy(&out).into_owned());
        }
        if c.write_all(byte).is_err() {
            return (true, String::from_utf8_lossy(&out).into_owned());
        }
        match c.read(&mut buf) {
            Ok(0) => return (true, String::from_utf8_lossy(&out).into_owned()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (true, String::from_utf8_lossy(&out).into_owned()),
        }
    }
    (false, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn a_trickled_request_head_is_cut_off() {
    // One byte just under the read timeout, again and again: the head as a whole gets twice
    // the read timeout, then 408 and the connection is closed.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "1".into())],
        ..Default::default()
    });
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").unwrap();
    let (cut_off, out) = trickle_until_cut_off(&mut c, b"a", Duration::from_millis(500));
    assert!(cut_off, "the server let the trickle go on for a minute: {out:?}");
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 408"), "{out:?}");
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
}

#[test]
fn a_trickled_request_body_is_cut_off() {
    // A body sent one byte just under the read timeout would hold a request slot for days: after
    // a grace of twice the read timeout it must average 1 KiB/s, else 408.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "1".into())],
        ..Default::default()
    });
    let mut c = slow_request(&s.addr);
    let (cut_off, out) = trickle_until_cut_off(&mut c, b" ", Duration::from_millis(300));
    assert!(cut_off, "the server let the trickle go on for a minute: {out:?}");
    assert!(out.starts_with("HTTP/1.1 408"), "{out:?}");
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
}

/// Opens `n` idle connections (kept open by the caller).
fn idle_connections(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect()
}

/// True when the server closes `c` (or resets it) without answering, within 20 s.
fn closed_unanswered(mut c: TcpStream) -> bool {
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

#[test]
fn at_the_connection_limit_the_oldest_idle_connection_makes_room() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_CONNECTIONS".into(), "20".into())],
        ..Default::default()
    });
    // 20 idle connections fill the limit; each new one closes the one idle the longest. (The
    // server accepts connections in the order they were made and counts each as it accepts
    // it, so a later one finds the 20 counted: no need to wait for them.)
    let mut held = idle_connections(&s.addr, 20);
    for _ in 0..3 {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(c, "GET /config HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut c, Vec::new()).0, 200, "a new client is served at the limit");
        assert!(closed_unanswered(held.remove(0)), "the oldest idle connection was closed");
        held.push(c); // now the newest idle one
    }
    let logged = wait_for(Duration::from_secs(30), || s.stderr().contains("idle the longest").then_some(()));
    assert!(logged.is_some(), "{}", s.stderr());
    // The newer idle connections are still open and usable.
    let mut last = held.pop().unwrap();
    write!(last, "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let (status, _) = read_response(&mut last, Vec::new());
    assert_eq!(status, 200);
}

/// `n` new connections, each busy with a request that is never done: following the event
/// stream of a session (started on the first of them), known to be followed once the stream's
/// first ping arrives.
fn following_connections(s: &Server, n: usize) -> Vec<TcpStream> {
    let mut conns = idle_connections(&s.addr, n);
    let body = json!({ "working_dir": std::env::temp_dir() }).to_string();
    let c = &mut conns[0];
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /agent/start HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (status, body) = read_response_body(c);
    assert_eq!(status, 200, "{body}");
    let started: serde_json::Value = serde_json::from_str(&body).unwrap();
    let id = started["id"].as_str().unwrap_or_else(|| panic!("no session id: {body}")).to_string();
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET /sessions/{id}/events HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").unwrap();
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(": ping") {
            let n = c.read(&mut chunk).unwrap();
            assert!(n > 0, "the event stream ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&chunk[..n]);
        }
    }
    conns
}

#[test]
fn at_the_connection_limit_with_none_idle_a_new_connection_is_closed() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_CONNECTIONS".into(), "4".into())],
        ..Default::default()
    });
    // Four requests in progress (event streams being answered): no connection is idle.
    let busy = following_connections(&s, 4);
    // A connection past the limit is told why without sending a request, then closed.
    let mut extra = TcpStream::connect(&s.addr).unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = String::new();
    let _ = extra.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    assert!(answer.contains("Retry-After: 1") && answer.contains("too many open connections"), "{answer:?}");
    let logged = wait_for(Duration::from_secs(30), || s.stderr().contains("none idle").then_some(()));
    assert!(logged.is_some(), "{}", s.stderr());
    drop(busy);
    // Connections are refused until the busy ones have ended: keep asking.
    let back = wait_for(Duration::from_secs(10), || {
        let r = std::panic::catch_unwind(|| http("GET", &s.url("/status"), None, None));
        r.is_ok_and(|r| r.status == 200).then_some(())
    });
    assert!(back.is_some(), "serves again once the connections are gone");
}

#[test]
fn running_out_of_file_descriptors_does_not_stop_the_server() {
    // A hard limit of 128 descriptors and a connection limit above what that allows: accept
    // fails with EMFILE. tiny_http used to stop accepting for good on the first such error.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_CONNECTIONS".into(), "1000".into())],
        fd_limit: Some((128, 128)),
        ..Default::default()
    });
    // Some connects may be refused once the listen backlog is full: the point is to run out.
    let held: Vec<TcpStream> = (0..150).filter_map(|_| TcpStream::connect(&s.addr).ok()).collect();
    let emfile = wait_for(Duration::from_secs(10), || s.stderr().contains("Too many open files").then_some(()));
    assert!(emfile.is_some(), "the flood ran the server out of descriptors: {}", s.stderr());
    drop(held);
    // Refused connects are expected while the backlog drains: keep asking.
    let back = wait_for(Duration::from_secs(15), || {
        let r = std::panic::catch_unwind(|| http("GET", &s.url("/status"), None, None));
        r.is_ok_and(|r| r.status == 200).then_some(())
    });
    assert!(back.is_some(), "serves again once descriptors are free: {}", s.stderr());
}

#[test]
fn the_default_connection_limit_follows_the_descriptor_limit() {
    // With 128 descriptors, the derived limit is (128 - 128/4) / 2 = 48 connections: the 49th
    // closes the oldest idle one instead of exhausting descriptors the server needs for files
    // and children.
    let s = Server::start_with(ServerOpts { fd_limit: Some((128, 128)), ..Default::default() });
    // (Accepted in order and counted as accepted: the request below comes after all 48.)
    let mut held = idle_connections(&s.addr, 48);
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
    assert!(closed_unanswered(held.remove(0)));
    drop(held);
    assert!(!s.stderr().contains("Too many open files"), "{}", s.stderr());
}

#[test]
fn a_client_pipelining_without_reading_cannot_grow_memory_or_block_others() {
    // One connection sends requests as fast as it can and never reads an answer. Each
    // connection has one request in flight at a time, so the rest waits in the kernel's socket
    // buffers, not in the server's memory (tiny_http used to queue them all: ~100 MB in 3 s).
    let s = Server::start();
    let before = rss_kib(s.pid());
    let c = TcpStream::connect(&s.addr).unwrap();
    c.set_nonblocking(true).unwrap();
    let rq = format!("GET /config HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").repeat(50);
    let t = Instant::now();
    let mut sent = 0usize;
    while t.elapsed() < Duration::from_secs(2) {
        match (&c).write(rq.as_bytes()) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sent > 100_000, "the client got {sent} bytes of requests out");
    // Another client is served while the pipelining one is still connected (blocked behind it,
    // this request would wait for as long as that connection stays open: past the end).
    assert_eq!(s.get("/config").status, 200);
    let grown = rss_kib(s.pid()).saturating_sub(before);
    assert!(grown < 20_000, "the server grew by {grown} KB");
    drop(c);
}

/// A server told to print its one-time login link (GOSLING_PRINT_LOGIN_LINK=1): the server and
/// the log line with the link.
pub(crate) fn with_login_link() -> (Server, String) {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_PRINT_LOGIN_LINK".into(), "1".into())],
        ..Default::default()
    });
    let line =
        wait_for(Duration::from_secs(30), || s.stderr().lines().find(|l| l.contains("#login=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no login link printed within 30 s: {}", s.stderr()));
    (s, line)
}

/// The token of a login link: what follows `#login=`.
pub(crate) fn login_token(line: &str) -> String {
    line.split("#login=").nth(1).unwrap().split_whitespace().next().unwrap().to_string()
}

#[test]
fn the_one_time_login_link_gives_the_key_once() {
    let (s, line) = with_login_link();
    assert!(!line.contains(SECRET), "the link carries a token, not the key");
    let token = login_token(&line);
    let body = json!({"token": token}).to_string();
    let r = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
    assert_eq!(r.status, 200);
    assert!(!r.text().contains(SECRET), "the key is never sent to the page");
    assert!(r.header("set-cookie").is_some_and(|c| c.contains("HttpOnly")), "a sign-in cookie");
    let again = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
    assert_eq!(again.status, 401, "works once");
}

/// The cookie `POST /auth/login` sets, as `name=value`, with its attributes.
fn login_cookie(r: &Resp) -> (String, String) {
    let set = r.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie: {}", r.text())).to_string();
    (set.split(';').next().unwrap().to_string(), set)
}

/// Issue 38 item 5: the web page's sign-in is a cookie — HttpOnly, SameSite=Strict, bounded in
/// time, named per port — given for the one-time link or the key typed once, standing for the
/// key only on the page's own requests (never for another site, never on /acp), ended by
/// sign-out and by a restart; the key itself never in an answer.
#[test]
fn the_web_page_signs_in_with_a_cookie_that_lasts_until_sign_out_or_restart() {
    let (s, line) = with_login_link();
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let token = login_token(&line);
    let r = http("POST", &s.url("/auth/login"), None, Some(json!({ "token": token }).to_string().as_bytes()));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.text().contains(SECRET));
    let (cookie, set) = login_cookie(&r);
    assert!(cookie.starts_with(&format!("gosling_login_{port}=")), "{set}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
        assert!(set.contains(attr), "{attr} missing: {set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: no Secure flag ({set})");
    let page = |extra: &[(&str, &str)]| {
        let mut h = vec![("Cookie", cookie.as_str())];
        h.extend_from_slice(extra);
        http_with("GET", &s.url("/sessions"), &h, None).status
    };
    assert_eq!(page(&[("Sec-Fetch-Site", "same-origin")]), 200, "the page's fetch (Chromium marks it)");
    assert_eq!(page(&[("X-Gosling-Page", "1")]), 200, "the page's own header");
    let own = s.url("");
    assert_eq!(page(&[("Origin", own.trim_end_matches('/'))]), 200, "its own origin");
    // Not for a request the browser does not mark as the page's own, nor from another site or port.
    assert_eq!(page(&[]), 401);
    assert_eq!(page(&[("Sec-Fetch-Site", "same-site")]), 401, "a page on another port of this machine");
    assert_eq!(page(&[("Sec-Fetch-Site", "cross-site")]), 401);
    // A wrong cookie, another port's name: refused.
    let wrong = format!("gosling_login_{port}={}", "0".repeat(64));
    let r = http_with("GET", &s.url("/sessions"), &[("Cookie", &wrong), ("X-Gosling-Page", "1")], None);
    assert_eq!(r.status, 401);
    assert!(r.json()["message"].as_str().unwrap().contains("X-Secret-Key"), "{}", r.text());
    let other = cookie.replacen(&format!("gosling_login_{port}"), "gosling_login_1", 1);
    assert_eq!(http_with("GET", &s.url("/sessions"), &[("Cookie", &other), ("X-Gosling-Page", "1")], None).status, 401);
    // Never on /acp (its key is the token).
    let r = http_with("GET", &s.url("/acp"), &[("Cookie", &cookie), ("Sec-Fetch-Site", "same-origin")], None);
    assert_eq!(r.status, 401, "{}", r.text());

    // The key typed once signs in the same way; a wrong key is refused saying where the key is.
    let r = http("POST", &s.url("/auth/login"), None, Some(json!({ "secret_key": "nope" }).to_string().as_bytes()));
    assert_eq!(r.status, 401);
    assert!(r.json()["message"].as_str().unwrap().contains("secret-key in gosling's state dir"), "{}", r.text());
    assert!(r.header("set-cookie").is_none());
    let r = http("POST", &s.url("/auth/login"), None, Some(json!({ "secret_key": SECRET }).to_string().as_bytes()));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.text().contains(SECRET));
    let (second, _) = login_cookie(&r);
    let r = http("POST", &s.url("/auth/login"), None, Some(br#"{"token":"a","secret_key":"b"}"#));
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("either `token`"), "{}", r.text());

    // Sign-out ends that sign-in only; the cookie is cleared.
    let r = http_with("POST", &s.url("/auth/logout"), &[("Cookie", &cookie)], Some(b"{}"));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["signed_out"], true);
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(page(&[("X-Gosling-Page", "1")]), 401, "signed out");
    let ok = http_with("GET", &s.url("/sessions"), &[("Cookie", &second), ("X-Gosling-Page", "1")], None);
    assert_eq!(ok.status, 200, "the other sign-in stays");
    // A restart signs every page out.
    let home = s.kill();
    let s = Server::start_in(home, ServerOpts::default());
    let second = second.replacen(
        &format!("gosling_login_{port}"),
        &format!("gosling_login_{}", s.addr.rsplit(':').next().unwrap()),
        1,
    );
    assert_eq!(
        http_with("GET", &s.url("/sessions"), &[("Cookie", &second), ("X-Gosling-Page", "1")], None).status,
        401
    );
}

#[test]
fn without_a_terminal_the_login_link_is_kept_in_a_private_file_named_on_stdout() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // A link planted where the file goes is replaced, never followed.
    let home = TempDir::new("login-file");
    let state = home.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let decoy = home.join("decoy");
    std::fs::write(&decoy, "untouched").unwrap();
    std::os::unix::fs::symlink(&decoy, state.join("login-link")).unwrap();
    // Started as Desktop or systemd starts it: stderr is a file, GOSLING_PRINT_LOGIN_LINK unset.
    let s = Server::start_in(home, ServerOpts::default());
    let line = s.early_stdout.iter().find(|l| l.contains("sign-in link")).expect("the file is named on stdout");
    assert!(!line.contains("#login="), "stdout names the file, not the link: {line}");
    let path = std::path::PathBuf::from(line.rsplit(" in ").next().unwrap());
    let port = s.addr.rsplit(':').next().unwrap();
    assert_eq!(path, s.home.join("state").join(format!("login-link-{port}")), "{line}");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.is_file(), "the planted link was replaced by a file");
    assert_eq!(meta.mode() & 0o777, 0o600, "the file is private");
    assert_eq!(std::fs::read_to_string(&decoy).unwrap(), "untouched");
    assert!(!s.stderr().contains("#login="), "no terminal: the link is not on stderr");
    let link = std::fs::read_to_string(&path).unwrap();
    assert!(link.starts_with(&s.url("/#login=")) && !link.contains(SECRET), "{link}");
    let token = link.trim_end().split("#login=").nth(1).unwrap();
    let body = json!({ "token": token }).to_string();
    let r = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
    assert_eq!(r.status, 200);
    assert!(r.header("set-cookie").is_some() && !r.text().contains(SECRET), "{}", r.text());
}

#[test]
fn serving_beyond_loopback_needs_an_explicit_secret() {
    let home = TempDir::new("host");
    let out = gosling(&home).args(["agent", "--port", "0", "--host", "0.0.0.0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GOOSE_SERVER__SECRET_KEY"));
    // With a secret it listens (on all interfaces; we only talk to it over loopback).
    let s = Server::start_with(ServerOpts { args: vec!["--host".into(), "0.0.0.0".into()], ..Default::default() });
    let port = s.addr.rsplit(':').next().unwrap();
    assert_eq!(http("GET", &format!("http://127.0.0.1:{port}/status"), None, None).status, 200);
}

#[test]
fn cors_only_for_configured_origins() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_CORS_ORIGINS".into(), "http://ui.example:8080, file://".into())],
        ..Default::default()
    });
    for origin in ["file://", "http://ui.example:8080"] {
        let pre = http_with(
            "OPTIONS",
            &s.url("/config"),
            &[("Origin", origin), ("Access-Control-Request-Method", "GET")],
            None,
        );
        assert_eq!(pre.status, 204, "{origin}");
        assert_eq!(pre.header("access-control-allow-origin"), Some(origin));
        assert!(pre.header("access-control-allow-headers").unwrap().contains("x-secret-key"));
        let r = http_with("GET", &s.url("/config"), &[("Origin", origin), ("X-Secret-Key", SECRET)], None);
        assert_eq!((r.status, r.header("access-control-allow-origin")), (200, Some(origin)));
    }
    for origin in ["https://evil.example", "http://127.0.0.1:1", "null"] {
        let pre = http_with("OPTIONS", &s.url("/config"), &[("Origin", origin)], None);
        assert_eq!(pre.status, 403);
        assert!(pre.header("access-control-allow-origin").is_none());
        let r = http_with("GET", &s.url("/config"), &[("Origin", origin), ("X-Secret-Key", SECRET)], None);
        assert_eq!(r.status, 403, "{origin}");
        assert!(r.header("access-control-allow-origin").is_none(), "{origin}");
    }
}

/// Opens `n` connections at once on a fresh server, then sends `GET /status` on each and keeps
/// them open; every one must be answered well within the server's idle timeout (30 s): a
/// connection left waiting for a thread waits for another connection to go idle that long.
fn burst(s: &Server, n: usize) {
    let io_timeout = Duration::from_secs(30);
    let mut conns = idle_connections(&s.addr, n);
    let sent = Instant::now();
    for c in &mut conns {
        c.set_read_timeout(Some(io_timeout + Duration::from_secs(5))).unwrap();
        write!(c, "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    }
    let mut slowest = Duration::ZERO;
    for (i, c) in conns.iter_mut().enumerate() {
        let (status, _) = read_response(c, Vec::new());
        assert_eq!(status, 200, "connection {i} of {n}");
        slowest = slowest.max(sent.elapsed());
    }
    crate::support::assert_well_under(slowest, io_timeout, &format!("{n} new connections, the last one answered"));
}

#[test]
fn a_burst_of_new_connections_is_answered_at_once() {
    // Each on a fresh server: the first connections are where a lazily grown pool of threads
    // left some waiting for others to go idle.
    for _ in 0..3 {
        burst(&Server::start(), 16);
    }
    burst(&Server::start(), 256);
}

/// Issue 27 finding 6: heads that fail the Host, Origin or key check are answered from the
/// head, without a request slot, so clients without the key cannot hold every slot (with a
/// large `Content-Length` and no body they used to: the user got 503 for 90 s).
#[test]
fn heads_without_the_key_never_hold_a_request_slot() {
    let cap = 8;
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_REQUESTS".into(), cap.to_string()), ("GOSLING_IO_TIMEOUT_SECS".into(), "30".into())],
        ..Default::default()
    });
    // Missing key, wrong Host, foreign Origin, wrong key (a few: wrong keys count as guesses).
    let kinds = [
        ("localhost", "", "", 401, "missing X-Secret-Key"),
        ("evil.example", "", "", 403, "not this server's name"),
        ("localhost", "Origin: https://evil.example\r\n", "", 403, "cross-origin requests from"),
        ("localhost", "", "X-Secret-Key: wrong\r\n", 401, "wrong X-Secret-Key"),
    ];
    let mut held = Vec::new();
    for i in 0..72 {
        let (host, origin, key, want, why) = kinds[if i < 68 { i % 3 } else { 3 }];
        let mut c = TcpStream::connect(&s.addr).unwrap();
        write!(
            c,
            "POST /config/upsert HTTP/1.1\r\nHost: {host}\r\n{origin}{key}Content-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{{"
        )
        .unwrap();
        held.push((c, want, why));
    }
    // Each is answered from its head, its body never read.
    for (c, want, why) in &mut held {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![0; 4096];
        let n = c.read(&mut buf).unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(text.starts_with(&format!("HTTP/1.1 {want}")) && text.contains(*why), "{text:?}");
    }
    // While they are all still connected, the person with the key is served: a request that
    // found the slots held would wait a second and be refused 503.
    for _ in 0..cap * 2 {
        let r = s.post("/config/upsert", json!({"key": "k", "value": "v", "is_secret": false}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(s.get("/config").status, 200);
    drop(held);
}

/// Sends `head` (a whole request head) on a new connection and returns the raw answer up to
/// the connection's close, `Date` lines left out (they differ from one second to the next).
fn raw_answer(addr: &str, head: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    String::from_utf8(out).unwrap().split("\r\n").filter(|l| !l.starts_with("Date: ")).collect::<Vec<_>>().join("\r\n")
}

/// `GET /status` without an `Origin` is answered by the server's short path (issue 30), with an
/// `Origin` by the route: the answers are the same bytes, and the gate (Host, origin) still
/// refuses first on both.
#[test]
fn status_answers_alike_on_the_short_path_and_the_route() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_CORS_ORIGINS".into(), "http://ui.example:8080".into())],
        ..Default::default()
    });
    let host = &s.addr;
    let ask = |extra: &str| {
        raw_answer(&s.addr, &format!("GET /status HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"))
    };
    let short = ask("");
    assert!(short.starts_with("HTTP/1.1 200 OK\r\n"), "{short}");
    assert!(short.ends_with("\r\n\r\nok"), "{short}");
    assert!(short.contains("\r\nContent-Type: text/plain; charset=utf-8\r\n"), "{short}");
    assert!(short.contains("\r\nContent-Length: 2\r\n"), "{short}");
    // A same-origin `Origin` takes the route (no CORS headers either way): the same bytes.
    assert_eq!(ask(&format!("Origin: http://{host}\r\n")), short);
    // A configured origin gets its CORS headers from the route.
    let cors = ask("Origin: http://ui.example:8080\r\n");
    assert!(cors.contains("\r\nAccess-Control-Allow-Origin: http://ui.example:8080\r\n"), "{cors}");
    // Refused before either path: a foreign Host, a foreign origin.
    let rebinding = raw_answer(&s.addr, "GET /status HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    assert!(rebinding.starts_with("HTTP/1.1 403 "), "{rebinding}");
    assert!(ask("Origin: https://evil.example\r\n").starts_with("HTTP/1.1 403 "));
    // Two requests in one write (the head reader takes a buffer at a time): both answered, in order.
    let two = raw_answer(
        &s.addr,
        &format!("GET /status HTTP/1.1\r\nHost: {host}\r\n\r\nGET /nope HTTP/1.1\r\nHost: {host}\r\nX-Secret-Key: {SECRET}\r\nConnection: close\r\n\r\n"),
    );
    assert!(two.starts_with("HTTP/1.1 200 OK\r\n") && two.contains("ok") && two.contains("HTTP/1.1 404 "), "{two}");
}

/// Issue 38 item 5: over HTTPS (`gosling agent`'s default) the web page's sign-in cookie is
/// also `Secure`, so a browser never sends it over plain HTTP.
#[test]
fn over_https_the_sign_in_cookie_is_secure() {
    use crate::tls::{connect, exchange_json, fingerprint_line};
    let s = Server::start_with(ServerOpts { default_tls: true, ..Default::default() });
    let pin = fingerprint_line(&s);
    let mut c = std::io::BufReader::new(connect(&s.addr, &pin).unwrap());
    let r = exchange_json(&mut c, "POST", "/auth/login", None, Some(&json!({ "secret_key": SECRET }))).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains(SECRET), "{}", r.body);
    let set = r.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("set-cookie")).map(|(_, v)| v.clone());
    let set = set.unwrap_or_else(|| panic!("no Set-Cookie: {:?}", r.headers));
    for attr in ["; Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(set.contains(attr), "{attr} missing: {set}");
    }
}

/// One chunked response from `buf` and then `c`: its head, its body (chunks joined) and what
/// follows its last chunk. Fails if the connection ends before the last chunk.
fn read_chunked(c: &mut impl Read, mut buf: Vec<u8>) -> (String, Vec<u8>, Vec<u8>) {
    let mut more = |buf: &mut Vec<u8>| {
        let mut chunk = [0u8; 65536];
        let n = c.read(&mut chunk).expect("the answer arrives within the test's read timeout");
        assert!(n > 0, "the connection ended before the last chunk: {}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let end = loop {
        match buf.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(end) => break end,
            None => more(&mut buf),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    let mut at = end + 4;
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            match buf[at..].windows(2).position(|w| w == b"\r\n") {
                Some(i) => break at + i,
                None => more(&mut buf),
            }
        };
        let size = usize::from_str_radix(std::str::from_utf8(&buf[at..line_end]).unwrap().trim(), 16).unwrap();
        while buf.len() < line_end + 2 + size + 2 {
            more(&mut buf);
        }
        body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
        assert_eq!(&buf[line_end + 2 + size..line_end + 4 + size], b"\r\n", "a chunk ends with CRLF");
        at = line_end + 4 + size;
        if size == 0 {
            return (head, body, buf.split_off(at));
        }
    }
}

/// Whether a response head says `Connection: close`.
fn says_close(head: &str) -> bool {
    head.lines().any(|l| l.to_ascii_lowercase().replace(' ', "") == "connection:close")
}

/// A streamed answer that is no event stream (`GET /sessions/{id}`, written as the conversation
/// is read, chunked) is delimited by its last chunk and does not say `Connection: close`: the
/// connection serves the next request, also one pipelined behind it. A client that asks for
/// the close is told so and gets the end right after the last chunk, not at the server's
/// socket timeout.
#[test]
fn a_streamed_answer_keeps_the_connection_alive_and_closes_it_when_asked() {
    let s = Server::start_with(ServerOpts {
        // The server's own read timeout far beyond this test's, so only the close ends the read.
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "120".into())],
        ..Default::default()
    });
    let work = TempDir::new("stream-close");
    let id = crate::support::start_session(&s, work.path(), None);
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let ask = |close: bool| {
        let close = if close { "Connection: close\r\n" } else { "" };
        format!("GET /sessions/{id} HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n{close}\r\n")
    };
    // Keep-alive: the whole answer, then the next one on the same socket.
    c.write_all(ask(false).as_bytes()).unwrap();
    let (head, body, rest) = read_chunked(&mut c, Vec::new());
    assert!(head.starts_with("HTTP/1.1 200") && !says_close(&head), "{head}");
    assert!(String::from_utf8_lossy(&body).contains(&id) && rest.is_empty());
    // Two more at once, the second asking for the close: both answered in order, then the end.
    c.write_all((ask(false) + &ask(true)).as_bytes()).unwrap();
    let (head, body, rest) = read_chunked(&mut c, Vec::new());
    assert!(head.starts_with("HTTP/1.1 200") && !says_close(&head), "{head}");
    assert!(String::from_utf8_lossy(&body).contains(&id));
    let (head, body, mut rest) = read_chunked(&mut c, rest);
    assert!(head.starts_with("HTTP/1.1 200") && says_close(&head), "the last answer says close: {head}");
    assert!(String::from_utf8_lossy(&body).contains(&id));
    // Without the close the read would wait for the server's 120 s timeout and fail at 20 s.
    c.read_to_end(&mut rest).expect("the server closes the connection after the last chunk when asked");
    assert!(rest.is_empty(), "nothing after the last answer: {}", String::from_utf8_lossy(&rest));
}

/// An OpenAI-style model whose answer is `text`, then (with `stall`) nothing more for a minute.
fn model(text: &str, stall: bool) -> crate::fake_llm::FakeLlm {
    use crate::fake_llm::{oa_finish, oa_text, FakeLlm, Reply, Step, OA_DONE};
    let reply = if stall {
        Reply::sse(&[oa_text(text)]).then(Step::Sleep(Duration::from_secs(60)))
    } else {
        Reply::sse(&[oa_text(text), oa_finish("stop"), OA_DONE.to_string()])
    };
    FakeLlm::start(vec![reply])
}

/// `POST /reply`'s request on a new connection (keep-alive: no `Connection` header).
fn reply_request(id: &str) -> String {
    let message = json!({"role": "user", "created": 1735725600, "content": [{"type": "text", "text": "hi"}], "metadata": {"userVisible": true, "agentVisible": true}});
    let body = json!({"session_id": id, "user_message": message}).to_string();
    format!(
        "POST /reply HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// An event stream (`POST /reply`, SSE) says `Connection: close` and keeps its word: after its
/// last chunk the server closes the connection, so a client that reads to the end gets the end
/// then, not at the server's socket timeout (issue: it said close and kept the socket ~30 s).
#[test]
fn an_event_stream_says_close_and_closes_after_its_last_chunk() {
    let llm = model("Hello, stream", false);
    let mut env = llm.env("mock-model");
    env.push(("GOSLING_IO_TIMEOUT_SECS".into(), "120".into()));
    let s = Server::start_with(ServerOpts { env, ..Default::default() });
    let work = TempDir::new("sse-close");
    let id = crate::support::start_session(&s, work.path(), None);
    crate::support::resume(&s, &id);
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(reply_request(&id).as_bytes()).unwrap();
    let mut all = Vec::new();
    // The server's timeout is 120 s: only its close ends this read within the test's 20 s.
    c.read_to_end(&mut all).expect("the server closes the connection after the event stream's last chunk");
    let (head, body, rest) = read_chunked(&mut &all[..], Vec::new());
    assert!(head.starts_with("HTTP/1.1 200") && says_close(&head), "{head}");
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("Hello, stream") && body.contains("\"Finish\""), "{body}");
    assert!(rest.is_empty(), "{rest:?}");
}

/// A stopping server (SIGTERM) ends its streams before it exits: a session's event stream and
/// a `POST /reply` whose model stalls both end with their last chunk (the reply saying the
/// server is shutting down), and the connection then closes. Before, the process exited under
/// them and the client saw the body cut (Chromium: `ERR_INCOMPLETE_CHUNKED_ENCODING`, the
/// browser test's restart).
#[test]
fn a_stopping_server_ends_its_streams_with_their_last_chunk() {
    let llm = model("Hel", true);
    let s = Server::start_with(ServerOpts { env: llm.env("mock-model"), ..Default::default() });
    let work = TempDir::new("stop-streams");
    let id = crate::support::start_session(&s, work.path(), None);
    crate::support::resume(&s, &id);
    let read_until = |c: &mut TcpStream, what: &str| {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(what) {
            let n = c.read(&mut chunk).unwrap();
            assert!(n > 0, "the stream ended before {what:?}: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    };
    let mut events = TcpStream::connect(&s.addr).unwrap();
    events.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(events, "GET /sessions/{id}/events HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").unwrap();
    let mut from_events = read_until(&mut events, ": ping");
    let mut reply = TcpStream::connect(&s.addr).unwrap();
    reply.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    reply.write_all(reply_request(&id).as_bytes()).unwrap();
    // The model's first words are out: the turn now waits on the stalled model.
    let mut from_reply = read_until(&mut reply, "Hel");
    let mut s = s;
    let _ = std::process::Command::new("kill").arg("-TERM").arg(s.pid().to_string()).status();
    for (what, c, got) in [("event stream", &mut events, &mut from_events), ("reply", &mut reply, &mut from_reply)] {
        c.read_to_end(got).unwrap_or_else(|e| panic!("the {what}'s connection ends: {e}"));
        let (head, body, rest) = read_chunked(&mut &got[..], Vec::new());
        assert!(head.starts_with("HTTP/1.1 200") && says_close(&head), "{what}: {head}");
        assert!(rest.is_empty(), "{what}: {rest:?}");
        if what == "reply" {
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains("the server is shutting down"), "the reply says why it ends: {body}");
        }
    }
    let exited = wait_for(Duration::from_secs(20), || s.child.try_wait().ok().flatten());
    assert!(exited.is_some(), "the server exits after its streams ended");
    assert!(!s.stderr().contains("still open"), "no stream was left to the exit: {}", s.stderr());
    let _home = s.kill(); // reaped already: nothing is signalled
}
