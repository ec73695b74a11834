//! `gosling serve` started as Goose Desktop 1.41+ starts its bundled `goose serve`: the flags,
//! the secret in the environment, the working dir, stdout scanned for the fingerprint line,
//! `/status` polled over HTTPS pinned to that fingerprint; the certificate kept and reused;
//! and the refusals (no secret, bad flags), each saying what to fix.

use crate::support::{free_port, gosling, http_with, listening_on, terminate, TempDir, SECRET};
use crate::tls::{connect, exchange_json, PREFIX};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `gosling serve`, stopped (SIGTERM, then SIGKILL) on drop.
pub(crate) struct Serve {
    pub child: Child,
    pub port: u16,
    /// The `GOOSED_CERT_FINGERPRINT=` value (`--tls` only).
    pub fingerprint: Option<String>,
    pub stderr_path: std::path::PathBuf,
    /// Time from spawn to the fingerprint line, and to the first `/status` 200.
    pub to_fingerprint: Duration,
    pub to_status: Duration,
}

impl Serve {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
    /// Desktop's WebSocket: `wss://…/acp?token=…` with `Origin: file://`, pinned to the printed
    /// fingerprint, upgraded (101).
    pub fn acp(&self) -> crate::websocket::Client {
        let pin = self.fingerprint.as_deref().expect("serve --tls prints its fingerprint");
        let tls = connect(&self.addr(), pin).expect("a handshake pinned to the printed fingerprint");
        let c = crate::websocket::Client::open(Box::new(tls), &crate::websocket::acp_path(), &[("Origin", "file://")]);
        assert_eq!(c.status, 101, "{}", c.body);
        c
    }

    /// One request over a connection pinned to the printed fingerprint.
    pub fn https(&self, method: &str, path: &str, secret: Option<&str>) -> (u16, String) {
        let pin = self.fingerprint.as_deref().expect("a --tls server");
        let mut tls = BufReader::new(connect(&self.addr(), pin).expect("pinned handshake"));
        let r = exchange_json(&mut tls, method, path, secret, None).expect("an answer");
        (r.status, r.body)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// The command Desktop runs: `goose serve --tls --platform desktop --host 127.0.0.1 --port P`
/// (plus `extra`), in the home dir, with `GOOSE_SERVER__SECRET_KEY` (64 hex chars in Desktop;
/// ours here) and isolated dirs.
pub(crate) fn desktop_command(home: &TempDir, port: u16, extra: &[&str]) -> Command {
    let mut cmd = gosling(home);
    cmd.args(["serve", "--tls", "--platform", "desktop", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(extra)
        .current_dir(home.path())
        .env("GOOSE_SERVER__SECRET_KEY", SECRET)
        .env("RUST_LOG", "info");
    cmd
}

/// Starts `cmd` as Desktop does (stdin ignored, stdout and stderr piped), reads stdout line by
/// line for the fingerprint (when `tls`), then polls `/status` every 10 ms (Desktop: 100 ms).
pub(crate) fn launch(home: &TempDir, mut cmd: Command, port: u16, tls: bool) -> Result<Serve, String> {
    let stderr_path = home.join(&format!("serve-{port}.stderr"));
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    let started = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).spawn().expect("spawn gosling");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send((line, Instant::now()));
        }
    });
    let fail = |child: &mut Child, why: &str| {
        let _ = child.kill();
        let _ = child.wait();
        Err(format!("{why}; stderr:\n{}", std::fs::read_to_string(&stderr_path).unwrap_or_default()))
    };
    let deadline = started + Duration::from_secs(20);
    let (mut fingerprint, mut to_fingerprint) = (None, Duration::ZERO);
    while tls && fingerprint.is_none() {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok((line, at)) => {
                if let Some(fp) = line.strip_prefix(PREFIX) {
                    fingerprint = Some(fp.to_string());
                    to_fingerprint = at - started;
                }
            }
            Err(_) if Instant::now() > deadline => return fail(&mut child, "no fingerprint line within 20 s"),
            Err(_) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return fail(&mut child, &format!("gosling serve exited with {status}"));
                }
            }
        }
    }
    let status_ok = || -> bool {
        match &fingerprint {
            Some(pin) => connect(&format!("127.0.0.1:{port}"), pin)
                .ok()
                .and_then(|t| exchange_json(&mut BufReader::new(t), "GET", "/status", None, None).ok())
                .is_some_and(|r| r.status == 200 && r.body == "ok"),
            None => std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok_and(|_| http_with("GET", &format!("http://127.0.0.1:{port}/status"), &[], None).status == 200),
        }
    };
    loop {
        // This child's answer: another process may hold the port (see `launch_on_a_free_port`).
        if status_ok() && listening_on(child.id(), port) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return fail(&mut child, &format!("gosling serve exited with {status}"));
        }
        if Instant::now() > deadline {
            return fail(&mut child, "/status did not answer 200 within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let to_status = started.elapsed();
    Ok(Serve { child, port, fingerprint, stderr_path, to_fingerprint, to_status })
}

/// `launch` of the command `cmd_for(port)` builds, on a free port: `free_port` lets go of the
/// port it found and another process may bind it first, so a start that fails because the
/// address is in use is tried again on another port (three tries).
pub(crate) fn launch_on_a_free_port(home: &TempDir, tls: bool, cmd_for: impl Fn(u16) -> Command) -> Serve {
    let mut errors = Vec::new();
    for _ in 0..3 {
        let port = free_port();
        match launch(home, cmd_for(port), port, tls) {
            Ok(s) => return s,
            Err(e) if e.contains("Address already in use") => errors.push(e),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("three ports in a row were taken: {errors:?}")
}

/// `gosling serve` exactly as Desktop starts it.
pub(crate) fn start_as_desktop(home: &TempDir, extra: &[&str]) -> Serve {
    start_as_desktop_with(home, extra, &[])
}

/// `start_as_desktop` with `env` added to its environment (the model, the mode).
pub(crate) fn start_as_desktop_with(home: &TempDir, extra: &[&str], env: &[(String, String)]) -> Serve {
    launch_on_a_free_port(home, true, |port| {
        let mut cmd = desktop_command(home, port, extra);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd
    })
}

fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn desktop_launch_pins_the_fingerprint_and_the_kept_certificate_is_reused() {
    let home = TempDir::new("serve-desktop");
    let s = start_as_desktop(&home, &[]);
    let fp = s.fingerprint.clone().unwrap();
    let pairs: Vec<&str> = fp.split(':').collect();
    assert!(
        pairs.len() == 32
            && pairs
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())),
        "{fp}"
    );
    assert_eq!(s.https("GET", "/status", None), (200, "ok".to_string()));
    assert_eq!(s.https("GET", "/health", None), (200, "ok".to_string()), "goose serve's diagnostics probe");
    // The same HTTP server as `agent`: protected routes need the secret.
    assert_eq!(s.https("GET", "/config", None).0, 401);
    let r = s.https("GET", "/config", Some(SECRET));
    assert_eq!(r.0, 200, "{r:?}");
    let (cert, key) = (home.join("config/tls/server.pem"), home.join("config/tls/server.key"));
    assert_eq!((mode(&cert), mode(&key)), (0o600, 0o600), "the kept pair is private");
    // The fingerprint is of the kept certificate's DER.
    let pem = std::fs::read(&cert).unwrap();
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(&pem)
        .map(|c: rustls::pki_types::CertificateDer| c.to_vec())
        .unwrap();
    assert_eq!(crate::tls::sha256_colon_hex(&der), fp);
    drop(s);
    // A later start reuses it: the same fingerprint, no new file.
    let before = std::fs::metadata(&cert).unwrap().modified().unwrap();
    let again = start_as_desktop(&home, &["--enable-scheduler"]);
    assert_eq!(again.fingerprint.as_deref(), Some(fp.as_str()));
    assert_eq!(std::fs::metadata(&cert).unwrap().modified().unwrap(), before);
    assert!(again.to_fingerprint <= again.to_status);
    assert!(again.stderr().contains("no scheduler"), "{}", again.stderr());
}

#[test]
fn a_corrupt_or_mismatched_kept_pair_is_replaced_and_the_log_names_the_files() {
    let home = TempDir::new("serve-corrupt");
    let first = start_as_desktop(&home, &[]).fingerprint.clone().unwrap();
    let (cert, key) = (home.join("config/tls/server.pem"), home.join("config/tls/server.key"));
    std::fs::write(&cert, "not a certificate").unwrap();
    let s = start_as_desktop(&home, &[]);
    let second = s.fingerprint.clone().unwrap();
    assert_ne!(second, first);
    let log = s.stderr();
    assert!(log.contains("tls/server.pem") && log.contains("tls/server.key") && log.contains("replaced"), "{log}");
    assert_eq!(s.https("GET", "/status", None).0, 200);
    drop(s);
    // A key of another certificate: the pair does not load, so it is replaced too.
    let other = TempDir::new("serve-other");
    drop(start_as_desktop(&other, &[]));
    std::fs::copy(other.join("config/tls/server.key"), &key).unwrap();
    let s = start_as_desktop(&home, &[]);
    assert_ne!(s.fingerprint.as_deref(), Some(second.as_str()));
    assert!(s.stderr().contains("does not load"), "{}", s.stderr());
    assert_eq!(s.https("GET", "/status", None).0, 200);
}

#[test]
fn certificate_files_on_the_command_line_are_served() {
    let home = TempDir::new("serve-files");
    let fp = start_as_desktop(&home, &[]).fingerprint.clone().unwrap();
    let elsewhere = TempDir::new("serve-files-2");
    let (cert, key) = (elsewhere.join("c.pem"), elsewhere.join("k.pem"));
    std::fs::copy(home.join("config/tls/server.pem"), &cert).unwrap();
    std::fs::copy(home.join("config/tls/server.key"), &key).unwrap();
    let s = start_as_desktop(
        &elsewhere,
        &["--tls-cert-path", cert.to_str().unwrap(), &format!("--tls-key-path={}", key.display())],
    );
    assert_eq!(s.fingerprint.as_deref(), Some(fp.as_str()));
    assert!(!elsewhere.join("config/tls/server.pem").exists(), "nothing kept when files are given");
    // Only one of the two: the error names the other.
    let port = free_port();
    let mut cmd = desktop_command(&elsewhere, port, &["--tls-cert-path", cert.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("GOOSE_TLS_KEY_PATH"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn without_the_secret_serve_refuses_to_start_and_says_what_to_set() {
    let home = TempDir::new("serve-nosecret");
    let port = free_port();
    let mut cmd = desktop_command(&home, port, &[]);
    cmd.env_remove("GOOSE_SERVER__SECRET_KEY");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GOOSE_SERVER__SECRET_KEY is not set") && err.contains("--dangerously-unauthenticated"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "no fingerprint line for a server that does not start");
    // Told it may: it starts (plain HTTP without --tls) with a generated secret in the state dir.
    let s = launch_on_a_free_port(&home, false, |port| {
        let mut cmd = gosling(&home);
        cmd.args(["serve", "--dangerously-unauthenticated", "--port", &port.to_string()]);
        cmd
    });
    let generated = std::fs::read_to_string(home.join("state/secret-key")).unwrap();
    let url = format!("http://127.0.0.1:{}/config", s.port);
    assert_eq!(http_with("GET", &url, &[], None).status, 401);
    assert_eq!(http_with("GET", &url, &[("X-Secret-Key", generated.trim())], None).status, 200);
}

#[test]
fn bad_flags_say_what_to_fix_and_help_starts_nothing() {
    let home = TempDir::new("serve-flags");
    let run = |args: &[&str]| {
        let out = gosling(&home).arg("serve").args(args).env("GOOSE_SERVER__SECRET_KEY", SECRET).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let (code, out) = run(&["--help"]);
    assert_eq!(code, Some(0));
    for flag in [
        "--tls",
        "--platform",
        "--enable-scheduler",
        "--allowed-origin",
        "--with-builtin",
        "--dangerously-unauthenticated",
        "GOOSE_SERVER__SECRET_KEY",
    ] {
        assert!(out.contains(flag), "--help mentions {flag}: {out}");
    }
    assert!(!home.join("config").exists(), "--help starts nothing");
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus"], "unknown argument \"--bogus\""),
        (&["--port"], "--port needs a number"),
        (&["--port", "x"], "--port needs a number"),
        (&["--host", "example"], "--host needs an IP address"),
        (&["--allowed-origin"], "--allowed-origin needs an origin"),
        (&["--with-builtin", "computercontroller"], "no such builtin; gosling has developer, memory"),
        (&["--tls=yes"], "unknown argument \"--tls=yes\""),
    ];
    for (args, want) in cases {
        let (code, out) = run(args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(out.contains(want), "{args:?}: {out}");
    }
}

#[test]
fn allowed_origins_are_let_through_and_others_refused() {
    let home = TempDir::new("serve-origin");
    let s = launch_on_a_free_port(&home, false, |port| {
        let mut cmd = gosling(&home);
        cmd.args(["serve", "--port", &port.to_string(), "--allowed-origin", "http://localhost:5173"])
            .env("GOOSE_SERVER__SECRET_KEY", SECRET);
        cmd
    });
    let url = format!("http://127.0.0.1:{}/config", s.port);
    let ask = |origin: &str| http_with("GET", &url, &[("X-Secret-Key", SECRET), ("Origin", origin)], None).status;
    assert_eq!(ask("http://localhost:5173"), 200);
    assert_eq!(ask("file://"), 200, "Goose Desktop's packaged renderer");
    assert_eq!(ask("https://evil.example"), 403);
}
