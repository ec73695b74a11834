//! The config layer's one error type.

/// The config layer's one error: a setting in the environment that cannot be used, or a
/// working directory that was refused; the message says what to send instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    BadValue {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    TooSmall {
        key: &'static str,
        min: u64,
    },
    /// An empty working directory (goose answers it with words of its own).
    EmptyWorkingDir,
    RelativeWorkingDir(String),
    /// `~` with no absolute `HOME`.
    WorkingDirWithoutHome(String),
    MissingWorkingDir(String),
    WorkingDirNotADirectory(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadValue { key, value, expected } => write!(f, "config: {key}={value:?} is not {expected}"),
            Error::TooSmall { key, min } => write!(f, "config: {key} must be at least {min}"),
            Error::EmptyWorkingDir => {
                write!(f, "the working directory is empty; give an absolute path to an existing directory")
            }
            Error::RelativeWorkingDir(d) => {
                write!(f, "working directory {d:?} is a relative path; give an absolute path (starting with / or ~/)")
            }
            Error::WorkingDirWithoutHome(d) => {
                write!(f, "working directory {d:?} starts with ~ but HOME is not set; give an absolute path")
            }
            Error::MissingWorkingDir(d) => {
                write!(f, "working directory {d:?} does not exist; create it or pick an existing directory")
            }
            Error::WorkingDirNotADirectory(d) => {
                write!(f, "working directory {d:?} is not a directory (it is a file); pick a directory")
            }
        }
    }
}

impl std::error::Error for Error {}
