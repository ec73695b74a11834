//! The llm layer's one error type.

use std::fmt;
use std::time::Duration;

#[derive(Debug)]
pub enum Error {
    /// No provider, no model, or a hosted provider without its key. The message names the
    /// variables to set (environment or config store).
    NotConfigured(String),
    /// The provider answered an HTTP error (after retries for 429/5xx). `message` is already
    /// actionable: it says which variable to check.
    Http { status: u16, message: String },
    /// The prompt does not fit the model's context window (a 400 saying so). Shorten the
    /// conversation or pick a model with a larger context.
    ContextTooLong { message: String },
    /// Connection refused, DNS failure, TLS failure: the host is wrong or the server is down.
    Unreachable { host: String, detail: String },
    /// No response headers within the connect/response timeout.
    Timeout { host: String, after: Duration },
    /// The response stream sent no byte for `after` (GOSLING_LLM_STALL_SECS).
    Stalled { after: Duration },
    /// The stream broke the wire format: malformed JSON in a chunk, an answer that is not a
    /// stream.
    Protocol(String),
    /// The stream ended before the answer was complete, after `after_bytes` bytes: closed early
    /// (`source` `None`) or broken by a read error (`source`). Retried when nothing reached the
    /// caller yet (`retry_cut_streams`).
    StreamCut { after_bytes: usize, source: Option<Box<ureq::Error>> },
    /// The provider reported an error inside the stream (an `error` event or chunk).
    Remote(String),
    /// The response exceeded `Settings::max_response_bytes`.
    TooLarge { limit: usize },
    /// `on_delta` returned false.
    Cancelled,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotConfigured(m) => write!(f, "llm: {m}"),
            Error::Http { status: _, message } => write!(f, "llm: {message}"),
            Error::ContextTooLong { message } => {
                write!(f, "llm: the conversation is too long for the model's context window ({message}); start a new session or choose a model with a larger context")
            }
            Error::Unreachable { host, detail } => {
                write!(f, "llm: cannot reach {host}: {detail}; check that the server runs and the host setting (OPENAI_HOST, OLLAMA_HOST or ANTHROPIC_HOST) is right")
            }
            Error::Timeout { host, after } => write!(
                f,
                "llm: {host} sent no response within {after:?}; check the server or raise GOSLING_LLM_STALL_SECS"
            ),
            Error::Stalled { after } => {
                write!(f, "llm: the model's stream stalled (no data for {after:?}); retry, or raise GOSLING_LLM_STALL_SECS for slow local models")
            }
            Error::Protocol(m) => write!(f, "llm: {m}"),
            Error::StreamCut { after_bytes, source: None } => write!(
                f,
                "llm: stream ended before completion (after {after_bytes} bytes); the server closed the connection early, retry"
            ),
            Error::StreamCut { after_bytes, source: Some(e) } => {
                write!(f, "llm: stream ended before completion (after {after_bytes} bytes): {e}; retry")
            }
            Error::Remote(m) => write!(f, "llm: the provider reported an error mid-stream: {m}"),
            Error::TooLarge { limit } => {
                write!(f, "llm: the response exceeded {limit} bytes; raise GOSLING_LLM_MAX_RESPONSE_BYTES")
            }
            Error::Cancelled => write!(f, "llm: cancelled: the client went away"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::StreamCut { source: Some(e), .. } => Some(&**e),
            _ => None,
        }
    }
}
