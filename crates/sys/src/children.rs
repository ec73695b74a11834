//! Children: spawning tied to this process (and contained under a reaper), signals to their
//! process groups, and the orphans a child leaves behind.

use gosling_util::lock;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;

use crate::fd::ORIGINAL_FD_LIMIT;

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
    /// killed anyway: just under the stop ladder's own rung (1.5 s by default), whose SIGKILL
    /// of the group comes after it, so a program that handles SIGTERM slowly on a loaded
    /// machine still ends as it means to (`trust_daemons`' SIGTERM daemon).
    const GRACE_MS: i64 = 1400;

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
            // The program may have ended before SIGCHLD was blocked above: its signal was then
            // discarded (ignored by default), so look once before the first wait, which would
            // otherwise sleep until gosling's stop ladder (a program that fails at once).
            let any = reap_all(main, &mut main_status);
            let ended_before = main_status.is_some() || !any;
            if !ended_before {
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

fn spawn(cmd: Command, contained: bool) -> io::Result<Child> {
    spawn_with(cmd, contained, |_| {})
}

/// `spawn`, with `confine` adding its own hook between the tie to this process and the
/// reaper's fork (`sandbox::spawn_confined`): the order matters, the reaper and everything
/// below it start inside the confinement.
pub(crate) fn spawn_with(mut cmd: Command, contained: bool, confine: impl FnOnce(&mut Command)) -> io::Result<Child> {
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
    confine(&mut cmd);
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
