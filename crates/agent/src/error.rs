//! The agent layer's one error: why a session operation was refused or failed, why a turn
//! could not start or stopped short of a final answer.

use std::fmt;

/// The agent layer's one error: why a session operation (`ops`) was refused or failed, why a
/// turn could not start or stopped short of a final answer, or why a setting could not be
/// changed (`settings`).
#[derive(Debug)]
pub enum Error {
    /// No such session.
    SessionNotFound(String),
    /// The session has no running agent (no `/agent/start` or `/agent/resume` yet).
    NoAgent(String),
    /// The model settings are incomplete or wrong (`llm` says what to set).
    Model(gosling_llm::Error),
    /// Reading or saving the session's messages failed.
    SaveMessage(gosling_store::atomic::Error),
    /// The turn used its `GOSLING_MAX_TURNS` model turns without reaching a final answer.
    OutOfTurns(usize),
    /// A turn already runs in this session (from any front end).
    Busy(String),
    /// The session's event bus already runs a request (goose's words: `bus::BUSY`).
    RequestActive,
    /// A setting's key is empty, too long, or `extensions`; the message says what to use.
    BadKey(&'static str),
    /// A message cannot be steered into a run (`steer`); the text says why and what to do.
    Steer(String),
    /// Reading or writing the settings or a session failed.
    Store(gosling_store::atomic::Error),
    /// The trust policy refuses the extension (`policy:` says which rule and what to change).
    Refused(Box<gosling_extensions::Error>),
    /// The extension reads secrets that are not stored (the message says how to store each).
    MissingSecrets { name: String, unresolved: gosling_extensions::config::Unresolved },
    /// The extension did not start; what to fix depends on the carried error (a refused
    /// variable, an approval to give, a server to sign in to, a command that fails).
    NotStarted { name: String, error: Box<gosling_extensions::Error> },
    /// The extension config could not be read.
    Extensions(Box<gosling_extensions::Error>),
    /// A mode other than goose's four.
    UnknownMode(String),
    /// A session name that is empty, too long or more than one line (the message says which).
    BadName(String),
    /// A provider gosling does not have.
    UnknownProvider(String),
    /// An empty model name.
    NoModel,
    /// No extension in the config has this key.
    NotConfigured(String),
    /// A tool permission with an empty or too long tool name, or a level other than goose's
    /// three (the message says which).
    BadPermission(String),
    /// A working dir that is not an existing absolute directory (the message says which).
    BadWorkingDir(gosling_config::Error),
    /// An import that is too large, not an exported session, or from a source gosling does
    /// not read (the message says what to send).
    BadImport(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::SessionNotFound(id) => write!(f, "Session {id} not found"),
            Error::NoAgent(id) => write!(
                f,
                "Agent not initialized: session {id:?} has no running agent; start it with /agent/start or resume it (/agent/resume with load_model_and_extensions: true, ACP session/load)"
            ),
            Error::Model(e) => write!(f, "{e}"),
            Error::SaveMessage(e) => write!(f, "Failed to save the message: {e}"),
            Error::RequestActive => f.write_str(crate::bus::BUSY),
            Error::BadKey(why) => f.write_str(why),
            Error::Steer(why) => f.write_str(why),
            Error::Store(e) => write!(f, "{e}"),
            Error::Busy(id) => {
                write!(f, "session {id} is already answering a message; wait for it to finish, or cancel it")
            }
            Error::Refused(e) | Error::Extensions(e) => write!(f, "{e}"),
            Error::MissingSecrets { unresolved, .. } => f.write_str(&unresolved.explain()),
            Error::NotStarted { error, .. } => write!(f, "{error}"),
            Error::UnknownMode(m) => {
                write!(f, "unknown mode {m:?}; {m:?} is not a mode gosling knows: use auto, approve, smart_approve or chat")
            }
            Error::BadName(why) | Error::BadPermission(why) => f.write_str(why),
            Error::BadWorkingDir(e) => write!(f, "{e}"),
            Error::BadImport(why) => f.write_str(why),
            Error::UnknownProvider(p) => {
                write!(f, "provider {p:?} is not supported by gosling; use openai, anthropic or ollama")
            }
            Error::NoModel => f.write_str("No model specified; name the model to use"),
            Error::NotConfigured(key) => write!(
                f,
                "no configured extension has the key {key:?}; list them with GET /config/extensions or _goose/unstable/config/extensions/list"
            ),
            Error::OutOfTurns(n) => {
                write!(f, "stopped after {n} model turns without a final answer (raise GOSLING_MAX_TURNS to allow more)")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Model(e) => Some(e),
            Error::SaveMessage(e) | Error::Store(e) => Some(e),
            Error::Refused(e) | Error::Extensions(e) | Error::NotStarted { error: e, .. } => Some(e),
            Error::BadWorkingDir(e) => Some(e),
            Error::SessionNotFound(_)
            | Error::NoAgent(_)
            | Error::OutOfTurns(_)
            | Error::Busy(_)
            | Error::BadKey(_)
            | Error::Steer(_)
            | Error::RequestActive
            | Error::MissingSecrets { .. }
            | Error::UnknownMode(_)
            | Error::BadName(_)
            | Error::BadPermission(_)
            | Error::UnknownProvider(_)
            | Error::NoModel
            | Error::NotConfigured(_)
            | Error::BadImport(_) => None,
        }
    }
}
