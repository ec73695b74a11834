//! The secret key gosling generates when none is given (`GOOSE_SERVER__SECRET_KEY` unset):
//! `<state dir>/secret-key`, made once and then kept, so a restarted server keeps its key and
//! a second process on the same state dir reads the key of the first instead of replacing it.
//!
//! The file is created complete or not at all: the key is written and fsynced to a temp file
//! (0600), which is then hard-linked to `secret-key` — `link` fails if the name exists, as
//! `O_CREAT|O_EXCL` would, and never follows a link there — so of two processes starting at
//! once one creates it and the other reads it, never a half-written key. An existing file must
//! be a regular file of this user, private (no group/other bits), holding 64 hex digits; else
//! an error names it and what to do. Not here: comparing keys (http/auth.rs).

use crate::atomic::{self, Error};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Hex digits of a generated key (32 random bytes).
const KEY_LEN: usize = 64;

/// The generated key of `state_dir`, its file, and whether this call created it (else it was
/// read: a start after the first, or another server's).
pub fn load_or_create(state_dir: &Path) -> Result<(String, PathBuf, bool), Error> {
    let path = state_dir.join("secret-key");
    // A second round only after losing the race to create it.
    for _ in 0..2 {
        if let Some(key) = read(&path)? {
            return Ok((key, path, false));
        }
        let key = gosling_util::random_hex(KEY_LEN / 2);
        if create(&path, &key)? {
            return Ok((key, path, true));
        }
    }
    Err(atomic::io_err(
        &path,
        io::Error::other("it keeps disappearing while gosling starts; is another program removing it?"),
    ))
}

/// Where the web page's one-time sign-in links are kept: `<state dir>/login-link-PORT`, one
/// file per server (several may share a state dir).
pub const LOGIN_LINK: &str = "login-link";

/// How long a login link works; a link file older than this is removed when a server starts.
pub const LOGIN_LINK_LIFETIME: std::time::Duration = std::time::Duration::from_secs(600);

/// Keeps the web page's one-time sign-in link (`…/#login=TOKEN`, never the key) of the server
/// listening on `port` in `<state dir>/login-link-PORT`, 0600, written atomically (tmp +
/// rename: a link planted at that name is replaced, never followed), for a person whose
/// gosling was started without a terminal (desktop, systemd, a script). The token works once
/// and expires; a server's next start on that port replaces its file, and other servers'
/// files stay (those past the token's lifetime are removed: they no longer work).
pub fn write_login_link(state_dir: &Path, port: u16, link: &str) -> Result<PathBuf, Error> {
    if let Ok(dir) = fs::read_dir(state_dir) {
        for entry in dir.flatten() {
            let name = entry.file_name();
            let stale = name
                .to_str()
                .and_then(|n| n.strip_prefix("login-link-"))
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && entry
                    .metadata()
                    .ok()
                    .filter(|m| m.is_file())
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > LOGIN_LINK_LIFETIME);
            if stale {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    let path = state_dir.join(format!("{LOGIN_LINK}-{port}"));
    atomic::write_atomic(&path, format!("{link}\n").as_bytes())?;
    Ok(path)
}

/// The key in `path`; `None` when there is no such file.
fn read(path: &Path) -> Result<Option<String>, Error> {
    let what_to_do = "delete it to have a new key generated at the next start (clients then need the new one), or set GOOSE_SERVER__SECRET_KEY";
    let bad = |detail: String| Error::Corrupt { path: path.to_path_buf(), detail: format!("{detail}; {what_to_do}") };
    let f = match atomic::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(bad(format!("it cannot be read by this user ({e})")));
        }
        Err(e) => return Err(atomic::io_err(path, e)),
    };
    let meta = f.metadata().map_err(|e| atomic::io_err(path, e))?;
    if !meta.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    if meta.uid() != gosling_sys::euid() {
        return Err(bad(format!("it belongs to uid {}, not to this user (uid {})", meta.uid(), gosling_sys::euid())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(bad(format!(
            "other users may read it (mode {:o}); run `chmod 600` on it, or",
            meta.mode() & 0o777
        )));
    }
    let mut bytes = Vec::new();
    f.take(4096).read_to_end(&mut bytes).map_err(|e| atomic::io_err(path, e))?;
    let key = std::str::from_utf8(&bytes).unwrap_or("").trim_end();
    if key.len() != KEY_LEN || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(format!(
            "it does not hold a generated secret key ({KEY_LEN} hex digits; it holds {} bytes)",
            bytes.len()
        )));
    }
    Ok(Some(key.to_string()))
}

/// Creates `path` holding `key`, complete; `false` when another process created it first.
fn create(path: &Path, key: &str) -> Result<bool, Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".secret-key.tmp.{}.{}", std::process::id(), gosling_util::random_hex(4)));
    let r = (|| {
        let mut f =
            OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp)?;
        f.write_all(key.as_bytes())?;
        f.sync_all()?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => fs::File::open(dir)?.sync_all().map(|()| true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = fs::remove_file(&tmp);
    r.map_err(|e| atomic::io_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosling-secret-key-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        atomic::ensure_dir(&d).unwrap();
        d
    }

    #[test]
    fn made_once_then_kept_and_a_race_agrees_on_one_key() {
        let d = tmpdir("race");
        let keys: Vec<String> = (0..8)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || load_or_create(&d).unwrap().0)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(keys.iter().all(|k| k == &keys[0] && k.len() == KEY_LEN), "{keys:?}");
        assert_eq!(load_or_create(&d).unwrap().0, keys[0]);
        let names: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["secret-key"], "no temp file left behind");
    }
}
