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

/// What one run of the runner left: its exit status, checks.json, and a report for messages.
struct Run {
    status: std::process::ExitStatus,
    checks: Vec<Value>,
    report: String,
    /// What the client (gosling probe) wrote on stderr.
    client_stderr: String,
}

fn run_runner(peers: &Peers, scenario: &str, probe_args: &str) -> Run {
    let home = TempDir::new("conformance");
    let out = home.join("out");
    // The runner splits --command on spaces and appends the server URL.
    let command = format!("{} probe{probe_args}", bin().display());
    assert!(!bin().display().to_string().contains(' '), "binary path must not contain spaces: {command}");
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
    let report = format!(
        "runner stdout:\n{}\nrunner stderr:\n{}",
        std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    let checks_path = find_checks(&out).unwrap_or_else(|| panic!("no checks.json under {}\n{report}", out.display()));
    let checks: Value = serde_json::from_str(&std::fs::read_to_string(&checks_path).unwrap()).unwrap();
    let checks = checks.as_array().expect("checks.json is an array").clone();
    let client_stderr = checks_path
        .parent()
        .map(|d| std::fs::read_to_string(d.join("stderr.txt")).unwrap_or_default())
        .unwrap_or_default();
    Run { status, checks, report, client_stderr }
}

fn run_scenario(peers: &Peers, scenario: &str, expected: &[&str]) {
    run_scenario_with(peers, scenario, "", expected)
}

fn run_scenario_with(peers: &Peers, scenario: &str, probe_args: &str, expected: &[&str]) {
    let Run { status, checks, report, .. } = run_runner(peers, scenario, probe_args);
    assert!(status.success(), "scenario {scenario}: runner exited with {status}\n{report}");
    for c in &checks {
        let st = c["status"].as_str().unwrap_or("");
        assert!(st != "FAILURE" && st != "WARNING", "scenario {scenario}: check {} is {st}: {}\n{report}", c["id"], c);
    }
    for id in expected {
        assert!(
            checks.iter().any(|c| c["id"] == *id && c["status"] == "SUCCESS"),
            "scenario {scenario}: no SUCCESS check {id} in {}\n{report}",
            serde_json::to_string_pretty(&checks).unwrap(),
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

// The `auth/*` scenarios: the runner's server and authorization server, gosling probe signing
// in by following the authorization URL itself (the runner's server approves at once). The
// runner's clients use this Client ID Metadata Document URL; gosling gets it as an option.

const CIMD: &str = " --client-metadata-url https://conformance-test.local/client-metadata.json";

/// The checks every completed authorization code flow produces.
const FLOW: &[&str] = &[
    "authorization-server-metadata",
    "authorization-request",
    "token-request",
    "pkce-code-challenge-sent",
    "pkce-s256-method-used",
    "pkce-code-verifier-sent",
    "pkce-verifier-matches-challenge",
    "valid-bearer-token",
];

fn auth_scenario(scenario: &str, extra: &[&str]) {
    let peers = require_peers!();
    let mut expected: Vec<&str> = FLOW.to_vec();
    expected.extend_from_slice(extra);
    run_scenario_with(peers, scenario, CIMD, &expected);
}

/// Every `auth/*` client scenario of the pinned runner, with the kind the runner gives it:
/// the tests below cover exactly these (a runner upgrade that adds one fails `auth_list`).
const AUTH_SCENARIOS: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
];

#[test]
fn conformance_auth_list() {
    let peers = require_peers!();
    let out = Command::new(peers.node())
        .arg(peers.get("MCP_PEER_CONFORMANCE"))
        .args(["list", "--client"])
        .output()
        .expect("run the conformance runner");
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> =
        text.lines().filter_map(|l| l.trim().strip_prefix("- ")).map(|l| l.split(' ').next().unwrap_or("")).collect();
    let auth: Vec<&str> = listed.iter().copied().filter(|s| s.starts_with("auth/")).collect();
    assert_eq!(auth, AUTH_SCENARIOS, "the runner's auth scenarios changed:\n{text}");
}

#[test]
fn conformance_auth_metadata_default() {
    auth_scenario("auth/metadata-default", &["prm-pathbased-requested", "client-registration"]);
}

#[test]
fn conformance_auth_metadata_var1() {
    auth_scenario("auth/metadata-var1", &["prm-pathbased-requested", "client-registration"]);
}

#[test]
fn conformance_auth_metadata_var2() {
    auth_scenario("auth/metadata-var2", &["client-registration"]);
}

#[test]
fn conformance_auth_metadata_var3() {
    auth_scenario("auth/metadata-var3", &["client-registration"]);
}

#[test]
fn conformance_auth_basic_cimd() {
    auth_scenario("auth/basic-cimd", &["cimd-client-id-used"]);
}

#[test]
fn conformance_auth_scope_from_www_authenticate() {
    auth_scenario("auth/scope-from-www-authenticate", &["scope-from-www-authenticate"]);
}

#[test]
fn conformance_auth_scope_from_scopes_supported() {
    auth_scenario("auth/scope-from-scopes-supported", &["scope-from-scopes-supported"]);
}

#[test]
fn conformance_auth_scope_omitted_when_undefined() {
    auth_scenario("auth/scope-omitted-when-undefined", &["scope-omitted-when-undefined"]);
}

#[test]
fn conformance_auth_scope_step_up() {
    auth_scenario("auth/scope-step-up", &["scope-step-up-initial", "scope-step-up-escalation"]);
}

#[test]
fn conformance_auth_scope_retry_limit() {
    // The server never accepts the token: gosling gives up (the probe fails, as it should)
    // after at most 3 authorization requests. No bearer token is ever valid here.
    let peers = require_peers!();
    let expected: Vec<&str> =
        FLOW.iter().copied().filter(|c| *c != "valid-bearer-token").chain(["scope-retry-limit"]).collect();
    run_scenario_with(peers, "auth/scope-retry-limit", CIMD, &expected);
    // And the probe says why it gave up.
    let run = run_runner(peers, "auth/scope-retry-limit", CIMD);
    assert!(
        run.client_stderr.contains("insufficient_scope") && run.client_stderr.contains("oauth.scopes"),
        "{}",
        run.client_stderr
    );
}

const RESOURCE: &[&str] = &[
    "token-endpoint-auth-method",
    "resource-parameter-in-authorization",
    "resource-parameter-in-token",
    "resource-parameter-valid-uri",
    "resource-parameter-consistency",
];

#[test]
fn conformance_auth_token_endpoint_auth_basic() {
    auth_scenario("auth/token-endpoint-auth-basic", RESOURCE);
}

#[test]
fn conformance_auth_token_endpoint_auth_post() {
    auth_scenario("auth/token-endpoint-auth-post", RESOURCE);
}

#[test]
fn conformance_auth_token_endpoint_auth_none() {
    auth_scenario("auth/token-endpoint-auth-none", RESOURCE);
}

#[test]
fn conformance_auth_pre_registration() {
    auth_scenario("auth/pre-registration", &["pre-registration-auth"]);
}

#[test]
fn conformance_auth_2025_03_26_metadata_backcompat() {
    auth_scenario("auth/2025-03-26-oauth-metadata-backcompat", &["client-registration"]);
}

#[test]
fn conformance_auth_2025_03_26_endpoint_fallback() {
    let peers = require_peers!();
    run_scenario_with(
        peers,
        "auth/2025-03-26-oauth-endpoint-fallback",
        CIMD,
        &["client-registration", "authorization-request", "token-request", "valid-bearer-token"],
    );
}

#[test]
fn conformance_auth_resource_mismatch() {
    // Draft: the metadata names another resource; gosling refuses before any authorization.
    let peers = require_peers!();
    run_scenario_with(peers, "auth/resource-mismatch", CIMD, &["resource-mismatch-rejected"]);
}

#[test]
fn conformance_auth_offline_access_scope() {
    auth_scenario("auth/offline-access-scope", &["sep-2207-offline-access-requested"]);
}

#[test]
fn conformance_auth_offline_access_not_supported() {
    auth_scenario("auth/offline-access-not-supported", &["sep-2207-offline-access-not-requested"]);
}

// The authorization extensions: machine-to-machine `client_credentials` (with a client secret
// or a JWT signed with the client's key) and enterprise cross-app access (an ID token exchanged
// at the identity provider, then the JWT-bearer grant). The runner's context names the client,
// its key, the identity provider and the ID token; no person signs in.

#[test]
fn conformance_auth_client_credentials_jwt() {
    let peers = require_peers!();
    run_scenario_with(peers, "auth/client-credentials-jwt", CIMD, &["client-credentials-jwt-verified"]);
}

#[test]
fn conformance_auth_client_credentials_basic() {
    let peers = require_peers!();
    run_scenario_with(peers, "auth/client-credentials-basic", CIMD, &["client-credentials-basic-auth"]);
}

#[test]
fn conformance_auth_cross_app_access() {
    let peers = require_peers!();
    run_scenario_with(
        peers,
        "auth/cross-app-access-complete-flow",
        CIMD,
        &["complete-flow-token-exchange", "complete-flow-jwt-bearer"],
    );
}

// The newest runner (`MCP_PEER_CONFORMANCE_NEXT`, 0.2.0-alpha.12): `client --requirements
// 2026-07-28` plays every client scenario the 2026-07-28 revision requires, and those it runs
// without scoring (the authorization extensions, scenarios added after the revision shipped),
// each at the revision's wire version (`MCP_CONFORMANCE_PROTOCOL_VERSION`), in parallel. Which
// scenarios those are comes from the runner's own frozen requirements file.

/// The client scenarios of the runner's requirements for `revision`: the scored ones, then the
/// ones run without scoring.
fn required_client_scenarios(runner: &Path, revision: &str) -> (Vec<String>, Vec<String>) {
    let file = runner.parent().and_then(Path::parent).map(|p| p.join("requirements").join(format!("{revision}.yaml")));
    let file = file.unwrap_or_default();
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    let (mut scored, mut unscored) = (Vec::new(), Vec::new());
    let mut section = "";
    let mut pending: Option<String> = None;
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':');
            continue;
        }
        let item = line.trim();
        match section {
            "client" => {
                if let Some(s) = item.strip_prefix("- ") {
                    scored.push(s.to_string());
                }
            }
            "not_scored" => {
                if let Some(s) = item.strip_prefix("- scenario: ") {
                    pending = Some(s.to_string());
                } else if item == "leg: client" {
                    unscored.extend(pending.take());
                }
            }
            _ => {}
        }
    }
    assert!(!scored.is_empty(), "no client scenarios in {}", file.display());
    (scored, unscored)
}

/// Runs `--requirements REVISION` once; returns each scenario's checks (by scenario name) and
/// the runner's report.
fn run_requirements(peers: &Peers, revision: &str) -> (Vec<(String, Vec<Value>, String)>, String) {
    let home = TempDir::new("conformance-next");
    let out = home.join("out");
    let command = format!("{} probe{CIMD}", bin().display());
    let stdout_path = home.join("runner.stdout");
    let mut child = Command::new(peers.node())
        .arg(peers.get("MCP_PEER_CONFORMANCE_NEXT"))
        .args(["client", "--command", &command, "--requirements", revision, "-o"])
        .arg(&out)
        .env("GOSLING_CONFIG_DIR", home.join("config"))
        .env("GOSLING_STATE_DIR", home.join("state"))
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the conformance runner");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("conformance runner --requirements {revision} did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    // out/<scenario>-<timestamp>/checks.json, auth scenarios one directory deeper (auth/...).
    let mut runs = Vec::new();
    let mut dirs = vec![out.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("read {}: {e}\n{report}", d.display())).flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            let checks = p.join("checks.json");
            if !checks.exists() {
                dirs.push(p);
                continue;
            }
            let rel = p.strip_prefix(&out).unwrap().to_string_lossy().to_string();
            // Strip the "-<ISO timestamp>" the runner appends: "-" and 24 characters.
            let name = rel[..rel.len().saturating_sub(25)].to_string();
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&checks).unwrap()).unwrap();
            let stderr = std::fs::read_to_string(p.join("stderr.txt")).unwrap_or_default();
            runs.push((name, v.as_array().cloned().unwrap_or_default(), stderr));
        }
    }
    (runs, report)
}

/// Each scenario's checks: some SUCCESS, no FAILURE or WARNING. Returns what is wrong, if anything.
fn judge(name: &str, runs: &[(String, Vec<Value>, String)]) -> Option<String> {
    let Some((_, checks, stderr)) = runs.iter().find(|(n, ..)| n == name) else {
        return Some(format!("{name}: the runner left no checks.json"));
    };
    let bad: Vec<String> = checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .map(|c| format!("{} {}: {}", c["id"], c["status"], c.get("errorMessage").unwrap_or(&c["description"])))
        .collect();
    if !bad.is_empty() {
        let tail: String =
            stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Some(format!("{name}:\n  {}\n  client stderr (tail):\n{tail}", bad.join("\n  ")));
    }
    if !checks.iter().any(|c| c["status"] == "SUCCESS") {
        return Some(format!("{name}: no check succeeded (the client never got far enough)"));
    }
    None
}

#[test]
fn conformance_next_requirements_2026_07_28() {
    let peers = require_peers!();
    let runner = PathBuf::from(peers.get("MCP_PEER_CONFORMANCE_NEXT"));
    let (scored, unscored) = required_client_scenarios(&runner, "2026-07-28");
    // The revision's requirements are frozen: 32 scored client scenarios, 7 more run unscored.
    assert_eq!((scored.len(), unscored.len()), (32, 7), "{scored:?} {unscored:?}");
    let (runs, report) = run_requirements(peers, "2026-07-28");
    let mut wrong = Vec::new();
    // Every one of them, the unscored ones too (the authorization extensions included).
    for name in scored.iter().chain(&unscored) {
        wrong.extend(judge(name, &runs));
    }
    assert!(wrong.is_empty(), "{} scenario(s) fail:\n{}\n\nrunner:\n{report}", wrong.len(), wrong.join("\n"));
}
