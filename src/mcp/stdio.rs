//! The stdio transport: an MCP server as a child process speaking newline-delimited JSON-RPC.
//!
//! The child is spawned directly (argv, never a shell) in its own process group, tied to our
//! lifetime (`sys::spawn_tied`), from a small allowlisted environment (`BASE_ENV`) plus the
//! extension's own variables: nothing else of ours (secrets, credentials) reaches it. One thread reads stdout (lines bounded; garbage skipped with a warning), one
//! drains stderr (a full pipe would block the child; the tail is kept for error messages).
//! `close` runs the shutdown ladder: close stdin, wait, SIGTERM the group, wait, SIGKILL,
//! and always reaps the child, then ends the descendants that escaped its process group
//! (gosling is a child subreaper, so they became our children; see `end_escaped`).

use crate::mcp::error::Error;
use crate::mcp::transport::{Inbound, Transport};
use crate::wire::jsonrpc::Message;
use crossbeam_channel::Sender;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Longest line accepted from a child (a larger one is an error for that server).
pub const MAX_LINE: usize = 16 << 20;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 8 << 10;
/// Lines queued for a child's stdin, and how long a send waits for room before it fails.
const STDIN_QUEUE: usize = 256;
const STDIN_STALL: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub struct StdioSpec {
    pub cmd: String,
    pub args: Vec<String>,
    /// Extra variables (the extension's `envs` and resolved `env_keys`).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Run inside this container via `<tool> exec -i`.
    pub container: Option<String>,
    /// The container engine; default `GOSLING_CONTAINER_TOOL`, else `docker` (`podman` works too).
    pub container_tool: Option<String>,
    /// How long each rung of the shutdown ladder waits; default `GOSLING_LADDER_WAIT_MS`, else 1.5 s.
    pub ladder_wait: Option<Duration>,
}

/// The variables of ours a child starts with (everything else is left out; the extension's
/// `envs`/`env_keys` come on top). Names ending in `*` are prefixes.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "SHELL",
    "XDG_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "GOSLING_DEVELOPER_UNRESTRICTED",
];

/// Also passed to the container engine itself (not into the container) in container mode, so
/// `docker`/`podman` still find their daemon and configuration.
const CONTAINER_TOOL_ENV: &[&str] = &[
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINER_HOST",
    "CONTAINERS_CONF",
    "XDG_RUNTIME_DIR",
];

/// The variable that marks an extension's processes (inherited by its descendants), so the
/// ones that leave its process group can still be told apart; the value is a run number.
const RUN_MARKER: &str = "GOSLING_EXTENSION_RUN";

fn allowed(name: &str, list: &[&str]) -> bool {
    list.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *p,
    })
}

/// True when a variable of ours is passed to children (see `BASE_ENV`).
pub fn is_base_var(name: &str) -> bool {
    allowed(name, BASE_ENV)
}

pub struct StdioTransport {
    extension: String,
    /// Lines for the writer thread, which owns the child's stdin. Dropping the sender closes
    /// stdin (the ladder's first rung); a full queue means the server stopped reading.
    stdin: Mutex<Option<Sender<Vec<u8>>>>,
    child: Mutex<Option<Child>>,
    pid: u32,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    ladder_wait: Duration,
    /// `GOSLING_EXTENSION_RUN=N`, as set in this child's environment.
    marker: String,
}

impl StdioTransport {
    /// Spawns the child and its reader threads; messages and the end go to `inbound`.
    pub fn spawn(spec: &StdioSpec, extension: &str, inbound: Sender<Inbound>) -> Result<Arc<StdioTransport>, Error> {
        let mut cmd = match &spec.container {
            Some(container) => {
                let tool = spec
                    .container_tool
                    .clone()
                    .or_else(|| std::env::var("GOSLING_CONTAINER_TOOL").ok())
                    .unwrap_or_else(|| "docker".into());
                let mut c = Command::new(tool);
                c.arg("exec").arg("-i");
                // `-e NAME` without `=value`: the engine forwards the value from its own
                // environment (set below), so no value is on a command line `ps` shows.
                for (k, _) in &spec.env {
                    c.arg("-e").arg(k);
                }
                c.arg(container).arg(&spec.cmd).args(&spec.args);
                c
            }
            None => {
                let mut c = Command::new(&spec.cmd);
                c.args(&spec.args);
                c
            }
        };
        cmd.env_clear();
        for (k, v) in std::env::vars_os() {
            let name = k.to_string_lossy();
            if is_base_var(&name) || (spec.container.is_some() && allowed(&name, CONTAINER_TOOL_ENV)) {
                cmd.env(k, v);
            }
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let marker = format!("{RUN_MARKER}={}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        if let Some((k, v)) = marker.split_once('=') {
            cmd.env(k, v);
        }
        if let Some(dir) = &spec.cwd {
            cmd.current_dir(dir).env("GOOSE_WORKING_DIR", dir);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = crate::sys::spawn_tied(cmd).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                format!("`{}` was not found; check the extension's cmd and PATH", spec.cmd)
            } else {
                format!("cannot start `{}`: {e}", spec.cmd)
            };
            Error::Other(format!("{extension}: {hint}"))
        })?;
        let pid = child.id();
        let stdin = child.stdin.take().map(|pipe| {
            let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(STDIN_QUEUE);
            let name = extension.to_string();
            let spawned =
                thread::Builder::new().name(format!("mcp-stdin-{name}")).spawn(move || write_stdin(&name, pipe, rx));
            if let Err(e) = spawned {
                log::error!("mcp {extension}: cannot start the stdin writer: {e}");
            }
            tx
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        log::info!("mcp {extension}: started `{}` (pid {pid})", spec.cmd);
        let t = Arc::new(StdioTransport {
            extension: extension.to_string(),
            stdin: Mutex::new(stdin),
            child: Mutex::new(Some(child)),
            pid,
            stderr: stderr.clone(),
            marker,
            ladder_wait: spec.ladder_wait.unwrap_or_else(|| {
                Duration::from_millis(
                    std::env::var("GOSLING_LADDER_WAIT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500),
                )
            }),
        });
        let name = extension.to_string();
        let stderr_done = {
            let (name, tail) = (name.clone(), stderr.clone());
            thread::Builder::new()
                .name(format!("mcp-stderr-{name}"))
                .spawn(move || drain_stderr(&name, stderr_pipe, &tail))
                .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?
        };
        let weak = Arc::downgrade(&t);
        thread::Builder::new()
            .name(format!("mcp-stdout-{name}"))
            .spawn(move || {
                let reason = read_stdout(&name, stdout, &inbound);
                // Let the stderr drain finish so the tail has the child's last words.
                let deadline = Instant::now() + Duration::from_millis(500);
                while !stderr_done.is_finished() && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(10));
                }
                let tail = weak.upgrade().map(|t| t.diagnostics()).unwrap_or_default();
                let detail = if tail.is_empty() {
                    format!("{name}: {reason}")
                } else {
                    format!("{name}: {reason}; stderr: {tail}")
                };
                let _ = inbound.send(Inbound::Closed(Error::Closed { detail }));
            })
            .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?;
        Ok(t)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The shutdown ladder: stdin EOF → wait → SIGTERM → wait → SIGKILL; always reaped.
    /// The group is only ever signalled before the child is reaped: once reaped, its pid may
    /// belong to someone else.
    fn ladder(&self) {
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
        let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
        let pid = self.pid;
        let family = crate::sys::descendants(pid);
        let exited_within = |d: Duration| -> bool {
            let deadline = Instant::now() + d;
            loop {
                if crate::sys::exited_unreaped(pid) {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                thread::sleep(Duration::from_millis(10));
            }
        };
        if exited_within(self.ladder_wait) {
            log::debug!("mcp {}: exited after stdin closed", self.extension);
        } else {
            let _ = crate::sys::terminate_group(pid);
            if exited_within(self.ladder_wait) {
                log::debug!("mcp {}: exited after SIGTERM", self.extension);
            } else {
                log::warn!("mcp {}: ignored SIGTERM; sending SIGKILL", self.extension);
            }
        }
        // The leader is gone or a zombie (its pid still reserved): take down anything left in
        // its group (npx's node, a shell's children), then reap.
        let _ = crate::sys::kill_group(pid);
        let _ = child.wait(); // wait: after SIGKILL of its group, the leader is gone or a zombie
        crate::sys::forget_child(pid);
        self.end_escaped(&family);
    }

    /// Ends the descendants that left the process group (`setsid`): as we are a child
    /// subreaper (`sys::become_subreaper`), once their parents died they are our children, which
    /// we did not spawn. Ours to end: those seen among the child's descendants before the
    /// ladder, and those carrying this run's marker in their environment (forked later). Waits
    /// up to a second for the ones seen before to be reparented to us.
    fn end_escaped(&self, family: &[u32]) {
        let me = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let ended = crate::sys::end_orphans(|p| family.contains(&p) || crate::sys::environ_has(p, &self.marker));
            if ended > 0 {
                log::info!("mcp {}: ended {ended} process(es) that had left its process group", self.extension);
            }
            let waiting = crate::sys::processes()
                .into_iter()
                .any(|(p, ppid, state)| family.contains(&p) && ppid != me && state != 'Z');
            if !waiting || Instant::now() >= deadline {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Writes queued lines to the child; ends (closing stdin) when the queue's sender is dropped
/// or the child stops reading for good.
fn write_stdin(name: &str, mut pipe: ChildStdin, lines: crossbeam_channel::Receiver<Vec<u8>>) {
    for line in lines {
        if let Err(e) = pipe.write_all(&line).and_then(|_| pipe.flush()) {
            log::debug!("mcp {name}: writing to stdin failed: {e}");
            return;
        }
    }
}

fn drain_stderr(name: &str, pipe: impl Read, tail: &Mutex<VecDeque<u8>>) {
    let mut r = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        // wait: the pipe ends when the child exits (the shutdown ladder ends with SIGKILL)
        match r.by_ref().take(64 << 10).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                log::debug!(target: "mcp::stderr", "{name}: {}", String::from_utf8_lossy(&line).trim_end());
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.extend(line.iter());
                while t.len() > STDERR_TAIL {
                    t.pop_front();
                }
            }
        }
    }
}

/// Reads messages until EOF or a fatal line; returns why the stream ended.
fn read_stdout(name: &str, pipe: impl Read, inbound: &Sender<Inbound>) -> String {
    let mut r = BufReader::with_capacity(64 << 10, pipe);
    let mut line = Vec::new();
    loop {
        // A huge line's buffer is not kept for the next, small one.
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
        line.clear();
        // wait: the pipe ends when the child exits (the shutdown ladder ends with SIGKILL)
        match r.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line) {
            Ok(0) => return "the process closed its stdout (exited)".into(),
            Err(e) => return format!("reading its stdout failed: {e}"),
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            return format!("it wrote a line longer than {MAX_LINE} bytes; the connection was dropped");
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        log::trace!("mcp {name}: <- {}", String::from_utf8_lossy(text));
        match Message::parse(text) {
            Ok(m) => {
                if inbound.send(Inbound::Message(m)).is_err() {
                    return "the client went away".into();
                }
            }
            Err(e) => {
                let shown: String = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
                log::warn!("mcp {name}: skipping a line that is not JSON-RPC ({e}): {shown:?}");
            }
        }
    }
}

impl Transport for StdioTransport {
    fn send(&self, msg: &Message) -> Result<(), Error> {
        let mut line = msg.encode();
        log::trace!("mcp {}: -> {line}", self.extension);
        line.push('\n');
        let tx = self.stdin.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let tx = tx.ok_or_else(|| Error::Closed { detail: format!("{}: stdin is closed", self.extension) })?;
        tx.send_timeout(line.into_bytes(), STDIN_STALL).map_err(|e| match e {
            crossbeam_channel::SendTimeoutError::Timeout(_) => Error::Other(format!(
                "{}: the server has not read its input for {STDIN_STALL:?}; it is stuck — restart it or check its stderr: {}",
                self.extension,
                self.diagnostics()
            )),
            crossbeam_channel::SendTimeoutError::Disconnected(_) => {
                Error::Closed { detail: format!("{}: writing to the process failed (it exited); stderr: {}", self.extension, self.diagnostics()) }
            }
        })
    }

    fn close(&self) {
        self.ladder();
    }

    fn diagnostics(&self) -> String {
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = t.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.ladder();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base_vars() {
        for s in [
            "GOOSE_SERVER__SECRET_KEY",
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_PAT",
            "DATABASE_URL",
            "LD_PRELOAD",
            "PATHX",
            "DOCKER_HOST",
        ] {
            assert!(!super::is_base_var(s), "{s}");
        }
        for s in ["PATH", "HOME", "LANG", "LC_ALL", "XDG_CONFIG_HOME", "SSL_CERT_FILE", "https_proxy", "TMPDIR"] {
            assert!(super::is_base_var(s), "{s}");
        }
    }
}
