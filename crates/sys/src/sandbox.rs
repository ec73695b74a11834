//! Confinement of a child by the kernel: what it may read, write and reach, and how much it
//! may take. Applied between fork and exec (a `pre_exec` hook, before the reaper's fork, so the
//! reaper and everything below it are inside):
//!
//! 1. a user and a network namespace of its own (`unshare`), the outside uid and gid mapped to
//!    themselves: nothing of ours can be ptraced or have its `/proc/<pid>/environ` read from
//!    inside, even by a root child, and the only network is its own loopback (`lo`, brought up);
//! 2. with approved hosts, a listening socket on `127.0.0.1:PORT` inside that namespace, handed
//!    to us over a socket pair (`SCM_RIGHTS`): gosling's egress proxy serves it;
//! 3. limits: processes (`RLIMIT_NPROC`, counted per user namespace since Linux 5.14), open
//!    files, and memory as `RLIMIT_DATA` (private writable memory: a runaway allocation stops,
//!    while V8's large reservations, which `RLIMIT_AS` would refuse, still start). The kernel
//!    never holds uid 0 to `RLIMIT_NPROC` (`copy_process` exempts the init namespace's root,
//!    in a user namespace too), so for a root gosling the process limit is a pids cgroup
//!    (`PidsCgroup`), joined first of all, before the user namespace;
//! 4. `PR_SET_NO_NEW_PRIVS` and a Landlock ruleset: read and run the granted read set, read and
//!    write the granted write set, nothing else of the file system; TCP connect only to the
//!    proxy port and no bind (ABI 4+); no signal or abstract-socket reach outside its own
//!    Landlock domain (ABI 6+).
//!
//! The ruleset is built here, in gosling, before the fork (Landlock rules are added through a
//! descriptor; only `landlock_restrict_self` has to run in the child), so the hook only makes
//! system calls on memory prepared before the fork and allocates nothing. Landlock is spoken
//! with raw system calls (three of them; README "Dependencies" says why no crate).
//! It does not confine what runs outside gosling's children, nor what an approved host does.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// Resource limits of one confined child and everything it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_DATA`: private writable memory per process, in bytes.
    pub memory_bytes: u64,
    /// `RLIMIT_NPROC`: processes (and threads) of the child's user namespace.
    pub processes: u64,
    /// `RLIMIT_NOFILE`: open descriptors per process.
    pub open_files: u64,
}

/// What the child may reach over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Its own loopback only.
    None,
    /// Its own loopback, where `127.0.0.1:port` is gosling's egress proxy (the listener comes
    /// back with the child).
    Proxy { port: u16 },
}

/// Everything the kernel holds a confined child to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Read and execute (directories: and list), recursively.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove, recursively.
    pub write: Vec<PathBuf>,
    pub limits: Limits,
    pub network: Network,
    /// A pids cgroup the child joins before anything else (`PidsCgroup::procs`): the process
    /// limit where `RLIMIT_NPROC` does not hold (uid 0).
    pub pids_cgroup: Option<PathBuf>,
}

/// What this kernel offers for confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The Landlock ABI version, 0 when Landlock is absent or disabled.
    pub landlock_abi: u32,
    /// Unprivileged user namespaces (with network namespaces inside them) can be created.
    pub user_namespaces: bool,
}

impl Probe {
    /// What is missing for a full confinement, in words; `None` when nothing is.
    pub fn missing(&self) -> Option<String> {
        let mut out = Vec::new();
        if self.landlock_abi == 0 {
            out.push("Landlock (Linux 5.13+, `lsm=landlock` on the kernel command line)".to_string());
        }
        if !self.user_namespaces {
            out.push("user namespaces (`user.max_user_namespaces` > 0, no AppArmor userns restriction)".to_string());
        }
        (!out.is_empty()).then(|| out.join(" and "))
    }

    /// One line for logs and `gosling probe`.
    pub fn describe(&self) -> String {
        match self.missing() {
            None => format!("Landlock ABI {}, user namespaces", self.landlock_abi),
            Some(m) => {
                format!("Landlock ABI {}, user namespaces {}; missing: {m}", self.landlock_abi, self.user_namespaces)
            }
        }
    }
}

/// What this kernel supports (Landlock's ABI version, user namespaces).
pub fn probe() -> Probe {
    Probe { landlock_abi: landlock_abi(), user_namespaces: user_namespaces() }
}

fn user_namespaces() -> bool {
    let num = |p: &str| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<i64>().ok());
    // Missing files mean the knob does not exist on this kernel (no restriction).
    num("/proc/sys/user/max_user_namespaces").is_some_and(|n| n > 0)
        && num("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|n| n != 0)
        && num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").is_none_or(|n| n == 0)
        && std::path::Path::new("/proc/self/ns/user").exists()
}

mod ll {
    //! Landlock's ABI (include/uapi/linux/landlock.h), the parts used here.
    pub const CREATE_RULESET_VERSION: u32 = 1;
    pub const RULE_PATH_BENEATH: libc::c_int = 1;
    pub const RULE_NET_PORT: libc::c_int = 2;

    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    /// ABI 2: REFER; ABI 3: TRUNCATE; ABI 5: IOCTL_DEV.
    pub const TRUNCATE: u64 = 1 << 14;
    pub const IOCTL_DEV: u64 = 1 << 15;
    /// The rights that apply to a file (not a directory).
    pub const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

    pub const BIND_TCP: u64 = 1 << 0;
    pub const CONNECT_TCP: u64 = 1 << 1;

    pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    pub const SCOPE_SIGNAL: u64 = 1 << 1;

    /// The file system rights each ABI version knows: 13 at ABI 1, REFER at 2, TRUNCATE at 3,
    /// IOCTL_DEV at 5.
    pub fn fs_rights(abi: u32) -> u64 {
        match abi {
            0 => 0,
            1 => (1 << 13) - 1,
            2 => (1 << 14) - 1,
            3 | 4 => (1 << 15) - 1,
            _ => (1 << 16) - 1,
        }
    }

    #[repr(C)]
    pub struct RulesetAttr {
        pub handled_access_fs: u64,
        pub handled_access_net: u64,
        pub scoped: u64,
    }

    #[repr(C, packed)]
    pub struct PathBeneathAttr {
        pub allowed_access: u64,
        pub parent_fd: i32,
    }

    #[repr(C)]
    pub struct NetPortAttr {
        pub allowed_access: u64,
        pub port: u64,
    }
}

fn landlock_abi() -> u32 {
    // SAFETY: landlock_create_ruleset with a null attr, size 0 and the VERSION flag only
    // returns the ABI version (or -1); it reads no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<ll::RulesetAttr>(),
            0usize,
            ll::CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).unwrap_or(0)
}

/// The size of a ruleset attribute as each ABI knows it (fs only; + net at 4; + scoped at 6).
fn attr_size(abi: u32) -> usize {
    match abi {
        0..=3 => 8,
        4 | 5 => 16,
        _ => 24,
    }
}

/// A Landlock ruleset built in gosling, ready for the child's `landlock_restrict_self`.
fn ruleset(c: &Confinement, abi: u32) -> io::Result<Option<OwnedFd>> {
    if abi == 0 {
        return Ok(None);
    }
    let fs = ll::fs_rights(abi);
    let attr = ll::RulesetAttr {
        handled_access_fs: fs,
        handled_access_net: if abi >= 4 { ll::BIND_TCP | ll::CONNECT_TCP } else { 0 },
        scoped: if abi >= 6 { ll::SCOPE_ABSTRACT_UNIX_SOCKET | ll::SCOPE_SIGNAL } else { 0 },
    };
    // SAFETY: `attr` is a live struct whose first `attr_size(abi)` bytes are the fields this
    // ABI knows; the call returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, &attr as *const _, attr_size(abi), 0u32) };
    if fd < 0 {
        return Err(io::Error::other(format!(
            "sandbox: cannot create a Landlock ruleset: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: the descriptor was just returned to us and nothing else owns it.
    let rules = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let read = ll::EXECUTE | ll::READ_FILE | ll::READ_DIR;
    for (paths, rights) in [(&c.read, read & fs), (&c.write, fs)] {
        for p in paths {
            add_path(&rules, p, rights)?;
        }
    }
    if abi >= 4 {
        if let Network::Proxy { port } = c.network {
            let rule = ll::NetPortAttr { allowed_access: ll::CONNECT_TCP, port: u64::from(port) };
            // SAFETY: a live rule struct of the NET_PORT type on our ruleset descriptor.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    rules.as_raw_fd(),
                    ll::RULE_NET_PORT,
                    &rule as *const _,
                    0u32,
                )
            };
            if rc != 0 {
                return Err(io::Error::other(format!(
                    "sandbox: cannot allow the proxy port {port}: {}",
                    io::Error::last_os_error()
                )));
            }
        }
    }
    Ok(Some(rules))
}

/// Allows `rights` beneath `path` (a file: only the rights that apply to files). A path that
/// does not exist is skipped (`/lib64` on some systems); any other failure is an error.
fn add_path(rules: &OwnedFd, path: &Path, rights: u64) -> io::Result<()> {
    let Ok(cpath) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return Err(io::Error::other(format!("sandbox: {} holds a NUL byte", path.display())));
    };
    // SAFETY: open with a NUL-terminated path we own; returns a new descriptor or -1.
    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::EACCES)) {
            return Ok(());
        }
        return Err(io::Error::other(format!("sandbox: cannot open {}: {e}", path.display())));
    }
    // SAFETY: just opened, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    let allowed = if is_dir { rights } else { rights & ll::FILE_RIGHTS };
    let rule = ll::PathBeneathAttr { allowed_access: allowed, parent_fd: fd.as_raw_fd() };
    // SAFETY: a live rule struct of the PATH_BENEATH type, both descriptors open.
    let rc = unsafe {
        libc::syscall(libc::SYS_landlock_add_rule, rules.as_raw_fd(), ll::RULE_PATH_BENEATH, &rule as *const _, 0u32)
    };
    if rc != 0 {
        return Err(io::Error::other(format!(
            "sandbox: cannot allow {}: {}",
            path.display(),
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Everything the child's hook needs, made before the fork.
pub(crate) struct Prepared {
    rules: Option<OwnedFd>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    limits: Limits,
    proxy_port: Option<u16>,
    /// Our end and the child's end of the socket pair the proxy listener comes back on.
    pair: Option<(OwnedFd, OwnedFd)>,
    parent: libc::pid_t,
    cgroup_procs: Option<CString>,
}

/// A confined child and, with `Network::Proxy`, the listener gosling's proxy serves.
pub struct Confined {
    pub child: Child,
    pub proxy: Option<std::net::TcpListener>,
    /// The Landlock ABI the ruleset was built for (0: none).
    pub landlock_abi: u32,
}

/// Spawns `cmd` like `spawn_contained`, confined by `c`: the namespaces, limits and ruleset
/// apply before the reaper forks, so the reaper and everything the program starts are inside.
/// Refuses (an error) when the kernel lacks user namespaces or Landlock: the caller decides
/// whether an unconfined start was consented to.
pub fn spawn_confined(cmd: Command, c: &Confinement) -> io::Result<Confined> {
    let p = probe();
    if let Some(missing) = p.missing() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("sandbox: this kernel lacks {missing}; the extension cannot be confined"),
        ));
    }
    let rules = ruleset(c, p.landlock_abi)?;
    // SAFETY: getuid/getgid/getpid take nothing and cannot fail.
    let (uid, gid, parent) = unsafe { (libc::getuid(), libc::getgid(), libc::getpid()) };
    let pair = match c.network {
        Network::None => None,
        Network::Proxy { .. } => Some(socket_pair()?),
    };
    let prepared =
        Prepared {
            rules,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            limits: c.limits,
            proxy_port: match c.network {
                Network::None => None,
                Network::Proxy { port } => Some(port),
            },
            pair,
            parent,
            cgroup_procs: match &c.pids_cgroup {
                Some(p) => Some(CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| {
                    io::Error::other(format!("sandbox: the cgroup path {} holds a NUL byte", p.display()))
                })?),
                None => None,
            },
        };
    let ours = prepared.pair.as_ref().map(|(ours, _)| ours.as_raw_fd());
    let child_end = prepared.pair.as_ref().map(|(_, theirs)| theirs.as_raw_fd());
    let mut hook_state = HookState {
        rules: prepared.rules.as_ref().map(|f| f.as_raw_fd()),
        uid_map: prepared.uid_map.clone(),
        gid_map: prepared.gid_map.clone(),
        limits: prepared.limits,
        proxy_port: prepared.proxy_port,
        child_end,
        parent: prepared.parent,
        cgroup_procs: prepared.cgroup_procs.clone(),
    };
    let child = crate::children::spawn_with(cmd, true, move |cmd| {
        // SAFETY: see `HookState::apply`: only async-signal-safe system calls on memory made
        // before the fork; nothing is allocated.
        unsafe { cmd.pre_exec(move || hook_state.apply()) };
    })?;
    let landlock_abi = if prepared.rules.is_some() { p.landlock_abi } else { 0 };
    // Our copies of the child's end and the ruleset close here (the child has its own).
    let Prepared { pair, .. } = prepared;
    let proxy = match (pair, ours) {
        (Some((ours_fd, theirs)), Some(_)) => {
            drop(theirs);
            Some(receive_listener(&ours_fd, Duration::from_secs(5))?)
        }
        _ => None,
    };
    Ok(Confined { child, proxy, landlock_abi })
}

fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into `fds`, which we own.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just returned to us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The listener the child sent over the pair, waiting at most `wait`.
fn receive_listener(ours: &OwnedFd, wait: Duration) -> io::Result<std::net::TcpListener> {
    if !crate::poll_fd(ours, crate::Ready::Read, Some(wait)) {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "sandbox: the child sent no proxy listener in time"));
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; all-zero is valid before the fields are set.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: recvmsg fills the buffers `msg` points to, all ours and live.
    let n = unsafe { libc::recvmsg(ours.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n <= 0 {
        return Err(io::Error::other("sandbox: the child closed the socket pair without a proxy listener"));
    }
    // SAFETY: CMSG_FIRSTHDR/CMSG_DATA walk the control buffer recvmsg filled.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("sandbox: the child's message carried no descriptor"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Ok(std::net::TcpListener::from(OwnedFd::from_raw_fd(fd)))
    }
}

/// The hook's copy of what it needs: raw descriptors (owned by `Prepared` in gosling) and
/// bytes made before the fork.
struct HookState {
    rules: Option<RawFd>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    limits: Limits,
    proxy_port: Option<u16>,
    child_end: Option<RawFd>,
    parent: libc::pid_t,
    cgroup_procs: Option<CString>,
}

fn os_err(step: &'static str) -> io::Error {
    // `io::Error::last_os_error` allocates nothing; the step is lost, but the errno says it.
    let _ = step;
    io::Error::last_os_error()
}

impl HookState {
    /// Runs in the forked child: namespaces, loopback, proxy listener, limits, Landlock.
    ///
    /// # Safety
    /// Only async-signal-safe system calls (unshare, open/write/close, socket/ioctl/bind/
    /// listen/sendmsg, setrlimit, prctl, getppid, syscall) on memory made before the fork.
    unsafe fn apply(&mut self) -> io::Result<()> {
        // Into the pids cgroup first, while we are still root of the initial user namespace
        // (`0`: the writing process), so the reaper and all below it count against its limit.
        if let Some(procs) = &self.cgroup_procs {
            write_file(procs, b"0")?;
        }
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
            return Err(os_err("unshare"));
        }
        // New credentials: keep the parent-death signal and check the parent is still there.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(os_err("pdeathsig"));
        }
        if libc::getppid() != self.parent {
            libc::_exit(1);
        }
        // The outside ids mapped to themselves. Our /proc entries belong to root while we are
        // non-dumpable (gosling is, and so is this fork until exec): an unprivileged child
        // cannot open them, and making it dumpable would open gosling's memory image to the
        // user's other processes until exec. Unmapped, its ids read as the overflow id
        // (65534) inside; its files are still its own (access is by the outside ids).
        match write_file(c"/proc/self/setgroups", b"deny") {
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
            r => {
                r?;
                write_file(c"/proc/self/uid_map", &self.uid_map)?;
                write_file(c"/proc/self/gid_map", &self.gid_map)?;
            }
        }
        loopback_up()?;
        if let (Some(port), Some(end)) = (self.proxy_port, self.child_end) {
            send_listener(port, end)?;
            libc::close(end);
        }
        let set = |res, v: u64| {
            let lim = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
            if libc::setrlimit(res, &lim) != 0 {
                return Err(os_err("setrlimit"));
            }
            Ok(())
        };
        set(libc::RLIMIT_DATA, self.limits.memory_bytes)?;
        set(libc::RLIMIT_NPROC, self.limits.processes)?;
        set(libc::RLIMIT_NOFILE, self.limits.open_files)?;
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(os_err("no_new_privs"));
        }
        if let Some(rules) = self.rules {
            if libc::syscall(libc::SYS_landlock_restrict_self, rules, 0u32) != 0 {
                return Err(os_err("landlock_restrict_self"));
            }
            libc::close(rules);
        }
        Ok(())
    }
}

/// Writes `data` to `path` (a /proc file) in one write.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(os_err("open"));
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let err = (n != data.len() as isize).then(|| os_err("write"));
    libc::close(fd);
    err.map_or(Ok(()), Err)
}

/// Brings `lo` up in the new network namespace.
unsafe fn loopback_up() -> io::Result<()> {
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return Err(os_err("socket"));
    }
    // struct ifreq: the name (16 bytes), then the flags (a short) in the union.
    let mut ifr = [0u8; 40];
    ifr[..2].copy_from_slice(b"lo");
    let flags = (libc::IFF_UP | libc::IFF_RUNNING) as i16;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    let rc = libc::ioctl(s, libc::SIOCSIFFLAGS as _, ifr.as_mut_ptr());
    let err = (rc != 0).then(|| os_err("ioctl"));
    libc::close(s);
    err.map_or(Ok(()), Err)
}

/// Listens on 127.0.0.1:`port` inside the namespace and sends the listener over `end`.
unsafe fn send_listener(port: u16, end: RawFd) -> io::Result<()> {
    let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 {
        return Err(os_err("socket"));
    }
    let mut addr: libc::sockaddr_in = std::mem::zeroed();
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    if libc::bind(s, (&addr as *const libc::sockaddr_in).cast(), len) != 0 || libc::listen(s, 128) != 0 {
        let e = os_err("bind");
        libc::close(s);
        return Err(e);
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 4];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), s);
    let sent = libc::sendmsg(end, &msg, libc::MSG_NOSIGNAL);
    let err = (sent != 1).then(|| os_err("sendmsg"));
    libc::close(s);
    err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_rights_grow_with_the_abi() {
        assert_eq!(ll::fs_rights(1).count_ones(), 13);
        assert_eq!(ll::fs_rights(2).count_ones(), 14);
        assert_eq!(ll::fs_rights(3).count_ones(), 15);
        assert_eq!(ll::fs_rights(5).count_ones(), 16);
        assert_eq!(ll::fs_rights(7), ll::fs_rights(5));
    }

    #[test]
    fn probe_describes_what_is_missing() {
        let none = Probe { landlock_abi: 0, user_namespaces: false };
        let m = none.missing().unwrap();
        assert!(m.contains("Landlock") && m.contains("user namespaces"), "{m}");
        assert_eq!(Probe { landlock_abi: 7, user_namespaces: true }.missing(), None);
    }
}

#[cfg(test)]
mod spawn_tests {
    use super::*;
    use std::process::Stdio;

    fn conf(read: &[&str], write: &[&str], network: Network) -> Confinement {
        Confinement {
            read: read.iter().map(PathBuf::from).collect(),
            write: write.iter().map(PathBuf::from).collect(),
            limits: Limits { memory_bytes: 1 << 30, processes: 64, open_files: 256 },
            network,
            pids_cgroup: None,
        }
    }

    fn run(c: &Confinement, script: &str) -> (String, Option<std::net::TcpListener>) {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script).stdout(Stdio::piped()).stderr(Stdio::piped());
        let Confined { child, proxy, .. } = spawn_confined(cmd, c).expect("spawn confined");
        let out = child.wait_with_output().unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr), proxy)
    }

    #[test]
    fn a_confined_shell_reads_the_system_and_writes_only_its_dir() {
        if probe().missing().is_some() {
            eprintln!("skipped: {}", probe().describe());
            return;
        }
        let dir = std::env::temp_dir().join(format!("gosling-sandbox-unit-{}", std::process::id()));
        let other = std::env::temp_dir().join(format!("gosling-sandbox-other-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("secret"), "s").unwrap();
        let c = conf(
            &["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"],
            &[dir.to_str().unwrap(), "/dev/null"],
            Network::None,
        );
        let script = format!(
            "cat /etc/hostname >/dev/null && echo read-etc; echo hi > {d}/x && echo wrote-own; cat {o}/secret || echo refused-other; echo x > {o}/y || echo refused-write; id -u; cat /proc/{pp}/environ >/dev/null 2>&1 || echo refused-environ; kill -0 {pp} || echo refused-signal",
            d = dir.display(),
            o = other.display(),
            pp = std::process::id()
        );
        let (out, _) = run(&c, &script);
        for want in ["read-etc", "wrote-own", "refused-other", "refused-write", "refused-environ", "refused-signal"] {
            assert!(out.contains(want), "{want} missing from:\n{out}");
        }
        assert!(!other.join("y").exists());
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&other);
    }

    /// A program that exits before its reaper blocked SIGCHLD is still seen to end (the signal
    /// was discarded: the reaper looks once before its first wait). Confined children hit the
    /// window often (46 spawns of `/bin/true` hung once before the fix).
    #[test]
    fn a_program_that_exits_at_once_is_reaped_confined_or_not() {
        let c = conf(&["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"], &["/dev/null"], Network::None);
        let confinable = probe().missing().is_none();
        for i in 0..150 {
            let child = if confinable && i % 2 == 0 {
                spawn_confined(Command::new("/bin/true"), &c).expect("spawn").child
            } else {
                crate::spawn_contained(Command::new("/bin/true")).expect("spawn")
            };
            let mut child = child;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "spawn {i}: the reaper never saw /bin/true end");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    #[test]
    fn the_proxy_listener_comes_back_from_the_childs_namespace() {
        if probe().missing().is_some() {
            return;
        }
        let c =
            conf(&["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/dev/null"], &[], Network::Proxy { port: 3128 });
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.arg("-c")
            .arg("import socket; s=socket.create_connection(('127.0.0.1',3128),timeout=5); s.sendall(b'ping'); print(s.recv(4).decode())")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let Confined { child, proxy, .. } = spawn_confined(cmd, &c).expect("spawn");
        let l = proxy.expect("a listener");
        let (mut conn, _) = l.accept().unwrap();
        use std::io::{Read, Write};
        let mut b = [0u8; 4];
        conn.read_exact(&mut b).unwrap();
        conn.write_all(b"pong").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pong", "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(&b, b"ping");
    }
}

#[cfg(test)]
mod pids_tests {
    use super::*;
    use std::process::Stdio;

    /// As root, `RLIMIT_NPROC` does not hold; the pids cgroup does: a confined shell that
    /// starts 40 sleepers in a cgroup of 16 gets EAGAIN past the limit, and the cgroup goes
    /// with the drop once its processes ended.
    #[test]
    fn a_pids_cgroup_holds_a_root_child_to_its_limit() {
        if probe().missing().is_some() || crate::euid() != 0 {
            eprintln!("skipped: needs root and a confinable kernel");
            return;
        }
        let cg = match crate::PidsCgroup::create(16) {
            Ok(cg) => cg,
            Err(e) => {
                eprintln!("skipped: no pids cgroup here ({e})");
                return;
            }
        };
        let c = Confinement {
            read: ["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"].iter().map(PathBuf::from).collect(),
            write: vec![PathBuf::from("/dev/null")],
            limits: Limits { memory_bytes: 1 << 30, processes: 1000, open_files: 256 },
            network: Network::None,
            pids_cgroup: Some(cg.procs()),
        };
        let mut cmd = Command::new("/bin/sh");
        let script = "n=0; for i in $(seq 40); do sleep 5 2>/dev/null & n=$((n+1)); done; kill $(jobs -p) 2>/dev/null; echo started";
        cmd.arg("-c").arg(script).stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = spawn_confined(cmd, &c).expect("spawn").child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(cg.refused_forks() > 0, "no fork was refused in a cgroup of 16: {text}");
        let dir = cg.dir().to_path_buf();
        drop(cg);
        assert!(!dir.exists(), "the cgroup {} stayed after its processes ended", dir.display());
    }
}
