//! A directory watched by the kernel (inotify), for following what other processes append.

use crate::fd::{poll_fd, Ready};
use std::io;

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

#[cfg(test)]
mod tests {
    use super::DirWatch;
    use std::time::Duration;

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
