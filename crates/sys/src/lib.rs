//! The few OS calls std does not offer: signals and parent-death tracking for children, the
//! file descriptor limit, non-blocking pipes and `poll`, non-dumpability, the child subreaper
//! and its orphans, and `openat2`-style path resolution that never leaves a directory.
//!
//! This is the only module allowed `unsafe`; each block is one libc call with its
//! arguments checked above it. Unix only, like the rest of the process handling.
#![allow(unsafe_code)]

use gosling_util::lock;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Like `spawn_tied`, but `cmd` runs under a reaper of its own: the process we get back (its
/// pid, its process group, its exit status) is a fork of ours that is a child subreaper for
/// everything `cmd` starts. A descendant whose parent dies — a daemon that double-forks,
/// calls `setsid` and clears its environment — becomes the reaper's child, not ours, and
/// whenever `cmd` exits or the reaper gets SIGTERM/SIGINT/SIGHUP (the stop ladder's group
/// signal; gosling dying, through the parent-death signal) the reaper kills its whole subtree
/// and reaps it before it exits itself, with `cmd`'s status. What it cannot reach (a
/// descendant that is still a child of a live process outside its subtree) stays the
/// caller's to end, as before (`end_orphans`).
pub fn spawn_contained(cmd: Command) -> io::Result<Child> {
    spawn(cmd, true)
}

/// The reaper's fork, as the last of the child's hooks (`spawn_tied`'s run first, in the
/// process that becomes the reaper).
fn add_reaper(cmd: &mut Command) {
    // SAFETY: runs in the forked child after `spawn_tied`'s own hook and calls only
    // async-signal-safe functions (fork, prctl, getpid/getppid, sigprocmask, sigwaitinfo, sigtimedwait,
    // waitpid, kill, open/read/close, clock_gettime, nanosleep, signal, _exit) and the raw
    // close_range system call; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let parent = libc::getppid();
            if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let reaper = libc::getpid();
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    // The program itself: dies with its reaper (which ends it anyway).
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    if libc::getppid() != reaper {
                        libc::_exit(1);
                    }
                    Ok(())
                }
                main => reaper::run(main, parent),
            }
        });
    }
}

/// The reaper's side of `spawn_contained`: runs in a forked copy of this process between fork
/// and exec, so it may use nothing that allocates or takes a lock.
mod reaper {
    use std::io;

    /// How long after a stop signal the program may take to exit before its subtree is
    /// killed anyway (the stop ladder's SIGKILL of the group comes later than this).
    const GRACE_MS: i64 = 700;

    fn now_ms() -> i64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes only into `ts`.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }

    /// Reaps every exited child; records `main`'s status. False once there is no child left.
    fn reap_all(main: libc::pid_t, main_status: &mut Option<libc::c_int>) -> bool {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only `status`.
            let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if rc == main {
                *main_status = Some(status);
            } else if rc == 0 {
                return true;
            } else if rc < 0 {
                return false;
            }
        }
    }

    /// Sends `sig` to every current child (listed by the kernel in
    /// /proc/thread-self/children; the reaper has one thread). Their pids cannot be reused
    /// before we reap them. False when the list cannot be read.
    fn signal_children(sig: libc::c_int) -> bool {
        // SAFETY: open/read/close on a NUL-terminated literal and a stack buffer we own; kill
        // on pids that are our unreaped children.
        unsafe {
            let fd = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return false;
            }
            let mut buf = [0u8; 1024];
            let mut pid: libc::pid_t = 0;
            loop {
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                for &b in &buf[..n as usize] {
                    if b.is_ascii_digit() {
                        pid = pid.saturating_mul(10).saturating_add((b - b'0') as libc::pid_t);
                    } else {
                        if pid > 1 {
                            libc::kill(pid, sig);
                        }
                        pid = 0;
                    }
                }
            }
            if pid > 1 {
                libc::kill(pid, sig);
            }
            libc::close(fd);
            true
        }
    }

    fn sleep_ms(ms: i64) {
        let ts = libc::timespec { tv_sec: 0, tv_nsec: ms * 1_000_000 };
        // SAFETY: nanosleep reads `ts`; an early wake-up is harmless.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }

    /// Never returns: waits for `main` or a stop signal, then kills and reaps the whole subtree
    /// and exits as `main` did.
    pub fn run(main: libc::pid_t, parent: libc::pid_t) -> io::Result<()> {
        // SAFETY: see `spawn_contained`: system calls on memory we own, nothing allocated.
        unsafe {
            // The pipes and the spawn's error pipe belong to the program, not to us: gosling
            // must see EOF when the program closes them.
            if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
                for fd in 0..1024 {
                    libc::close(fd);
                }
            }
            // gosling dying (even by SIGKILL) ends the subtree too.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD] {
                libc::sigaddset(&mut set, sig);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            let mut main_status = None;
            let mut stop_at: Option<i64> = if libc::getppid() != parent { Some(now_ms()) } else { None };
            loop {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                // Asleep until a signal comes: SIGCHLD (the program or a descendant ended),
                // a stop signal, or gosling's death (the parent-death signal above); only the
                // grace period after a stop has a deadline. No timer ticks meanwhile.
                let sig = match stop_at {
                    // wait: every event that ends the wait is a signal in `set`
                    None => libc::sigwaitinfo(&set, &mut info),
                    Some(t) => {
                        let left = (t - now_ms()).max(0);
                        let wait = libc::timespec { tv_sec: left / 1000, tv_nsec: (left % 1000) * 1_000_000 };
                        libc::sigtimedwait(&set, &mut info, &wait)
                    }
                };
                let stop = matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGHUP) || libc::getppid() != parent;
                if stop && stop_at.is_none() && main_status.is_none() {
                    stop_at = Some(now_ms() + GRACE_MS);
                    libc::kill(main, libc::SIGTERM);
                }
                let any = reap_all(main, &mut main_status);
                if main_status.is_some() || !any || stop_at.is_some_and(|t| now_ms() >= t) {
                    break;
                }
            }
            // Kill every child, reap, and again: a killed child's own children become ours.
            for _ in 0..2000 {
                if !signal_children(libc::SIGKILL) && main_status.is_none() {
                    // No list of children (no /proc): the program at least; what it left
                    // behind is gosling's to end (`end_orphans`).
                    libc::kill(main, libc::SIGKILL);
                }
                if !reap_all(main, &mut main_status) {
                    break;
                }
                sleep_ms(2);
            }
            match main_status {
                Some(st) if libc::WIFEXITED(st) => libc::_exit(libc::WEXITSTATUS(st)),
                Some(st) if libc::WIFSIGNALED(st) => {
                    // Exit as the program did: by its signal.
                    let sig = libc::WTERMSIG(st);
                    libc::signal(sig, libc::SIG_DFL);
                    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                    libc::kill(libc::getpid(), sig);
                    libc::_exit(128 + sig)
                }
                _ => libc::_exit(128 + libc::SIGKILL),
            }
        }
    }
}

/// Spawns `cmd` as the leader of a new process group that receives SIGKILL if this server
/// dies, even by SIGKILL. Linux ties PR_SET_PDEATHSIG to the *thread* that forked, so every
/// spawn happens on one long-lived thread instead of the short-lived request threads.
pub fn spawn_tied(cmd: Command) -> io::Result<Child> {
    spawn(cmd, false)
}

fn spawn(mut cmd: Command, contained: bool) -> io::Result<Child> {
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
    if contained {
        add_reaper(&mut cmd);
    }
    // The spawner starts with the first spawn; without a thread for it (a resource shortage)
    // this spawn fails and the next one tries again. Two first spawns at once may both start
    // one: the loser's sender is dropped, so its thread ends at once.
    if SPAWNER.get().is_none() {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new().name("spawner".into()).spawn(move || {
            // wait: the spawner's queue, for the life of the process
            for (mut cmd, reply) in rx {
                // Registered under the same lock the orphan reaper scans with, so a child
                // that exits at once is never taken for an orphan and reaped behind
                // `Child::wait`'s back.
                let mut live = live_children();
                let spawned = cmd.spawn();
                if let Ok(child) = &spawned {
                    live.insert(child.id());
                }
                drop(live);
                let _ = reply.send(spawned);
            }
        })?;
        let _ = SPAWNER.set(Mutex::new(tx));
    }
    let tx = SPAWNER.get().ok_or_else(|| io::Error::other("spawner thread is gone"))?;
    let (rtx, rrx) = mpsc::channel();
    lock(tx).send((cmd, rtx)).map_err(|_| io::Error::other("spawner thread is gone"))?;
    // wait: the spawner answers right after fork/exec, or drops the reply if it dies
    rrx.recv().map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Puts a pipe end we own into non-blocking mode (reads and writes return `WouldBlock` instead
/// of waiting); the other end, the child's, keeps its own mode.
pub fn set_nonblocking(fd: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller owns (borrowed above), integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Shuts down the sending side of a socket we hold (a FIN after what was written); reading
/// goes on. For a socket whose owner only lends us its descriptor (an upgraded connection).
pub fn shutdown_write(fd: std::os::fd::RawFd) -> io::Result<()> {
    // SAFETY: shutdown(2) on a descriptor the caller holds open; integer arguments only.
    if unsafe { libc::shutdown(fd, libc::SHUT_WR) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One directory watched by the kernel (inotify): what changed in it, told by name, waited
/// for with a deadline. One watch per instance, whatever the number of files followed.
pub struct DirWatch {
    fd: std::fs::File,
    wd: libc::c_int,
}

/// What a `DirWatch` saw.
#[derive(Debug, Default)]
pub struct DirChanges {
    /// Names of the entries written, created or renamed into the directory.
    pub names: Vec<String>,
    /// The kernel's queue overflowed: anything may have changed.
    pub overflow: bool,
    /// The watch ended (`stop`, or the directory is gone): nothing more will be told.
    pub ended: bool,
}

impl DirWatch {
    /// Watches `dir` (not followed if it is a link) for entries written, created, renamed in.
    pub fn new(dir: &std::path::Path) -> io::Result<DirWatch> {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a descriptor just opened, owned by nothing else.
        let fd = unsafe { std::fs::File::from_raw_fd(fd) };
        let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW;
        // SAFETY: the descriptor is an inotify instance we own; path is a NUL-terminated string.
        let wd = unsafe { libc::inotify_add_watch(std::os::fd::AsRawFd::as_raw_fd(&fd), path.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(DirWatch { fd, wd })
    }

    /// What changed, waiting until something does, at most `timeout` (an empty answer then).
    pub fn changes(&self, timeout: std::time::Duration) -> io::Result<DirChanges> {
        use std::io::Read;
        let mut out = DirChanges::default();
        if !poll_fd(&self.fd, Ready::Read, Some(timeout)) {
            return Ok(out);
        }
        let mut buf = vec![0u8; 64 * 1024];
        let n = match (&self.fd).read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {
                return Ok(out)
            }
            Err(e) => return Err(e),
        };
        // struct inotify_event: wd i32, mask u32, cookie u32, len u32, then len bytes of name.
        let mut at = 0;
        while at + 16 <= n {
            let word = |i: usize| u32::from_ne_bytes([buf[at + i], buf[at + i + 1], buf[at + i + 2], buf[at + i + 3]]);
            let (mask, len) = (word(4), word(12) as usize);
            let name = &buf[(at + 16).min(n)..(at + 16 + len).min(n)];
            let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
            if mask & libc::IN_Q_OVERFLOW != 0 {
                out.overflow = true;
            }
            if mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_UNMOUNT) != 0 {
                out.ended = true;
            }
            if !name.is_empty() {
                out.names.push(String::from_utf8_lossy(name).into_owned());
            }
            at += 16 + len;
        }
        Ok(out)
    }

    /// Ends the watch: a thread in `wait` wakes and is told `ended`.
    pub fn stop(&self) {
        // SAFETY: removes the one watch this instance added; an error (already gone) is harmless.
        unsafe { libc::inotify_rm_watch(std::os::fd::AsRawFd::as_raw_fd(&self.fd), self.wd) };
    }
}

/// What `poll_fd` waits for.
#[derive(Clone, Copy)]
pub enum Ready {
    /// Something to read, or the end (EOF, an error).
    Read,
    /// Room to write, or the end.
    Write,
}

/// Waits until `fd` is ready, at most `timeout` (`None`: until it is). True when ready (an
/// ended pipe counts as ready: the read or write that follows reports it), false on timeout
/// or a signal.
pub fn poll_fd(fd: &impl std::os::fd::AsRawFd, ready: Ready, timeout: Option<std::time::Duration>) -> bool {
    poll_fds([(fd.as_raw_fd(), ready)], timeout)[0]
}

/// `poll_fd` on several descriptors at once: which of them are ready.
pub fn poll_fds<const N: usize>(
    fds: [(std::os::fd::RawFd, Ready); N],
    timeout: Option<std::time::Duration>,
) -> [bool; N] {
    let mut polled = fds.map(|(fd, ready)| libc::pollfd {
        fd,
        events: match ready {
            Ready::Read => libc::POLLIN,
            Ready::Write => libc::POLLOUT,
        },
        revents: 0,
    });
    // Rounded up, so a short wait does not become a busy loop.
    let ms = timeout.map_or(-1, |t| libc::c_int::try_from(t.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX));
    // SAFETY: poll(2) reads and writes the N pollfds of the array we own, and N is its length.
    let n = unsafe { libc::poll(polled.as_mut_ptr(), N as libc::nfds_t, ms) };
    polled.map(|p| n > 0 && p.revents != 0)
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

/// Makes this process non-dumpable: other processes of the same user can no longer read its
/// `/proc/<pid>/environ`, `mem` or `maps`, nor ptrace it, and it leaves no core dump. Children
/// are unaffected (exec restores dumpability), so a child cannot read the server's secrets.
pub fn make_non_dumpable() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Children spawned by `spawn_tied` and not yet reaped by their owner.
fn live_children() -> std::sync::MutexGuard<'static, std::collections::HashSet<u32>> {
    static LIVE: OnceLock<Mutex<std::collections::HashSet<u32>>> = OnceLock::new();
    lock(LIVE.get_or_init(Default::default))
}

/// Called after a `spawn_tied` child was reaped (`Child::wait`): its pid is free again.
pub fn forget_child(pid: u32) {
    live_children().remove(&pid);
}

/// Makes this process a child subreaper: a descendant whose parent dies (a daemon that forked
/// and called `setsid`, out of the extension's process group) becomes our child instead of
/// init's, so `end_orphans` can still find and end it. Starts a thread that reaps orphans
/// that exit on their own, so none stays a zombie; it wakes only on SIGCHLD. Call it before
/// any other thread starts (a thread started earlier would not block SIGCHLD, and a SIGCHLD
/// it took would leave an orphan a zombie until the next one).
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SIGCHLD is blocked in this thread, and so in every thread started after it (called
    // before any other starts), and taken by the orphan reaper with sigwaitinfo: it sleeps
    // until a child ends instead of looking by period. Children start with an empty mask
    // (std resets it between fork and exec).
    let set = sigchld_set();
    // SAFETY: pthread_sigmask reads the set we own.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    thread::Builder::new().name("reaper".into()).spawn(move || loop {
        let mut info = zeroed_siginfo();
        // wait: SIGCHLD comes whenever a child of ours ends; nothing else is waited for
        // SAFETY: sigwaitinfo reads the set and writes `info`, both ours.
        unsafe { libc::sigwaitinfo(&set, &mut info) };
        for o in orphans() {
            if o.zombie {
                reap(o.pid);
            }
        }
    })?;
    Ok(())
}

fn sigchld_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset write into a sigset_t we own (all-zero is a valid start).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

fn zeroed_siginfo() -> libc::siginfo_t {
    // SAFETY: siginfo_t is plain data; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// A child of ours that `spawn_tied` did not start: an extension's descendant reparented to us.
#[derive(Debug, Clone, Copy)]
pub struct Orphan {
    pub pid: u32,
    pub zombie: bool,
}

/// Our children that are not live `spawn_tied` children. Their pids cannot be reused until we
/// reap them, so signalling them is safe.
pub fn orphans() -> Vec<Orphan> {
    let me = std::process::id();
    let live = live_children();
    let mut out = Vec::new();
    for (pid, ppid, state) in processes() {
        if ppid == me && !live.contains(&pid) {
            out.push(Orphan { pid, zombie: state == 'Z' });
        }
    }
    out
}

/// Every process as (pid, parent pid, state), from /proc.
pub fn processes() -> Vec<(u32, u32, char)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The command name may hold spaces and parentheses: the fields start after the last ')'.
        let mut fields = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("").split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if let Some(ppid) = fields.next().and_then(|p| p.parse().ok()) {
            out.push((pid, ppid, state));
        }
    }
    out
}

/// The descendants of `pid` now (children, their children, ...).
pub fn descendants(pid: u32) -> Vec<u32> {
    let all = processes();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, ppid, _) in &all {
            if ppid == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// True when `pid`'s environment holds exactly `marker` (`NAME=value`). Unreadable (gone, or
/// made non-dumpable) is false.
pub fn environ_has(pid: u32, marker: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) => env.split(|b| *b == 0).any(|v| v == marker.as_bytes()),
        Err(_) => false,
    }
}

/// SIGKILLs the orphans `select` picks, then reaps them (waiting up to a second each).
/// Returns how many were ended.
pub fn end_orphans(mut select: impl FnMut(u32) -> bool) -> usize {
    let chosen: Vec<u32> = orphans().into_iter().filter(|o| select(o.pid)).map(|o| o.pid).collect();
    for &pid in &chosen {
        // SAFETY: kill(2) on a child of ours that we have not reaped (its pid is not reusable).
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    for &pid in &chosen {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !reap(pid) && std::time::Instant::now() < deadline {
            thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    chosen.len()
}

/// Reaps `pid` if it has exited; true when it is gone.
fn reap(pid: u32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on one pid with WNOHANG writes only `status`, which we own.
    let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    rc == pid as libc::pid_t || rc == -1
}

/// Our effective user id (to check who owns the state and config dirs).
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// Opens `rel` (relative; `.` for `dir` itself) beneath the directory `dir`, never leaving it:
/// `openat2` with `RESOLVE_BENEATH` (links are followed only while they stay inside; `..` past
/// `dir`, absolute links and `/proc` magic links are refused with EXDEV/ELOOP), resolved by the
/// kernel in one step, so nothing can be swapped between a check and the use. Where `openat2`
/// is missing (Linux before 5.6, or filtered), walks one component at a time from `dir` with
/// `O_NOFOLLOW` (stricter: no links and no `..` at all).
pub fn open_beneath(
    dir: &std::fs::File,
    rel: &std::path::Path,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let c = path_cstring(rel)?;
    let mut how: libc::open_how = unsafe_zeroed_open_how();
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 { u64::from(mode) } else { 0 };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 reads the NUL-terminated path and `how` (both alive for the call) and
    // returns a new descriptor we then own, or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a fresh descriptor owned by nobody else.
        return Ok(unsafe { std::fs::File::from_raw_fd(fd as libc::c_int) });
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EPERM) => walk_beneath(dir, rel, flags, mode),
        _ => Err(err),
    }
}

fn unsafe_zeroed_open_how() -> libc::open_how {
    // SAFETY: open_how is plain integers; all-zero is its documented default.
    unsafe { std::mem::zeroed() }
}

fn path_cstring(p: &std::path::Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = if p.as_os_str().is_empty() { b".".as_slice() } else { p.as_os_str().as_bytes() };
    std::ffi::CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// `openat` one plain component relative to `dir`, never following a link there.
fn openat_nofollow(
    dir: &std::fs::File,
    name: &std::ffi::OsStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let c = path_cstring(std::path::Path::new(name))?;
    // SAFETY: openat reads the NUL-terminated name; returns a new descriptor or -1.
    let fd = unsafe {
        libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

fn walk_beneath(
    dir: &std::fs::File,
    rel: &std::path::Path,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<std::fs::File> {
    use std::path::Component;
    let names: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::from_raw_os_error(libc::EXDEV)),
        })
        .collect::<io::Result<_>>()?;
    let Some((last, parents)) = names.split_last() else {
        return openat_nofollow(dir, std::ffi::OsStr::new("."), flags, mode);
    };
    let mut cur = dir.try_clone()?;
    for name in parents {
        cur = openat_nofollow(&cur, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    }
    openat_nofollow(&cur, last, flags, mode)
}

/// Creates the directory `rel` and its missing parents beneath `dir` (mode 0755 before umask),
/// each one relative to a descriptor of its parent opened by `open_beneath`.
pub fn mkdirs_beneath(dir: &std::fs::File, rel: &std::path::Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut prefix = std::path::PathBuf::new();
    for comp in rel.components() {
        let parent = open_beneath(dir, &prefix, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        prefix.push(comp);
        let std::path::Component::Normal(name) = comp else { continue };
        let c = path_cstring(std::path::Path::new(name))?;
        // SAFETY: mkdirat reads the NUL-terminated name; it never follows a link at it.
        if unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), 0o755) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
    }
    open_beneath(dir, rel, libc::O_RDONLY | libc::O_DIRECTORY, 0).map(|_| ())
}

/// Removes the file `rel` beneath `dir` (its parent is opened with `open_beneath`).
pub fn unlink_beneath(dir: &std::fs::File, rel: &std::path::Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let name = rel.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let parent =
        open_beneath(dir, rel.parent().unwrap_or(std::path::Path::new("")), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let c = path_cstring(std::path::Path::new(name))?;
    // SAFETY: unlinkat reads the NUL-terminated name relative to a descriptor we own.
    if unsafe { libc::unlinkat(parent.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{poll_fd, poll_fds, set_nonblocking, DirWatch, Ready};
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn poll_tells_which_descriptor_is_ready_and_times_out() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (c, _d) = UnixStream::pair().unwrap();
        let short = Some(Duration::from_millis(5));
        assert!(!poll_fd(&b, Ready::Read, short), "nothing written yet");
        assert!(poll_fd(&c, Ready::Write, short), "an empty socket has room");
        a.write_all(b"x").unwrap();
        assert_eq!(poll_fds([(c.as_raw_fd(), Ready::Read), (b.as_raw_fd(), Ready::Read)], short), [false, true]);
        drop(a);
        let mut one = [0u8; 1];
        (&b).read_exact(&mut one).unwrap();
        assert!(poll_fd(&b, Ready::Read, None), "the end counts as ready");
    }

    #[test]
    fn a_nonblocking_end_says_would_block() {
        let (_a, mut b) = UnixStream::pair().unwrap();
        set_nonblocking(&b).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    }

    #[test]
    fn a_dir_watch_tells_names_and_its_end() {
        let dir = std::env::temp_dir().join(format!("gosling-dirwatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let w = DirWatch::new(&dir).unwrap();
        let short = Duration::from_millis(5);
        assert!(w.changes(short).unwrap().names.is_empty(), "nothing yet");
        std::fs::write(dir.join("a.jsonl"), b"x\n").unwrap();
        let c = w.changes(Duration::from_secs(5)).unwrap();
        assert!(c.names.iter().any(|n| n == "a.jsonl"), "{c:?}");
        w.stop();
        let mut ended = false;
        for _ in 0..10 {
            ended |= w.changes(Duration::from_secs(5)).unwrap().ended;
            if ended {
                break;
            }
        }
        assert!(ended, "stop wakes the waiter");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(DirWatch::new(&dir).is_err(), "a missing directory is refused");
    }
}
