//! The few OS calls std does not offer: signals and parent-death tracking for children, and
//! the file descriptor limit.
//!
//! This is the only module allowed `unsafe`; each block is one libc call with its
//! arguments checked above it. Unix only, like the rest of the process handling.
#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;

/// Sends SIGTERM to a child's whole process group (children are started as group leaders,
/// so `npx`'s grandchildren get it too).
pub fn terminate_group(pid: u32) -> io::Result<()> {
    signal_group(pid, libc::SIGTERM)
}

/// SIGKILL to the process group: the last rung of the shutdown ladder.
pub fn kill_group(pid: u32) -> io::Result<()> {
    signal_group(pid, libc::SIGKILL)
}

fn signal_group(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    if pid <= 1 {
        return Err(io::Error::other("refusing to signal pid <= 1"));
    }
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
    let rc = unsafe { libc::kill(-pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// True once the child `pid` has exited, WITHOUT reaping it: while it is an unreaped zombie
/// its pid (and so its process-group id) cannot be reused, so signalling the group stays safe.
pub fn exited_unreaped(pid: u32) -> bool {
    let pid: libc::id_t = pid;
    // SAFETY: waitid(2) writes only into `info`, a zeroed siginfo_t we own.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        // rc == -1: not our child any more (already reaped) — treat as exited.
        rc == -1 || info.si_pid() != 0
    }
}

static SHUTDOWN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SHUTDOWN.store(true, Ordering::SeqCst);
}

/// Installs SIGTERM/SIGINT handlers that set a flag; the server polls `shutdown_requested`.
pub fn install_shutdown_handler() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_signal` is an `extern "C" fn(c_int)` that only does an atomic store.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

pub fn shutdown_requested() -> bool {
    SHUTDOWN.load(Ordering::SeqCst)
}

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` as the leader of a new process group that receives SIGKILL if this server
/// dies, even by SIGKILL. Linux ties PR_SET_PDEATHSIG to the *thread* that forked, so every
/// spawn happens on one long-lived thread instead of the short-lived request threads.
pub fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    cmd.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (prctl, getppid, _exit, getrlimit, setrlimit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            // Give the child the descriptor limit we started with (an atomic load is
            // async-signal-safe; setrlimit is a plain system call).
            let original = ORIGINAL_FD_LIMIT.load(Ordering::SeqCst);
            if original != 0 {
                let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                    lim.rlim_cur = original as libc::rlim_t;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                }
            }
            Ok(())
        });
    }
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the spawner thread");
        Mutex::new(tx)
    });
    let (rtx, rrx) = mpsc::channel();
    tx.lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, rtx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    rrx.recv().map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// The soft descriptor limit before `raise_fd_limit` (0: not raised); children get it back,
/// as some programs still assume descriptors below 1024 (`select`).
static ORIGINAL_FD_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Raises the soft limit on open file descriptors to the hard limit (at most 2^20), as servers
/// that hold many connections do; returns the soft limit in force afterwards.
pub fn raise_fd_limit() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    let want = lim.rlim_max.min(1 << 20);
    if want > lim.rlim_cur {
        #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not on every Unix
        ORIGINAL_FD_LIMIT.store(lim.rlim_cur as u64, Ordering::SeqCst);
        let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max };
        // SAFETY: setrlimit reads one rlimit we own; raising the soft limit up to the hard one
        // needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = want;
        }
    }
    lim.rlim_cur as usize
}
