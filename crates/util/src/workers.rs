//! Kept threads for work that comes often and briefly: a turn, a model call, an ACP request.
//! Starting a thread for each costs a `clone`, a stack mapped and unmapped, and the thread's
//! set-up on every turn; a `Workers` hands the job to one of its threads that is waiting for
//! work, and starts a new one (named after the pool) only when none is free. No bound on how
//! many run at once beyond what the callers allow (each caller is bounded: a turn per session,
//! requests per connection); a thread with nothing to do for `keep` ends, so nothing wakes by
//! period (one wake-up, `keep` after its last job, when it ends) and a server left alone holds
//! none of them.
//!
//! Does not queue: a job starts at once on a free or a new thread, as `thread::spawn` would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sync::lock;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Where a waiting thread's next job is put. A mutex and a condition variable rather than a
/// channel: the wait is a plain futex wait, without a channel's spinning (`sched_yield`)
/// before it sleeps.
#[derive(Default)]
struct Slot {
    job: Mutex<Option<Job>>,
    put: Condvar,
}

/// A pool of kept threads, one name for all of them (`static POOL: Workers = Workers::new(..)`).
pub struct Workers {
    name: &'static str,
    keep: Duration,
    /// The threads waiting for a job: their number and their slot.
    idle: Mutex<Vec<(u64, Arc<Slot>)>>,
    next: AtomicU64,
}

impl Workers {
    /// A pool whose threads are named `name` and end after `keep` without a job.
    pub const fn new(name: &'static str, keep: Duration) -> Workers {
        Workers { name, keep, idle: Mutex::new(Vec::new()), next: AtomicU64::new(0) }
    }

    /// Runs `job` on a waiting thread of the pool, or on a new one; the error of
    /// `thread::Builder::spawn` when none is waiting and none can start.
    pub fn run(&'static self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        self.run_boxed(Box::new(job))
    }

    /// `run`, once for every kind of job (the thread's start is not copied per caller).
    fn run_boxed(&'static self, job: Job) -> std::io::Result<()> {
        // A thread leaves the list itself before it ends (`work`): one on it takes the job.
        if let Some((_, slot)) = lock(&self.idle).pop() {
            *lock(&slot.job) = Some(job);
            slot.put.notify_one();
            return Ok(());
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        std::thread::Builder::new().name(self.name.into()).spawn(move || self.work(id, job)).map(|_| ())
    }

    /// A thread of the pool: its first job, then each job put in its slot, until `keep` passes
    /// without one.
    fn work(&'static self, id: u64, first: Job) {
        let slot = Arc::new(Slot::default());
        let mut job = first;
        loop {
            job();
            lock(&self.idle).push((id, slot.clone()));
            match self.next_job(id, &slot) {
                Some(next) => job = next,
                None => return,
            }
        }
    }

    /// The next job put in `slot`; None after `keep` without one (the thread then off the list).
    fn next_job(&self, id: u64, slot: &Slot) -> Option<Job> {
        let mut job = lock(&slot.job);
        let mut until = Instant::now() + self.keep;
        loop {
            if let Some(next) = job.take() {
                return Some(next);
            }
            let now = Instant::now();
            if now >= until {
                drop(job);
                let mut idle = lock(&self.idle);
                if let Some(at) = idle.iter().position(|(i, _)| *i == id) {
                    idle.remove(at);
                    return None;
                }
                drop(idle);
                // Taken off the list by `run` meanwhile: its job is being put in the slot.
                job = lock(&slot.job);
                until = Instant::now() + self.keep;
                continue;
            }
            job = slot.put.wait_timeout(job, until - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// How many threads of the pool are waiting for a job.
    pub fn idle(&self) -> usize {
        lock(&self.idle).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    static POOL: Workers = Workers::new("test-worker", Duration::from_secs(2));

    /// Polls `f` until it holds or 10 s pass.
    fn soon(f: impl Fn() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// A job runs on a thread named after the pool; the next one, started after the first
    /// ended, runs on the same thread; two at once run on two threads; a thread with nothing
    /// to do for `keep` ends.
    #[test]
    fn jobs_reuse_a_waiting_thread_and_idle_threads_end() {
        let (tx, rx) = channel();
        let me = || {
            let t = std::thread::current();
            (t.name().map(str::to_string), t.id())
        };
        let t = tx.clone();
        POOL.run(move || t.send(me()).unwrap()).unwrap();
        let (name, first) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(name.as_deref(), Some("test-worker"));
        assert!(soon(|| POOL.idle() == 1), "the thread waits for the next job");
        let t = tx.clone();
        POOL.run(move || t.send(me()).unwrap()).unwrap();
        let (_, second) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(first, second, "the waiting thread ran the second job");
        // Two at once: each holds its thread until both have started.
        let (started_tx, started_rx) = channel::<()>();
        let (go_tx, go_rx) = channel::<()>();
        let go = std::sync::Arc::new(Mutex::new(go_rx));
        assert!(soon(|| POOL.idle() == 1));
        for _ in 0..2 {
            let (s, g, t) = (started_tx.clone(), go.clone(), tx.clone());
            POOL.run(move || {
                s.send(()).unwrap();
                t.send(me()).unwrap();
                let _ = lock(&g).recv_timeout(Duration::from_secs(5));
            })
            .unwrap();
        }
        for _ in 0..2 {
            started_rx.recv_timeout(Duration::from_secs(5)).expect("both jobs started at once");
        }
        let (a, b) =
            (rx.recv_timeout(Duration::from_secs(5)).unwrap(), rx.recv_timeout(Duration::from_secs(5)).unwrap());
        assert_ne!(a.1, b.1, "two jobs at once, two threads");
        drop(go_tx);
        assert!(soon(|| POOL.idle() == 2), "both wait for a job");
        assert!(soon(|| POOL.idle() == 0), "threads with nothing to do for `keep` end");
    }
}
