//! Issue 40 item 3, idle means idle: with a session open and stdio extensions running (the
//! builtin developer as a child, a Python stdio server) and nothing happening, no thread of
//! gosling nor any process of gosling's own under it (the extensions' reapers, `gosling mcp
//! developer`) wakes up. Wake-ups are counted as context switches, read for every thread from
//! `/proc/<pid>/task/<tid>/status` before and after a quiet spell; reading them does not wake
//! the threads read.

use crate::support::*;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

/// How long the server is left alone. Every periodic timer gosling had ticked at least every
/// 2 s (the reapers and the signal watchers every 100 ms).
const QUIET: Duration = Duration::from_secs(3);

/// Context switches (voluntary and not) of every thread of `pid`, by thread id, with the
/// thread's name.
fn switches(pid: u32) -> HashMap<u32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for e in rd.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else { continue };
        let field = |name: &str| -> Option<&str> { status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim) };
        let n: u64 = ["voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"]
            .iter()
            .filter_map(|f| field(f).and_then(|v| v.parse::<u64>().ok()))
            .sum();
        out.insert(tid, (field("Name:").unwrap_or("?").to_string(), n));
    }
    out
}

/// The processes that are gosling's own code: the server and those of its descendants that
/// run the gosling binary (the reapers are forks of it; `gosling mcp developer` is an exec of
/// it). The others are the extensions' programs, counted apart.
fn own_and_others(server: u32) -> (Vec<u32>, Vec<u32>) {
    let exe = std::fs::canonicalize(bin()).unwrap();
    let mut own = vec![server];
    let mut others = Vec::new();
    for p in descendants(server) {
        let runs_gosling = std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe);
        if runs_gosling {
            own.push(p);
        } else {
            others.push(p);
        }
    }
    (own, others)
}

/// The threads of `pids` that switched in the quiet spell between `before` and now:
/// "pid/tid name: n".
fn woke(pids: &[u32], before: &HashMap<u32, HashMap<u32, (String, u64)>>) -> Vec<String> {
    let mut out = Vec::new();
    for &p in pids {
        let Some(then) = before.get(&p) else { continue };
        for (tid, (name, n)) in switches(p) {
            let was = then.get(&tid).map_or(0, |(_, n)| *n);
            if n > was {
                out.push(format!("{p}/{tid} {name}: {}", n - was));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_idle_server_with_a_session_and_stdio_extensions_does_not_wake() {
    let s = server_with_gosling_on_path(vec![]);
    let work = TempDir::new("idle-work");
    let fake = manifest_dir().join("tests/fakes/trust_mcp_stdio.py");
    let id = start_session(
        &s,
        work.path(),
        Some(vec![
            json!({"type":"builtin","name":"developer","description":"","timeout":60}),
            json!({"type":"stdio","name":"quiet","description":"","cmd":"python3",
                   "args":[fake.display().to_string(), "env"],"timeout":60}),
        ]),
    );
    let resumed = resume(&s, &id);
    let results = resumed["extension_results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["success"] == true), "both extensions start: {results:?}");
    // A tool call, so every lazily started thread has started and every lead has ended.
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "quiet__env", "arguments": {}}));
    assert_eq!(r.status, 200, "{}", r.text());

    let (own, others) = own_and_others(s.pid());
    assert!(own.len() >= 2, "gosling and `gosling mcp developer` run: {own:?}");
    assert!(!others.is_empty(), "the Python extension runs");
    // Whatever the call left in flight (a reader's last look, a log line) settles first.
    std::thread::sleep(Duration::from_millis(300));
    let before: HashMap<u32, _> = own.iter().map(|&p| (p, switches(p))).collect();
    std::thread::sleep(QUIET);
    let woke_up = woke(&own, &before);
    assert_eq!(
        woke_up,
        Vec::<String>::new(),
        "threads of gosling that woke in {QUIET:?} of idle (thread: context switches); stderr:\n{}",
        s.stderr()
    );
    // Everything is still up: the quiet was not a hang.
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "quiet__env", "arguments": {}}));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.post(
        "/agent/call_tool",
        json!({"session_id": id, "name": "developer__shell", "arguments": {"command": "echo up"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("up"), "{}", r.text());
}

/// Issue 40 item 2, durability kept on the turn's fast path: when the model's request
/// arrives, the person's message is in the session's conversation file already, and when the
/// next turn's request arrives, the answer to the first is too (the fake model reads the
/// session files as each request arrives, before answering). The fdatasync that makes the
/// message durable precedes the request on the same thread (`SessionStore::append_message`);
/// a file's content cannot show a sync, so that order is what is checked here. The answer is
/// written without its fdatasync (`append_message_deferred`): the next turn's message's fsync
/// covers it, and without a next turn the token counts' metadata write, which makes every line
/// it records durable first (`sessions::tests::a_deferred_append_is_made_durable_before_anything_records_or_follows_it`),
/// records it soon after the turn: checked below, with no second turn begun yet.
#[test]
fn the_message_is_on_disk_before_the_model_is_asked_and_the_answer_before_the_next_turn() {
    use crate::fake_llm::*;
    use crate::reply::{user_text, ReplyStream};
    let llm = FakeLlm::start(vec![
        text_turn("first answer"),
        text_turn("second answer"),
        tool_turn("call_1", "quiet__env", "{}"),
        text_turn("third answer"),
    ]);
    let s = Server::start_with(ServerOpts { env: llm.env("m"), ..Default::default() });
    llm.watch_dir(&s.home.join("state/sessions"));
    let work = TempDir::new("durable-work");
    let fake = manifest_dir().join("tests/fakes/trust_mcp_stdio.py");
    let quiet = json!({"type":"stdio","name":"quiet","description":"","cmd":"python3",
                       "args":[fake.display().to_string(), "env"],"timeout":60});
    let id = start_session(&s, work.path(), Some(vec![quiet]));
    let resumed = resume(&s, &id);
    assert!(resumed["extension_results"].as_array().unwrap().iter().all(|r| r["success"] == true), "{resumed}");
    let sessions = s.home.join("state/sessions");
    for (i, q) in ["first question", "second question", "third question"].into_iter().enumerate() {
        let events = ReplyStream::open(&s, &id, user_text(q)).all();
        assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("Finish")), "{events:?}");
        if i > 0 {
            continue;
        }
        // Before the next turn: the metadata comes to record the whole conversation file, the
        // answer's line included (so it was synced), by itself.
        let recorded = || -> Option<(u64, u64)> {
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(sessions.join(format!("{id}.meta.json"))).ok()?).ok()?;
            let len = std::fs::metadata(sessions.join(format!("{id}.jsonl"))).ok()?.len();
            Some((meta["gosling_conversation_file"]["bytes"].as_u64()?, len))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while recorded().is_none_or(|(r, len)| r != len) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (r, len) = recorded().expect("the session's files");
        assert_eq!(r, len, "the answer's line is recorded in the metadata (made durable) with no next turn");
    }
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 4, "three turns, the last with a tool call: four model requests (no title request)");
    let conversation = |i: usize| -> Vec<String> {
        let file = format!("{id}.jsonl");
        let (_, text) = reqs[i]
            .seen
            .iter()
            .find(|(name, _)| *name == file)
            .unwrap_or_else(|| panic!("request {i}: no {file} when the model was asked: {:?}", reqs[i].seen));
        text.lines()
            .map(|l| {
                let m: serde_json::Value = serde_json::from_str(l).expect("whole lines only");
                let content = m["content"].as_array().unwrap();
                let t: String = content
                    .iter()
                    .map(|c| match c["type"].as_str() {
                        Some("text") => c["text"].as_str().unwrap_or_default().to_string(),
                        Some("toolRequest") => {
                            format!("[call {}]", c["toolCall"]["value"]["name"].as_str().unwrap_or("?"))
                        }
                        Some("toolResponse") => format!("[result {}]", c["id"].as_str().unwrap_or("?")),
                        other => format!("[{other:?}]"),
                    })
                    .collect();
                format!("{}: {t}", m["role"].as_str().unwrap())
            })
            .collect()
    };
    assert_eq!(conversation(0), ["user: first question"], "the message is saved before the model is asked");
    assert_eq!(
        conversation(1),
        ["user: first question", "assistant: first answer", "user: second question"],
        "the answer is saved before the next turn asks the model"
    );
    // A tool turn: when the model is asked again, the request for the tool and its result are
    // in the file (the result's fdatasync, on the same thread before that request, covers
    // both: `reply::SETTLE_AFTER`).
    let third = ["user: third question", "assistant: [call quiet__env]", "user: [result call_1]"];
    assert_eq!(conversation(3)[4..], third, "the tool's request and result are saved before the model is asked again");
}
