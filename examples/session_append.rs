//! `scripts/bench session_append`: the cost of appending one message to a session of N
//! messages through the session store, against the bare file operation underneath it (one
//! `O_APPEND` write and an fsync of the same line) and against an append to a 1-message
//! session, in the same run. Also times what the one-file layout did for the same append:
//! rewriting the whole session atomically.
//!
//!     session_append DIR N ROUNDS  →  one JSON line of figures in milliseconds

use gosling::store::{atomic, message::Message, sessions::SessionStore};
use serde_json::json;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

fn message(i: usize) -> Message {
    let m = json!({
        "id": format!("msg_{i:08}"), "role": if i.is_multiple_of(2) { "user" } else { "assistant" }, "created": 1_763_900_000 + i,
        "content": [{"type": "text", "text": format!("message {i}: a line of conversation of a typical length, neither short nor long, to be stored")}],
        "metadata": {"userVisible": true, "agentVisible": true}
    });
    Message::from_value(m).expect("a goose message")
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn p99(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[(xs.len() * 99 / 100).min(xs.len() - 1)]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, n, rounds] = &args[..] else {
        return Err("usage: session_append DIR N ROUNDS".into());
    };
    let (dir, n, rounds) = (std::path::PathBuf::from(dir), n.parse::<usize>()?, rounds.parse::<usize>()?);
    let store = SessionStore::open(&dir)?;
    let long = store.create("/w", vec![])?.id;
    store.replace_conversation(&long, &(0..n).map(message).collect::<Vec<_>>())?;
    let short = store.create("/w", vec![])?.id;
    store.append_message(&short, &message(0))?;
    let raw_path = dir.join("raw.jsonl");
    let mut raw = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(&raw_path)?;
    let (mut long_t, mut short_t, mut raw_t) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so machine noise hits all three alike.
    for i in 0..rounds {
        let m = message(n + i);
        let t = Instant::now();
        store.append_message(&long, &m)?;
        long_t.push(ms(t));
        let t = Instant::now();
        store.append_message(&short, &m)?;
        short_t.push(ms(t));
        let mut line = serde_json::to_vec(&m)?;
        line.push(b'\n');
        let t = Instant::now();
        raw.write_all(&line)?;
        raw.sync_data()?;
        raw_t.push(ms(t));
    }
    let s = store.get(&long)?.ok_or("the session vanished")?;
    if s.message_count as usize != n + rounds {
        return Err(format!("expected {} messages, found {}", n + rounds, s.message_count).into());
    }
    // The one-file layout: every change rewrote the session with its whole conversation.
    let legacy = serde_json::to_value(&s)?;
    let legacy_path = dir.join("legacy.json");
    let mut legacy_t = Vec::new();
    for _ in 0..rounds.min(20) {
        let t = Instant::now();
        atomic::write_json(&legacy_path, &legacy)?;
        legacy_t.push(ms(t));
    }
    println!(
        "{}",
        json!({
            "n": n, "rounds": rounds,
            "append_p50": median(long_t.clone()), "append_p99": p99(long_t),
            "short_p50": median(short_t), "raw_p50": median(raw_t),
            "legacy_p50": median(legacy_t),
        })
    );
    Ok(())
}
