use crate::support::{gosling, TempDir};

#[test]
fn help_and_version() {
    let home = TempDir::new("cli");
    let out = gosling(&home).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("gosling agent"));
    let out = gosling(&home).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("gosling {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn unknown_command_is_usage_error() {
    let home = TempDir::new("cli");
    let out = gosling(&home).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command \"frobnicate\""));
}

/// Every subcommand answers `--help` and `-h` with its usage on stdout and exit 0, and starts
/// nothing: the servers (`acp` on stdio, `agent` and `serve` on a port) return at once although
/// stdin stays open, and print no listening line.
#[test]
fn every_subcommand_answers_help_and_starts_nothing() {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let home = TempDir::new("cli-help");
    for cmd in ["agent", "serve", "acp", "probe", "auth", "install", "import", "mcp"] {
        for flag in ["--help", "-h"] {
            let mut child = gosling(&home)
                .args([cmd, flag])
                .env("GOOSE_SERVER__SECRET_KEY", crate::support::SECRET)
                .env("GOOSE_PORT", "0")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // stdin stays open (held here): a server reading it would not return.
            let _stdin = child.stdin.take();
            let start = Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if start.elapsed() > Duration::from_secs(10) {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("`gosling {cmd} {flag}` did not return within 10 s: it started something");
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let (mut out, mut err) = (String::new(), String::new());
            child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            assert!(status.success(), "`gosling {cmd} {flag}` exited {status}: {err}");
            assert!(
                out.to_lowercase().contains(&format!("usage: gosling {cmd}")),
                "`gosling {cmd} {flag}` printed no usage line naming it: {out:?}"
            );
            assert!(
                !out.contains("listening") && !err.contains("listening"),
                "{cmd} {flag} started a server: {out} {err}"
            );
        }
    }
    // After `--`, `--help` belongs to the probed command: probe runs it (and it fails here).
    let out =
        gosling(&home).args(["probe", "--timeout", "2", "--", "/nonexistent-gosling-cmd", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}
