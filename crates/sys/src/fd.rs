//! Descriptors: non-blocking mode, `poll`, half-close, and the process's descriptor limit.

use std::io;
use std::sync::atomic::Ordering;

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
pub(crate) static ORIGINAL_FD_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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

#[cfg(test)]
mod tests {
    use super::{poll_fd, poll_fds, set_nonblocking, Ready};
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
}
