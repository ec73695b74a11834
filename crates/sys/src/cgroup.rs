//! A pids cgroup per confined extension: the process limit where `RLIMIT_NPROC` does not hold.
//!
//! The kernel never holds uid 0 to `RLIMIT_NPROC` (`copy_process` skips the check for the
//! initial namespace's root, even inside a user namespace), so a root gosling puts each
//! confined child in a cgroup of the pids controller with `pids.max` set to the extension's
//! process limit: a fork past it fails with EAGAIN inside the extension. The cgroup is made
//! under our own cgroup of the pids hierarchy (cgroup v1's `pids` hierarchy, or cgroup v2 where
//! our cgroup passes the controller to its children), named `gosling.<owner tag>.<n>`
//! (`this_process::owner_tag`); `Drop` removes it once it is empty, and `create` first
//! removes the empty ones whose owner process is gone. The child joins it in its `pre_exec`
//! hook (`Confinement::pids_cgroup`), before its user namespace: nothing it starts is outside.
//! Inside, `/sys` is read-only (Landlock) and the child has no capability over the initial
//! namespace, so it cannot leave the cgroup or raise `pids.max`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long `Drop` waits for the last processes of an ended extension to be reaped before it
/// leaves the cgroup to the next sweep.
const EMPTY_WAIT: Duration = Duration::from_secs(1);

/// One extension's pids cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
}

/// The dir of our own cgroup in the pids hierarchy, where children can be made, or why there
/// is none. Looked up (and tried, by making and removing a cgroup there) once per process.
pub fn pids_cgroup_base() -> Result<PathBuf, String> {
    static BASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = find_base()?;
        let probe = base.join(format!("gosling.{}.probe", crate::owner_tag()));
        std::fs::create_dir(&probe)
            .map_err(|e| format!("the pids cgroup {} does not take a new cgroup ({e})", base.display()))?;
        let _ = std::fs::remove_dir(&probe);
        Ok(base)
    })
    .clone()
}

/// Our cgroup in the pids hierarchy: cgroup v1's `pids` hierarchy, else cgroup v2 when the
/// controller is enabled for our cgroup's children (or can be).
fn find_base() -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("no /proc/self/cgroup ({e})"))?;
    let mounts =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("no /proc/self/mountinfo ({e})"))?;
    // `ID:CONTROLLERS:PATH`; v1's pids line names the controller, v2's is `0::PATH`.
    let v1 = cgroups.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        ctl.split(',').any(|c| c == "pids").then(|| path.to_string())
    });
    if let Some(path) = v1 {
        let (root, mount) =
            mount_of(&mounts, |fstype, opts| fstype == "cgroup" && opts.split(',').any(|o| o == "pids"))
                .ok_or("the pids hierarchy is not mounted here")?;
        return Ok(join_cgroup(&mount, &root, &path));
    }
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::")).ok_or("no pids controller in /proc/self/cgroup")?;
    let (root, mount) =
        mount_of(&mounts, |fstype, _| fstype == "cgroup2").ok_or("neither a pids hierarchy nor cgroup2 is mounted")?;
    let dir = join_cgroup(&mount, &root, path);
    let has =
        |file: &str| std::fs::read_to_string(dir.join(file)).is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"));
    if !has("cgroup.controllers") {
        return Err(format!("cgroup2 does not offer the pids controller to {}", dir.display()));
    }
    if !has("cgroup.subtree_control") {
        std::fs::write(dir.join("cgroup.subtree_control"), "+pids").map_err(|e| {
            format!("cannot enable the pids controller for the children of {} ({e}: a cgroup2 with processes of its own passes no controller down; start gosling in a cgroup delegated to it)", dir.display())
        })?;
    }
    Ok(dir)
}

/// The (root, mount point) of the first mount whose file system type and super options match
/// (`/proc/self/mountinfo`: `… ROOT MOUNTPOINT … - FSTYPE SOURCE SUPEROPTS`).
fn mount_of(mounts: &str, matches: impl Fn(&str, &str) -> bool) -> Option<(String, PathBuf)> {
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _source, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        if !matches(fstype, opts) {
            return None;
        }
        let mut f = left.split_whitespace();
        let (root, mount) = (f.nth(3)?, f.next()?);
        Some((unescape(root), PathBuf::from(unescape(mount))))
    })
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The dir of cgroup `path` in a hierarchy whose `root` is mounted at `mount`.
fn join_cgroup(mount: &Path, root: &str, path: &str) -> PathBuf {
    let rel = path.strip_prefix(root.trim_end_matches('/')).unwrap_or(path);
    let mut dir = mount.to_path_buf();
    dir.extend(Path::new(rel).components().filter(|c| matches!(c, std::path::Component::Normal(_))));
    dir
}

impl PidsCgroup {
    /// A new pids cgroup under `pids_cgroup_base` holding at most `max` processes (and
    /// threads). The empty cgroups of gosling processes that are gone are removed first.
    pub fn create(max: u64) -> io::Result<PidsCgroup> {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = pids_cgroup_base().map_err(io::Error::other)?;
        static SWEPT: OnceLock<()> = OnceLock::new();
        SWEPT.get_or_init(|| sweep(&base));
        let dir = base.join(format!("gosling.{}.{}", crate::owner_tag(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir)?;
        let cg = PidsCgroup { dir };
        std::fs::write(cg.dir.join("pids.max"), max.to_string())?;
        Ok(cg)
    }

    /// The file the child writes `0` to, to join (`Confinement::pids_cgroup`).
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many forks were refused for the limit (`pids.events`: `max N`).
    pub fn refused_forks(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("max ")?.trim().parse().ok()))
            .unwrap_or(0)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The extension's processes were ended before; the last ones may still wait to be reaped.
        let deadline = Instant::now() + EMPTY_WAIT;
        loop {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                // Still busy, or gone: the next gosling's first start removes a leftover.
                Err(_) => return,
            }
        }
    }
}

/// Removes the `gosling.<owner>.<n>` cgroups under `base` whose owner process is gone (an
/// owner that runs, or that nobody can judge from here, keeps its cgroups).
fn sweep(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("gosling.")) else { continue };
        let Some((tag, _)) = rest.rsplit_once('.') else { continue };
        if crate::owner_alive(tag) == Some(false) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_are_read_from_mountinfo() {
        let info = "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                    41 31 0:38 /ns /sys/fs/cgroup/uni\\040fied rw - cgroup2 cgroup2 rw\n";
        let (root, m) = mount_of(info, |t, o| t == "cgroup" && o.contains("pids")).unwrap();
        assert_eq!(join_cgroup(&m, &root, "/a/b"), PathBuf::from("/sys/fs/cgroup/pids/a/b"));
        assert_eq!(join_cgroup(&m, &root, "/"), PathBuf::from("/sys/fs/cgroup/pids"));
        let (root, m) = mount_of(info, |t, _| t == "cgroup2").unwrap();
        assert_eq!(m, PathBuf::from("/sys/fs/cgroup/uni fied"));
        assert_eq!(join_cgroup(&m, &root, "/ns/x/../y"), PathBuf::from("/sys/fs/cgroup/uni fied/x/y"));
    }
}
