// Builtin extensions: the real binary as `gosling mcp developer|memory`, spoken to with raw
// JSON-RPC lines over its stdin/stdout.

use crate::support::{gosling, pid_alive, wait_for, TempDir};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// A running `gosling mcp NAME` with a line reader on its stdout.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Messages read while waiting for another id.
    stash: Vec<Value>,
    stderr_path: std::path::PathBuf,
}

impl Mcp {
    fn start(home: &TempDir, name: &str, wd: &Path, env: &[(&str, &str)]) -> Mcp {
        let stderr_path = home.join(&format!("mcp-{name}-{}.stderr", std::process::id()));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = gosling(home);
        cmd.args(["mcp", name])
            .current_dir(wd)
            .env("GOOSE_WORKING_DIR", wd)
            .env("RUST_LOG", "debug")
            .env_remove("GOSLING_DEVELOPER_UNRESTRICTED");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child =
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr).spawn().expect("spawn gosling mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let stdin = child.stdin.take();
        Mcp { child, stdin, lines: rx, stash: Vec::new(), stderr_path }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string());
    }

    /// The next message from the server (stash first).
    fn next(&mut self) -> Value {
        if !self.stash.is_empty() {
            return self.stash.remove(0);
        }
        let line = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|e| panic!("no line from the server ({e}); stderr:\n{}", self.stderr()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"))
    }

    /// Waits for the answer with `id`, keeping others for later.
    fn answer(&mut self, id: &Value) -> Value {
        if let Some(i) = self.stash.iter().position(|m| &m["id"] == id) {
            return self.stash.remove(i);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {id} ({e}); stderr:\n{}", self.stderr()));
            let msg: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            if &msg["id"] == id {
                return msg;
            }
            self.stash.push(msg);
        }
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(&json!(id))
    }

    fn initialize(&mut self) -> Value {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    /// tools/call → the CallToolResult (panics on a JSON-RPC error).
    fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        let r = self.request(id, "tools/call", json!({"name": tool, "arguments": args}));
        assert!(r.get("error").is_none(), "tools/call {tool} failed: {r}");
        r["result"].clone()
    }

    /// Closes stdin and waits for a clean exit.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let status = wait_for(WAIT, || self.child.try_wait().unwrap())
            .unwrap_or_else(|| panic!("server did not exit after stdin EOF; stderr:\n{}", self.stderr()));
        status
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {result}")).to_string()
}

fn is_error(result: &Value) -> bool {
    result["isError"].as_bool().unwrap_or_else(|| panic!("no isError: {result}"))
}

/// A home with a working dir `wd` inside it (so "outside the working dir" is `home`).
fn setup(tag: &str) -> (TempDir, std::path::PathBuf) {
    let home = TempDir::new(tag);
    let wd = home.join("wd");
    std::fs::create_dir_all(&wd).unwrap();
    let wd = std::fs::canonicalize(wd).unwrap();
    (home, wd)
}

#[test]
fn developer_initialize_and_list_tools() {
    let (home, wd) = setup("bi-init");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    let r = s.request(1, "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "goose", "version": "1.34.0"}}));
    assert_eq!(r["result"]["protocolVersion"], "2025-03-26", "{r}");
    assert_eq!(r["result"]["serverInfo"]["name"], "gosling-developer");
    assert!(r["result"]["capabilities"]["tools"].is_object());
    assert!(r["result"]["instructions"].as_str().unwrap().contains(wd.to_str().unwrap()));
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = s.request(2, "ping", json!({}));
    assert_eq!(r["result"], json!({}));
    let r = s.request(3, "tools/list", json!({}));
    let tools = r["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["shell", "text_editor", "list_directory"]);
    for t in tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
    }
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[0]["annotations"]["destructiveHint"], true);
    // A revision we do not know gets ours.
    let r = s.request(
        4,
        "initialize",
        json!({"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert!(s.close().success());
}

#[test]
fn protocol_errors_keep_the_server_serving() {
    let (home, wd) = setup("bi-proto");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    s.send_raw("this is not json");
    let e = s.next();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null);
    s.send_raw(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#);
    let e = s.answer(&json!(7));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("no_such_tool"));
    let e = s.request(8, "prompts/list", json!({}));
    assert_eq!(e["error"]["code"], -32601, "{e}");
    let r = s.request(9, "ping", json!({}));
    assert_eq!(r["result"], json!({}));
    // A line over the 8 MiB bound is dropped with -32700; the next line is served.
    s.send_raw(&"x".repeat((8 << 20) + 16));
    let e = s.next();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("longer than"), "{e}");
    let r = s.request(10, "ping", json!({}));
    assert_eq!(r["result"], json!({}));
    assert!(s.close().success());
}

#[test]
fn shell_runs_in_the_working_dir_with_exit_code_and_output() {
    let (home, wd) = setup("bi-shell");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    let r = s.call(1, "shell", json!({"command": "pwd; echo to-out; echo to-err >&2; exit 3"}));
    let t = text(&r);
    assert!(!is_error(&r), "{r}");
    assert!(t.contains("exit code: 3"), "{t}");
    assert!(t.contains(wd.to_str().unwrap()) && t.contains("to-out") && t.contains("to-err"), "{t}");
    let r = s.call(2, "shell", json!({"command": ""}));
    assert!(is_error(&r), "{r}");
    let r = s.call(3, "shell", json!({"command": "true", "timeout_secs": 100000}));
    assert!(is_error(&r) && text(&r).contains("timeout_secs"), "{r}");
    assert!(s.close().success());
}

#[test]
fn shell_timeout_kills_the_command() {
    let (home, wd) = setup("bi-timeout");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    // 3 s leaves a loaded machine time to get to `wait`.
    let r =
        s.call(1, "shell", json!({"command": "echo started; sleep 60 & echo $! > sleep.pid; wait", "timeout_secs": 3}));
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(t.contains("timed out after 3 s") && t.contains("started"), "{t}");
    let pid: u32 = std::fs::read_to_string(wd.join("sleep.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_for(WAIT, || (!pid_alive(pid)).then_some(())).is_some(), "sleep {pid} survived the timeout");
    assert!(s.close().success());
}

#[test]
fn shell_output_is_capped_with_a_note() {
    let (home, wd) = setup("bi-cap");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    let r = s.call(1, "shell", json!({"command": "echo FIRST; yes 0123456789 | head -c 300000; echo; echo LAST"}));
    assert!(!is_error(&r), "{r}");
    let t = text(&r);
    assert!(t.len() < 70_000, "output not capped: {} bytes", t.len());
    assert!(t.contains("FIRST") && t.trim_end().ends_with("LAST"), "head or tail lost");
    assert!(t.contains("bytes of output omitted"), "no truncation note");
    assert!(s.close().success());
}

/// `gosling mcp developer`, initialized, running the shell call (request id 1) `sleep 120` in
/// the background and waiting for it: the home, the server, and the pid of `sleep`.
fn running_sleep(tag: &str) -> (TempDir, Mcp, u32) {
    let (home, wd) = setup(tag);
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shell", "arguments": {"command": "sleep 120 & echo $! > sleep.pid; wait"}}}));
    let pid_file = wd.join("sleep.pid");
    let pid: u32 = wait_for(WAIT, || std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok()))
        .expect("the shell wrote its pid");
    (home, s, pid)
}

#[test]
fn ping_is_answered_during_a_shell_call_and_cancel_kills_it() {
    let (_home, mut s, pid) = running_sleep("bi-cancel");
    // The call is running; ping is still answered.
    let r = s.request(2, "ping", json!({}));
    assert_eq!(r["result"], json!({}));
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "operation cancelled"}}));
    assert!(wait_for(WAIT, || (!pid_alive(pid)).then_some(())).is_some(), "sleep {pid} survived the cancellation");
    // No answer to the cancelled call: the next message is the answer to this ping.
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let next = s.next();
    assert_eq!(next["id"], 3, "cancelled call was answered: {next}");
    assert!(s.close().success());
}

#[test]
fn stdin_eof_exits_and_kills_a_running_command() {
    let (_home, s, pid) = running_sleep("bi-eof");
    let status = s.close();
    assert!(status.success(), "{status}");
    assert!(wait_for(WAIT, || (!pid_alive(pid)).then_some(())).is_some(), "sleep {pid} survived the server");
}

#[test]
fn text_editor_write_view_replace_and_list() {
    let (home, wd) = setup("bi-edit");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    let r = s.call(
        1,
        "text_editor",
        json!({"command": "write", "path": "src/deep/a.txt", "file_text": "alpha\nbeta\ngamma\nbeta\n"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(std::fs::read_to_string(wd.join("src/deep/a.txt")).unwrap(), "alpha\nbeta\ngamma\nbeta\n");

    let r = s.call(2, "text_editor", json!({"command": "view", "path": "src/deep/a.txt"}));
    let t = text(&r);
    assert!(!is_error(&r) && t.contains("1  alpha") && t.contains("4  beta"), "{t}");
    let r = s.call(
        3,
        "text_editor",
        json!({"command": "view", "path": wd.join("src/deep/a.txt").to_str().unwrap(), "view_range": [2, 3]}),
    );
    let t = text(&r);
    assert!(t.contains("2  beta") && t.contains("3  gamma") && !t.contains("alpha"), "{t}");

    let r = s.call(
        4,
        "text_editor",
        json!({"command": "str_replace", "path": "src/deep/a.txt", "old_str": "beta", "new_str": "BETA"}),
    );
    assert!(is_error(&r) && text(&r).contains("occurs 2 times"), "{r}");
    let r = s.call(
        5,
        "text_editor",
        json!({"command": "str_replace", "path": "src/deep/a.txt", "old_str": "delta", "new_str": "x"}),
    );
    assert!(is_error(&r) && text(&r).contains("not found"), "{r}");
    let r = s.call(
        6,
        "text_editor",
        json!({"command": "str_replace", "path": "src/deep/a.txt", "old_str": "gamma\nbeta", "new_str": "GAMMA"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(std::fs::read_to_string(wd.join("src/deep/a.txt")).unwrap(), "alpha\nbeta\nGAMMA\n");

    let r = s.call(7, "text_editor", json!({"command": "view", "path": "src/missing.txt"}));
    assert!(is_error(&r), "{r}");
    let r = s.call(8, "text_editor", json!({"command": "frobnicate", "path": "x"}));
    assert!(is_error(&r) && text(&r).contains("view, write, str_replace, insert or undo_edit"), "{r}");

    std::fs::write(wd.join("b.bin"), [1u8, 2, 3]).unwrap();
    let r = s.call(9, "list_directory", json!({}));
    let t = text(&r);
    assert!(!is_error(&r), "{r}");
    let b = t.find("b.bin").expect("b.bin listed");
    let src = t.find("src/").expect("src/ listed");
    assert!(b < src, "not sorted: {t}");
    assert!(t.contains("b.bin\tfile     3 bytes") && t.contains("src/\tdir"), "{t}");
    let r = s.call(10, "list_directory", json!({"path": "src/deep"}));
    assert!(text(&r).contains("a.txt"), "{r}");
    let r = s.call(
        11,
        "text_editor",
        json!({"command": "insert", "path": "src/deep/a.txt", "insert_line": 1, "new_str": "INSERTED"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(std::fs::read_to_string(wd.join("src/deep/a.txt")).unwrap(), "alpha\nINSERTED\nbeta\nGAMMA\n");
    let r = s.call(12, "text_editor", json!({"command": "undo_edit", "path": "src/deep/a.txt"}));
    assert!(!is_error(&r), "{r}");
    assert_eq!(std::fs::read_to_string(wd.join("src/deep/a.txt")).unwrap(), "alpha\nbeta\nGAMMA\n");
    let r = s.call(13, "text_editor", json!({"command": "undo_edit", "path": "src/deep/a.txt"}));
    assert_eq!(std::fs::read_to_string(wd.join("src/deep/a.txt")).unwrap(), "alpha\nbeta\ngamma\nbeta\n", "{r}");
    let r = s.call(14, "text_editor", json!({"command": "undo_edit", "path": "src/deep/a.txt"}));
    assert!(!is_error(&r) && !wd.join("src/deep/a.txt").exists(), "undoing the creation removes the file: {r}");
    let r = s.call(15, "text_editor", json!({"command": "undo_edit", "path": "src/deep/a.txt"}));
    assert!(is_error(&r) && text(&r).contains("no edit"), "{r}");

    assert!(s.close().success());
}

#[test]
fn paths_outside_the_working_dir_are_refused() {
    let (home, wd) = setup("bi-escape");
    let outside = home.join("outside.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, wd.join("link-out")).unwrap();
    std::os::unix::fs::symlink(home.path(), wd.join("dir-out")).unwrap();
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    let attempts = [
        ("text_editor", json!({"command": "view", "path": "../outside.txt"})),
        ("text_editor", json!({"command": "view", "path": outside.to_str().unwrap()})),
        ("text_editor", json!({"command": "view", "path": "link-out"})),
        ("text_editor", json!({"command": "view", "path": "dir-out/outside.txt"})),
        ("text_editor", json!({"command": "write", "path": "../outside.txt", "file_text": "pwned"})),
        ("text_editor", json!({"command": "write", "path": "link-out", "file_text": "pwned"})),
        ("text_editor", json!({"command": "write", "path": "dir-out/new.txt", "file_text": "pwned"})),
        ("text_editor", json!({"command": "str_replace", "path": "link-out", "old_str": "secret", "new_str": "pwned"})),
        ("list_directory", json!({"path": ".."})),
        ("list_directory", json!({"path": "/"})),
    ];
    for (i, (tool, args)) in attempts.iter().enumerate() {
        let r = s.call(i as i64 + 1, tool, args.clone());
        assert!(is_error(&r), "{tool} {args} was allowed: {r}");
        assert!(text(&r).contains("outside the working directory"), "{r}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert!(!home.join("new.txt").exists());
    assert!(s.close().success());

    // The operator can lift the confinement.
    let mut s = Mcp::start(&home, "developer", &wd, &[("GOSLING_DEVELOPER_UNRESTRICTED", "1")]);
    s.initialize();
    let r = s.call(1, "text_editor", json!({"command": "view", "path": "../outside.txt"}));
    assert!(!is_error(&r) && text(&r).contains("secret"), "{r}");
    assert!(s.close().success());
}

#[test]
fn memory_round_trip_persists_across_processes() {
    let (home, wd) = setup("bi-mem");
    let mut s = Mcp::start(&home, "memory", &wd, &[]);
    let init = s.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "gosling-memory");
    let r = s.request(1, "tools/list", json!({}));
    let names: Vec<&str> =
        r["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["remember_memory", "retrieve_memories", "remove_memory_category", "remove_specific_memory"]);
    let r = s.call(
        2,
        "remember_memory",
        json!({"category": "preferences", "data": "uses tabs", "tags": ["style"], "is_global": true}),
    );
    assert!(!is_error(&r), "{r}");
    let r = s.call(3, "remember_memory", json!({"category": "preferences", "data": "likes short answers"}));
    assert!(!is_error(&r), "{r}");
    let r = s.call(4, "remember_memory", json!({"category": "project", "data": "build with make"}));
    assert!(!is_error(&r), "{r}");
    let r = s.call(5, "remember_memory", json!({"category": "../escape", "data": "x"}));
    assert!(is_error(&r) && text(&r).contains("not allowed"), "{r}");
    assert!(s.close().success());
    assert!(home.join("state/memory/global.json").exists());

    let mut s = Mcp::start(&home, "memory", &wd, &[]);
    let init = s.initialize();
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("uses tabs") && instructions.contains("build with make"),
        "saved notes are in the instructions: {instructions}"
    );
    let r = s.call(1, "retrieve_memories", json!({"category": "preferences"}));
    let t = text(&r);
    assert!(t.contains("uses tabs [tags: style]") && t.contains("likes short answers"), "{t}");
    let r = s.call(2, "retrieve_memories", json!({"category": "*"}));
    assert!(text(&r).contains("build with make"), "{r}");
    let r = s.call(3, "remove_specific_memory", json!({"category": "preferences", "memory_content": "uses tabs"}));
    assert!(!is_error(&r), "{r}");
    let r = s.call(4, "remove_specific_memory", json!({"category": "preferences", "memory_content": "never stored"}));
    assert!(is_error(&r), "{r}");
    let r = s.call(5, "retrieve_memories", json!({"category": "preferences"}));
    let t = text(&r);
    assert!(!t.contains("uses tabs") && t.contains("likes short answers"), "{t}");
    let r = s.call(6, "remove_memory_category", json!({"category": "project"}));
    assert!(!is_error(&r), "{r}");
    let r = s.call(7, "retrieve_memories", json!({"category": "project"}));
    assert!(text(&r).contains("no memories"), "{r}");
    assert!(s.close().success());

    // Global notes are seen from another working dir; local ones are not.
    let other = home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut s = Mcp::start(&home, "memory", &other, &[]);
    s.initialize();
    let r = s.call(1, "remember_memory", json!({"category": "preferences", "data": "global again", "is_global": true}));
    assert!(!is_error(&r), "{r}");
    let t = text(&s.call(2, "retrieve_memories", json!({"category": "*"})));
    assert!(t.contains("global again") && !t.contains("likes short answers"), "{t}");
    assert!(s.close().success());
}

#[test]
fn unknown_builtin_is_a_clear_error() {
    let home = TempDir::new("bi-unknown");
    let out = gosling(&home).args(["mcp", "computercontroller"]).stdin(Stdio::null()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown builtin extension computercontroller; known builtins: developer, memory"), "{err}");
    assert!(out.stdout.is_empty(), "stdout must carry only protocol");
    let out = gosling(&home).arg("mcp").stdin(Stdio::null()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("developer, memory"));
}

#[test]
fn sigterm_exits_and_kills_a_running_command() {
    let (_home, mut s, pid) = running_sleep("bi-term");
    let status = std::process::Command::new("kill").arg("-TERM").arg(s.child.id().to_string()).status().unwrap();
    assert!(status.success());
    let exit = wait_for(WAIT, || s.child.try_wait().unwrap()).expect("server exits on SIGTERM");
    assert!(exit.success(), "{exit}");
    assert!(wait_for(WAIT, || (!pid_alive(pid)).then_some(())).is_some(), "sleep {pid} survived SIGTERM of the server");
}

/// The official MCP Python SDK client (a real peer) drives `gosling mcp developer`.
#[test]
fn python_sdk_client_uses_the_developer_builtin() {
    let peers = crate::require_peers!();
    let (home, wd) = setup("bi-sdk");
    let script = crate::support::manifest_dir().join("tests/fakes/sdk_client.py");
    let args = json!({"command": "write", "path": "from-sdk/note.txt", "file_text": "written by the SDK\n"});
    let out = std::process::Command::new(peers.python())
        .arg(&script)
        .arg(crate::support::bin())
        .args(["developer", "text_editor", &args.to_string()])
        .current_dir(&wd)
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "SDK client failed: {}\nstdout: {stdout}", String::from_utf8_lossy(&out.stderr));
    let v: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["serverName"], "gosling-developer");
    assert_eq!(v["tools"], json!(["shell", "text_editor", "list_directory"]));
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert_eq!(std::fs::read_to_string(wd.join("from-sdk/note.txt")).unwrap(), "written by the SDK\n");
}

#[test]
fn concurrent_calls_are_each_answered_to_their_id() {
    let (home, wd) = setup("bi-conc");
    let mut s = Mcp::start(&home, "developer", &wd, &[]);
    s.initialize();
    for i in 1..=8 {
        s.send(json!({"jsonrpc": "2.0", "id": format!("call-{i}"), "method": "tools/call", "params": {"name": "shell", "arguments": {"command": format!("sleep 0.$((9 - {i})); echo answer-{i}")}}}));
    }
    for i in 1..=8 {
        let r = s.answer(&json!(format!("call-{i}")));
        let t = text(&r["result"]);
        assert!(t.contains(&format!("answer-{i}")) && t.matches("answer-").count() == 1, "call-{i} got {t}");
    }
    assert!(s.close().success());
}
