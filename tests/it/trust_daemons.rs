//! Issue 27 finding 12: an extension's descendants that daemonize — double fork, `setsid`, every
//! descriptor closed and an empty environment, so neither its process group, nor its
//! descendants seen before the stop, nor its run marker find them — end with the extension:
//! on `remove_extension`, on `/agent/stop`, when the server exits, and when the server is
//! killed with SIGKILL. Each extension runs under a reaper of its own (`sys::spawn_contained`)
//! that is the subreaper of its subtree. Fake: tests/fakes/daemon_mcp_stdio.py.

use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

fn fake(mode: &str, dir: &Path) -> Value {
    let script = manifest_dir().join("tests/fakes/daemon_mcp_stdio.py");
    json!({"type": "stdio", "name": format!("d_{mode}"), "description": "", "cmd": "python3",
           "args": [script.display().to_string(), mode, dir.display().to_string()], "timeout": 60,
           // The daemons write their pids there (a confined extension writes only what it is granted).
           "sandbox": {"paths": [dir.display().to_string()]}})
}

fn session(s: &Server, work: &TempDir) -> String {
    start_session(s, work.path(), None)
}

fn add(s: &Server, id: &str, mode: &str, dir: &Path) {
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": fake(mode, dir)}));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn daemonize(s: &Server, id: &str, mode: &str) {
    let r =
        s.post("/agent/call_tool", json!({"session_id": id, "name": format!("d_{mode}__daemonize"), "arguments": {}}));
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The pids the daemons of `mode` wrote, once `n` of them did.
fn daemons(dir: &Path, mode: &str, n: usize) -> Vec<u32> {
    wait_for(Duration::from_secs(20), || {
        let pids: Vec<u32> = (1..=n)
            .filter_map(|i| std::fs::read_to_string(dir.join(format!("{mode}-{i}.pid"))).ok())
            .filter_map(|t| t.trim().parse().ok())
            .collect();
        (pids.len() == n).then_some(pids)
    })
    .unwrap_or_else(|| panic!("{n} daemon(s) of mode {mode} wrote their pid"))
}

/// A daemon really escaped the usual ways: its own session, and nothing of gosling's
/// environment (no run marker).
fn assert_escaped(pid: u32, server: u32) {
    assert!(pid_alive(pid), "daemon {pid} runs");
    // The daemon writes its pid just before its exec with the empty environment: wait for the exec.
    let read = || std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let cleared = wait_for(Duration::from_secs(10), || read().is_empty().then_some(()));
    assert!(cleared.is_some(), "daemon {pid} cleared its environment: {}", String::from_utf8_lossy(&read()));
    let sid = |p: u32| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(3).map(str::to_string)
    };
    assert_ne!(sid(pid), sid(server), "daemon {pid} is in a session of its own");
}

/// How many of `pids` still run after up to 15 s.
fn still_running(pids: &[u32]) -> Vec<u32> {
    let _ = wait_for(Duration::from_secs(15), || pids.iter().all(|&p| !pid_alive(p)).then_some(()));
    pids.iter().copied().filter(|&p| pid_alive(p)).collect()
}

#[test]
fn daemons_that_clear_their_environment_end_with_their_extension() {
    let s = Server::start();
    let work = TempDir::new("td-remove");
    let dir = TempDir::new("td-pids");
    let id = session(&s, &work);

    // remove_extension: a daemon started at start, one started mid-session by a tool call,
    // and one started when stdin closed (after the stop began).
    for mode in ["start", "call", "eof"] {
        add(&s, &id, mode, dir.path());
    }
    daemonize(&s, &id, "call");
    daemonize(&s, &id, "call");
    let mut before = daemons(dir.path(), "start", 1);
    before.extend(daemons(dir.path(), "call", 2));
    for &p in &before {
        assert_escaped(p, s.pid());
    }
    for mode in ["start", "call", "eof"] {
        let r = s.post("/agent/remove_extension", json!({"session_id": id, "name": format!("d_{mode}")}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let mut all = before.clone();
    all.extend(daemons(dir.path(), "eof", 1));
    assert_eq!(still_running(&all), Vec::<u32>::new(), "daemons left after remove_extension: {}", s.stderr());

    // /agent/stop: one started mid-session, one started in the SIGTERM handler.
    let dir = TempDir::new("td-stop");
    for mode in ["call", "term"] {
        add(&s, &id, mode, dir.path());
    }
    daemonize(&s, &id, "call");
    let call = daemons(dir.path(), "call", 1);
    assert_escaped(call[0], s.pid());
    assert_eq!(s.post("/agent/stop", json!({"session_id": id})).status, 200);
    let mut all = call.clone();
    all.extend(daemons(dir.path(), "term", 1));
    assert_eq!(still_running(&all), Vec::<u32>::new(), "daemons left after /agent/stop: {}", s.stderr());
    // Nothing of the extensions is left among the server's children either.
    let left = wait_for(Duration::from_secs(10), || child_pids(s.pid()).is_empty().then_some(()));
    assert!(left.is_some(), "the server still has children {:?}", child_pids(s.pid()));
}

#[test]
fn daemons_end_when_the_server_exits_or_is_killed() {
    for kill in [false, true] {
        let s = Server::start();
        let work = TempDir::new("td-exit");
        let dir = TempDir::new("td-exit-pids");
        let id = session(&s, &work);
        add(&s, &id, "call", dir.path());
        daemonize(&s, &id, "call");
        let pids = daemons(dir.path(), "call", 1);
        assert_escaped(pids[0], s.pid());
        if kill {
            drop(s.kill()); // SIGKILL: no shutdown ladder runs in gosling at all
        } else {
            drop(s); // SIGTERM: the shutdown ladder
        }
        let how = if kill { "SIGKILL" } else { "SIGTERM" };
        assert_eq!(still_running(&pids), Vec::<u32>::new(), "daemons left after the server's {how}");
    }
}
