//! The audit log: one JSON line per tool call, and one per network connection a confined
//! extension made through gosling's egress proxy (`"kind": "egress"`), appended to
//! `<state dir>/audit.jsonl`, rotated by size, shared by every gosling process on the state dir.
//!
//! Each line is written with a single `write` on an `O_APPEND` file, so concurrent calls (and
//! processes) never interleave within a line. Arguments are recorded only as a SHA-256 hash:
//! the log shows that a call happened and with what, never the values (they may hold secrets).
//!
//! Rotation: before a line would take the file past `AuditLimits::max_bytes`, the process
//! holding the `flock` on `audit.jsonl.lock` renames `audit.jsonl.N-1` → `.N` … `audit.jsonl`
//! → `.1` (the oldest beyond `keep` is replaced and so dropped) and starts a new file. Every
//! process checks before each line that its open file is still the one named `audit.jsonl`
//! (same inode) and reopens it if not; a line written through a file renamed a moment earlier
//! lands whole in `audit.jsonl.1`. So no line is lost or torn at a rotation.
//!
//! Durability: each line is written at once; `fdatasync` follows within `SYNC_EVERY` (see it).

use crate::atomic;
use crossbeam_channel::{RecvTimeoutError, Sender};
use gosling_util::lock;
use serde::Serialize;
use serde_json::Value;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often lines are made durable. Each line is written at once (a gosling crash loses none:
/// the kernel holds it); a flusher thread `fdatasync`s the file at most this often and within
/// this long of a line, so a power loss or kernel crash loses at most this much. Zero: every
/// line is fsynced before `record` returns (+0.1 ms a call here; BENCHMARKS.md).
const SYNC_EVERY: Duration = Duration::from_millis(100);

/// `audit.jsonl` is renamed to `audit.jsonl.1` (the older ones shifted up, the oldest beyond
/// `keep` dropped) before a line would take it past `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuditLimits {
    pub max_bytes: u64,
    /// 0 keeps no old file.
    pub keep: u32,
}

/// One log shared by its clones (one open file, one flusher thread).
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    limits: AuditLimits,
    /// Opened on first use and kept: one `write` per line, no open/close per call.
    file: Mutex<Option<Open>>,
    /// Wakes the flusher thread (started with the first line) after a line was written.
    flusher: std::sync::OnceLock<Sender<()>>,
}

struct Open {
    file: File,
    ino: u64,
}

pub struct Entry<'a> {
    pub session: &'a str,
    pub extension: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    /// "ok", "tool_error" (an `isError` result) or "error".
    pub status: &'a str,
    pub duration: Duration,
}

/// One connection through the egress proxy (`extensions::egress`), written when it closes.
pub struct Connection<'a> {
    pub extension: &'a str,
    /// The host and port the extension asked for, as it wrote them (empty when its request
    /// could not be read).
    pub host: &'a str,
    pub port: u16,
    /// The address gosling connected to (or would have: the first one refused), if it got
    /// that far.
    pub address: Option<std::net::SocketAddr>,
    /// "allowed" or "refused".
    pub verdict: &'a str,
    /// Why refused, or how an allowed connection ended.
    pub reason: &'a str,
    /// Bytes from the extension to the host, and back.
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub duration: Duration,
}

impl AuditLog {
    pub fn new(state_dir: &Path, limits: AuditLimits) -> AuditLog {
        let path = state_dir.join("audit.jsonl");
        AuditLog { inner: Arc::new(Inner { path, limits, file: Mutex::new(None), flusher: Default::default() }) }
    }

    /// Appends one line; a failure is logged, never fatal to the call being audited.
    pub fn record(&self, e: &Entry) {
        #[derive(Serialize)]
        struct Line<'a> {
            time: String,
            session: &'a str,
            extension: &'a str,
            tool: &'a str,
            args_sha256: String,
            status: &'a str,
            duration_ms: u64,
        }
        let args = serde_json::to_vec(e.arguments).unwrap_or_default();
        let line = Line {
            time: gosling_util::now_rfc3339(),
            session: e.session,
            extension: e.extension,
            tool: e.tool,
            args_sha256: gosling_util::hex(&gosling_util::sha256(&args)),
            status: e.status,
            duration_ms: u64::try_from(e.duration.as_millis()).unwrap_or(u64::MAX),
        };
        self.write(&line, "the tool call");
    }

    /// Appends one egress line: `{time, kind: "egress", extension, host, port, address,
    /// verdict, reason, bytes_out, bytes_in, duration_ms}`; a failure is logged.
    pub fn record_connection(&self, c: &Connection) {
        #[derive(Serialize)]
        struct Line<'a> {
            time: String,
            kind: &'static str,
            extension: &'a str,
            host: &'a str,
            port: u16,
            address: Option<String>,
            verdict: &'a str,
            reason: &'a str,
            bytes_out: u64,
            bytes_in: u64,
            duration_ms: u64,
        }
        let line = Line {
            time: gosling_util::now_rfc3339(),
            kind: "egress",
            extension: c.extension,
            host: c.host,
            port: c.port,
            address: c.address.map(|a| a.to_string()),
            verdict: c.verdict,
            reason: c.reason,
            bytes_out: c.bytes_out,
            bytes_in: c.bytes_in,
            duration_ms: u64::try_from(c.duration.as_millis()).unwrap_or(u64::MAX),
        };
        self.write(&line, "the connection");
    }

    fn write(&self, line: &impl Serialize, what: &str) {
        let Ok(mut bytes) = serde_json::to_vec(line) else { return };
        bytes.push(b'\n');
        if let Err(err) = self.inner.append(&bytes) {
            log::error!("{err}; {what} was not audited");
            return;
        }
        if !SYNC_EVERY.is_zero() {
            // Full: a flush is already due, and it covers this line.
            let _ = self.inner.flusher.get_or_init(|| start_flusher(Arc::downgrade(&self.inner))).try_send(());
        }
    }
}

/// The thread that fsyncs the log `SYNC_EVERY` after a line; it ends with the log.
fn start_flusher(log: Weak<Inner>) -> Sender<()> {
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let run = move || loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) if log.strong_count() > 0 => continue,
            Err(_) => return,
        }
        std::thread::sleep(SYNC_EVERY);
        let Some(inner) = log.upgrade() else { return };
        // Lines written until now are covered by this sync; a later one sends again.
        while rx.try_recv().is_ok() {}
        inner.sync();
    };
    if let Err(e) = std::thread::Builder::new().name("audit-sync".into()).spawn(run) {
        log::error!("store: cannot start the audit log's fsync thread ({e}); its lines reach the disk when the kernel writes them");
    }
    tx
}

impl Inner {
    /// Makes the lines written so far through the open file durable.
    fn sync(&self) {
        let file = lock(&self.file).as_ref().and_then(|o| o.file.try_clone().ok());
        if let Some(Err(e)) = file.map(|f| f.sync_data()) {
            log::error!("{}", atomic::io_err(&self.path, e));
        }
    }

    fn append(&self, line: &[u8]) -> Result<(), atomic::Error> {
        let path = &self.path;
        let mut open = lock(&self.file);
        let len = self.current(&mut open)?;
        if len > 0 && len + line.len() as u64 > self.limits.max_bytes {
            self.rotate()?;
            self.current(&mut open)?;
        }
        let Some(o) = open.as_mut() else { return Ok(()) };
        let r = o.file.write_all(line).and_then(|()| if SYNC_EVERY.is_zero() { o.file.sync_data() } else { Ok(()) });
        if let Err(e) = r {
            *open = None;
            return Err(atomic::io_err(path, e));
        }
        Ok(())
    }

    /// Makes `open` the file now named `audit.jsonl` (reopening after another process rotated
    /// it); its length.
    fn current(&self, open: &mut Option<Open>) -> Result<u64, atomic::Error> {
        let path = &self.path;
        let named = match std::fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(atomic::io_err(path, e)),
        };
        if let (Some(o), Some(m)) = (open.as_ref(), named.as_ref()) {
            if o.ino == m.ino() {
                return Ok(m.len());
            }
        }
        if let Some(old) = open.take() {
            // Renamed by a rotation: what we wrote into it is made durable before we leave it.
            if !SYNC_EVERY.is_zero() {
                let _ = old.file.sync_data();
            }
        }
        let file = atomic::open_append(path).map_err(|e| atomic::io_err(path, e))?;
        let m = file.metadata().map_err(|e| atomic::io_err(path, e))?;
        *open = Some(Open { file, ino: m.ino() });
        Ok(m.len())
    }

    /// Shifts the files by one under the rotation lock, unless another process just did.
    fn rotate(&self) -> Result<(), atomic::Error> {
        let path = &self.path;
        let _guard = atomic::lock(path)?;
        let len = std::fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0);
        if len < self.limits.max_bytes / 2 {
            return Ok(()); // rotated by another process meanwhile
        }
        let numbered = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
        let rename = |from: &Path, to: &Path| match std::fs::rename(from, to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(atomic::io_err(from, e)),
        };
        if self.limits.keep == 0 {
            return std::fs::remove_file(path).map_err(|e| atomic::io_err(path, e));
        }
        for n in (1..self.limits.keep).rev() {
            rename(&numbered(n), &numbered(n + 1))?;
        }
        rename(path, &numbered(1))?;
        log::info!(
            "store: rotated {} (over {} bytes; {} older files kept)",
            path.display(),
            self.limits.max_bytes,
            self.limits.keep
        );
        Ok(())
    }
}
