//! `allow_host` through the real binary: a link's approved hosts reach the stored config as
//! `"sandbox": {"hosts": [...]}`, are shown before installing (the sandbox's `Network:` line
//! among the risks every front end renders) and are part of the digest approved; a bad one is refused naming the parameter.
//! The proxy itself (`extensions::egress`) is tested with curl, Python and Node in its unit
//! tests, as it is not yet started by the binary (the confinement that hands it a socket is
//! issue 36's other half).

use crate::support::{gosling, TempDir};
use serde_json::Value;
use std::process::Command;

const FETCH: &str = "goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch";

fn run(c: &mut Command) -> (Option<i32>, String, String) {
    let o = c.output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

fn digest_in(out: &str) -> String {
    let at = out.find("sha256:").unwrap_or_else(|| panic!("no digest in {out}"));
    out[at..].split(|c: char| !c.is_ascii_alphanumeric() && c != ':').next().unwrap().to_string()
}

#[test]
fn a_links_approved_hosts_are_shown_digested_and_stored_as_the_sandbox_block() {
    let home = TempDir::new("egress-link");
    let link = format!("{FETCH}&allow_host=API.example.com&allow_host=127.0.0.1%3A8080");
    let (code, out, err) = run(gosling(&home).args(["install", "--check", &link]));
    assert_eq!(code, Some(0), "{err}");
    // Named once, in the summary's network line (with the launcher's registry).
    let line = "Network: only api.example.com:443, 127.0.0.1:8080, pypi.org:443, files.pythonhosted.org:443, through gosling's proxy";
    assert!(out.contains(line), "{out}");
    assert_eq!(out.matches("api.example.com").count(), 1, "{out}");
    let with = digest_in(&out);
    let (_, plain, _) = run(gosling(&home).args(["install", "--check", FETCH]));
    assert_ne!(with, digest_in(&plain), "the hosts are part of the digest");
    // Approving the digest of the link without hosts does not install the one with hosts.
    let (code, _, err) = run(gosling(&home).args(["install", &format!("--approve={}", digest_in(&plain)), &link]));
    assert_ne!(code, Some(0), "{err}");
    let (code, _, err) = run(gosling(&home).args(["install", &format!("--approve={with}"), &link]));
    assert_eq!(code, Some(0), "{err}");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("config/config.json")).unwrap()).unwrap();
    let hosts = &config["extensions"]["fetch"]["sandbox"]["hosts"];
    assert_eq!(hosts, &serde_json::json!(["api.example.com:443", "127.0.0.1:8080"]), "{config}");
}

#[test]
fn a_bad_allow_host_is_refused_naming_the_parameter_and_the_rule() {
    let home = TempDir::new("egress-bad");
    for (bad, says) in [
        ("2130706433%3A80", "dotted quad"),
        ("example.com%3A70000", "1 to 65535"),
        ("%3A%3A1", "in brackets"),
        ("*.com", "top-level domain"),
    ] {
        let (code, out, err) = run(gosling(&home).args(["install", "--check", &format!("{FETCH}&allow_host={bad}")]));
        assert_ne!(code, Some(0), "{bad}: {out}");
        assert!(err.contains("`allow_host`") && err.contains(says), "{bad}: {err}");
    }
    let url = "goose://extension?name=R&url=https%3A%2F%2Fmcp.example.com%2Fmcp&allow_host=mcp.example.com";
    let (code, _, err) = run(gosling(&home).args(["install", "--check", url]));
    assert!(code != Some(0) && err.contains("applies only to cmd (stdio) extensions"), "{err}");
}
