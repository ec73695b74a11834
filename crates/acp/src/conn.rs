//! The client connection: every outgoing message goes through one `Outbound` of the
//! transport (`transport.rs`: a line on stdout, or a WebSocket text frame), and requests to the
//! client (`session/request_permission`, `fs/*`, `elicitation/create`) go through the one
//! JSON-RPC peer (`wire::peer`, ACP flavour: ids, a deadline on every wait, every waiting
//! request failed when the connection closes; a wait given up sends nothing, as Goose Desktop
//! expects). The reader (`mod.rs`) hands answers in with `deliver`.

use crossbeam_channel::Receiver;
use gosling_wire::jsonrpc::{ErrorObject, Id, Message};
use gosling_wire::peer::{self, Peer};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a request to the client got no result: the peer's error, `Closed` and `Send` carrying
/// [`Gone`].
pub type CallError = peer::CallError<Gone>;

/// The editor connection is closed (stdin ended, stdout failed, the WebSocket went).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone;

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("acp: the editor connection is closed")
    }
}

impl std::error::Error for Gone {}

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

type Answer = Result<Value, ErrorObject>;

pub struct Conn {
    peer: Arc<Peer<Wire>>,
}

impl Conn {
    /// A connection over any transport. The client's requests are answered by the reader's
    /// dispatch (`session::Agent`), not through the peer's in-flight table.
    pub fn with_outbound(out: Box<dyn Outbound>) -> Conn {
        Conn { peer: Peer::new(peer::ACP, "acp", Wire(out), 0) }
    }

    /// Sends one message whole (a line, a frame); false when the client is gone.
    pub fn send(&self, m: &Message) -> bool {
        self.peer.send(m).is_ok()
    }

    pub fn notify(&self, method: &str, params: Value) -> bool {
        self.peer.notify(method, Some(params)).is_ok()
    }

    /// A `session/update` notification of session `sid`.
    pub fn update(&self, sid: &str, update: Value) -> bool {
        self.notify("session/update", serde_json::json!({ "sessionId": sid, "update": update }))
    }

    pub fn respond(&self, id: Id, answer: Answer) {
        self.send(&peer::reply(id, answer));
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

    /// Hands the client's answer to the waiting request; false when nothing waits for it.
    pub fn deliver(&self, id: &Id, answer: Answer) -> bool {
        self.peer.complete(id, answer)
    }

    /// Fails every waiting request (the editor is gone).
    pub fn close(&self) {
        self.peer.close(Gone);
    }
}
