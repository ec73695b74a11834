//! Issue 40 item 1, a turn's threads: a conversation's turns run on kept threads. A thread
//! started per turn, one per model call and ureq's resolver thread per request each cost a
//! `clone`, a stack and a hop on every turn; now the turn's thread waits for the next turn
//! (`gosling_util::Workers`), reads the model's answer itself (no fetch thread), and a model at
//! an address is not resolved at all.

use crate::fake_llm::*;
use crate::reply::{user_text, ReplyStream};
use crate::support::*;
use serde_json::json;
use std::collections::BTreeSet;

/// The live threads of `pid` named `name`, by thread id.
fn named(pid: u32, name: &str) -> BTreeSet<u32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return BTreeSet::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .collect()
}

/// After each `/reply` turn of a conversation its turn thread is still there, waiting for the
/// next, and so is the thread its connection was served on; five turns take no more than two (the second when a turn arrives before the previous
/// turn's thread has put itself back), and no model call has a thread of its own. Started per
/// turn, as before, none would be left after a turn.
#[test]
fn a_conversations_turns_run_on_kept_threads() {
    let llm = FakeLlm::start((1..=5).map(|i| text_turn(&format!("answer {i}"))).collect());
    let s = Server::start_with(ServerOpts { env: llm.env("m"), ..Default::default() });
    let work = TempDir::new("turn-threads-work");
    let id = start_session(&s, work.path(), Some(vec![]));
    let (mut turns, mut connections) = (BTreeSet::new(), BTreeSet::new());
    for i in 1..=5 {
        let events = ReplyStream::open(&s, &id, user_text(&format!("question {i}"))).all();
        assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("Finish")), "turn {i}: {events:?}");
        let t = named(s.pid(), "turn");
        assert!(!t.is_empty(), "turn {i}: the turn's thread is kept");
        assert_eq!(named(s.pid(), "llm-fetch"), BTreeSet::new(), "turn {i}: the turn's thread reads the model");
        turns.extend(t);
        // Each turn's /reply came on a connection of its own, served on a kept thread
        // (tiny_http patch 22), which waits for the next connection once this one closed.
        let c = named(s.pid(), "connection");
        assert!(!c.is_empty(), "turn {i}: the connection's thread is kept");
        connections.extend(c);
    }
    assert!(turns.len() <= 2, "five turns, kept turn threads: {turns:?}");
    assert!(connections.len() <= 3, "five connections one after another, kept threads: {connections:?}");
    assert_eq!(llm.requests().len(), 5, "one model request a turn");
}
