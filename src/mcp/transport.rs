//! The seam between the MCP client and its transports (stdio child, Streamable HTTP).
//!
//! A transport moves whole JSON-RPC messages; it knows nothing about ids, methods or
//! timeouts. Messages from the server, and the end of the connection, arrive on the
//! `Sender<Inbound>` the transport was built with; the client owns the receiving side.

use crate::mcp::error::Error;
use crate::wire::jsonrpc::Message;

/// What a transport delivers to the client.
#[derive(Debug)]
pub enum Inbound {
    /// One message from the server (a response, a server request or a notification).
    Message(Message),
    /// The connection is gone for good; every pending call fails with this error.
    Closed(Error),
}

pub trait Transport: Send + Sync {
    /// Sends one message. Errors are about this send only; a dead connection is reported
    /// through `Inbound::Closed` too.
    fn send(&self, msg: &Message) -> Result<(), Error>;

    /// Ends the connection (stdio: the shutdown ladder; HTTP: DELETE the session). Idempotent,
    /// and called from `Drop` of the client as well.
    fn close(&self);

    /// Recent diagnostic output (a child's stderr tail), for error messages. May be empty.
    fn diagnostics(&self) -> String {
        String::new()
    }
}
