//! The session store through the real binary: sessions of the one-file layout (a fixture as
//! earlier versions wrote it) listed, read and continued; a torn last line after a crash; a
//! corrupt line reported with its file; two servers and `gosling acp` on one state directory,
//! appending to one session and listing each other's sessions; the generated secret key kept
//! across restarts and shared, never replaced, by a second server; start-up that does not wait
//! for the session index; the audit log rotated under two servers.

use crate::contract;
use crate::fake_llm::*;
use crate::faults::llm_env;
use crate::reply::user_text;
use crate::support::*;
use serde_json::{json, Value};
use std::path::PathBuf;

fn sessions_dir(home: &TempDir) -> PathBuf {
    home.join("state").join("sessions")
}

fn answer(text: &str) -> Reply {
    text_turn(text)
}

/// One turn; the events' text.
fn turn(s: &Server, id: &str, text: &str) -> String {
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.post("/reply", json!({"session_id": id, "user_message": user_text(text)}));
    assert!(r.text().contains(r#""type":"Finish""#), "{}", r.text());
    r.text()
}

#[test]
fn sessions_of_the_one_file_layout_are_listed_read_and_continued() {
    let fixture = manifest_dir().join("tests/fixtures/sessions-v1/20250101_1.json");
    let old: Value = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    let home = TempDir::new("v1");
    std::fs::create_dir_all(sessions_dir(&home)).unwrap();
    std::fs::copy(&fixture, sessions_dir(&home).join("20250101_1.json")).unwrap();
    let llm = FakeLlm::start(vec![answer("Still there.")]);
    let s = Server::start_in(home, llm_env(&llm));

    let list = s.get("/sessions").json();
    contract::check("GET", "/sessions", 200, &list);
    let mut listed = old.clone();
    listed.as_object_mut().unwrap().remove("conversation");
    assert_eq!(list["sessions"], json!([listed]));
    let one = s.get("/sessions/20250101_1").json();
    contract::check("GET", "/sessions/{session_id}", 200, &one);
    assert_eq!(one, old, "read in place, exactly as written");

    // The first change moves it to the new layout; nothing of it is lost.
    turn(&s, "20250101_1", "And now?");
    let dir = sessions_dir(&s.home);
    assert!(!dir.join("20250101_1.json").exists());
    assert!(dir.join("20250101_1.meta.json").exists() && dir.join("20250101_1.jsonl").exists());
    let home = s.kill();
    let s = Server::start_in(home, llm_env(&llm));
    let one = s.get("/sessions/20250101_1").json();
    contract::check("GET", "/sessions/{session_id}", 200, &one);
    let conversation = one["conversation"].as_array().unwrap();
    assert_eq!(conversation[..4], old["conversation"].as_array().unwrap()[..]);
    assert_eq!(conversation.len(), 6);
    assert_eq!(conversation[5]["content"][0]["text"], "Still there.");
    assert_eq!(one["message_count"], 6);
    assert_eq!((&one["name"], &one["provider_name"]), (&old["name"], &old["provider_name"]));
}

#[test]
fn a_torn_last_line_is_cut_with_a_warning_and_a_corrupt_line_names_its_file() {
    let llm = FakeLlm::start(vec![answer("one"), answer("two"), answer("three")]);
    let s = Server::start_with(llm_env(&llm));
    let start = || s.post("/agent/start", json!({"working_dir": s.home.path(), "extension_overrides": []})).json();
    let (torn, bad) = (start()["id"].as_str().unwrap().to_string(), start()["id"].as_str().unwrap().to_string());
    turn(&s, &torn, "first");
    turn(&s, &bad, "first");
    // The turns' token counts reach the metadata file after the turns answered (`agent::usage`;
    // the server's own readers see them at once, so the file itself is read); once they have
    // (the accumulated counts: this model reports no usage, so the last call's stay unset), it
    // records both lines of each conversation.
    for id in [&torn, &bad] {
        let meta = sessions_dir(&s.home).join(format!("{id}.meta.json"));
        let recorded = wait_for(std::time::Duration::from_secs(10), || {
            let on_disk: Value = serde_json::from_slice(&std::fs::read(&meta).ok()?).ok()?;
            on_disk["accumulated_total_tokens"].is_i64().then_some(())
        });
        assert!(recorded.is_some(), "the token counts of {id} were saved");
    }
    let home = s.kill();
    let dir = sessions_dir(&home);
    // What kill -9 in the middle of a long write leaves: part of a line, no newline.
    let torn_file = dir.join(format!("{torn}.jsonl"));
    let mut bytes = std::fs::read(&torn_file).unwrap();
    bytes.extend_from_slice(br#"{"id":"msg_x","role":"user","content":[{"type":"te"#);
    std::fs::write(&torn_file, &bytes).unwrap();
    // A line damaged in place (same length, so the metadata still matches the file).
    let bad_file = dir.join(format!("{bad}.jsonl"));
    let mut bytes = std::fs::read(&bad_file).unwrap();
    let second = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    bytes[second..second + 9].copy_from_slice(b"{not json");
    let f = std::fs::OpenOptions::new().write(true).open(&bad_file).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0).unwrap();
    drop(f);

    let s = Server::start_in(home, llm_env(&llm));
    // The index is loaded in the background: the listing waits for it, and it cut the line.
    assert_eq!(s.get("/sessions").status, 200);
    let err = s.stderr();
    assert!(err.contains(&format!("{torn}.jsonl: its last line is incomplete")), "{err}");
    let one = s.get(&format!("/sessions/{torn}")).json();
    assert_eq!(one["conversation"].as_array().unwrap().len(), 2);
    assert_eq!(one["message_count"], 2);
    // Appending goes on after the cut.
    assert!(turn(&s, &torn, "second").contains("three"));
    let one = s.get(&format!("/sessions/{torn}")).json();
    let texts: Vec<&str> =
        one["conversation"].as_array().unwrap().iter().filter_map(|m| m["content"][0]["text"].as_str()).collect();
    assert_eq!(texts, ["first", "one", "second", "three"]);

    // Read as far as it goes, marked with why (the file and line), its good message shown.
    let r = s.get(&format!("/sessions/{bad}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let one = r.json();
    let msg = one["gosling_damaged"].as_str().unwrap().to_string();
    assert!(msg.contains(&format!("{bad}.jsonl")) && msg.contains("line 2"), "{msg}");
    assert!(msg.contains("left untouched"), "{msg}");
    assert_eq!(one["conversation"].as_array().unwrap().len(), 1);
    assert_eq!(one["conversation"][0]["content"][0]["text"], "first");
    // Still listed, marked, and its file is as it was.
    let list = s.get("/sessions").json();
    let entry = list["sessions"].as_array().unwrap().iter().find(|x| x["id"] == bad.as_str()).unwrap().clone();
    assert!(entry["gosling_damaged"].as_str().is_some(), "{entry}");
    assert_eq!(std::fs::read(&bad_file).unwrap(), bytes);
    // A turn in it is refused, saying why, and writes nothing: the file stays as it was.
    let r = s.post("/agent/resume", json!({"session_id": bad, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.post("/reply", json!({"session_id": bad, "user_message": user_text("more")}));
    assert!(r.text().contains("is not valid") && r.text().contains("line 2"), "{} {}", r.status, r.text());
    assert_eq!(std::fs::read(&bad_file).unwrap(), bytes);
}

/// Issue 38, item 3: a session whose metadata file was cut short, and one whose conversation
/// gained a line that is not JSON, both stay listed after a restart — marked with what is wrong
/// and what to do — with their good messages readable, and neither file is changed.
#[test]
fn a_damaged_session_stays_listed_marked_and_readable_and_its_files_are_untouched() {
    let llm = FakeLlm::start(vec![answer("one"), answer("two")]);
    let s = Server::start_with(llm_env(&llm));
    let start = || s.post("/agent/start", json!({"working_dir": s.home.path(), "extension_overrides": []})).json();
    let (cut, garbled) = (start()["id"].as_str().unwrap().to_string(), start()["id"].as_str().unwrap().to_string());
    turn(&s, &cut, "kept words");
    turn(&s, &garbled, "kept too");
    let home = s.kill();
    let dir = sessions_dir(&home);
    let meta = dir.join(format!("{cut}.meta.json"));
    let whole = std::fs::read(&meta).unwrap();
    std::fs::write(&meta, &whole[..whole.len() / 2]).unwrap();
    let lines = dir.join(format!("{garbled}.jsonl"));
    let mut f = std::fs::OpenOptions::new().append(true).open(&lines).unwrap();
    std::io::Write::write_all(&mut f, b"this is not json\n").unwrap();
    drop(f);
    let files = |dir: &std::path::Path| {
        let mut all: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json" || x == "jsonl"))
            .map(|p| (p.clone(), std::fs::read(p).unwrap()))
            .collect();
        all.sort();
        all
    };
    let before = files(&dir);

    let s = Server::start_in(home, llm_env(&llm));
    let list = s.get("/sessions").json();
    contract::check("GET", "/sessions", 200, &list);
    let sessions = list["sessions"].as_array().unwrap();
    for (id, file) in [(&cut, format!("{cut}.meta.json")), (&garbled, format!("{garbled}.jsonl"))] {
        let entry =
            sessions.iter().find(|x| x["id"] == id.as_str()).unwrap_or_else(|| panic!("{id} not listed: {list}"));
        let why = entry["gosling_damaged"].as_str().unwrap_or_else(|| panic!("{id} not marked: {entry}"));
        assert!(why.contains(&file) && why.contains("fix or move the file away"), "{why}");
        assert_eq!(entry["message_count"], 2, "{entry}");
        let one = s.get(&format!("/sessions/{id}"));
        assert_eq!(one.status, 200, "{}", one.text());
        let one = one.json();
        assert!(one["gosling_damaged"].is_string(), "{one}");
        let texts: Vec<&str> =
            one["conversation"].as_array().unwrap().iter().filter_map(|m| m["content"][0]["text"].as_str()).collect();
        assert_eq!(texts.len(), 2, "{one}");
    }
    assert_eq!(before, files(&sessions_dir(&s.home)), "a damaged session's files are left as they were");
    assert!(s.stderr().contains("listed as damaged"), "{}", s.stderr());
}

/// `gosling acp` on stdio, one JSON-RPC line at a time.
/// `gosling acp` on a home's dirs with the fake model, initialized; one line per message.
pub(crate) struct Acp {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Acp {
    pub(crate) fn start(home: &TempDir, llm: &FakeLlm) -> Acp {
        use std::process::Stdio;
        let mut cmd = gosling(home);
        cmd.arg("acp")
            .env("GOOSE_PROVIDER", "openai")
            .env("GOOSE_MODEL", "m")
            .env("OPENAI_HOST", llm.url())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut acp = Acp { child, out, next: 0 };
        assert_eq!(acp.call("initialize", json!({"protocolVersion": 1}))["protocolVersion"], 1);
        acp
    }

    /// One request; its result (an error fails the test). Notifications are skipped.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        use std::io::{BufRead, Write};
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n";
        self.child.stdin.as_mut().unwrap().write_all(line.as_bytes()).unwrap();
        loop {
            let mut line = String::new();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "gosling acp closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("method").is_none() && v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The ids `GET /sessions` lists.
fn listed(s: &Server) -> Vec<String> {
    let list = s.get("/sessions").json();
    list["sessions"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect()
}

/// Waits up to a second for `f` to hold of `s`'s listing.
fn listed_within_a_second(s: &Server, f: impl Fn(&[String]) -> bool) -> bool {
    wait_for(std::time::Duration::from_secs(1), || f(&listed(s)).then_some(())).is_some()
}

#[test]
fn two_servers_and_acp_on_one_state_dir_append_to_one_session_and_list_each_others() {
    const TURNS: usize = 500; // two messages each: 1,000 per server
    const ACP_TURNS: usize = 20;
    let llm = FakeLlm::start_forgetting((0..2 * TURNS + ACP_TURNS + 10).map(|_| answer("ok")).collect());
    let a = Server::start_with(llm_env(&llm));
    let b = Server::start_with(on_dirs_of(&a.home, llm_env(&llm)));
    let mut acp = Acp::start(&a.home, &llm);

    let id = a.post("/agent/start", json!({"working_dir": a.home.path(), "extension_overrides": []})).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(listed_within_a_second(&b, |l| l.contains(&id)), "created by one server, listed by the other");
    for s in [&a, &b] {
        let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let cwd = a.home.path().display().to_string();
    acp.call("session/load", json!({"sessionId": id, "cwd": cwd, "mcpServers": []}));

    let run = |s: &Server, tag: &str| {
        for i in 0..TURNS {
            let r = s.post("/reply", json!({"session_id": id, "user_message": user_text(&format!("{tag}-{i}"))}));
            assert!(r.text().contains(r#""type":"Finish""#), "{tag}-{i}: {}", r.text());
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| run(&a, "a"));
        scope.spawn(|| run(&b, "b"));
        for i in 0..ACP_TURNS {
            let prompt = json!([{"type": "text", "text": format!("c-{i}")}]);
            let r = acp.call("session/prompt", json!({"sessionId": id, "prompt": prompt}));
            assert_eq!(r["stopReason"], "end_turn", "{r}");
        }
    });

    let total = 2 * (2 * TURNS + ACP_TURNS);
    // Every line of the file is one whole message, and every message is there once.
    let file = std::fs::read_to_string(sessions_dir(&a.home).join(format!("{id}.jsonl"))).unwrap();
    let lines: Vec<Value> = file.lines().map(|l| serde_json::from_str(l).expect("a whole JSON message")).collect();
    assert_eq!(lines.len(), total);
    let conversation = b.get(&format!("/sessions/{id}")).json()["conversation"].as_array().unwrap().clone();
    assert_eq!(conversation, lines);
    for (tag, n) in [("a", TURNS), ("b", TURNS), ("c", ACP_TURNS)] {
        let mine: Vec<&str> = conversation
            .iter()
            .filter_map(|m| m["content"][0]["text"].as_str())
            .filter(|t| t.starts_with(&format!("{tag}-")))
            .collect();
        let expected: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
        assert_eq!(mine, expected, "{tag}'s messages, each once, in the order sent");
    }
    for s in [&a, &b] {
        let list = s.get("/sessions").json();
        let me = list["sessions"].as_array().unwrap().iter().find(|x| x["id"] == id.as_str()).unwrap().clone();
        assert_eq!(me["message_count"], total);
    }

    // A session made by the editor is listed by both servers; deleted by one, gone from both.
    let other =
        acp.call("session/new", json!({"cwd": cwd, "mcpServers": []}))["sessionId"].as_str().unwrap().to_string();
    for s in [&a, &b] {
        assert!(listed_within_a_second(s, |l| l.contains(&other)), "{other} listed");
    }
    assert_eq!(b.delete(&format!("/sessions/{other}")).status, 200);
    assert!(listed_within_a_second(&a, |l| !l.contains(&other)), "{other} gone");
    assert_eq!(a.get(&format!("/sessions/{other}")).status, 404);
}

/// Server options for another server on `home`'s state and config dirs.
fn on_dirs_of(home: &TempDir, mut opts: ServerOpts) -> ServerOpts {
    opts.env.push(("GOSLING_STATE_DIR".into(), home.join("state").display().to_string()));
    opts.env.push(("GOSLING_CONFIG_DIR".into(), home.join("config").display().to_string()));
    opts
}

fn no_secret() -> ServerOpts {
    ServerOpts { secret: None, ..Default::default() }
}

/// Whether `s` accepts `key` on a protected route.
fn accepts(s: &Server, key: &str) -> bool {
    http("GET", &s.url("/config"), Some(key), None).status == 200
}

#[test]
fn the_generated_key_is_kept_across_restarts_and_never_replaced_by_a_second_server() {
    let a = Server::start_with(no_secret());
    let path = a.home.join("state/secret-key");
    let key = std::fs::read_to_string(&path).unwrap();
    let b = Server::start_with(on_dirs_of(&a.home, no_secret()));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), key, "the second server left the key file alone");
    assert!(accepts(&a, &key) && accepts(&b, &key), "one key for both");
    // Honest words (issue 38 item 5): only the server that made the key says it generated one.
    assert!(a.stderr().contains("generated a secret key in"), "{}", a.stderr());
    assert!(b.stderr().contains("using the secret key kept in") && !b.stderr().contains("generated"), "{}", b.stderr());
    // One login link per server: the second keeps its own, the first's still works.
    let link_of = |s: &Server| {
        let line = s.early_stdout.iter().find(|l| l.contains("sign-in link")).unwrap().clone();
        let path = std::path::PathBuf::from(line.rsplit(" in ").next().unwrap());
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            format!("login-link-{}", s.addr.rsplit(':').next().unwrap())
        );
        std::fs::read_to_string(path).unwrap()
    };
    let (link_a, link_b) = (link_of(&a), link_of(&b));
    assert!(link_a.starts_with(&a.url("/#login=")) && link_b.starts_with(&b.url("/#login=")), "{link_a} {link_b}");
    let token = link_a.trim_end().split("#login=").nth(1).unwrap();
    let r = http("POST", &a.url("/auth/login"), None, Some(json!({ "token": token }).to_string().as_bytes()));
    assert_eq!(r.status, 200, "the first server's link still works: {}", r.text());
    drop(b);
    let home = a.kill();
    let a = Server::start_in(home, no_secret());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), key);
    assert!(accepts(&a, &key), "a restarted server keeps the generated key");
    assert!(!accepts(&a, "0".repeat(64).as_str()));

    // Four servers starting at once on fresh dirs agree on one key.
    let fresh = TempDir::new("key-race");
    let servers: Vec<Server> = std::thread::scope(|scope| {
        let starts: Vec<_> =
            (0..4).map(|_| scope.spawn(|| Server::start_with(on_dirs_of(&fresh, no_secret())))).collect();
        starts.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let key = std::fs::read_to_string(fresh.join("state/secret-key")).unwrap();
    assert_eq!(key.len(), 64);
    assert!(servers.iter().all(|s| accepts(s, &key)), "every racer uses the one key in the file");
}

#[test]
fn a_key_file_that_is_not_a_key_stops_the_server_naming_it() {
    let home = TempDir::new("bad-key");
    std::fs::create_dir_all(home.join("state")).unwrap();
    let path = home.join("state/secret-key");
    std::fs::write(&path, "not a key\n").unwrap();
    let (home, err) = Server::try_start_in(home, no_secret()).err().expect("refused");
    assert!(
        err.contains("state/secret-key is not valid")
            && err.contains("delete it")
            && err.contains("GOOSE_SERVER__SECRET_KEY"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a key\n", "left untouched");
    // Readable by others: refused with the fix.
    std::fs::write(&path, "a".repeat(64)).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (home, err) = Server::try_start_in(home, no_secret()).err().expect("refused");
    assert!(err.contains("other users may read it") && err.contains("chmod 600"), "{err}");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let s = Server::start_in(home, no_secret());
    assert!(accepts(&s, &"a".repeat(64)));
}

/// Writes `count` sessions of two messages in the store's format, as a crash leaves them (the
/// metadata records no conversation end, so each file's lines are counted when loaded).
fn seed_sessions(dir: &std::path::Path, count: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let message = |i: usize, role: &str| json!({"id": format!("m{i}"), "role": role, "created": 1_763_900_000 + i, "content": [{"type": "text", "text": format!("message {i}")}], "metadata": {"userVisible": true, "agentVisible": true}});
    let lines = format!("{}\n{}\n", message(0, "user"), message(1, "assistant"));
    for i in 0..count {
        let id = format!("20261101_{}", i + 1);
        let meta = json!({
            "id": id, "name": format!("Seeded {i}"), "working_dir": "/w", "created_at": "2026-11-01T10:00:00Z",
            "updated_at": format!("2026-11-01T10:{:02}:{:02}Z", i / 60 % 60, i % 60), "extension_data": {},
            "message_count": 0, "session_type": "user", "user_set_name": false,
        });
        std::fs::write(dir.join(format!("{id}.meta.json")), meta.to_string()).unwrap();
        std::fs::write(dir.join(format!("{id}.jsonl")), &lines).unwrap();
    }
}

#[test]
fn status_answers_before_the_sessions_are_read_and_the_listing_then_has_them_all() {
    const COUNT: usize = 5000;
    let home = TempDir::new("many");
    seed_sessions(&sessions_dir(&home), COUNT);
    let s = Server::start_in(home, ServerOpts::default());
    assert_eq!(s.get("/status").status, 200);
    // The loader logs how long the index took when it is done: not yet.
    let err = s.stderr();
    assert!(!err.contains("sessions indexed"), "/status waited for the session index:\n{err}");
    let r = s.get("/sessions");
    // A body of known length (here over a megabyte) goes whole with its Content-Length, not chunked.
    assert!(r.body.len() > 1 << 20, "{}", r.body.len());
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    assert_eq!(r.header("transfer-encoding"), None);
    let list = r.json();
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), COUNT);
    assert!(sessions.iter().all(|x| x["message_count"] == 2), "each conversation counted");
    assert!(s.stderr().contains(&format!("store: {COUNT} sessions indexed")), "{}", s.stderr());
}

#[test]
fn the_audit_log_rotates_under_two_servers_without_losing_or_tearing_a_line() {
    const CALLS: usize = 300;
    let small = |opts: ServerOpts| {
        let mut o = opts;
        o.env.push(("GOSLING_AUDIT_MAX_BYTES".into(), "4096".into()));
        o.env.push(("GOSLING_AUDIT_KEEP".into(), "1000".into()));
        o
    };
    let a = Server::start_with(small(ServerOpts::default()));
    let b = Server::start_with(small(on_dirs_of(&a.home, ServerOpts::default())));
    let memory = json!([{"type": "builtin", "name": "memory", "description": "", "timeout": 30}]);
    let run = |s: &Server, tag: &str| -> String {
        let r = s.post("/agent/start", json!({"working_dir": s.home.path(), "extension_overrides": memory}));
        let id = r.json()["id"].as_str().unwrap().to_string();
        let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
        assert_eq!(r.status, 200, "{}", r.text());
        for i in 0..CALLS {
            let args = json!({"category": format!("{tag}{i}")});
            let r = s.post(
                "/agent/call_tool",
                json!({"session_id": id, "name": "memory__retrieve_memories", "arguments": args}),
            );
            assert_eq!(r.status, 200, "{}", r.text());
        }
        id
    };
    let (ida, idb) = std::thread::scope(|scope| {
        let ta = scope.spawn(|| run(&a, "a"));
        let tb = scope.spawn(|| run(&b, "b"));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    let state = a.home.join("state");
    let mut files = vec![state.join("audit.jsonl")];
    for n in 1.. {
        let p = state.join(format!("audit.jsonl.{n}"));
        if !p.exists() {
            break;
        }
        files.push(p);
    }
    assert!(files.len() > 10, "rotated many times at 4 KiB: {} files", files.len());
    let mut seen = std::collections::BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(text.len() <= 4096 + 512, "{} holds {} bytes", f.display(), text.len());
        for line in text.lines() {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("a torn line in {}: {e}: {line}", f.display()));
            *seen
                .entry((v["session"].as_str().unwrap().to_string(), v["args_sha256"].as_str().unwrap().to_string()))
                .or_insert(0) += 1;
        }
    }
    let sha = |tag: &str, i: usize| {
        let args = serde_json::to_vec(&json!({"category": format!("{tag}{i}")})).unwrap();
        gosling::util::hex(&gosling::util::sha256(&args))
    };
    for (id, tag) in [(&ida, "a"), (&idb, "b")] {
        for i in 0..CALLS {
            assert_eq!(seen.get(&(id.clone(), sha(tag, i))), Some(&1), "the call {tag}{i} is audited once");
        }
    }
    assert_eq!(seen.values().sum::<usize>(), 2 * CALLS, "no other line");
}

#[test]
fn the_oldest_audit_files_beyond_the_kept_number_are_removed() {
    let mut opts = ServerOpts::default();
    opts.env.push(("GOSLING_AUDIT_MAX_BYTES".into(), "4096".into()));
    opts.env.push(("GOSLING_AUDIT_KEEP".into(), "2".into()));
    let s = Server::start_with(opts);
    let memory = json!([{"type": "builtin", "name": "memory", "description": "", "timeout": 30}]);
    let id = s.post("/agent/start", json!({"working_dir": s.home.path(), "extension_overrides": memory})).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    for i in 0..120 {
        let r = s.post(
            "/agent/call_tool",
            json!({"session_id": id, "name": "memory__retrieve_memories", "arguments": {"category": format!("c{i}")}}),
        );
        assert_eq!(r.status, 200);
    }
    let state = s.home.join("state");
    assert!(state.join("audit.jsonl.1").exists() && state.join("audit.jsonl.2").exists());
    assert!(!state.join("audit.jsonl.3").exists(), "only two older files are kept");
    let err = gosling(&s.home).args(["agent", "--port", "0"]).env("GOSLING_AUDIT_MAX_BYTES", "100").output().unwrap();
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(err.contains("GOSLING_AUDIT_MAX_BYTES must be at least 4096"), "{err}");
}

/// Issue 38 item 9: start-up errors name the real cause and the fix — a config dir that is a
/// file, a config.json this user may not read (as an unprivileged user: root reads anything),
/// a dir of another owner — never "check the directory exists and is writable", "File exists
/// (os error 17)" or a `chmod 700` that would not help.
#[test]
fn start_up_errors_name_the_real_cause_and_the_fix() {
    let start_err = |home: &TempDir, as_nobody: bool| {
        use std::os::unix::process::CommandExt;
        let exe = if as_nobody { shared_bin() } else { bin() };
        let mut cmd = gosling_at(&exe, home);
        cmd.args(["agent", "--port", "0"]).env("GOOSE_SERVER__SECRET_KEY", SECRET).env("GOOSE_TLS", "false");
        if as_nobody {
            cmd.uid(65534).gid(65534);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "it started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // A file where the config dir goes.
    let home = TempDir::new("why-file");
    std::fs::write(home.join("config"), b"not a dir").unwrap();
    let err = start_err(&home, false);
    assert!(err.contains("it is a file, not a directory") && err.contains("GOSLING_CONFIG_DIR"), "{err}");
    assert!(!err.contains("os error 17") && !err.contains("check the directory exists"), "{err}");
    if gosling::sys::euid() != 0 {
        return;
    }
    // A config.json its user may not read.
    use std::os::unix::fs::PermissionsExt;
    let home = TempDir::new("why-unreadable");
    for d in ["config", "state"] {
        std::fs::create_dir(home.join(d)).unwrap();
        std::fs::set_permissions(home.join(d), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(home.join("config/config.json"), b"{}").unwrap();
    std::fs::set_permissions(home.join("config/config.json"), std::fs::Permissions::from_mode(0o000)).unwrap();
    for p in [home.path().to_path_buf(), home.join("config"), home.join("state"), home.join("config/config.json")] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    }
    let err = start_err(&home, true);
    assert!(err.contains("config.json") && err.contains("ermission denied") && err.contains("may not use it"), "{err}");
    assert!(err.contains("chmod 600") && !err.contains("check the directory exists"), "{err}");
    // A state dir of another user: not "chmod 700", which would not help.
    let home = TempDir::new("why-owner");
    std::fs::create_dir(home.join("state")).unwrap();
    std::fs::set_permissions(home.join("state"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(home.join("state"), Some(65534), Some(65534)).unwrap();
    let err = start_err(&home, false);
    assert!(
        err.contains("is owned by uid 65534") && err.contains("GOSLING_STATE_DIR") && err.contains("chown"),
        "{err}"
    );
    assert!(!err.contains("chmod 700"), "{err}");
}
