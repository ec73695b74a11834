//! The composition root's one error: why a mode could not start or stopped, for `main.rs`
//! to print. Each names the setting, flag or file to fix.

use gosling_store::atomic;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Why a mode of gosling could not start or stopped (`agent`, `serve`, `acp`, and the core
/// they share); each says what to change.
#[derive(Debug)]
pub enum Error {
    /// A command-line argument gosling does not know.
    UnknownArgument(String),
    /// A flag without the value it needs (`--port`, `--host`), and what that value is.
    MissingValue {
        flag: &'static str,
        expected: &'static str,
    },
    Config(gosling_config::Error),
    /// `gosling serve` without `GOOSE_SERVER__SECRET_KEY` and without
    /// `--dangerously-unauthenticated`.
    ServeNeedsSecret,
    /// `--with-builtin` named something gosling does not have.
    UnknownBuiltin(String),
    /// Listening beyond this machine needs a secret key the person chose.
    NoSecret(IpAddr),
    /// `GOOSE_SERVER__SECRET_KEY` is shorter than `agent_cmd::MIN_SECRET_CHARS`.
    ShortSecret {
        chars: usize,
        min: usize,
    },
    /// The state or config dir, or a file in it (the store's error names it).
    Store(atomic::Error),
    /// The extension policy (an allowlist setting) cannot be read.
    Policy(gosling_extensions::Error),
    /// `gosling acp` could not start (it says why).
    AcpStart(Box<Error>),
    /// `gosling acp` stopped: reading from the editor failed.
    Acp(gosling_acp::Error),
    Tls(gosling_tls::Error),
    Listen {
        addr: SocketAddr,
        source: io::Error,
    },
    Serve(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownArgument(a) => write!(f, "agent: unknown argument {a:?}; see --help"),
            Error::MissingValue { flag, expected } => write!(f, "{flag} needs {expected}"),
            Error::Config(e) => write!(f, "{e}"),
            Error::ServeNeedsSecret => write!(
                f,
                "serve: GOOSE_SERVER__SECRET_KEY is not set; set it to the secret clients send (Goose Desktop sets it when it starts the backend), or pass --dangerously-unauthenticated to start with a generated one in the state dir"
            ),
            Error::UnknownBuiltin(name) => write!(
                f,
                "serve: --with-builtin {name:?}: no such builtin; gosling has {}",
                gosling_builtins::KNOWN.join(", ")
            ),
            Error::NoSecret(host) => write!(
                f,
                "agent: refusing to listen on {host} (beyond this machine) without a secret key you chose; set GOOSE_SERVER__SECRET_KEY"
            ),
            Error::ShortSecret { chars, min } => write!(
                f,
                "agent: GOOSE_SERVER__SECRET_KEY has {chars} characters, too few to be a secret; use at least {min} \
                 random characters (for example `openssl rand -hex 32`)"
            ),
            Error::Store(e) => write!(f, "{e}"),
            Error::Policy(e) => write!(f, "{e}"),
            Error::AcpStart(e) => write!(f, "acp: cannot start: {e}"),
            Error::Acp(e) => write!(f, "{e}"),
            Error::Tls(e) => write!(f, "{e}"),
            Error::Listen { addr, source } => {
                write!(f, "agent: cannot listen on {addr}: {source}; pick another port with GOOSE_PORT or --port")
            }
            Error::Serve(e) => write!(f, "agent: cannot start the HTTP server: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => Some(e),
            Error::Store(e) => Some(e),
            Error::Policy(e) => Some(e),
            Error::Tls(e) => Some(e),
            Error::AcpStart(e) => Some(e.as_ref()),
            Error::Acp(e) => Some(e),
            Error::Listen { source, .. } | Error::Serve(source) => Some(source),
            Error::UnknownArgument(_)
            | Error::MissingValue { .. }
            | Error::ServeNeedsSecret
            | Error::UnknownBuiltin(_)
            | Error::NoSecret(_)
            | Error::ShortSecret { .. } => None,
        }
    }
}
