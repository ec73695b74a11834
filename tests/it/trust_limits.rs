//! Issue 13 §5: no extension can exhaust memory or leave processes behind. Listings (over all
//! pages), tool results, resource reads and stderr are bounded in total, with an error naming
//! the extension and the limit; descendants that leave the process group (`setsid`) are ended
//! when their extension stops and when the server exits.

use crate::support::*;
use serde_json::{json, Value};
use std::time::Duration;

fn fake(mode: &str, arg: Option<&str>) -> Value {
    let script = manifest_dir().join("tests/fakes/trust_mcp_stdio.py");
    let mut args = vec![script.display().to_string(), mode.to_string()];
    args.extend(arg.map(str::to_string));
    json!({"type":"stdio","name":format!("f_{mode}"),"description":"","cmd":"python3","args":args,"timeout":60})
}

fn session(s: &Server, work: &TempDir) -> String {
    start_session(s, work.path(), None)
}

fn add(s: &Server, id: &str, config: Value) -> (u16, String) {
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": config}));
    (r.status, r.text())
}

fn still_serving(s: &Server, id: &str) {
    assert_eq!(s.get("/status").status, 200);
    let (st, body) = add(s, id, fake("env", None));
    assert_eq!(st, 200, "{body}");
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "f_env__env", "arguments": {}}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("PATH="), "{}", r.text());
    s.post("/agent/remove_extension", json!({"session_id": id, "name": "f_env"}));
}

#[test]
fn oversized_listings_results_resources_and_stderr_are_refused_and_the_server_serves_on() {
    let s = Server::start();
    let work = TempDir::new("tl-work");
    let id = session(&s, &work);

    // tools/list: 100 pages of 1 MiB (each page fine, the total not) and of 15 MiB.
    for mib in ["1", "15"] {
        let (st, body) = add(&s, &id, fake("pages", Some(mib)));
        assert_ne!(st, 200, "{body}");
        assert!(
            body.contains("f_pages") && body.contains("8 MiB") && body.contains("tools/list"),
            "{mib} MiB pages: {body}"
        );
        still_serving(&s, &id);
    }

    // A 12 MiB tool result and a 12 MiB resource.
    let (st, body) = add(&s, &id, fake("huge_result", None));
    assert_eq!(st, 200, "{body}");
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "f_huge_result__env", "arguments": {}}));
    let text = r.text();
    assert!(text.contains("f_huge_result") && text.contains("8 MiB") && text.contains("result of tool env"), "{text}");
    let r =
        s.post("/agent/read_resource", json!({"session_id": id, "extension_name": "f_huge_result", "uri": "big://r"}));
    assert!(r.text().contains("8 MiB") && r.text().contains("resource big://r"), "{}", r.text());
    still_serving(&s, &id);

    // 50 MiB of stderr: drained, only a tail kept; the extension works.
    let (st, body) = add(&s, &id, fake("stderr", None));
    assert_eq!(st, 200, "{body}");
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": "f_stderr__env", "arguments": {}}));
    assert_eq!(r.status, 200, "{}", r.text());
    still_serving(&s, &id);
    let rss = rss_kib(s.pid());
    assert!(rss < 128 << 10, "the server holds {rss} KiB after the attacks");
}

fn wait_pid_file(path: &std::path::Path) -> u32 {
    wait_for(Duration::from_secs(20), || std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()))
        .expect("the grandchild wrote its pid")
}

fn assert_gone(pid: u32, when: &str) {
    let gone = wait_for(Duration::from_secs(15), || (!pid_alive(pid)).then_some(()));
    assert!(gone.is_some(), "the setsid grandchild {pid} is still running {when}");
}

fn session_id_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn a_setsid_grandchild_ends_with_its_extension_and_with_the_server() {
    let s = Server::start();
    let work = TempDir::new("tl-setsid");
    let id = session(&s, &work);

    // remove_extension
    let pidfile = work.join("gc1.pid");
    let (st, body) = add(&s, &id, fake("setsid", Some(pidfile.to_str().unwrap())));
    assert_eq!(st, 200, "{body}");
    let gc = wait_pid_file(&pidfile);
    assert!(pid_alive(gc));
    assert_ne!(session_id_of(gc), session_id_of(s.pid()), "the grandchild is in a session of its own (left the group)");
    let rm = s.post("/agent/remove_extension", json!({"session_id": id, "name": "f_setsid"}));
    assert_eq!(rm.status, 200, "{}", rm.text());
    assert_gone(gc, "after remove_extension");

    // /agent/stop
    let pidfile = work.join("gc2.pid");
    let (st, body) = add(&s, &id, fake("setsid", Some(pidfile.to_str().unwrap())));
    assert_eq!(st, 200, "{body}");
    let gc = wait_pid_file(&pidfile);
    assert_eq!(s.post("/agent/stop", json!({"session_id": id})).status, 200);
    assert_gone(gc, "after /agent/stop");

    // the server exits (SIGTERM)
    let id = session(&s, &work);
    let pidfile = work.join("gc3.pid");
    let (st, body) = add(&s, &id, fake("setsid", Some(pidfile.to_str().unwrap())));
    assert_eq!(st, 200, "{body}");
    let gc = wait_pid_file(&pidfile);
    drop(s);
    assert_gone(gc, "after the server exited");
}

/// tests/fakes/trust_mcp_http.py in `mode`; killed on drop.
struct HttpFake(std::process::Child, String);

impl Drop for HttpFake {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_fake(mode: &str) -> HttpFake {
    use std::io::BufRead;
    let script = manifest_dir().join("tests/fakes/trust_mcp_http.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg(mode)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    HttpFake(child, format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn streamable_http_listings_bodies_and_sse_events_are_bounded() {
    let s = Server::start();
    let work = TempDir::new("tl-http");
    let id = session(&s, &work);
    let pages = http_fake("pages");
    let (st, body) =
        add(&s, &id, json!({"type":"streamable_http","name":"h_pages","description":"","uri":pages.1,"timeout":60}));
    assert_ne!(st, 200, "{body}");
    assert!(body.contains("h_pages") && body.contains("8 MiB") && body.contains("tools/list"), "{body}");

    let ok = http_fake("ok");
    let (st, body) =
        add(&s, &id, json!({"type":"streamable_http","name":"h","description":"","uri":ok.1,"timeout":60}));
    assert_eq!(st, 200, "{body}");
    let call = |tool: &str| {
        s.post("/agent/call_tool", json!({"session_id": id, "name": format!("h__{tool}"), "arguments": {}})).text()
    };
    let big = call("big_json");
    assert!(big.contains("`h`") && big.contains("exceeded 16777216 bytes"), "{big}");
    let flood = call("sse_flood");
    assert!(flood.contains("extension `h` sent an event over 16 MiB"), "{flood}");
    assert!(call("env").contains("fine"), "the extension still answers");
    still_serving(&s, &id);
    assert!(rss_kib(s.pid()) < 128 << 10);
    assert!(s.stderr().contains("a line or event exceeded 16777216 bytes"), "the SSE refusal is logged");
}
