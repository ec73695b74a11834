//! Crash-safe file writes and locked read-modify-write of JSON documents.
//!
//! Every write is: temp file in the same directory (mode 0600) → write → fsync → rename over
//! the target → fsync the directory. A crash at any point leaves either the old or the new
//! file, never a torn one. Updates hold an exclusive `flock` on a sibling `.lock` file, so
//! concurrent writers in this process or another `gosling` never lose an update.
//!
//! Nothing here follows a symbolic link at the last component (`O_NOFOLLOW`; a link is a
//! `Symlink` error), and `check_private_dir` refuses a state or config dir that someone else
//! could write into.

use serde_json::Value;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum Error {
    /// Reading, writing or locking `path` failed.
    Io { path: PathBuf, source: io::Error },
    /// `path` exists but is not the JSON we expect; it is left untouched.
    Corrupt { path: PathBuf, detail: String },
    /// `path` is a symbolic link where gosling keeps its own file or directory; nothing is
    /// followed. Replace the link with the real file or remove it.
    Symlink { path: PathBuf },
    /// A state or config dir that is not ours alone (another owner, or group/world-writable):
    /// someone else could plant links or files in it.
    UnsafeDir { path: PathBuf, detail: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => {
                // What to do depends on what went wrong.
                let fix = if source.kind() == io::ErrorKind::PermissionDenied {
                    format!(
                        "this user (uid {}) may not use it: make it yours (`chown`) and private (`chmod 600` a file, \
                         `chmod 700` a directory), or give gosling dirs of its own (GOSLING_CONFIG_DIR, GOSLING_STATE_DIR)",
                        gosling_sys::euid()
                    )
                } else if source.kind() == io::ErrorKind::AlreadyExists || source.raw_os_error() == Some(libc::ENOTDIR) {
                    "a file is where gosling needs a directory: move it away, or give gosling dirs of its own \
                     (GOSLING_CONFIG_DIR, GOSLING_STATE_DIR)"
                        .to_string()
                } else {
                    "check the directory exists and is writable".to_string()
                };
                write!(f, "store: {}: {source}; {fix}", path.display())
            }
            Error::Corrupt { path, detail } => write!(
                f,
                "store: {} is not valid: {detail}; fix or move the file away (it was left untouched)",
                path.display()
            ),
            Error::Symlink { path } => write!(
                f,
                "store: {} is a symbolic link; gosling does not follow links in its state and config dirs — replace it with the real file or directory, or remove it",
                path.display()
            ),
            Error::UnsafeDir { path, detail } => write!(f, "store: {} {detail}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Corrupt { .. } | Error::Symlink { .. } | Error::UnsafeDir { .. } => None,
        }
    }
}

/// An I/O error on `path`; ELOOP from an `O_NOFOLLOW` open is the `Symlink` error.
pub fn io_err(path: &Path, source: io::Error) -> Error {
    if source.raw_os_error() == Some(libc::ELOOP) {
        return Error::Symlink { path: path.to_path_buf() };
    }
    Error::Io { path: path.to_path_buf(), source }
}

/// Opens a file for reading without following a link at the last component, and without
/// waiting for a writer if someone planted a FIFO there (`O_NONBLOCK`; no effect on files).
pub fn open_read(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)
}

/// Opens (creating 0600) a file to append to, without following a link.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// A state or config dir: created 0700 if missing; an existing one must be owned by us and
/// not writable by group or others, else `UnsafeDir` naming the fix.
pub fn check_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    ensure_dir(dir)?;
    let meta = fs::metadata(dir).map_err(|e| io_err(dir, e))?;
    let unsafe_dir = |detail| Err(Error::UnsafeDir { path: dir.to_path_buf(), detail });
    if meta.uid() != gosling_sys::euid() {
        return unsafe_dir(format!(
            "is owned by uid {}, not by this user (uid {}); give gosling dirs of this user's own (GOSLING_CONFIG_DIR, \
             GOSLING_STATE_DIR), or `chown` it to this user",
            meta.uid(),
            gosling_sys::euid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return unsafe_dir(format!(
            "is writable by its group or others (mode {:o}); run `chmod 700 {}`",
            meta.mode() & 0o777,
            dir.display()
        ));
    }
    Ok(())
}

/// A directory gosling keeps inside its own dirs (`sessions/`): created 0700 if missing, and
/// refused if it is a link or not a directory.
pub fn ensure_subdir(dir: &Path) -> Result<(), Error> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Symlink { path: dir.to_path_buf() }),
        Ok(m) if !m.is_dir() => Err(io_err(dir, io::Error::other("exists and is not a directory"))),
        _ => ensure_dir(dir),
    }
}

/// Refuses any of `names` in `dir` that is a symbolic link (checked at start; the opens
/// themselves refuse links too, so a link planted later is refused when it is used).
pub fn refuse_symlinks(dir: &Path, names: &[&str]) -> Result<(), Error> {
    for name in names {
        let p = dir.join(name);
        if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::Symlink { path: p });
        }
    }
    Ok(())
}

/// Creates `dir` (and parents) with mode 0700 if missing.
pub fn ensure_dir(dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| {
        // A file where the directory (or one above it) goes: say so rather than "File exists".
        let file_in_way = e.kind() == io::ErrorKind::AlreadyExists || e.raw_os_error() == Some(libc::ENOTDIR);
        match dir.ancestors().find(|a| fs::metadata(a).is_ok_and(|m| !m.is_dir())) {
            Some(file) if file_in_way => {
                io_err(file, io::Error::new(io::ErrorKind::AlreadyExists, "it is a file, not a directory"))
            }
            _ => io_err(dir, e),
        }
    })
}

use std::os::unix::fs::DirBuilderExt;

/// Atomically replaces `path` with `bytes` (mode 0600).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_temp(path, bytes)?.replace()
}

/// A temp file beside its target, written and fsynced, not yet in place (`write_temp`), and
/// still open. Dropped without `replace` or `rename`, it is removed.
pub struct Temp {
    tmp: PathBuf,
    path: PathBuf,
    file: Option<File>,
    renamed: bool,
}

impl Temp {
    /// Renames it over its target, then makes the rename durable (fsync of the directory).
    pub fn replace(mut self) -> Result<(), Error> {
        self.rename()?;
        sync_parent(&self.path)
    }

    /// Renames it over its target without waiting for the rename to be durable: the caller
    /// calls `sync_parent` (e.g. after releasing a lock held for the rename alone).
    pub fn rename(&mut self) -> Result<(), Error> {
        fs::rename(&self.tmp, &self.path).map_err(|e| io_err(&self.path, e))?;
        self.renamed = true;
        Ok(())
    }

    /// The file written, still open (after `rename`: the target's file), for a caller that
    /// keeps what it wrote in mind (`Ident`).
    pub fn into_file(mut self) -> File {
        self.file.take().expect("a Temp holds its file until it is dropped")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        // Left over after a failure or a change of plan (nothing to remove after a rename).
        if !self.renamed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// What `stat` says of a file, enough to tell that it is no longer the file that was read: a
/// file replaced (another inode), grown, shortened or written in place (its change time).
/// Compared while the file read is held open, so its inode cannot be given to another file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Ident {
    pub fn of(m: &fs::Metadata) -> Ident {
        use std::os::unix::fs::MetadataExt;
        Ident {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// What is at `path` now (not following a link); `None` when nothing is.
    pub fn at(path: &Path) -> Result<Option<Ident>, Error> {
        match fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(Ident::of(&m))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(path, e)),
        }
    }
}

/// Makes a rename in `path`'s directory durable.
pub fn sync_parent(path: &Path) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err(dir, e))
}

/// The first half of an atomic replace of `path`: `bytes` in a temp file of its directory
/// (mode 0600), fsynced, so that a rename puts a whole file in place (`Temp::replace`).
pub fn write_temp(path: &Path, bytes: &[u8]) -> Result<Temp, Error> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_dir(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}.{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let mut temp = Temp { tmp, path: path.to_path_buf(), file: None, renamed: false };
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp.tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()).map(|_| f));
    // A failed create leaves nothing: the drop's remove finds no file.
    temp.file = Some(written.map_err(|e| io_err(path, e))?);
    Ok(temp)
}

/// A file's bytes with what `stat` said of it before they were read, the file held open
/// (`Ident`); read without following a link. `None` when it does not exist.
pub fn read_kept(path: &Path) -> Result<Option<(File, Ident, Vec<u8>)>, Error> {
    let Some((f, meta, mut bytes)) = open_regular(path)? else { return Ok(None) };
    // `take` so the read asks the kernel for no size again.
    io::Read::read_to_end(&mut io::Read::take(&f, meta.len().saturating_add(1 << 20)), &mut bytes)
        .map_err(|e| io_err(path, e))?;
    Ok(Some((f, Ident::of(&meta), bytes)))
}

/// A file's bytes, read without following a link; `None` when it does not exist.
pub fn read_file(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let Some((mut f, _, mut bytes)) = open_regular(path)? else { return Ok(None) };
    io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| io_err(path, e))?;
    Ok(Some(bytes))
}

/// A regular file opened for reading without following a link, what `fstat` said of it and a
/// buffer sized from that (`read_to_end` would ask the kernel again); `None` when it does not
/// exist.
fn open_regular(path: &Path) -> Result<Option<(File, std::fs::Metadata, Vec<u8>)>, Error> {
    let f = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path, e)),
    };
    let meta = f.metadata().map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(Error::Corrupt { path: path.to_path_buf(), detail: "it is not a regular file".into() });
    }
    let bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).saturating_add(1));
    Ok(Some((f, meta, bytes)))
}

/// Reads a JSON document; a missing file is `None`, an unparseable one is `Corrupt`.
pub fn read_json(path: &Path) -> Result<Option<Value>, Error> {
    let Some(bytes) = read_file(path)? else { return Ok(None) };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::Corrupt { path: path.to_path_buf(), detail: e.to_string() })
}

pub fn write_json(path: &Path, value: &Value) -> Result<(), Error> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("a serde_json::Value always serializes");
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// An exclusive lock on `<path>.lock`, held until dropped.
pub struct FileLock {
    _file: File,
}

/// Opens (creating 0600, never truncating) a file to take a lock on, without following a link.
pub fn open_lock_file(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_err(path, e))
}

pub fn lock(path: &Path) -> Result<FileLock, Error> {
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    if let Some(dir) = lock_path.parent() {
        ensure_dir(dir)?;
    }
    let file = open_lock_file(&lock_path)?;
    lock_file(&file, &lock_path, true)?;
    Ok(FileLock { _file: file })
}

/// How long a `flock` is waited for. Locks are held for a write and its fsync (well under a
/// millisecond); one held longer belongs to a process that is stuck.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Takes a `flock` on `file` (`path` names it in errors), exclusive or shared, polling for at
/// most `LOCK_WAIT` rather than blocking without a deadline.
pub fn lock_file(file: &File, path: &Path, exclusive: bool) -> Result<(), Error> {
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_micros(20);
    loop {
        let r = if exclusive { file.try_lock() } else { file.try_lock_shared() };
        match r {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
            Err(fs::TryLockError::WouldBlock) => {
                let why = format!(
                    "locked by another process for over {} s; a gosling process on this state dir may be stuck (stop it)",
                    LOCK_WAIT.as_secs()
                );
                return Err(Error::Io {
                    path: path.to_path_buf(),
                    source: io::Error::new(io::ErrorKind::TimedOut, why),
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_err(path, e)),
        }
    }
}

/// Locked read-modify-write of a JSON object file. `f` sees the current document (an empty
/// object when the file does not exist) and returns whether it changed it.
pub fn update_json<R>(path: &Path, f: impl FnOnce(&mut serde_json::Map<String, Value>) -> R) -> Result<R, Error> {
    update_json_or(path, &serde_json::Map::new(), f)
}

/// `update_json` of a file that holds `missing` while it does not exist: `f` sees `missing`
/// then, and the file is written whenever the result is not empty (`missing` alone, when `f`
/// changes nothing). A file that exists is never replaced by `missing`.
pub fn update_json_or<R>(
    path: &Path,
    missing: &serde_json::Map<String, Value>,
    f: impl FnOnce(&mut serde_json::Map<String, Value>) -> R,
) -> Result<R, Error> {
    let _guard = lock(path)?;
    let (mut doc, before) = match read_object_unlocked(path)? {
        Some(doc) => (doc.clone(), doc),
        None => (missing.clone(), serde_json::Map::new()),
    };
    let r = f(&mut doc);
    if doc != before {
        write_json(path, &Value::Object(doc))?;
    }
    Ok(r)
}

/// Reads a JSON object file (empty when missing) under the lock, so it never sees a
/// half-applied update by another process.
pub fn read_object(path: &Path) -> Result<serde_json::Map<String, Value>, Error> {
    read_object_or(path, &serde_json::Map::new())
}

/// `read_object` of a file that holds `missing` while it does not exist.
pub fn read_object_or(
    path: &Path,
    missing: &serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>, Error> {
    let _guard = lock(path)?;
    Ok(read_object_unlocked(path)?.unwrap_or_else(|| missing.clone()))
}

/// A JSON object file (`None` when missing); the caller holds its lock.
fn read_object_unlocked(path: &Path) -> Result<Option<serde_json::Map<String, Value>>, Error> {
    match read_json(path)? {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => {
            Err(Error::Corrupt { path: path.to_path_buf(), detail: "expected a JSON object at the top level".into() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosling-atomic-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn write_is_0600_and_leaves_no_temp() {
        let d = tmpdir("w");
        let p = d.join("x.json");
        write_json(&p, &serde_json::json!({"a":1})).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        assert_eq!(read_json(&p).unwrap().unwrap()["a"], 1);
    }

    #[test]
    fn corrupt_is_reported_and_untouched() {
        let d = tmpdir("c");
        ensure_dir(&d).unwrap();
        let p = d.join("x.json");
        fs::write(&p, b"{not json").unwrap();
        let e = update_json(&p, |m| m.insert("k".into(), 1.into())).unwrap_err();
        assert!(e.to_string().contains("x.json"), "{e}");
        assert_eq!(fs::read(&p).unwrap(), b"{not json");
    }

    #[test]
    fn concurrent_updates_all_land() {
        let d = tmpdir("u");
        let p = d.join("x.json");
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || update_json(&p, |m| m.insert(format!("k{i}"), i.into())).unwrap())
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(read_object(&p).unwrap().len(), 16);
    }
}
