//! The audit log: one JSON line per tool call, appended to `<state dir>/audit.jsonl`.
//!
//! Each line is written with a single `write` on an `O_APPEND` file, so concurrent calls
//! never interleave within a line. Arguments are recorded only as a SHA-256 hash: the log
//! shows that a call happened and with what, never the values (they may hold secrets).

use crate::util::lock;
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct AuditLog {
    path: PathBuf,
    /// Opened on first use and kept: one `write` per line, no open/close per call.
    file: std::sync::Mutex<Option<std::fs::File>>,
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

impl AuditLog {
    pub fn new(state_dir: &Path) -> AuditLog {
        AuditLog { path: state_dir.join("audit.jsonl"), file: std::sync::Mutex::new(None) }
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
            time: crate::util::now_rfc3339(),
            session: e.session,
            extension: e.extension,
            tool: e.tool,
            args_sha256: crate::util::hex(&crate::util::sha256(&args)),
            status: e.status,
            duration_ms: u64::try_from(e.duration.as_millis()).unwrap_or(u64::MAX),
        };
        let Ok(mut bytes) = serde_json::to_vec(&line) else { return };
        bytes.push(b'\n');
        let mut file = lock(&self.file);
        if file.is_none() {
            match crate::store::atomic::open_append(&self.path) {
                Ok(f) => *file = Some(f),
                Err(err) => {
                    log::error!("{}", crate::store::atomic::io_err(&self.path, err));
                    return;
                }
            }
        }
        let r = file.as_mut().map_or(Ok(()), |f| f.write_all(&bytes));
        if let Err(err) = r {
            *file = None;
            log::error!("store: cannot append to the audit log {}: {err}", self.path.display());
        }
    }
}
