//! The builtins' one error: a builtin cannot start or serve (`Unknown`, `Setup`,
//! `SignalThread`, `WorkDir`), or one tool call failed in a way the model can fix (the other
//! variants; its text goes back as the call's result with `isError: true`).

use gosling_store::atomic;
use std::path::PathBuf;
use std::{fmt, io};

#[derive(Debug)]
pub enum Error {
    /// `gosling mcp NAME` with a name this binary does not serve.
    Unknown { name: String },
    /// The builtin cannot be set up from its environment.
    Setup { builtin: &'static str, reason: String },
    /// The thread that turns SIGTERM/SIGINT into cancellation could not start.
    SignalThread(io::Error),
    /// The developer's working directory (`GOOSE_WORKING_DIR`, the cwd, or an ACP session's
    /// cwd) cannot be resolved or opened.
    WorkDir { dir: PathBuf, source: io::Error },
    // The rest: one tool call failed in a way the model can fix; each message names the
    // argument or the state and what to do.
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
    /// A file operation in the working directory failed; `verb` says which ("read", "write",
    /// "list", "remove", "create the directories of"). A path that leads outside the working
    /// directory at the moment of use is `EXDEV`, a link refused on the way `ELOOP`.
    File { verb: &'static str, shown: String, source: io::Error },
    /// A path argument resolves outside the working directory (and confinement is on).
    Outside { input: String, resolved: PathBuf, root: PathBuf },
    /// A component of a path argument exists but cannot be resolved (a dangling symlink).
    Unresolvable { input: String, at: PathBuf, source: io::Error },
    /// A file is larger than the tool reads (`size` when known before reading).
    TooBig { shown: String, size: Option<u64>, limit: u64 },
    /// A file is not UTF-8 text (`binary`: it has a NUL byte near the start).
    NotText { shown: String, binary: bool },
    /// Whoever holds the files on the builtin's behalf (the editor, over ACP) failed; its own
    /// error says how.
    Delegate(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unknown { name } => {
                write!(f, "unknown builtin extension {name}; known builtins: {}", crate::names::KNOWN.join(", "))
            }
            Error::Setup { builtin, reason } => write!(f, "{builtin}: {reason}"),
            Error::SignalThread(e) => write!(f, "builtin: cannot start the signal thread: {e}"),
            Error::WorkDir { dir, source } => write!(
                f,
                "developer: working directory {} is not usable: {source}; set GOOSE_WORKING_DIR (or the session's cwd) to an existing directory",
                dir.display()
            ),
            Error::Missing { key, kind } => write!(f, "missing required argument `{key}` ({kind})"),
            Error::WrongType { key, kind } => write!(f, "argument `{key}` must be {kind}"),
            Error::Refused(why) => f.write_str(why),
            Error::Store(e) => write!(f, "{e}"),
            Error::UnknownTool(name) => write!(f, "no tool {name:?}"),
            Error::File { verb, shown, source } => match source.raw_os_error() {
                Some(libc::EXDEV) => write!(
                    f,
                    "cannot {verb} {shown}: it leads outside the working directory (through a symbolic link or `..`) at the moment of use; use a path inside it"
                ),
                Some(libc::ELOOP) => write!(
                    f,
                    "cannot {verb} {shown}: a symbolic link on the way cannot be followed safely; use the real path"
                ),
                _ => write!(f, "cannot {verb} {shown}: {source}"),
            },
            Error::Outside { input, resolved, root } => write!(
                f,
                "{input} resolves to {}, which is outside the working directory {}; use a path inside it",
                resolved.display(),
                root.display()
            ),
            Error::Unresolvable { input, at, source } => write!(
                f,
                "{input}: cannot resolve {} ({source}); a symlink may point to a missing target",
                at.display()
            ),
            Error::TooBig { shown, size: Some(size), limit } => {
                write!(f, "{shown} is {size} bytes, over the {limit}-byte limit")
            }
            Error::TooBig { shown, size: None, limit } => write!(f, "{shown} is over the {limit}-byte limit"),
            Error::NotText { shown, binary: true } => {
                write!(f, "{shown} looks like a binary file; use the shell tool (e.g. xxd or file) to inspect it")
            }
            Error::NotText { shown, binary: false } => {
                write!(f, "{shown} is not UTF-8 text; use the shell tool to inspect it")
            }
            Error::Delegate(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::SignalThread(e) | Error::WorkDir { source: e, .. } => Some(e),
            Error::File { source, .. } | Error::Unresolvable { source, .. } => Some(source),
            Error::Store(e) => Some(e),
            Error::Delegate(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<atomic::Error> for Error {
    fn from(e: atomic::Error) -> Error {
        Error::Store(e)
    }
}

/// The model reads a tool error as text.
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}
