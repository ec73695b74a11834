//! One Desktop, several windows; long sessions open (issue 25 items 4 and 5), through the real
//! binary: two `gosling serve` started as Desktop starts one per window, plus `gosling acp`, on
//! one state dir, each serving and listing the sessions the others made; and a 10,000-message
//! session loaded over the WebSocket with its whole replay, without the socket dropping and with
//! the server's memory bounded.

use crate::fake_llm::{oa_finish, oa_text, FakeLlm, Reply, OA_DONE};
use crate::serve::{desktop_command, launch, Serve};
use crate::support::{free_port, wait_for, Server, ServerOpts, TempDir};
use crate::websocket::{acp_path, Client};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn answer(t: &str) -> Reply {
    Reply::sse(&[oa_text(t), oa_finish("stop"), OA_DONE.to_string()])
}

fn model_env(llm: &FakeLlm) -> [(&'static str, String); 3] {
    [("GOOSE_PROVIDER", "openai".into()), ("GOOSE_MODEL", "m".into()), ("OPENAI_HOST", llm.url())]
}

/// A window's backend: `serve --tls` as Desktop starts it, over `home`'s dirs.
fn window(home: &TempDir, llm: &FakeLlm) -> Serve {
    let port = free_port();
    let mut cmd = desktop_command(home, port, &["--with-builtin", ""]);
    cmd.envs(model_env(llm));
    launch(home, cmd, port, true).unwrap()
}

/// Desktop's WebSocket to a window's backend, initialized.
fn open(s: &Serve) -> Client {
    let tls = crate::tls::connect(&s.addr(), s.fingerprint.as_deref().unwrap()).unwrap();
    let mut c = Client::open(Box::new(tls), &acp_path(), &[("Origin", "file://")]);
    assert_eq!(c.status, 101, "{}", c.body);
    let init = c.call(0, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
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
    let llm = FakeLlm::start((0..10).map(|i| answer(&format!("answer {i}"))).collect());
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
        scope.spawn(|| {
            let r = result(
                &mut d1,
                20,
                "session/prompt",
                json!({"sessionId": s1, "prompt": [{"type": "text", "text": "from window one"}]}),
            );
            assert_eq!(r["stopReason"], "end_turn");
        });
        scope.spawn(|| {
            let r = result(
                &mut d2,
                20,
                "session/prompt",
                json!({"sessionId": s2, "prompt": [{"type": "text", "text": "from window two"}]}),
            );
            assert_eq!(r["stopReason"], "end_turn");
        });
    });
    editor.call("session/load", json!({"sessionId": s1, "cwd": cwd, "mcpServers": []}));
    let r = editor
        .call("session/prompt", json!({"sessionId": s1, "prompt": [{"type": "text", "text": "from the editor"}]}));
    assert_eq!(r["stopReason"], "end_turn");

    // The second window opens the first window's session: its replay has both turns, in order.
    d2.send_text(&json!({"jsonrpc": "2.0", "id": 30, "method": "session/load", "params": {"sessionId": s1, "cwd": cwd, "mcpServers": []}}));
    let mut users = Vec::new();
    loop {
        let m = d2.text();
        if m["id"] == 30 && m.get("method").is_none() {
            assert!(m.get("result").is_some(), "{m}");
            break;
        }
        if m["params"]["update"]["sessionUpdate"] == "user_message_chunk" {
            users.push(m["params"]["update"]["content"]["text"].as_str().unwrap_or_default().to_string());
        }
    }
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

/// The server's peak resident memory, KiB.
fn hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
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
    assert!(wait_for(Duration::from_secs(10), || s.get("/sessions").text().contains(id).then_some(())).is_some());
    let before = hwm_kib(s.pid());
    let mut c = Client::connect(&s);
    c.call(0, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    let started = Instant::now();
    c.send_text(&json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": id, "cwd": cwd, "mcpServers": []}}));
    let (mut replayed, mut last) = (0usize, String::new());
    loop {
        let m = c.text(); // the socket stays open: a close fails here with its code
        if m["id"] == 1 && m.get("method").is_none() {
            assert!(m.get("result").is_some(), "{m}");
            break;
        }
        let u = &m["params"]["update"];
        if matches!(u["sessionUpdate"].as_str(), Some("user_message_chunk" | "agent_message_chunk")) {
            replayed += 1;
            last = u["content"]["text"].as_str().unwrap_or_default().to_string();
        }
    }
    let took = started.elapsed();
    let grew = hwm_kib(s.pid()).saturating_sub(before);
    eprintln!("session/load of {MESSAGES} messages: {took:?}, peak RSS +{grew} KiB");
    assert_eq!(replayed, MESSAGES, "every message replayed");
    assert!(last.starts_with(&format!("message {}:", MESSAGES - 1)), "in order, the last one last: {last}");
    // The conversation is 3 MB on disk: the replay may hold it, never many copies of it.
    assert!(grew < 64 * 1024, "peak RSS grew by {grew} KiB during the load");
    // The connection is still usable after the replay.
    assert_eq!(c.call(2, "session/list", json!({}))["result"]["sessions"][0]["sessionId"], id);
}
