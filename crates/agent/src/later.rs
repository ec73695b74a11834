//! Work that follows a turn, off its path, in order: one long-lived `session-writer` thread
//! (started with its first job, asleep between jobs) runs what `run` queues — a turn's token
//! counts into its session's metadata. `flush` waits for what was queued (at shutdown).
//! Imports nothing of this crate, so every module may use it.

use crossbeam_channel::bounded;
use std::time::Duration;

pub type Job = Box<dyn FnOnce() + Send>;

/// The writer thread's queue, started with its first job.
fn writer() -> Option<&'static crossbeam_channel::Sender<Job>> {
    static WRITER: std::sync::OnceLock<Option<crossbeam_channel::Sender<Job>>> = std::sync::OnceLock::new();
    WRITER
        .get_or_init(|| {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            let spawned = std::thread::Builder::new().name("session-writer".into()).spawn(move || {
                // wait: jobs come after turns; asleep (no timer) in between, for the life of the process
                for job in rx {
                    job();
                }
            });
            match spawned {
                Ok(_) => Some(tx),
                Err(e) => {
                    log::warn!(
                        "agent: cannot start the session writer ({e}); token counts are saved on the turn's path"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `job` on the session writer thread, after the jobs queued before it; at once on this
/// thread when there is no writer.
pub fn run(job: Job) {
    match writer() {
        Some(tx) => {
            if let Err(e) = tx.send(job) {
                (e.into_inner())();
            }
        }
        None => job(),
    }
}

/// Waits up to `limit` for the session writer to finish what was queued (at shutdown, so the
/// last turns' token counts are saved); false when it did not in time.
pub fn flush(limit: Duration) -> bool {
    let (tx, rx) = bounded::<()>(1);
    run(Box::new(move || {
        let _ = tx.send(());
    }));
    rx.recv_timeout(limit).is_ok()
}
