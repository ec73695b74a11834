//! Errors of the MCP client layer. Each message names what failed and what to do about it.

use crate::http_error::HttpFailure;
use gosling_wire::jsonrpc::ErrorObject;
use std::fmt;
use std::time::Duration;

/// The migration message for legacy `sse` extensions: the one wording every path uses (runtime
/// activation, config warnings, deep links, import).
pub const SSE_UNSUPPORTED: &str = "SSE is unsupported, migrate to streamable_http";

#[derive(Debug, Clone)]
pub enum Error {
    /// The server answered a request with a JSON-RPC error.
    Rpc(ErrorObject),
    /// No answer within the extension's timeout; `notifications/cancelled` was sent.
    Timeout { method: String, after: Duration },
    /// The connection ended (child exited, stream closed); `detail` carries the stderr tail.
    Closed { detail: String },
    /// Anything else, already phrased for the user.
    Other(String),
    /// The call was cancelled by its caller; `notifications/cancelled` was sent.
    Cancelled { method: String },
    /// The server did not declare the capability (`resources`, `prompts`, `tools`); nothing
    /// was sent to it.
    Unsupported { extension: String, what: String },
    /// A Streamable HTTP exchange failed (connect, TLS, status, not MCP). Names the extension.
    Http { extension: String, url: String, failure: HttpFailure },
    /// A `type: sse` extension: never activated, before any network I/O. Migrate the config.
    SseUnsupported { extension: String },
    /// The extension sent more than gosling holds for one extension (`limit`): a listing over
    /// all its pages, one message, a resource or a tool result. Nothing of it was kept.
    TooLarge { extension: String, what: String, limit: String },
    /// A header value uses `${VAR}`/`$VAR` that neither `envs` nor `env_keys` defines.
    HeaderVariable { header: String, var: String },
    /// `SSL_CERT_FILE` cannot be read. Shown inside the message of what it stopped.
    CaBundleUnreadable { path: std::path::PathBuf, error: std::sync::Arc<std::io::Error> },
    /// `SSL_CERT_FILE` holds no PEM certificate. Shown inside the message of what it stopped.
    CaBundleEmpty { path: std::path::PathBuf },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "mcp: server returned error {}: {}", e.code, e.message),
            Error::Timeout { method, after } => {
                write!(f, "mcp: no reply to {method} after {after:?}; raise the extension's timeout or check its log")
            }
            Error::Closed { detail } => write!(f, "mcp: connection to the server closed: {detail}"),
            Error::Other(s) => write!(f, "mcp: {s}"),
            Error::Cancelled { method } => write!(f, "mcp: {method} was cancelled"),
            Error::Unsupported { extension, what } => write!(f, "mcp: extension `{extension}` does not offer {what} (it did not declare the capability)"),
            Error::Http { extension, url, failure } => {
                write!(f, "mcp: extension `{extension}`: ")?;
                crate::http_error::describe(f, url, failure)
            }
            Error::SseUnsupported { extension } => write!(
                f,
                "mcp: extension `{extension}` has type `sse`: {SSE_UNSUPPORTED}; change its type to `streamable_http` and put the server's endpoint (usually ending in /mcp) in `uri`"
            ),
            Error::TooLarge { extension, what, limit } => write!(
                f,
                "mcp: extension `{extension}` sent more than {limit} in {what}, the most gosling holds for one extension; it was refused — fix or remove that extension"
            ),
            Error::HeaderVariable { header, var } => write!(
                f,
                "mcp: header `{header}` uses the variable {var}, which is not set; add {var} to the extension's envs or env_keys"
            ),
            Error::CaBundleUnreadable { path, error } => write!(
                f,
                "cannot read SSL_CERT_FILE {}: {error}; point it at a PEM CA bundle or unset it",
                path.display()
            ),
            Error::CaBundleEmpty { path } => write!(
                f,
                "SSL_CERT_FILE {} holds no PEM certificate; point it at a PEM CA bundle or unset it",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::CaBundleUnreadable { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }
}

/// The peer's outcome of a call, as this layer's error: the server's error object, the
/// deadline and cancellation keep their variants, and a closed connection or a failed send is
/// the transport's own error.
impl From<gosling_wire::Error<Error>> for Error {
    fn from(e: gosling_wire::Error<Error>) -> Error {
        use gosling_wire::Error as CallError;
        match e {
            CallError::Remote { error, .. } => Error::Rpc(error),
            CallError::Timeout { method, after, .. } => Error::Timeout { method, after },
            CallError::Cancelled { method, .. } => Error::Cancelled { method },
            CallError::Closed(e) | CallError::Send(e) => e,
            // The peer fails a call with the variants above only.
            other => Error::Other(other.to_string()),
        }
    }
}
