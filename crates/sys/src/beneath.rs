//! Paths resolved beneath a directory, never leaving it (`openat2` with `RESOLVE_BENEATH`,
//! else a component-by-component `O_NOFOLLOW` walk).

use std::io;

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

/// How deep `remove_tree_at` goes (each level holds a descriptor open).
const MAX_DEPTH: usize = 128;

/// Removes the entry `name` of the directory `parent` with everything beneath it, never
/// following a symbolic link: a link is removed as a link (its target stays), each directory
/// is opened with `O_NOFOLLOW` relative to its parent's descriptor, and its entries are listed
/// through that descriptor, so nothing swapped in on the way leads outside. A directory whose
/// mode shuts us out (the same user made it `000`) is opened up first. At most 128 levels deep;
/// the first error is returned after removing what could be.
pub fn remove_tree_at(parent: &std::fs::File, name: &std::ffi::OsStr) -> io::Result<()> {
    remove_tree_depth(parent, name, 0)
}

fn remove_tree_depth(parent: &std::fs::File, name: &std::ffi::OsStr, depth: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let c = path_cstring(std::path::Path::new(name))?;
    // SAFETY: stat is plain integers; all-zero is a valid value before fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat reads the NUL-terminated name and fills `st`, not following a link.
    if unsafe { libc::fstatat(parent.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        // SAFETY: unlinkat reads the NUL-terminated name relative to a descriptor we own.
        if unsafe { libc::unlinkat(parent.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(io::Error::other(format!("more than {MAX_DEPTH} directories deep")));
    }
    let dir = match openat_nofollow(parent, name, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            // The dir itself (O_PATH: no read right needed, still not following a link), made
            // ours to list and empty through its descriptor's /proc name.
            let p = openat_nofollow(parent, name, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            let at = format!("/proc/self/fd/{}", p.as_raw_fd());
            std::fs::set_permissions(&at, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
            std::fs::File::open(&at)?
        }
        Err(e) => return Err(e),
    };
    let mut first: Option<io::Error> = None;
    for entry in std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))? {
        let r = entry.and_then(|e| remove_tree_depth(&dir, &e.file_name(), depth + 1));
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    drop(dir);
    // SAFETY: unlinkat with AT_REMOVEDIR reads the NUL-terminated name relative to our descriptor.
    if unsafe { libc::unlinkat(parent.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
        first.get_or_insert(io::Error::last_os_error());
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn a_tree_is_removed_without_following_its_links() {
        let base = std::env::temp_dir().join(format!("gosling-rmtree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (tree, outside) = (base.join("tree"), base.join("outside"));
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), "keep").unwrap();
        std::fs::write(tree.join("a/b/c/f"), "x").unwrap();
        symlink(&outside, tree.join("dir-link")).unwrap();
        symlink(outside.join("keep.txt"), tree.join("a/file-link")).unwrap();
        symlink("/nonexistent", tree.join("a/b/dangling")).unwrap();
        std::fs::create_dir(tree.join("shut")).unwrap();
        std::fs::write(tree.join("shut/f"), "x").unwrap();
        std::fs::set_permissions(tree.join("shut"), std::fs::Permissions::from_mode(0o000)).unwrap();
        let parent = std::fs::File::open(&base).unwrap();
        remove_tree_at(&parent, std::ffi::OsStr::new("tree")).unwrap();
        assert!(!tree.exists() && !tree.is_symlink());
        assert_eq!(std::fs::read_to_string(outside.join("keep.txt")).unwrap(), "keep");
        // A link named as the tree itself is removed as a link.
        symlink(&outside, base.join("link")).unwrap();
        remove_tree_at(&parent, std::ffi::OsStr::new("link")).unwrap();
        assert!(outside.join("keep.txt").exists() && !base.join("link").is_symlink());
        let e = remove_tree_at(&parent, std::ffi::OsStr::new("missing")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
