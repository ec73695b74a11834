//! Sending one completion request: POST with bounded retries of 429 and 5xx (honouring
//! `Retry-After` in seconds), and the mapping of everything else to actionable `Error`s.
//!
//! Retries happen only before any byte of the answer was streamed, so a retry never repeats
//! text the caller has seen. Header values (the API key) are never logged.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::settings::Settings;
use crate::text::clip;
use crate::types::Cancel;

/// Largest error body read to build a message.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// POSTs `body` and returns the body of a 2xx answer, ready to stream.
/// `cancelled` (the caller stopped listening) ends a retry's wait early.
pub(crate) fn send(
    agent: &ureq::Agent,
    s: &Settings,
    headers: &[(&str, String)],
    body: &[u8],
    cancelled: &Cancel,
) -> Result<ureq::Body, Error> {
    let url = s.url();
    let mut waited = Duration::ZERO;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        log::debug!("llm: POST {url} (provider {}, model {}, attempt {attempt})", s.provider, s.model);
        let mut req = agent.post(&url).header("content-type", "application/json").header("accept", "text/event-stream");
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let resp = req.send(body).map_err(|e| request_error(e, s))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            let ctype =
                resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
            if ctype.starts_with("application/json") {
                let text = read_bounded(resp.into_body());
                return Err(Error::Protocol(format!(
                    "{url} answered a JSON body instead of an event stream ({}); the server ignored `stream: true` — use an OpenAI-compatible server that supports streaming",
                    clip(&scrub(&text, s), 200)
                )));
            }
            return Ok(resp.into_body());
        }
        let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        let detail = error_detail(&read_bounded(resp.into_body()), s);
        let retryable = status == 429 || (500..600).contains(&status);
        if retryable && attempt < s.max_attempts {
            let wait = retry_after.unwrap_or_else(|| backoff(attempt));
            if waited + wait <= s.max_retry_wait {
                log::warn!(
                    "llm: {} answered HTTP {status} ({detail}); retrying in {wait:?} (attempt {attempt} of {})",
                    s.provider,
                    s.max_attempts
                );
                let until = Instant::now() + wait;
                while Instant::now() < until {
                    if cancelled.is_set() {
                        return Err(Error::Cancelled);
                    }
                    std::thread::sleep(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
                }
                waited += wait;
                continue;
            }
            log::warn!("llm: {} asks to wait {wait:?}, beyond the retry budget of {:?}", s.provider, s.max_retry_wait);
        }
        return Err(http_error(status, &detail, s, attempt));
    }
}

/// 0.5 s, 1 s, 2 s, … capped at 8 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << (attempt.saturating_sub(1)).min(4)))
}

/// `Retry-After` in seconds (integer or decimal). An HTTP date is ignored (backoff instead).
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(secs.min(3600.0)))
}

fn read_bounded(body: ureq::Body) -> String {
    let mut v = Vec::new();
    let _ = body.into_reader().take(MAX_ERROR_BODY).read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// Removes the API key from provider text before it reaches a message or a log.
fn scrub(text: &str, s: &Settings) -> String {
    match s.api_key.as_deref() {
        Some(k) if k.len() >= 4 => text.replace(k, "***"),
        _ => text.to_string(),
    }
}

/// The provider's own error message: `error.message`, `error` as text, `message`, `detail`, or
/// the raw body, shortened.
pub(crate) fn error_detail(body: &str, s: &Settings) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => {
            let e = v.get("error");
            e.and_then(|e| e.get("message"))
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .or_else(|| e.and_then(|e| e.as_str()).map(str::to_string))
                .or_else(|| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
                .or_else(|| v.get("detail").map(|d| d.as_str().map(str::to_string).unwrap_or_else(|| d.to_string())))
                .unwrap_or_else(|| body.trim().to_string())
        }
        Err(_) => body.trim().to_string(),
    };
    let text = if text.is_empty() { "no details".to_string() } else { text };
    clip(&scrub(&text, s), 300)
}

pub(crate) fn is_context_length(detail: &str) -> bool {
    let d = detail.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "maximum context",
        "prompt is too long",
        "too many tokens",
        "context size",
        "exceeds the context",
    ]
    .iter()
    .any(|p| d.contains(p))
}

fn http_error(status: u16, detail: &str, s: &Settings, attempts: u32) -> Error {
    let (provider, host) = (&s.provider, &s.host);
    let message = match status {
        401 | 403 => match s.api_key {
            None => format!("{provider} at {host} answered HTTP {status} ({detail}): no API key was sent; set {}", s.key_var()),
            Some(_) => format!("{provider} at {host} rejected the API key with HTTP {status} ({detail}); check {}", s.key_var()),
        },
        404 => format!(
            "{} answered HTTP 404 ({detail}): the model {:?} is unknown there, or {} points to the wrong place; check GOOSE_MODEL and {}",
            s.url(),
            s.model,
            s.host_var(),
            s.host_var()
        ),
        400 | 413 | 422 if is_context_length(detail) => return Error::ContextTooLong { message: detail.to_string() },
        429 => format!("{provider} is rate limiting (HTTP 429) after {attempts} attempts ({detail}); wait and retry, or check the account's quota"),
        500..=599 => format!("{provider} server error (HTTP {status}) after {attempts} attempts ({detail}); retry later or check the server at {host}"),
        _ => format!("{provider} answered HTTP {status} ({detail}); check GOOSE_MODEL ({:?}) and the provider settings", s.model),
    };
    Error::Http { status, message }
}

fn request_error(e: ureq::Error, s: &Settings) -> Error {
    let host = s.host.clone();
    match e {
        ureq::Error::HostNotFound => Error::Unreachable { host, detail: "host name not found (DNS)".into() },
        ureq::Error::ConnectionFailed => Error::Unreachable { host, detail: "connection failed".into() },
        ureq::Error::Io(io) => {
            let detail = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                std::io::ErrorKind::TimedOut => return Error::Timeout { host, after: s.stall_timeout },
                _ => io.to_string(),
            };
            Error::Unreachable { host, detail }
        }
        ureq::Error::Timeout(t) => match t {
            ureq::Timeout::Resolve | ureq::Timeout::Connect => {
                Error::Unreachable { host, detail: format!("connecting timed out after {:?}", s.connect_timeout) }
            }
            _ => Error::Timeout { host, after: s.stall_timeout },
        },
        ureq::Error::BadUri(u) => Error::NotConfigured(format!("the URL {u:?} is invalid; check {}", s.host_var())),
        ureq::Error::Tls(m) => Error::Unreachable { host, detail: format!("TLS: {m}") },
        other => Error::Unreachable { host, detail: other.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_and_backoff() {
        assert_eq!(parse_retry_after("1"), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(30), Duration::from_secs(8));
    }

    #[test]
    fn errors_are_actionable_and_scrubbed() {
        let mut s = Settings::new("openai", "gpt-x", "http://h:1");
        s.api_key = Some("sk-supersecret".into());
        let d = error_detail(r#"{"error":{"message":"Incorrect API key provided: sk-supersecret"}}"#, &s);
        assert!(!d.contains("supersecret"), "{d}");
        let e = http_error(401, &d, &s, 1).to_string();
        assert!(e.contains("OPENAI_API_KEY") && e.starts_with("llm: "), "{e}");
        s.api_key = None;
        assert!(http_error(401, "x", &s, 1).to_string().contains("no API key was sent; set OPENAI_API_KEY"));
        let e = http_error(404, "model not found", &s, 1).to_string();
        assert!(e.contains("GOOSE_MODEL") && e.contains("OPENAI_HOST"), "{e}");
        let d = error_detail(r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#, &s);
        assert!(matches!(http_error(400, &d, &s, 1), Error::ContextTooLong { .. }));
        assert!(http_error(429, "slow down", &s, 3).to_string().contains("after 3 attempts"));
        assert_eq!(error_detail("", &s), "no details");
        assert_eq!(error_detail(r#"{"error":"model \"m\" not found"}"#, &s), "model \"m\" not found");
    }
}
