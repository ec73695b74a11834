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
