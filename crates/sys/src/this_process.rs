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

/// When process `pid` started, in clock ticks after boot (`/proc/<pid>/stat`, field 22), as
/// seen from our PID namespace; `None` when there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or `)`: count from the last.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Our PID namespace's inode number (`/proc/self/ns/pid` reads `pid:[N]`).
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let s = link.to_str()?;
    s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// A tag naming this very process among every process that may share a directory with it:
/// `<pid namespace>.<pid>.<start time>` (digits and dots only). A pid alone is reused; with its
/// start time it names one process, and the namespace says which pids the tag speaks of.
pub fn owner_tag() -> String {
    let pid = std::process::id();
    format!("{}.{pid}.{}", pid_namespace().unwrap_or(0), start_time(pid).unwrap_or(0))
}

/// Whether the process an `owner_tag` names still runs: `Some(false)` when it is gone (no such
/// pid, or the pid now names a later process), `None` when the tag is not one or names another
/// PID namespace (its pids cannot be looked up from here: nobody can say).
pub fn owner_alive(tag: &str) -> Option<bool> {
    let mut it = tag.split('.');
    let (ns, pid, start) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let (ns, pid, start): (u64, u32, u64) = (ns.parse().ok()?, pid.parse().ok()?, start.parse().ok()?);
    if Some(ns) != pid_namespace() || ns == 0 {
        return None;
    }
    Some(start_time(pid) == Some(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_tag_names_this_process_and_a_gone_one_reads_as_gone() {
        let tag = owner_tag();
        assert_eq!(owner_alive(&tag), Some(true), "{tag}");
        let (ns, rest) = tag.split_once('.').unwrap();
        let (pid, start) = rest.split_once('.').unwrap();
        // The same pid with another start time is a process that is gone.
        let later = format!("{ns}.{pid}.{}", start.parse::<u64>().unwrap() + 1);
        assert_eq!(owner_alive(&later), Some(false));
        // A child that ended.
        let mut c = std::process::Command::new("/bin/true").spawn().unwrap();
        let id = c.id();
        let started = start_time(id).unwrap_or(0);
        c.wait().unwrap();
        assert_eq!(owner_alive(&format!("{ns}.{id}.{started}")), Some(false));
        // Another namespace, or not a tag: nobody can say.
        assert_eq!(owner_alive(&format!("1.{pid}.{start}")), None);
        for bad in ["", "1.2", "a.b.c", "1.2.3.4", "-1.2.3"] {
            assert_eq!(owner_alive(bad), None, "{bad}");
        }
    }
}
