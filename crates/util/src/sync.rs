//! The one way a mutex is locked.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking it over from a thread that panicked while holding it: a panic (a bug on
/// one request's thread) must not make every later request that needs the same map, queue or
/// buffer panic too. The one place that decides what a poisoned lock means.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
