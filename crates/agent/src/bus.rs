//! The per-session event bus behind `GET /sessions/{id}/events` (goose 1.34's session events).
//!
//! Every event of a session's requests is numbered (`seq`, from 1, per session) and kept in a
//! replay buffer of the last `REPLAY` events; any number of followers read it, each with its
//! own cursor, so several clients can watch one session and a client that reconnects with
//! `Last-Event-ID` gets exactly what it missed. A follower whose cursor fell out of the buffer
//! is told it is too far behind. Followers wait on a condition variable with a deadline (the
//! stream's ping interval), never unbounded. At most one request is active per session; its
//! cancel signal and its end are held here so `POST /sessions/{id}/cancel` can stop it.

use crate::events::{Event, Sink};
use crossbeam_channel::{Receiver, Sender};
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Events kept for replay (goose's broadcast capacity).
pub const REPLAY: usize = 512;

/// Bytes of event JSON kept for replay at most (big tool results): older events are dropped
/// first, the newest one is always kept.
pub const REPLAY_BYTES: usize = 32 << 20;

/// The request id of the messages other processes append to a followed session (`follow`):
/// a client shows them without waiting for that request's Finish.
pub const OTHER_PROCESS: &str = "other-process";

/// goose's answer to a second request while one runs.
pub const BUSY: &str = "Session already has an active request. Cancel it first.";

/// How long a cancel waits for the turn to wind down before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(3);

struct ActiveRequest {
    id: String,
    /// Dropped to cancel the turn (its receiver sees the disconnect).
    cancel: Option<Sender<()>>,
    /// Disconnects when the turn thread has finished.
    done: Receiver<()>,
}

#[derive(Default)]
struct State {
    /// The seq of the last published event (0: none yet).
    last_seq: u64,
    buffer: VecDeque<(u64, Arc<str>)>,
    /// Sum of the buffered events' lengths.
    bytes: usize,
    active: Option<ActiveRequest>,
}

/// What a follower reads next.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// The event with this seq, as its JSON text.
    Event(u64, Arc<str>),
    /// Events after the cursor were dropped from the buffer: reload the conversation.
    TooFarBehind,
    /// Nothing new before the deadline.
    Idle,
}

#[derive(Default)]
pub struct Bus {
    state: Mutex<State>,
    changed: Condvar,
}

impl Bus {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Publishes one event of request `request_id`: its JSON plus `chat_request_id` and
    /// `request_id` (a Notification keeps its own `request_id`, the tool call's).
    pub fn publish(&self, ev: &Event, request_id: &str) -> u64 {
        let mut v = ev.to_json();
        if let Value::Object(o) = &mut v {
            o.insert("chat_request_id".into(), json!(request_id));
            o.entry("request_id").or_insert_with(|| json!(request_id));
        }
        self.publish_json(&v)
    }

    /// Publishes a message another process appended to the session (`follow`): goose's
    /// Message event under the request id `OTHER_PROCESS`, of no request of this process (whose
    /// end no file records, so no Finish follows it).
    pub fn publish_other(&self, ev: &Event) -> u64 {
        self.publish(ev, OTHER_PROCESS)
    }

    fn publish_json(&self, v: &Value) -> u64 {
        let text: Arc<str> = Arc::from(v.to_string());
        let mut s = self.lock();
        s.last_seq += 1;
        let seq = s.last_seq;
        s.bytes += text.len();
        s.buffer.push_back((seq, text));
        while s.buffer.len() > REPLAY || (s.bytes > REPLAY_BYTES && s.buffer.len() > 1) {
            if let Some((_, old)) = s.buffer.pop_front() {
                s.bytes -= old.len();
            }
        }
        drop(s);
        self.changed.notify_all();
        seq
    }

    /// Where a new follower starts: after `last_event_id` (clamped to what exists, so a
    /// stale id from before a server restart replays the whole buffer), else before the
    /// oldest buffered event.
    pub fn cursor(&self, last_event_id: Option<u64>) -> u64 {
        let s = self.lock();
        let oldest = s.buffer.front().map_or(s.last_seq + 1, |(seq, _)| *seq);
        match last_event_id {
            Some(n) if n <= s.last_seq => n,
            _ => oldest - 1,
        }
    }

    /// The first event after `cursor`, waiting until `deadline` for one.
    pub fn next_after(&self, cursor: u64, deadline: Instant) -> Next {
        let mut s = self.lock();
        loop {
            if let Some((oldest, _)) = s.buffer.front() {
                if cursor + 1 < *oldest {
                    return Next::TooFarBehind;
                }
                let i = (cursor + 1 - oldest) as usize;
                if let Some((seq, text)) = s.buffer.get(i) {
                    return Next::Event(*seq, text.clone());
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Next::Idle;
            }
            s = self.changed.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Ids of the requests in flight (zero or one).
    pub fn active_ids(&self) -> Vec<String> {
        self.lock().active.iter().map(|a| a.id.clone()).collect()
    }

    /// Registers `id` as the session's active request; `None` while another runs.
    /// Returns the turn's cancel receiver and the sender it drops when it is done.
    pub fn begin(&self, id: &str) -> Option<(Receiver<()>, Sender<()>)> {
        let mut s = self.lock();
        if s.active.is_some() {
            return None;
        }
        let (cancel_tx, cancel_rx) = crossbeam_channel::bounded(1);
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        s.active = Some(ActiveRequest { id: id.to_string(), cancel: Some(cancel_tx), done: done_rx });
        Some((cancel_rx, done_tx))
    }

    /// The request `id` ended (no-op when a cancel already cleared it).
    pub fn end(&self, id: &str) {
        let mut s = self.lock();
        if s.active.as_ref().is_some_and(|a| a.id == id) {
            s.active = None;
        }
    }

    /// Cancels the active request `id` (any active request when `id` names none), waits a
    /// little for it to wind down, and frees the session for the next request. False when
    /// nothing was active.
    pub fn cancel(&self, id: &str) -> bool {
        let (cancelled, done) = {
            let mut s = self.lock();
            let Some(a) = s.active.as_mut() else { return false };
            if a.id != id {
                log::info!("cancel: request {id:?} is not active; cancelling the active {:?}", a.id);
            }
            drop(a.cancel.take());
            (a.id.clone(), a.done.clone())
        };
        let _ = done.recv_timeout(CANCEL_WAIT);
        // Only that request: once it finished, the next one may already have begun.
        self.end(&cancelled);
        true
    }
}

/// The buses of all sessions that have one (made by the first follower or request).
#[derive(Default)]
pub struct Buses {
    map: Mutex<HashMap<String, Arc<Bus>>>,
}

impl Buses {
    pub fn get(&self, session_id: &str) -> Option<Arc<Bus>> {
        lock(&self.map).get(session_id).cloned()
    }

    pub fn get_or_create(&self, session_id: &str) -> Arc<Bus> {
        lock(&self.map).entry(session_id.to_string()).or_default().clone()
    }

    /// Drops a deleted session's bus (its followers keep their Arc until they leave).
    pub fn remove(&self, session_id: &str) {
        lock(&self.map).remove(session_id);
    }
}

/// A turn's events into the bus, under the request's id. Never reports the watcher gone: a
/// background request runs until it ends or is cancelled.
pub struct BusSink {
    pub bus: Arc<Bus>,
    pub request_id: String,
}

impl Sink for BusSink {
    /// Finish is the last event of a request: the session takes its next request from then on.
    fn emit(&self, ev: Event) -> bool {
        if matches!(ev, Event::Finish(_)) {
            self.bus.end(&self.request_id);
        }
        self.bus.publish(&ev, &self.request_id);
        true
    }
}

/// A turn's events to its watcher (`main`, whose answer decides whether the turn goes on) and
/// to the session's bus as well.
pub struct Also {
    pub main: Arc<dyn Sink>,
    pub bus: BusSink,
}

impl Sink for Also {
    fn emit(&self, ev: Event) -> bool {
        self.bus.emit(ev.clone());
        self.main.emit(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(20)
    }

    #[test]
    fn replay_follow_and_too_far_behind() {
        let bus = Bus::default();
        assert_eq!(bus.cursor(None), 0);
        assert_eq!(bus.next_after(0, soon()), Next::Idle);
        for i in 0..REPLAY + 10 {
            bus.publish(&Event::Error(format!("e{i}")), "r1");
        }
        // Without Last-Event-ID: from the oldest buffered event (seq 11).
        let c = bus.cursor(None);
        assert_eq!(c, 10);
        let Next::Event(seq, text) = bus.next_after(c, soon()) else { panic!() };
        assert_eq!(seq, 11);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["chat_request_id"].as_str(), v["request_id"].as_str()), (Some("r1"), Some("r1")));
        assert_eq!(v["error"], "e10");
        // With one inside the buffer: the next one; older than the buffer: too far behind.
        assert!(matches!(bus.next_after(bus.cursor(Some(400)), soon()), Next::Event(401, _)));
        assert_eq!(bus.next_after(bus.cursor(Some(3)), soon()), Next::TooFarBehind);
        // Caught up: idle; a stale id from a previous server run replays everything buffered.
        assert_eq!(bus.next_after(bus.cursor(Some(522)), soon()), Next::Idle);
        assert_eq!(bus.cursor(Some(10_000)), 10);
        // A Notification keeps its own request_id.
        let n = Event::Notification { request_id: "tool1".into(), method: "m".into(), params: json!({}) };
        bus.publish(&n, "r1");
        let Next::Event(_, text) = bus.next_after(522, soon()) else { panic!() };
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["request_id"].as_str(), v["chat_request_id"].as_str()), (Some("tool1"), Some("r1")));
    }

    #[test]
    fn another_processs_message_is_of_the_other_process_request() {
        let bus = Bus::default();
        bus.publish(&Event::Error("local".into()), "r1");
        let m = gosling_store::message::Message::new(
            "m1",
            gosling_store::message::Role::Assistant,
            vec![gosling_store::message::Content::text("from elsewhere")],
        );
        assert_eq!(
            bus.publish_other(&Event::Message { message: m, tokens: Default::default() }),
            2,
            "numbered in turn"
        );
        let Next::Event(2, text) = bus.next_after(1, soon()) else { panic!() };
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["type"].as_str(), v["message"]["id"].as_str()), (Some("Message"), Some("m1")));
        assert_eq!(
            (v["chat_request_id"].as_str(), v["request_id"].as_str()),
            (Some(OTHER_PROCESS), Some(OTHER_PROCESS))
        );
    }

    #[test]
    fn the_buffer_is_bounded_in_bytes_too() {
        let bus = Bus::default();
        let big = "x".repeat(REPLAY_BYTES / 3);
        for _ in 0..5 {
            bus.publish(&Event::Error(big.clone()), "r");
        }
        let s = bus.lock();
        assert_eq!(s.buffer.len(), 2, "only what fits in REPLAY_BYTES");
        assert!(s.bytes <= REPLAY_BYTES);
        assert_eq!(s.buffer.front().unwrap().0, 4);
    }

    #[test]
    fn a_waiting_follower_wakes_on_publish() {
        let bus = Arc::new(Bus::default());
        let b = bus.clone();
        let h = std::thread::spawn(move || b.next_after(0, Instant::now() + Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(50));
        bus.publish(&Event::Error("x".into()), "r");
        assert!(matches!(h.join().unwrap(), Next::Event(1, _)));
    }

    #[test]
    fn one_active_request_and_cancel() {
        let bus = Bus::default();
        let (cancel, done) = bus.begin("a").unwrap();
        assert!(bus.begin("b").is_none(), "one request at a time");
        assert_eq!(bus.active_ids(), vec!["a".to_string()]);
        let turn = std::thread::spawn(move || {
            // The turn sees the cancel, then ends.
            assert!(cancel.recv().is_err());
            drop(done);
        });
        assert!(bus.cancel("a"));
        turn.join().unwrap();
        assert!(bus.active_ids().is_empty());
        assert!(!bus.cancel("a"), "nothing active");
        let (_c, _d) = bus.begin("b").expect("free again after the cancel");
        bus.end("b");
        assert!(bus.active_ids().is_empty());
    }
}
