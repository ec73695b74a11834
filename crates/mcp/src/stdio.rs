//! The stdio transport: an MCP server as a child process speaking newline-delimited JSON-RPC.
//!
//! The child is spawned directly (argv, never a shell) in its own process group, tied to our
//! lifetime (`sys::spawn_tied`), confined by the kernel when the caller gives a
//! `Confinement` (`sys::spawn_confined`), from a small allowlisted environment (`BASE_ENV`) plus the
//! extension's own variables: nothing else of ours (secrets, credentials) reaches it.
//!
//! Our ends of its stdin and stdout are non-blocking. A request is written to stdin by the
//! thread that sends it (waiting at most `STDIN_STALL` for room). Stdout is read by whoever
//! holds it (`Stdout::lines`): a caller waiting for its answer (`Transport::lead`: the answer
//! goes straight to the thread that wants it, no hand-offs), else the reader thread, which
//! forwards what it reads to the client's router. Lines are bounded, garbage is skipped with a
//! warning. One more thread drains stderr (a full pipe would block the child; the tail is kept
//! for error messages). `close` runs the shutdown ladder: close stdin, wait, SIGTERM the
//! group, wait, SIGKILL, and always reaps the child, then ends the descendants that escaped
//! its process group (gosling is a child subreaper, so they became our children; see
//! `end_escaped`).

use crate::error::Error;
use crate::transport::{Inbound, Lead, Transport};
use crossbeam_channel::Sender;
use gosling_sys::{poll_fd, poll_fds, Ready};
use gosling_util::{in_words, lock};
use gosling_wire::jsonrpc::Message;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

/// Longest line accepted from a child (a larger one is an error for that server).
pub const MAX_LINE: usize = 16 << 20;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 8 << 10;
/// How long a send waits for room in the child's stdin before it fails (the server is stuck);
/// `GOSLING_STDIN_STALL_MS` overrides it.
const STDIN_STALL: Duration = Duration::from_secs(30);
/// Bytes read from stdout at a time.
const CHUNK: usize = 64 << 10;
/// While callers lead, the reader thread looks in this often instead of waking for every line
/// they read.
const LOOK: Duration = Duration::from_millis(10);

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
    /// How long a send waits for room in stdin; default `GOSLING_STDIN_STALL_MS`, else 30 s.
    pub stdin_stall: Option<Duration>,
    /// Values the child was given that are never shown: its stderr, logged and kept for error
    /// messages, has each replaced by `[secret]` (a server that prints its token on a failed
    /// start must not put it in gosling's log or an answer).
    pub redact: Vec<String>,
    /// What the kernel holds the child to (`sys::spawn_confined`); `None`: unconfined, as the
    /// caller decided (an opt-out, container mode, gosling's own builtins).
    pub confinement: Option<gosling_sys::Confinement>,
    /// Where the egress listener of a confined child with `Network::Proxy` goes.
    pub proxy_to: Option<Sender<std::net::TcpListener>>,
}

/// The variables of ours a child starts with (everything else is left out; the extension's
/// `envs`/`env_keys` come on top), space-separated. Names ending in `*` are prefixes.
pub const BASE_ENV: &str = "PATH HOME USER LOGNAME LANG LANGUAGE LC_* TZ TERM TMPDIR SHELL XDG_* \
    SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS \
    HTTP_PROXY HTTPS_PROXY NO_PROXY ALL_PROXY http_proxy https_proxy no_proxy all_proxy GOSLING_DEVELOPER_UNRESTRICTED";

/// Also passed to the container engine itself (not into the container) in container mode, so
/// `docker`/`podman` still find their daemon and configuration.
const CONTAINER_TOOL_ENV: &str = "DOCKER_HOST DOCKER_CONTEXT DOCKER_CONFIG DOCKER_CERT_PATH DOCKER_TLS_VERIFY \
    CONTAINER_HOST CONTAINERS_CONF XDG_RUNTIME_DIR";

/// The variable that marks an extension's processes (inherited by its descendants), so the
/// ones that leave its process group can still be told apart; the value is a run number.
const RUN_MARKER: &str = "GOSLING_EXTENSION_RUN";

/// A duration in milliseconds from our environment, else `default`.
fn ms_from_env(name: &str, default: Duration) -> Duration {
    gosling_config::settings::millis(&gosling_config::ProcessEnv, name, default)
}

/// True when a variable of ours is passed to children (see `BASE_ENV`).
pub fn is_base_var(name: &str) -> bool {
    in_words(BASE_ENV, name)
}

pub struct StdioTransport {
    extension: String,
    /// The child's stdin (non-blocking). Taking it closes stdin (the ladder's first rung).
    stdin: Mutex<Option<ChildStdin>>,
    stdout: Arc<Stdout>,
    child: Mutex<Option<Child>>,
    pid: u32,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    ladder_wait: Duration,
    stdin_stall: Duration,
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
                    .unwrap_or_else(|| gosling_config::settings::container_tool(&gosling_config::ProcessEnv));
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
        let container = spec.container.is_some();
        for (k, v) in gosling_config::settings::inherited(|name| {
            is_base_var(name) || (container && in_words(CONTAINER_TOOL_ENV, name))
        }) {
            cmd.env(k, v);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string();
        let marker = format!("{RUN_MARKER}={run}");
        cmd.env(RUN_MARKER, run);
        if let Some(dir) = &spec.cwd {
            // The caller may start a program elsewhere than the working dir and name the
            // working dir itself (extensions::policy::launch_dir).
            cmd.current_dir(dir);
            if !spec.env.iter().any(|(k, _)| k == "GOOSE_WORKING_DIR") {
                cmd.env("GOOSE_WORKING_DIR", dir);
            }
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let spawned = match &spec.confinement {
            Some(c) => gosling_sys::spawn_confined(cmd, c).map(|confined| {
                if let (Some(listener), Some(to)) = (confined.proxy, &spec.proxy_to) {
                    let _ = to.try_send(listener);
                }
                log::info!(
                    "mcp {extension}: confined (Landlock ABI {}, own user and network namespace)",
                    confined.landlock_abi
                );
                confined.child
            }),
            None => gosling_sys::spawn_contained(cmd),
        };
        let mut child = spawned.map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                format!("`{}` was not found; check the extension's cmd and PATH", spec.cmd)
            } else if spec.confinement.is_some() {
                format!(
                    "cannot start `{}` confined: {e}; `gosling probe -- CMD` says what this kernel offers, a program outside the system dirs and its own install dir needs a `sandbox.paths` grant to run"
                    ,spec.cmd
                )
            } else {
                format!("cannot start `{}`: {e}", spec.cmd)
            };
            Error::Other(format!("{extension}: {hint}"))
        })?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three pipes were asked for above")
        };
        let pipes_error = |e: std::io::Error| Error::Other(format!("{extension}: cannot set up the pipes: {e}"));
        gosling_sys::set_nonblocking(&stdin).map_err(pipes_error)?;
        gosling_sys::set_nonblocking(&stdout).map_err(pipes_error)?;
        let stdout = Arc::new(Stdout::new(extension, stdout));
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        log::info!("mcp {extension}: started `{}` (pid {pid})", spec.cmd);
        let t = Arc::new(StdioTransport {
            extension: extension.to_string(),
            stdin: Mutex::new(Some(stdin)),
            stdout: stdout.clone(),
            child: Mutex::new(Some(child)),
            pid,
            stderr: stderr.clone(),
            marker,
            stdin_stall: spec.stdin_stall.unwrap_or_else(|| ms_from_env("GOSLING_STDIN_STALL_MS", STDIN_STALL)),
            ladder_wait: spec
                .ladder_wait
                .unwrap_or_else(|| ms_from_env("GOSLING_LADDER_WAIT_MS", Duration::from_millis(1500))),
        });
        let name = extension.to_string();
        let stderr_done = {
            let (name, tail) = (name.clone(), stderr.clone());
            // Longest first, so a secret that holds another is replaced whole; a value of a few
            // characters would blot out ordinary words.
            let mut redact: Vec<String> = spec.redact.iter().filter(|v| v.len() >= 4).cloned().collect();
            redact.sort_by_key(|v| std::cmp::Reverse(v.len()));
            thread::Builder::new()
                .name(format!("mcp-stderr-{name}"))
                .spawn(move || drain_stderr(&name, stderr_pipe, &tail, &redact))
                .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?
        };
        let weak = Arc::downgrade(&t);
        let reader = thread::Builder::new()
            .name(format!("mcp-stdout-{name}"))
            .spawn(move || {
                let reason = stdout.read_loop(&inbound);
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
        let _ = t.stdout.reader.set(reader.thread().clone());
        Ok(t)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The shutdown ladder: stdin EOF → wait → SIGTERM → wait → SIGKILL; always reaped.
    /// The group is only ever signalled before the child is reaped: once reaped, its pid may
    /// belong to someone else.
    fn ladder(&self) {
        // A send stalled on a full pipe holds stdin (for at most STDIN_STALL): then the next
        // rungs end the child instead.
        match self.stdin.try_lock() {
            Ok(mut stdin) => drop(stdin.take()),
            Err(TryLockError::Poisoned(e)) => drop(e.into_inner().take()),
            Err(TryLockError::WouldBlock) => {}
        }
        let Some(mut child) = lock(&self.child).take() else { return };
        let pid = self.pid;
        let family = gosling_sys::descendants(pid);
        let exited_within = |d: Duration| -> bool {
            let deadline = Instant::now() + d;
            loop {
                if gosling_sys::exited_unreaped(pid) {
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
            let _ = gosling_sys::terminate_group(pid);
            if exited_within(self.ladder_wait) {
                log::debug!("mcp {}: exited after SIGTERM", self.extension);
            } else {
                log::warn!("mcp {}: ignored SIGTERM; sending SIGKILL", self.extension);
            }
        }
        // The leader is gone or a zombie (its pid still reserved): take down anything left in
        // its group (npx's node, a shell's children), then reap.
        let _ = gosling_sys::kill_group(pid);
        let _ = child.wait(); // wait: after SIGKILL of its group, the leader is gone or a zombie
        gosling_sys::forget_child(pid);
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
            let ended = gosling_sys::end_orphans(|p| family.contains(&p) || gosling_sys::environ_has(p, &self.marker));
            if ended > 0 {
                log::info!("mcp {}: ended {ended} process(es) that had left its process group", self.extension);
            }
            let waiting = gosling_sys::processes()
                .into_iter()
                .any(|(p, ppid, state)| family.contains(&p) && ppid != me && state != 'Z');
            if !waiting || Instant::now() >= deadline {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn drain_stderr(name: &str, pipe: impl Read, tail: &Mutex<VecDeque<u8>>, redact: &[String]) {
    let mut r = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        // wait: the pipe ends when the child exits (the shutdown ladder ends with SIGKILL)
        match r.by_ref().take(64 << 10).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if !redact.is_empty() {
                    line = redacted(&line, redact);
                }
                log::debug!(target: "mcp::stderr", "{name}: {}", String::from_utf8_lossy(&line).trim_end());
                let mut t = lock(tail);
                t.extend(line.iter());
                while t.len() > STDERR_TAIL {
                    t.pop_front();
                }
            }
        }
    }
}

/// `line` with every value of `redact` replaced by `[secret]`.
fn redacted(line: &[u8], redact: &[String]) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    redact.iter().fold(text.into_owned(), |t, v| t.replace(v.as_str(), "[secret]")).into_bytes()
}

/// The child's stdout, read by one thread at a time: a caller that leads, else the reader
/// thread.
struct Stdout {
    lines: Mutex<Lines<ChildStdout>>,
    /// `Lines::junk`, read without holding `lines`.
    junk: Arc<OnceLock<String>>,
    /// The pipe's descriptor, for the reader thread to wait on without holding `lines`
    /// (valid while `lines` owns the pipe, as long as this).
    fd: std::os::fd::RawFd,
    /// Bumped by every lead: while leads keep coming, the reader thread looks in every `LOOK`
    /// instead of waking for each answer a leader reads.
    leads: AtomicU64,
    /// The reader thread, unparked by `nudge`.
    reader: OnceLock<thread::Thread>,
}

/// Bytes read from the pipe (non-blocking), cut into messages.
struct Lines<R> {
    extension: String,
    pipe: R,
    chunk: Box<[u8]>,
    /// Read but not yet a whole line.
    buf: Vec<u8>,
    /// Why the stream ended, once it has.
    ended: Option<String>,
    /// Bytes read so far (what a lead reads early is bounded by it).
    total: u64,
    /// The first line that was not JSON-RPC (printable, capped), for the error when no answer
    /// to initialize comes: the server writes something else on stdout.
    junk: Arc<OnceLock<String>>,
}

impl Stdout {
    fn new(extension: &str, pipe: ChildStdout) -> Stdout {
        let lines = Lines::new(extension, pipe);
        Stdout {
            fd: lines.pipe.as_raw_fd(),
            junk: lines.junk.clone(),
            lines: Mutex::new(lines),
            leads: AtomicU64::new(0),
            reader: OnceLock::new(),
        }
    }

    /// The reader thread: reads whenever no caller leads, forwarding each message to the
    /// client's router, until EOF or a fatal line; returns why the stream ended.
    fn read_loop(&self, inbound: &Sender<Inbound>) -> String {
        let mut seen = u64::MAX;
        loop {
            let leads = self.leads.load(Ordering::SeqCst);
            let mut lines = match self.lines.try_lock() {
                Ok(l) => l,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    // A caller leads and reads for everyone.
                    thread::park_timeout(LOOK);
                    continue;
                }
            };
            let mut gone = false;
            let open = lines.pump(true, &mut |m| gone |= inbound.send(Inbound::Message(m)).is_err());
            if gone {
                return "the client went away".into();
            }
            if !open {
                return lines.ended.clone().unwrap_or_default();
            }
            drop(lines);
            // Idle: sleep until the child writes. Busy with leads: look in now and then, so
            // their answers (which wake every poller) do not wake this thread too.
            let timeout = (leads != seen).then_some(LOOK);
            seen = leads;
            // wait: the pipe ends when the child exits (the shutdown ladder ends with SIGKILL)
            poll_fd(&self.fd, Ready::Read, timeout);
        }
    }
}

impl<R: Read> Lines<R> {
    fn new(extension: &str, pipe: R) -> Lines<R> {
        Lines {
            extension: extension.to_string(),
            pipe,
            chunk: vec![0; CHUNK].into_boxed_slice(),
            buf: Vec::new(),
            ended: None,
            total: 0,
            junk: Arc::new(OnceLock::new()),
        }
    }

    /// Reads what is there now and hands each whole message to `deliver`: everything, or
    /// (`drain` false) up to the first read that did not fill the buffer, which saves the read
    /// that would only say "nothing more" on the hot path (what is left wakes the reader
    /// thread). False once the stream has ended (EOF, a read error, a line over `MAX_LINE`).
    fn pump(&mut self, drain: bool, deliver: &mut dyn FnMut(Message)) -> bool {
        while self.ended.is_none() {
            match self.pipe.read(&mut self.chunk) {
                Ok(0) => {
                    // A last line without its newline still counts.
                    line(&self.extension, &self.buf, &self.junk, deliver);
                    self.buf.clear();
                    self.ended = Some("the process closed its stdout (exited)".into());
                }
                Ok(n) => {
                    self.total += n as u64;
                    let from = self.buf.len();
                    self.buf.extend_from_slice(&self.chunk[..n]);
                    self.split(from, deliver);
                    if !drain && n < CHUNK {
                        return self.ended.is_none();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => self.ended = Some(format!("reading its stdout failed: {e}")),
            }
        }
        false
    }

    /// Cuts the whole lines out of `buf` (`from`: where the bytes not yet searched start).
    fn split(&mut self, from: usize, deliver: &mut dyn FnMut(Message)) {
        let mut start = 0;
        let mut at = from;
        while let Some(i) = self.buf[at..].iter().position(|&b| b == b'\n') {
            let end = at + i;
            line(&self.extension, &self.buf[start..end], &self.junk, deliver);
            start = end + 1;
            at = start;
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE {
            self.ended = Some(format!("it wrote a line longer than {MAX_LINE} bytes; the connection was dropped"));
        }
        // A huge line's buffer is not kept for the next, small ones.
        if self.buf.capacity() > 1 << 20 && self.buf.len() < CHUNK {
            self.buf.shrink_to(CHUNK);
        }
    }
}

/// Characters of a line that is not JSON-RPC kept for an error message.
const JUNK_SHOWN: usize = 200;

/// One line from `extension`'s stdout: a message for `deliver`, or junk skipped with a warning
/// (the first one kept in `junk`, printable and capped).
fn line(extension: &str, line: &[u8], junk: &OnceLock<String>, deliver: &mut dyn FnMut(Message)) {
    let text = line.trim_ascii();
    if text.is_empty() {
        return;
    }
    log::trace!("mcp {extension}: <- {}", String::from_utf8_lossy(text));
    match Message::parse(text) {
        Ok(m) => deliver(m),
        Err(e) => {
            let shown: String = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
            log::warn!("mcp {extension}: skipping a line that is not JSON-RPC ({e}): {shown:?}");
            let _ = junk.get_or_init(|| {
                let all = String::from_utf8_lossy(text);
                let capped: String = all.chars().take(JUNK_SHOWN).collect();
                let more = if capped.len() < all.len() { "…" } else { "" };
                format!("{}{more}", gosling_util::printable(&capped))
            });
        }
    }
}

/// A caller reading stdout while it waits for its answer.
struct StdioLead<'a> {
    transport: &'a StdioTransport,
    lines: MutexGuard<'a, Lines<ChildStdout>>,
    /// Read while sending, handed out by the next `read`.
    early: Vec<Message>,
}

/// What a lead holds back while it sends, in messages and in bytes read (a server flooding
/// stdout while refusing to read stdin is then left to block, and the send fails after
/// `STDIN_STALL`).
const EARLY_MAX: usize = 4096;
const EARLY_MAX_BYTES: u64 = 2 * MAX_LINE as u64;

impl Lead for StdioLead<'_> {
    fn send(&mut self, msg: &Message) -> Result<(), Error> {
        let line = self.transport.line_of(msg);
        self.transport.write_line(&line, Some((&mut self.lines, &mut self.early)))
    }

    fn flush(&mut self, deliver: &mut dyn FnMut(Message)) {
        for m in std::mem::take(&mut self.early) {
            deliver(m);
        }
    }

    fn read(&mut self, slice: Duration, deliver: &mut dyn FnMut(Message)) -> bool {
        if !self.early.is_empty() {
            self.flush(deliver);
            return true;
        }
        if self.lines.ended.is_some() {
            return false;
        }
        poll_fd(&self.lines.pipe, Ready::Read, Some(slice));
        self.lines.pump(false, deliver)
    }
}

impl StdioTransport {
    fn stuck(&self) -> Error {
        Error::Other(format!(
            "{}: the server has not read its input for {:?}; it is stuck — restart it or check its stderr: {}",
            self.extension,
            self.stdin_stall,
            self.diagnostics()
        ))
    }

    fn line_of(&self, msg: &Message) -> Vec<u8> {
        let mut line = msg.encode();
        log::trace!("mcp {}: -> {line}", self.extension);
        line.push('\n');
        line.into_bytes()
    }

    /// Writes one line to the child's stdin, waiting at most `STDIN_STALL` for room. A lead
    /// passes the reading side: while stdin is full, what the child writes is read into
    /// `early` (a child blocked on a full stdout would never read its stdin otherwise).
    fn write_line(
        &self,
        line: &[u8],
        mut reading: Option<(&mut Lines<ChildStdout>, &mut Vec<Message>)>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + self.stdin_stall;
        let read_before = reading.as_ref().map_or(0, |(lines, _)| lines.total);
        // Whether a lead may read more while it waits to write.
        let may_read = |lines: &Lines<ChildStdout>, early: &[Message]| {
            lines.ended.is_none() && early.len() < EARLY_MAX && lines.total - read_before < EARLY_MAX_BYTES
        };
        let mut stdin = match reading.as_mut() {
            None => lock(&self.stdin),
            // A lead never blocks on stdin while it holds stdout: another sender may be
            // waiting for room that only reading makes.
            Some((lines, early)) => loop {
                match self.stdin.try_lock() {
                    Ok(g) => break g,
                    Err(TryLockError::Poisoned(e)) => break e.into_inner(),
                    Err(TryLockError::WouldBlock) => {}
                }
                if Instant::now() >= deadline {
                    return Err(self.stuck());
                }
                if !may_read(lines, early) {
                    thread::sleep(Duration::from_millis(1));
                } else if poll_fd(&lines.pipe, Ready::Read, Some(Duration::from_millis(1))) {
                    lines.pump(true, &mut |m| early.push(m));
                }
            },
        };
        let pipe =
            stdin.as_mut().ok_or_else(|| Error::Closed { detail: format!("{}: stdin is closed", self.extension) })?;
        let mut rest = line;
        while !rest.is_empty() {
            match pipe.write(rest) {
                Ok(n) if n > 0 => rest = &rest[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        // Half a line may be in the pipe: the stream is unusable now, so stdin
                        // is closed (the server sees EOF, if it ever reads again).
                        stdin.take();
                        return Err(self.stuck());
                    }
                    match reading.as_mut() {
                        Some((lines, early)) if may_read(lines, early) => {
                            let fds = [(pipe.as_raw_fd(), Ready::Write), (lines.pipe.as_raw_fd(), Ready::Read)];
                            if poll_fds(fds, Some(left))[1] {
                                lines.pump(true, &mut |m| early.push(m));
                            }
                        }
                        _ => {
                            poll_fd(pipe, Ready::Write, Some(left));
                        }
                    }
                }
                other => {
                    let why = other.err().map(|e| e.to_string()).unwrap_or_else(|| "nothing written".into());
                    log::debug!("mcp {}: writing to stdin failed: {why}", self.extension);
                    return Err(Error::Closed {
                        detail: format!(
                            "{}: writing to the process failed (it exited); stderr: {}",
                            self.extension,
                            self.diagnostics()
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

impl Transport for StdioTransport {
    fn send(&self, msg: &Message) -> Result<(), Error> {
        self.write_line(&self.line_of(msg), None)
    }

    fn lead(&self) -> Option<Box<dyn Lead + '_>> {
        let lines = match self.stdout.lines.try_lock() {
            Ok(l) => l,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.stdout.leads.fetch_add(1, Ordering::SeqCst);
        Some(Box::new(StdioLead { transport: self, lines, early: Vec::new() }))
    }

    fn nudge(&self) {
        if let Some(t) = self.stdout.reader.get() {
            t.unpark();
        }
    }

    fn close(&self) {
        self.ladder();
    }

    fn stdout_junk(&self) -> Option<String> {
        self.stdout.junk.get().cloned()
    }

    fn diagnostics(&self) -> String {
        let t = lock(&self.stderr);
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
    use super::Lines;
    use gosling_wire::jsonrpc::Message;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    /// A `Lines` over one end of a socket pair (non-blocking, like the child's pipe) and the
    /// other end to write to.
    fn pair() -> (Lines<UnixStream>, UnixStream) {
        let (r, w) = UnixStream::pair().unwrap();
        r.set_nonblocking(true).unwrap();
        (Lines::new("t", r), w)
    }

    fn pump(lines: &mut Lines<UnixStream>, drain: bool) -> (bool, Vec<Message>) {
        let mut got = Vec::new();
        let open = lines.pump(drain, &mut |m| got.push(m));
        (open, got)
    }

    fn method(m: &Message) -> &str {
        m.method().unwrap_or("")
    }

    #[test]
    fn a_line_split_across_reads_is_one_message() {
        let (mut lines, mut w) = pair();
        w.write_all(br#"{"jsonrpc":"2.0","method":"#).unwrap();
        assert_eq!(pump(&mut lines, true), (true, vec![]), "half a line is kept, not delivered");
        w.write_all(b"\"a\"}\n").unwrap();
        let (open, got) = pump(&mut lines, true);
        assert!(open);
        assert_eq!(got.iter().map(method).collect::<Vec<_>>(), ["a"]);
        assert!(lines.buf.is_empty());
    }

    #[test]
    fn several_lines_in_one_read_arrive_in_order_and_junk_is_skipped() {
        let (mut lines, mut w) = pair();
        let text = "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r\n\nnot json\n[1,2]\n   \n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n{\"jsonrpc\"";
        w.write_all(text.as_bytes()).unwrap();
        let (open, got) = pump(&mut lines, false);
        assert!(open);
        assert_eq!(got.iter().map(method).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(lines.buf, br#"{"jsonrpc""#, "the unfinished line waits for its end");
    }

    #[test]
    fn the_end_delivers_a_last_line_without_newline_and_says_why() {
        let (mut lines, mut w) = pair();
        w.write_all(br#"{"jsonrpc":"2.0","method":"last"}"#).unwrap();
        drop(w);
        let (open, got) = pump(&mut lines, true);
        assert!(!open);
        assert_eq!(got.iter().map(method).collect::<Vec<_>>(), ["last"]);
        assert_eq!(lines.ended.as_deref(), Some("the process closed its stdout (exited)"));
        assert_eq!(pump(&mut lines, true), (false, vec![]), "an ended stream stays ended");
    }

    #[test]
    fn a_line_over_the_limit_ends_the_stream() {
        let (mut lines, w) = pair();
        let writer = std::thread::spawn(move || {
            let mut w = w;
            let block = vec![b'x'; 1 << 20];
            for _ in 0..=(super::MAX_LINE >> 20) {
                if w.write_all(&block).is_err() {
                    return;
                }
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while lines.ended.is_none() && std::time::Instant::now() < deadline {
            gosling_sys::poll_fd(&lines.pipe, gosling_sys::Ready::Read, Some(std::time::Duration::from_millis(100)));
            let (_, got) = pump(&mut lines, true);
            assert!(got.is_empty());
        }
        assert!(lines.ended.as_deref().unwrap_or("").contains("longer than"), "{:?}", lines.ended);
        drop(lines);
        writer.join().unwrap();
    }

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
