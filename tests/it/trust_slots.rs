//! Issue 27 (slot hold-ups): the routes open without the key read a body before anything
//! proves the client holds a secret (`POST /auth/login`, `POST /mcp-app-guest`, and any other
//! open path sent with a body). They share a few request slots of their own and must send their
//! body quickly, so slow unauthenticated bodies never deny service to a client with the key.

use crate::support::{http, wait_for, Server, ServerOpts};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A request on an open path whose head promises a body it does not send (one byte of it).
fn slow_open(addr: &str, method: &str, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
    )
    .unwrap();
    c
}

/// The status of the answer on `c`, if one comes within `wait`.
fn answer(c: &mut TcpStream, wait: Duration) -> Option<u16> {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    let n = c.read(&mut buf).ok().filter(|&n| n > 0)?;
    String::from_utf8_lossy(&buf[..n]).split_whitespace().nth(1)?.parse().ok()
}

/// True when an answer has begun to arrive on `c` (it is left there to be read).
fn answered_yet(c: &TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let got = matches!(c.peek(&mut [0u8; 1]), Ok(n) if n > 0);
    c.set_nonblocking(false).unwrap();
    got
}

#[test]
fn slow_unauthenticated_bodies_never_hold_the_key_holders_slots() {
    let cap = 8;
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_REQUESTS".into(), cap.to_string()), ("GOSLING_IO_TIMEOUT_SECS".into(), "30".into())],
        ..Default::default()
    });
    // 64 slow bodies, on every open route that reads one.
    let kinds = [
        ("POST", "/auth/login"),
        ("POST", "/mcp-app-guest"),
        ("POST", "/mcp-app-guest?secret=wrong"),
        ("GET", "/mcp-ui-proxy"),
        ("POST", "/status"),
    ];
    let mut slow: Vec<TcpStream> = (0..64)
        .map(|i| {
            let (m, p) = kinds[i % kinds.len()];
            slow_open(&s.addr, m, p)
        })
        .collect();
    // The open routes' few slots are full once the first slow body is refused (503).
    let full = wait_for(Duration::from_secs(30), || slow.iter().any(answered_yet).then_some(()));
    assert!(full.is_some(), "no slow body was refused: the open routes' slots never filled");
    // While they are all connected, the person with the key is served, again and again (a
    // request that found no slot would wait a second and be refused 503).
    for i in 0..cap * 3 {
        let r = s.post("/config/upsert", json!({"key": format!("k{i}"), "value": "v", "is_secret": false}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let st = http("GET", &s.url("/status"), None, None);
    assert_eq!(st.status, 200);
    // All but the few that got an open slot were refused at once (busy), not left waiting for
    // a slot; those few are cut off for their slow body (408) or still held (a body that sends
    // nothing waits out the I/O timeout) — never more than `OPEN_SLOTS` (4) of them.
    let statuses: Vec<Option<u16>> = slow.iter_mut().map(|c| answer(c, Duration::from_secs(5))).collect();
    let busy = statuses.iter().filter(|s| **s == Some(503)).count();
    assert!(busy >= 64 - 4, "503 for {busy} of 64: {statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, Some(503 | 408) | None)), "{statuses:?}");
    drop(slow);

    // A body that trickles (a byte every 300 ms, under the minimum rate) is cut off soon after
    // the open routes' short grace.
    let mut c = slow_open(&s.addr, "POST", "/auth/login");
    let cut = wait_for(Duration::from_secs(20), || {
        if c.write_all(b" ").is_err() {
            return Some(None);
        }
        answer(&mut c, Duration::from_millis(300)).map(Some)
    });
    assert_eq!(cut.flatten(), Some(408), "a trickled login body is cut off");

    // With them gone, a login is answered on its merits (a wrong token: 401), not 503.
    let r = http("POST", &s.url("/auth/login"), None, Some(br#"{"token":"not-the-token"}"#));
    assert_eq!(r.status, 401, "{}", r.text());
}
