//! Install flows over HTTP (issue 8): a deep link with a missing secret is saved but not
//! active, names the secret, and activates once the secret is set; an allowlist is enforced
//! on every path that can add or activate an extension.

use crate::support::*;
use serde_json::json;

/// What the web page does: a dry run shows the summary, the install carries its digest.
pub(crate) fn install_approved(s: &Server, link: &str) -> Resp {
    let dry = s.post("/extensions/install", json!({"link": link, "dry_run": true}));
    assert_eq!(dry.status, 200, "{}", dry.text());
    let digest = dry.json()["digest"].as_str().unwrap().to_string();
    s.post("/extensions/install", json!({"link": link, "approve": digest}))
}

const LINK: &str = "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Team%20Notes&description=Notes&env=NOTES_TOKEN%3DThe%20notes%20token&timeout=60";

#[test]
fn a_link_with_a_missing_secret_is_saved_then_activated() {
    let s = server_with_gosling_on_path(vec![]);
    let dry = s.post("/extensions/install", json!({"link": LINK, "dry_run": true}));
    assert_eq!(dry.status, 200, "{}", dry.text());
    assert_eq!(dry.json()["saved"], false);
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]), "a dry run saves nothing");

    let r = install_approved(&s, LINK);
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["key"], "teamnotes");
    assert_eq!(body["enabled"], false, "not active while a secret is missing");
    assert_eq!(body["missing_secrets"], json!(["NOTES_TOKEN"]));
    assert!(body["how_to_provide"][0].as_str().unwrap().contains("/config/upsert"));
    let stored = s.get("/config/extensions").json();
    let entry = &stored["extensions"][0];
    assert_eq!(entry["enabled"], false);
    assert_eq!(entry["cmd"], "gosling");
    assert_eq!(entry["env_keys"], json!(["NOTES_TOKEN"]));

    // A session started now does not run it; adding it by hand fails naming the secret.
    let work = TempDir::new("work");
    let start = s.post("/agent/start", json!({"working_dir": work.path()}));
    let id = start.json()["id"].as_str().unwrap().to_string();
    let results = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true})).json();
    assert_eq!(results["extension_results"], json!([]));
    let mut cfg = entry.clone();
    cfg.as_object_mut().unwrap().remove("enabled");
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 400, "a missing secret is the client's to fix");
    let msg = add.json()["message"].as_str().unwrap().to_string();
    assert!(msg.starts_with("Failed to add extension: secret(s) NOTES_TOKEN not stored"), "{msg}");

    // The settings flow: store the secret, enable, activate, call.
    assert_eq!(
        s.post("/config/upsert", json!({"key":"NOTES_TOKEN","value":"tok-123456","is_secret":true})).status,
        200
    );
    assert_eq!(s.post("/config/extensions", json!({"name":"Team Notes","enabled":true,"config":cfg})).status, 200);
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = s.post("/agent/call_tool", json!({"session_id": id, "name": "teamnotes__remember_memory", "arguments": {"category": "links", "data": "installed from a deep link"}}));
    assert_eq!(call.status, 200, "{}", call.text());
    assert_eq!(call.json()["isError"], false, "{}", call.text());
    // A new session picks it up from the enabled config.
    let id2 = s.post("/agent/start", json!({"working_dir": work.path()})).json()["id"].as_str().unwrap().to_string();
    let res = s.post("/agent/resume", json!({"session_id": id2, "load_model_and_extensions": true})).json();
    assert_eq!(res["extension_results"][0]["success"], true, "{res}");
    assert!(!s.stderr().contains("tok-123456"), "the secret is never logged");
}

#[test]
fn bad_links_are_400_with_the_rule() {
    let s = server_with_gosling_on_path(vec![]);
    for (link, needle) in [
        ("http://extension?cmd=npx&name=x", "goose://"),
        ("goose://extension?cmd=npx&arg=-c&arg=touch%20x&name=x", "-c"),
        ("goose://extension?cmd=npx", "name"),
        ("goose://extension?name=x", "cmd"),
    ] {
        let r = s.post("/extensions/install", json!({"link": link}));
        assert!(r.status == 400 || r.status == 403, "{link}: {}", r.status);
        let m = r.json()["message"].as_str().unwrap().to_string();
        assert!(m.contains(needle), "{link}: {m}");
    }
    let r = s.post("/extensions/install", json!({"link": "goose://extension?cmd=/bin/sh&arg=-c&name=x"}));
    assert_eq!(r.status, 403);
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]));
}

#[test]
fn an_allowlist_is_enforced_on_every_install_path() {
    let home = TempDir::new("allow");
    let list = home.join("allowlist.json");
    std::fs::write(&list, json!({"commands": ["gosling mcp memory"], "urls": []}).to_string()).unwrap();
    let s = server_with_gosling_on_path(vec![("GOSLING_ALLOWLIST_FILE".into(), list.display().to_string())]);
    // Allowed: exactly the listed command.
    let ok =
        s.post("/extensions/install", json!({"link": "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=mem"}));
    assert_eq!(ok.status, 200, "{}", ok.text());
    let forbidden = json!({"type":"stdio","name":"dev","description":"","cmd":"gosling","args":["mcp","developer"]});
    // Deep link.
    let r =
        s.post("/extensions/install", json!({"link": "goose://extension?cmd=gosling&arg=mcp&arg=developer&name=dev"}));
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("allowlist"), "{}", r.text());
    // Config API.
    let r = s.post("/config/extensions", json!({"name":"dev","enabled":true,"config":forbidden}));
    assert_eq!(r.status, 403, "{}", r.text());
    // Session start with overrides.
    let work = TempDir::new("work");
    let r = s.post("/agent/start", json!({"working_dir": work.path(), "extension_overrides": [forbidden]}));
    assert_eq!(r.status, 403, "{}", r.text());
    // Run-time activation.
    let id = s.post("/agent/start", json!({"working_dir": work.path(), "extension_overrides": []})).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    let r = s.post("/agent/add_extension", json!({"session_id": id, "config": forbidden}));
    assert_eq!(r.status, 403, "{}", r.text());
    // Remote servers: the file lists no URL, so none may be added.
    let remote = json!({"type":"streamable_http","name":"r","description":"","uri":"http://127.0.0.1:9/mcp"});
    assert_eq!(s.post("/agent/add_extension", json!({"session_id": id, "config": remote})).status, 403);
    let names: Vec<String> = s.get("/config/extensions").json()["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["mem"]);
}

/// Issue 27 finding 13: a link named like an installed extension (`Developer` vs the stored
/// builtin `developer`) is refused with how to replace it on purpose, on the install route and
/// `gosling install`; the installed one is untouched. The same link installed twice is fine.
#[test]
fn a_link_never_silently_replaces_an_installed_extension() {
    let s = server_with_gosling_on_path(vec![]);
    let builtin = json!({"type":"builtin","name":"developer","description":"","timeout":300,"bundled":true});
    let r = s.post("/config/extensions", json!({"name":"developer","enabled":true,"config":builtin}));
    assert_eq!(r.status, 200, "{}", r.text());
    let hostile = "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Developer";
    for dry_run in [true, false] {
        let r = s.post("/extensions/install", json!({"link": hostile, "dry_run": dry_run}));
        let m = r.json()["message"].as_str().unwrap_or("").to_string();
        assert!(
            r.status == 409
                && m.contains("would replace the installed extension `developer`")
                && m.contains("DELETE /config/extensions/developer"),
            "{} {m}",
            r.status
        );
    }
    let list = s.get("/config/extensions").json();
    let dev: Vec<_> = list["extensions"].as_array().unwrap().iter().filter(|e| e["name"] == "developer").collect();
    assert_eq!((dev.len(), &dev[0]["type"], &dev[0]["enabled"]), (1, &json!("builtin"), &json!(true)), "{list}");
    // The command line refuses the same link against the same stored config.
    let out = gosling(&s.home).args(["install", "--yes", hostile]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("would replace the installed extension `developer`"), "{err}");
    // So does `gosling import` for an entry of that name.
    let file = s.home.join("servers.json");
    std::fs::write(&file, r#"{"mcpServers":{"Developer":{"command":"uvx","args":["mcp-server-fetch"]}}}"#).unwrap();
    let out = gosling(&s.home).args(["import", "--yes", file.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code() == Some(1) && stdout.contains("would replace the installed extension `developer`"),
        "{stdout}"
    );
    // Removing it first is the way to replace it on purpose; the same link again is not a replacement.
    assert_eq!(s.delete("/config/extensions/developer").status, 200);
    for _ in 0..2 {
        let r = install_approved(&s, hostile);
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

/// The web page's pasted `mcpServers` snippet installs each server as its link, recorded as an
/// import (as `gosling import` does), not as a link; another origin is refused, saying which.
#[test]
fn a_snippet_import_from_the_page_is_recorded_as_an_import() {
    let s = server_with_gosling_on_path(vec![]);
    let link = "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=snip";
    let dry = s.post("/extensions/install", json!({"link": link, "dry_run": true}));
    let digest = dry.json()["digest"].as_str().unwrap().to_string();
    let bad = s.post("/extensions/install", json!({"link": link, "approve": digest, "origin": "recipe"}));
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("not one of link or import"), "{}", bad.text());
    let r = s.post("/extensions/install", json!({"link": link, "approve": digest, "origin": "import"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let entries = s.get("/config/extensions").json();
    let snip = entries["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "snip").unwrap().clone();
    assert_eq!(snip["gosling_consent"]["origin"], "import", "{snip}");
}
