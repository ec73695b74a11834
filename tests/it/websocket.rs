//! The WebSocket at `/acp` (goose-serve.md §3), through the real binary, plain and TLS: the
//! handshake, the token (header and query, 401 before the upgrade), the origin rules (403),
//! Desktop's 406 probe, bad upgrades (400), ACP over text frames, ping/pong, the close
//! handshake, every protocol violation answered with its close code (fuzzed frames from a raw
//! client), the message limit, and a slow reader's bounded memory. Independent client
//! libraries (Node `ws`, Python `websockets`) are in `websocket_peers.rs`.

use crate::support::{http_with, hwm_kib, rss_kib, Server, ServerOpts, SECRET};
use gosling::wire::websocket::{self as ws, Opcode};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub(crate) trait Io: Read + Write + Send {}
impl<T: Read + Write + Send> Io for T {}

/// A hand-written WebSocket client: enough to send any frame, well-formed or not.
pub(crate) struct Client {
    io: Box<dyn Io>,
    buf: Vec<u8>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Why the last read gave nothing: the server closed, or the read failed (a timeout).
    ended: String,
}

pub(crate) const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// A plain TCP connection to the server (30 s read timeout).
pub(crate) fn tcp(s: &Server) -> Box<dyn Io> {
    tcp_timeout(s, Duration::from_secs(30))
}

pub(crate) fn tcp_timeout(s: &Server, read: Duration) -> Box<dyn Io> {
    let t = TcpStream::connect(&s.addr).unwrap();
    t.set_read_timeout(Some(read)).unwrap();
    t.set_nodelay(true).unwrap();
    Box::new(t)
}

/// The path with the token in the query, as Desktop connects.
pub(crate) fn acp_path() -> String {
    format!("/acp?token={SECRET}")
}

impl Client {
    /// Sends an upgrade request for `path` with the standard WebSocket headers (those named in
    /// `skip` left out) plus `extra`, and reads the response head (and a non-101's body).
    pub(crate) fn open_with(mut io: Box<dyn Io>, path: &str, extra: &[(&str, &str)], skip: &[&str]) -> Client {
        let mut head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n");
        for (k, v) in [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", KEY),
            ("Sec-WebSocket-Version", "13"),
        ] {
            if !skip.contains(&k) {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        io.write_all(head.as_bytes()).unwrap();
        io.flush().unwrap();
        let mut c =
            Client { io, buf: Vec::new(), status: 0, headers: Vec::new(), body: String::new(), ended: String::new() };
        let end = loop {
            if let Some(i) = c.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            assert!(c.fill(), "the server closed before answering the upgrade");
        };
        let head = String::from_utf8(c.buf[..end].to_vec()).unwrap();
        c.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        c.status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
        for l in lines {
            let (k, v) = l.split_once(':').unwrap();
            c.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        if c.status != 101 {
            let n: usize = c.header("content-length").map_or(0, |n| n.parse().unwrap());
            while c.buf.len() < n {
                assert!(c.fill());
            }
            c.body = String::from_utf8_lossy(&c.buf[..n]).into_owned();
        }
        c
    }

    pub(crate) fn open(io: Box<dyn Io>, path: &str, extra: &[(&str, &str)]) -> Client {
        Client::open_with(io, path, extra, &[])
    }

    /// A client with the token, already upgraded.
    pub(crate) fn connect(s: &Server) -> Client {
        let c = Client::open(tcp(s), &acp_path(), &[]);
        assert_eq!(c.status, 101, "{}", c.body);
        c
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Reads more from the socket; false at its end (or on an error such as a reset).
    fn fill(&mut self) -> bool {
        let mut b = [0u8; 65536];
        match self.io.read(&mut b) {
            Ok(0) => {
                self.ended = "the server closed the connection".into();
                false
            }
            Err(e) => {
                self.ended = format!("reading failed: {e} (a timeout: the server sent nothing)");
                false
            }
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
        }
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).unwrap();
        self.io.flush().unwrap();
    }

    pub(crate) fn send(&mut self, fin: bool, op: Opcode, payload: &[u8]) {
        let mask: [u8; 4] = gosling::util::random_bytes(4).try_into().unwrap();
        self.send_raw(&ws::client_frame(fin, op, payload, mask));
    }

    pub(crate) fn send_text(&mut self, v: &Value) {
        self.send(true, Opcode::Text, v.to_string().as_bytes());
    }

    /// The next frame from the server: (fin, opcode bits, payload); `None` at the end.
    pub(crate) fn frame(&mut self) -> Option<(bool, u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                let (b0, b1) = (self.buf[0], self.buf[1]);
                assert_eq!(b1 & 0x80, 0, "server frames are never masked");
                let (len, at) = match b1 & 0x7f {
                    126 if self.buf.len() >= 4 => (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4),
                    127 if self.buf.len() >= 10 => {
                        (u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= at + len {
                    let payload = self.buf[at..at + len].to_vec();
                    self.buf.drain(..at + len);
                    return Some((b0 & 0x80 != 0, b0 & 0x0f, payload));
                }
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// The next text message as JSON (pings answered, pongs skipped).
    pub(crate) fn text(&mut self) -> Value {
        loop {
            let Some((fin, op, p)) = self.frame() else { panic!("a text frame, got none: {}", self.ended) };
            match op {
                0x1 => {
                    assert!(fin, "the server sends whole messages");
                    return serde_json::from_slice(&p).unwrap();
                }
                0x9 => self.send(true, Opcode::Pong, &p),
                0xA => {}
                0x8 => panic!("closed: {:?}", close_of(&p)),
                other => panic!("unexpected opcode {other}"),
            }
        }
    }

    /// Sends a request and reads messages until its answer: the answer.
    pub(crate) fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.request(id, method, params).pop().unwrap()
    }

    /// Sends a request: every message up to its answer (notifications, the replay of a
    /// `session/load`), the answer last.
    pub(crate) fn request(&mut self, id: u64, method: &str, params: Value) -> Vec<Value> {
        self.send_text(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut seen = Vec::new();
        loop {
            let m = self.text();
            let done = m["id"] == json!(id) && m.get("method").is_none();
            seen.push(m);
            if done {
                return seen;
            }
        }
    }

    /// `initialize` at ACP version 1: the answer.
    pub(crate) fn initialize(&mut self, id: u64) -> Value {
        self.call(
            id,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )
    }

    /// Reads until the server's close frame: its code and reason (text messages before it are
    /// skipped). `None` when the connection ended without one.
    pub(crate) fn close_frame(&mut self) -> Option<(u16, String)> {
        loop {
            let (_, op, p) = self.frame()?;
            if op == 0x8 {
                return Some(close_of(&p));
            }
        }
    }

    /// True when the server closed the TCP connection (after a close handshake).
    pub(crate) fn ends(&mut self) -> bool {
        self.frame().is_none()
    }
}

fn close_of(p: &[u8]) -> (u16, String) {
    if p.len() < 2 {
        return (1005, String::new());
    }
    (u16::from_be_bytes([p[0], p[1]]), String::from_utf8(p[2..].to_vec()).unwrap())
}

/// After fuzzing: the server is alive and logged no panic.
fn still_serving(s: &Server) {
    let mut c = Client::connect(s);
    assert_eq!(c.initialize(1)["result"]["protocolVersion"], 1);
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
}

#[test]
fn handshake_initialize_and_the_close_handshake() {
    let s = Server::start();
    let mut c = Client::open(tcp(&s), &acp_path(), &[]);
    assert_eq!(c.status, 101, "{}", c.body);
    assert_eq!(c.header("sec-websocket-accept"), Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "RFC 6455 §1.3");
    assert_eq!(c.header("upgrade").map(str::to_ascii_lowercase).as_deref(), Some("websocket"));
    let id = c.header("acp-connection-id").expect("Acp-Connection-Id on the 101").to_string();
    assert_eq!(id.len(), 36, "{id}");
    let r = c.initialize(1);
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    assert_eq!(r["result"]["agentCapabilities"]["loadSession"], true);
    // The same dispatch and error answers as stdio.
    let e = c.call(2, "session/stop", json!({}));
    assert_eq!(e["error"]["code"], -32601, "{e}");
    c.send(true, Opcode::Text, b"{not json");
    assert_eq!(c.text()["error"]["code"], -32700);
    c.send(true, Opcode::Text, br#"[{"jsonrpc":"2.0","id":9,"method":"initialize"}]"#);
    let e = c.text();
    assert_eq!(e["error"]["code"], -32600);
    assert!(e["error"]["message"].as_str().unwrap().contains("batches"), "{e}");
    // Binary frames are ignored (logged); the connection goes on.
    c.send(true, Opcode::Binary, b"\x00\x01");
    assert_eq!(c.initialize(3)["result"]["protocolVersion"], 1);
    // A fragmented request with a ping between its fragments.
    let msg = json!({"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}).to_string();
    let (a, b) = msg.as_bytes().split_at(10);
    c.send(false, Opcode::Text, a);
    c.send(true, Opcode::Ping, b"mid");
    c.send(true, Opcode::Continuation, b);
    assert_eq!(c.frame(), Some((true, 0xA, b"mid".to_vec())), "the ping is answered at once");
    assert_eq!(c.text()["id"], 4);
    // The close handshake: our close is echoed, then the server closes the TCP connection.
    c.send(true, Opcode::Close, &ws::close_payload(1000, "bye"));
    assert_eq!(c.close_frame(), Some((1000, String::new())));
    assert!(c.ends(), "the server closes the connection after the handshake");
    assert!(s.stderr().contains(&format!("websocket {id}: closed")), "{}", s.stderr());
}

#[test]
fn token_is_checked_before_the_upgrade() {
    let s = Server::start();
    for (path, extra, why) in [
        ("/acp", vec![], "no token"),
        ("/acp?token=wrong", vec![], "wrong query token"),
        ("/acp", vec![("X-Secret-Key", "wrong")], "wrong header"),
        ("/acp?token=", vec![], "empty token"),
    ] {
        let c = Client::open(tcp(&s), path, &extra);
        assert_eq!(c.status, 401, "{why}: {}", c.body);
        assert!(c.body.contains("X-Secret-Key header or ?token="), "{why}: {}", c.body);
    }
    let c = Client::open(tcp(&s), "/acp", &[("X-Secret-Key", SECRET)]);
    assert_eq!(c.status, 101, "the header: {}", c.body);
    let c = Client::open(tcp(&s), &acp_path(), &[]);
    assert_eq!(c.status, 101, "the query: {}", c.body);
    let pct = format!("/acp?x=1&token={}", crate::support::pct(SECRET));
    assert_eq!(Client::open(tcp(&s), &pct, &[]).status, 101, "percent-encoded, among other parameters");
    // The query token works on /acp only.
    let r = http_with("GET", &s.url(&format!("/config?token={SECRET}")), &[], None);
    assert_eq!(r.status, 401);
}

#[test]
fn origins_follow_goose_serve() {
    let s = Server::start();
    for origin in
        ["file://", "null", "http://localhost:5173", "https://127.0.0.1", "http://127.3.4.5:9", "http://[::1]:8080"]
    {
        let c = Client::open(tcp(&s), &acp_path(), &[("Origin", origin)]);
        assert_eq!(c.status, 101, "{origin}: {}", c.body);
        assert_eq!(c.header("access-control-allow-origin"), Some(origin), "{origin}");
    }
    for origin in [
        "https://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example",
        "file:///etc",
        "http://localhost:5173/path",
        "ws://localhost",
        "http://10.0.0.1",
    ] {
        let c = Client::open(tcp(&s), &acp_path(), &[("Origin", origin)]);
        assert_eq!(c.status, 403, "{origin}: {}", c.body);
        assert!(c.body.contains("GOSLING_CORS_ORIGINS"), "{}", c.body);
    }
    // No Origin (Desktop's main process, scripts) is fine.
    assert_eq!(Client::open(tcp(&s), &acp_path(), &[]).status, 101);
    // The REST API keeps its stricter rules (no loopback pages, no `null`).
    let r = http_with("GET", &s.url("/config"), &[("Origin", "http://localhost:5173"), ("X-Secret-Key", SECRET)], None);
    assert_eq!(r.status, 403);
    // A configured list replaces the defaults, as `--allowed-origin` does.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_CORS_ORIGINS".into(), "http://ui.example:8080".into())],
        ..ServerOpts::default()
    });
    assert_eq!(Client::open(tcp(&s), &acp_path(), &[("Origin", "http://ui.example:8080")]).status, 101);
    for origin in ["file://", "null", "http://localhost:5173"] {
        assert_eq!(Client::open(tcp(&s), &acp_path(), &[("Origin", origin)]).status, 403, "{origin}");
    }
}

#[test]
fn plain_get_is_406_after_auth_and_bad_upgrades_are_400() {
    let s = Server::start();
    // Desktop's external-backend probe.
    let r = http_with("GET", &s.url(&acp_path()), &[], None);
    assert_eq!(r.status, 406, "{}", r.text());
    assert!(r.text().contains("text/event-stream"), "{}", r.text());
    assert_eq!(http_with("GET", &s.url("/acp?token=nope"), &[], None).status, 401, "auth comes first");
    let r = http_with("GET", &s.url(&acp_path()), &[("Accept", "text/event-stream")], None);
    assert_eq!(r.status, 501, "{}", r.text());
    let r = http_with("POST", &s.url(&acp_path()), &[("Content-Type", "application/json")], Some(b"{}"));
    assert_eq!(r.status, 405);
    // Bad upgrades.
    let c = Client::open_with(tcp(&s), &acp_path(), &[("Sec-WebSocket-Version", "8")], &["Sec-WebSocket-Version"]);
    assert_eq!(c.status, 400, "{}", c.body);
    assert!(c.body.contains("Sec-WebSocket-Version: 8") && c.body.contains("13"), "{}", c.body);
    assert_eq!(c.header("sec-websocket-version"), Some("13"));
    let c = Client::open_with(tcp(&s), &acp_path(), &[], &["Sec-WebSocket-Key"]);
    assert_eq!(c.status, 400);
    assert!(c.body.contains("Sec-WebSocket-Key"), "{}", c.body);
    let c = Client::open_with(tcp(&s), &acp_path(), &[("Sec-WebSocket-Key", "short")], &["Sec-WebSocket-Key"]);
    assert_eq!(c.status, 400);
    let c = Client::open_with(tcp(&s), &acp_path(), &[("Connection", "keep-alive")], &["Connection"]);
    assert_eq!(c.status, 400, "{}", c.body);
}

/// Sends `bytes` on a fresh connection and returns the server's close code.
fn violation(s: &Server, bytes: &[u8]) -> (u16, String) {
    let mut c = Client::connect(s);
    c.send_raw(bytes);
    let close = c.close_frame().expect("a close frame, not a silent drop");
    // The client answers the close; the server ends the connection.
    c.send(true, Opcode::Close, &ws::close_payload(close.0, ""));
    assert!(c.ends());
    close
}

#[test]
fn each_violation_is_answered_with_its_close_code() {
    let s = Server::start();
    let m = [1, 2, 3, 4];
    let frame = |fin, op, p: &[u8]| ws::client_frame(fin, op, p, m);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("unmasked client frame", ws::encode(Opcode::Text, b"{}"), 1002),
        (
            "RSV1",
            {
                let mut f = frame(true, Opcode::Text, b"{}");
                f[0] |= 0x40;
                f
            },
            1002,
        ),
        (
            "RSV2 on a ping",
            {
                let mut f = frame(true, Opcode::Ping, b"");
                f[0] |= 0x20;
                f
            },
            1002,
        ),
        (
            "reserved opcode 3",
            {
                let mut f = frame(true, Opcode::Text, b"{}");
                f[0] = 0x83;
                f
            },
            1002,
        ),
        (
            "reserved control opcode 0xF",
            {
                let mut f = frame(true, Opcode::Ping, b"");
                f[0] = 0x8F;
                f
            },
            1002,
        ),
        ("control frame over 125 bytes", frame(true, Opcode::Ping, &[b'x'; 126]), 1002),
        ("fragmented ping", frame(false, Opcode::Ping, b"x"), 1002),
        ("continuation without a start", frame(true, Opcode::Continuation, b"x"), 1002),
        (
            "a new message inside a fragmented one",
            {
                let mut f = frame(false, Opcode::Text, b"{");
                f.extend(frame(true, Opcode::Text, b"}"));
                f
            },
            1002,
        ),
        (
            "64-bit length with the top bit",
            {
                let mut f = vec![0x81, 0xFF];
                f.extend((1u64 << 63).to_be_bytes());
                f.extend(m);
                f
            },
            1002,
        ),
        ("bad UTF-8 in a text message", frame(true, Opcode::Text, b"{\"a\":\"\xc3\x28\"}"), 1007),
        (
            "bad UTF-8 across fragments",
            {
                let mut f = frame(false, Opcode::Text, b"\"\xe2\x82");
                f.extend(frame(true, Opcode::Continuation, b"\x28\""));
                f
            },
            1007,
        ),
        ("bad UTF-8 in a close reason", frame(true, Opcode::Close, &[0x03, 0xe8, 0xff, 0xfe]), 1007),
        ("a one-byte close payload", frame(true, Opcode::Close, &[0x03]), 1002),
        ("close code 1005 on the wire", frame(true, Opcode::Close, &ws::close_payload(1005, "")), 1002),
        ("close code 5000", frame(true, Opcode::Close, &ws::close_payload(5000, "")), 1002),
    ];
    for (name, bytes, code) in cases {
        let (got, reason) = violation(&s, &bytes);
        assert_eq!(got, code, "{name}: {reason}");
        assert!(!reason.is_empty(), "{name}: a reason comes with the code");
    }
    still_serving(&s);
}

/// A small deterministic generator (xorshift) for the fuzz cases.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn fuzzed_frames_never_crash_the_server() {
    let s = Server::start();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    // Valid frames in random splits, with pings between fragments: every request answered.
    let mut c = Client::connect(&s);
    for id in 0..40u64 {
        let msg = json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":1}}).to_string();
        let mut bytes = Vec::new();
        let parts = 1 + rng.below(4);
        let chunk = msg.len().div_ceil(parts);
        for (i, p) in msg.as_bytes().chunks(chunk).enumerate() {
            let op = if i == 0 { Opcode::Text } else { Opcode::Continuation };
            let mask = (rng.next() as u32).to_be_bytes();
            bytes.extend(ws::client_frame((i + 1) * chunk >= msg.len(), op, p, mask));
            if rng.below(3) == 0 {
                bytes.extend(ws::client_frame(true, Opcode::Ping, b"p", mask));
            }
        }
        let mut at = 0;
        while at < bytes.len() {
            let n = 1 + rng.below(bytes.len() - at);
            c.send_raw(&bytes[at..at + n]);
            at += n;
            if rng.below(4) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        loop {
            let (_, op, p) = c.frame().expect("an answer");
            if op == 0x1 {
                let v: Value = serde_json::from_slice(&p).unwrap();
                assert_eq!(v["id"], id, "{v}");
                break;
            }
            assert_eq!((op, p.as_slice()), (0xA, &b"p"[..]));
        }
    }
    // Mutated frames: flipped bits, wrong masks, truncations, garbage. Each connection ends
    // with a close frame of a known code or keeps serving; the server never falls over.
    let valid = ws::client_frame(
        true,
        Opcode::Text,
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        [9, 9, 9, 9],
    );
    let mut codes = std::collections::BTreeMap::new();
    for _ in 0..60 {
        let mut f = valid.clone();
        match rng.below(4) {
            0 => {
                let i = rng.below(f.len());
                f[i] ^= 1 << rng.below(8);
            }
            1 => {
                // A mask that does not match the one in the header: garbage text.
                for b in &mut f[6..] {
                    *b ^= 0x5a;
                }
            }
            2 => f = (0..1 + rng.below(64)).map(|_| rng.next() as u8).collect(),
            _ => {
                f[0] = (rng.next() as u8) | 0x80;
            }
        }
        let mut c = Client::open(tcp_timeout(&s, Duration::from_secs(1)), &acp_path(), &[]);
        assert_eq!(c.status, 101);
        c.send_raw(&f);
        // An answer, a close with a code, or (a length made longer) the server waiting for
        // the rest of the frame.
        c.send(true, Opcode::Ping, b"end");
        let outcome = loop {
            match c.frame() {
                None => break "ended or waiting".to_string(),
                Some((_, 0x8, p)) => {
                    let (code, _) = close_of(&p);
                    assert!([1002, 1007, 1009].contains(&code), "close code {code}");
                    break format!("close {code}");
                }
                Some((_, 0xA, p)) if p == b"end" => break "served".to_string(),
                Some(_) => {}
            }
        };
        *codes.entry(outcome).or_insert(0) += 1;
    }
    assert!(codes.keys().any(|k| k.starts_with("close")), "{codes:?}");
    still_serving(&s);
}

#[test]
fn a_hundred_pings_in_a_burst_are_all_answered() {
    let s = Server::start();
    let mut c = Client::connect(&s);
    let mut burst = Vec::new();
    for i in 0..100u32 {
        burst.extend(ws::client_frame(true, Opcode::Ping, &i.to_be_bytes(), [1, 2, 3, 4]));
    }
    c.send_raw(&burst);
    for i in 0..100u32 {
        assert_eq!(c.frame(), Some((true, 0xA, i.to_be_bytes().to_vec())), "pong {i}");
    }
    assert_eq!(c.initialize(1)["result"]["protocolVersion"], 1);
}

#[test]
fn a_message_over_the_limit_is_answered_never_dropped() {
    let s = Server::start();
    let limit = gosling::acp::MAX_LINE;
    // Over the limit, with an id up front: a JSON-RPC error for that id, and the connection
    // goes on. The payload is streamed; the server keeps only its first bytes.
    let mut c = Client::connect(&s);
    let head = br#"{"jsonrpc":"2.0","id":77,"method":"session/prompt","params":{"prompt":[{"type":"text","text":""#;
    let len = limit as u64 + 1;
    let mask = [7, 7, 7, 7];
    let mut f = vec![0x81, 0xFF];
    f.extend(len.to_be_bytes());
    f.extend(mask);
    c.send_raw(&f);
    let mut first = head.to_vec();
    ws::apply_mask(&mut first, mask, 0);
    c.send_raw(&first);
    let chunk = vec![b'a' ^ 7; 1 << 20];
    let mut sent = head.len() as u64;
    while sent < len {
        let n = (len - sent).min(chunk.len() as u64) as usize;
        c.send_raw(&chunk[..n]);
        sent += n as u64;
    }
    let e = c.text();
    assert_eq!(e["id"], 77, "{e}");
    assert_eq!(e["error"]["code"], -32600);
    assert!(e["error"]["message"].as_str().unwrap().contains(&format!("longer than {limit} bytes")), "{e}");
    assert_eq!(c.initialize(2)["result"]["protocolVersion"], 1, "the connection goes on");
    // Over the limit with no id in its first bytes: 1009 with the reason.
    let mut c = Client::connect(&s);
    let mut f = vec![0x81, 0xFF];
    f.extend((1u64 << 40).to_be_bytes());
    f.extend(mask);
    c.send_raw(&f);
    c.send_raw(&vec![b' ' ^ 7; 8192]);
    let (code, reason) = c.close_frame().expect("a close frame");
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("limit"), "{reason}");
    still_serving(&s);
}

#[test]
fn a_slow_reader_does_not_grow_the_servers_memory_and_is_closed_with_a_reason() {
    // The socket timeout sets the clocks: a client that reads nothing for twice it is given up.
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "2".into())],
        ..ServerOpts::default()
    });
    // Each request's error echoes its 16 KiB method name: 3,000 of them are 48 MiB of answers,
    // which the client never reads. The writer runs on its own thread: once the server stops
    // reading (its queues are full), the client's writes block too.
    let name = "m".repeat(16 << 10);
    let mut frames = Vec::new();
    for id in 1..=3000u64 {
        let m = json!({"jsonrpc":"2.0","id":id,"method":name}).to_string();
        frames.extend(ws::client_frame(true, Opcode::Text, m.as_bytes(), [3, 1, 4, 1]));
    }
    let mut c = Client::connect(&s);
    assert_eq!(c.initialize(0)["result"]["protocolVersion"], 1);
    let before = rss_kib(s.pid());
    let mut io = std::mem::replace(&mut c.io, Box::new(std::io::Cursor::new(Vec::new())));
    let writer = std::thread::spawn(move || {
        let _ = io.write_all(&frames);
        io
    });
    // The peak memory is sampled until the server gives up with 1008 and says why in its log.
    let mut peak = before;
    let said = crate::support::wait_for(Duration::from_secs(30), || {
        peak = peak.max(rss_kib(s.pid()));
        s.stderr().contains("the client read nothing").then_some(())
    });
    assert!(said.is_some(), "{}", s.stderr());
    let grown = peak.saturating_sub(before);
    eprintln!("slow reader: RSS {before} KiB before, peak {peak} KiB (+{grown} KiB) with 48 MiB of answers unread");
    assert!(grown < 24 << 10, "RSS grew by {grown} KiB with 48 MiB of unread answers (before {before} KiB)");
    // Reading now: answers that were already on the wire, then the close frame (or the end).
    let io = writer.join().unwrap();
    c.io = io;
    let mut answers = 0;
    let end = loop {
        match c.frame() {
            Some((_, 0x1, _)) => answers += 1,
            Some((_, 0x8, p)) => break Some(close_of(&p)),
            Some(_) => {}
            None => break None,
        }
    };
    if let Some((code, reason)) = end {
        assert_eq!(code, 1008, "{reason}");
        assert!(reason.contains("read nothing"), "{reason}");
    }
    assert!(answers > 0 && answers < 3000, "{answers}");
    still_serving(&s);
}

#[test]
fn an_idle_client_is_pinged_and_one_that_never_answers_is_closed() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IO_TIMEOUT_SECS".into(), "1".into())],
        ..ServerOpts::default()
    });
    // A client that answers pings stays (three rounds).
    let mut c = Client::connect(&s);
    let mut pings = 0;
    while pings < 3 {
        let (_, op, p) = c.frame().expect("a ping");
        assert_eq!(op, 0x9);
        c.send(true, Opcode::Pong, &p);
        pings += 1;
    }
    assert_eq!(c.initialize(1)["result"]["protocolVersion"], 1);
    // One that never answers is closed with 1008 after the deadline.
    let mut c = Client::connect(&s);
    assert_eq!(c.frame().map(|f| f.1), Some(0x9));
    let (code, reason) = c.close_frame().expect("a close frame");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("ping"), "{reason}");
}

#[test]
fn over_tls_the_same() {
    let s = Server::start_with(ServerOpts { args: vec!["--tls".into()], ..ServerOpts::default() });
    let pin = crate::tls::fingerprint_line(&s);
    let tls = crate::tls::connect(&s.addr, &pin).unwrap();
    let mut c = Client::open(Box::new(tls), &acp_path(), &[("Origin", "file://")]);
    assert_eq!(c.status, 101, "{}", c.body);
    assert_eq!(c.initialize(1)["result"]["protocolVersion"], 1);
    // Full duplex under the one TLS lock: a burst of large requests whose answers are written
    // while more requests are still being read.
    let name = "n".repeat(64 << 10);
    let mut burst = Vec::new();
    for id in 10..60u64 {
        burst.extend(ws::client_frame(
            true,
            Opcode::Text,
            json!({"jsonrpc":"2.0","id":id,"method":name}).to_string().as_bytes(),
            [5, 6, 7, 8],
        ));
        burst.extend(ws::client_frame(true, Opcode::Ping, &id.to_be_bytes(), [5, 6, 7, 8]));
    }
    c.send_raw(&burst);
    let (mut answers, mut pongs) = (0, 0);
    while answers < 50 || pongs < 50 {
        match c.frame().expect("frames") {
            (_, 0x1, p) => {
                let v: Value = serde_json::from_slice(&p).unwrap();
                assert_eq!(v["id"], 10 + answers, "in order");
                answers += 1;
            }
            (_, 0xA, _) => pongs += 1,
            other => panic!("{:?}", other.1),
        }
    }
    // The violation and close paths under TLS.
    let mut bad = Client::open(Box::new(crate::tls::connect(&s.addr, &pin).unwrap()), &acp_path(), &[]);
    bad.send_raw(&ws::encode(Opcode::Text, b"{}"));
    assert_eq!(bad.close_frame().map(|c| c.0), Some(1002));
    c.send(true, Opcode::Close, &ws::close_payload(1001, ""));
    assert_eq!(c.close_frame(), Some((1001, String::new())));
    // 401 and 403 before the upgrade under TLS too.
    let c = Client::open(Box::new(crate::tls::connect(&s.addr, &pin).unwrap()), "/acp?token=x", &[]);
    assert_eq!(c.status, 401);
    let c = Client::open(
        Box::new(crate::tls::connect(&s.addr, &pin).unwrap()),
        &acp_path(),
        &[("Origin", "https://evil.example")],
    );
    assert_eq!(c.status, 403);
}

#[test]
fn each_socket_is_a_connection_and_sessions_outlive_it() {
    let Some(mock) = crate::llmock::Llmock::start(&[]) else { return };
    let s = Server::start_with(ServerOpts {
        env: vec![
            ("GOOSE_PROVIDER".into(), "openai".into()),
            ("GOOSE_MODEL".into(), "mock-model".into()),
            ("OPENAI_HOST".into(), mock.openai_host()),
        ],
        ..ServerOpts::default()
    });
    let cwd = crate::support::work_dir(&s.home);
    // Socket A: a session and a prompt.
    mock.script(json!([{"type": "reply", "text": "remembered"}]));
    let mut a = Client::connect(&s);
    a.initialize(1);
    let sid = a.call(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let seen = a.request(3, "session/prompt", json!({"sessionId": sid, "prompt":[{"type":"text","text":"hi"}]}));
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn", "{seen:?}");
    let text: String = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, "remembered");
    // Socket B, while A is still open: its own connection (a prompt for a session it has not
    // opened is refused), then session/load replays the conversation on B only.
    let mut b = Client::connect(&s);
    b.initialize(1);
    let e = b.call(2, "session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}));
    assert!(e["error"]["message"].as_str().unwrap().contains("session/load"), "{e}");
    let replay = b.request(3, "session/load", json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}));
    assert!(replay.last().unwrap().get("error").is_none(), "{replay:?}");
    let kinds: Vec<&str> = replay.iter().filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"user_message_chunk"), "{kinds:?}");
    assert!(kinds.contains(&"agent_message_chunk"), "{kinds:?}");
    // Socket A closes; B goes on.
    a.send(true, Opcode::Close, &ws::close_payload(1000, ""));
    assert_eq!(a.close_frame().map(|c| c.0), Some(1000));
    // A prompt running when its socket drops is cancelled (the model stalls; no one would
    // read the answer).
    mock.script(json!([{"type": "slow_first_token", "seconds": 60}]));
    b.send_text(&json!({"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId": sid, "prompt":[{"type":"text","text":"slow"}]}}));
    let asked = crate::support::wait_for(Duration::from_secs(30), || (mock.request_count() >= 2).then_some(()));
    assert!(asked.is_some(), "the slow prompt reached the model");
    drop(b);
    let cancelled = crate::support::wait_for(Duration::from_secs(10), || {
        s.stderr().contains(&format!("session {sid}: prompt cancelled")).then_some(())
    });
    assert!(cancelled.is_some(), "{}", s.stderr());
    // And the session opens again on a new socket.
    let mut c = Client::connect(&s);
    c.initialize(1);
    let replay = c.request(2, "session/load", json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}));
    assert!(replay.last().unwrap().get("error").is_none(), "{replay:?}");
}

#[test]
fn open_websockets_hold_no_request_slot() {
    let s = Server::start_with(ServerOpts {
        env: vec![("GOSLING_MAX_REQUESTS".into(), "2".into())],
        ..ServerOpts::default()
    });
    let mut open: Vec<Client> = (0..6).map(|_| Client::connect(&s)).collect();
    for (i, c) in open.iter_mut().enumerate() {
        assert_eq!(c.initialize(i as u64)["result"]["protocolVersion"], 1);
    }
    // Six sockets open past a cap of two requests: the API still answers at once.
    let r = crate::support::http("GET", &s.url("/config"), Some(SECRET), None);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn stdio_skips_an_oversized_line_without_holding_it() {
    // The same reader loop on stdio: a 200 MiB line is answered with an error for its id and
    // never held beyond the 64 MiB limit; the next line is served.
    let home = crate::support::TempDir::new("acp-long-line");
    let mut child = crate::support::gosling(&home)
        .arg("acp")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pid = child.id();
    let writer = std::thread::spawn(move || {
        stdin.write_all(br#"{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"text":""#).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..200 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\"}}\n").unwrap();
        stdin.write_all(br#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}"#).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin
    });
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let e: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(e["id"], "big", "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("longer than"), "{e}");
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["result"]["protocolVersion"], 1, "{v}");
    let peak = hwm_kib(pid);
    eprintln!("gosling acp peak RSS after a 200 MiB line: {peak} KiB");
    assert!(peak < (64 + 48) << 10, "peak RSS {peak} KiB: the long line was held");
    drop(writer.join().unwrap());
    let _ = child.wait();
}
