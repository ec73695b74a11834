//! The acp layer's one error.

use std::fmt;
use std::io;

/// The acp layer's one error: why `run` stopped (its start, over a core built by `main`,
/// cannot fail).
#[derive(Debug)]
pub enum Error {
    /// Reading from the client failed.
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "acp: reading from the editor failed: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
        }
    }
}
