//! A session's history rewritten over ACP, as Desktop does it: `session/fork` (a new session
//! with the conversation up to a message, `_meta.conversationBefore`) and
//! `_goose/unstable/session/conversation/truncate` (edit a sent message: the conversation from
//! `truncateFrom` on is dropped); messages named by their `created` time (unix seconds), as the
//! replay of `session/load` gives it. Both are operations of the core (`agent::history`); the
//! refusals say what to send.

use crate::goose_diff::{start_gosling, Model};
use crate::support::{work_dir, TempDir, SECRET};
use crate::websocket::Client;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Acp {
    ws: Client,
    next: u64,
    /// Notifications since the last `call`.
    seen: Vec<Value>,
}

impl Acp {
    fn open(serve: &crate::serve::Serve) -> Acp {
        let tcp = TcpStream::connect(serve.addr()).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let ws = Client::open(Box::new(tcp), &format!("/acp?token={SECRET}"), &[("Origin", "file://")]);
        assert_eq!(ws.status, 101, "{}", ws.body);
        let mut a = Acp { ws, next: 0, seen: Vec::new() };
        a.ok(
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"goose-app","version":"1.52.0"}}),
        );
        a
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.ws.send_text(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        id
    }

    /// The answer to `id` (the socket's read timeout bounds each read).
    fn answer(&mut self, id: u64) -> Value {
        self.seen.clear();
        loop {
            let m = self.ws.text();
            if m["id"] == json!(id) && m.get("method").is_none() {
                return m;
            }
            self.seen.push(m);
        }
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let m = self.answer(id);
        m.get("result").cloned().unwrap_or_else(|| panic!("{method} failed: {m}"))
    }

    /// The error answered to `method`, which must say each of `words`.
    fn refused(&mut self, method: &str, params: Value, code: i64, words: &[&str]) {
        let id = self.send(method, params);
        let m = self.answer(id);
        let e = m.get("error").unwrap_or_else(|| panic!("{method} should fail: {m}"));
        assert_eq!(e["code"], code, "{e}");
        let message = e["message"].as_str().unwrap();
        for w in words {
            assert!(message.contains(w), "{message:?} should say {w:?}");
        }
    }

    /// (text, created) of each user message the last `session/load` or `session/fork` replayed.
    fn replayed_user_messages(&self) -> Vec<(String, i64)> {
        self.seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
            .map(|m| {
                let u = &m["params"]["update"];
                (u["content"]["text"].as_str().unwrap().to_string(), u["_meta"]["goose"]["created"].as_i64().unwrap())
            })
            .collect()
    }

    fn message_count(&mut self, sid: &str) -> u64 {
        self.ok("_goose/unstable/session/info", json!({"sessionId":sid}))["session"]["_meta"]["messageCount"]
            .as_u64()
            .unwrap()
    }
}

/// Waits until the clock's second changes, so that the next message gets a later `created`.
fn next_second() {
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let start = now();
    while now() == start {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fork_and_truncate_cut_the_conversation_at_a_message() {
    let home = TempDir::new("history");
    let cwd = work_dir(&home);
    let model = Model::start();
    let serve = start_gosling(&home, &model);
    let mut a = Acp::open(&serve);
    let sid = a.ok("session/new", json!({"cwd":cwd,"mcpServers":[]}))["sessionId"].as_str().unwrap().to_string();
    for (i, text) in ["first", "second", "third"].into_iter().enumerate() {
        if i > 0 {
            next_second();
        }
        a.ok("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":text}]}));
    }
    a.ok("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    let said = a.replayed_user_messages();
    let texts: Vec<&str> = said.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, ["first", "second", "third"]);
    let second = said[1].1;

    // A fork before the second message: the first exchange only, in a new session; the
    // original keeps all six messages.
    let fork = a.ok("session/fork", json!({"sessionId":sid,"cwd":cwd,"_meta":{"conversationBefore":second}}));
    let fid = fork["sessionId"].as_str().unwrap().to_string();
    assert_ne!(fid, sid);
    assert!(fork["configOptions"].is_array() && fork["modes"].is_object(), "{fork}");
    let replayed: Vec<String> = a.replayed_user_messages().into_iter().map(|(t, _)| t).collect();
    assert_eq!(replayed, ["first"]);
    assert_eq!((a.message_count(&fid), a.message_count(&sid)), (2, 6));
    // Without conversationBefore: all of it.
    let whole = a.ok("session/fork", json!({"sessionId":sid,"cwd":cwd}));
    assert_eq!(a.message_count(whole["sessionId"].as_str().unwrap()), 6);

    // Edit the second message: it and what followed are gone, and the session goes on from the
    // first exchange.
    a.ok("_goose/unstable/session/conversation/truncate", json!({"sessionId":sid,"truncateFrom":second}));
    assert_eq!(a.message_count(&sid), 2);
    a.ok("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"second, edited"}]}));
    a.ok("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    let texts: Vec<String> = a.replayed_user_messages().into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts, ["first", "second, edited"]);
    assert_eq!(a.message_count(&fid), 2, "the fork is a session of its own");
}

#[test]
fn fork_and_truncate_refuse_bad_input_and_a_running_turn() {
    let home = TempDir::new("history-refusals");
    let cwd = work_dir(&home);
    let model = Model::start();
    let serve = start_gosling(&home, &model);
    let mut a = Acp::open(&serve);
    let truncate = "_goose/unstable/session/conversation/truncate";
    a.refused(truncate, json!({"sessionId":"20200101_1","truncateFrom":1}), -32002, &["20200101_1", "not found"]);
    a.refused("session/fork", json!({"sessionId":"20200101_1","cwd":cwd}), -32002, &["20200101_1", "not found"]);
    let sid = a.ok("session/new", json!({"cwd":cwd,"mcpServers":[]}))["sessionId"].as_str().unwrap().to_string();
    a.refused(truncate, json!({"sessionId":sid}), -32602, &["`truncateFrom`", "whole number", "created"]);
    a.refused(truncate, json!({"sessionId":sid,"truncateFrom":"yesterday"}), -32602, &["`truncateFrom`"]);
    a.refused(
        "session/fork",
        json!({"sessionId":sid,"cwd":cwd,"_meta":{"conversationBefore":"x"}}),
        -32602,
        &["`_meta.conversationBefore`", "whole number"],
    );
    a.refused("session/fork", json!({"sessionId":sid}), -32602, &["`cwd`"]);

    // While a turn runs, its conversation is not cut.
    let before = model.slow.load(Ordering::SeqCst);
    let id = a.send("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"a slow one"}]}));
    let deadline = Instant::now() + Duration::from_secs(30);
    while model.slow.load(Ordering::SeqCst) == before {
        assert!(Instant::now() < deadline, "the prompt did not reach the model within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    a.refused(truncate, json!({"sessionId":sid,"truncateFrom":0}), -32600, &["already answering", "cancel"]);
    model.release.store(true, Ordering::SeqCst);
    assert_eq!(a.answer(id)["result"]["stopReason"], "end_turn");
    a.ok(truncate, json!({"sessionId":sid,"truncateFrom":0}));
    assert_eq!(a.message_count(&sid), 0);
}

/// Writes session `id` with `n` messages of about `size` bytes each, alternately the person's
/// and the model's, as the store lays them out (metadata + message lines); the file's size.
fn write_long_session(home: &crate::support::TempDir, id: &str, cwd: &str, n: usize, size: usize) -> u64 {
    let dir = home.join("state").join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let pad = "x".repeat(size);
    let mut lines = String::new();
    for i in 0..n {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let text = format!("message {i} {pad}");
        let m = json!({"id": format!("m{i}"), "role": role, "created": 1_763_900_000 + i, "content": [{"type": "text", "text": text}], "metadata": {"userVisible": true, "agentVisible": true}});
        lines.push_str(&m.to_string());
        lines.push('\n');
    }
    let file = dir.join(format!("{id}.jsonl"));
    std::fs::write(&file, &lines).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    use std::os::unix::fs::MetadataExt;
    let session = json!({"id": id, "name": "long", "working_dir": cwd, "created_at": "2026-11-28T10:00:00Z",
        "updated_at": "2026-11-28T10:00:00Z", "extension_data": {}, "message_count": n, "session_type": "user",
        "gosling_conversation_file": {"bytes": meta.len(), "ino": meta.ino()}});
    std::fs::write(dir.join(format!("{id}.meta.json")), session.to_string()).unwrap();
    meta.len()
}

/// Where the process's open descriptor of `file` is (its read offset); `None` when it has none.
fn read_offset(pid: u32, file: &std::path::Path) -> Option<u64> {
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        if std::fs::read_link(fd.path()).is_ok_and(|t| t == file) {
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy())).ok()?;
            return info.lines().find_map(|l| l.strip_prefix("pos:")).and_then(|v| v.trim().parse().ok());
        }
    }
    None
}

fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `session/load` of a 10,000-message session replays it as it reads the file: the first
/// message reaches the editor while the server has read only the start of the file (it is
/// held open there: the editor has stopped reading, so the server waits on its pipe), and the
/// whole replay costs the server far less memory than the conversation's size.
#[test]
fn a_long_session_is_replayed_as_it_is_read_in_bounded_memory() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let home = crate::support::TempDir::new("long-load");
    let cwd = work_dir(&home);
    let (n, size) = (10_000, 2_000);
    let bytes = write_long_session(&home, "20261128_1", &cwd, n, size);
    let file = std::fs::canonicalize(home.join("state/sessions/20261128_1.jsonl")).unwrap();
    let mut child = crate::support::gosling(&home)
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // A reader that hands over one line at a time: while the test takes none, nothing more is
    // read from the pipe, and the server's writes wait once the pipe is full.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Value>(0);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(60)).expect("gosling acp said nothing for 60 s");
    let mut send = |id: u64, method: &str, params: Value| {
        let line = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    };
    send(0, "initialize", json!({"protocolVersion":1,"clientCapabilities":{}}));
    while next()["id"] != json!(0) {}
    let before = peak_rss_kb(pid);
    send(1, "session/load", json!({"sessionId":"20261128_1","cwd":cwd,"mcpServers":[]}));
    let first = loop {
        let m = next();
        assert!(m.get("error").is_none(), "{m}");
        if m["params"]["update"]["sessionUpdate"] == "user_message_chunk" {
            break m;
        }
    };
    assert!(first["params"]["update"]["content"]["text"].as_str().unwrap().starts_with("message 0 "), "{first}");
    // The editor reads nothing more for now: the server holds the file open where it is.
    let deadline = Instant::now() + Duration::from_secs(30);
    let at = loop {
        if let Some(at) = read_offset(pid, &file) {
            break at;
        }
        assert!(
            Instant::now() < deadline,
            "the conversation file was not open while the replay was under way: it was read whole first"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(at < bytes / 10, "the server had read {at} of {bytes} bytes when the first message reached the editor");
    // The rest, in order, then the answer.
    let mut seen = 1;
    loop {
        let m = next();
        if m["id"] == json!(1) {
            assert!(m.get("result").is_some(), "{m}");
            break;
        }
        let u = &m["params"]["update"];
        if u["sessionUpdate"] == "user_message_chunk" || u["sessionUpdate"] == "agent_message_chunk" {
            let text = u["content"]["text"].as_str().unwrap();
            assert!(text.starts_with(&format!("message {seen} ")), "message {seen} out of order: {}", &text[..20]);
            seen += 1;
        }
    }
    assert_eq!(seen, n);
    let grew = peak_rss_kb(pid).saturating_sub(before) * 1024;
    assert!(grew < bytes / 4, "replaying {bytes} bytes of conversation took {grew} bytes more memory at its peak");
    drop(stdin);
    crate::support::reap_within(&mut child, Duration::from_secs(10));
}

/// `GET /sessions/{id}` and `POST /agent/resume` send a 10,000-message session as its file is
/// read: with the client reading nothing past the first bytes, the server holds the conversation
/// file open short of its end (its writes wait on the socket); read whole, the body is the
/// session with every message in order, and the server's peak RSS grew by far less than the
/// file.
#[test]
fn a_long_session_is_sent_over_http_as_it_is_read() {
    use crate::support::{Server, ServerOpts, TempDir};
    use std::io::{Read, Write};
    let home = TempDir::new("long-http");
    let cwd = work_dir(&home);
    let (n, size) = (10_000, 4_000);
    let bytes = write_long_session(&home, "20261128_1", &cwd, n, size);
    let file = std::fs::canonicalize(home.join("state/sessions/20261128_1.jsonl")).unwrap();
    let s = Server::start_in(home, ServerOpts::default());
    let before = peak_rss_kb(s.pid());
    let ask = |method: &str, path: &str, body: &str| {
        let mut tcp = TcpStream::connect(s.addr.as_str()).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        // A client that reads to the end asks for the close (the answer is delimited by its
        // last chunk; without the close the connection would be kept for a next request).
        let head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nX-Secret-Key: {SECRET}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", s.addr, body.len());
        tcp.write_all(head.as_bytes()).unwrap();
        tcp
    };
    for (method, path, body) in [
        ("GET", "/sessions/20261128_1", String::new()),
        ("POST", "/agent/resume", json!({"session_id": "20261128_1", "load_model_and_extensions": false}).to_string()),
    ] {
        let mut tcp = ask(method, path, &body);
        let mut first = [0u8; 4096];
        let got = tcp.read(&mut first).unwrap();
        assert!(
            String::from_utf8_lossy(&first[..got]).starts_with("HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&first[..got])
        );
        // Reading nothing more: the server stops where the socket's buffers are full.
        let deadline = Instant::now() + Duration::from_secs(30);
        let at = loop {
            if let Some(at) = read_offset(s.pid(), &file) {
                break at;
            }
            assert!(
                Instant::now() < deadline,
                "{method} {path}: the conversation file was not open while the body was sent: it was read whole first"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            at < bytes / 2,
            "{method} {path}: the server had read {at} of {bytes} bytes with the client reading nothing"
        );
        let mut rest = Vec::new();
        tcp.read_to_end(&mut rest).unwrap();
        let mut all = first[..got].to_vec();
        all.extend(rest);
        let text = String::from_utf8(all).unwrap();
        let (_, chunked) = text.split_once("\r\n\r\n").unwrap();
        // Chunked: the sizes are lines of hex between the data.
        let mut body = String::new();
        let mut rest = chunked;
        loop {
            let (size, tail) = rest.split_once("\r\n").unwrap();
            let size = usize::from_str_radix(size, 16).unwrap();
            if size == 0 {
                break;
            }
            body.push_str(&tail[..size]);
            rest = &tail[size + 2..];
        }
        let v: Value = serde_json::from_str(&body).unwrap();
        let session = if path == "/agent/resume" { &v["session"] } else { &v };
        assert_eq!(session["id"], "20261128_1");
        let conversation = session["conversation"].as_array().unwrap();
        assert_eq!(conversation.len(), n);
        for (i, m) in conversation.iter().enumerate().step_by(997) {
            assert!(
                m["content"][0]["text"].as_str().unwrap().starts_with(&format!("message {i} ")),
                "{method} {path}: message {i}"
            );
        }
    }
    let grew = peak_rss_kb(s.pid()).saturating_sub(before) * 1024;
    assert!(grew < bytes / 4, "sending {bytes} bytes of conversation twice took {grew} bytes more memory at its peak");
}

/// A client that stops reading a streamed answer (`GET /sessions/{id}`, chunked) for longer
/// than the server's socket timeout: the server gives up on that body, its log says why and
/// where, and the connection is closed at once without the last chunk. The client reads what
/// was sent and then the end: a body visibly cut, never one that looks whole, nor a `408` where
/// a chunk should be (before, the connection was kept after the failed body and tiny_http's
/// `408` for the next request's read timeout followed the cut).
#[test]
fn a_streamed_answer_whose_client_stops_reading_is_closed_short_and_logged() {
    use crate::support::{wait_for, Server, ServerOpts, TempDir};
    use std::io::{Read, Write};
    let home = TempDir::new("stalled-http");
    let cwd = work_dir(&home);
    write_long_session(&home, "20261128_2", &cwd, 10_000, 4_000);
    // The server gives up on a write after 10 s without progress; the client waits at most
    // half that for each read once it reads again, so only an end right after the failed body
    // (not the server's next read timeout on that connection) ends its read in time.
    let env = vec![("GOSLING_IO_TIMEOUT_SECS".to_string(), "10".to_string())];
    let s = Server::start_in(home, ServerOpts { env, ..ServerOpts::default() });
    let mut tcp = TcpStream::connect(s.addr.as_str()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(tcp, "GET /sessions/20261128_2 HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").unwrap();
    let mut first = [0u8; 4096];
    let got = tcp.read(&mut first).unwrap();
    // Nothing more is read until the server has given up on the body.
    let logged = wait_for(Duration::from_secs(60), || {
        s.stderr().lines().find(|l| l.contains("stopped short")).map(str::to_string)
    });
    let line = logged.unwrap_or_else(|| panic!("the server logs why the body ended short: {}", s.stderr()));
    assert!(line.contains("GET /sessions/20261128_2") && line.contains("WARN"), "{line}");
    let mut all = first[..got].to_vec();
    tcp.read_to_end(&mut all).expect("the server closes the connection right after the failed body");
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 200") && !text.ends_with("\r\n0\r\n\r\n"), "the body is visibly cut");
    assert!(!text.contains("HTTP/1.1 408"), "nothing follows the cut body");
    assert_eq!(s.get("/status").status, 200, "the server goes on");
}

/// History search over sessions another process changes: each process keeps what it learnt of
/// a session's messages with the session's index entry, and checks the file again only once
/// the entry is replaced — by its own change, or by one another process noted in `.changes`
/// (`store::search`). So what the other process appended, cut, created, renamed or deleted is
/// what the next search finds, however many searches ran before.
#[test]
fn a_search_finds_what_another_process_changed_since_the_last_search() {
    let home = TempDir::new("history-search-shared");
    let cwd = work_dir(&home);
    let model = Model::start();
    let (one, two) = (start_gosling(&home, &model), start_gosling(&home, &model));
    let (mut a, mut b) = (Acp::open(&one), Acp::open(&two));
    let found = |a: &mut Acp, q: &str| -> Vec<String> {
        let r = a.ok("session/list", json!({"_meta":{"types":["user"],"query":q}}));
        assert_eq!(r["_meta"]["searchComplete"], true, "{r}");
        r["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap().to_string()).collect()
    };
    let sid = a.ok("session/new", json!({"cwd":cwd,"mcpServers":[]}))["sessionId"].as_str().unwrap().to_string();
    a.ok("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"hello"}]}));
    // Searched twice here first: the second answers from what the first learnt.
    for _ in 0..2 {
        assert!(found(&mut a, "okapi").is_empty());
        assert_eq!(found(&mut a, "there"), std::slice::from_ref(&sid), "the model's answer");
    }
    // Appended by the other process.
    b.ok("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    next_second();
    b.ok("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"where is the Okapi?"}]}));
    assert_eq!(found(&mut a, "okapi"), std::slice::from_ref(&sid), "an append by the other process");
    let listed = a.ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["_meta"]["messageCount"], 4, "{listed}");
    // Cut by the other process (edit): gone from the search.
    b.ok("session/load", json!({"sessionId":sid,"cwd":cwd,"mcpServers":[]}));
    let okapi = b.replayed_user_messages().iter().find(|(t, _)| t.contains("Okapi")).unwrap().1;
    b.ok("_goose/unstable/session/conversation/truncate", json!({"sessionId":sid,"truncateFrom":okapi}));
    assert!(found(&mut a, "okapi").is_empty(), "cut by the other process");
    assert_eq!(found(&mut a, "hello"), std::slice::from_ref(&sid));
    // A session the other process creates, renames and deletes.
    let other = b.ok("session/new", json!({"cwd":cwd,"mcpServers":[]}))["sessionId"].as_str().unwrap().to_string();
    b.ok("session/prompt", json!({"sessionId":other,"prompt":[{"type":"text","text":"hello"}]}));
    next_second();
    b.ok("session/prompt", json!({"sessionId":other,"prompt":[{"type":"text","text":"an Okapi at last"}]}));
    assert_eq!(found(&mut a, "okapi"), std::slice::from_ref(&other), "a session of the other process");
    b.ok("_goose/unstable/session/rename", json!({"sessionId":other,"title":"Zoo day"}));
    assert_eq!(found(&mut a, "zoo day"), std::slice::from_ref(&other), "renamed by the other process");
    b.ok("session/delete", json!({"sessionId":other}));
    assert!(found(&mut a, "okapi").is_empty(), "deleted by the other process");
    // And the other way round: what this process did is what the other finds.
    a.ok("session/prompt", json!({"sessionId":sid,"prompt":[{"type":"text","text":"a Quagga, now"}]}));
    assert_eq!(found(&mut b, "quagga"), std::slice::from_ref(&sid));
}
