//! Issue 13 §6, the HTTP trust boundary against the real binary: the `Host` check (DNS
//! rebinding), browser origins, guessing the key or the login token, ambiguous request
//! framing. Each class is tried with several members: the refused ones refused with their
//! message, the allowed ones still working.

use crate::support::{http, http_with, wait_for, Resp, Server, ServerOpts, SECRET};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `head` (request line and headers, without the blank line) plus `body` with
/// `Connection: close`, in one write; returns the status and the body.
fn raw(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut bytes = format!("{head}\r\nConnection: close\r\n\r\n").into_bytes();
    bytes.extend_from_slice(body);
    c.write_all(&bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn requests_for_other_hosts_are_refused() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_ALLOWED_HOSTS".into(), "gosling.internal, Box.LAN".into())],
        ..Default::default()
    });
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let refused = [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        "localhost.evil.example".into(),
        "[::2]".into(),
        "0.0.0.0".into(),
        "127.0.0.2".into(),
        "localhost:abc".into(),
        "localhost:".into(),
        "[::1".into(),
    ];
    for host in &refused {
        for path in ["/status", "/config", "/"] {
            let (status, body) =
                raw(&s.addr, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Secret-Key: {SECRET}"), b"");
            assert_eq!(status, 403, "Host {host:?} {path}: {body}");
            assert!(body.contains("DNS rebinding") && body.contains("GOSLING_ALLOWED_HOSTS"), "{host}: {body}");
        }
    }
    // No Host at all (HTTP/1.0) is refused the same way.
    let (status, body) = raw(&s.addr, "GET /status HTTP/1.0", b"");
    assert_eq!(status, 403);
    assert!(body.contains("no Host header"), "{body}");
    let allowed = [
        "localhost".to_string(),
        format!("localhost:{port}"),
        "LocalHost:1".into(),
        "127.0.0.1".into(),
        format!("127.0.0.1:{port}"),
        "[::1]".into(),
        format!("[::1]:{port}"),
        "gosling.internal".into(),
        format!("box.lan:{port}"),
    ];
    for host in &allowed {
        let (status, body) =
            raw(&s.addr, &format!("GET /config HTTP/1.1\r\nHost: {host}\r\nX-Secret-Key: {SECRET}"), b"");
        assert_eq!(status, 200, "Host {host:?}: {body}");
    }
}

#[test]
fn the_address_given_with_host_is_allowed() {
    // 127.0.0.2 is a loopback address too (Linux routes all of 127/8 to lo).
    let s = Server::start_with(ServerOpts { args: vec!["--host".into(), "127.0.0.2".into()], ..Default::default() });
    assert!(s.addr.starts_with("127.0.0.2:"), "{}", s.addr);
    let (status, body) =
        raw(&s.addr, &format!("GET /config HTTP/1.1\r\nHost: {}\r\nX-Secret-Key: {SECRET}", s.addr), b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
    let (status, _) = raw(&s.addr, "GET /status HTTP/1.1\r\nHost: 127.0.0.3", b"");
    assert_eq!(status, 403);
}

#[test]
fn foreign_origins_are_refused_and_configured_ones_get_cors() {
    let s = Server::start();
    let own = format!("http://{}", s.addr);
    for origin in ["https://evil.example", "null", "file:///etc", "http://localhost.evil.example", "http://127.0.0.1:1"]
    {
        for (method, path) in [("GET", "/config"), ("POST", "/config/read"), ("OPTIONS", "/config"), ("GET", "/status")]
        {
            let body = json!({"key": "K", "is_secret": false}).to_string();
            let r = http_with(
                method,
                &s.url(path),
                &[("Origin", origin), ("X-Secret-Key", SECRET)],
                (method == "POST").then_some(body.as_bytes()),
            );
            assert_eq!(r.status, 403, "{method} {path} from {origin}: {}", r.text());
            assert!(r.header("access-control-allow-origin").is_none());
            if method != "OPTIONS" {
                let m = r.json()["message"].as_str().unwrap().to_string();
                assert!(m.contains(origin) && m.contains("GOSLING_CORS_ORIGINS"), "{m}");
            }
        }
    }
    // No Origin (Desktop's main process, the CLI, scripts) and our own origin (the web page).
    let r = s.get("/config");
    assert_eq!(r.status, 200);
    let r = http_with("GET", &s.url("/config"), &[("Origin", &own), ("X-Secret-Key", SECRET)], None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("access-control-allow-origin").is_none(), "same-origin needs no CORS");
    // Goose Desktop's renderer (a `file://` page in Electron) gets CORS, exactly that origin.
    let r = http_with("GET", &s.url("/config"), &[("Origin", "file://"), ("X-Secret-Key", SECRET)], None);
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, Some("file://")), "{}", r.text());
    // `null` (a sandboxed frame) gets CORS only when configured, with exactly that origin.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_CORS_ORIGINS".into(), "null".into())],
        ..Default::default()
    });
    let r = http_with("GET", &s.url("/config"), &[("Origin", "null"), ("X-Secret-Key", SECRET)], None);
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, Some("null")));
}

/// Makes up to `most` wrong guesses (`guess(i)`, answered 401) until one is answered 429:
/// that comes after 20 or more (typos are allowed), with a Retry-After of 1 to 5 s and a
/// message that says to wait. The message.
fn limited_after_some_guesses(most: usize, what: &str, mut guess: impl FnMut(usize) -> Resp) -> String {
    let mut limited = None;
    for i in 0..most {
        let r = guess(i);
        match r.status {
            401 => {}
            429 => {
                limited = Some((i, r));
                break;
            }
            other => panic!("guess {i}: {other} {}", r.text()),
        }
    }
    let (after, r) = limited.expect(what);
    assert!(after >= 20, "some wrong guesses are allowed first (typos): limited after {after}");
    let wait: u64 = r.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=5).contains(&wait), "{wait}");
    let m = r.json()["message"].as_str().unwrap().to_string();
    assert!(m.contains("too many failed attempts") && m.contains("wait"), "{m}");
    m
}

#[test]
fn guessing_the_key_is_rate_limited_per_peer() {
    let s = Server::start();
    // A missing key is not a guess.
    for _ in 0..40 {
        assert_eq!(http("GET", &s.url("/config"), None, None).status, 401);
    }
    let m = limited_after_some_guesses(60, "guessing is limited", |i| {
        let r = http("GET", &s.url("/config"), Some(&format!("guess-{i}")), None);
        if r.status == 401 {
            assert!(r.json()["message"].as_str().unwrap().contains("wrong X-Secret-Key"));
        }
        r
    });
    assert!(m.contains("127.0.0.1"), "{m}");
    let logged = wait_for(Duration::from_secs(30), || s.stderr().contains("too many wrong keys").then_some(()));
    assert!(logged.is_some(), "the server log says so once: {}", s.stderr());
    assert_eq!(s.stderr().matches("too many wrong keys").count(), 1);
    // While limited, even the right key is refused (so a refusal says nothing about a guess),
    // and open routes still answer.
    assert_eq!(s.get("/config").status, 429);
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
    // After the wait, the right key works again; right keys never use up attempts.
    let back = wait_for(Duration::from_secs(10), || (s.get("/config").status == 200).then_some(()));
    assert!(back.is_some(), "the right key works after Retry-After");
    for _ in 0..50 {
        assert_eq!(s.get("/config").status, 200, "right keys never use up the attempts");
    }
}

#[test]
fn many_parallel_clients_with_the_key_are_never_limited() {
    let s = Server::start();
    let url = s.url("/config");
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..48)
            .map(|_| {
                scope.spawn(|| (0..10).map(|_| http("GET", &url, Some(SECRET), None).status).collect::<Vec<u16>>())
            })
            .collect();
        for c in clients {
            assert!(c.join().unwrap().iter().all(|s| *s == 200));
        }
    });
}

#[test]
fn a_wrong_login_token_never_burns_the_real_one() {
    let (s, line) = crate::server::with_login_link();
    let token = crate::server::login_token(&line);
    for wrong in ["", "0", "wrong", &token[..token.len() - 1], &format!("{token}0")] {
        let body = json!({ "token": wrong }).to_string();
        let r = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
        assert_eq!(r.status, 401, "{wrong:?}");
        assert!(r.json()["message"].as_str().unwrap().contains("login link is wrong"));
    }
    let body = json!({ "token": token }).to_string();
    let r = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
    assert_eq!(r.status, 200, "the real token still works after wrong guesses: {}", r.text());
    assert!(r.header("set-cookie").is_some_and(|c| c.contains("HttpOnly")), "signed in with a cookie");
    // Guessing on is limited like the key.
    let limited = (0..60).find_map(|i| {
        let body = json!({ "token": format!("guess-{i}") }).to_string();
        let r = http("POST", &s.url("/auth/login"), None, Some(body.as_bytes()));
        (r.status == 429).then_some(r)
    });
    let r = limited.expect("token guessing is limited");
    assert!(r.header("retry-after").is_some());
    assert!(r.json()["message"].as_str().unwrap().contains("too many failed attempts"));
}

#[test]
fn ambiguous_content_length_is_400_and_closes_the_connection() {
    let s = Server::start();
    let body = br#"{"key":"K","value":"v","is_secret":false}"#;
    let n = body.len();
    let head = |framing: &str| {
        format!(
            "POST /config/upsert HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nContent-Type: application/json\r\n{framing}"
        )
    };
    let refused = [
        ("Content-Length: abc".to_string(), "invalid Content-Length"),
        ("Content-Length: -1".into(), "invalid Content-Length"),
        (format!("Content-Length: +{n}"), "invalid Content-Length"),
        (format!("Content-Length: {n}.0"), "invalid Content-Length"),
        ("Content-Length: ".into(), "invalid Content-Length"),
        ("Content-Length: 99999999999999999999999".into(), "invalid Content-Length"),
        (format!("Content-Length: 0x{n:x}"), "invalid Content-Length"),
        (format!("Content-Length: {n}, {}", n + 1), "conflicting Content-Length"),
        (format!("Content-Length: {n}\r\nContent-Length: 2"), "conflicting Content-Length"),
        (format!("Content-Length: {n}\r\nTransfer-Encoding: chunked"), "both Content-Length and Transfer-Encoding"),
        (format!("Transfer-Encoding: chunked\r\nContent-Length: {n}"), "both Content-Length and Transfer-Encoding"),
        ("Transfer-Encoding: gzip".into(), "unsupported Transfer-Encoding"),
        ("Transfer-Encoding: gzip, chunked".into(), "unsupported Transfer-Encoding"),
    ];
    for (framing, message) in &refused {
        // A second request follows in the same bytes: it must never be parsed.
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let smuggled = "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let mut bytes = format!("{}\r\n\r\n", head(framing)).into_bytes();
        bytes.extend_from_slice(body);
        bytes.extend_from_slice(smuggled.as_bytes());
        c.write_all(&bytes).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out); // returns only once the server closes
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 400"), "{framing:?}: {text}");
        assert!(text.contains(message), "{framing:?}: {text}");
        assert_eq!(text.matches("HTTP/1.1").count(), 1, "{framing:?}: a second response: {text}");
    }
    // Repeating the same length is not ambiguous, and chunked alone is fine.
    for framing in [format!("Content-Length: {n}\r\nContent-Length: {n}"), format!("Content-Length: {n}, {n}")] {
        let (status, text) = raw(&s.addr, &head(&framing), body);
        assert_eq!(status, 200, "{framing:?}: {text}");
    }
    let mut chunked = format!("{:x}\r\n", n).into_bytes();
    chunked.extend_from_slice(body);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let (status, text) = raw(&s.addr, &head("Transfer-Encoding: chunked"), &chunked);
    assert_eq!(status, 200, "{text}");
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
}

/// Issue 27 finding 5: the proxy pages' `secret` parameter (query or, for `POST
/// /mcp-app-guest`, body) and `/acp`'s `?token=` are guesses like the header, in the same
/// per-peer bucket.
#[test]
fn guessing_the_proxy_secret_or_the_acp_token_is_rate_limited_too() {
    let s = Server::start();
    let guess = |i: usize| -> crate::support::Resp {
        let g = format!("guess-{i}");
        match i % 5 {
            0 => http("GET", &s.url(&format!("/mcp-ui-proxy?secret={g}")), None, None),
            1 => http("GET", &s.url(&format!("/mcp-app-proxy?secret={g}")), None, None),
            2 => http("GET", &s.url(&format!("/mcp-app-guest?secret={g}&nonce=x")), None, None),
            3 => {
                let body = json!({ "secret": g, "html": "<p>hi</p>" }).to_string();
                http("POST", &s.url("/mcp-app-guest"), None, Some(body.as_bytes()))
            }
            _ => http("GET", &s.url(&format!("/acp?token={g}")), None, None),
        }
    };
    let m =
        limited_after_some_guesses(80, "guessing the proxy secret is limited (it was not: issue 27 finding 5)", guess);
    assert!(m.contains("`secret` parameter"), "{m}");
    // Every kind of guess is refused now, and so is the right secret from this peer, on the
    // proxy pages and with the header: a refusal says nothing about the guess.
    for i in 0..5 {
        assert_eq!(guess(i).status, 429, "kind {i}");
    }
    let right = s.url(&format!("/mcp-ui-proxy?secret={SECRET}"));
    assert_eq!(http("GET", &right, None, None).status, 429);
    assert_eq!(s.get("/config").status, 429);
    // After the wait the right secret works again, on the page and with the header.
    let back = wait_for(Duration::from_secs(10), || (http("GET", &right, None, None).status == 200).then_some(()));
    assert!(back.is_some(), "the right secret works after Retry-After");
    assert_eq!(s.get("/config").status, 200);
    let app = s.url(&format!("/mcp-app-proxy?secret={SECRET}"));
    for _ in 0..40 {
        assert_eq!(http("GET", &app, None, None).status, 200, "right secrets never use up the attempts");
    }
}
