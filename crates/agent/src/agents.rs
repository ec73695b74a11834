//! The live runtimes of the sessions, by session id, and the one-turn-per-session guard.

use gosling_extensions::runtime::SessionRuntime;
use gosling_util::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Agents {
    runtimes: Mutex<HashMap<String, Arc<SessionRuntime>>>,
    /// Sessions with a turn running, whichever front end started it (`/reply`, the session
    /// API, ACP): one turn per session at a time, so two never write one conversation.
    running: Arc<Mutex<HashSet<String>>>,
}

/// Held by a running turn (see `Agents::begin_turn`); the session is free again on drop.
pub struct TurnGuard {
    running: Arc<Mutex<HashSet<String>>>,
    session: String,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.session);
    }
}

impl Agents {
    /// Marks a turn as running in `session`; `None` when one already runs there.
    pub fn begin_turn(&self, session: &str) -> Option<TurnGuard> {
        let fresh = lock(&self.running).insert(session.to_string());
        fresh.then(|| TurnGuard { running: self.running.clone(), session: session.to_string() })
    }

    pub fn get(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).get(id).cloned()
    }

    /// Installs a runtime, returning the one it replaced (the caller shuts that down).
    pub fn insert(&self, rt: Arc<SessionRuntime>) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).insert(rt.session_id.clone(), rt)
    }

    pub fn remove(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).remove(id)
    }

    /// Stops the extensions of every session unused for `idle` and with no turn running
    /// (`SessionRuntime::stop_if_idle`); their next use starts them again.
    pub fn stop_idle(&self, idle: std::time::Duration) {
        let all: Vec<_> = lock(&self.runtimes).values().cloned().collect();
        for rt in all {
            if lock(&self.running).contains(&rt.session_id) {
                continue;
            }
            rt.stop_if_idle(idle);
        }
    }

    /// Shuts every session's extensions down, in parallel.
    pub fn shutdown_all(&self) {
        let all: Vec<_> = lock(&self.runtimes).drain().map(|(_, rt)| rt).collect();
        let hs: Vec<_> = all.into_iter().map(|rt| std::thread::spawn(move || rt.shutdown())).collect();
        for h in hs {
            let _ = h.join(); // wait: shutdown is bounded by each extension's shutdown ladder
        }
    }
}
