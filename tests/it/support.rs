//! Test support: temp dirs, the real `gosling` binary as a server or a CLI, the peers from
//! `scripts/peers`, and a small HTTP client. Every server is killed when its handle drops.

#![allow(dead_code)] // each test module uses its own subset

use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const SECRET: &str = "test-secret-0123456789";

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gosling"))
}

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Initialise env_logger once for in-test code (level from RUST_LOG).
pub fn init_log() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
    });
}

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "gosling-it-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The peers installed by `scripts/peers/install target/peers` (variables of peers.env).
pub struct Peers(HashMap<String, String>);

impl Peers {
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).unwrap_or_else(|| {
            panic!("peers.env has no {key}: the installed peers are older than scripts/peers; run `scripts/peers/install target/peers`")
        })
    }
    pub fn node(&self) -> &str {
        self.get("MCP_PEER_NODE")
    }
    pub fn python(&self) -> &str {
        self.get("MCP_PEER_PYTHON")
    }
}

fn load_peers() -> Option<Peers> {
    let path = std::env::var("GOSLING_PEERS_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest_dir().join("target/peers/peers.env"));
    let text = std::fs::read_to_string(path).ok()?;
    let mut m = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("export ") {
            if let Some((k, v)) = rest.split_once('=') {
                m.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
    }
    Some(Peers(m))
}

/// The installed peers. A missing install fails the test with the command that installs it;
/// only `GOSLING_SKIP_PEERS=1` turns that into `None` (the caller skips and says so).
pub fn peers() -> Option<&'static Peers> {
    static P: OnceLock<Option<Peers>> = OnceLock::new();
    if skip_peers() {
        return None;
    }
    match P.get_or_init(load_peers).as_ref() {
        Some(p) => Some(p),
        None => panic!(
            "the test peers are not installed: run `scripts/peers/install target/peers` (or `scripts/test`), \
             or set GOSLING_SKIP_PEERS=1 to skip the tests that need them"
        ),
    }
}

/// `GOSLING_SKIP_PEERS=1`: the caller explicitly opted out of peer-based tests.
pub fn skip_peers() -> bool {
    std::env::var("GOSLING_SKIP_PEERS").is_ok_and(|v| v == "1")
}

/// Prints the line a skipped test leaves: which test, and why.
pub fn say_skipped(what: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIP {test}: {what} (GOSLING_SKIP_PEERS=1)");
}

/// `let peers = require_peers!();` — the peers, or (only under `GOSLING_SKIP_PEERS=1`) a
/// return from the test that prints what was skipped.
#[macro_export]
macro_rules! require_peers {
    () => {
        match $crate::support::peers() {
            Some(p) => p,
            None => {
                $crate::support::say_skipped("needs the test peers");
                return;
            }
        }
    };
}

/// A copy of the binary that any user can run, for tests that run it as another user: the
/// clone (and so `target/`) may live in a directory only its owner can enter (issue 29).
/// One copy per checkout, replaced (write + rename) when a test binary first asks.
pub fn shared_bin() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let tag = gosling::util::hex(&gosling::util::sha256(manifest_dir().to_string_lossy().as_bytes())[..6]);
        let dir = std::env::temp_dir().join(format!("gosling-it-shared-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmp = dir.join(format!("gosling.{}", std::process::id()));
        std::fs::copy(bin(), &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = dir.join("gosling");
        std::fs::rename(&tmp, &exe).unwrap();
        exe
    })
    .clone()
}

/// A `work` dir in `home` for sessions: its canonical path, as an editor sends it as `cwd`.
pub fn work_dir(home: &TempDir) -> String {
    let w = home.join("work");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::canonicalize(w).unwrap().display().to_string()
}

/// A `gosling` command with isolated config/state dirs and no inherited secrets.
pub fn gosling(home: &TempDir) -> Command {
    gosling_at(&bin(), home)
}

/// `gosling` with the binary at `exe` (see `shared_bin`).
pub fn gosling_at(exe: &Path, home: &TempDir) -> Command {
    let mut c = Command::new(exe);
    c.env("GOSLING_CONFIG_DIR", home.join("config"))
        .env("GOSLING_STATE_DIR", home.join("state"))
        .env("HOME", home.path())
        // Sessions are named from their first message: no extra title request to the test's
        // fake model after each first exchange (tests of the model's titles set `model`).
        .env("GOSLING_SESSION_TITLES", "first_message")
        // No builtin added to a fresh config at `gosling agent`'s first start: each test names
        // the extensions it runs (the default is tested in `web`).
        .env("GOSLING_FIRST_RUN_EXTENSIONS", "none")
        .env_remove("GOOSE_SERVER__SECRET_KEY")
        .env_remove("GOOSE_PORT")
        .env_remove("GOOSE_TLS")
        .env_remove("GOOSE_TLS_CERT_PATH")
        .env_remove("GOOSE_TLS_KEY_PATH")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GOOSE_PROVIDER")
        .env_remove("GOOSE_MODEL");
    c
}

/// A running `gosling agent` on 127.0.0.1:0.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub home: TempDir,
    /// Lines the server printed on stdout after the listening line (collected in background).
    pub stderr_path: PathBuf,
    /// The listening line said `https://` (`--tls`); `url()` follows it.
    pub tls: bool,
    /// Stdout lines before the listening line (e.g. `GOOSED_CERT_FINGERPRINT=…`).
    pub early_stdout: Vec<String>,
}

pub struct ServerOpts {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
    pub secret: Option<String>,
    /// Soft and hard limits on open file descriptors for the server process.
    pub fd_limit: Option<(u64, u64)>,
    /// Leave GOOSE_TLS to the server's own default (HTTPS). Otherwise the launcher passes
    /// `GOOSE_TLS=false` unless `env` sets GOOSE_TLS or `args` has `--tls`/`--no-tls`, so most
    /// tests talk plain HTTP with ureq; the TLS and Desktop tests opt in.
    pub default_tls: bool,
    /// Run the server as this uid and gid (the tests run as root: to show what another process
    /// of the same, unprivileged user can and cannot do). The home must be theirs.
    pub run_as: Option<u32>,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            env: Vec::new(),
            args: Vec::new(),
            secret: Some(SECRET.to_string()),
            fd_limit: None,
            default_tls: false,
            run_as: None,
        }
    }
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(ServerOpts::default())
    }

    pub fn start_with(opts: ServerOpts) -> Server {
        Server::start_in(TempDir::new("srv"), opts)
    }

    /// Starts in an existing home (to restart a server over the same files).
    pub fn start_in(home: TempDir, opts: ServerOpts) -> Server {
        Server::try_start_in(home, opts).unwrap_or_else(|(_, e)| panic!("{e}"))
    }

    /// Like `start_in`, but a server that exits before listening is an `Err` with its stderr.
    pub fn try_start_in(home: TempDir, opts: ServerOpts) -> Result<Server, (TempDir, String)> {
        init_log();
        let stderr_path = home.join("server.stderr");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let exe = if opts.run_as.is_some() { shared_bin() } else { bin() };
        let mut cmd = gosling_at(&exe, &home);
        cmd.arg("agent").arg("--port").arg("0").args(&opts.args);
        if let Some(s) = &opts.secret {
            cmd.env("GOOSE_SERVER__SECRET_KEY", s);
        }
        let tls_chosen =
            opts.env.iter().any(|(k, _)| k == "GOOSE_TLS") || opts.args.iter().any(|a| a == "--tls" || a == "--no-tls");
        if !opts.default_tls && !tls_chosen {
            cmd.env("GOOSE_TLS", "false");
        }
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        if !opts.env.iter().any(|(k, _)| k == "RUST_LOG") {
            cmd.env("RUST_LOG", std::env::var("GOSLING_TEST_LOG").unwrap_or_else(|_| "debug".into()));
        }
        if let Some((soft, hard)) = opts.fd_limit {
            use std::os::unix::process::CommandExt;
            // SAFETY: runs in the child between fork and exec; setrlimit is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        if let Some(id) = opts.run_as {
            use std::os::unix::process::CommandExt;
            cmd.uid(id).gid(id);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).spawn().expect("spawn gosling");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let _ = tx.send(line.trim_end().to_string());
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut early_stdout = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => {
                    let found = [("listening on http://", false), ("listening on https://", true)]
                        .into_iter()
                        .find_map(|(marker, tls)| line.split(marker).nth(1).map(|addr| (addr.to_string(), tls)));
                    if let Some((addr, tls)) = found {
                        let addr = addr.split_whitespace().next().unwrap().trim_end_matches('/').to_string();
                        return Ok(Server { child, addr, home, stderr_path, tls, early_stdout });
                    }
                    early_stdout.push(line);
                }
                Err(_) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                        return Err((home, format!("gosling exited with {status} before listening; stderr:\n{err}")));
                    }
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                        panic!("gosling did not print its listening line within 20 s; stderr:\n{err}");
                    }
                }
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{}", if self.tls { "https" } else { "http" }, self.addr, path)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Stops the server (SIGKILL) and hands back its home for a restart.
    pub fn kill(mut self) -> TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let home = std::mem::replace(&mut self.home, TempDir(PathBuf::new()));
        std::mem::forget(self);
        home
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn get(&self, path: &str) -> Resp {
        http("GET", &self.url(path), Some(SECRET), None)
    }
    pub fn post(&self, path: &str, body: Value) -> Resp {
        http("POST", &self.url(path), Some(SECRET), Some(body.to_string().as_bytes()))
    }
    pub fn delete(&self, path: &str) -> Resp {
        http("DELETE", &self.url(path), Some(SECRET), None)
    }
}

/// A server that runs `gosling mcp NAME` by bare command name, as a goose:// link names it
/// (the binary's dir first on PATH), with `extra` in its environment.
pub fn server_with_gosling_on_path(extra: Vec<(String, String)>) -> Server {
    let bin_dir = bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut env = vec![("PATH".to_string(), path)];
    env.extend(extra);
    Server::start_with(ServerOpts { env, ..Default::default() })
}

impl Drop for Server {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// Stops a gosling process: SIGTERM first, so that it runs its shutdown ladder for its
/// children, then `reap_within` 10 s.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    reap_within(child, Duration::from_secs(10));
}

/// Waits up to `grace` for `child` to exit on its own (told to stop, or its stdin closed),
/// then kills it; reaped either way.
pub fn reap_within(child: &mut Child, grace: Duration) {
    if wait_for(grace, || child.try_wait().ok().flatten()).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `POST /agent/start` in `working_dir`, answered 200: the new session's id. `overrides` are
/// the session's extension configs; `None` takes the enabled extensions of the config.
pub fn start_session(s: &Server, working_dir: &Path, overrides: Option<Vec<Value>>) -> String {
    let mut body = serde_json::json!({ "working_dir": working_dir });
    if let Some(list) = overrides {
        body["extension_overrides"] = Value::Array(list);
    }
    let r = s.post("/agent/start", body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["id"].as_str().unwrap_or_else(|| panic!("no id: {}", r.text())).to_string()
}

/// `POST /agent/resume` that loads the model and the extensions, answered 200: the answer,
/// whose `extension_results` say which extensions started and why others did not.
pub fn resume(s: &Server, id: &str) -> Value {
    let r = s.post("/agent/resume", serde_json::json!({"session_id": id, "load_model_and_extensions": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// An HTTP response, whatever its status.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): status {} body {:?}", self.status, self.text()))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub fn agent() -> &'static ureq::Agent {
    static A: OnceLock<ureq::Agent> = OnceLock::new();
    A.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .max_idle_connections(0)
            .build()
            .new_agent()
    })
}

/// One request with an optional `X-Secret-Key` and JSON body.
pub fn http(method: &str, url: &str, secret: Option<&str>, body: Option<&[u8]>) -> Resp {
    http_with(method, url, &secret.map(|s| vec![("X-Secret-Key", s)]).unwrap_or_default(), body)
}

pub fn http_with(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Resp {
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    if body.is_some() && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        b = b.header("Content-Type", "application/json");
    }
    let resp = match body {
        Some(bytes) => agent().run(b.body(bytes.to_vec()).unwrap()),
        None => agent().run(b.body(()).unwrap()),
    };
    let mut resp = resp.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let headers = resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let body = resp.body_mut().with_config().limit(256 << 20).read_to_vec().unwrap_or_default();
    Resp { status, headers, body }
}

/// Polls `f` until it returns Some or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Asserts that `took` (measured from the step the test caused, set-up excluded) is well under
/// `would_take`: the time the thing would take if it waited for what it must not wait for (a
/// timeout, the rest of a stream, a model's first token). Under half of it: a ratio that holds
/// on a loaded 2-core machine, where an absolute bound of a second does not.
#[track_caller]
pub fn assert_well_under(took: Duration, would_take: Duration, what: &str) {
    assert!(
        took * 2 < would_take,
        "{what}: took {took:?}, not well under the {would_take:?} it takes when it waits for what it must not"
    );
}

/// True while a process with this pid exists (and is not a zombie).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// A number field of `/proc/PID/status` (`Threads:`, or a size in KiB such as `VmRSS:`).
pub fn proc_status(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in {s}"));
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// The resident memory of `pid`, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status(pid, "VmRSS:")
}

/// The peak resident memory of `pid` so far, KiB.
pub fn hwm_kib(pid: u32) -> u64 {
    proc_status(pid, "VmHWM:")
}

/// Direct children of `pid` (from /proc), to check that no extension process is left behind.
pub fn child_pids(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                let after = s.rsplit(')').next().unwrap_or("");
                let fields: Vec<&str> = after.split_whitespace().collect();
                if fields.len() > 2 && fields[0] != "Z" && fields[1].parse::<u32>().ok() == Some(pid) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A background peer process, killed (whole process group) on drop.
pub struct PeerProc {
    pub child: Child,
    pub url: String,
    /// The loopback port it serves on (HTTP peers).
    pub port: u16,
}

impl Drop for PeerProc {
    fn drop(&mut self) {
        // The whole process group, while the leader is unreaped (its pid cannot be reused).
        // Never `kill -KILL -PID` through the kill(1) command: without `--`, some versions
        // read `-PID` as an option and signal every process (kill(-1)).
        let _ = gosling::sys::kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PeerProc {
    /// Waits up to 60 s until this peer (or a process it started) listens on `port`; false
    /// when it exits first (another process took the port: see `spawn_http_peer`).
    pub fn listens_on(&mut self, port: u16) -> bool {
        let pid = self.child.id();
        let up = wait_for(Duration::from_secs(60), || {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(false);
            }
            listener_inode(port).filter(|inode| owns_socket(pid, inode)).map(|_| true)
        });
        assert!(up.is_some(), "the peer did not listen on {port} within 60 s");
        up == Some(true)
    }
}

/// True when `pid` (or one of its descendants) listens on `port`.
pub fn listening_on(pid: u32, port: u16) -> bool {
    listener_inode(port).is_some_and(|inode| owns_socket(pid, &inode))
}

/// The inode of the socket listening on loopback `port` (`/proc/net/tcp` and `tcp6`).
fn listener_inode(port: u16) -> Option<String> {
    let port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && f[1].ends_with(&port) && f[3] == "0A").then(|| f[9].to_string())
        })
    })
}

/// True when `pid` or one of its descendants holds the socket `inode`.
fn owns_socket(pid: u32, inode: &str) -> bool {
    let link = format!("socket:[{inode}]");
    std::iter::once(pid).chain(descendants(pid)).any(|p| {
        std::fs::read_dir(format!("/proc/{p}/fd"))
            .map(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.to_string_lossy() == link)))
            .unwrap_or(false)
    })
}

/// Starts the HTTP peer that `cmd_for(port)` builds, on a free loopback port, and waits until
/// the peer itself listens there; its URL ends in `path`. `free_port` lets go of the port it
/// found, so another process (a server of another test) may bind it first: the peer then
/// exits, and it is started again on another port (three tries).
pub fn spawn_http_peer(path: &str, mut cmd_for: impl FnMut(u16) -> Command) -> PeerProc {
    use std::os::unix::process::CommandExt;
    for _ in 0..3 {
        let port = free_port();
        let mut cmd = cmd_for(port);
        cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().expect("spawn peer");
        let mut peer = PeerProc { child, url: format!("http://127.0.0.1:{port}{path}"), port };
        if peer.listens_on(port) {
            return peer;
        }
    }
    panic!("the peer exited before listening, on three free ports in a row")
}

/// py_server.py over Streamable HTTP; `mode` is "", "json" or "stateless", after "legacy" for
/// the server that speaks only the legacy, session-based revisions.
pub fn py_http(peers: &Peers, mode: &str) -> PeerProc {
    spawn_http_peer("/mcp", |port| {
        let mut cmd = Command::new(peers.python());
        cmd.arg(peers.get("MCP_PEER_PY_SERVER"));
        let mode = match mode.strip_prefix("legacy") {
            Some(rest) => {
                cmd.arg("legacy");
                rest.trim()
            }
            None => mode,
        };
        cmd.arg("http").arg(port.to_string());
        if !mode.is_empty() {
            cmd.arg(mode);
        }
        cmd
    })
}

/// server-everything over Streamable HTTP.
pub fn everything_http(peers: &Peers) -> PeerProc {
    spawn_http_peer("/mcp", |port| {
        let mut cmd = Command::new(peers.node());
        cmd.arg(peers.get("MCP_PEER_EVERYTHING")).arg("streamableHttp").env("PORT", port.to_string());
        cmd
    })
}

/// The stdio config of server-everything.
pub fn everything_stdio_config(peers: &Peers, name: &str) -> Value {
    serde_json::json!({"type":"stdio","name":name,"description":"","cmd":peers.node(),"args":[peers.get("MCP_PEER_EVERYTHING"),"stdio"],"timeout":60})
}

/// All descendants of `pid` (children, grandchildren, ...).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for c in child_pids(p) {
            out.push(c);
            frontier.push(c);
        }
    }
    out
}

/// Percent-encodes every byte but RFC 3986's unreserved ones (for goose:// link parameters).
pub fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
