//! SIGTERM/SIGINT: a flag, and a pipe that wakes whoever sleeps until shutdown.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;

use crate::fd::{poll_fd, Ready};

static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe the shutdown handler writes a byte to (-1: none), so a thread can
/// sleep in `wait_shutdown` until a signal comes instead of looking at the flag by period.
static SHUTDOWN_PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static SHUTDOWN_PIPE_READ: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store and write(2): both async-signal-safe.
    SHUTDOWN.store(true, Ordering::SeqCst);
    let fd = SHUTDOWN_PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) of one byte from a static to a descriptor we opened and never
        // close; the end is non-blocking, so a full pipe (a byte is there already) is fine.
        unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    }
}

/// Installs SIGTERM/SIGINT handlers that set a flag (`shutdown_requested`) and wake
/// `wait_shutdown`.
pub fn install_shutdown_handler() {
    if SHUTDOWN_PIPE_READ.load(Ordering::SeqCst) < 0 {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
            SHUTDOWN_PIPE_WRITE.store(fds[1], Ordering::SeqCst);
            SHUTDOWN_PIPE_READ.store(fds[0], Ordering::SeqCst);
        }
    }
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only does an atomic store and
        // a write(2).
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

pub fn shutdown_requested() -> bool {
    SHUTDOWN.load(Ordering::SeqCst)
}

/// Sleeps until SIGTERM/SIGINT arrives (`install_shutdown_handler` first) or `timeout` passes
/// (`None`: no limit), without waking in between; true once shutdown was requested.
pub fn wait_shutdown(timeout: Option<std::time::Duration>) -> bool {
    let fd = SHUTDOWN_PIPE_READ.load(Ordering::SeqCst);
    if shutdown_requested() {
        return true;
    }
    if fd < 0 {
        // No pipe (out of descriptors at install): look at the flag now and then.
        thread::sleep(timeout.unwrap_or(std::time::Duration::from_secs(1)).min(std::time::Duration::from_secs(1)));
    } else {
        poll_fd(&fd, Ready::Read, timeout);
    }
    shutdown_requested()
}
