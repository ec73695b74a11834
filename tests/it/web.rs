//! The built-in web page against the real binary: served without the key, strict CSP and
//! anti-framing headers, no inline script, nothing secret, and never CORS headers.

use crate::support::*;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn assert_secure(r: &Resp, what: &str) {
    assert_eq!(r.header("content-security-policy"), Some(CSP), "{what}: CSP");
    assert_eq!(r.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{what}");
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
}

#[test]
fn page_and_assets_are_public_with_strict_headers() {
    let s = Server::start_with(ServerOpts {
        env: vec![("OPENAI_API_KEY".into(), "sk-test-web-page-should-not-leak".into())],
        ..Default::default()
    });
    let page = http("GET", &s.url("/"), None, None);
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert_secure(&page, "/");
    let html = page.text();
    assert!(html.contains("<script src=\"/app.js\""), "page loads app.js: {html}");
    for tag in html.split("<script").skip(1) {
        let head = &tag[..tag.find('>').expect("script tag closes")];
        assert!(head.contains("src="), "inline <script> without src: {head}");
    }
    for (path, ctype) in [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/markdown.js", "text/javascript; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
    ] {
        let r = http("GET", &s.url(path), None, None);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some(ctype), "{path}");
        assert_secure(&r, path);
        // The binary carries them deflated (crates/web/build.rs) and serves the files as written.
        let file =
            std::fs::read(format!("{}/crates/web/src{path}", env!("CARGO_MANIFEST_DIR"))).expect("the asset's file");
        assert!(r.body == file, "{path} is not served as crates/web/src{path} reads");
    }
    let index = std::fs::read(format!("{}/crates/web/src/index.html", env!("CARGO_MANIFEST_DIR"))).expect("index.html");
    assert!(page.body == index, "/ is not served as crates/web/src/index.html reads");
    // Nothing secret in any asset: neither the server key nor configured secrets.
    for path in ["/", "/app.js", "/markdown.js", "/style.css"] {
        let body = http("GET", &s.url(path), None, None).text();
        assert!(!body.contains(SECRET), "{path} contains the secret key");
        assert!(!body.contains("sk-test-web-page-should-not-leak"), "{path} contains an API key");
    }
    // Only these exact paths are open; the API still needs the key.
    for path in ["/index.html", "/app.js/", "/style.css.map", "/config/extensions"] {
        let r = http("GET", &s.url(path), None, None);
        assert_eq!(r.status, 401, "{path} without the key: {}", r.text());
    }
    let r = http("POST", &s.url("/"), None, Some(b"{}"));
    assert_eq!(r.status, 405, "POST / is not allowed");
    assert_secure(&r, "POST /");
}

#[test]
fn no_cors_headers_for_foreign_origins() {
    let s = Server::start();
    let origin = [("Origin", "http://evil.example")];
    let with_key = [("Origin", "http://evil.example"), ("X-Secret-Key", SECRET)];
    type Req<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let reqs: [Req; 8] = [
        ("GET", "/", &origin),
        ("GET", "/app.js", &origin),
        ("GET", "/style.css", &origin),
        ("GET", "/markdown.js", &origin),
        ("OPTIONS", "/", &origin),
        ("GET", "/config/extensions", &origin),
        ("GET", "/config/extensions", &with_key),
        ("OPTIONS", "/config/extensions", &origin),
    ];
    for (m, path, headers) in reqs {
        let r = http_with(m, &s.url(path), headers, None);
        assert!(r.header("access-control-allow-origin").is_none(), "{m} {path} answered with CORS: {:?}", r.headers);
        assert!(r.header("access-control-allow-credentials").is_none(), "{m} {path}");
    }
    // The page's assets never carry CORS headers, whatever the Origin.
    for path in ["/", "/app.js", "/markdown.js", "/style.css"] {
        let r = http_with("GET", &s.url(path), &[("Origin", "null")], None);
        assert_eq!(r.status, 200);
        assert!(r.header("access-control-allow-origin").is_none(), "{path}: {:?}", r.headers);
    }
}

/// Issue 38 item 2: `gosling agent`'s first start on a fresh config enables the developer
/// builtin (as goose Desktop and `gosling serve` have it), so a new session's model has tools at
/// once; switched off, it stays off at the next start (only a config without `config.json` gets
/// it); `GOSLING_FIRST_RUN_EXTENSIONS=none` leaves the config empty.
#[test]
fn the_first_start_gives_new_sessions_the_developer_builtin() {
    use serde_json::json;
    let first =
        ServerOpts { env: vec![("GOSLING_FIRST_RUN_EXTENSIONS".into(), "developer".into())], ..Default::default() };
    let s = Server::start_with(first);
    let ex = s.get("/config/extensions").json();
    let dev = ex["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "developer").cloned();
    let dev = dev.unwrap_or_else(|| panic!("no developer builtin on a first start: {ex}"));
    assert_eq!((dev["type"].as_str(), dev["enabled"].as_bool()), (Some("builtin"), Some(true)), "{dev}");
    let id = s.post("/agent/start", json!({"working_dir": s.home.path()})).json()["id"].as_str().unwrap().to_string();
    let r = s.post("/agent/resume", json!({"session_id": id, "load_model_and_extensions": true})).json();
    assert!(
        r["extension_results"].as_array().unwrap().iter().any(|x| x["name"] == "developer" && x["success"] == true),
        "{r}"
    );
    let tools = s.get(&format!("/agent/tools?session_id={id}")).json();
    assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "developer__shell"), "{tools}");
    // Saved after the server answers (off the start's path): in `config.json` for every other
    // process on the config dir.
    let saved = || {
        let bytes = std::fs::read(s.home.join("config").join("config.json")).ok()?;
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .filter(|c| c["extensions"]["developer"]["enabled"] == true)
    };
    wait_for(std::time::Duration::from_secs(10), saved)
        .unwrap_or_else(|| panic!("config.json never got the first start's developer; stderr:\n{}", s.stderr()));
    // Switched off in the page (POST /config/extensions): a restart does not turn it on again.
    let mut config = dev.clone();
    config.as_object_mut().unwrap().remove("enabled");
    let r = s.post("/config/extensions", json!({"name": "developer", "config": config, "enabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    let home = s.kill();
    let s = Server::start_in(
        home,
        ServerOpts { env: vec![("GOSLING_FIRST_RUN_EXTENSIONS".into(), "developer".into())], ..Default::default() },
    );
    let ex = s.get("/config/extensions").json();
    let dev = ex["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "developer").unwrap().clone();
    assert_eq!(dev["enabled"], false, "{ex}");
    // `none`: nothing is added.
    let s = Server::start();
    assert_eq!(s.get("/config/extensions").json()["extensions"], json!([]));
}

/// Issue 38's first-run config, written after the server answers: two `gosling agent`s started
/// at once on one fresh config dir save it at most once, and neither writes it over what the
/// person changed meanwhile through the other, whichever order their saves and the change take.
#[test]
fn two_first_starts_at_once_never_save_over_a_change_made_through_the_other() {
    use serde_json::json;
    let shared = TempDir::new("first-run-shared");
    let config_dir = shared.join("config");
    let opts = || ServerOpts {
        env: vec![
            ("GOSLING_FIRST_RUN_EXTENSIONS".into(), "developer".into()),
            ("GOSLING_CONFIG_DIR".into(), config_dir.display().to_string()),
            ("RUST_LOG".into(), "info".into()),
        ],
        ..Default::default()
    };
    let (a, b) = std::thread::scope(|t| {
        let a = t.spawn(|| Server::start_with(opts()));
        let b = t.spawn(|| Server::start_with(opts()));
        (a.join().unwrap(), b.join().unwrap())
    });
    let dev = |s: &Server| {
        let ex = s.get("/config/extensions").json();
        ex["extensions"].as_array().unwrap().iter().find(|e| e["name"] == "developer").cloned()
    };
    let mut config = dev(&a).unwrap_or_else(|| panic!("no developer builtin on a first start: {}", a.stderr()));
    config.as_object_mut().unwrap().remove("enabled");
    let r = a.post("/config/extensions", json!({"name": "developer", "config": config, "enabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    // Both saves done (one wrote, or found the file written), then the change still holds.
    let (wrote, found) = ("builtin extensions enabled for new sessions", "a config.json was saved meanwhile");
    for s in [&a, &b] {
        wait_for(std::time::Duration::from_secs(10), || {
            let e = s.stderr();
            (e.contains(wrote) || e.contains(found)).then_some(())
        })
        .unwrap_or_else(|| panic!("the first-run save never ended; stderr:\n{}", s.stderr()));
    }
    let writers = [&a, &b].iter().filter(|s| s.stderr().contains(wrote)).count();
    assert!(writers <= 1, "both servers saved the first-run config:\n{}\n{}", a.stderr(), b.stderr());
    assert_eq!(dev(&b).unwrap()["enabled"], false, "{}", b.stderr());
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(file["extensions"]["developer"]["enabled"], false, "{file}");
}

/// The page's per-tool permission (goosed's `POST /config/permissions`): each change sets one
/// tool's level in one locked update on the server, so two tabs changing different tools at
/// once both keep theirs (the page once read the whole map, changed it and wrote it back);
/// `null` leaves a tool to the mode; what is not a level is refused, saying what to send.
#[test]
fn tool_permissions_are_set_one_tool_at_a_time_and_concurrent_tabs_keep_both() {
    let s = Server::start();
    let set = |tool: &str, level: serde_json::Value| {
        s.post(
            "/config/permissions",
            serde_json::json!({"tool_permissions": [{"tool_name": tool, "permission": level}]}),
        )
    };
    let r = set("developer__shell", "never_allow".into());
    assert_eq!(r.status, 200, "{}", r.text());
    // Two tabs at once, each setting another tool, many times over.
    std::thread::scope(|scope| {
        for tab in 0..2 {
            let set = &set;
            scope.spawn(move || {
                for i in 0..20 {
                    let r = set(&format!("tab{tab}__tool{i}"), "always_allow".into());
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            });
        }
    });
    let levels = s.get("/config").json()["config"]["tool_permissions"].clone();
    assert_eq!(levels["developer__shell"], "never_allow", "{levels}");
    for tab in 0..2 {
        for i in 0..20 {
            assert_eq!(levels[format!("tab{tab}__tool{i}")], "always_allow", "tab {tab}'s tool {i} lost: {levels}");
        }
    }
    // null: back to the mode; the others stay.
    assert_eq!(set("developer__shell", serde_json::Value::Null).status, 200);
    let levels = s.get("/config").json()["config"]["tool_permissions"].clone();
    assert!(levels.get("developer__shell").is_none() && levels["tab0__tool0"] == "always_allow", "{levels}");
    // Refusals say what to send, and change nothing.
    let bad = set("developer__shell", "sometimes".into());
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("use always_allow, ask_before or never_allow"), "{}", bad.text());
    let bad = set("", "always_allow".into());
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("name a tool"), "{}", bad.text());
    let bad = s.post("/config/permissions", serde_json::json!({"tool_permissions": [{"tool_name": "x__y"}]}));
    assert_eq!(bad.status, 422, "{}", bad.text());
    assert!(bad.text().contains("permission"), "{}", bad.text());
    assert_eq!(s.get("/config").json()["config"]["tool_permissions"], levels);
}
