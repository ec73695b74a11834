//! `gosling acp`: the agent for editors that speak the Agent Client Protocol v1 —
//! newline-delimited JSON-RPC on stdin/stdout, logs on stderr only.
//!
//! A sibling of http/: it uses the agent layer's `Host`, the session store, the
//! extension runtimes and the one turn loop (`agent::reply::Turn`) exactly as the HTTP API
//! does, so a session started in an editor can be resumed from the web page and back. Nothing
//! below imports it.
//!
//! Threads: the main thread reads stdin and dispatches; `session/new`, `session/load` and
//! `session/prompt` run on their own threads (they start extensions or wait for the model),
//! so `session/cancel` and the client's answers to our requests are read while they run.
//! Every message goes out through one writer (`conn::Conn`).

pub mod conn;
pub mod fs;
pub mod goose;
pub mod session;
pub mod updates;

use crate::agent::host::Host;
use crate::wire::jsonrpc::{self, ErrorObject, Id, Message, ParseError};
use conn::Conn;
use serde_json::Value;
use std::fmt;
use std::io::{self, BufRead, Read};
use std::sync::Arc;

/// The protocol version gosling speaks (ACP v1).
pub const PROTOCOL_VERSION: u64 = 1;
/// ACP's "authentication required" (the provider is not configured).
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP's "resource not found" (an unknown session).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// The longest line read from the editor (prompts can embed whole files).
const MAX_LINE: u64 = 64 << 20;

/// Why `gosling acp` could not start or stopped.
#[derive(Debug)]
pub enum Error {
    /// A setting in the environment is wrong (it says which and what it should be).
    Config(crate::config::Error),
    /// The config or state directory cannot be opened (the store says which file and why).
    Store(crate::store::atomic::Error),
    /// The extension policy (allowlist) cannot be read.
    Policy(crate::extensions::policy::PolicyError),
    /// Reading stdin failed.
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => write!(f, "acp: cannot start: {e}"),
            Error::Store(e) => write!(f, "acp: cannot start: {e}"),
            Error::Policy(e) => write!(f, "acp: cannot start: {e}"),
            Error::Io(e) => write!(f, "acp: reading from the editor failed: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Serves ACP on stdin/stdout over the core `main` built (`core::build`) until stdin ends.
pub fn run(app: Arc<Host>) -> Result<(), Error> {
    let conn = Arc::new(Conn::new(Box::new(io::stdout())));
    let agent = Arc::new(session::Agent::new(app.clone(), conn.clone()));
    log::info!("gosling {} serving ACP v{PROTOCOL_VERSION} on stdio", env!("CARGO_PKG_VERSION"));
    let r = serve(&agent, &conn, io::stdin().lock());
    conn.close();
    agent.shutdown();
    r
}

/// Reads messages until EOF; every bad line gets an error answer and the loop goes on.
fn serve(agent: &Arc<session::Agent>, conn: &Arc<Conn>, mut input: impl BufRead) -> Result<(), Error> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input).take(MAX_LINE).read_until(b'\n', &mut line).map_err(Error::Io)?; // wait: the editor's stdin
        if n == 0 {
            log::info!("acp: the editor closed stdin; stopping");
            return Ok(());
        }
        if line.last() != Some(&b'\n') && n as u64 == MAX_LINE {
            // Skip the rest of the oversized line.
            let mut rest = Vec::new();
            // wait: the editor's stdin; EOF when it closes the pipe
            while input.read_until(b'\n', &mut rest).map_err(Error::Io)? > 0 && rest.last() != Some(&b'\n') {
                rest.clear();
            }
            let e = ErrorObject::new(
                jsonrpc::INVALID_REQUEST,
                format!("message longer than {MAX_LINE} bytes; send smaller prompts"),
            );
            conn.send(&Message::Error { id: None, error: e });
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        log::trace!("acp recv: {}", String::from_utf8_lossy(&line));
        match Message::parse(&line) {
            Ok(Message::Request { id, method, params }) => agent.request(id, &method, params.unwrap_or(Value::Null)),
            Ok(Message::Notification { method, params }) => agent.notification(&method, params.unwrap_or(Value::Null)),
            Ok(Message::Response { id, result }) => {
                if !conn.deliver(&id, Ok(result)) {
                    log::debug!("acp: an answer for {id} that nothing waits for (late or unknown)");
                }
            }
            Ok(Message::Error { id: Some(id), error }) => {
                conn.deliver(&id, Err(error));
            }
            Ok(Message::Error { id: None, error }) => log::warn!("acp: the editor reported an error: {error}"),
            Err(e) => {
                log::warn!("acp: {e}");
                let (code, id) = match &e {
                    ParseError::Json(_) => (jsonrpc::PARSE_ERROR, None),
                    ParseError::Invalid(_) => (jsonrpc::INVALID_REQUEST, id_of(&line)),
                };
                conn.send(&Message::Error { id, error: ErrorObject::new(code, e.to_string()) });
            }
        }
    }
}

/// The id of a message that is JSON but not valid JSON-RPC, when it has a usable one.
fn id_of(line: &[u8]) -> Option<Id> {
    let v: Value = serde_json::from_slice(line).ok()?;
    Id::from_value(v.get("id")?)
}

pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(jsonrpc::INVALID_PARAMS, message)
}
