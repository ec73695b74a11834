//! Session agents: the live runtime of each session, keyed by session id, and the turn loop.

pub mod messages;
pub mod reply;

use crate::extensions::runtime::SessionRuntime;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Agents {
    runtimes: Mutex<HashMap<String, Arc<SessionRuntime>>>,
}

impl Agents {
    pub fn get(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        self.runtimes.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    /// Installs a runtime, returning the one it replaced (the caller shuts that down).
    pub fn insert(&self, rt: Arc<SessionRuntime>) -> Option<Arc<SessionRuntime>> {
        self.runtimes.lock().unwrap_or_else(|e| e.into_inner()).insert(rt.session_id.clone(), rt)
    }

    pub fn remove(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        self.runtimes.lock().unwrap_or_else(|e| e.into_inner()).remove(id)
    }

    /// Shuts every session's extensions down, in parallel.
    pub fn shutdown_all(&self) {
        let all: Vec<_> = self.runtimes.lock().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, rt)| rt).collect();
        let hs: Vec<_> = all.into_iter().map(|rt| std::thread::spawn(move || rt.shutdown())).collect();
        for h in hs {
            let _ = h.join();
        }
    }
}
