//! `/config/extensions` and the key/value config routes, against goose's shapes.

use crate::contract;
use crate::support::{Server, ServerOpts, TempDir};
use serde_json::{json, Value};

/// goose-contract.md §5's examples, one per in-scope type.
fn goose_examples() -> Vec<Value> {
    vec![
        json!({"type":"stdio","name":"everything","description":"","cmd":"npx","args":["-y","@modelcontextprotocol/server-everything"],"envs":{"LOG_LEVEL":"info"},"env_keys":["API_TOKEN"],"timeout":300}),
        json!({"type":"streamable_http","name":"remote","description":"","uri":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer ${API_TOKEN}"},"env_keys":["API_TOKEN"],"timeout":60}),
        json!({"type":"builtin","name":"developer","display_name":"Developer","description":"","timeout":300,"bundled":true}),
        json!({"type":"inline_python","name":"hello","description":"","code":"from mcp.server.fastmcp import FastMCP\n...","dependencies":["requests"],"timeout":120}),
        json!({"type":"frontend","name":"ui","description":"","tools":[{"name":"pick_file","inputSchema":{"type":"object","properties":{}}}],"instructions":"Use pick_file to ask the user for a file"}),
        json!({"type":"sse","name":"old","description":"","uri":"http://localhost:8000/sse"}),
    ]
}

/// What goose would answer for a config it was given: the same fields plus its defaults.
fn with_goose_defaults(mut c: Value) -> Value {
    let o = c.as_object_mut().unwrap();
    let ty = o["type"].as_str().unwrap().to_string();
    if ty != "sse" {
        o.entry("available_tools").or_insert(json!([]));
    }
    if ty == "stdio" || ty == "streamable_http" {
        o.entry("envs").or_insert(json!({}));
        o.entry("env_keys").or_insert(json!([]));
    }
    if ty == "streamable_http" {
        o.entry("headers").or_insert(json!({}));
    }
    c
}

#[test]
fn crud_round_trip_for_each_type() {
    let s = Server::start();
    // The examples read API_TOKEN from the secrets store; without it they would be saved disabled.
    let r = s.post("/config/upsert", json!({"key":"API_TOKEN","value":"t","is_secret":true}));
    assert_eq!(r.status, 200);
    for config in goose_examples() {
        let name = config["name"].as_str().unwrap().to_string();
        let r = s.post("/config/extensions", json!({"name": name, "enabled": true, "config": config}));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), json!(format!("Added extension {name}")));
        contract::check("POST", "/config/extensions", 200, &r.json());
        let again = s.post("/config/extensions", json!({"name": name, "enabled": false, "config": config}));
        assert_eq!(again.json(), json!(format!("Updated extension {name}")));
    }
    let got = s.get("/config/extensions");
    assert_eq!(got.status, 200);
    let body = got.json();
    contract::check("GET", "/config/extensions", 200, &body);
    let entries = body["extensions"].as_array().unwrap();
    assert_eq!(entries.len(), 6);
    for config in goose_examples() {
        let mut want = with_goose_defaults(config.clone());
        want.as_object_mut().unwrap().insert("enabled".into(), json!(false));
        let have = entries.iter().find(|e| e["name"] == config["name"]).unwrap();
        assert_eq!(have, &want, "entry for {}", config["name"]);
        // What we write, goose reads: the entry re-posted is accepted unchanged.
        let mut cfg = have.clone();
        cfg.as_object_mut().unwrap().remove("enabled");
        let r = s.post("/config/extensions", json!({"name": config["name"], "enabled": false, "config": cfg}));
        assert_eq!(r.status, 200);
    }
    assert_eq!(body["warnings"], json!(["'old': SSE is unsupported, migrate to streamable_http"]));
    // Delete by normalized key: "My Tool", "mytool" and "MyTool" are the same entry.
    let r = s.post(
        "/config/extensions",
        json!({"name":"My Tool","enabled":true,"config":{"type":"builtin","name":"My Tool"}}),
    );
    assert_eq!(r.status, 200);
    let d = s.delete("/config/extensions/MyTool");
    assert_eq!((d.status, d.json()), (200, json!("Removed extension MyTool")));
    contract::check("DELETE", "/config/extensions/{name}", 200, &d.json());
    assert_eq!(s.delete("/config/extensions/My%20Tool").status, 404);
    for config in goose_examples() {
        assert_eq!(s.delete(&format!("/config/extensions/{}", config["name"].as_str().unwrap())).status, 200);
    }
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]));
}

#[test]
fn invalid_configs_are_400_with_the_fix() {
    let s = Server::start();
    let cases = [
        (json!({"type":"streamable_http","name":"r","url":"https://x/mcp"}), "use `uri`"),
        (json!({"type":"stdio","name":"r","cmd":"x"}), "`args`"),
        (json!({"type":"carrier_pigeon","name":"r"}), "unknown type"),
        (json!({"type":"streamable_http","name":"r","uri":"ftp://x"}), "not an http"),
        (json!({"type":"stdio","name":" ","cmd":"x","args":[]}), "`name`"),
    ];
    for (config, needle) in cases {
        let r = s.post("/config/extensions", json!({"name":"r","enabled":true,"config":config}));
        assert_eq!(r.status, 400, "{config}");
        let msg = r.json()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(needle), "{config}: {msg}");
    }
    // Code-loading variables are the policy's refusal (403), with the family and the reason.
    let r = s.post(
        "/config/extensions",
        json!({"name":"r","enabled":true,"config":{"type":"stdio","name":"r","cmd":"x","args":[],"envs":{"LD_PRELOAD":"/evil.so"}}}),
    );
    assert_eq!(r.status, 403);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(msg.contains("LD_PRELOAD") && msg.contains("environment rule") && msg.contains("LD_*"), "{msg}");
    let r = s.post("/config/extensions", json!({"enabled":true,"config":{"type":"builtin","name":"x"}}));
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("`name`"));
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]), "nothing persisted");
}

#[test]
fn fifty_concurrent_posts_all_persist() {
    let s = Server::start();
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let url = s.url("/config/extensions");
            std::thread::spawn(move || {
                let body = json!({"name": format!("ext{i}"), "enabled": true, "config": {"type":"stdio","name":format!("ext{i}"),"cmd":"echo-mcp","args":[]}});
                crate::support::http("POST", &url, Some(crate::support::SECRET), Some(body.to_string().as_bytes())).status
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert_eq!(s.get("/config/extensions").json()["extensions"].as_array().unwrap().len(), 50);
}

#[test]
fn kill_9_during_a_write_storm_leaves_a_loadable_config() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let s = Server::start();
    let url = s.url("/config/extensions");
    let stop = Arc::new(AtomicBool::new(false));
    let saved = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, stop, saved) = (url.clone(), stop.clone(), saved.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let body = json!({"name": format!("w{w}-{i}"), "enabled": true, "config": {"type":"builtin","name":format!("w{w}-{i}"),"description":"x".repeat(2000)}});
                    let r = std::panic::catch_unwind(|| crate::support::http("POST", &url, Some(crate::support::SECRET), Some(body.to_string().as_bytes())));
                    if r.is_ok_and(|r| r.status == 200) {
                        saved.fetch_add(1, Ordering::SeqCst);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // Kill mid-storm: once some writes have landed (however slow the machine), with more in flight.
    let landed = crate::support::wait_for(std::time::Duration::from_secs(30), || {
        (saved.load(Ordering::SeqCst) >= 8).then_some(())
    });
    assert!(landed.is_some(), "the writers got no answers");
    let home = s.kill();
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        let _ = w.join();
    }
    let s = Server::start_in(home, ServerOpts::default());
    let got = s.get("/config/extensions");
    assert_eq!(got.status, 200);
    assert!(got.json()["extensions"].as_array().unwrap().len() >= 8, "every answered write is on disk");
    assert!(got.json()["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn key_values_and_secrets() {
    let s = Server::start();
    let r = s.post("/config/upsert", json!({"key":"GOOSE_MODEL","value":"gpt-x","is_secret":false}));
    assert_eq!(r.status, 200);
    contract::check("POST", "/config/upsert", 200, &r.json());
    let r = s.post("/config/upsert", json!({"key":"API_TOKEN","value":"sekrit-value-42","is_secret":true}));
    assert_eq!(r.status, 200);
    let read = s.post("/config/read", json!({"key":"GOOSE_MODEL","is_secret":false}));
    assert_eq!(read.json(), json!("gpt-x"));
    contract::check_resp("POST", "/config/read", &read);
    let secret = s.post("/config/read", json!({"key":"API_TOKEN","is_secret":true}));
    assert_eq!(secret.status, 200);
    assert!(!secret.text().contains("sekrit"), "a secret is never echoed back");
    let all = s.get("/config");
    contract::check("GET", "/config", 200, &all.json());
    assert_eq!(all.json()["config"]["GOOSE_MODEL"], "gpt-x");
    assert!(!all.text().contains("sekrit"));
    use std::os::unix::fs::PermissionsExt;
    let sp = s.home.join("config/secrets.json");
    assert_eq!(std::fs::metadata(&sp).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(s.home.join("config/config.json")).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!s.stderr().contains("sekrit"), "secrets are never logged");
    // As goosed: a key that is not set reads as 200 null (Desktop's fresh-install check).
    for is_secret in [false, true] {
        let missing = s.post("/config/read", json!({"key":"NOPE","is_secret":is_secret}));
        assert_eq!((missing.status, missing.json()), (200, Value::Null), "is_secret {is_secret}");
        contract::check_resp("POST", "/config/read", &missing);
    }
    let rm = s.post("/config/remove", json!({"key":"API_TOKEN","is_secret":true}));
    assert_eq!(rm.status, 200);
    contract::check("POST", "/config/remove", 200, &rm.json());
    assert_eq!(s.post("/config/remove", json!({"key":"API_TOKEN","is_secret":true})).status, 404);
    assert_eq!(s.post("/config/upsert", json!({"key":"extensions","value":{},"is_secret":false})).status, 400);
    let _ = TempDir::new("unused");
}

/// A turn reads its settings again only when their files changed (one `stat` of each while they
/// do not: BENCHMARKS.md, issue 40's fifth pass), and a change made by another process between
/// two turns is what the next turn runs with: `config.json` replaced by another program,
/// `secrets.json` written by another `gosling` (`gosling secret set`), `config.json` written in
/// place with its length unchanged. Each turn goes to the model its settings name then.
#[test]
fn settings_changed_by_another_process_between_two_turns_take_effect_on_the_next() {
    use crate::fake_llm::{text_turn, FakeLlm};
    use crate::reply::{user_text, ReplyStream};
    use crate::support::{gosling, start_session, work_dir};
    use std::io::Write;
    let models: Vec<FakeLlm> = (0..5).map(|i| FakeLlm::start(vec![text_turn(&format!("from model {i}"))])).collect();
    let home = TempDir::new("settings-between-turns");
    let cwd = work_dir(&home);
    let config_path = home.join("config").join("config.json");
    // Another program's edit: a whole new file put in place (as editors and gosling write it).
    let replace_config = |host: Option<String>| {
        let mut doc: serde_json::Map<String, Value> =
            std::fs::read(&config_path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        match host {
            Some(h) => doc.insert("OPENAI_HOST".into(), json!(h)),
            None => doc.remove("OPENAI_HOST"),
        };
        let tmp = config_path.with_extension("json.edit");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        std::fs::rename(&tmp, &config_path).unwrap();
    };
    std::fs::create_dir_all(home.join("config")).unwrap();
    replace_config(Some(models[0].url()));
    let env = vec![("GOOSE_PROVIDER".to_string(), "openai".to_string()), ("GOOSE_MODEL".to_string(), "m".to_string())];
    let s = Server::start_in(home, ServerOpts { env, ..Default::default() });
    let id = start_session(&s, std::path::Path::new(&cwd), Some(vec![]));
    let turn = |n: usize| {
        let events = ReplyStream::open(&s, &id, user_text(&format!("turn {n}"))).all();
        let said = format!("from model {n}");
        assert!(events.iter().any(|e| e.to_string().contains(&said)), "turn {n} went to model {n}: {events:?}");
        for (i, m) in models.iter().enumerate() {
            let asked = m.requests().len();
            assert_eq!(asked, usize::from(i <= n), "model {i} asked {asked} times after turn {n}");
        }
    };
    turn(0);
    replace_config(Some(models[1].url()));
    turn(1);
    // Out of config.json, into secrets.json by another gosling process.
    replace_config(None);
    let mut set = gosling(&s.home)
        .args(["secret", "set", "OPENAI_HOST"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    set.stdin.take().unwrap().write_all(models[2].url().as_bytes()).unwrap();
    assert!(set.wait().unwrap().success(), "gosling secret set OPENAI_HOST");
    turn(2);
    replace_config(Some(models[3].url()));
    turn(3);
    // Written in place, its length unchanged (padded with spaces if the new port is shorter):
    // the same inode and size, only its times tell it apart.
    let (old, new) = (models[3].url(), models[4].url());
    let before = std::fs::read_to_string(&config_path).unwrap();
    assert!(new.len() <= old.len(), "{new} {old}");
    let edited = before.replace(&format!("\"{old}\""), &format!("\"{new}\"{}", " ".repeat(old.len() - new.len())));
    assert_eq!(edited.len(), before.len());
    let mut f = std::fs::OpenOptions::new().write(true).open(&config_path).unwrap();
    f.write_all(edited.as_bytes()).unwrap();
    drop(f);
    turn(4);
}
