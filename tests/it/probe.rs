// `gosling probe` helps, never hides: a list the server does not implement is a note, not a
// failure; a stdio server gets its environment from --env/--env-file; --read and --prompt.
// Against servers on the real Python SDK.

use crate::require_peers;
use crate::support::*;
use serde_json::Value;

fn sdk_server() -> String {
    manifest_dir().join("tests/fakes/sdk_probe_server.py").display().to_string()
}

fn probe(home: &TempDir, args: &[&str]) -> (bool, Value, String) {
    let out = gosling(home).arg("probe").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.success(), serde_json::from_str(&stdout).unwrap_or(Value::Null), stderr)
}

/// mcp-server-sqlite declares resources but implements no resources/templates/list: the
/// probe shows its tools and resources and says what is missing.
#[test]
fn a_missing_templates_list_of_mcp_server_sqlite_is_reported_not_fatal() {
    let peers = require_peers!();
    let home = TempDir::new("probe-sqlite");
    let db = home.join("probe.db");
    let (ok, v, err) = probe(&home, &["--", peers.get("MCP_PEER_SQLITE"), "--db-path", db.to_str().unwrap()]);
    assert!(ok, "{err}");
    let tools = v["tools"].to_string();
    assert!(tools.contains("read_query") && tools.contains("list_tables"), "{v}");
    assert_eq!(v["resources"][0]["uri"], "memo://insights", "{v}");
    assert!(v.get("resourceTemplates").is_none(), "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("resources/templates/list") && notes.contains("-32601"), "{v}");
    let (ok, v, err) = probe(
        &home,
        &["--read", "memo://insights", "--", peers.get("MCP_PEER_SQLITE"), "--db-path", db.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert!(v["contents"][0]["text"].as_str().unwrap().contains("No business insights"), "{v}");
}

#[test]
fn a_missing_templates_list_is_reported_not_fatal() {
    let peers = require_peers!();
    let home = TempDir::new("probe");
    let (ok, v, err) = probe(&home, &["--", peers.python(), &sdk_server(), "no_templates"]);
    assert!(ok, "{err}");
    assert_eq!(v["resources"][0]["uri"], "memo://one", "{v}");
    assert!(v.get("resourceTemplates").is_none(), "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("resources/templates/list") && notes.contains("-32601"), "{v}");
    let (ok, v, err) = probe(&home, &["--read", "memo://one", "--", peers.python(), &sdk_server()]);
    assert!(ok, "{err}");
    assert_eq!(v["contents"][0]["text"], "memo one", "{v}");
}

#[test]
fn a_server_that_needs_a_token_gets_it_from_env_or_env_file() {
    let peers = require_peers!();
    let home = TempDir::new("probe-env");
    // Without it, the server's own complaint comes through.
    let (ok, _, err) = probe(&home, &["--", peers.python(), &sdk_server(), "needs_token"]);
    assert!(!ok && err.contains("PROBE_DEMO_TOKEN is not set"), "{err}");
    let token = "probe-demo-token-value-1234";
    // Given on the command line, or in a file: the server gets it.
    let file = home.join("server.env");
    std::fs::write(&file, format!("# the server's token\nexport PROBE_DEMO_TOKEN=\"{token}\"\n")).unwrap();
    let pair = format!("PROBE_DEMO_TOKEN={token}");
    for (flag, value) in [("--env", pair.as_str()), ("--env-file", file.to_str().unwrap())] {
        let (ok, v, err) =
            probe(&home, &["--call", "token_length", flag, value, "--", peers.python(), &sdk_server(), "needs_token"]);
        assert!(ok, "{flag}: {err}");
        assert_eq!(v["content"][0]["text"], format!("token length {}", token.len()), "{flag}: {v}");
    }
    // A URL has no environment: refused, without repeating the value.
    let (ok, _, err) = probe(&home, &["--env", &format!("PROBE_DEMO_TOKEN={token}"), "http://127.0.0.1:1/mcp"]);
    assert!(!ok && err.contains("stdio") && !err.contains(token), "{err}");
}

#[test]
fn prompts_are_fetched() {
    let peers = require_peers!();
    let home = TempDir::new("probe-prompt");
    let (ok, v, err) = probe(
        &home,
        &[
            "--prompt",
            "review",
            "--args",
            r#"{"code":"fn main() {}"}"#,
            "--",
            peers.python(),
            peers.get("MCP_PEER_PY_SERVER"),
        ],
    );
    assert!(ok, "{err}");
    assert!(v["messages"][0]["content"]["text"].as_str().unwrap_or("").contains("fn main() {}"), "{v}");
}

/// A pinned modern revision makes `server/discover` the first message, which waits for the
/// server's start-up: a server that takes longer than the 10 s a started server gets to answer
/// it (npx fetching a package, a cold Python) is still spoken to in the modern revision, not
/// taken for a legacy one.
#[test]
fn a_slow_starting_server_is_not_taken_for_a_legacy_one() {
    let peers = require_peers!();
    let home = TempDir::new("probe-slow-start");
    let script = format!("sleep 12; exec '{}' '{}'", peers.python(), peers.get("MCP_PEER_PY_SERVER"));
    let (ok, v, err) = probe(&home, &["--protocol-version", "2026-07-28", "--", "/bin/sh", "-c", &script]);
    assert!(ok, "{err}");
    assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
    assert!(v["negotiation"].as_str().unwrap().contains("server/discover offered 2026-07-28"), "{v}");
}

/// A command that prints something other than JSON-RPC on stdout (a banner, a log line): the
/// probe says so and shows what it printed, escaped and capped, not only that no answer came.
#[test]
fn a_server_printing_non_json_is_named_with_what_it_printed() {
    let home = TempDir::new("probe-junk");
    let script = format!("printf 'Listening on port 8080 \\033[2J%s\\n' {}; sleep 20", "x".repeat(400));
    let (ok, _, err) = probe(&home, &["--timeout", "2", "--", "/bin/sh", "-c", &script]);
    assert!(!ok);
    assert!(err.contains("printed something that is not JSON-RPC on stdout"), "{err}");
    assert!(err.contains("\"Listening on port 8080 \\u{1b}[2Jxxx"), "the excerpt, escaped: {err}");
    assert!(!err.contains('\u{1b}'), "a raw terminal escape: {err}");
    assert!(err.contains("xxx…\"") && !err.contains(&"x".repeat(300)), "the excerpt is capped: {err}");
}
