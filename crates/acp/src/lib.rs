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

pub mod client_requests;
pub mod conn;
pub mod error;
pub mod fs;
pub mod goose;
pub mod goose_answers;
pub mod goose_params;
pub mod protocol;
pub mod session;
pub mod session_update;
pub mod shapes;
pub mod stdio;
pub mod transport;
pub mod updates;

pub use error::Error;
pub use protocol::{invalid_params, AUTH_REQUIRED, MAX_LINE, PROTOCOL_VERSION, RESOURCE_NOT_FOUND};
pub use stdio::run;
