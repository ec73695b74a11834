//! The builtins' errors. `Error`: a builtin cannot start or serve. `ToolError`: one tool call
//! failed in a way the model can fix; its text goes back as the result with `isError: true`.

use crate::store::atomic;
use std::{fmt, io};

#[derive(Debug)]
pub enum Error {
    /// `gosling mcp NAME` with a name this binary does not serve.
    Unknown { name: String },
    /// The builtin cannot be set up from its environment.
    Setup { builtin: &'static str, reason: String },
    /// The thread that turns SIGTERM/SIGINT into cancellation could not start.
    SignalThread(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unknown { name } => {
                write!(f, "unknown builtin extension {name}; known builtins: {}", super::KNOWN.join(", "))
            }
            Error::Setup { builtin, reason } => write!(f, "{builtin}: {reason}"),
            Error::SignalThread(e) => write!(f, "builtin: cannot start the signal thread: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::SignalThread(e) => Some(e),
            Error::Unknown { .. } | Error::Setup { .. } => None,
        }
    }
}

/// Why one tool call failed. Each message names the argument or the state and what to do.
#[derive(Debug)]
pub enum ToolError {
    /// A required argument is absent (or null).
    Missing { key: String, kind: &'static str },
    /// An argument has the wrong JSON type.
    WrongType { key: String, kind: &'static str },
    /// The arguments are well-formed but refused; the text says what to pass instead.
    Refused(String),
    /// The builtin's own files could not be read or written.
    Store(atomic::Error),
    /// A tool name the builtin does not have.
    UnknownTool(String),
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::Missing { key, kind } => write!(f, "missing required argument `{key}` ({kind})"),
            ToolError::WrongType { key, kind } => write!(f, "argument `{key}` must be {kind}"),
            ToolError::Refused(why) => f.write_str(why),
            ToolError::Store(e) => write!(f, "{e}"),
            ToolError::UnknownTool(name) => write!(f, "no tool {name:?}"),
        }
    }
}

impl std::error::Error for ToolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ToolError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<atomic::Error> for ToolError {
    fn from(e: atomic::Error) -> ToolError {
        ToolError::Store(e)
    }
}

/// The model reads a tool error as text.
impl From<ToolError> for String {
    fn from(e: ToolError) -> String {
        e.to_string()
    }
}
