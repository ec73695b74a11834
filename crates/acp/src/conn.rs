//! The client connection: every outgoing message goes through one `Outbound` of the
//! transport (`transport.rs`: a line on stdout, or a WebSocket text frame), and requests to the
//! client (`session/request_permission`, `fs/*`) are matched to their answers by id. The
//! reader (`mod.rs`) hands answers in with `deliver`.

use crate::transport::{LineWriter, Outbound};
use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_util::lock;
use gosling_wire::jsonrpc::{ErrorObject, Id, Message};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Why a request to the client got no result.
#[derive(Debug)]
pub enum CallError {
    /// The client answered with a JSON-RPC error.
    Rpc(ErrorObject),
    /// No answer within the deadline.
    Timeout { method: String, after: Duration },
    /// The caller's cancel signal fired (the prompt was cancelled) before the answer came.
    Cancelled,
    /// The connection is closed (stdin ended or stdout failed).
    Closed,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(e) => write!(f, "acp: the editor answered error {}: {}", e.code, e.message),
            CallError::Timeout { method, after } => {
                write!(f, "acp: the editor did not answer {method} within {after:?}")
            }
            CallError::Cancelled => write!(f, "acp: cancelled while waiting for the editor"),
            CallError::Closed => write!(f, "acp: the editor connection is closed"),
        }
    }
}

impl std::error::Error for CallError {}

type Answer = Result<Value, ErrorObject>;

pub struct Conn {
    out: Box<dyn Outbound>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, Sender<Answer>>>,
}

impl Conn {
    /// A connection writing one line per message to `out` (stdio).
    pub fn new(out: Box<dyn Write + Send>) -> Conn {
        Conn::with_outbound(Box::new(LineWriter::new(out)))
    }

    /// A connection over any transport.
    pub fn with_outbound(out: Box<dyn Outbound>) -> Conn {
        Conn { out, next_id: AtomicI64::new(1), pending: Mutex::new(HashMap::new()) }
    }

    /// Sends one message whole (a line, a frame); false when the client is gone.
    pub fn send(&self, m: &Message) -> bool {
        let text = m.encode();
        log::trace!("acp send: {text}");
        self.out.send(text) // wait: a slow client's back-pressure (bounded by the transport)
    }

    pub fn notify(&self, method: &str, params: Value) -> bool {
        self.send(&Message::notification(method, Some(params)))
    }

    /// A `session/update` notification of session `sid`.
    pub fn update(&self, sid: &str, update: Value) -> bool {
        self.notify("session/update", serde_json::json!({ "sessionId": sid, "update": update }))
    }

    pub fn respond(&self, id: Id, answer: Answer) {
        let m = match answer {
            Ok(result) => Message::Response { id, result },
            Err(error) => Message::Error { id: Some(id), error },
        };
        self.send(&m);
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
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = bounded(1);
        lock(&self.pending).insert(n, tx);
        let forget = || lock(&self.pending).remove(&n);
        log::debug!("acp: request {n} {method} to the editor");
        if !self.send(&Message::request(Id::Num(n), method, Some(params))) {
            forget();
            return Err(CallError::Closed);
        }
        let never = crossbeam_channel::never();
        let cancel = cancel.unwrap_or(&never);
        crossbeam_channel::select! {
            recv(rx) -> a => match a {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(CallError::Rpc(e)),
                Err(_) => Err(CallError::Closed),
            },
            recv(cancel) -> _ => { forget(); Err(CallError::Cancelled) },
            default(timeout) => { forget(); Err(CallError::Timeout { method: method.to_string(), after: timeout }) },
        }
    }

    /// Hands the client's answer to the waiting request; false when nothing waits for it.
    pub fn deliver(&self, id: &Id, answer: Answer) -> bool {
        let Id::Num(n) = id else { return false };
        match lock(&self.pending).remove(n) {
            Some(tx) => tx.try_send(answer).is_ok(),
            None => false,
        }
    }

    /// Fails every waiting request (the editor is gone).
    pub fn close(&self) {
        lock(&self.pending).clear();
    }
}
