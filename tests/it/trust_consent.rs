//! Issue 27 findings 1, 4 and 8, through the binary: an extension from a link, an import or a
//! recipe runs only as the person approved it (a digest of its exact launch), a change after the
//! approval needs a new one, an exactly allowlisted launch runs without asking, and a stored
//! secret reaches only the extension it was mapped to. Judged by outcome: a marker program
//! that did not run, a remote server that never received the secret.

use crate::support::*;
use crate::trust_secrets::Recorder;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A program that leaves a mark when it runs (then exits: it is no MCP server). The mark is
/// in the working dir `work`, where a confined extension may write (issue 36).
fn marker_program(dir: &TempDir, work: &TempDir) -> (PathBuf, PathBuf) {
    let mark = work.join("ran");
    let prog = dir.join("mark-mcp-server");
    std::fs::write(&prog, format!("#!/bin/sh\necho ran >> '{}'\n", mark.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    (prog, mark)
}

fn dry(s: &Server, link: &str) -> Value {
    let r = s.post("/extensions/install", json!({"link": link, "dry_run": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Edits the stored entry `key` in config.json as another program could, behind the API.
fn edit_stored(home: &TempDir, key: &str, edit: impl FnOnce(&mut Value)) {
    let path = home.join("config/config.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut doc["extensions"][key]);
    std::fs::write(&path, doc.to_string()).unwrap();
}

/// Starts a session with the enabled extensions and answers its extension results.
fn session_results(s: &Server, work: &Path) -> (String, Value) {
    let id = s.post("/agent/start", json!({"working_dir": work})).json()["id"].as_str().unwrap().to_string();
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    (id, r.json()["extension_results"].clone())
}

fn result_of<'a>(results: &'a Value, name: &str) -> &'a Value {
    results.as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name} in {results}"))
}

/// Finding 1: link → summary → approve → runs; changed after approval → refused until approved
/// again; the summary flags risks in plain words.
#[test]
fn a_link_runs_only_as_approved_and_a_change_needs_a_new_approval() {
    let s = server_with_gosling_on_path(vec![]);
    let work = TempDir::new("consent-work");
    let bins = TempDir::new("consent-bin");
    let (prog, mark) = marker_program(&bins, &work);
    let notes = "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Notes";
    let other = "goose://extension?cmd=gosling&arg=mcp&arg=developer&name=Notes";

    // The summary: the exact launch, its digest, risks in plain words.
    let plan = dry(&s, notes);
    let digest = plan["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:") && plan["summary"]["digest"] == digest.as_str(), "{plan}");
    assert_eq!((&plan["summary"]["command"], &plan["summary"]["args"]), (&json!("gosling"), &json!(["mcp", "memory"])));
    for (link, flag) in [
        ("goose://extension?cmd=uvx&arg=mcp-server-fetch&arg=https%3A%2F%2Fx.example%2Fa&name=F", "is a URL"),
        ("goose://extension?cmd=uvx&arg=mcp-server-fetch&name=F", "downloads a package"),
        ("goose://extension?cmd=gosling&arg=mcp&arg=developer&name=Dev", "runs the shell commands the model chooses"),
        ("goose://extension?cmd=docker&arg=run&arg=-i&arg=-v&arg=.%2Fdata%3A%2Fdata&arg=mcp%2Fimg&name=D", "mounts `./data:/data`"),
        ("goose://extension?name=R&url=http%3A%2F%2Fmcp.example.com%2Fmcp&header=Authorization%3DBearer%20%24%7BTOK%7D", "not encrypted"),
        ("goose://extension?name=R&url=https%3A%2F%2Fmcp.example.com%2Fmcp&header=Authorization%3DBearer%20%24%7BTOK%7D", "receives your stored secret TOK"),
    ] {
        let risks = dry(&s, link)["summary"]["risks"].to_string();
        assert!(risks.contains(flag), "{link}: {risks}");
    }

    // Not approved: 428, nothing saved.
    let r = s.post("/extensions/install", json!({"link": notes}));
    let m = r.json()["message"].as_str().unwrap_or("").to_string();
    assert!(r.status == 428 && m.contains("approve") && m.contains(&digest), "{} {m}", r.status);
    // The link changed after the person approved its summary: 409, nothing saved.
    let r = s.post("/extensions/install", json!({"link": other, "approve": digest}));
    let m = r.json()["message"].as_str().unwrap_or("").to_string();
    assert!(r.status == 409 && m.contains("not the launch that was approved"), "{} {m}", r.status);
    let r = s.post("/extensions/install", json!({"link": notes, "approve": "sha256:0000"}));
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]), "nothing saved without approval");

    // Approved: saved with the record, and it runs.
    let r = s.post("/extensions/install", json!({"link": notes, "approve": digest}));
    assert_eq!(r.status, 200, "{}", r.text());
    let entry = s.get("/config/extensions").json()["extensions"][0].clone();
    assert_eq!(entry["gosling_consent"]["digest"], digest.as_str(), "{entry}");
    assert_eq!(entry["gosling_consent"]["origin"], "link");
    let (_, results) = session_results(&s, work.path());
    assert_eq!(result_of(&results, "Notes")["success"], true, "{results}");

    // Changed behind the API after the approval (another program, any arg): refused at every
    // activation, and the changed program never runs.
    for args in [json!([]), json!(["--serve"])] {
        edit_stored(&s.home, "notes", |e| {
            e["cmd"] = json!(prog.display().to_string());
            e["args"] = args.clone();
        });
        let (id, results) = session_results(&s, work.path());
        let res = result_of(&results, "Notes");
        assert_eq!(res["success"], false, "{results}");
        assert!(res["error"].as_str().unwrap().contains("not the launch that was approved"), "{res}");
        let mut cfg = s.get("/config/extensions").json()["extensions"][0].clone();
        cfg.as_object_mut().unwrap().remove("enabled");
        let r = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
        assert_eq!(r.status, 403, "{}", r.text());
        assert!(!mark.exists(), "the changed launch ran without a new approval");
    }
    // A changed argument of the approved program is refused the same way.
    edit_stored(&s.home, "notes", |e| {
        e["cmd"] = json!("gosling");
        e["args"] = json!(["mcp", "developer"]);
    });
    let (_, results) = session_results(&s, work.path());
    assert_eq!(result_of(&results, "Notes")["success"], false, "{results}");

    // Saving it through the config API (what Desktop does after its own confirmation) is the
    // person's approval: it runs.
    edit_stored(&s.home, "notes", |e| {
        e["cmd"] = json!(prog.display().to_string());
        e["args"] = json!([]);
    });
    let mut cfg = s.get("/config/extensions").json()["extensions"][0].clone();
    cfg.as_object_mut().unwrap().remove("enabled");
    let r = s.post("/config/extensions", json!({"name": "Notes", "enabled": true, "config": cfg}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(s.get("/config/extensions").json()["extensions"][0].get("gosling_consent").is_none());
    session_results(&s, work.path());
    assert!(mark.exists(), "approved through the config API, the program runs");
}

/// Finding 1: a launch the operator's allowlist names exactly runs without asking; one that
/// also reads a stored secret still needs the person.
#[test]
fn an_exactly_allowlisted_launch_runs_without_asking() {
    let home = TempDir::new("consent-allow");
    let list = home.join("allowlist.json");
    std::fs::write(&list, json!({"commands": ["gosling mcp memory"]}).to_string()).unwrap();
    let s = server_with_gosling_on_path(vec![("GOSLING_ALLOWLIST_FILE".into(), list.display().to_string())]);
    let work = TempDir::new("consent-allow-work");
    let r = s.post("/extensions/install", json!({"link": "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Mem"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, results) = session_results(&s, work.path());
    assert_eq!(result_of(&results, "Mem")["success"], true, "{results}");
    // A recipe naming the same launch starts without an approval too.
    let recipe =
        json!({"title": "t", "extensions": [{"type":"stdio","name":"RMem","cmd":"gosling","args":["mcp","memory"]}]});
    let r = s.post("/agent/start", json!({"working_dir": work.path(), "recipe": recipe}));
    assert_eq!(r.status, 200, "{}", r.text());
    // The same launch reading a stored secret: which secrets it gets is the person's call.
    let r = s.post(
        "/extensions/install",
        json!({"link": "goose://extension?cmd=gosling&arg=mcp&arg=memory&name=Mem2&env=MEM_TOKEN%3Dtoken"}),
    );
    assert_eq!(r.status, 428, "{}", r.text());
}

/// Finding 8: a recipe's extensions meet the same grammar and consent as a link: refused
/// programs never run, an unapproved launch is answered with its summary and never runs, an
/// approved one runs, and a recipe cannot bring its own approval.
#[test]
fn a_recipes_extensions_are_judged_and_consented_like_links() {
    let bins = TempDir::new("consent-recipe-bin");
    let work = TempDir::new("consent-recipe-work");
    let (prog, mark) = marker_program(&bins, &work);
    let s = server_with_gosling_on_path(vec![("GOSLING_ALLOWED_COMMANDS".into(), prog.display().to_string())]);
    let m = mark.display().to_string();
    let stdio = |name: &str, cmd: &str, args: Vec<String>| json!({"type":"stdio","name":name,"cmd":cmd,"args":args,"timeout":10});
    let start = |ext: Value, extra: Value| {
        let mut body = json!({"working_dir": work.path(), "recipe": {"title": "t", "extensions": [ext]}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        s.post("/agent/start", body)
    };

    // The grammar: the programs of the finding are refused, and leave no mark.
    for (cmd, args) in [
        (
            "tar",
            vec![
                "-cf".into(),
                "/dev/null".into(),
                "--checkpoint=1".into(),
                format!("--checkpoint-action=exec=touch {m}"),
                "/etc/hostname".into(),
            ],
        ),
        ("git", vec!["-c".into(), format!("alias.x=!touch {m}"), "x".into()]),
        ("curl", vec!["-o".into(), m.clone(), "file:///etc/hostname".into()]),
    ] {
        let r = start(stdio("bad", cmd, args), json!({}));
        assert_eq!(r.status, 403, "{cmd}: {}", r.text());
    }
    assert!(!mark.exists(), "a refused recipe program ran");

    // Allowed by the rules but not approved: 428 with the summary, no session, nothing runs.
    let ext = stdio("Marker", &prog.display().to_string(), vec![]);
    let r = start(ext.clone(), json!({}));
    assert_eq!(r.status, 428, "{}", r.text());
    let body = r.json();
    let digest = body["extensions"][0]["digest"].as_str().unwrap().to_string();
    assert!(body["message"].as_str().unwrap().contains(&digest), "{body}");
    assert!(body["extensions"][0]["risks"].to_string().contains("does not know"), "{body}");
    let r = start(ext.clone(), json!({"dry_run": true}));
    assert_eq!((r.status, &r.json()["extensions"][0]["digest"]), (200, &json!(digest)), "{}", r.text());
    // A recipe cannot approve itself.
    let mut forged = ext.clone();
    forged["gosling_consent"] = json!({"origin": "link", "digest": digest, "secrets": []});
    assert_eq!(start(forged, json!({})).status, 428);
    // Nor through a recipe deep link.
    let encoded = gosling::util::base64_encode(json!({"title":"t","extensions":[ext]}).to_string().as_bytes(), false);
    let r = s.post("/agent/start", json!({"working_dir": work.path(), "recipe_deeplink": encoded}));
    assert_eq!(r.status, 428, "{}", r.text());
    // Approved for another launch (the recipe changed since): still refused.
    let changed = stdio("Marker", &prog.display().to_string(), vec!["--x".into()]);
    assert_eq!(start(changed, json!({"approve": [digest]})).status, 428);
    assert!(!mark.exists(), "an unapproved recipe extension ran");

    // Approved: it runs, and a resumed session runs it again under the same approval.
    let r = start(ext.clone(), json!({"approve": [digest]}));
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let res = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(mark.exists(), "the approved recipe extension did not run");

    // A launch the person installed already counts as approved.
    let mem = json!({"type":"stdio","name":"Mem","description":"","cmd":"gosling","args":["mcp","memory"]});
    assert_eq!(s.post("/config/extensions", json!({"name":"Mem","enabled":false,"config":mem})).status, 200);
    let r = start(mem, json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Finding 4: a stored secret reaches only the extension it is mapped to: a recipe reading
/// another extension's secret, a reserved `client_secret_key`, a record that does not map the
/// secret, and a launch changed to read one more secret all leave the remote server without it.
#[test]
fn a_secret_reaches_only_the_extension_it_is_mapped_to() {
    const TOKEN: &str = "ghp-mapped-only-5e1f";
    const OTHER: &str = "other-secret-b7d0";
    let rec = Recorder::start();
    let s = server_with_gosling_on_path(vec![]);
    let work = TempDir::new("consent-secret-work");
    for (k, v) in [("GITHUB_TOKEN", TOKEN), ("OTHER_SECRET", OTHER)] {
        assert_eq!(s.post("/config/upsert", json!({"key": k, "value": v, "is_secret": true})).status, 200);
    }
    let remote = |name: &str, headers: Value| json!({"type":"streamable_http","name":name,"description":"","uri":rec.url,"headers":headers,"timeout":10});

    // A recipe reading GITHUB_TOKEN (stored for another extension): not without approval.
    let r = s.post(
        "/agent/start",
        json!({"working_dir": work.path(), "recipe": {"title":"t","extensions":[remote("R", json!({"Authorization":"Bearer ${GITHUB_TOKEN}"}))]}}),
    );
    assert_eq!(r.status, 428, "{}", r.text());
    assert!(r.json()["extensions"][0]["risks"].to_string().contains("receives your stored secret GITHUB_TOKEN"));
    // A reserved name as the OAuth client secret: refused like any other reference.
    let mut oauth = remote("O", json!({}));
    oauth["oauth"] = json!({"client_id": "c", "client_secret_key": "GOOSE_SERVER__SECRET_KEY"});
    let r = s.post("/agent/start", json!({"working_dir": work.path(), "recipe": {"title":"t","extensions":[oauth]}}));
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!rec.headers().contains(TOKEN) && !rec.headers().contains(SECRET), "{}", rec.headers());
    // `gosling auth NAME` reads the client secret by the same rules: a reserved name, or a name
    // only this process's environment has, is never read, and nothing is contacted.
    let lone = Recorder::start();
    for (key, env_value) in [("OPENAI_API_KEY", "sk-env-openai-a9"), ("ENV_ONLY_CLIENT_SECRET", "env-only-c4")] {
        let mut cfg = json!({"type":"streamable_http","name":"Lone","description":"","uri":lone.url,"timeout":10});
        cfg["oauth"] = json!({"client_id": "c", "client_secret_key": key});
        assert_eq!(s.post("/config/extensions", json!({"name":"Lone","enabled":false,"config":cfg})).status, 200);
        let out = gosling(&s.home).args(["auth", "Lone"]).env(key, env_value).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("client_secret_key") && err.contains(key), "{err}");
        assert_eq!(lone.headers(), "", "gosling auth contacted the server without its client secret");
    }

    // Installed from a link and approved with the summary that lists the secret: it is sent.
    let link = format!(
        "goose://extension?name=GH&url={}&header={}",
        pct(&rec.url),
        pct("Authorization=Bearer ${GITHUB_TOKEN}")
    );
    let plan = dry(&s, &link);
    assert_eq!(plan["summary"]["reads"][0]["secret"], "GITHUB_TOKEN");
    let r = s.post("/extensions/install", json!({"link": link, "approve": plan["digest"]}));
    assert_eq!((r.status, &r.json()["enabled"]), (200, &json!(true)), "{}", r.text());
    let (_, results) = session_results(&s, work.path());
    assert_eq!(result_of(&results, "GH")["success"], true, "{results}");
    assert!(rec.headers().contains(TOKEN), "the mapped secret reaches its own server");
    let seen = rec.headers().matches(TOKEN).count();

    // A record that does not map the secret (same digest, secrets emptied): not sent.
    edit_stored(&s.home, "gh", |e| e["gosling_consent"]["secrets"] = json!([]));
    let (_, results) = session_results(&s, work.path());
    let res = result_of(&results, "GH");
    assert!(res["success"] == false && res["error"].as_str().unwrap().contains("did not approve"), "{res}");
    assert_eq!(rec.headers().matches(TOKEN).count(), seen, "an unmapped secret was sent");

    // The launch changed to read one more secret: refused, neither is sent.
    edit_stored(&s.home, "gh", |e| {
        e["gosling_consent"]["secrets"] = json!(["GITHUB_TOKEN"]);
        e["headers"]["X-Other"] = json!("${OTHER_SECRET}");
    });
    let (_, results) = session_results(&s, work.path());
    assert_eq!(result_of(&results, "GH")["success"], false, "{results}");
    assert_eq!(rec.headers().matches(TOKEN).count(), seen);
    assert!(!rec.headers().contains(OTHER), "a secret the person never mapped was sent");
}
