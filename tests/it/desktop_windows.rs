//! One Desktop, several windows; long sessions open (issue 25 items 4 and 5), through the real
//! binary: two `gosling serve` started as Desktop starts one per window, plus `gosling acp`, on
//! one state dir, each serving and listing the sessions the others made; and a 10,000-message
//! session loaded over the WebSocket with its whole replay, without the socket dropping and with
//! the server's memory bounded.

use crate::fake_llm::{text_turn, FakeLlm};
use crate::serve::{start_as_desktop_with, Serve};
use crate::support::{hwm_kib, wait_for, Server, ServerOpts, TempDir};
use crate::websocket::Client;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A window's backend: `serve --tls` as Desktop starts it, over `home`'s dirs.
fn window(home: &TempDir, llm: &FakeLlm) -> Serve {
    start_as_desktop_with(home, &["--with-builtin", ""], &llm.env("m"))
}

/// Desktop's WebSocket to a window's backend, initialized.
fn open(s: &Serve) -> Client {
    let mut c = s.acp();
    let init = c.initialize(0);
    assert_eq!(init["result"]["protocolVersion"], 1);
    c
}

/// A request's result (an error fails the test).
fn result(c: &mut Client, id: u64, method: &str, params: Value) -> Value {
    let m = c.call(id, method, params);
    m.get("result").cloned().unwrap_or_else(|| panic!("{method}: {m}"))
}

fn listed(c: &mut Client, id: u64) -> Vec<String> {
    let l = result(c, id, "session/list", json!({}));
    l["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap().to_string()).collect()
}

#[test]
fn two_windows_and_an_editor_share_one_state_dir() {
    let llm = FakeLlm::start((0..10).map(|i| text_turn(&format!("answer {i}"))).collect());
    let home = TempDir::new("windows");
    let cwd = std::fs::canonicalize(home.path()).unwrap().display().to_string();
    // Desktop starts a window's backend, then another's on the same dirs; an editor runs
    // `gosling acp` beside them. None refuses to start.
    let (w1, w2) = (window(&home, &llm), window(&home, &llm));
    let mut editor = crate::sessions_store::Acp::start(&home, &llm);
    let (mut d1, mut d2) = (open(&w1), open(&w2));

    let s1 = result(&mut d1, 1, "session/new", json!({"cwd": cwd, "mcpServers": []}))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let s2 = result(&mut d2, 1, "session/new", json!({"cwd": cwd, "mcpServers": []}))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(s1, s2, "two processes never hand out one id");
    // Each window lists the other's session at once; so does the editor.
    let mut n = 10;
    let mut both = |c: &mut Client| {
        n += 1;
        let l = listed(c, n);
        l.contains(&s1) && l.contains(&s2)
    };
    assert!(both(&mut d1) && both(&mut d2), "each window lists both sessions");
    let l = editor.call("session/list", json!({}));
    let ids: Vec<&str> = l["sessions"].as_array().unwrap().iter().filter_map(|s| s["sessionId"].as_str()).collect();
    assert!(ids.contains(&s1.as_str()) && ids.contains(&s2.as_str()), "{l}");

    // A turn in each window at once, and one from the editor into the first window's session.
    std::thread::scope(|scope| {
        for (d, sid, text) in [(&mut d1, &s1, "from window one"), (&mut d2, &s2, "from window two")] {
            scope.spawn(move || {
                let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]});
                assert_eq!(result(d, 20, "session/prompt", prompt)["stopReason"], "end_turn", "{text}");
            });
        }
    });
    editor.call("session/load", json!({"sessionId": s1, "cwd": cwd, "mcpServers": []}));
    let r = editor
        .call("session/prompt", json!({"sessionId": s1, "prompt": [{"type": "text", "text": "from the editor"}]}));
    assert_eq!(r["stopReason"], "end_turn");

    // The second window opens the first window's session: its replay has both turns, in order.
    let replay = d2.request(30, "session/load", json!({"sessionId": s1, "cwd": cwd, "mcpServers": []}));
    assert!(replay.last().unwrap().get("result").is_some(), "{}", replay.last().unwrap());
    let users: Vec<&str> = replay
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|m| m["params"]["update"]["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(users, ["from window one", "from the editor"]);

    // Deleted by the editor: gone from both windows' lists.
    editor.call("session/delete", json!({"sessionId": s2}));
    let mut n = 40;
    let gone = |c: &mut Client, n: &mut u64| {
        *n += 1;
        !listed(c, *n).contains(&s2)
    };
    assert!(gone(&mut d1, &mut n) && gone(&mut d2, &mut n), "a deleted session disappears from every window");
}

#[test]
fn a_ten_thousand_message_session_loads_over_the_websocket_with_bounded_memory() {
    const MESSAGES: usize = 10_000;
    let home = TempDir::new("long");
    let cwd = std::fs::canonicalize(home.path()).unwrap().display().to_string();
    // The session as the store keeps it: its metadata and one message per line (≈ 300 bytes
    // each, 3 MB in all).
    let dir = home.join("state").join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let id = "20261125_1";
    let mut lines = String::new();
    for i in 0..MESSAGES {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let m = json!({"id": format!("m{i}"), "role": role, "created": 1_764_000_000 + i,
            "content": [{"type": "text", "text": format!("message {i}: {}", "x".repeat(200))}],
            "metadata": {"userVisible": true, "agentVisible": true}});
        lines.push_str(&m.to_string());
        lines.push('\n');
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), &lines).unwrap();
    let meta = json!({"id": id, "name": "Long", "working_dir": cwd, "created_at": "2026-11-25T10:00:00Z",
        "updated_at": "2026-11-25T10:00:00Z", "extension_data": {}, "message_count": 0, "session_type": "user",
        "user_set_name": true});
    std::fs::write(dir.join(format!("{id}.meta.json")), meta.to_string()).unwrap();

    let s = Server::start_in(home, ServerOpts::default());
    // Listed (the index loads in the background): the session is there before the load.
    assert!(wait_for(Duration::from_secs(60), || s.get("/sessions").text().contains(id).then_some(())).is_some());
    let before = hwm_kib(s.pid());
    // Reads wait up to 2 minutes: a loaded machine can take long to begin the replay, and the
    // point is that the socket never drops (a close frame or the connection's end fails the read).
    let tcp = crate::websocket::tcp_timeout(&s, Duration::from_secs(120));
    let mut c = Client::open(tcp, &crate::websocket::acp_path(), &[]);
    assert_eq!(c.status, 101, "{}", c.body);
    c.initialize(0);
    let started = Instant::now();
    // The socket stays open: a close fails the read with its code.
    let replay = c.request(1, "session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []}));
    let took = started.elapsed();
    assert!(replay.last().unwrap().get("result").is_some(), "{}", replay.last().unwrap());
    let texts: Vec<&str> = replay
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| matches!(u["sessionUpdate"].as_str(), Some("user_message_chunk" | "agent_message_chunk")))
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    let (replayed, last) = (texts.len(), texts.last().copied().unwrap_or_default());
    let grew = hwm_kib(s.pid()).saturating_sub(before);
    eprintln!("session/load of {MESSAGES} messages: {took:?}, peak RSS +{grew} KiB");
    assert_eq!(replayed, MESSAGES, "every message replayed");
    assert!(last.starts_with(&format!("message {}:", MESSAGES - 1)), "in order, the last one last: {last}");
    // The conversation is 3 MB on disk: the replay may hold it, never many copies of it.
    assert!(grew < 64 * 1024, "peak RSS grew by {grew} KiB during the load");
    // The connection is still usable after the replay.
    assert_eq!(c.call(2, "session/list", json!({}))["result"]["sessions"][0]["sessionId"], id);
}
