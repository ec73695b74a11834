//! Issue 13 §7: gosling's own dirs must be private, nothing in them is followed through a
//! symbolic link, and the developer builtin cannot be raced out of its working dir.

use crate::support::*;
use serde_json::json;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn start_err(home: TempDir) -> String {
    match Server::try_start_in(home, ServerOpts::default()) {
        Ok(_) => panic!("the server started"),
        Err((_, e)) => e,
    }
}

fn mkdir(p: &Path, mode: u32) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn shared_or_foreign_state_and_config_dirs_are_a_startup_error() {
    for (dir, mode) in [("state", 0o770), ("state", 0o707), ("config", 0o775), ("config", 0o777)] {
        let home = TempDir::new("tf-mode");
        mkdir(&home.join(dir), mode);
        let err = start_err(home);
        let shown = format!("{dir} is writable by its group or others (mode {mode:o})");
        assert!(err.contains(&shown) && err.contains("chmod 700"), "{dir} {mode:o}: {err}");
    }
    if gosling::sys::euid() == 0 {
        // Owned by someone else (only root can make that here).
        let home = TempDir::new("tf-owner");
        mkdir(&home.join("state"), 0o700);
        std::os::unix::fs::chown(home.join("state"), Some(65534), Some(65534)).unwrap();
        let err = start_err(home);
        // Not "chmod 700", which would not help: a dir of this user's own, or chown (issue 38 item 9).
        assert!(err.contains("is owned by uid 65534, not by this user") && err.contains("GOSLING_STATE_DIR"), "{err}");
        assert!(!err.contains("chmod 700"), "{err}");
    }
    // A private dir (0700, or 0755 which others cannot write) is fine.
    let home = TempDir::new("tf-ok");
    mkdir(&home.join("state"), 0o755);
    mkdir(&home.join("config"), 0o700);
    let s = Server::start_in(home, ServerOpts::default());
    assert_eq!(s.get("/status").status, 200);
}

#[test]
fn symlinked_state_and_config_files_are_refused_at_start() {
    for (dir, name) in [
        ("state", "audit.jsonl"),
        ("state", "secret-key"),
        ("state", "sessions"),
        ("config", "config.json"),
        ("config", "config.json.lock"),
        ("config", "secrets.json"),
    ] {
        let home = TempDir::new("tf-link");
        mkdir(&home.join(dir), 0o700);
        let target = home.join("elsewhere");
        std::fs::write(&target, "{}").unwrap();
        symlink(&target, home.join(&format!("{dir}/{name}"))).unwrap();
        let err = start_err(home);
        assert!(
            err.contains(&format!("{dir}/{name} is a symbolic link")) && err.contains("does not follow links"),
            "{name}: {err}"
        );
    }
}

/// A session in `work` with the developer builtin, resumed: its id.
fn developer_session(s: &Server, work: &TempDir) -> String {
    let developer = json!({"type":"builtin","name":"developer","description":"","timeout":30});
    let id = start_session(s, work.path(), Some(vec![developer]));
    resume(s, &id);
    id
}

#[test]
fn links_planted_while_running_are_not_followed() {
    let s = Server::start();
    let work = TempDir::new("tf-run");
    let outside = work.join("outside.txt");
    std::fs::write(&outside, "untouched").unwrap();
    let state = s.home.join("state");
    // The audit log, planted before the first tool call.
    symlink(&outside, state.join("audit.jsonl")).unwrap();
    let id = developer_session(&s, &work);
    let r = s.post(
        "/agent/call_tool",
        json!({"session_id": id, "name": "developer__shell", "arguments": {"command": "true"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // A session's conversation file planted as a link to a file elsewhere: never read.
    let session_file = state.join(format!("sessions/{id}.jsonl"));
    let planted = json!({"id": "m1", "role": "user", "created": 1, "content": [{"type": "text", "text": "PLANTED"}], "metadata": {"userVisible": true, "agentVisible": true}});
    std::fs::write(work.join("fake-session.jsonl"), format!("{planted}\n")).unwrap();
    let _ = std::fs::remove_file(&session_file);
    symlink(work.join("fake-session.jsonl"), &session_file).unwrap();
    let got = s.get(&format!("/sessions/{id}"));
    assert!(!got.text().contains("PLANTED"), "a linked conversation file was read: {}", got.text());
    assert!(got.status == 200 || got.text().contains("is a symbolic link"), "{}", got.text());
    // A config lock file swapped for a link.
    let config = s.home.join("config");
    let _ = std::fs::remove_file(config.join("config.json.lock"));
    symlink(work.join("lock-target"), config.join("config.json.lock")).unwrap();
    let up = s.post("/config/upsert", json!({"key": "X", "value": "1", "is_secret": false}));
    assert_ne!(up.status, 200, "{}", up.text());
    assert!(up.text().contains("config.json.lock is a symbolic link"), "{}", up.text());
    assert!(!work.join("lock-target").exists(), "the lock link was followed");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "untouched");
    assert!(s.stderr().contains("audit.jsonl is a symbolic link"), "the refusal is logged");
    assert_eq!(s.get("/status").status, 200);
}

#[test]
fn the_developer_write_cannot_escape_through_a_swapped_symlink() {
    let s = Server::start();
    let work = TempDir::new("tf-race");
    let outside = TempDir::new("tf-race-out");
    let (real, link, d) = (work.join("dir_real"), work.join("dir_link"), work.join("d"));
    std::fs::create_dir(&real).unwrap();
    symlink(outside.path(), &link).unwrap();
    let id = developer_session(&s, &work);
    // `d` flips between the real directory and a link to the outside, as fast as it can.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(&real, &d);
                std::thread::yield_now();
                let _ = std::fs::rename(&d, &real);
                let _ = std::fs::rename(&link, &d);
                std::thread::yield_now();
                let _ = std::fs::rename(&d, &link);
                flips += 1;
            }
            flips
        })
    };
    let (mut written, mut refused) = (0, 0);
    for i in 0..300 {
        let r = s.post(
            "/agent/call_tool",
            json!({"session_id": id, "name": "developer__text_editor",
            "arguments": {"command": "write", "path": format!("d/f{i}.txt"), "file_text": "x"}}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        if r.json()["isError"] == true {
            refused += 1;
        } else {
            written += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 0);
    let escaped: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(escaped.is_empty(), "writes escaped the working dir ({written} written, {refused} refused): {escaped:?}");
    assert!(written + refused == 300);
    // And without a race: a link planted inside is judged where it leads, each time.
    symlink(outside.path(), work.join("planted")).unwrap();
    let r = s.post(
        "/agent/call_tool",
        json!({"session_id": id, "name": "developer__text_editor",
        "arguments": {"command": "write", "path": "planted/x.txt", "file_text": "x"}}),
    );
    assert!(r.text().contains("outside the working directory"), "{}", r.text());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn the_install_command_refuses_a_shared_config_dir_and_a_linked_config_file() {
    let link = "goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch&description=Fetch+pages";
    let home = TempDir::new("tf-cli");
    mkdir(&home.join("config"), 0o777);
    let out = gosling(&home).args(["install", "--yes", link]).env_remove("GOOSE_ALLOWLIST").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("config is writable by its group or others (mode 777)") && err.contains("chmod 700"), "{err}");
    assert!(!home.join("config/config.json").exists());

    let home = TempDir::new("tf-cli2");
    mkdir(&home.join("config"), 0o700);
    std::fs::write(home.join("elsewhere.json"), "{}").unwrap();
    symlink(home.join("elsewhere.json"), home.join("config/config.json")).unwrap();
    let out = gosling(&home).args(["install", "--yes", link]).env_remove("GOOSE_ALLOWLIST").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("config/config.json is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(home.join("elsewhere.json")).unwrap(), "{}");
}
