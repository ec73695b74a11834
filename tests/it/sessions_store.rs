//! The session store through the real binary: sessions of the one-file layout (a fixture as
//! earlier versions wrote it) listed, read and continued; a torn last line after a crash; a
//! corrupt line reported with its file; one server per state directory.

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
    Reply::sse(&[oa_text(text), oa_finish("stop"), OA_DONE.to_string()])
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

    let r = s.get(&format!("/sessions/{bad}"));
    assert_eq!(r.status, 500);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(msg.contains(&format!("{bad}.jsonl")) && msg.contains("line 2"), "{msg}");
    assert!(msg.contains("left untouched"), "{msg}");
    // Still listed (from its metadata), and its file is as it was.
    let list = s.get("/sessions").json();
    assert!(list["sessions"].as_array().unwrap().iter().any(|x| x["id"] == bad.as_str()));
    assert_eq!(std::fs::read(&bad_file).unwrap(), bytes);
}

#[test]
fn a_second_server_on_the_same_state_directory_is_refused() {
    let s = Server::start();
    let out = gosling(&s.home)
        .args(["agent", "--port", "0"])
        .env("GOOSE_SERVER__SECRET_KEY", SECRET)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another gosling server uses these sessions") && err.contains("GOSLING_STATE_DIR"), "{err}");
    assert_eq!(s.get("/status").status, 200, "the first one serves on");
}
