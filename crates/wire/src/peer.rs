//! One JSON-RPC peer: both ends of a connection that sends and answers requests, whatever
//! carries the messages. Used by the MCP client (`mcp::client`), the ACP connection
//! (`acp::conn`) and the builtins' MCP server (`builtins::server`).
//!
//! It owns what the three would otherwise each keep: id allocation, the table of our requests
//! waiting for an answer (each wait bounded by a deadline), the answer to a request of the
//! other side through a [`Handler`] (at once, or later through a [`Responder`], at most
//! `max_in_flight` of those at once), notifications both ways, cancellation both ways (the
//! method is the protocol flavour's: MCP's `notifications/cancelled`, ACP's `$/cancel_request`),
//! and a close that fails every waiting call with the reason given.
//!
//! No I/O of its own: messages go out through an [`Outbound`] the user supplies (a stdio line,
//! an HTTP POST, a WebSocket frame), and the user feeds in what its transport received
//! ([`Peer::receive`]). Nothing here spawns a thread.

use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::Error;
use crossbeam_channel::{bounded, select, Receiver, Sender, TryRecvError};
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What differs between the protocols that share the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavour {
    /// Who the other side is, as error messages and logs name it (`mcp: the server`).
    pub who: &'static str,
    /// The notification that cancels a request, in both directions; its params carry the
    /// request's id as `requestId`.
    pub cancel_method: &'static str,
    /// Whether a call we give up on (deadline, cancel signal) is cancelled with `cancel_method`
    /// (MCP: yes; ACP: no — `$/cancel_request` is unstable and Goose Desktop rejects it; the
    /// prompt's own `session/cancel` already tells the editor).
    pub cancel_sent: bool,
    /// Whether a cancellation carries a `reason` (MCP does; ACP's has only the id).
    pub cancel_reason: bool,
    /// Whether a request the other side cancelled is left unanswered (MCP asks so; ACP wants
    /// an answer, which the handler gives).
    pub silent_when_cancelled: bool,
}

/// MCP (any revision): `notifications/cancelled` with a reason; a cancelled request gets no
/// answer. The MCP client's flavour.
pub const MCP_CLIENT: Flavour = Flavour {
    who: "mcp: the server",
    cancel_method: "notifications/cancelled",
    cancel_sent: true,
    cancel_reason: true,
    silent_when_cancelled: true,
};

/// MCP, seen from a server (the builtins): the same rules, the other side is the client.
pub const MCP_SERVER: Flavour = Flavour { who: "mcp: the client", ..MCP_CLIENT };

/// ACP v1: `$/cancel_request` (received; not sent, see `cancel_sent`) with the id only; a
/// cancelled request is still answered.
pub const ACP: Flavour = Flavour {
    who: "acp: the editor",
    cancel_method: "$/cancel_request",
    cancel_sent: false,
    cancel_reason: false,
    silent_when_cancelled: false,
};

/// Where the peer's messages go: one whole message per call. Called from any thread.
pub trait Outbound: Send + Sync + 'static {
    /// The transport's own error; also the reason a closed connection fails its calls with.
    type Error: Clone + Send + 'static;
    /// Sends one message (a line, a POST, a frame).
    fn send(&self, msg: &Message) -> Result<(), Self::Error>;
    /// The error of a call on a connection that ended without a reason being given.
    fn gone(&self) -> Self::Error;
}

/// A cancellation flag shared between the peer and the code answering one request of the other
/// side: set by the other side's cancellation, or by [`Peer::cancel_inbound`] (shutdown).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicU8>);

const BY_PEER: u8 = 1;
const BY_SHUTDOWN: u8 = 2;

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }
    /// Cancels at the other side's request.
    pub fn cancel(&self) {
        let _ = self.0.compare_exchange(0, BY_PEER, Ordering::SeqCst, Ordering::SeqCst);
    }
    /// Cancels because this side shuts down (the answer is still sent if it can be).
    pub fn shutdown(&self) {
        let _ = self.0.compare_exchange(0, BY_SHUTDOWN, Ordering::SeqCst, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst) != 0
    }
    /// Cancelled by the other side (not by shutdown).
    pub fn by_peer(&self) -> bool {
        self.0.load(Ordering::SeqCst) == BY_PEER
    }
}

/// What a handler does with a request of the other side.
pub enum Answer {
    /// The answer, sent at once (by whoever fed the request in: see [`Peer::receive`]).
    Now(Result<Value, ErrorObject>),
    /// Answered later through the [`Responder`] the handler took with [`Incoming::defer`].
    Later,
}

/// Answers the other side's requests and takes its notifications (the flavour's cancellation
/// is handled by the peer and not passed on).
pub trait Handler<O: Outbound> {
    fn request(&self, req: Incoming<'_, O>) -> Answer;
    fn notification(&self, method: &str, params: Option<Value>);
}

/// A request of the other side, handed to a [`Handler`].
pub struct Incoming<'a, O: Outbound> {
    peer: &'a Arc<Peer<O>>,
    pub id: Id,
    pub method: String,
    pub params: Option<Value>,
}

/// Why a request cannot be answered later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// `max` requests are being answered already.
    Full { max: usize },
    /// A request with this id is still being answered.
    DuplicateId,
}

impl<O: Outbound> Incoming<'_, O> {
    /// Takes a slot to answer this request later (on another thread); refused when the
    /// in-flight bound is reached or the id is already being answered.
    pub fn defer(&self) -> Result<Responder<O>, Busy> {
        let mut inbound = lock(&self.peer.inbound);
        if inbound.contains_key(&self.id) {
            return Err(Busy::DuplicateId);
        }
        if inbound.len() >= self.peer.max_in_flight {
            return Err(Busy::Full { max: self.peer.max_in_flight });
        }
        let cancel = Cancel::new();
        inbound.insert(self.id.clone(), cancel.clone());
        Ok(Responder { peer: self.peer.clone(), id: self.id.clone(), cancel })
    }
}

/// The right to answer one request of the other side later. Holds its in-flight slot until
/// dropped (after `respond`, or without answering).
pub struct Responder<O: Outbound> {
    peer: Arc<Peer<O>>,
    id: Id,
    cancel: Cancel,
}

impl<O: Outbound> Responder<O> {
    pub fn id(&self) -> &Id {
        &self.id
    }
    /// Set when the other side cancelled the request or this side shuts down.
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }
    /// Sends the answer — unless the other side cancelled the request and the flavour says to
    /// stay silent then. The slot is given back after the answer is written.
    pub fn respond(self, answer: Result<Value, ErrorObject>) {
        if self.cancel.by_peer() && self.peer.flavour.silent_when_cancelled {
            log::debug!("{}: request {} was cancelled; not answering", self.peer.label, self.id);
            return;
        }
        if self.peer.send(&reply(self.id.clone(), answer)).is_err() {
            log::debug!("{}: cannot send the answer to request {}", self.peer.label, self.id);
        }
    }
}

impl<O: Outbound> Drop for Responder<O> {
    fn drop(&mut self) {
        lock(&self.peer.inbound).remove(&self.id);
    }
}

/// The answer message to request `id`.
pub fn reply(id: Id, answer: Result<Value, ErrorObject>) -> Message {
    match answer {
        Ok(result) => Message::Response { id, result },
        Err(error) => Message::Error { id: Some(id), error },
    }
}

enum Reply<E> {
    Ok(Value),
    Err(ErrorObject),
    Closed(E),
}

pub struct Peer<O: Outbound> {
    flavour: Flavour,
    /// Names this connection in log lines (`mcp developer`, `acp`).
    label: String,
    out: O,
    next_id: AtomicI64,
    pending: Mutex<HashMap<Id, Sender<Reply<O::Error>>>>,
    closed: AtomicBool,
    close_reason: Mutex<Option<O::Error>>,
    /// The other side's requests being answered later, and their cancel flags.
    inbound: Mutex<HashMap<Id, Cancel>>,
    max_in_flight: usize,
}

impl<O: Outbound> Peer<O> {
    /// A peer sending through `out`, answering at most `max_in_flight` requests of the other
    /// side later at once (those answered at once are not counted).
    pub fn new(flavour: Flavour, label: impl Into<String>, out: O, max_in_flight: usize) -> Arc<Peer<O>> {
        Arc::new(Peer {
            flavour,
            label: label.into(),
            out,
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            inbound: Mutex::new(HashMap::new()),
            max_in_flight,
        })
    }

    pub fn flavour(&self) -> &Flavour {
        &self.flavour
    }

    pub fn outbound(&self) -> &O {
        &self.out
    }

    /// A fresh number from the id sequence (requests use it; so may progress tokens).
    pub fn next_number(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::SeqCst)
    }

    /// Sends one message as it is.
    pub fn send(&self, msg: &Message) -> Result<(), O::Error> {
        self.out.send(msg)
    }

    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), O::Error> {
        self.out.send(&Message::notification(method, params))
    }

    /// Registers a request and returns it with the message to send; the caller sends it (itself
    /// or through `Peer::send`) and then waits on the [`Pending`]. `timeout` bounds the wait.
    pub fn begin(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<(Pending<O>, Message), Error<O::Error>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed(self.reason()));
        }
        let id = Id::Num(self.next_number());
        let (tx, rx) = bounded(1);
        lock(&self.pending).insert(id.clone(), tx);
        // A close between the check and the insert would miss this slot: check again.
        if self.closed.load(Ordering::SeqCst) {
            lock(&self.pending).remove(&id);
            return Err(Error::Closed(self.reason()));
        }
        log::debug!("{}: -> {method} ({id})", self.label);
        let msg = Message::request(id.clone(), method, params);
        let pending = Pending {
            peer: self.clone(),
            id,
            method: method.to_string(),
            rx,
            timeout,
            deadline: Instant::now() + timeout,
            done: false,
        };
        Ok((pending, msg))
    }

    /// Sends a request and waits for its answer, at most `timeout`, or until `cancel` fires (a
    /// message or its sender dropped).
    pub fn call(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Result<Value, Error<O::Error>> {
        let (pending, msg) = self.begin(method, params, timeout)?;
        self.out.send(&msg).map_err(Error::Send)?;
        pending.wait(cancel) // wait: bounded by the call's deadline (`Pending::wait`)
    }

    /// Hands an answer to the call waiting for it; false (and a debug line) when none waits —
    /// an unknown id, or a call that already gave up.
    pub fn complete(&self, id: &Id, answer: Result<Value, ErrorObject>) -> bool {
        let tx = lock(&self.pending).remove(id);
        match tx {
            Some(tx) => tx
                .try_send(match answer {
                    Ok(v) => Reply::Ok(v),
                    Err(e) => Reply::Err(e),
                })
                .is_ok(),
            None => {
                log::debug!("{}: dropping an answer to unknown or finished request {id}", self.label);
                false
            }
        }
    }

    /// One message from the other side: answers complete calls, requests go to `handler`
    /// (an answer given at once is returned for the caller to send — through the transport,
    /// or through whatever it holds while reading), the flavour's cancellation sets the
    /// cancel flag of the request it names, other notifications go to `handler`.
    pub fn receive(self: &Arc<Self>, msg: Message, handler: &dyn Handler<O>) -> Option<Message> {
        match msg {
            Message::Response { id, result } => {
                self.complete(&id, Ok(result));
            }
            Message::Error { id: Some(id), error } => {
                self.complete(&id, Err(error));
            }
            Message::Error { id: None, error } => {
                log::warn!("{}: the other side sent an error without an id: {error}", self.label)
            }
            Message::Notification { method, params } if method == self.flavour.cancel_method => {
                let target = params.as_ref().and_then(|p| p.get("requestId")).and_then(Id::from_value);
                match target.and_then(|t| lock(&self.inbound).get(&t).cloned().map(|c| (t, c))) {
                    Some((t, c)) => {
                        log::debug!("{}: the other side cancelled its request {t}", self.label);
                        c.cancel();
                    }
                    None => log::debug!("{}: {method} for no request in flight", self.label),
                }
            }
            Message::Notification { method, params } => handler.notification(&method, params),
            Message::Request { id, method, params } => {
                log::debug!("{}: <- request {method} ({id})", self.label);
                let req = Incoming { peer: self, id: id.clone(), method, params };
                if let Answer::Now(answer) = handler.request(req) {
                    return Some(reply(id, answer));
                }
            }
        }
        None
    }

    /// Fails every waiting call with `reason` (the first reason given is kept for calls made
    /// later). Idempotent.
    pub fn close(&self, reason: O::Error) {
        self.closed.store(true, Ordering::SeqCst);
        let reason = lock(&self.close_reason).get_or_insert(reason).clone();
        let pending: Vec<_> = lock(&self.pending).drain().collect();
        for (_, tx) in pending {
            let _ = tx.try_send(Reply::Closed(reason.clone()));
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Calls waiting for an answer.
    pub fn pending_count(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Requests of the other side being answered later.
    pub fn inbound_count(&self) -> usize {
        lock(&self.inbound).len()
    }

    /// Sets the cancel flag (as shutdown) of every request of the other side being answered.
    pub fn cancel_inbound(&self) {
        for c in lock(&self.inbound).values() {
            c.shutdown();
        }
    }

    fn reason(&self) -> O::Error {
        lock(&self.close_reason).clone().unwrap_or_else(|| self.out.gone())
    }

    /// Forgets call `id` and tells the other side with the flavour's cancellation (when it
    /// sends one).
    fn abandon(&self, id: &Id, reason: &str) {
        lock(&self.pending).remove(id);
        if !self.flavour.cancel_sent {
            log::info!("{}: request {id} abandoned ({reason})", self.label);
            return;
        }
        log::info!("{}: request {id} abandoned ({reason}); sending {}", self.label, self.flavour.cancel_method);
        let params = match self.flavour.cancel_reason {
            true => json!({ "requestId": id, "reason": reason }),
            false => json!({ "requestId": id }),
        };
        let _ = self.notify(self.flavour.cancel_method, Some(params));
    }
}

/// One call of ours waiting for its answer. Dropped unanswered, it is forgotten (no
/// cancellation is sent: use `wait` or `give_up` for that).
pub struct Pending<O: Outbound> {
    peer: Arc<Peer<O>>,
    id: Id,
    method: String,
    rx: Receiver<Reply<O::Error>>,
    timeout: Duration,
    deadline: Instant,
    done: bool,
}

/// Why a caller stops waiting before the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    Cancelled,
    Timeout,
}

impl<O: Outbound> Pending<O> {
    pub fn id(&self) -> &Id {
        &self.id
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The answer if it has come (a caller reading the connection itself polls this).
    pub fn try_take(&mut self) -> Option<Result<Value, Error<O::Error>>> {
        match self.rx.try_recv() {
            Ok(r) => Some(self.finish(Some(r))),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(self.finish(None)),
        }
    }

    /// Waits for the answer until the deadline or until `cancel` fires; either sends the
    /// flavour's cancellation.
    pub fn wait(mut self, cancel: Option<&Receiver<()>>) -> Result<Value, Error<O::Error>> {
        let never = crossbeam_channel::never();
        let cancel = cancel.unwrap_or(&never);
        select! {
            recv(self.rx) -> r => self.finish(r.ok()),
            recv(cancel) -> _ => self.give_up(GiveUp::Cancelled),
            default(self.deadline.saturating_duration_since(Instant::now())) => self.give_up(GiveUp::Timeout),
        }
    }

    /// Stops waiting: forgets the call, sends the flavour's cancellation, and returns the error.
    pub fn give_up(mut self, why: GiveUp) -> Result<Value, Error<O::Error>> {
        self.done = true;
        let who = self.peer.flavour.who;
        let method = std::mem::take(&mut self.method);
        match why {
            GiveUp::Cancelled => {
                self.peer.abandon(&self.id, "operation cancelled");
                Err(Error::Cancelled { who, method })
            }
            GiveUp::Timeout => {
                self.peer.abandon(&self.id, "timed out");
                Err(Error::Timeout { who, method, after: self.timeout })
            }
        }
    }

    fn finish(&mut self, r: Option<Reply<O::Error>>) -> Result<Value, Error<O::Error>> {
        self.done = true;
        match r {
            Some(Reply::Ok(v)) => Ok(v),
            Some(Reply::Err(error)) => Err(Error::Remote { who: self.peer.flavour.who, error }),
            Some(Reply::Closed(e)) => Err(Error::Closed(e)),
            None => Err(Error::Closed(self.peer.reason())),
        }
    }
}

impl<O: Outbound> Drop for Pending<O> {
    fn drop(&mut self) {
        if !self.done {
            lock(&self.peer.pending).remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::METHOD_NOT_FOUND;
    use std::fmt;
    use std::thread;

    /// Records what the peer sends; fails sends once `down` is set.
    #[derive(Default)]
    struct Wire {
        sent: Mutex<Vec<Message>>,
        down: AtomicBool,
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Down(&'static str);

    impl fmt::Display for Down {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Outbound for Arc<Wire> {
        type Error = Down;
        fn send(&self, msg: &Message) -> Result<(), Down> {
            if self.down.load(Ordering::SeqCst) {
                return Err(Down("the wire is down"));
            }
            lock(&self.sent).push(msg.clone());
            Ok(())
        }
        fn gone(&self) -> Down {
            Down("gone")
        }
    }

    impl Wire {
        /// The messages sent so far, taken.
        fn take(&self) -> Vec<Message> {
            std::mem::take(&mut *lock(&self.sent))
        }
        /// Waits (bounded) until `n` messages were sent, and takes them.
        fn wait_for(&self, n: usize) -> Vec<Message> {
            let until = Instant::now() + Duration::from_secs(5);
            while lock(&self.sent).len() < n {
                assert!(Instant::now() < until, "{} messages sent, waited for {n}", lock(&self.sent).len());
                thread::sleep(Duration::from_millis(2));
            }
            self.take()
        }
    }

    fn peer(flavour: Flavour, max: usize) -> (Arc<Peer<Arc<Wire>>>, Arc<Wire>) {
        let wire = Arc::new(Wire::default());
        (Peer::new(flavour, "test", wire.clone(), max), wire)
    }

    fn request_id(m: &Message) -> Id {
        match m {
            Message::Request { id, .. } => id.clone(),
            other => panic!("not a request: {other:?}"),
        }
    }

    /// Answers `ping` at once, defers `slow` (the responders kept for the test), refuses the
    /// rest; records notifications.
    #[derive(Default)]
    struct Echo {
        later: Mutex<Vec<Responder<Arc<Wire>>>>,
        refused: Mutex<Vec<Busy>>,
        notes: Mutex<Vec<String>>,
    }

    impl Handler<Arc<Wire>> for Echo {
        fn request(&self, req: Incoming<'_, Arc<Wire>>) -> Answer {
            match req.method.as_str() {
                "ping" => Answer::Now(Ok(json!({}))),
                "slow" => match req.defer() {
                    Ok(r) => {
                        lock(&self.later).push(r);
                        Answer::Later
                    }
                    Err(b) => {
                        lock(&self.refused).push(b.clone());
                        Answer::Now(Err(ErrorObject::new(-1, format!("busy: {b:?}"))))
                    }
                },
                m => Answer::Now(Err(ErrorObject::new(METHOD_NOT_FOUND, m.to_string()))),
            }
        }
        fn notification(&self, method: &str, _params: Option<Value>) {
            lock(&self.notes).push(method.to_string());
        }
    }

    #[test]
    fn ids_are_fresh_and_answers_find_their_call_out_of_order() {
        let (p, wire) = peer(MCP_CLIENT, 4);
        let callers: Vec<_> = (0..3)
            .map(|i| {
                let p = p.clone();
                thread::spawn(move || p.call("echo", Some(json!({ "n": i })), Duration::from_secs(5), None))
            })
            .collect();
        let sent = wire.wait_for(3);
        let ids: Vec<Id> = sent.iter().map(request_id).collect();
        assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), 3, "distinct ids: {ids:?}");
        // Answered last first: each caller gets the answer to its own request.
        for m in sent.iter().rev() {
            let Message::Request { id, params, .. } = m else { unreachable!() };
            p.receive(Message::Response { id: id.clone(), result: params.clone().unwrap() }, &Echo::default());
        }
        for (i, c) in callers.into_iter().enumerate() {
            assert_eq!(c.join().unwrap(), Ok(json!({ "n": i })));
        }
        assert_eq!(p.pending_count(), 0);
    }

    #[test]
    fn an_error_answer_is_remote_and_unknown_ids_are_ignored() {
        let (p, wire) = peer(ACP, 4);
        let c = {
            let p = p.clone();
            thread::spawn(move || p.call("fs/read_text_file", None, Duration::from_secs(5), None))
        };
        let id = request_id(&wire.wait_for(1)[0]);
        // Answers to ids nobody waits for change nothing (and are logged at debug).
        assert!(!p.complete(&Id::Num(999), Ok(json!(1))));
        assert!(p.receive(Message::Response { id: Id::Str("x".into()), result: json!(1) }, &Echo::default()).is_none());
        p.receive(
            Message::Error { id: Some(id.clone()), error: ErrorObject::new(-32002, "no such file") },
            &Echo::default(),
        );
        let e = c.join().unwrap().unwrap_err();
        assert_eq!(e, Error::Remote { who: "acp: the editor", error: ErrorObject::new(-32002, "no such file") });
        assert_eq!(e.to_string(), "acp: the editor answered error -32002: no such file");
        // A second answer to the same id finds nothing.
        assert!(!p.complete(&id, Ok(json!(1))));
        assert!(wire.take().is_empty(), "nothing more was sent");
    }

    #[test]
    fn a_deadline_ends_the_wait_and_sends_the_flavours_cancellation() {
        let id_only = Flavour { cancel_reason: false, ..MCP_CLIENT };
        for (flavour, params) in [
            (MCP_CLIENT, Some(json!({ "requestId": 1, "reason": "timed out" }))),
            (id_only, Some(json!({ "requestId": 1 }))),
            (ACP, None),
        ] {
            let (p, wire) = peer(flavour, 4);
            let started = Instant::now();
            let r = p.call("slow", None, Duration::from_millis(50), None);
            let waited = started.elapsed();
            assert!(
                matches!(&r, Err(Error::Timeout { method, after, .. }) if method == "slow" && *after == Duration::from_millis(50)),
                "{r:?}"
            );
            assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(2), "{waited:?}");
            let sent = wire.take();
            let cancellation = params.map(|p| Message::notification(flavour.cancel_method, Some(p)));
            assert_eq!(sent.get(1), cancellation.as_ref(), "{flavour:?}");
            // The late answer is dropped.
            assert!(!p.complete(&Id::Num(1), Ok(json!({}))));
        }
    }

    #[test]
    fn a_cancel_signal_ends_the_wait_and_sends_the_cancellation() {
        let (p, wire) = peer(MCP_CLIENT, 4);
        let (tx, rx) = bounded(1);
        let c = {
            let p = p.clone();
            thread::spawn(move || p.call("tools/call", None, Duration::from_secs(30), Some(&rx)))
        };
        wire.wait_for(1);
        tx.send(()).unwrap();
        let r = c.join().unwrap();
        assert!(matches!(&r, Err(Error::Cancelled { method, .. }) if method == "tools/call"), "{r:?}");
        let sent = wire.take();
        assert_eq!(
            sent,
            [Message::notification(
                "notifications/cancelled",
                Some(json!({ "requestId": 1, "reason": "operation cancelled" }))
            )]
        );
        assert_eq!(p.pending_count(), 0);
    }

    #[test]
    fn close_fails_every_pending_call_and_later_ones_with_the_reason() {
        let (p, wire) = peer(MCP_CLIENT, 4);
        let callers: Vec<_> = (0..3)
            .map(|_| {
                let p = p.clone();
                thread::spawn(move || p.call("x", None, Duration::from_secs(30), None))
            })
            .collect();
        wire.wait_for(3);
        let started = Instant::now();
        p.close(Down("the child exited"));
        p.close(Down("a second reason is not kept"));
        for c in callers {
            assert_eq!(c.join().unwrap(), Err(Error::Closed(Down("the child exited"))));
        }
        assert!(started.elapsed() < Duration::from_secs(2), "failed at once");
        assert_eq!(p.call("y", None, Duration::from_secs(30), None), Err(Error::Closed(Down("the child exited"))));
        assert!(p.is_closed() && p.pending_count() == 0);
        assert!(wire.take().is_empty(), "nothing is sent on a closed peer");
    }

    #[test]
    fn a_failed_send_is_the_transports_error_and_leaves_nothing_pending() {
        let (p, wire) = peer(ACP, 4);
        wire.down.store(true, Ordering::SeqCst);
        assert_eq!(p.call("x", None, Duration::from_secs(30), None), Err(Error::Send(Down("the wire is down"))));
        assert_eq!(p.pending_count(), 0);
        // Shown as the transport's own error, which the peer's user folds into its layer's.
        let e: Box<dyn std::error::Error> = Box::new(Error::Send(Down("broken pipe")));
        assert_eq!(e.to_string(), "broken pipe");
    }

    #[test]
    fn requests_of_the_other_side_are_answered_now_or_later_and_notifications_pass() {
        let (p, wire) = peer(MCP_CLIENT, 4);
        let h = Echo::default();
        let now = p.receive(Message::request(Id::Num(7), "ping", None), &h);
        assert_eq!(now, Some(Message::Response { id: Id::Num(7), result: json!({}) }));
        let unknown = p.receive(Message::request(Id::Str("u".into()), "nope", None), &h);
        assert!(
            matches!(unknown, Some(Message::Error { id: Some(Id::Str(_)), error }) if error.code == METHOD_NOT_FOUND)
        );
        assert!(p.receive(Message::request(Id::Num(8), "slow", None), &h).is_none());
        assert_eq!(p.inbound_count(), 1);
        lock(&h.later).pop().unwrap().respond(Ok(json!("done")));
        assert_eq!(wire.take(), [Message::Response { id: Id::Num(8), result: json!("done") }]);
        assert_eq!(p.inbound_count(), 0, "the slot is given back");
        p.receive(Message::notification("notifications/tools/list_changed", None), &h);
        assert_eq!(*lock(&h.notes), ["notifications/tools/list_changed"]);
        // Our own requests work meanwhile, in the other direction.
        p.notify("notifications/initialized", None).unwrap();
        assert_eq!(wire.take(), [Message::notification("notifications/initialized", None)]);
    }

    #[test]
    fn the_other_sides_cancellation_flags_its_request_and_mcp_stays_silent() {
        for (flavour, answered) in [(MCP_SERVER, false), (ACP, true)] {
            let (p, wire) = peer(flavour, 4);
            let h = Echo::default();
            p.receive(Message::request(Id::Num(3), "slow", None), &h);
            let r = lock(&h.later).pop().unwrap();
            assert!(!r.cancel().is_cancelled());
            p.receive(Message::notification(flavour.cancel_method, Some(json!({ "requestId": 3 }))), &h);
            assert!(r.cancel().by_peer());
            assert!(lock(&h.notes).is_empty(), "the cancellation is the peer's, not the handler's");
            r.respond(Err(ErrorObject::new(-32800, "cancelled")));
            assert_eq!(wire.take().len(), usize::from(answered), "{}", flavour.cancel_method);
            // A cancellation naming nothing in flight changes nothing.
            p.receive(Message::notification(flavour.cancel_method, Some(json!({ "requestId": 99 }))), &h);
        }
        // Shutdown flags every request in flight, and it is still answered.
        let (p, wire) = peer(MCP_SERVER, 4);
        let h = Echo::default();
        p.receive(Message::request(Id::Num(1), "slow", None), &h);
        p.cancel_inbound();
        let r = lock(&h.later).pop().unwrap();
        assert!(r.cancel().is_cancelled() && !r.cancel().by_peer());
        r.respond(Ok(json!(1)));
        assert_eq!(wire.take().len(), 1);
    }

    #[test]
    fn requests_answered_later_are_bounded_and_ids_in_use_refused() {
        let (p, _wire) = peer(MCP_SERVER, 2);
        let h = Echo::default();
        p.receive(Message::request(Id::Num(1), "slow", None), &h);
        p.receive(Message::request(Id::Num(2), "slow", None), &h);
        let third = p.receive(Message::request(Id::Num(3), "slow", None), &h);
        assert!(matches!(third, Some(Message::Error { id: Some(Id::Num(3)), .. })), "{third:?}");
        let again = p.receive(Message::request(Id::Num(1), "ping", None), &h);
        assert!(matches!(again, Some(Message::Response { .. })), "answered at once, not counted");
        // Id 2's slot given back (dropped unanswered): id 1 is still in use, 2 is free again.
        drop(lock(&h.later).pop());
        assert_eq!(p.inbound_count(), 1);
        p.receive(Message::request(Id::Num(1), "slow", None), &h);
        assert!(p.receive(Message::request(Id::Num(2), "slow", None), &h).is_none());
        assert_eq!(*lock(&h.refused), [Busy::Full { max: 2 }, Busy::DuplicateId]);
        assert_eq!(p.inbound_count(), 2);
    }

    #[test]
    fn a_caller_reading_the_connection_itself_polls_its_answer() {
        let (p, _wire) = peer(MCP_CLIENT, 4);
        let (mut pending, msg) = p.begin("tools/call", None, Duration::from_secs(5)).unwrap();
        assert_eq!(msg.method(), Some("tools/call"));
        assert!(pending.try_take().is_none());
        p.receive(Message::Response { id: pending.id().clone(), result: json!(5) }, &Echo::default());
        assert_eq!(pending.try_take(), Some(Ok(json!(5))));
        // Dropped before an answer: forgotten, without a cancellation.
        let (pending, _) = p.begin("x", None, Duration::from_secs(5)).unwrap();
        assert_eq!(p.pending_count(), 1);
        drop(pending);
        assert_eq!(p.pending_count(), 0);
    }
}
