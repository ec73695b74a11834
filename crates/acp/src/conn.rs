//! The client connection: every outgoing message goes through one `Outbound` of the
//! transport (`transport.rs`: a line on stdout, or a WebSocket text frame), and requests to the
//! client (`session/request_permission`, `fs/*`, `elicitation/create`) go through the one
//! JSON-RPC peer (`wire::peer`, ACP flavour: ids, a deadline on every wait, every waiting
//! request failed when the connection closes; a wait given up sends nothing, as Goose Desktop
//! expects). The client's own requests come in through the same peer (`Conn::receive`): answered
//! at once by the dispatch (`session::Agent`), or later from a thread of their own holding one of
//! `MAX_IN_FLIGHT` slots (an id still being answered is refused); the peer matches the client's
//! answers to our requests by id.

use crate::session_update::SessionUpdate;
use crossbeam_channel::Receiver;
use gosling_wire::jsonrpc::Message;
use gosling_wire::peer::{self, Peer};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a request to the client got no result: the wire layer's error, `Closed` and `Send`
/// carrying [`Gone`].
pub type CallError = gosling_wire::Error<Gone>;

/// The editor connection is closed (stdin ended, stdout failed, the WebSocket went): the
/// transport's condition a failed call carries, shown as its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone;

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("acp: the editor connection is closed")
    }
}

/// The transport's `Outbound` as the peer's: one encoded message per send.
pub struct Wire(Box<dyn Outbound>);

impl peer::Outbound for Wire {
    type Error = Gone;
    fn send(&self, m: &Message) -> Result<(), Gone> {
        let text = m.encode();
        log::trace!("acp send: {text}");
        match self.0.send(text) {
            // wait: a slow client's back-pressure (bounded by the transport)
            true => Ok(()),
            false => Err(Gone),
        }
    }
    fn gone(&self) -> Gone {
        Gone
    }
}

/// Where a connection's messages go: one encoded JSON-RPC message per call, sent whole (a
/// line, a text frame). Called from any thread; may block while the peer is slow.
pub trait Outbound: Send + Sync {
    /// False when the peer is gone (the message was not sent).
    fn send(&self, message: String) -> bool;
}

/// The client's requests answered later (prompts, `session/new`, goose's methods) at once, per
/// connection; one more is refused with an error saying so. Each holds a thread.
pub const MAX_IN_FLIGHT: usize = 64;

/// A request of the client, as the dispatch sees it.
pub type Incoming<'a> = peer::Incoming<'a, Wire>;

pub struct Conn {
    peer: Arc<Peer<Wire>>,
}

impl Conn {
    /// A connection over any transport.
    pub fn with_outbound(out: Box<dyn Outbound>) -> Conn {
        Conn { peer: Peer::new(peer::ACP, "acp", Wire(out), MAX_IN_FLIGHT) }
    }

    /// One message of the client: its requests and notifications go to `handler` (an answer
    /// given at once is sent here), its answers to the calls waiting for them.
    pub fn receive(&self, m: Message, handler: &dyn peer::Handler<Wire>) {
        if let Some(answer) = self.peer.receive(m, handler) {
            self.send(&answer);
        }
    }

    /// Sends one message whole (a line, a frame); false when the client is gone.
    pub fn send(&self, m: &Message) -> bool {
        self.peer.send(m).is_ok()
    }

    pub fn notify(&self, method: &str, params: Value) -> bool {
        self.peer.notify(method, Some(params)).is_ok()
    }

    /// A `session/update` notification of session `sid`.
    pub fn update(&self, sid: &str, update: &SessionUpdate) -> bool {
        self.notify("session/update", serde_json::json!({ "sessionId": sid, "update": update.to_value() }))
    }

    /// Sends a request to the client and waits for its answer, at most `timeout`, or until
    /// `cancel` fires (a message or its sender dropped).
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Result<Value, CallError> {
        self.peer.call(method, Some(params), timeout, cancel)
    }

    /// Fails every waiting request (the editor is gone) and flags the client's requests still
    /// being answered as cancelled by shutdown.
    pub fn close(&self) {
        self.peer.close(Gone);
        self.peer.cancel_inbound();
    }
}
