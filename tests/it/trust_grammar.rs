//! Issue 27 findings 1–3 through the binary: command lines outside a launcher's or
//! interpreter's grammar, nested launchers and container escapes are refused on every path —
//! `POST /config/extensions`, `/agent/add_extension`, ACP `session/new` and `gosling install` —
//! with the rule named, and the payload never runs: the marker file it would create is never
//! created, while a control run of the same command line outside gosling creates it.

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Case {
    cmd: String,
    args: Vec<String>,
    rule: &'static str,
    /// The file the payload creates when it runs.
    marker: Option<PathBuf>,
}

fn case(cmd: &str, args: &[&str], rule: &'static str, marker: Option<&Path>) -> Case {
    Case {
        cmd: cmd.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        rule,
        marker: marker.map(Path::to_path_buf),
    }
}

/// Every interpreter form of finding 2, each creating `d/m-<tag>` if it ever runs.
fn interpreter_cases(d: &Path) -> Vec<Case> {
    std::fs::write(d.join("a.py"), "x = 1\n").unwrap();
    std::fs::write(d.join("x.pl"), "1;\n").unwrap();
    std::fs::write(d.join("x.js"), "\n").unwrap();
    std::fs::write(d.join("t.js"), "\n").unwrap();
    let versioned = d.join("perl5.36-x86_64-linux-gnu");
    if !versioned.exists() {
        std::os::unix::fs::symlink("/usr/bin/perl", &versioned).unwrap();
    }
    let m = |tag: &str| d.join(format!("m-{tag}"));
    let js = |tag: &str| format!("require('fs').writeFileSync('{}','')", m(tag).display());
    let esm =
        |tag: &str| format!("data:text/javascript,import('fs').then(f=>f.writeFileSync('{}',''))", m(tag).display());
    let py = |tag: &str| format!("open('{}','w')", m(tag).display());
    let pl = |tag: &str| format!("open(F,'>{}')", m(tag).display());
    vec![
        case("node", &["--title", "x.js", "-e", &js("title")], "node grammar rule", Some(&m("title"))),
        case(
            "node",
            &[&format!("--experimental_loader={}", esm("loader")), "x.js"],
            "node grammar rule",
            Some(&m("loader")),
        ),
        case(
            "node",
            &["--test", &format!("--test-reporter={}", esm("rep")), "t.js"],
            "node grammar rule",
            Some(&m("rep")),
        ),
        case("node", &["--import", &esm("import"), "x.js"], "node grammar rule", Some(&m("import"))),
        case("node", &["--inspect_brk", "x.js"], "node grammar rule", None),
        case("python3", &["-X", "a.py", "-c", &py("py")], "python grammar rule", Some(&m("py"))),
        case("perl", &["-0e", &pl("perl0")], "known-programs rule", Some(&m("perl0"))),
        case("perl", &["-I", "x.pl", "-e", &pl("perlI")], "known-programs rule", Some(&m("perlI"))),
        case(versioned.to_str().unwrap(), &["-e", &pl("perlv")], "known-programs rule", Some(&m("perlv"))),
        case(
            "tar",
            &[
                "-cf",
                "/dev/null",
                "--checkpoint=1",
                &format!("--checkpoint-action=exec=touch {}", m("tar").display()),
                "x.js",
            ],
            "known-programs rule",
            Some(&m("tar")),
        ),
        case(
            "git",
            &["-c", &format!("alias.x=!touch {}", m("git").display()), "x"],
            "known-programs rule",
            Some(&m("git")),
        ),
    ]
}

fn stdio(c: &Case) -> Value {
    json!({"type":"stdio","name":"T","description":"","cmd":c.cmd,"args":c.args,"timeout":10})
}

fn link(c: &Case) -> String {
    let mut l = format!("goose://extension?name=T&cmd={}", pct(&c.cmd));
    for a in &c.args {
        l.push_str(&format!("&arg={}", pct(a)));
    }
    l
}

/// `gosling acp`: initialize, then `session/new` with one editor MCP server; the answer.
pub(crate) fn acp_session_new(home: &TempDir, cwd: &Path, server: Value) -> Value {
    acp_session_new_with(home, cwd, server, "")
}

/// `acp_session_new` with `GOSLING_ALLOWED_COMMANDS=allowed` (when not empty).
pub(crate) fn acp_session_new_with(home: &TempDir, cwd: &Path, server: Value, allowed: &str) -> Value {
    let mut cmd = gosling(home);
    if !allowed.is_empty() {
        cmd.env("GOSLING_ALLOWED_COMMANDS", allowed);
    }
    let mut child = cmd
        .arg("acp")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let msgs = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":cwd,"mcpServers":[server]}}),
    ];
    for m in &msgs {
        writeln!(stdin, "{m}").unwrap();
    }
    let answer = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "gosling acp closed stdout");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 && v.get("method").is_none() {
            break v;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    answer
}

/// Runs `c` directly (outside gosling) in `dir`: the payload works, so the test means something.
fn control(c: &Case, dir: &Path) {
    let Some(marker) = &c.marker else { return };
    let out = Command::new(&c.cmd).args(&c.args).current_dir(dir).stdin(Stdio::null()).output().unwrap();
    assert!(marker.exists(), "control: {} {:?} did not create its marker: {out:?}", c.cmd, c.args);
    std::fs::remove_file(marker).unwrap();
}

#[test]
fn interpreter_forms_are_refused_on_every_path_and_never_run() {
    let home = TempDir::new("tgram");
    let work = TempDir::new("tgram-work");
    let cases = interpreter_cases(work.path());
    for c in &cases {
        control(c, work.path());
    }
    let s = Server::start();
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    for c in &cases {
        let what = format!("{} {:?}", c.cmd, c.args);
        let r = s.post("/config/extensions", json!({"name":"T","enabled":true,"config":stdio(c)}));
        let m = r.json()["message"].as_str().unwrap_or("").to_string();
        assert!(r.status == 403 && m.contains(c.rule), "config route {what}: {} {m}", r.status);
        let r = s.post("/agent/add_extension", json!({"session_id": id, "config": stdio(c)}));
        assert_eq!((r.status, r.json()["message"].as_str().unwrap_or("")), (403, m.as_str()), "add_extension {what}");
        let server = json!({"name":"T","command":c.cmd,"args":c.args,"env":[]});
        let a = acp_session_new(&home, work.path(), server);
        let e = a["error"]["message"].as_str().unwrap_or("");
        assert!(e.contains(c.rule), "acp session/new {what}: {a}");
        // A link, with the program added to the allowed commands so that the grammar decides.
        let out = gosling(&home)
            .env("GOSLING_ALLOWED_COMMANDS", &c.cmd)
            .args(["install", "--yes", &link(c)])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(1) && err.contains(c.rule), "install {what}: {err}");
    }
    for c in &cases {
        if let Some(m) = &c.marker {
            assert!(!m.exists(), "{} {:?} ran: {} exists", c.cmd, c.args, m.display());
        }
    }
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]), "nothing refused was saved");
    assert!(
        !home.join("config/config.json").exists()
            || !std::fs::read_to_string(home.join("config/config.json")).unwrap().contains("\"T\"")
    );
}

/// Launchers running launchers or interpreters (finding 1): refused by name on links and the API.
#[test]
fn nested_launchers_are_refused() {
    let home = TempDir::new("tgram-nest");
    let s = Server::start();
    let nested: &[(&str, &[&str], &str)] = &[
        ("npx", &["-y", "zx", "http://127.0.0.1:1/x.mjs"], "zx"),
        ("npx", &["-y", "pnpx", "evil"], "pnpx"),
        ("npx", &["-y", "bunx", "evil"], "bunx"),
        ("npx", &["-y", "yarnpkg", "dlx", "evil"], "yarnpkg"),
        ("npx", &["-y", "corepack", "pnpm", "dlx", "evil"], "corepack"),
        ("npx", &["-y", "tsx", "http://127.0.0.1:1/x.ts"], "tsx"),
        ("npx", &["-p", "zx", "evil-bin"], "zx"),
        ("npx", &["-y", "@babel/node", "x.js"], "node"),
        ("uvx", &["--from", "x", "python", "-m", "pipx", "run", "evil"], "python"),
        ("uvx", &["pipx", "run", "evil"], "pipx"),
        ("uvx", &["uv", "run", "evil.py"], "uv"),
        ("uvx", &["xonsh"], "xonsh"),
        ("uvx", &["--from", "ipython", "IPython"], "ipython"),
    ];
    for (cmd, args, name) in nested {
        let l = format!(
            "goose://extension?name=T&cmd={cmd}{}",
            args.iter().map(|a| format!("&arg={}", pct(a))).collect::<String>()
        );
        let out = gosling(&home).args(["install", "--check", &l]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && err.contains("nested-launcher rule") && err.contains(name),
            "{cmd} {args:?}: {err}"
        );
        let c = json!({"type":"stdio","name":"T","description":"","cmd":cmd,"args":args});
        let r = s.post("/config/extensions", json!({"name":"T","enabled":false,"config":c}));
        assert!(r.status == 403 && r.text().contains("nested-launcher rule"), "{cmd} {args:?}: {}", r.text());
    }
    // On the API paths, `python -m` of a launcher and deno's remote modules are refused too.
    for (cmd, args, rule) in [
        ("python3", &["-m", "pipx", "run", "evil"][..], "nested-launcher rule"),
        ("python3", &["-m", "uv", "run", "x"], "nested-launcher rule"),
        ("python3", &["-m", "xonsh"], "nested-launcher rule"),
        ("python3", &["-m", "IPython"], "nested-launcher rule"),
        ("deno", &["run", "https://127.0.0.1:1/x.ts"], "known-programs rule"),
        ("bun", &["x", "evil"], "known-programs rule"),
    ] {
        let c = json!({"type":"stdio","name":"T","description":"","cmd":cmd,"args":args});
        let r = s.post("/config/extensions", json!({"name":"T","enabled":false,"config":c}));
        assert!(r.status == 403 && r.text().contains(rule), "{cmd} {args:?}: {}", r.text());
    }
}

/// A fake `docker` first on PATH: it records every command line it is given.
fn fake_docker(dir: &Path) -> (PathBuf, String) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("docker.log");
    let script = format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display());
    let exe = bin.join("docker");
    std::fs::write(&exe, script).unwrap();
    let mut p = std::fs::metadata(&exe).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&exe, p).unwrap();
    (log, format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
}

/// Finding 3: every container escape is refused before the engine is ever started; mounts inside
/// the working dir reach the engine as canonical paths, a symlink out of it is refused.
#[test]
fn container_escapes_never_reach_the_engine() {
    let home = TempDir::new("tgram-dock");
    let work = TempDir::new("tgram-dock-work");
    std::fs::create_dir_all(work.join("data")).unwrap();
    std::os::unix::fs::symlink("/", work.join("up")).unwrap();
    let (log, path) = fake_docker(home.path());
    let s = Server::start_with(ServerOpts { env: vec![("PATH".into(), path.clone())], ..Default::default() });
    let id = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let escapes: &[&[&str]] = &[
        &["run", "-i", "-v", "/.:/host", "img"],
        &["run", "-i", "-v", "/tmp/..:/h", "img"],
        &["run", "-i", "-v", "/var:/v", "img"],
        &["run", "-i", "-v", "/:/host", "img"],
        &["run", "-iv/:/host", "img"],
        &["run", "-i", "-v=/:/host", "img"],
        &["run", "-i", "-v", "./../..:/h", "img"],
        &["run", "-i", "--mount", "type=bind,Source=/,target=/h", "img"],
        &["run", "-i", "--mount", "TYPE=bind,SRC=/,dst=/h", "img"],
        &["run", "-i", "--mount", "type=bind,\"source=/\",target=/h", "img"],
        &[
            "run",
            "-i",
            "--mount",
            "type=volume,volume-opt=device=/,volume-opt=o=bind,volume-opt=type=none,target=/h",
            "img",
        ],
        &["run", "-i", "--entrypoint=", "img", "sh", "-c", "id"],
        &["run", "-i", "--entrypoint", "sh", "img", "-c", "id"],
        &["run", "-i", "--privileged", "img"],
        &["run", "-i", "--pid=host", "img"],
        &["run", "-i", "--network=host", "img"],
        &["run", "-i", "--cap-add=ALL", "img"],
        &["run", "-i", "--device=/dev/mem", "img"],
        &["run", "-i", "--security-opt", "apparmor=unconfined", "img"],
        &["-H", "tcp://127.0.0.1:1", "run", "img"],
    ];
    for args in escapes {
        let c = json!({"type":"stdio","name":"T","description":"","cmd":"docker","args":args,"timeout":5});
        let r = s.post("/agent/add_extension", json!({"session_id": id, "config": c}));
        assert!(r.status == 403 && r.text().contains("container-isolation rule"), "{args:?}: {}", r.text());
        let l = format!(
            "goose://extension?name=T&cmd=docker{}",
            args.iter().map(|a| format!("&arg={}", pct(a))).collect::<String>()
        );
        let out = gosling(&home).args(["install", "--check", &l]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(1) && err.contains("container-isolation rule"), "link {args:?}: {err}");
    }
    assert!(!log.exists(), "the engine was started: {}", std::fs::read_to_string(&log).unwrap_or_default());
    // Inside the working dir: the engine gets the canonical path.
    let c = json!({"type":"stdio","name":"D","description":"","cmd":"docker","args":["run","-i","--rm","-v","./data:/data:ro","img"],"timeout":5});
    let _ = s.post("/agent/add_extension", json!({"session_id": id, "config": c}));
    let real = std::fs::canonicalize(work.path()).unwrap();
    let seen = wait_for(std::time::Duration::from_secs(10), || std::fs::read_to_string(&log).ok()).unwrap_or_default();
    assert!(seen.contains(&format!("run -i --rm -v {}/data:/data:ro img", real.display())), "{seen}");
    // A symbolic link out of the working dir is refused at activation; the engine is not started again.
    let c = json!({"type":"stdio","name":"U","description":"","cmd":"docker","args":["run","-i","-v","./up/etc:/h","img"],"timeout":5});
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": c}));
    assert!(r.status >= 400 && r.text().contains("outside the session's working dir"), "{}", r.text());
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1, "only the allowed run reached the engine");
}
