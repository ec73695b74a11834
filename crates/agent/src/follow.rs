//! Live across processes: what other processes append to a followed session's conversation
//! file (`<id>.jsonl`) reaches this process's followers — the session's event bus (HTTP
//! `/sessions/{id}/events`) and the sinks of editors that opened it (ACP) — as the same
//! `Event::Message` a local turn emits, in file order, each line once. On the bus it is of the request
//! `bus::OTHER_PROCESS` (no request of this process; no file records its end, so no `Finish`
//! follows it: the web page shows such messages without marking a request running).
//!
//! The file is the only channel: no side channel between processes. While a session has a
//! follower, one thread per process waits on one kernel watch of the sessions directory
//! (inotify, `gosling_sys::DirWatch`: one watch whatever the number of sessions followed) and
//! reads the whole lines past where it last read (`SessionStore::tail_read`, under the
//! session's shared lock). The lines this process appended itself are skipped there: its
//! followers already had those events from the local turn. With no follower there is no watch
//! and no thread (idle stays idle); the last follower leaving removes the watch, which wakes
//! the thread to end. Without a notice the thread wakes at its deadline (`RECHECK`) and reads
//! every followed session, as it does at once when the kernel's queue overflowed: a lost
//! notice costs a delay, never a line. Where no watch can be made (the inotify limits), a
//! warning says so and followers see this process's turns only.
//! A rewrite of the conversation (truncate, fork over it) is not streamed: followers see it
//! when they reload.

use crate::bus::Bus;
use crate::error::Error;
use crate::events::{Event, Sink};
use crate::messages::Tokens;
use gosling_store::sessions::{SessionStore, TailPos};
use gosling_sys::DirWatch;
use gosling_util::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The deadline of the watcher's wait. The kernel tells every append (or that its queue
/// overflowed), so this is no period: only what a lost notice would cost at most, and the one
/// wake-up of a process whose followed sessions stay quiet this long.
const RECHECK: Duration = Duration::from_secs(600);

/// One followed session.
struct Followed {
    pos: TailPos,
    /// Followers of the session's bus, and the bus while there are any.
    bus: Option<(Arc<Bus>, usize)>,
    /// Other followers (ACP editors), by registration key.
    sinks: Vec<(u64, Arc<dyn Sink>)>,
}

#[derive(Default)]
struct State {
    followed: HashMap<String, Followed>,
    /// The watch while any session is followed (its thread holds it too).
    watch: Option<Arc<DirWatch>>,
    next_key: u64,
}

/// This process's following of other processes' appends (one per `Host`).
pub struct Live {
    sessions: Arc<SessionStore>,
    state: Mutex<State>,
}

/// A follower's registration; dropping it stops following (the last one ends the watch).
pub struct Following {
    live: Arc<Live>,
    id: String,
    /// `None`: a follower of the bus.
    key: Option<u64>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.live.leave(&self.id, self.key);
    }
}

impl Live {
    pub fn new(sessions: Arc<SessionStore>) -> Arc<Live> {
        Arc::new(Live { sessions, state: Mutex::default() })
    }

    /// Registers a follower of session `id`: of `bus` (counted, the bus fed once whatever the
    /// number of its followers), or `sink`. `SessionNotFound` when there is no such session.
    pub(crate) fn join(
        self: &Arc<Live>,
        id: &str,
        bus: Option<Arc<Bus>>,
        sink: Option<Arc<dyn Sink>>,
    ) -> Result<Following, Error> {
        let mut st = lock(&self.state);
        if !st.followed.contains_key(id) {
            let pos = self
                .sessions
                .tail_start(id)
                .map_err(Error::Store)?
                .ok_or_else(|| Error::SessionNotFound(id.to_string()))?;
            st.followed.insert(id.to_string(), Followed { pos, bus: None, sinks: Vec::new() });
        }
        if st.watch.is_none() {
            match self.start_watch() {
                Ok(w) => st.watch = Some(w),
                // Followers still get this process's own turns; say why not the others'.
                Err(e) => log::warn!(
                    "live: cannot watch {} ({e}); turns other processes run in session {id} are seen after a reload only (raise fs.inotify.max_user_instances?)",
                    self.sessions.dir().display()
                ),
            }
        }
        let f = st.followed.get_mut(id).expect("inserted above");
        let key = match (bus, sink) {
            (Some(bus), _) => {
                let n = f.bus.take().map_or(0, |(_, n)| n);
                f.bus = Some((bus, n + 1));
                None
            }
            (None, Some(sink)) => {
                st.next_key += 1;
                let key = st.next_key;
                st.followed.get_mut(id).expect("inserted above").sinks.push((key, sink));
                Some(key)
            }
            (None, None) => None,
        };
        Ok(Following { live: self.clone(), id: id.to_string(), key })
    }

    fn leave(&self, id: &str, key: Option<u64>) {
        let mut st = lock(&self.state);
        let Some(f) = st.followed.get_mut(id) else { return };
        match key {
            None => {
                if let Some((bus, n)) = f.bus.take() {
                    f.bus = (n > 1).then_some((bus, n - 1));
                }
            }
            Some(k) => f.sinks.retain(|(key, _)| *key != k),
        }
        if f.bus.is_none() && f.sinks.is_empty() {
            st.followed.remove(id);
            self.sessions.tail_stop(id);
        }
        if st.followed.is_empty() {
            if let Some(w) = st.watch.take() {
                w.stop();
            }
        }
    }

    /// A new watch of the sessions directory and the thread that waits on it.
    fn start_watch(self: &Arc<Live>) -> std::io::Result<Arc<DirWatch>> {
        let watch = Arc::new(DirWatch::new(self.sessions.dir())?);
        let (live, w) = (Arc::downgrade(self), watch.clone());
        std::thread::Builder::new().name("session-follow".into()).spawn(move || loop {
            let changes = match w.changes(RECHECK) {
                Ok(c) => c,
                Err(e) => {
                    log::error!("live: the watch of the sessions directory failed ({e}); followers see other processes' turns after a reload");
                    return;
                }
            };
            let Some(live) = live.upgrade() else { return };
            if changes.ended {
                return;
            }
            let all = changes.overflow || changes.names.is_empty();
            let ids: Vec<String> = {
                let st = lock(&live.state);
                if all {
                    st.followed.keys().cloned().collect()
                } else {
                    let named = changes.names.iter().filter_map(|n| n.strip_suffix(".jsonl"));
                    let mut ids: Vec<String> =
                        named.filter(|id| st.followed.contains_key(*id)).map(str::to_string).collect();
                    ids.dedup();
                    ids
                }
            };
            for id in ids {
                live.feed(&id);
            }
        })?;
        Ok(watch)
    }

    /// Reads what other processes appended to session `id` since the last read and hands each
    /// message to its followers (under the lock: one reader at a time, in file order).
    fn feed(&self, id: &str) {
        let mut st = lock(&self.state);
        let Some(f) = st.followed.get_mut(id) else { return };
        loop {
            let tail = match self.sessions.tail_read(id, f.pos) {
                Ok(Some(t)) => t,
                Ok(None) => return,
                Err(e) => {
                    log::warn!("live: session {id}: {e}; its followers miss what other processes appended");
                    return;
                }
            };
            f.pos = tail.pos;
            if tail.rewritten {
                log::info!("live: session {id} was rewritten by another process; followers see it on reload");
            }
            for message in tail.messages {
                let ev = Event::Message { message, tokens: Tokens::default() };
                if let Some((bus, _)) = &f.bus {
                    bus.publish_other(&ev);
                }
                f.sinks.retain(|(_, s)| s.emit(ev.clone()));
            }
            if !tail.more {
                return;
            }
        }
    }
}
