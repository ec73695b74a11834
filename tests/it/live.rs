//! Issue 37 item 2, live across processes: a turn run by one gosling process on a state dir
//! reaches the followers of the session in another process — the HTTP event stream
//! (`GET /sessions/{id}/events` of `gosling agent`, what the web page and Desktop 1.34 read)
//! and an editor that loaded the session over `gosling acp` — within a second, in order,
//! without duplicates, read from the session's conversation file. The model is the scripted
//! fake LLM both processes ask in turn.

use crate::fake_llm::{text_turn, FakeLlm};
use crate::front_ends::Acp;
use crate::reply::user_text;
use crate::support::{start_session, work_dir, Server, ServerOpts, TempDir, SECRET};
use crossbeam_channel::{unbounded, Receiver};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// The requirement: what another process appended is seen within this.
const LIVE: Duration = Duration::from_secs(1);

/// How long a turn may take to be answered at all.
const TURN: Duration = Duration::from_secs(60);

/// What a follower of `GET /sessions/{id}/events` reads: each event with when it arrived.
enum Seen {
    Ping,
    Event(Instant, Value),
}

/// Follows the session's event stream on its own connection; its frames on a channel.
fn follow(s: &Server, sid: &str) -> Receiver<Seen> {
    let mut conn = std::net::TcpStream::connect(&s.addr).unwrap();
    conn.set_read_timeout(Some(TURN)).unwrap();
    write!(conn, "GET /sessions/{sid}/events HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n").unwrap();
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let mut r = BufReader::new(conn);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "events: {line}");
        // The head ends with an empty line; then chunks: size, bytes, CRLF.
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                break;
            }
        }
        line.clear();
        r.read_line(&mut line).unwrap_or(0);
        let mut frames = String::new();
        let mut size = line.clone();
        loop {
            let Ok(n) = usize::from_str_radix(size.trim(), 16) else { return };
            if n == 0 {
                return;
            }
            let mut chunk = vec![0u8; n + 2];
            if r.read_exact(&mut chunk).is_err() {
                return;
            }
            frames.push_str(&String::from_utf8_lossy(&chunk[..n]));
            while let Some(end) = frames.find("\n\n") {
                let frame: String = frames.drain(..end + 2).collect();
                let seen = match frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                    Some(data) => Seen::Event(Instant::now(), serde_json::from_str(data).unwrap()),
                    None => Seen::Ping,
                };
                if tx.send(seen).is_err() {
                    return;
                }
            }
            size.clear();
            if r.read_line(&mut size).unwrap_or(0) == 0 {
                return;
            }
        }
    });
    // Following once its first ping is written.
    assert!(matches!(rx.recv_timeout(TURN), Ok(Seen::Ping)), "the follower's stream did not start");
    rx
}

/// Message events from `rx` until one holds `text` (a turn's last message), within `TURN`.
fn messages_until(rx: &Receiver<Seen>, text: &str) -> Vec<(Instant, Value)> {
    let deadline = Instant::now() + TURN;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Seen::Event(at, v)) if v["type"] == "Message" => {
                let done = v.to_string().contains(text);
                out.push((at, v));
                if done {
                    return out;
                }
            }
            Ok(_) => {}
            Err(_) => panic!("no message with {text:?} on the event stream within {TURN:?}; got {out:?}"),
        }
    }
}

/// The text of a goose message's text contents.
fn text_of(m: &Value) -> String {
    m["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect()
}

fn model_env(llm: &FakeLlm) -> Vec<(String, String)> {
    let mut env = llm.env("gpt-4o");
    env.push(("GOSLING_SESSION_TITLES".into(), "first_message".into()));
    env
}

#[test]
fn an_editors_turn_reaches_the_event_stream_of_another_process() {
    let llm = FakeLlm::start(vec![text_turn("first editor answer"), text_turn("second editor answer")]);
    let env = model_env(&llm);
    let home = TempDir::new("live-acp-to-http");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts { env: env.clone(), ..Default::default() });
    let sid = start_session(&s, Path::new(&cwd), Some(vec![]));
    let events = follow(&s, &sid);
    // The editor, another process on the same dirs, loads the session and runs two turns.
    let mut a = Acp::start_with(&s.home, &env);
    a.load(&sid, &cwd);
    let mut seen = Vec::new();
    for (ask, answer) in [("first question", "first editor answer"), ("second question", "second editor answer")] {
        let done = a.ok("session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": ask}]}));
        assert_eq!(done["stopReason"], "end_turn", "{done}");
        // Its messages were saved before the editor got its answer: from then on, at most LIVE.
        let answered = Instant::now();
        let got = messages_until(&events, answer);
        let (last, _) = got.last().unwrap();
        let lag = last.saturating_duration_since(answered);
        assert!(lag < LIVE, "the follower saw the editor's turn {lag:?} after it ended");
        seen.extend(got.into_iter().map(|(_, v)| v));
    }
    // In order, each message once, as the events a local turn sends (goose's Message event).
    let texts: Vec<(String, String)> =
        seen.iter().map(|v| (v["message"]["role"].as_str().unwrap().to_string(), text_of(&v["message"]))).collect();
    let expected = [
        ("user", "first question"),
        ("assistant", "first editor answer"),
        ("user", "second question"),
        ("assistant", "second editor answer"),
    ];
    assert_eq!(texts, expected.map(|(r, t)| (r.to_string(), t.to_string())), "{seen:?}");
    for v in &seen {
        assert!(v["message"]["id"].is_string() && v["token_state"].is_object(), "goose's Message event: {v}");
        // Of no request of this process: the web page shows it without waiting for its end.
        assert_eq!(
            (v["chat_request_id"].as_str(), v["request_id"].as_str()),
            (Some("other-process"), Some("other-process"))
        );
    }
    // What the stored conversation holds, no more: the follower saw exactly its messages.
    let stored = s.get(&format!("/sessions/{sid}")).json();
    let ids: Vec<&Value> = stored["conversation"].as_array().unwrap().iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, seen.iter().map(|v| &v["message"]["id"]).collect::<Vec<_>>());
    // The editor's own updates were not sent twice (its process skips its own appends).
    let agent_text: String = a
        .notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|n| n["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(agent_text.matches("first editor answer").count(), 1, "{agent_text}");
    assert_eq!(agent_text.matches("second editor answer").count(), 1, "{agent_text}");
}

#[test]
fn an_http_turn_reaches_an_editor_that_loaded_the_session_in_another_process() {
    let llm = FakeLlm::start(vec![text_turn("the web page's answer"), text_turn("the editor's own answer")]);
    let env = model_env(&llm);
    let home = TempDir::new("live-http-to-acp");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts { env: env.clone(), ..Default::default() });
    let sid = start_session(&s, Path::new(&cwd), Some(vec![]));
    let mut a = Acp::start_with(&s.home, &env);
    a.load(&sid, &cwd);
    // A follower of the agent's own event stream too: this process's turn is not doubled by
    // its own appends.
    let events = follow(&s, &sid);
    // The web page's way: `POST /sessions/{id}/reply`, the turn's events on the session's bus.
    let rid = "0196b3f2-7c1a-7d2e-9f00-0123456789b1";
    let body = json!({"request_id": rid, "user_message": user_text("asked on the web page")});
    let r = s.post(&format!("/sessions/{sid}/reply"), body);
    assert_eq!(r.status, 200, "{}", r.text());
    let mut local = Vec::new();
    let deadline = Instant::now() + TURN;
    loop {
        match events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Seen::Event(_, v)) if v["chat_request_id"] == rid && v["type"] == "Finish" => break,
            Ok(Seen::Event(_, v)) => local.push(v),
            Ok(Seen::Ping) => {}
            Err(_) => panic!("the web page's turn did not finish within {TURN:?}: {local:?}"),
        }
    }
    let answered = Instant::now();
    // The editor hears both messages as `session/update`s, as `session/load` replays them.
    let deadline = answered + TURN;
    let mut updates = Vec::new();
    let arrived = loop {
        let v = a
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the editor did not hear the web page's turn within {TURN:?}; got {updates:?}"));
        // (The session's commands follow the load's answer: not a message.)
        let kind = &v["params"]["update"]["sessionUpdate"];
        if v["method"] != "session/update"
            || v["params"]["sessionId"] != json!(sid)
            || kind == "available_commands_update"
        {
            continue;
        }
        let u = v["params"]["update"].clone();
        let done = u["sessionUpdate"] == "agent_message_chunk";
        updates.push(u);
        if done {
            break Instant::now();
        }
    };
    let lag = arrived.saturating_duration_since(answered);
    assert!(lag < LIVE, "the editor heard the web page's turn {lag:?} after it ended");
    let kinds: Vec<(&str, &str)> = updates
        .iter()
        .map(|u| (u["sessionUpdate"].as_str().unwrap(), u["content"]["text"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [("user_message_chunk", "asked on the web page"), ("agent_message_chunk", "the web page's answer")]
    );
    // Then the editor's own turn: the agent's follower gets its messages once each, the
    // editor nothing of the web page's turn again.
    a.notes.clear();
    let done =
        a.ok("session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": "and the editor"}]}));
    assert_eq!(done["stopReason"], "end_turn", "{done}");
    let seen = messages_until(&events, "the editor's own answer");
    let texts: Vec<String> = seen.iter().map(|(_, v)| text_of(&v["message"])).collect();
    assert_eq!(
        texts,
        ["and the editor", "the editor's own answer"],
        "the agent's own turn is not sent again from its file"
    );
    let streamed: String = local.iter().filter(|v| v["type"] == "Message").map(|v| text_of(&v["message"])).collect();
    assert_eq!(streamed.matches("the web page's answer").count(), 1, "{local:?}");
    let ends = texts.iter().filter(|t| *t == "the editor's own answer").count();
    assert_eq!(ends, 1, "{texts:?}");
    let again = a.notes.iter().any(|n| n.to_string().contains("asked on the web page"));
    assert!(!again, "the editor heard the web page's turn once: {:?}", a.notes);
}

/// The kernel watches `pid` holds: one line per watch in the fdinfo of its inotify descriptors.
fn inotify_watches(pid: u32) -> usize {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return 0 };
    rd.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|info| info.lines().filter(|l| l.starts_with("inotify wd:")).count())
        .sum()
}

/// The threads of `pid` named `name`.
fn threads_named(pid: u32, name: &str) -> usize {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    rd.flatten().filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)).count()
}

#[test]
fn one_watch_while_something_is_followed_and_none_after() {
    use crate::support::wait_for;
    let home = TempDir::new("live-watch");
    let cwd = work_dir(&home);
    let s = Server::start_in(home, ServerOpts::default());
    let pid = s.pid();
    let (a, b) = (start_session(&s, Path::new(&cwd), Some(vec![])), start_session(&s, Path::new(&cwd), Some(vec![])));
    assert_eq!(
        (inotify_watches(pid), threads_named(pid, "session-follow")),
        (0, 0),
        "nothing followed, nothing watched"
    );
    // Three followers of two sessions: one watch of the sessions directory, one thread.
    let followers = [follow(&s, &a), follow(&s, &a), follow(&s, &b)];
    // `follow` returns once its request is sent; the server registers the followers as it
    // takes the requests (on a loaded machine, after this line runs).
    let watched = || (inotify_watches(pid), threads_named(pid, "session-follow"));
    let one = wait_for(Duration::from_secs(30), || (watched() == (1, 1)).then_some(()));
    assert!(one.is_some(), "one watch and one thread for three followers: {:?}", watched());
    // Gone: their streams end at the next ping, and the watch and its thread with the last.
    drop(followers);
    let ended = wait_for(Duration::from_secs(30), || {
        (inotify_watches(pid) == 0 && threads_named(pid, "session-follow") == 0).then_some(())
    });
    assert!(ended.is_some(), "the watch and its thread outlived the followers");
    // A follower of a session that does not exist is refused, and starts no watch.
    let r = s.get("/sessions/20000101_77/events");
    assert_eq!(r.status, 404);
    assert_eq!(inotify_watches(pid), 0);
}
