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
//! Every message goes out through one writer (`conn::Conn`). The same connection code also
//! runs over a WebSocket (`/acp` of `gosling agent`): see `transport.rs`.
#![deny(unsafe_code)]

pub mod conn;
pub mod fs;
pub mod goose;
pub mod session;
pub mod shapes;
pub mod transport;
pub mod updates;

use conn::Conn;
use gosling_agent::host::Host;
use gosling_wire::jsonrpc::{self, ErrorObject, Id, Message};
use serde_json::Value;
use std::fmt;
use std::io;
use std::sync::Arc;
use transport::{Inbound, Inbox, LineReader};

/// The protocol version gosling speaks (ACP v1).
pub const PROTOCOL_VERSION: u64 = 1;
/// ACP's "authentication required" (the provider is not configured).
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP's "resource not found" (an unknown session).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// The longest message read from the client, a stdio line or a WebSocket message (prompts
/// can embed whole files and images).
pub const MAX_LINE: usize = 64 << 20;

/// The acp layer's one error: why `run` stopped (its start, over a core built by `main`,
/// cannot fail).
#[derive(Debug)]
pub enum Error {
    /// Reading from the client failed.
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "acp: reading from the editor failed: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
        }
    }
}

/// Serves ACP on stdin/stdout over the core `main` built (`core::build`) until stdin ends.
pub fn run(app: Arc<Host>) -> Result<(), Error> {
    let conn = Arc::new(Conn::with_outbound(Box::new(transport::LineWriter::new(io::stdout()))));
    let agent = Arc::new(session::Agent::new(app.clone(), conn.clone(), goose::call));
    log::info!("gosling {} serving ACP v{PROTOCOL_VERSION} on stdio", env!("CARGO_PKG_VERSION"));
    let r = serve(&agent, &conn, &mut LineReader::new(io::stdin().lock(), MAX_LINE));
    conn.close();
    agent.shutdown();
    r
}

/// Reads messages until the transport ends; every bad message gets an error answer and the
/// loop goes on. The same loop serves stdio and each WebSocket (`transport.rs`).
fn serve(agent: &Arc<session::Agent>, conn: &Arc<Conn>, input: &mut dyn Inbox) -> Result<(), Error> {
    loop {
        // wait: the editor's stdin or the WebSocket's reader; ends when the client goes
        let line = match input.next().map_err(Error::Io)? {
            None => {
                log::info!("acp: the client closed the connection; stopping");
                return Ok(());
            }
            Some(Inbound::TooLong { id, limit }) => {
                log::warn!("acp: skipped a message longer than {limit} bytes (id {id:?})");
                let e = ErrorObject::new(
                    jsonrpc::INVALID_REQUEST,
                    format!("message longer than {limit} bytes; send smaller prompts"),
                );
                conn.send(&Message::Error { id, error: e });
                continue;
            }
            Some(Inbound::Message(m)) => m,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        log::trace!("acp recv: {}", String::from_utf8_lossy(&line));
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            log::warn!("acp: refused a JSON-RPC batch");
            let e = ErrorObject::new(
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC batches are not supported; send one message per line (stdio) or per WebSocket text frame",
            );
            conn.send(&Message::Error { id: None, error: e });
            continue;
        }
        match Message::parse(&line) {
            Ok(m) => conn.receive(m, agent),
            Err(e) => {
                log::warn!("acp: {e}");
                let (code, id) = match &e {
                    gosling_wire::Error::NotJson(_) => (jsonrpc::PARSE_ERROR, None),
                    _ => (jsonrpc::INVALID_REQUEST, id_of(&line)),
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
