//! This process itself: who it runs as, and who may look into it.

use std::io;

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

/// Our effective user id (to check who owns the state and config dirs).
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}
