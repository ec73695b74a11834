//! A session's working directory: the one rule every front end applies.

use std::path::PathBuf;

use crate::env::Env;
use crate::error::Error;

/// The one rule for a session's working directory, for every front end (HTTP, ACP, the page):
/// an existing absolute directory; `~` and `~/x` are expanded against `HOME` from `env`.
/// Returns the path as it will be stored (expanded, otherwise as given).
pub fn working_dir(raw: &str, env: &dyn Env) -> Result<PathBuf, Error> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(Error::EmptyWorkingDir);
    }
    let path = match raw.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = env
                .get("HOME")
                .filter(|h| h.starts_with('/'))
                .ok_or_else(|| Error::WorkingDirWithoutHome(raw.to_string()))?;
            let rest = rest.trim_start_matches('/');
            if rest.is_empty() {
                PathBuf::from(home)
            } else {
                PathBuf::from(home).join(rest)
            }
        }
        _ => PathBuf::from(raw),
    };
    if !path.is_absolute() {
        return Err(Error::RelativeWorkingDir(raw.to_string()));
    }
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        Ok(_) => Err(Error::WorkingDirNotADirectory(path.display().to_string())),
        Err(_) => Err(Error::MissingWorkingDir(path.display().to_string())),
    }
}
