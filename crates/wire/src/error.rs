//! The wire layer's one error: bytes that are not the format they claim (JSON-RPC, SSE,
//! percent-encoding, a WebSocket upgrade), or a JSON-RPC call that got no result (`peer`).
//! `E` is the transport's own error, carried when a call's connection closed or its send
//! failed; the formats have none (`Infallible`, the default).

use serde::Serialize;
use serde_json::Value;
use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Error<E = Infallible> {
    // JSON-RPC 2.0 (`jsonrpc::Message::parse`): enough to log and to answer with.
    /// Not JSON at all (the serde message says where).
    NotJson(String),
    /// JSON, but not a JSON-RPC 2.0 message object; the string says which rule failed.
    NotJsonRpc(&'static str),

    // Server-Sent Events (`sse::Decoder`).
    /// A peer that never ends its line, or an event whose `data:` lines together exceed the
    /// limit (each line short, the event without end).
    LineTooLong {
        limit: usize,
    },

    // Strict percent-decoding (`percent::form_decode`).
    /// A `%` not followed by two hex digits; `at` is the text from the `%` (up to 3 chars).
    BadEscape {
        at: String,
    },
    /// The decoded bytes are not UTF-8.
    NotUtf8,

    // A WebSocket upgrade request refused (`websocket::check_upgrade`; answered 400).
    NotGet,
    NoUpgrade,
    NoConnectionUpgrade,
    /// `Sec-WebSocket-Version` missing or other than 13; the answer carries
    /// `Sec-WebSocket-Version: 13` (RFC 6455 §4.4).
    Version(Option<String>),
    /// `Sec-WebSocket-Key` missing or not the base64 of 16 bytes.
    Key(Option<String>),

    // A call through the JSON-RPC peer (`peer::Peer::call`) that got no result.
    /// The other side answered with a JSON-RPC error.
    Remote {
        who: &'static str,
        error: ErrorObject,
    },
    /// No answer by the deadline; the flavour's cancellation was sent.
    Timeout {
        who: &'static str,
        method: String,
        after: Duration,
    },
    /// The caller's cancel signal fired first; the flavour's cancellation was sent.
    Cancelled {
        who: &'static str,
        method: String,
    },
    /// The connection is closed; the reason given to `Peer::close` (or the transport's
    /// `Outbound::gone`).
    Closed(E),
    /// The transport could not send the request.
    Send(E),
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotJson(e) => write!(f, "jsonrpc: not JSON: {e}"),
            Error::NotJsonRpc(why) => write!(f, "jsonrpc: not a JSON-RPC 2.0 message: {why}"),
            Error::LineTooLong { limit } => write!(f, "sse: a line or event exceeded {limit} bytes"),
            Error::BadEscape { at } => write!(f, "has an invalid percent escape {at:?}; write % as %25"),
            Error::NotUtf8 => write!(f, "decodes to bytes that are not UTF-8; percent-encode text as UTF-8"),
            Error::NotGet => f.write_str("a WebSocket upgrade must be a GET request"),
            Error::NoUpgrade => f.write_str("send `Upgrade: websocket` to open a WebSocket"),
            Error::NoConnectionUpgrade => {
                f.write_str("a WebSocket upgrade needs `Connection: Upgrade` (RFC 6455 §4.1)")
            }
            Error::Version(None) => f.write_str("missing `Sec-WebSocket-Version`; this server speaks version 13"),
            Error::Version(Some(v)) => {
                write!(f, "unsupported `Sec-WebSocket-Version: {v}`; this server speaks version 13 (RFC 6455)")
            }
            Error::Key(None) => f.write_str("missing `Sec-WebSocket-Key`"),
            Error::Key(Some(k)) => write!(f, "`Sec-WebSocket-Key: {k}` is not the base64 of 16 bytes (RFC 6455 §4.1)"),
            Error::Remote { who, error } => write!(f, "{who} answered error {}: {}", error.code, error.message),
            Error::Timeout { who, method, after } => write!(f, "{who} did not answer {method} within {after:?}"),
            Error::Cancelled { who, method } => write!(f, "{who}: {method} was cancelled while waiting for the answer"),
            Error::Closed(e) | Error::Send(e) => e.fmt(f),
        }
    }
}

/// The transport's error is shown, not chained: the peer's users fold it into their own
/// layer's error at once (`mcp::Error` from `Closed`/`Send`), and nothing else here wraps one.
impl<E: fmt::Debug + fmt::Display> std::error::Error for Error<E> {}

/// The `error` member of a failed JSON-RPC response (re-exported as `jsonrpc::ErrorObject`):
/// what a peer answers with, and what `Error::Remote` carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code, message: message.into(), data: None }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
