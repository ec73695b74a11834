// The official MCP conformance runner (scripts/peers) plays the server; `gosling probe URL`
// is the client under test. Judged by the runner's exit code and by checks.json, which must
// list the expected checks as SUCCESS (a client that never connects "passes" with no checks).

use crate::require_peers;
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn find_checks(dir: &Path) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(found) = find_checks(&p) {
                return Some(found);
            }
        } else if p.file_name().is_some_and(|n| n == "checks.json") {
            return Some(p);
        }
    }
    None
}

fn run_scenario(peers: &Peers, scenario: &str, expected: &[&str]) {
    let home = TempDir::new("conformance");
    let out = home.join("out");
    // The runner splits --command on spaces and appends the server URL.
    let command = format!("{} probe", bin().display());
    assert!(!command.contains("  "), "binary path must not contain spaces: {command}");
    let stdout_path = home.join("runner.stdout");
    let stderr_path = home.join("runner.stderr");
    let mut child = Command::new(peers.node())
        .arg(peers.get("MCP_PEER_CONFORMANCE"))
        .args(["client", "--command", &command, "--scenario", scenario, "-o"])
        .arg(&out)
        .env("GOSLING_CONFIG_DIR", home.join("config"))
        .env("GOSLING_STATE_DIR", home.join("state"))
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start the conformance runner");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("conformance runner for {scenario} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let report = || {
        format!(
            "runner stdout:\n{}\nrunner stderr:\n{}",
            std::fs::read_to_string(&stdout_path).unwrap_or_default(),
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    };
    assert!(status.success(), "scenario {scenario}: runner exited with {status}\n{}", report());
    let checks_path =
        find_checks(&out).unwrap_or_else(|| panic!("no checks.json under {}\n{}", out.display(), report()));
    let checks: Value = serde_json::from_str(&std::fs::read_to_string(&checks_path).unwrap()).unwrap();
    let checks = checks.as_array().expect("checks.json is an array");
    for c in checks {
        let st = c["status"].as_str().unwrap_or("");
        assert!(
            st != "FAILURE" && st != "WARNING",
            "scenario {scenario}: check {} is {st}: {}\n{}",
            c["id"],
            c,
            report()
        );
    }
    for id in expected {
        assert!(
            checks.iter().any(|c| c["id"] == *id && c["status"] == "SUCCESS"),
            "scenario {scenario}: no SUCCESS check {id} in {}\n{}",
            serde_json::to_string_pretty(checks).unwrap(),
            report()
        );
    }
}

#[test]
fn conformance_initialize() {
    let peers = require_peers!();
    run_scenario(peers, "initialize", &["mcp-client-initialization"]);
}

#[test]
fn conformance_tools_call() {
    let peers = require_peers!();
    run_scenario(peers, "tools_call", &["tool-add-numbers"]);
}

#[test]
fn conformance_sse_retry() {
    let peers = require_peers!();
    run_scenario(
        peers,
        "sse-retry",
        &["client-sse-graceful-reconnect", "client-sse-retry-timing", "client-sse-last-event-id"],
    );
}

#[test]
fn conformance_elicitation_defaults() {
    let peers = require_peers!();
    run_scenario(
        peers,
        "elicitation-sep1034-client-defaults",
        &[
            "client-elicitation-sep1034-string-default",
            "client-elicitation-sep1034-integer-default",
            "client-elicitation-sep1034-number-default",
            "client-elicitation-sep1034-enum-default",
            "client-elicitation-sep1034-boolean-default",
        ],
    );
}
