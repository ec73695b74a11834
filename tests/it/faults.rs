//! The fault matrix: every way a peer, a client or the machine misbehaves, and the
//! user-visible outcome asserted (clear error, server still serving, nothing persisted lost,
//! no child left behind). Most cases live next to the feature they break; this file lists them
//! all and holds the ones that fit nowhere else.
//!
//! stdio extensions (mcp_stdio.rs): crashes mid-call · hangs (timeout + notifications/cancelled)
//!   · exits at start (stderr quoted) · never answers initialize · unknown protocol version ·
//!   prints garbage · floods stdout · writes a line over the limit · wrong and duplicate ids ·
//!   unsupported server requests · ignores SIGTERM (ladder → SIGKILL) · command not found ·
//!   disallowed env key; (agent_api.rs) killed child restarted · children never outlive the
//!   server (SIGTERM and SIGKILL)
//! HTTP extensions (mcp_http.rs): connection refused · DNS failure · TLS failure (plain server,
//!   untrusted certificate) · timeout · 401 with WWW-Authenticate · 403 · 404 · HTML answer ·
//!   500 · redirect loop · truncated SSE stream (resumed) · expired session (re-initialized) ·
//!   sse type fails fast
//! LLM (reply.rs, llm.rs): 429 then success · 500 ×3 · stream cut · stall · malformed chunk ·
//!   mid-stream error event · client disconnect mid-reply (tool cancelled, LLM stream dropped)
//! HTTP clients (server.rs): 200 idle connections while /status answers · slow bodies up to the
//!   cap, then 503 · slow-loris headers cut off · oversized bodies (413, also chunked, and a
//!   declared length far beyond memory) · oversized request heads (431) · a trickled request head or body (408) ·
//!   connections past the limit (closed at once) · a client pipelining without reading · running out of file descriptors (accepting
//!   resumes) · malformed JSON / wrong content type / wrong shape · a panicking handler (500)
//! Files (config_api.rs, server.rs, here; sessions_store.rs): kill -9 during config writes ·
//!   kill -9 during session writes · kill -9 mid-append (no acknowledged message lost) · a torn
//!   or corrupt conversation line · a corrupt config file refuses start-up and is left untouched
//! Input (fuzz.rs + unit fuzzers): 10,000 mutated bodies per run, JSON-RPC lines, SSE streams,
//!   deep links.

use crate::fake_llm::*;
use crate::require_peers;
use crate::support::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn kill_9_during_session_writes_leaves_every_session_loadable() {
    let peers = require_peers!();
    let s = Server::start();
    let work = TempDir::new("work");
    let url = s.url("");
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    // Writers: new sessions, and run-time add/remove (each rewrites the session file).
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (url, stop, dir, started) = (url.clone(), stop.clone(), work.path().to_path_buf(), started.clone());
            let ext = everything_stdio_config(peers, "everything");
            std::thread::spawn(move || {
                let post = |path: &str, body: serde_json::Value| {
                    std::panic::catch_unwind(|| {
                        http("POST", &format!("{url}{path}"), Some(SECRET), Some(body.to_string().as_bytes()))
                    })
                };
                while !stop.load(Ordering::SeqCst) {
                    let Ok(r) = post("/agent/start", json!({"working_dir": dir, "extension_overrides": []})) else {
                        break;
                    };
                    let Some(id) = r.json().get("id").and_then(|v| v.as_str()).map(str::to_string) else { continue };
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
                    if w == 0 {
                        let _ = post("/agent/add_extension", json!({"session_id": id, "config": ext}));
                    }
                    let _ = post(
                        "/agent/update_provider",
                        json!({"session_id": id, "provider": "openai", "model": format!("m{w}")}),
                    );
                }
            })
        })
        .collect();
    // Kill mid-storm: once several sessions exist (the workers going on), however slow the
    // machine.
    assert!(
        wait_for(Duration::from_secs(30), || (started.load(Ordering::SeqCst) >= 8).then_some(())).is_some(),
        "fewer than 8 sessions were started"
    );
    let home = s.kill();
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        let _ = w.join();
    }
    let s = Server::start_in(home, ServerOpts::default());
    let list = s.get("/sessions");
    assert_eq!(list.status, 200);
    let sessions = list.json()["sessions"].as_array().unwrap().clone();
    assert!(sessions.len() >= 3, "every answered /agent/start is on disk: {}", sessions.len());
    for sess in &sessions {
        let id = sess["id"].as_str().unwrap();
        let one = s.get(&format!("/sessions/{id}"));
        assert_eq!(one.status, 200, "session {id} loads after the crash: {}", one.text());
    }
    assert!(!s.stderr().contains("not valid"), "no session file was torn");
}

/// The environment of a server whose model is `llm`.
pub fn llm_env(llm: &FakeLlm) -> ServerOpts {
    ServerOpts { env: llm.env("m"), ..Default::default() }
}

/// The user messages of a conversation with their texts, and whether the next message is the
/// assistant's answer.
fn turns(conversation: &[Value]) -> Vec<(String, bool)> {
    conversation
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "user")
        .map(|(i, m)| {
            let text = m["content"][0]["text"].as_str().unwrap_or("").split('|').next().unwrap_or("").to_string();
            (text, conversation.get(i + 1).is_some_and(|n| n["role"] == "assistant"))
        })
        .collect()
}

#[test]
fn kill_9_mid_append_loses_no_acknowledged_message() {
    // Every turn appends a 256 KiB user message and the model's answer; three sessions take
    // turns back to back while the server is killed, three times over.
    let answer = || text_turn("ok");
    let llm = FakeLlm::start((0..3000).map(|_| answer()).collect());
    let mut s = Server::start_with(llm_env(&llm));
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let r = s.post("/agent/start", json!({"working_dir": s.home.path(), "extension_overrides": []}));
            r.json()["id"].as_str().unwrap().to_string()
        })
        .collect();
    // The user texts of turns whose Finish event arrived, per session: acknowledged, so on disk.
    let acked: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::new(std::sync::Mutex::new(vec![Vec::new(); 3]));
    let total = |a: &std::sync::Mutex<Vec<Vec<String>>>| a.lock().unwrap().iter().map(Vec::len).sum::<usize>();
    let pad = "x".repeat(256 << 10);
    for round in 0..3 {
        for id in &ids {
            let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
            assert_eq!(r.status, 200, "{}", r.text());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(w, id)| {
                let (url, stop, acked, id, pad) =
                    (s.url("/reply"), stop.clone(), acked.clone(), id.clone(), pad.clone());
                std::thread::spawn(move || {
                    for k in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let turn = format!("s{w}-r{round}-t{k}");
                        let text = format!("{turn}|{pad}");
                        let body = json!({"session_id": id, "user_message": crate::reply::user_text(&text)});
                        let Ok(r) = std::panic::catch_unwind(|| {
                            http("POST", &url, Some(SECRET), Some(body.to_string().as_bytes()))
                        }) else {
                            break;
                        };
                        if r.text().contains(r#""type":"Finish""#) {
                            acked.lock().unwrap()[w].push(turn);
                        } else {
                            break;
                        }
                    }
                })
            })
            .collect();
        let target = total(&acked) + 6;
        assert!(
            wait_for(Duration::from_secs(60), || (total(&acked) >= target).then_some(())).is_some(),
            "the turns did not go on: {}",
            s.stderr()
        );
        // Somewhere inside a later turn, not at a turn's edge.
        std::thread::sleep(Duration::from_millis(3 + 7 * round));
        let home = s.kill();
        stop.store(true, Ordering::SeqCst);
        for w in writers {
            let _ = w.join();
        }
        s = Server::start_in(home, llm_env(&llm));
        let listed = s.get("/sessions").json();
        for (w, id) in ids.iter().enumerate() {
            let one = s.get(&format!("/sessions/{id}"));
            assert_eq!(one.status, 200, "session {id} loads after kill -9: {}", one.text());
            let conversation = one.json()["conversation"].as_array().unwrap().clone();
            let turns = turns(&conversation);
            for want in &acked.lock().unwrap()[w] {
                let i = turns.iter().position(|(t, _)| t == want);
                assert!(
                    i.is_some_and(|i| turns[i].1),
                    "round {round}: acknowledged turn {want} is whole on disk: {turns:?}"
                );
            }
            let entry = listed["sessions"].as_array().unwrap().iter().find(|x| x["id"] == id.as_str()).unwrap();
            assert_eq!(entry["message_count"], conversation.len(), "the list counts what is stored");
        }
        assert!(!s.stderr().contains("not valid"), "no file was unreadable: {}", s.stderr());
    }
}
