//! The MCP client over stdio (issue 4), through the library API and `gosling probe`: real
//! servers from scripts/peers, and `tests/fakes/bad_mcp_stdio.py` for each misbehaviour.
//! Every test checks that the child process is gone afterwards.

use crate::require_peers;
use crate::support::*;
use crossbeam_channel::bounded;
use gosling::mcp::client::{CallContext, Client, ClientOptions};
use gosling::mcp::error::Error;
use gosling::mcp::stdio::{StdioSpec, StdioTransport};
use gosling::wire::mcp_types::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn opts(timeout: Duration, roots: Option<Vec<PathBuf>>) -> ClientOptions {
    ClientOptions {
        extension: "test".into(),
        timeout,
        roots,
        elicitation: None,
        sampling: None,
        client_name: "gosling-test".into(),
        client_version: "0".into(),
        protocol_version: None,
    }
}

fn spec(cmd: &str, args: &[&str]) -> StdioSpec {
    StdioSpec { cmd: cmd.into(), args: args.iter().map(|a| a.to_string()).collect(), ..Default::default() }
}

fn fake(mode: &str, record: Option<&std::path::Path>) -> StdioSpec {
    let script = manifest_dir().join("tests/fakes/bad_mcp_stdio.py");
    let mut s = spec("python3", &[script.to_str().unwrap(), mode]);
    if let Some(r) = record {
        s.args.push(r.display().to_string());
    }
    s
}

/// Connects and returns the child's pid too, so tests can check it is gone afterwards.
fn connect(spec: &StdioSpec, o: ClientOptions) -> (Result<Client, Error>, u32) {
    let (tx, rx) = bounded(256);
    let t = StdioTransport::spawn(spec, &o.extension, tx).expect("spawn");
    let pid = t.pid();
    (Client::connect(t, rx, o), pid)
}

fn assert_gone(pid: u32) {
    let gone = wait_for(Duration::from_secs(10), || (!pid_alive(pid)).then_some(()));
    assert!(gone.is_some(), "child {pid} is still running");
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(ContentBlock::as_text).collect::<Vec<_>>().join("\n")
}

fn everything(peers: &Peers) -> (Client, u32) {
    let (c, pid) = connect(
        &spec(peers.node(), &[peers.get("MCP_PEER_EVERYTHING"), "stdio"]),
        opts(Duration::from_secs(30), Some(vec![std::env::temp_dir()])),
    );
    (c.unwrap(), pid)
}

#[test]
fn server_everything_tools_resources_prompts_and_ping() {
    let peers = require_peers!();
    let (c, pid) = everything(peers);
    assert_eq!(c.protocol_version(), "2025-11-25", "initialize asks for 2025-11-25 and takes what the server answers");
    let tools = c.list_tools().unwrap();
    assert!(tools.len() >= 10 && tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    assert!(text(&c.call_tool("echo", Some(json!({"message": "hi"})), &CallContext::default()).unwrap()).contains("hi"));
    let resources = c.list_resources().unwrap();
    let read = c.read_resource(&resources[0].uri).unwrap();
    assert!(!read.contents.is_empty());
    assert!(!c.list_resource_templates().unwrap().is_empty());
    let prompts = c.list_prompts().unwrap();
    let simple = prompts
        .iter()
        .find(|p| p.arguments.as_ref().is_none_or(|a| a.iter().all(|x| x.required != Some(true))))
        .expect("a prompt without required arguments");
    let got = c.get_prompt(&simple.name, None).unwrap();
    assert!(!got.messages.is_empty());
    c.ping().unwrap();
    c.close();
    assert_gone(pid);
}

#[test]
fn server_everything_progress_reaches_the_caller() {
    let peers = require_peers!();
    let (c, pid) = everything(peers);
    let (ptx, prx) = bounded(64);
    let ctx = CallContext { progress: Some(ptx), cancel: None };
    c.call_tool("trigger-long-running-operation", Some(json!({"duration": 1, "steps": 4})), &ctx).unwrap();
    let progress: Vec<Value> = prx.try_iter().filter(|p| p["method"] == "notifications/progress").collect();
    assert!(progress.len() >= 3, "progress delivered: {progress:?}");
    c.close();
    assert_gone(pid);
}

#[test]
fn server_everything_call_cancelled_returns_at_once_and_the_client_goes_on() {
    let peers = require_peers!();
    let (c, pid) = everything(peers);
    // A cancelled long operation returns at once: cancel once its first progress shows it runs.
    let (ctx_tx, ctx_rx) = bounded::<()>(1);
    let (ptx, prx) = bounded(64);
    let c = Arc::new(c);
    let c2 = c.clone();
    let h = std::thread::spawn(move || {
        c2.call_tool(
            "trigger-long-running-operation",
            Some(json!({"duration": 30, "steps": 30})),
            &CallContext { progress: Some(ptx), cancel: Some(ctx_rx) },
        )
    });
    prx.recv_timeout(Duration::from_secs(20)).expect("the long operation reports progress");
    let t = Instant::now();
    drop(ctx_tx);
    let r = h.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled { .. })), "{r:?}");
    assert_well_under(t.elapsed(), Duration::from_secs(30), "the call ended at the cancel, not with the operation");
    // The client still works after a cancel.
    assert!(text(&c.call_tool("echo", Some(json!({"message": "after"})), &CallContext::default()).unwrap())
        .contains("after"));
    c.close();
    assert_gone(pid);
}

#[test]
fn server_filesystem_asks_for_roots_and_reads_in_them() {
    let peers = require_peers!();
    let dir = TempDir::new("fsroot");
    std::fs::write(dir.join("note.txt"), "from the root").unwrap();
    // server-filesystem without directories asks us for roots.
    let (c, pid) = connect(
        &spec(peers.node(), &[peers.get("MCP_PEER_FILESYSTEM")]),
        opts(Duration::from_secs(30), Some(vec![dir.path().to_path_buf()])),
    );
    let c = c.unwrap();
    let allowed = wait_for(Duration::from_secs(10), || {
        let t = text(&c.call_tool("list_allowed_directories", None, &CallContext::default()).unwrap());
        t.contains(dir.path().file_name().unwrap().to_str().unwrap()).then_some(t)
    });
    assert!(allowed.is_some(), "roots/list answered with our directory");
    let f = dir.join("note.txt");
    let r = c.call_tool("read_text_file", Some(json!({"path": f})), &CallContext::default()).unwrap();
    assert!(text(&r).contains("from the root"), "{r}");
    c.close();
    assert_gone(pid);
}

#[test]
fn server_memory_creates_and_reads_entities() {
    let peers = require_peers!();
    let mem = TempDir::new("mem");
    let mut s = spec(peers.node(), &[peers.get("MCP_PEER_MEMORY")]);
    s.env.push(("MEMORY_FILE_PATH".into(), mem.join("memory.jsonl").display().to_string()));
    let (c, pid) = connect(&s, opts(Duration::from_secs(30), None));
    let c = c.unwrap();
    assert!(c.list_tools().unwrap().iter().any(|t| t.name == "create_entities"));
    c.call_tool(
        "create_entities",
        Some(json!({"entities": [{"name": "gosling", "entityType": "program", "observations": ["small"]}]})),
        &CallContext::default(),
    )
    .unwrap();
    assert!(text(&c.call_tool("read_graph", Some(json!({})), &CallContext::default()).unwrap()).contains("gosling"));
    c.close();
    assert_gone(pid);
}

#[test]
fn python_sdk_server_calls_a_tool_and_gets_a_prompt() {
    let peers = require_peers!();
    let (c, pid) =
        connect(&spec(peers.python(), &[peers.get("MCP_PEER_PY_SERVER")]), opts(Duration::from_secs(30), None));
    let c = c.unwrap();
    assert!(text(&c.call_tool("add", Some(json!({"a": 20, "b": 22})), &CallContext::default()).unwrap()).contains("42"));
    assert!(!c.get_prompt("review", Some(json!({"code": "x = 1"}))).unwrap().messages.is_empty());
    c.close();
    assert_gone(pid);
}

#[test]
fn mcp_server_time_answers_in_utc() {
    let peers = require_peers!();
    let (c, pid) =
        connect(&spec(peers.get("MCP_PEER_TIME"), &["--local-timezone", "UTC"]), opts(Duration::from_secs(30), None));
    let c = c.unwrap();
    let r = c.call_tool("get_current_time", Some(json!({"timezone": "UTC"})), &CallContext::default()).unwrap();
    assert!(text(&r).contains("UTC"), "{r}");
    c.close();
    assert_gone(pid);
}

#[test]
fn thirty_two_threads_share_one_extension() {
    let peers = require_peers!();
    let (c, pid) =
        connect(&spec(peers.node(), &[peers.get("MCP_PEER_EVERYTHING"), "stdio"]), opts(Duration::from_secs(60), None));
    let c = Arc::new(c.unwrap());
    let hs: Vec<_> = (0..32)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || {
                for j in 0..5 {
                    let m = format!("t{i}-{j}");
                    let r = c.call_tool("echo", Some(json!({"message": m})), &CallContext::default()).unwrap();
                    assert!(text(&r).ends_with(&m), "{m} got {r}");
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    c.close();
    assert_gone(pid);
}

/// The calling thread reads its own answer (a lead), however the line is cut up; what the
/// server sends while no call is in flight is read by the reader thread: the tool list is
/// invalidated and the server's ping answered without any request of ours.
#[test]
fn answers_in_pieces_and_news_between_calls_are_both_read() {
    let dir = TempDir::new("trickle");
    let record = dir.path().join("record.jsonl");
    let (c, pid) = connect(&fake("trickle", Some(&record)), opts(Duration::from_secs(30), None));
    let c = c.unwrap();
    let names = |c: &Client| c.list_tools().unwrap().iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&c), ["echo", "slow"]);
    for i in 0..3 {
        let r = c.call_tool("echo", Some(json!({"message": format!("piece {i}")})), &CallContext::default()).unwrap();
        assert_eq!(text(&r), format!("echo: piece {i}"));
    }
    // The listing is cached, so asking again sends nothing: only the reader thread can see
    // the server's list_changed.
    let late = wait_for(Duration::from_secs(10), || names(&c).contains(&"late".to_string()).then_some(()));
    assert!(late.is_some(), "list_changed sent between calls was never read: {:?}", names(&c));
    let answered = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&record)
            .ok()?
            .lines()
            .any(|l| l.contains(r#""id": "s-late""#) && l.contains(r#""result""#))
            .then_some(())
    });
    assert!(answered.is_some(), "the server's ping sent between calls was not answered");
    let r = c.call_tool("echo", Some(json!({"message": "after"})), &CallContext::default()).unwrap();
    assert_eq!(text(&r), "echo: after");
    c.close();
    assert_gone(pid);
}

/// Calls whose requests and answers are each larger than a pipe's buffer, on several threads
/// against a server that reads one request and writes its whole answer before reading the
/// next: the thread that reads for everyone also reads while it writes its own request, so
/// neither side waits for the other for ever (the send would fail after 30 s).
#[test]
fn large_requests_and_answers_cross_without_a_deadlock() {
    let (c, pid) = connect(&fake("ok", None), opts(Duration::from_secs(60), None));
    let c = Arc::new(c.unwrap());
    let hs: Vec<_> = (0..4)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || {
                for j in 0..4 {
                    let m = format!("{i}-{j}-{}", "x".repeat(1 << 20));
                    let r = c.call_tool("echo", Some(json!({"message": m})), &CallContext::default()).unwrap();
                    assert_eq!(text(&r).len(), "echo: ".len() + m.len());
                }
            })
        })
        .collect();
    // A send that waited for room for ever would fail at the stall limit: each call's
    // `unwrap` above is the check.
    for h in hs {
        h.join().unwrap();
    }
    c.close();
    assert_gone(pid);
}

/// A server that stops reading its stdin while it keeps writing: the send that finds stdin full
/// reads (a bounded amount) while it waits, fails once the stall limit passes with a message
/// that says so, and closes stdin, so the next call fails at once instead of waiting again.
#[test]
fn a_server_that_stops_reading_fails_the_send_after_the_stall_limit() {
    let mut s = fake("deaf", None);
    let stall = Duration::from_secs(4);
    s.stdin_stall = Some(stall);
    let (c, pid) = connect(&s, opts(Duration::from_secs(60), None));
    let c = c.unwrap();
    let r = c.call_tool("echo", Some(json!({"message": "hello"})), &CallContext::default()).unwrap();
    assert_eq!(text(&r), "echo: hello");
    let big = json!({"message": "x".repeat(4 << 20)});
    let e = c.call_tool("echo", Some(big.clone()), &CallContext::default()).unwrap_err().to_string();
    assert!(e.contains("has not read its input for 4s; it is stuck"), "{e}");
    // The second call finds stdin closed and says so, without trying (and stalling) again.
    let e = c.call_tool("echo", Some(big), &CallContext::default()).unwrap_err().to_string();
    assert!(e.contains("stdin is closed") && !e.contains("has not read its input"), "{e}");
    c.close();
    assert_gone(pid);
}

#[test]
fn a_child_that_crashes_mid_call_fails_every_pending_call_at_once() {
    let (c, pid) = connect(&fake("crash_mid_call", None), opts(Duration::from_secs(60), None));
    let c = Arc::new(c.unwrap());
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.call_tool("slow", Some(json!({"seconds": 30})), &CallContext::default()))
        })
        .collect();
    // Each fails with the crash (its stderr tail), not with the 60 s timeout's words.
    for h in hs {
        let e = h.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("crashing on purpose"), "the stderr tail is quoted: {e}");
    }
    assert!(c.is_closed());
    c.close();
    assert_gone(pid);
}

#[test]
fn a_hanging_call_times_out_and_is_cancelled() {
    let dir = TempDir::new("hang");
    let rec = dir.join("received.jsonl");
    let (c, pid) = connect(&fake("hang", Some(&rec)), opts(Duration::from_secs(2), None));
    let c = c.unwrap();
    let e = c.call_tool("echo", Some(json!({"message": "x"})), &CallContext::default()).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("raise the extension's timeout"), "{e}");
    let cancelled = wait_for(Duration::from_secs(30), || {
        let log = std::fs::read_to_string(&rec).unwrap_or_default();
        log.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|m| m["method"] == "notifications/cancelled")
    })
    .expect("notifications/cancelled was sent");
    assert_eq!(cancelled["params"]["reason"], "timed out");
    assert!(cancelled["params"]["requestId"].is_number());
    c.close();
    assert_gone(pid);
}

#[test]
fn start_failures_are_actionable() {
    // Exits before initialize: its stderr is in the error.
    let (c, pid) = connect(&fake("exit_at_start", None), opts(Duration::from_secs(10), None));
    let e = c.err().unwrap().to_string();
    assert!(e.contains("FAKE_TOKEN is not set") && e.contains("before initialization"), "{e}");
    assert_gone(pid);
    // Never answers initialize.
    let (c, pid) = connect(&fake("no_init", None), opts(Duration::from_secs(2), None));
    let e = c.err().unwrap().to_string();
    assert!(e.contains("initialize"), "{e}");
    assert_gone(pid);
    // Answers an older revision than the 2025-11-25 asked for: taken.
    let (c, _pid) = connect(&fake("old_version", None), opts(Duration::from_secs(10), None));
    let c = c.unwrap();
    assert_eq!(c.protocol_version(), "2025-06-18");
    assert!(c.negotiation().starts_with("initialize answered 2025-06-18"), "{}", c.negotiation());
    c.close();
    // Offers a protocol version we do not know.
    let (c, pid) = connect(&fake("bad_version", None), opts(Duration::from_secs(10), None));
    let e = c.err().unwrap().to_string();
    assert!(e.contains("1999-01-01") && e.contains("2025-06-18"), "names both versions: {e}");
    assert_gone(pid);
    // Command not found.
    let (tx, _rx) = bounded(1);
    let e = StdioTransport::spawn(&spec("/nonexistent/mcp-server", &[]), "x", tx).err().unwrap().to_string();
    assert!(e.contains("was not found") && e.contains("PATH"), "{e}");
    // Disallowed environment variables are refused above the transport, before any spawn
    // (extensions::runtime and the policy: tests/it/trust_policy.rs).
}

#[test]
fn garbage_floods_and_huge_lines_do_not_break_the_client() {
    for mode in ["garbage", "flood"] {
        let (c, pid) = connect(&fake(mode, None), opts(Duration::from_secs(30), None));
        let c = c.unwrap();
        for i in 0..3 {
            let r = c.call_tool("echo", Some(json!({"message": i})), &CallContext::default()).unwrap();
            assert_eq!(text(&r), format!("echo: {i}"), "{mode}");
        }
        c.close();
        assert_gone(pid);
    }
    // A line over the limit: an error for that server, not an out-of-memory.
    let (c, pid) = connect(&fake("huge_line", None), opts(Duration::from_secs(30), None));
    let c = c.unwrap();
    let e = c.call_tool("echo", Some(json!({"message": "x"})), &CallContext::default()).unwrap_err().to_string();
    assert!(e.contains("longer than"), "{e}");
    c.close();
    assert_gone(pid);
}

#[test]
fn wrong_and_duplicate_ids_are_ignored() {
    let (c, pid) = connect(&fake("wrong_ids", None), opts(Duration::from_secs(10), None));
    let c = c.unwrap();
    for i in 0..3 {
        let r = c.call_tool("echo", Some(json!({"message": i})), &CallContext::default()).unwrap();
        assert_eq!(text(&r), format!("echo: {i}"), "the right answer reached its caller");
    }
    c.close();
    assert_gone(pid);
}

#[test]
fn server_requests_are_answered() {
    let (c, pid) = connect(&fake("server_requests", None), opts(Duration::from_secs(10), None));
    let c = c.unwrap();
    let r = c.call_tool("echo", Some(json!({})), &CallContext::default()).unwrap();
    let answers: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(answers["s1"]["result"], json!({}), "ping answered");
    assert_eq!(answers["s2"]["error"]["code"], -32601, "unsupported request answered with method not found");
    // Capability-driven: the fake declares only tools, so resources/prompts are never sent.
    assert!(matches!(c.list_prompts(), Err(Error::Unsupported { .. })));
    assert!(matches!(c.read_resource("x://y"), Err(Error::Unsupported { .. })));
    c.close();
    assert_gone(pid);
}

#[test]
fn the_ladder_ends_a_child_that_ignores_sigterm() {
    let mut s = fake("ignore_term", None);
    s.ladder_wait = Some(Duration::from_millis(300));
    let (c, pid) = connect(&s, opts(Duration::from_secs(10), None));
    let c = c.unwrap();
    assert!(pid_alive(pid));
    // It ignores SIGTERM and stdin's end: only the ladder's SIGKILL ends it.
    c.close();
    assert_gone(pid);
}

#[test]
fn container_mode_runs_through_the_container_tool() {
    // No container engine here: a stand-in tool checks the argv shape `exec -i [-e K=V]… NAME
    // CMD ARGS…`, exports the -e pairs and runs the command.
    let dir = TempDir::new("container");
    let tool = dir.join("fake-docker");
    std::fs::write(
        &tool,
        "#!/bin/sh\n[ \"$1\" = exec ] && [ \"$2\" = -i ] || { echo \"bad argv: $*\" >&2; exit 9; }\nshift 2\nwhile [ \"$1\" = -e ]; do export \"$2\"; shift 2; done\n[ \"$1\" = my-box ] || { echo \"wrong container $1\" >&2; exit 9; }\nshift\nexec \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = fake("ok", None);
    s.container = Some("my-box".into());
    s.container_tool = Some(tool.display().to_string());
    s.env.push(("FAKE_TOKEN".into(), "inside".into()));
    let (c, pid) = connect(&s, opts(Duration::from_secs(20), None));
    let c = c.unwrap();
    assert_eq!(
        text(&c.call_tool("echo", Some(json!({"message": "boxed"})), &CallContext::default()).unwrap()),
        "echo: boxed"
    );
    c.close();
    assert_gone(pid);
}

#[test]
fn probe_shows_a_server_and_calls_a_tool() {
    let home = TempDir::new("probe");
    let script = manifest_dir().join("tests/fakes/bad_mcp_stdio.py");
    let out = gosling(&home).args(["probe", "--", "python3", script.to_str().unwrap(), "ok"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["serverInfo"]["name"], "bad-ok");
    assert_eq!(v["tools"].as_array().unwrap().len(), 2);
    assert!(v.get("prompts").is_none(), "only declared primitives are listed");
    let out = gosling(&home)
        .args([
            "probe",
            "--call",
            "echo",
            "--args",
            "{\"message\":\"hey\"}",
            "--",
            "python3",
            script.to_str().unwrap(),
            "ok",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["content"][0]["text"], "echo: hey");
    let out =
        gosling(&home).args(["probe", "--", "python3", script.to_str().unwrap(), "exit_at_start"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FAKE_TOKEN is not set"));
    let out = gosling(&home).args(["probe"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
