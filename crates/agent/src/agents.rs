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

    /// Every live session's runtime.
    pub fn all(&self) -> Vec<Arc<SessionRuntime>> {
        lock(&self.runtimes).values().cloned().collect()
    }

    /// Installs a runtime, returning the one it replaced (the caller shuts that down).
    pub fn insert(&self, rt: Arc<SessionRuntime>) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).insert(rt.session_id.clone(), rt)
    }

    pub fn remove(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).remove(id)
    }

    /// Stops the extensions of every session unused for `idle` and with no turn running
    /// (`SessionRuntime::stop_if_idle`); their next use starts them again. Returns when the
    /// next may be due (`None`: no extension runs).
    pub fn stop_idle(&self, idle: std::time::Duration) -> Option<std::time::Instant> {
        let all: Vec<_> = lock(&self.runtimes).values().cloned().collect();
        let mut next: Option<std::time::Instant> = None;
        for rt in all {
            let at = if lock(&self.running).contains(&rt.session_id) {
                Some(std::time::Instant::now() + idle)
            } else {
                rt.stop_if_idle(idle);
                rt.idle_at(idle)
            };
            next = match (next, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        next
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

/// A turn's cancel that a front end registered (`Host::on_cancel`): ACP's prompts, which run
/// outside the session's bus, so that any front end can stop them.
type CancelHook = Box<dyn Fn() + Send + Sync>;

/// One registered cancel: its key (for the guard), its request id, the hook.
type Registered = (u64, String, Arc<CancelHook>);

/// The registered cancels, by session, each with its request id.
#[derive(Default)]
pub struct Cancels {
    hooks: Mutex<HashMap<String, Vec<Registered>>>,
    next: std::sync::atomic::AtomicU64,
}

/// Keeps a cancel registered; dropped when the turn ends.
pub struct CancelGuard {
    cancels: std::sync::Weak<Cancels>,
    session: String,
    key: u64,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(c) = self.cancels.upgrade() {
            let mut hooks = lock(&c.hooks);
            if let Some(list) = hooks.get_mut(&self.session) {
                list.retain(|(k, _, _)| *k != self.key);
                if list.is_empty() {
                    hooks.remove(&self.session);
                }
            }
        }
    }
}

impl Cancels {
    /// Registers `hook` as the cancel of request `request_id` in `session`, until the guard drops.
    pub fn register(self: &Arc<Self>, session: &str, request_id: &str, hook: CancelHook) -> CancelGuard {
        let key = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = (key, request_id.to_string(), Arc::new(hook));
        lock(&self.hooks).entry(session.to_string()).or_default().push(entry);
        CancelGuard { cancels: Arc::downgrade(self), session: session.to_string(), key }
    }

    /// Runs the cancels of `session` (only `request_id`'s when one is registered under it);
    /// how many ran.
    pub fn cancel(&self, session: &str, request_id: Option<&str>) -> usize {
        let hooks: Vec<Arc<CancelHook>> = {
            let all = lock(&self.hooks);
            let list = all.get(session).map(Vec::as_slice).unwrap_or_default();
            let exact: Vec<_> = list.iter().filter(|(_, r, _)| Some(r.as_str()) == request_id).collect();
            let chosen = if exact.is_empty() { list.iter().collect() } else { exact };
            chosen.into_iter().map(|(_, _, h)| h.clone()).collect()
        };
        // Run outside the lock: a hook may take locks of its own.
        hooks.iter().for_each(|h| h());
        hooks.len()
    }

    /// Whether `request_id` is registered in `session`.
    pub fn has(&self, session: &str, request_id: &str) -> bool {
        lock(&self.hooks).get(session).is_some_and(|l| l.iter().any(|(_, r, _)| r == request_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_cancel_runs_by_its_request_id_or_all_of_the_session_and_goes_with_its_guard() {
        let cancels = Arc::new(Cancels::default());
        let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let hook = |n: &Arc<AtomicUsize>| -> CancelHook {
            let n = n.clone();
            Box::new(move || {
                n.fetch_add(1, Ordering::SeqCst);
            })
        };
        let ga = cancels.register("s", "acp-a", hook(&a));
        let _gb = cancels.register("s", "acp-b", hook(&b));
        assert_eq!(cancels.cancel("s", Some("acp-a")), 1);
        assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 0), "only the one named");
        assert_eq!(cancels.cancel("s", Some("unknown")), 2, "a name of none: every turn of the session");
        assert_eq!(cancels.cancel("other", None), 0);
        drop(ga);
        assert!(!cancels.has("s", "acp-a") && cancels.has("s", "acp-b"));
        assert_eq!(cancels.cancel("s", None), 1);
    }
}
