//! The seam between the MCP client and its transports (stdio child, Streamable HTTP).
//!
//! A transport moves whole JSON-RPC messages; it knows nothing about ids, methods or
//! timeouts. Messages from the server, and the end of the connection, arrive on the
//! `Sender<Inbound>` the transport was built with; the client owns the receiving side —
//! except while a caller leads (`Transport::lead`): then the caller reads the connection on
//! its own thread and handles what it reads itself.

use crate::error::Error;
use gosling_wire::jsonrpc::Message;
use std::time::Duration;

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

    /// The first thing a child printed on stdout that is not JSON-RPC (printable, capped), for
    /// the error when it never answers.
    fn stdout_junk(&self) -> Option<String> {
        None
    }

    /// Recent diagnostic output (a child's stderr tail), for error messages. May be empty.
    fn diagnostics(&self) -> String {
        String::new()
    }

    /// Lets the calling thread read the connection itself while it waits for the answer to
    /// the request it is about to send, sparing the hand-offs through the reader thread (the
    /// hot path of a tool call). `None` when another thread is reading now, or when the
    /// transport is not read this way (HTTP); the caller then waits for its answer to be
    /// routed to it.
    fn lead(&self) -> Option<Box<dyn Lead + '_>> {
        None
    }

    /// A lead ended while other requests still wait: the reader thread takes over at once.
    fn nudge(&self) {}

    /// The `x-mcp-header` arguments of each tool (by name), from the latest `tools/list`:
    /// Streamable HTTP repeats them as `Mcp-Param-*` headers of a modern `tools/call`.
    fn set_param_headers(&self, _tools: std::collections::HashMap<String, crate::params::HeaderMap>) {}
}

/// The reading side of the connection, held by one caller at a time (see `Transport::lead`);
/// dropping it gives reading back to the reader thread.
pub trait Lead {
    /// Sends a message while holding the reading side: whatever the server writes meanwhile
    /// is read (so a server that stops reading until its own output is read cannot deadlock
    /// the two of us) and handed out by the next `read`.
    fn send(&mut self, msg: &Message) -> Result<(), Error>;

    /// Hands each message read but not yet handed out to `deliver`, then waits at most
    /// `slice` for input and does the same with what it reads. False once the connection has
    /// ended (the reader thread reports how, as `Inbound::Closed`).
    fn read(&mut self, slice: Duration, deliver: &mut dyn FnMut(Message)) -> bool;

    /// Hands out what was read but not handed out yet, without reading more (before the lead
    /// is dropped).
    fn flush(&mut self, deliver: &mut dyn FnMut(Message));
}
