//! gosling patch: the open connections, each idle (waiting for or reading a request head,
//! holding no request) or busy (its request is being handled), so that when the connection
//! cap is reached the connection idle the longest can be closed to admit a new one. Without
//! it, a client holding the cap's worth of idle connections locked everyone else out.
//!
//! Requests touch only their connection's atomic state; the map's lock is taken when a
//! connection opens or closes, and to choose one to close.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::refined_tcp_stream::Stream;

const BUSY: u64 = 0;
const CLOSED: u64 = u64::MAX;

pub(crate) struct Registry {
    epoch: Instant,
    conns: Mutex<(u64, HashMap<u64, Arc<Entry>>)>,
}

pub(crate) struct Entry {
    /// `BUSY`, `CLOSED`, or 1 + the nanoseconds since `epoch` at which it became idle.
    state: AtomicU64,
    stream: Stream,
}

/// A connection's place in the registry; leaves it when dropped.
pub(crate) struct Registered {
    registry: Arc<Registry>,
    id: u64,
    entry: Arc<Entry>,
}

impl Registry {
    pub(crate) fn new() -> Arc<Registry> {
        Arc::new(Registry { epoch: Instant::now(), conns: Mutex::new((0, HashMap::new())) })
    }

    fn now(&self) -> u64 {
        (self.epoch.elapsed().as_nanos() as u64).clamp(1, CLOSED - 1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<u64, Arc<Entry>>)> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a new connection, idle from now.
    pub(crate) fn register(self: &Arc<Self>, stream: Stream) -> Registered {
        let entry = Arc::new(Entry { state: AtomicU64::new(self.now()), stream });
        let mut conns = self.lock();
        conns.0 += 1;
        let id = conns.0;
        conns.1.insert(id, entry.clone());
        Registered { registry: self.clone(), id, entry }
    }

    /// Closes the connection that has been idle the longest; false when none is idle.
    pub(crate) fn close_oldest_idle(&self) -> bool {
        let conns = self.lock();
        loop {
            let oldest = conns
                .1
                .values()
                .map(|e| (e.state.load(Ordering::Acquire), e))
                .filter(|(s, _)| *s != BUSY && *s != CLOSED)
                .min_by_key(|(s, _)| *s);
            let (since, entry) = match oldest {
                Some(found) => found,
                None => return false,
            };
            // It may have turned busy since: then look again.
            if entry.state.compare_exchange(since, CLOSED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                entry.stream.shutdown_both();
                return true;
            }
        }
    }
}

impl Registered {
    /// Waiting for the next request: may be closed to admit a new connection.
    pub(crate) fn idle(&self) {
        let now = self.registry.now();
        let _ = self.entry.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != CLOSED).then_some(now));
    }

    /// A request arrived; false if the connection was closed as idle meanwhile.
    pub(crate) fn busy(&self) -> bool {
        self.entry.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s != CLOSED).then_some(BUSY)).is_ok()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().1.remove(&self.id);
    }
}
