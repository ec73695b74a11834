//! Issue 36: stdio extensions confined by the kernel. A hostile stdio server
//! (tests/fakes/hostile_mcp_stdio.py) tries to read a planted `~/.ssh/id_rsa` and gosling's
//! secrets file, write outside its working dir, list another project, connect to a host nobody
//! approved and to gosling's own port, signal gosling and read its environment, and exhaust
//! memory and processes: every attempt is refused and the server still answers. The same as
//! root and as an unprivileged user. Real servers still work confined; a grant over gosling's
//! dirs and bad sandbox values are refused naming the field; the start and its confinement
//! are in the audit log. As root the process limit is a pids cgroup (or the start says it does
//! not hold); private temp dirs go with their extension and a dead gosling's at the next start;
//! a confined Node program's `fetch` goes through the proxy. The reference servers confined:
//! mcp-server-git on a repository in the working dir (one outside refused by the kernel),
//! mcp-server-fetch with one approved host; an npx and a uvx launch that fetch their server on
//! the first run, with empty caches, through the proxy to their registries (needs the network).

use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;

fn hostile() -> String {
    manifest_dir().join("tests/fakes/hostile_mcp_stdio.py").display().to_string()
}

/// A python3 every uid can run (root's own shims may be closed to `nobody`).
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The peers, when the kernel can confine and the peers are not skipped (each says why not).
fn confinable_with_peers() -> Option<&'static Peers> {
    if !confinable() {
        return None;
    }
    let p = peers();
    if p.is_none() {
        eprintln!("skipped: GOSLING_SKIP_PEERS is set");
    }
    p
}

fn confinable() -> bool {
    let p = gosling::sys::probe();
    if let Some(m) = p.missing() {
        // The refusal on such kernels: `an_unconfinable_kernel_refuses_unless_opted_out`.
        eprintln!("this kernel lacks {m}: the confined runs are not possible here");
        return false;
    }
    true
}

/// A home with a planted key, gosling's secrets file, another project and the working dir,
/// owned by `run_as` when given.
fn planted_home(run_as: Option<u32>) -> TempDir {
    let home = TempDir::new("sb-home");
    for d in [".ssh", "config", "other-project", "work", ".local/bin"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY----- planted\n").unwrap();
    std::fs::write(home.join("config/secrets.json"), "{\"PLANTED_SECRET\": \"s3cr3t-planted\"}\n").unwrap();
    std::fs::write(home.join("other-project/notes.txt"), "private notes\n").unwrap();
    if let Some(id) = run_as {
        chown_tree(home.path(), id);
    }
    home
}

fn chown_tree(p: &Path, id: u32) {
    std::os::unix::fs::lchown(p, Some(id), Some(id)).unwrap();
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            chown_tree(&e.path(), id);
        }
    }
}

fn call(s: &Server, id: &str, tool: &str, args: Value) -> String {
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": tool, "arguments": args}));
    assert_eq!(r.status, 200, "{tool}: {}", r.text());
    r.json()["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

fn refused(s: &Server, id: &str, tool: &str, args: Value) -> String {
    let out = call(s, id, tool, args.clone());
    assert!(out.starts_with("REFUSED"), "{tool} {args} was not refused: {out}");
    out
}

fn started(res: &Value) {
    for r in res["extension_results"].as_array().unwrap() {
        assert_eq!(r["success"], true, "{res}");
    }
}

fn hostile_ext(name: &str, sandbox: Value) -> Value {
    json!({"type":"stdio","name":name,"description":"","cmd":python(),"args":[hostile()],"timeout":30,"sandbox":sandbox})
}

fn every_attempt_refused(run_as: Option<u32>) {
    let home = planted_home(run_as);
    let work = home.join("work");
    let s = Server::start_in(home, ServerOpts { run_as, ..Default::default() });
    let home = s.home.path().to_path_buf();
    let id = start_session(
        &s,
        &work,
        Some(vec![hostile_ext("hostile", json!({"processes": 64})), hostile_ext("open", json!({"unconfined": true}))]),
    );
    started(&resume(&s, &id));
    let gosling = s.pid();
    let port = s.addr.rsplit_once(':').unwrap().1.to_string();
    let outside = home.join("written-outside");
    // The opted-out twin does what the confined one may not: the attempts are real.
    assert!(call(&s, &id, "open__read", json!({"path": home.join(".ssh/id_rsa")})).starts_with("DONE"));
    assert!(call(&s, &id, "open__list", json!({"path": home.join("other-project")})).contains("notes.txt"));
    assert!(call(&s, &id, "open__connect", json!({"host": "127.0.0.1", "port": port})).starts_with("DONE"));

    refused(&s, &id, "hostile__read", json!({"path": home.join(".ssh/id_rsa")}));
    refused(&s, &id, "hostile__read", json!({"path": home.join("config/secrets.json")}));
    refused(&s, &id, "hostile__read", json!({"path": home.join("state/audit.jsonl")}));
    refused(&s, &id, "hostile__write", json!({"path": outside}));
    refused(&s, &id, "hostile__write", json!({"path": "/tmp/gosling-sandbox-escape"}));
    // A runtime dir on the user's PATH is read-only: no program planted there.
    refused(&s, &id, "hostile__write", json!({"path": home.join(".local/bin/evil")}));
    refused(&s, &id, "hostile__list", json!({"path": home.join("other-project")}));
    refused(&s, &id, "hostile__list", json!({"path": home.join("config")}));
    refused(&s, &id, "hostile__connect", json!({"host": "127.0.0.1", "port": port}));
    refused(&s, &id, "hostile__connect", json!({"host": "192.0.2.1", "port": 443}));
    refused(&s, &id, "hostile__signal", json!({"pid": gosling}));
    refused(&s, &id, "hostile__environ", json!({"pid": gosling}));
    let mem = refused(&s, &id, "hostile__memory", json!({"mib": 4096}));
    assert!(mem.contains("MemoryError"), "{mem}");
    // Unprivileged: RLIMIT_NPROC. As root (never held to it by the kernel): a pids cgroup,
    // where one can be made; where not, the start says so (`as_root_the_start_says_…`).
    let as_root = run_as.is_none() && gosling::sys::euid() == 0;
    if !as_root || gosling::sys::pids_cgroup_base().is_ok() {
        let fork = refused(&s, &id, "hostile__fork", json!({"count": 500}));
        let forked: u32 =
            fork.split(" after ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
        assert!(forked < 64, "the fork bomb stopped at the limit of 64 processes: {fork}");
    } else {
        eprintln!(
            "no pids cgroup here ({:?}): a root extension's fork bomb is not held",
            gosling::sys::pids_cgroup_base()
        );
    }
    assert!(!outside.exists() && !Path::new("/tmp/gosling-sandbox-escape").exists());

    // What it may do, it does: its working dir, its own temp dir.
    assert!(call(&s, &id, "hostile__write", json!({"path": work.join("ok.txt")})).starts_with("DONE"));
    assert!(call(&s, &id, "hostile__read", json!({"path": "/etc/hostname"})).starts_with("DONE"));
    // Still answering, and gosling still starts children after the fork bomb.
    assert_eq!(call(&s, &id, "hostile__ping", json!({})), "pong");
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": hostile_ext("again", json!({}))}));
    assert_eq!(add.status, 200, "{}", add.text());
    assert_eq!(call(&s, &id, "again__ping", json!({})), "pong");

    // The audit log has each start with its confinement (or its opt-out).
    let audit = std::fs::read_to_string(home.join("state/audit.jsonl")).unwrap();
    let starts: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["tool"] == "sandbox")
        .collect();
    let status = |ext: &str| starts.iter().find(|v| v["extension"] == ext).map(|v| v["status"].clone());
    assert_eq!(status("hostile"), Some(json!("confined")), "{audit}");
    assert_eq!(status("open"), Some(json!("unconfined")), "{audit}");
    assert_eq!(status("again"), Some(json!("confined")), "{audit}");
}

#[test]
fn a_hostile_extension_is_refused_everything_as_root() {
    if !confinable() || gosling::sys::euid() != 0 {
        // As an unprivileged user the next test is the same run.
        return every_attempt_refused(None);
    }
    every_attempt_refused(None);
}

#[test]
fn a_hostile_extension_is_refused_everything_as_an_unprivileged_user() {
    if !confinable() {
        return;
    }
    let run_as = (gosling::sys::euid() == 0).then_some(65534u32);
    every_attempt_refused(run_as);
}

#[test]
fn bad_sandbox_values_and_grants_over_goslings_dirs_are_refused_naming_the_field() {
    let home = planted_home(None);
    let work = home.join("work");
    let s = Server::start_in(home, ServerOpts::default());
    let config = s.home.join("config").display().to_string();
    let id = start_session(&s, &work, Some(vec![]));
    for (sandbox, field) in [
        (json!({"paths": [s.home.path()]}), "sandbox.paths[0]"),
        (json!({"paths": [config]}), "sandbox.paths[0]"),
        (json!({"paths": ["relative/dir"]}), "sandbox.paths[0]"),
        (json!({"hosts": ["example.com"]}), "sandbox.hosts[0]"),
        (json!({"memory": "lots"}), "sandbox.memory"),
        (json!({"processes": 0}), "sandbox.processes"),
        (json!({"unconfined": "yes"}), "sandbox.unconfined"),
        (json!({"net": true}), "sandbox.net"),
    ] {
        let r =
            s.post("/agent/add_extension", json!({"session_id": id, "config": hostile_ext("bad", sandbox.clone())}));
        assert_ne!(r.status, 200, "{sandbox}: {}", r.text());
        assert!(r.text().contains(field), "{sandbox}: the error names {field}: {}", r.text());
    }
}

#[test]
fn real_servers_work_confined() {
    let Some(p) = confinable_with_peers() else { return };
    let s = Server::start();
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("hello.txt"), "hello from the working dir").unwrap();
    let peer = |k: &str| p.get(k).to_string();
    let node = peer("MCP_PEER_NODE");
    let mut exts = vec![
        json!({"type":"stdio","name":"fs","description":"","cmd":node,"args":[peer("MCP_PEER_FILESYSTEM"), work],"timeout":60}),
        json!({"type":"stdio","name":"mem","description":"","cmd":node,"args":[peer("MCP_PEER_MEMORY")],
            "envs":{"MEMORY_FILE_PATH": work.join("memory.jsonl")},"timeout":60}),
        json!({"type":"stdio","name":"py","description":"","cmd":peer("MCP_PEER_PYTHON"),"args":[peer("MCP_PEER_PY_SERVER")],"timeout":60}),
    ];
    // fastmcp on stdio, from a script in the working dir; the time server, a venv's console script.
    let script = work.join("fast_stdio.py");
    std::fs::write(
        &script,
        "from fastmcp import FastMCP\nm = FastMCP('fast')\n@m.tool()\ndef hello() -> str:\n    return 'hello from fastmcp'\nm.run(show_banner=False)\n",
    )
    .unwrap();
    exts.push(
        json!({"type":"stdio","name":"fast","description":"","cmd":peer("MCP_PEER_FASTMCP_PYTHON"),"args":[script],
        "envs":{"FASTMCP_CHECK_FOR_UPDATES":"off"},"timeout":60}),
    );
    exts.push(
        json!({"type":"stdio","name":"time","description":"","cmd":peer("MCP_PEER_TIME"),"args":[],"timeout":60}),
    );
    let id = start_session(&s, &work, Some(exts));
    started(&resume(&s, &id));
    let read = call(&s, &id, "fs__read_text_file", json!({"path": work.join("hello.txt")}));
    assert!(read.contains("hello from the working dir"), "{read}");
    let wrote = call(&s, &id, "fs__write_file", json!({"path": work.join("new.txt"), "content": "made confined"}));
    assert!(std::fs::read_to_string(work.join("new.txt")).is_ok_and(|t| t == "made confined"), "{wrote}");
    call(
        &s,
        &id,
        "mem__create_entities",
        json!({"entities": [{"name": "gosling", "entityType": "server", "observations": ["confined"]}]}),
    );
    assert!(std::fs::read_to_string(work.join("memory.jsonl")).unwrap().contains("gosling"));
    let tools = s.get(&format!("/agent/tools?session_id={id}")).text();
    assert!(tools.contains("py__") && tools.contains("time__"), "{tools}");
    assert_eq!(call(&s, &id, "fast__hello", json!({})), "hello from fastmcp");
    let audit = std::fs::read_to_string(s.home.join("state/audit.jsonl")).unwrap();
    assert!(audit.matches("\"confined\"").count() >= 5, "{audit}");
}

#[test]
fn the_unconfined_opt_out_for_all_is_audited_and_shown() {
    let s =
        Server::start_with(ServerOpts { env: vec![("GOSLING_UNCONFINED".into(), "1".into())], ..Default::default() });
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = start_session(&s, &work, Some(vec![hostile_ext("loose", json!({}))]));
    started(&resume(&s, &id));
    assert!(call(&s, &id, "loose__list", json!({"path": s.home.path()})).starts_with("DONE"));
    let audit = std::fs::read_to_string(s.home.join("state/audit.jsonl")).unwrap();
    assert!(audit.contains("\"unconfined\""), "{audit}");
    let log = std::fs::read_to_string(&s.stderr_path).unwrap();
    assert!(log.contains("GOSLING_UNCONFINED is set"), "one line at start says so:\n{log}");
}

/// What it may read, write and reach is in the summary every front end shows (the install
/// route here) and in the approved digest: widening it after the approval needs a new one.
#[test]
fn the_summary_shows_the_confinement_and_widening_it_needs_consent_again() {
    let s = Server::start();
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let link = "goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch";
    let plan = s.post("/extensions/install", json!({"link": link, "dry_run": true}));
    assert_eq!(plan.status, 200, "{}", plan.text());
    let plan = plan.json();
    let shown = plan["summary"]["sandbox"].to_string() + &plan["summary"]["risks"].to_string();
    for want in ["Confined", "Network: only pypi.org:443, files.pythonhosted.org:443", "256 processes"] {
        assert!(shown.contains(want), "{want}: {shown}");
    }
    let digest = plan["digest"].as_str().unwrap().to_string();
    let r = s.post("/extensions/install", json!({"link": link, "approve": digest}));
    assert_eq!(r.status, 200, "{}", r.text());
    for wider in [
        json!({"hosts": ["exfil.example:443"]}),
        json!({"paths": [s.home.join("other")]}),
        json!({"unconfined": true}),
        json!({"processes": 4096}),
    ] {
        let path = s.home.join("config/config.json");
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        doc["extensions"]["fetch"]["sandbox"] = wider.clone();
        std::fs::write(&path, doc.to_string()).unwrap();
        let id = s.post("/agent/start", json!({"working_dir": work})).json()["id"].as_str().unwrap().to_string();
        let res = resume(&s, &id);
        let r = &res["extension_results"][0];
        assert_eq!(r["success"], false, "{wider}: {res}");
        assert!(r["error"].as_str().unwrap().contains("not the launch that was approved"), "{wider}: {r}");
    }
}

/// `gosling probe` says what this kernel offers for confinement (the start log line says it too).
#[test]
fn probe_and_the_start_log_say_what_the_kernel_offers() {
    let home = TempDir::new("sb-probe");
    let out = gosling(&home).args(["probe", "--", python(), &hostile()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kernel = gosling::sys::probe();
    assert_eq!(v["gosling_sandbox"]["landlock_abi"], kernel.landlock_abi, "{v}");
    assert_eq!(v["gosling_sandbox"]["user_namespaces"], kernel.user_namespaces, "{v}");
    assert_eq!(v["gosling_sandbox"]["kernel"], kernel.describe());
    let s = Server::start();
    let log = wait_for(std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(&s.stderr_path).ok().filter(|l| l.contains("sandbox: "))
    })
    .unwrap_or_default();
    let want = match kernel.missing() {
        None => format!("stdio extensions run confined ({})", kernel.describe()),
        Some(m) => format!("this kernel lacks {m}"),
    };
    assert!(log.contains(&want), "{want}:\n{log}");
}

/// On a kernel without Landlock or user namespaces (simulated by the test build): one line at
/// start says so, a stdio extension is refused with the reason and the way out, and audited;
/// the operator's opt-out (for one extension, or for all) starts it, shown as UNCONFINED.
#[test]
fn an_unconfinable_kernel_refuses_unless_opted_out() {
    let lacks = ("GOSLING_TEST_KERNEL_LACKS_CONFINEMENT".to_string(), "1".to_string());
    let s = Server::start_with(ServerOpts { env: vec![lacks.clone()], ..Default::default() });
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = start_session(&s, &work, Some(vec![]));
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": hostile_ext("strict", json!({}))}));
    assert_ne!(r.status, 200, "{}", r.text());
    for want in ["was not started", "this kernel lacks Landlock", "\\\"unconfined\\\": true", "GOSLING_UNCONFINED=1"] {
        assert!(r.text().contains(want), "{want}: {}", r.text());
    }
    let r = s.post(
        "/agent/add_extension",
        json!({"session_id": id, "config": hostile_ext("loose", json!({"unconfined": true}))}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(call(&s, &id, "loose__ping", json!({})), "pong");
    let audit = std::fs::read_to_string(s.home.join("state/audit.jsonl")).unwrap();
    assert!(audit.contains("\"refused_unconfinable\"") && audit.contains("\"unconfined\""), "{audit}");
    let log = std::fs::read_to_string(&s.stderr_path).unwrap();
    assert!(log.contains("sandbox: this kernel lacks Landlock"), "{log}");
    drop(s);
    let s = Server::start_with(ServerOpts {
        env: vec![lacks, ("GOSLING_UNCONFINED".into(), "1".into())],
        ..Default::default()
    });
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = start_session(&s, &work, Some(vec![hostile_ext("all", json!({}))]));
    started(&resume(&s, &id));
    assert_eq!(call(&s, &id, "all__ping", json!({})), "pong");
}

/// A tiny HTTP server on loopback answering every request `200 hello from PORT`, until dropped.
fn http_hello() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let serve = l.try_clone().unwrap();
    std::thread::spawn(move || {
        for c in serve.incoming() {
            let Ok(mut c) = c else { return };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let _ = c.read(&mut buf);
            let body = format!("hello from {port}");
            let _ = write!(c, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        }
    });
    (l, port)
}

/// The network of a confined extension is gosling's proxy: an approved host is reached (here
/// a loopback address approved as such), any other is refused by the proxy with what to
/// approve, and both connections are in the audit log.
#[test]
fn approved_hosts_are_reached_through_gosling_and_others_are_refused_and_audited() {
    if !confinable() {
        return;
    }
    let (_approved, port) = http_hello();
    let (_other, other) = http_hello();
    let s = Server::start();
    let work = TempDir::new("sandbox-egress");
    let hosts = json!({"hosts": [format!("127.0.0.1:{port}")]});
    let id = start_session(&s, work.path(), Some(vec![hostile_ext("net", hosts)]));
    started(&resume(&s, &id));
    let got = call(&s, &id, "net__fetch", json!({"url": format!("http://127.0.0.1:{port}/")}));
    assert_eq!(got, format!("DONE 200 hello from {port}"), "the approved host through the proxy");
    let refused = call(&s, &id, "net__fetch", json!({"url": format!("http://127.0.0.1:{other}/")}));
    assert!(refused.starts_with("REFUSED HTTP 403") && refused.contains("allow_host"), "{refused}");
    // Around the proxy there is no way out: a direct connection is refused by the kernel.
    let direct = call(&s, &id, "net__connect", json!({"host": "127.0.0.1", "port": port}));
    assert!(direct.starts_with("REFUSED"), "{direct}");
    // Each connection's line is written when it ends (with its byte counts).
    let audit = s.home.join("state/audit.jsonl");
    let both = wait_for(std::time::Duration::from_secs(10), || {
        let log = std::fs::read_to_string(&audit).ok()?;
        let verdicts: Vec<(u64, String)> = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["kind"] == "egress" && e["extension"] == "net")
            .map(|e| (e["port"].as_u64().unwrap_or(0), e["verdict"].as_str().unwrap_or("").to_string()))
            .collect();
        let allowed = verdicts.iter().any(|(p, v)| *p == u64::from(port) && v == "allowed");
        let refused = verdicts.iter().any(|(p, v)| *p == u64::from(other) && v == "refused");
        (allowed && refused).then_some(())
    });
    assert!(
        both.is_some(),
        "no allowed and refused egress lines: {}",
        std::fs::read_to_string(&audit).unwrap_or_default()
    );
}

/// The private temp dirs of confined extensions under `<state>/tmp`, for `key`.
fn tmp_dirs(home: &Path, key: &str) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(home.join("state/tmp")) else { return Vec::new() };
    rd.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(&format!("-{key}"))).collect()
}

/// Each start of a confined extension has a private temp dir (its `TMPDIR`), removed with it
/// — removed from the session, stopped when idle, the server stopped — without following the
/// links it planted there; a gosling killed before it could remove them leaves them to the
/// next start, which removes those whose gosling is gone and leaves those of a gosling that
/// still runs (several share a state dir) and the entries it cannot judge.
#[test]
fn private_temp_dirs_go_with_their_extension_and_stale_ones_at_the_next_start() {
    if !confinable() {
        return;
    }
    let s = Server::start();
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let outside = s.home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "keep").unwrap();
    let id = start_session(&s, &work, Some(vec![hostile_ext("tmpuser", json!({}))]));
    started(&resume(&s, &id));
    let dirs = tmp_dirs(s.home.path(), "tmpuser");
    assert_eq!(dirs.len(), 1, "one private temp dir: {dirs:?}");
    let tmp = dirs[0].clone();
    // The extension writes there (its TMPDIR), and plants links out of it.
    assert!(call(&s, &id, "tmpuser__write", json!({"path": tmp.join("scratch.txt")})).starts_with("DONE"));
    std::os::unix::fs::symlink(&outside, tmp.join("link-out")).unwrap();
    std::os::unix::fs::symlink(outside.join("keep.txt"), tmp.join("file-link")).unwrap();
    let r = s.post("/agent/remove_extension", json!({"session_id": id, "name": "tmpuser"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!tmp.exists(), "removed with the extension: {}", tmp.display());
    assert_eq!(std::fs::read_to_string(outside.join("keep.txt")).unwrap(), "keep", "the links were not followed");

    // Killed: its dirs stay until the next start, which removes them and only them.
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": hostile_ext("tmpuser", json!({}))}));
    assert_eq!(r.status, 200, "{}", r.text());
    let killed = tmp_dirs(s.home.path(), "tmpuser");
    assert_eq!(killed.len(), 1, "{killed:?}");
    std::os::unix::fs::symlink(&outside, killed[0].join("link-out")).unwrap();
    let state_tmp = s.home.join("state/tmp");
    // A gosling that still runs (this test process stands in for it), and an entry without a tag.
    let live = state_tmp.join(format!("{}.0-s-live", gosling::sys::owner_tag()));
    let untagged = state_tmp.join("20261129_1-untagged");
    for d in [&live, &untagged] {
        std::fs::create_dir_all(d).unwrap();
    }
    let home = s.kill();
    assert!(killed[0].exists(), "a killed gosling could not remove it");
    let s = Server::start_in(home, ServerOpts::default());
    assert!(!killed[0].exists(), "the next start removed the dir of the gosling that is gone");
    assert!(live.exists() && untagged.exists(), "the dirs of a running gosling and untagged ones stay");
    assert!(outside.join("keep.txt").exists(), "the sweep did not follow links");
    let log = s.stderr();
    assert!(log.contains("of a gosling that is gone"), "{log}");

    // Stopped when idle, and when the server stops.
    drop(s);
    let idle = Server::start_with(ServerOpts {
        env: vec![("GOSLING_IDLE_STOP_SECS".into(), "1".into())],
        ..Default::default()
    });
    let work = idle.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = start_session(&idle, &work, Some(vec![hostile_ext("idler", json!({}))]));
    started(&resume(&idle, &id));
    let gone =
        wait_for(std::time::Duration::from_secs(20), || tmp_dirs(idle.home.path(), "idler").is_empty().then_some(()));
    assert!(gone.is_some(), "stopped when idle, its temp dir went: {:?}", tmp_dirs(idle.home.path(), "idler"));
    // Used again: a new one, removed when the server stops (SIGTERM).
    assert_eq!(call(&idle, &id, "idler__ping", json!({})), "pong");
    assert_eq!(tmp_dirs(idle.home.path(), "idler").len(), 1);
    // SIGTERM without reaping (the server's pid stays its own until `Drop` reaps it).
    let _ = std::process::Command::new("kill").arg("-TERM").arg(idle.pid().to_string()).status();
    let gone =
        wait_for(std::time::Duration::from_secs(10), || tmp_dirs(idle.home.path(), "idler").is_empty().then_some(()));
    assert!(gone.is_some(), "removed when the server stopped: {:?}", tmp_dirs(idle.home.path(), "idler"));
}

/// A confined Node program reaches an approved host with Node's own `fetch` — through
/// gosling's proxy, which the child's environment names in the forms Node and npm read — and
/// is refused any other host by the proxy; both connections are in the audit log.
#[test]
fn a_confined_node_programs_fetch_goes_through_the_proxy() {
    let Some(p) = confinable_with_peers() else { return };
    let s = Server::start();
    let script = manifest_dir().join("tests/fakes/fetch_mcp_stdio.mjs");
    let (id, port, other, _servers) = session_with_one_approved_host(&s, |port| {
        json!({"type":"stdio","name":"nodefetch","description":"","cmd":p.node(),"args":[script],"timeout":60,
            "sandbox":{"hosts":[format!("127.0.0.1:{port}")]}})
    });
    let env = call(&s, &id, "nodefetch__env", json!({}));
    assert!(
        env.contains(
            "NODE_USE_ENV_PROXY=1 HTTPS_PROXY=http://127.0.0.1:3128 npm_config_https_proxy=http://127.0.0.1:3128"
        ),
        "{env}"
    );
    let got = call(&s, &id, "nodefetch__fetch", json!({"url": format!("http://127.0.0.1:{port}/")}));
    assert_eq!(got, format!("DONE 200 hello from {port}"), "Node's fetch through the proxy ({env})");
    let refused = call(&s, &id, "nodefetch__fetch", json!({"url": format!("http://127.0.0.1:{other}/")}));
    // Node tunnels even plain http:// through CONNECT: the proxy's 403 to it fails the fetch.
    assert!(
        refused.starts_with("REFUSED") || refused.starts_with("DONE 403") && refused.contains("allow_host"),
        "the proxy's refusal: {refused}"
    );
    wait_for_egress(s.home.path(), "nodefetch", &[("127.0.0.1", port, "allowed"), ("127.0.0.1", other, "refused")]);
}

/// As root the kernel never holds an extension to `RLIMIT_NPROC`: the start says whether a
/// pids cgroup holds it instead, or plainly that the limit does not hold (here simulated by
/// the test build: no pids cgroup).
#[test]
fn as_root_the_start_says_whether_the_process_limit_holds() {
    if !confinable() || gosling::sys::euid() != 0 {
        eprintln!("skipped: not root (RLIMIT_NPROC holds)");
        return;
    }
    let none = ("GOSLING_TEST_NO_PIDS_CGROUP".to_string(), "1".to_string());
    let s = Server::start_with(ServerOpts { env: vec![none], ..Default::default() });
    let said = wait_for(std::time::Duration::from_secs(10), || s.stderr().contains("does NOT hold").then_some(()));
    assert!(said.is_some(), "{}", s.stderr());
    let log = s.stderr();
    assert!(
        log.contains("exempts root from RLIMIT_NPROC") && log.contains("run gosling as an unprivileged user"),
        "{log}"
    );
    drop(s);
    if gosling::sys::pids_cgroup_base().is_ok() {
        let s = Server::start();
        let said = wait_for(std::time::Duration::from_secs(10), || {
            s.stderr().contains("each extension's process limit is a pids cgroup").then_some(())
        });
        assert!(said.is_some(), "{}", s.stderr());
    }
}

/// The egress lines of the audit log for `extension`: (host, port, verdict).
fn egress_lines(home: &Path, extension: &str) -> Vec<(String, u64, String)> {
    let log = std::fs::read_to_string(home.join("state/audit.jsonl")).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "egress" && e["extension"] == extension)
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (s("host"), e["port"].as_u64().unwrap_or(0), s("verdict"))
        })
        .collect()
}

/// A session of `s` (working dir `work` under its home) whose one extension, `ext(port)`, is
/// confined to one of two local HTTP servers: the session, the approved port, the other one,
/// and both servers (they answer while held).
fn session_with_one_approved_host(
    s: &Server,
    ext: impl FnOnce(u16) -> Value,
) -> (String, u16, u16, [std::net::TcpListener; 2]) {
    let (approved, port) = http_hello();
    let (unapproved, other) = http_hello();
    let work = s.home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = start_session(s, &work, Some(vec![ext(port)]));
    started(&resume(s, &id));
    (id, port, other, [approved, unapproved])
}
/// Waits (each connection's line is written when it ends) until the audit log has an egress
/// line of `extension` for each of `want` (host, port, verdict); the lines it has then.
fn wait_for_egress(home: &Path, extension: &str, want: &[(&str, u16, &str)]) -> Vec<(String, u64, String)> {
    let seen = |lines: &[(String, u64, String)]| {
        want.iter().all(|(h, p, v)| lines.iter().any(|(lh, lp, lv)| lh == h && *lp == u64::from(*p) && lv == v))
    };
    wait_for(std::time::Duration::from_secs(30), || Some(egress_lines(home, extension)).filter(|l| seen(l)))
        .unwrap_or_else(|| panic!("{extension}: no egress lines {want:?} in {:?}", egress_lines(home, extension)))
}

/// The operator setting for a network whose DNS answers public names with a non-public address
/// (a transparent egress proxy, split-horizon DNS): `GOSLING_EGRESS_NETS` naming the addresses
/// `names` resolve to here, when any is not public. Elsewhere (CI) nothing.
fn egress_nets_for(names: &[&str]) -> Vec<(String, String)> {
    use gosling::extensions::egress::{class_of, Class};
    use std::net::ToSocketAddrs;
    let mut odd: Vec<String> = Vec::new();
    for n in names {
        let addrs = (*n, 443).to_socket_addrs().unwrap_or_else(|e| panic!("{n} does not resolve here: {e}"));
        for a in addrs.filter(|a| class_of(a.ip()) != Class::Public) {
            if !odd.contains(&a.ip().to_string()) {
                odd.push(a.ip().to_string());
            }
        }
    }
    if odd.is_empty() {
        return Vec::new();
    }
    eprintln!("this network resolves {names:?} to {odd:?}: GOSLING_EGRESS_NETS lets approved names reach them");
    vec![("GOSLING_EGRESS_NETS".to_string(), odd.join(","))]
}

/// Issue 36 item 3: an npx and a uvx launch that fetch their server on the first run, confined,
/// with empty caches (the test's own home): each fetch goes through gosling's proxy to the
/// launcher's registry, approved with the launcher (the audit log has the allowed CONNECTs),
/// into exactly the launcher's caches (made for it; the rest of the home stays out of reach),
/// and the server it fetched lists its tools and answers. Needs the network (npm, PyPI).
#[test]
fn launchers_fetch_on_their_first_run_confined_through_the_proxy() {
    let Some(p) = confinable_with_peers() else { return };
    let npx = gosling::config::settings::find_in_path(&gosling::config::ProcessEnv, "npx")
        .expect("npx is not on PATH: install Node.js with npm (scripts/peers/install needs it too)");
    let registries = ["registry.npmjs.org", "pypi.org", "files.pythonhosted.org"];
    let s = Server::start_with(ServerOpts { env: egress_nets_for(&registries), ..Default::default() });
    let home = s.home.path().to_path_buf();
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    // Something of the home's own that no launcher's fetch may touch.
    std::fs::create_dir_all(home.join(".cache/other")).unwrap();
    std::fs::write(home.join(".cache/other/keep"), "keep").unwrap();
    for c in [".npm", ".cache/uv", ".local/share/uv"] {
        assert!(!home.join(c).exists(), "the caches start empty: {c}");
    }
    let exts = vec![
        json!({"type":"stdio","name":"everything","description":"","cmd":npx,
            "args":["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"],"timeout":110}),
        json!({"type":"stdio","name":"clock","description":"","cmd":p.get("MCP_PEER_UVX"),
            "args":["mcp-server-time==2026.10.19", "--local-timezone", "UTC"],"timeout":110}),
    ];
    let id = start_session(&s, &work, Some(exts));
    started(&resume(&s, &id));
    let tools = s.get(&format!("/agent/tools?session_id={id}")).text();
    assert!(tools.contains("everything__echo") && tools.contains("clock__get_current_time"), "{tools}");
    let echo = call(&s, &id, "everything__echo", json!({"message": "fetched on first run"}));
    assert!(echo.contains("fetched on first run"), "{echo}");
    let now = call(&s, &id, "clock__get_current_time", json!({"timezone": "UTC"}));
    assert!(now.contains("UTC"), "{now}");
    // Fetched into the launchers' caches, which gosling made for them.
    assert!(home.join(".npm/_npx").is_dir() && home.join(".npm/_cacache").is_dir(), "npx's cache");
    assert!(std::fs::read_dir(home.join(".cache/uv")).unwrap().count() > 0, "uv's cache");
    // Through gosling's proxy, to the registries approved with the launchers. A connection's
    // line is written when it ends: npm keeps its connections open until the extension goes.
    for name in ["everything", "clock"] {
        let r = s.post("/agent/remove_extension", json!({"session_id": id, "name": name}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    wait_for_egress(&home, "everything", &[("registry.npmjs.org", 443, "allowed")]);
    wait_for_egress(&home, "clock", &[("pypi.org", 443, "allowed"), ("files.pythonhosted.org", 443, "allowed")]);
    // Written there only: nothing else appeared in the home, nothing of its own changed.
    let mut entries: Vec<String> =
        std::fs::read_dir(&home).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    entries.sort();
    assert_eq!(entries, [".cache", ".local", ".npm", "config", "server.stderr", "state", "work"], "{entries:?}");
    let mut cache: Vec<String> = std::fs::read_dir(home.join(".cache"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cache.sort();
    assert_eq!(cache, ["other", "uv"]);
    assert_eq!(std::fs::read_to_string(home.join(".cache/other/keep")).unwrap(), "keep");
    let audit = std::fs::read_to_string(home.join("state/audit.jsonl")).unwrap();
    assert!(audit.matches("\"confined\"").count() >= 2, "{audit}");
}

/// A call's answer, whatever it is: (is it an error, its text).
fn call_any(s: &Server, id: &str, tool: &str, args: Value) -> (bool, String) {
    let r = s.post("/agent/call_tool", json!({"session_id": id, "name": tool, "arguments": args}));
    let v = r.json();
    let text = v["content"]
        .as_array()
        .map_or_else(|| r.text(), |c| c.iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n"));
    (r.status != 200 || v["isError"] == true, text)
}

/// A git repository at `dir` with one commit (`message`) of `tracked.txt`.
fn git_repo(dir: &Path, message: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tracked.txt"), "one\n").unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=gosling test",
                "-c",
                "user.email=test@gosling.invalid",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git is not installed: install git (the test makes repositories with it)");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    git(&["add", "tracked.txt"]);
    git(&["commit", "-q", "-m", message]);
}

/// mcp-server-git (pinned in scripts/peers) confined, on a repository made in the working dir:
/// `git_status`, `git_log` and the diffs work. Started without `--repository`, the server itself
/// would open any repository; one outside the working dir is refused by the kernel — the call
/// fails and nothing of it is read — while its opted-out twin reads it (the attempt is real).
#[test]
fn mcp_server_git_works_confined_on_a_repository_in_the_working_dir_only() {
    let Some(p) = confinable_with_peers() else { return };
    let s = Server::start();
    let work = s.home.join("work");
    let outside = s.home.join("other-project");
    git_repo(&work, "first commit in the working dir");
    git_repo(&outside, "private commit outside");
    std::fs::write(work.join("tracked.txt"), "one\ntwo\n").unwrap();
    let git = p.get("MCP_PEER_GIT");
    let exts = vec![
        json!({"type":"stdio","name":"git","description":"","cmd":git,"args":[],"timeout":60}),
        json!({"type":"stdio","name":"gitopen","description":"","cmd":git,"args":[],"timeout":60,"sandbox":{"unconfined":true}}),
    ];
    let id = start_session(&s, &work, Some(exts));
    started(&resume(&s, &id));
    let status = call(&s, &id, "git__git_status", json!({"repo_path": work}));
    assert!(status.contains("tracked.txt") && status.contains("modified"), "{status}");
    let log = call(&s, &id, "git__git_log", json!({"repo_path": work, "max_count": 5}));
    assert!(log.contains("first commit in the working dir"), "{log}");
    let diff = call(&s, &id, "git__git_diff_unstaged", json!({"repo_path": work}));
    assert!(diff.contains("+two"), "{diff}");
    let diff = call(&s, &id, "git__git_diff", json!({"repo_path": work, "target": "HEAD"}));
    assert!(diff.contains("+two"), "{diff}");

    let open = call(&s, &id, "gitopen__git_log", json!({"repo_path": outside, "max_count": 5}));
    assert!(open.contains("private commit outside"), "unconfined, the server reads it: {open}");
    for tool in ["git__git_log", "git__git_status"] {
        let (failed, out) = call_any(&s, &id, tool, json!({"repo_path": outside, "max_count": 5}));
        assert!(failed, "{tool} on a repository outside the working dir: {out}");
        assert!(!out.contains("private commit outside") && !out.contains("tracked.txt"), "nothing read: {out}");
    }
    // Still answering afterwards.
    assert!(call(&s, &id, "git__git_status", json!({"repo_path": work})).contains("tracked.txt"));
}

/// mcp-server-fetch (pinned in scripts/peers) confined with one approved host — a local HTTP
/// server of the test, approved as a loopback `HOST:PORT` (the server's own refusal of private
/// addresses is lifted with its `--allow-private-ips`: the approval is gosling's) — fetches it;
/// another local port and a public name are refused by gosling's proxy; each is in the audit log.
#[test]
fn mcp_server_fetch_reaches_its_approved_host_only() {
    let Some(p) = confinable_with_peers() else { return };
    let s = Server::start();
    let (id, port, other, _servers) = session_with_one_approved_host(&s, |port| {
        json!({"type":"stdio","name":"fetch","description":"","cmd":p.get("MCP_PEER_FETCH"),
            "args":["--allow-private-ips"],"timeout":60,"sandbox":{"hosts":[format!("127.0.0.1:{port}")]}})
    });
    let got = call(&s, &id, "fetch__fetch", json!({"url": format!("http://127.0.0.1:{port}/page"), "raw": true}));
    assert!(got.contains(&format!("hello from {port}")), "the approved host, through the proxy: {got}");
    let (failed, out) =
        call_any(&s, &id, "fetch__fetch", json!({"url": format!("http://127.0.0.1:{other}/page"), "raw": true}));
    assert!(failed && !out.contains(&format!("hello from {other}")), "another port is refused: {out}");
    let (failed, out) = call_any(&s, &id, "fetch__fetch", json!({"url": "https://example.com/", "raw": true}));
    assert!(failed, "an unapproved name is refused (the proxy answers 403 to its CONNECT): {out}");
    let home = s.home.path();
    wait_for_egress(
        home,
        "fetch",
        &[("127.0.0.1", port, "allowed"), ("127.0.0.1", other, "refused"), ("example.com", 443, "refused")],
    );
}

/// `GOSLING_EGRESS_NETS` (the operator's networks that approved names may resolve to) holding
/// loopback, or not a network: a confined extension with approved hosts is not started, and
/// the error names the setting and the fix.
#[test]
fn a_bad_egress_nets_setting_is_refused_naming_it() {
    if !confinable() {
        return;
    }
    for (value, says) in [("127.0.0.0/8", "holds loopback"), ("registry.example", "is not a network")] {
        let nets = ("GOSLING_EGRESS_NETS".to_string(), value.to_string());
        let s = Server::start_with(ServerOpts { env: vec![nets], ..Default::default() });
        let work = s.home.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let id = start_session(&s, &work, Some(vec![]));
        let ext = hostile_ext("net", json!({"hosts": ["api.example.com:443"]}));
        let r = s.post("/agent/add_extension", json!({"session_id": id, "config": ext}));
        assert_ne!(r.status, 200, "{value}: {}", r.text());
        assert!(r.text().contains("GOSLING_EGRESS_NETS") && r.text().contains(says), "{value}: {}", r.text());
    }
}
