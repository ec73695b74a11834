//! Errors of the MCP client layer. Each message names what failed and what to do about it.

use crate::wire::jsonrpc::ErrorObject;
use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Error {
    /// The server answered a request with a JSON-RPC error.
    Rpc(ErrorObject),
    /// No answer within the extension's timeout; `notifications/cancelled` was sent.
    Timeout { method: String, after: Duration },
    /// The connection ended (child exited, stream closed); `detail` carries the stderr tail.
    Closed { detail: String },
    /// Anything else, already phrased for the user.
    Other(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "mcp: server returned error {}: {}", e.code, e.message),
            Error::Timeout { method, after } => {
                write!(f, "mcp: no reply to {method} after {after:?}; raise the extension's timeout or check its log")
            }
            Error::Closed { detail } => write!(f, "mcp: connection to the server closed: {detail}"),
            Error::Other(s) => write!(f, "mcp: {s}"),
        }
    }
}

impl std::error::Error for Error {}
