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
    for cmd in ["agent", "serve", "acp", "probe", "auth", "install", "import", "mcp", "secret", "extensions"] {
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

/// `gosling` with stdin fed `input` (not a terminal); exit code, stdout, stderr.
fn run_with_stdin(home: &TempDir, args: &[&str], input: &[u8]) -> (Option<i32>, String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = gosling(home)
        .args(args)
        .env("RUST_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Issue 38, item 7: `gosling secret set|list|remove` — the value from standard input, stored
/// in secrets.json (0600) and never printed nor logged (at trace), names only in `list`; bad
/// names, a value on the command line and an empty value are refused saying what to do.
#[test]
fn secret_set_list_remove_reads_the_value_from_stdin_and_never_shows_it() {
    use std::os::unix::fs::PermissionsExt;
    let home = TempDir::new("cli-secret");
    const VALUE: &str = "sk-never-shown-7731";
    let (code, out, err) = run_with_stdin(&home, &["secret", "set", "MY_API_TOKEN"], format!("{VALUE}\n").as_bytes());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("secret MY_API_TOKEN stored"), "{out}");
    assert!(!out.contains(VALUE) && !err.contains(VALUE), "the value was shown: {out} {err}");
    let path = home.join("config/secrets.json");
    let secrets: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(secrets["MY_API_TOKEN"], VALUE, "stored without the newline");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!std::fs::read_to_string(home.join("config/config.json")).unwrap_or_default().contains(VALUE));

    let (code, out, err) = run_with_stdin(&home, &["secret", "set", "OTHER"], b"two\nlines");
    assert_eq!(code, Some(0), "{err}");
    let (code, out2, _) = run_with_stdin(&home, &["secret", "list"], b"");
    assert_eq!(code, Some(0));
    assert_eq!(out2.lines().collect::<Vec<_>>(), ["MY_API_TOKEN", "OTHER"], "{out}");
    assert!(!out2.contains(VALUE) && !out2.contains("two"));

    // Refusals, each saying what to do; nothing changes.
    let (code, _, err) = run_with_stdin(&home, &["secret", "set", "MY_API_TOKEN", VALUE], b"");
    assert_eq!(code, Some(2));
    assert!(err.contains("read from standard input, never from the command line") && !err.contains(VALUE), "{err}");
    let (code, _, err) = run_with_stdin(&home, &["secret", "set", "MY_API_TOKEN"], b"");
    assert_eq!(code, Some(1));
    assert!(err.contains("no value on standard input") && err.contains("gosling secret set MY_API_TOKEN"), "{err}");
    let (code, _, err) = run_with_stdin(&home, &["secret", "set", "oauth:x"], b"v");
    assert_eq!(code, Some(1));
    assert!(err.contains("is not a secret name") && err.contains("letters, digits and _"), "{err}");
    let (code, _, err) = run_with_stdin(&home, &["secret", "set", "BIG"], &vec![b'x'; 65 * 1024]);
    assert_eq!(code, Some(1));
    assert!(err.contains("longer than 64 KiB"), "{err}");
    let secrets: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(secrets["MY_API_TOKEN"], VALUE);
    assert!(secrets.get("BIG").is_none());

    let (code, out, _) = run_with_stdin(&home, &["secret", "remove", "OTHER"], b"");
    assert_eq!(code, Some(0));
    assert!(out.contains("secret OTHER removed"), "{out}");
    let (code, _, err) = run_with_stdin(&home, &["secret", "remove", "OTHER"], b"");
    assert_eq!(code, Some(1));
    assert!(err.contains("no secret named OTHER is stored"), "{err}");
    let (code, _, err) = run_with_stdin(&home, &["secret", "frob"], b"");
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown subcommand \"frob\"") && err.contains("usage: gosling secret"), "{err}");
}

/// Issue 38, item 7: `gosling extensions list|enable|disable|remove` on the config the server
/// reads; enabling checks what the server checks (its secrets are stored), so an extension
/// installed without its secret is enabled only once `gosling secret set` stored it.
#[test]
fn extensions_list_enable_disable_remove_follow_the_servers_rules() {
    let home = TempDir::new("cli-ext");
    let (code, out, _) = run_with_stdin(&home, &["extensions", "list"], b"");
    assert_eq!(code, Some(0));
    assert!(out.contains("no extensions configured"), "{out}");
    const LINK: &str = "goose://extension?cmd=npx&arg=-y&arg=%40modelcontextprotocol%2Fserver-everything&name=Everything&env=API_KEY%3DYour%20API%20key";
    let (code, out, err) = run_with_stdin(&home, &["install", "--yes", LINK], b"");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("gosling secret set API_KEY") && out.contains("gosling extensions enable everything"),
        "{out}"
    );
    let (code, out, _) = run_with_stdin(&home, &["extensions", "list"], b"");
    assert_eq!(code, Some(0));
    assert_eq!(out.trim(), "Everything\tstdio\toff\tnpx -y @modelcontextprotocol/server-everything", "{out}");

    let (code, _, err) = run_with_stdin(&home, &["extensions", "enable", "Everything"], b"");
    assert_eq!(code, Some(1));
    assert!(
        err.contains("stays disabled") && err.contains("API_KEY") && err.contains("gosling secret set API_KEY"),
        "{err}"
    );
    let (code, _, err) = run_with_stdin(&home, &["secret", "set", "API_KEY"], b"k-1");
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run_with_stdin(&home, &["extensions", "enable", "Everything"], b"");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("extension Everything enabled"), "{out}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("config/config.json")).unwrap()).unwrap();
    assert_eq!(config["extensions"]["everything"]["enabled"], true);
    let (_, out, _) = run_with_stdin(&home, &["extensions", "list"], b"");
    assert!(out.starts_with("Everything\tstdio\ton\t"), "{out}");

    let (code, out, _) = run_with_stdin(&home, &["extensions", "disable", "everything"], b"");
    assert_eq!(code, Some(0));
    assert!(out.contains("disabled"), "{out}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("config/config.json")).unwrap()).unwrap();
    assert_eq!(config["extensions"]["everything"]["enabled"], false);
    assert_eq!(config["extensions"]["everything"]["cmd"], "npx", "the configuration is kept");

    let (code, _, err) = run_with_stdin(&home, &["extensions", "enable", "nope"], b"");
    assert_eq!(code, Some(1));
    assert!(err.contains("no extension named \"nope\"") && err.contains("gosling extensions list"), "{err}");
    let (code, out, _) = run_with_stdin(&home, &["extensions", "remove", "Everything"], b"");
    assert_eq!(code, Some(0));
    assert!(out.contains("extension Everything removed"), "{out}");
    let (_, out, _) = run_with_stdin(&home, &["extensions", "list"], b"");
    assert!(out.contains("no extensions configured"), "{out}");
    let (code, _, err) = run_with_stdin(&home, &["extensions", "enable"], b"");
    assert_eq!(code, Some(2));
    assert!(err.contains("name the extension"), "{err}");
}
