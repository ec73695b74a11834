//! Issue 13 §4: children never see the server's secrets. The server is non-dumpable (a child
//! cannot read /proc/<gosling>/environ), children start from an allowlisted environment plus
//! their own `envs`, and container mode keeps values off the engine's command line.

use crate::support::*;
use serde_json::{json, Value};

/// Secrets in the server's own environment, by name and a value no child may see.
const LEAKS: &[(&str, &str)] = &[
    ("AWS_SECRET_ACCESS_KEY", "aws-leak-6a1f"),
    ("GITHUB_PAT", "ghp-leak-77c2"),
    ("DATABASE_URL", "postgres://u:db-leak-93d0@h/db"),
    ("OPENAI_API_KEY", "sk-leak-5b8e"),
];

fn fake() -> String {
    manifest_dir().join("tests/fakes/trust_mcp_stdio.py").display().to_string()
}

fn leaky_server(extra: &[(&str, &str)]) -> Server {
    let mut env: Vec<(String, String)> = LEAKS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Server::start_with(ServerOpts { env, ..Default::default() })
}

/// Root reads every process's memory whatever its dumpability, so when the tests run as root
/// the server runs as `nobody` (65534) and the home and working dir are made theirs.
fn unprivileged_leaky_server(work: &TempDir) -> Server {
    let home = TempDir::new("tc-home");
    let run_as = (gosling::sys::euid() == 0).then_some(65534u32);
    if let Some(id) = run_as {
        for d in [home.path(), work.path()] {
            std::os::unix::fs::chown(d, Some(id), Some(id)).unwrap();
        }
    }
    let env = LEAKS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Server::start_in(home, ServerOpts { env, run_as, ..Default::default() })
}

fn start(s: &Server, work: &TempDir, exts: Vec<Value>) -> String {
    let id = start_session(s, work.path(), Some(exts));
    let res = resume(s, &id);
    for r in res["extension_results"].as_array().unwrap() {
        assert_eq!(r["success"], true, "{res}");
    }
    id
}

fn call_text(s: &Server, id: &str, tool: &str, args: Value) -> String {
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": tool, "arguments": args}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

fn assert_no_secret(out: &str, what: &str) {
    for (name, value) in LEAKS.iter().chain([("GOOSE_SERVER__SECRET_KEY", SECRET)].iter()) {
        assert!(!out.contains(value), "{what} shows {name}'s value:\n{out}");
    }
}

#[test]
fn the_developer_shell_cannot_read_the_server_environment() {
    let work = TempDir::new("tc-work");
    let s = unprivileged_leaky_server(&work);
    let id = start(&s, &work, vec![json!({"type":"builtin","name":"developer","description":"","timeout":30})]);
    let pid = s.pid();
    // The shell tries the server's environ and memory map, and prints its own environment.
    let out = call_text(
        &s,
        &id,
        "developer__shell",
        json!({"command": format!("cat /proc/{pid}/environ; echo; head -c 200 /proc/{pid}/maps; echo; env; echo HOME=$HOME")}),
    );
    assert_no_secret(&out, "the developer shell");
    assert!(out.contains(&format!("/proc/{pid}/environ")) && out.contains("Permission denied"), "{out}");
    assert!(out.contains("PATH=") && out.contains("HOME="), "allowlisted variables still arrive:\n{out}");
    // The memory builtin (a child too) still works with the small environment.
    let add = s.post(
        "/agent/add_extension",
        json!({"session_id": id, "config": {"type":"builtin","name":"memory","description":""}}),
    );
    assert_eq!(add.status, 200, "{}", add.text());
    let tools = s.get(&format!("/agent/tools?session_id={id}")).json();
    assert!(tools.as_array().unwrap().iter().any(|t| t["name"].as_str().unwrap().starts_with("memory__")), "{tools}");
}

#[test]
fn a_stdio_extension_gets_its_own_envs_and_no_server_secret() {
    let s = leaky_server(&[("LANG", "C.UTF-8")]);
    let work = TempDir::new("tc-work2");
    let id = start(
        &s,
        &work,
        vec![
            json!({"type":"builtin","name":"developer","description":"","timeout":30}),
            json!({"type":"stdio","name":"fake","description":"","cmd":"python3","args":[fake(), "env"],"envs":{"MY_OWN_SETTING":"arrives-1234"},"timeout":30}),
        ],
    );
    let pid = s.pid();
    let out = call_text(&s, &id, "developer__shell", json!({"command": "env"}));
    assert_no_secret(&out, "the developer shell's environment");
    assert!(out.contains("PATH=") && out.contains("LANG=C.UTF-8"), "allowlisted variables still arrive:\n{out}");

    // A stdio extension: its own envs arrive, the server's secrets do not.
    let out = call_text(&s, &id, "fake__env", json!({}));
    assert_no_secret(&out, "the stdio extension's environment");
    assert!(out.contains("MY_OWN_SETTING=arrives-1234"), "{out}");
    assert!(out.contains("PATH="), "{out}");
    // Reading the server's environ is refused too (as root everything is readable; the
    // unprivileged case is the test above).
    if gosling::sys::euid() != 0 {
        let out = call_text(&s, &id, "fake__read", json!({"path": format!("/proc/{pid}/environ")}));
        assert_no_secret(&out, "the stdio extension reading the server's environ");
        assert!(out.contains("error:"), "{out}");
    }
}

#[test]
fn container_mode_keeps_secret_values_off_the_command_line() {
    let home = TempDir::new("tc-ctr");
    let log = home.join("container-argv.jsonl");
    let tool = manifest_dir().join("tests/fakes/fake_container_tool.py");
    let s = leaky_server(&[("GOSLING_CONTAINER", "box"), ("GOSLING_CONTAINER_TOOL", tool.to_str().unwrap())]);
    let work = TempDir::new("tc-ctr-work");
    let id = start(
        &s,
        &work,
        vec![json!({"type":"stdio","name":"boxed","description":"","cmd":"python3","args":[fake(), "env"],
            "envs":{"FAKE_CONTAINER_LOG": log.display().to_string(), "SERVICE_TOKEN":"tok-in-box-41", "PLAIN":"plain-value"},"timeout":30})],
    );
    let out = call_text(&s, &id, "boxed__env", json!({}));
    assert!(out.contains("SERVICE_TOKEN=tok-in-box-41") && out.contains("PLAIN=plain-value"), "{out}");
    assert_no_secret(&out, "the containerised extension");
    let argv = std::fs::read_to_string(&log).unwrap();
    for value in ["tok-in-box-41", "plain-value"] {
        assert!(!argv.contains(value), "a value is on the engine's command line: {argv}");
    }
    let first: Vec<String> = serde_json::from_str(argv.lines().next().unwrap()).unwrap();
    for name in ["SERVICE_TOKEN", "PLAIN"] {
        assert!(first.windows(2).any(|w| w[0] == "-e" && w[1] == name), "-e {name} in {first:?}");
    }
    assert_no_secret(&argv, "the engine's command line");
}

/// Issue 26: every server mode is hardened the same way (`core::harden`). Another process of
/// the same user cannot read `/proc/<pid>/environ` of `agent`, `serve` or `acp`, while it can
/// read that of an ordinary process of that user started with the same environment (the
/// control, so the refusal is the hardening's). As root the servers and the reader run as
/// `nobody`, from a copy of the binary in a world-readable dir (the clone may live where
/// `nobody` cannot enter).
#[test]
fn no_server_mode_nor_command_lets_a_same_user_process_read_its_environment() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let run_as = (gosling::sys::euid() == 0).then_some(65534u32);
    let exe = shared_bin();
    let as_user = |cmd: &mut Command| {
        if let Some(id) = run_as {
            cmd.uid(id).gid(id);
        }
    };
    let reads_environ = |pid: u32| -> (bool, String) {
        let mut cat = Command::new("cat");
        cat.arg(format!("/proc/{pid}/environ"));
        as_user(&mut cat);
        let out = cat.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let spawn = |args: &[&str], home: &TempDir| {
        if let Some(id) = run_as {
            std::os::unix::fs::chown(home.path(), Some(id), Some(id)).unwrap();
        }
        let mut cmd = Command::new(&exe);
        cmd.args(args)
            .current_dir(home.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .env("GOSLING_CONFIG_DIR", home.join("config"))
            .env("GOSLING_STATE_DIR", home.join("state"))
            .env("GOOSE_SERVER__SECRET_KEY", SECRET)
            .env("GOOSE_TLS", "false")
            .envs(LEAKS.iter().copied());
        as_user(&mut cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the copied gosling")
    };

    // The control: an ordinary process of the same user with the same environment is readable.
    let home = TempDir::new("tc-modes-control");
    let mut control = Command::new("sleep");
    control.arg("30").current_dir(home.path()).env_clear().envs(LEAKS.iter().copied());
    as_user(&mut control);
    let mut control = control.spawn().unwrap();
    let (ok, text) = reads_environ(control.id());
    let _ = control.kill();
    let _ = control.wait();
    assert!(ok && text.contains(LEAKS[0].1), "the reader can read an ordinary process's environ: {text:?}");

    // The CLI commands hold tokens and typed secrets: hardened the same way (the probe's child
    // starting proves the probe got that far).
    let modes: &[(&str, &[&str])] = &[
        ("agent", &["agent", "--port", "0"]),
        ("serve", &["serve", "--port", "0"]),
        ("acp", &["acp"]),
        ("probe", &["probe", "--", "/bin/sh", "-c", "touch started; exec sleep 30"]),
    ];
    for (name, args) in modes {
        let home = TempDir::new(&format!("tc-modes-{name}"));
        let mut child = spawn(args, &home);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        if *name == "acp" {
            // Hardening happens before stdin is read: an answer to initialize proves it ran.
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":1}}}}"#)
                .unwrap();
            out.read_line(&mut line).unwrap();
            assert!(line.contains("\"protocolVersion\":1"), "{name}: {line}");
            let (ok, text) = reads_environ(child.id());
            drop(stdin);
            assert!(!ok && !text.contains(LEAKS[0].1), "{name}: same-user read of environ succeeded: {text:?}");
        } else if *name == "probe" {
            let started = wait_for(std::time::Duration::from_secs(30), || home.join("started").exists().then_some(()));
            assert!(started.is_some(), "the probe started its child");
            let (ok, text) = reads_environ(child.id());
            assert!(!ok && !text.contains(LEAKS[0].1), "{name}: same-user read of environ succeeded: {text:?}");
        } else {
            while !line.contains("listening on") {
                line.clear();
                assert!(out.read_line(&mut line).unwrap() > 0, "{name} exited before listening");
            }
            let (ok, text) = reads_environ(child.id());
            assert!(!ok && !text.contains(LEAKS[0].1), "{name}: same-user read of environ succeeded: {text:?}");
        }
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        if wait_for(std::time::Duration::from_secs(10), || child.try_wait().ok().flatten()).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
