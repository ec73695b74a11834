//! What can go wrong talking to a Streamable HTTP MCP server, phrased so that the user knows
//! what to change: the extension's `uri`, its headers, the server, or the network.
//!
//! Pure: classifies ureq errors and HTTP answers, formats messages. Never holds a header value
//! of ours (the server's `WWW-Authenticate` challenge is not a secret and is shown).

use std::fmt;
use std::time::Duration;

/// One failed HTTP exchange with an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpFailure {
    /// Nothing listens at the address (TCP RST). Start the server or fix the port.
    ConnectionRefused,
    /// The host name does not resolve. Fix the host or the DNS/proxy settings.
    Dns,
    /// The TLS handshake failed (unknown CA, expired or wrong-host certificate, not TLS at all).
    Tls(String),
    /// No answer within the extension's timeout.
    Timeout(Duration),
    /// 401 or 403, with the server's `WWW-Authenticate` challenge if it sent one.
    Unauthorized { status: u16, challenge: Option<String> },
    /// 404 without a session: the path is probably wrong.
    NotFound,
    /// A 3xx: we do not follow redirects with a JSON-RPC body; the user should use the target.
    Redirect { status: u16, location: Option<String> },
    /// A 2xx that is not JSON-RPC (an HTML page, plain text, an empty answer to a request).
    NotMcp { status: u16, content_type: String, snippet: String },
    /// Any other status (5xx, 400 …), with the start of the body.
    Status { status: u16, snippet: String },
    /// The `uri` is not a usable http(s) URL.
    BadUri(String),
    /// A proxy from `HTTPS_PROXY`/`HTTP_PROXY` refused or failed the tunnel.
    Proxy(String),
    /// Anything else on the socket (reset, body too large, …).
    Io(String),
    /// The server wants a signed-in user and nobody has signed in yet: open `url` in a browser
    /// on the machine gosling runs on (the loopback redirect lands there), then try again.
    SignInRequired { url: String },
    /// Signing in (OAuth discovery, registration, token exchange) failed; the text says what
    /// to configure. Never carries a token or secret.
    OAuth(String),
}

impl HttpFailure {
    /// Classifies a ureq error (everything that is not an HTTP status).
    pub fn from_ureq(e: &ureq::Error, timeout: Duration) -> HttpFailure {
        match e {
            ureq::Error::Timeout(_) => HttpFailure::Timeout(timeout),
            ureq::Error::HostNotFound => HttpFailure::Dns,
            ureq::Error::Io(io) => classify_io(io, timeout),
            ureq::Error::Tls(s) => HttpFailure::Tls(s.to_string()),
            ureq::Error::Pem(p) => HttpFailure::Tls(p.to_string()),
            ureq::Error::Rustls(r) => HttpFailure::Tls(r.to_string()),
            ureq::Error::TlsRequired => HttpFailure::Tls("the server requires TLS".into()),
            ureq::Error::BadUri(s) => HttpFailure::BadUri(s.clone()),
            ureq::Error::Http(h) => HttpFailure::BadUri(h.to_string()),
            ureq::Error::InvalidProxyUrl => {
                HttpFailure::Proxy("the proxy URL in HTTPS_PROXY/HTTP_PROXY is invalid".into())
            }
            ureq::Error::ConnectProxyFailed(s) => HttpFailure::Proxy(s.clone()),
            ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => {
                HttpFailure::Redirect { status: 0, location: None }
            }
            ureq::Error::BodyExceedsLimit(n) => HttpFailure::Io(format!("the answer exceeded {n} bytes")),
            ureq::Error::StatusCode(s) => HttpFailure::Status { status: *s, snippet: String::new() },
            other => HttpFailure::Io(other.to_string()),
        }
    }

    /// Classifies a non-2xx answer. `body` is the (bounded) start of the body.
    pub fn from_status(status: u16, challenge: Option<String>, location: Option<String>, body: &[u8]) -> HttpFailure {
        match status {
            401 | 403 => HttpFailure::Unauthorized { status, challenge },
            404 => HttpFailure::NotFound,
            300..=399 => HttpFailure::Redirect { status, location },
            _ => HttpFailure::Status { status, snippet: snippet(body) },
        }
    }
}

fn classify_io(io: &std::io::Error, timeout: Duration) -> HttpFailure {
    use std::io::ErrorKind as K;
    match io.kind() {
        K::ConnectionRefused => HttpFailure::ConnectionRefused,
        K::TimedOut | K::WouldBlock => HttpFailure::Timeout(timeout),
        _ => {
            let text = io.to_string();
            // std's resolver reports getaddrinfo failures as plain `Other`/`Uncategorized` errors.
            let lower = text.to_ascii_lowercase();
            if lower.contains("lookup address")
                || lower.contains("name or service not known")
                || lower.contains("nodename nor servname")
                || lower.contains("no address associated")
                || lower.contains("temporary failure in name resolution")
            {
                return HttpFailure::Dns;
            }
            // rustls errors come wrapped in io::Error by the TLS stream.
            let tls = |s: &String| {
                io.kind() == K::InvalidData || s.contains("certificate") || s.contains("tls") || s.contains("TLS")
            };
            match io.get_ref().map(|inner| inner.to_string()) {
                Some(s) if tls(&s) => HttpFailure::Tls(s),
                _ => HttpFailure::Io(text),
            }
        }
    }
}

/// The first bytes of a body as one printable line, for error messages.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 200 {
        s = s.chars().take(200).collect::<String>() + "…";
    }
    s
}

/// Writes the message for `failure` at `url`; the caller has already named the extension.
pub fn describe(f: &mut fmt::Formatter<'_>, url: &str, failure: &HttpFailure) -> fmt::Result {
    match failure {
        HttpFailure::ConnectionRefused => {
            write!(f, "cannot connect to {url}: connection refused; start the server, or fix the host and port in the extension's uri")
        }
        HttpFailure::Dns => write!(f, "cannot resolve the host name of {url}; fix the host in the extension's uri, or check DNS and proxy settings"),
        HttpFailure::Tls(detail) => write!(
            f,
            "TLS failure talking to {url}: {detail}; check the server's certificate (for a private CA set SSL_CERT_FILE to its PEM bundle), or use http:// if the server does not speak TLS"
        ),
        HttpFailure::Timeout(after) => {
            write!(f, "no answer from {url} within {after:?}; check that the server is running and reachable, or raise the extension's timeout")
        }
        HttpFailure::Unauthorized { status, challenge } => {
            let what = if *status == 401 { "401 Unauthorized" } else { "403 Forbidden" };
            write!(f, "{url} answered {what}")?;
            if let Some(c) = challenge {
                write!(f, " (WWW-Authenticate: {c})")?;
            }
            if *status == 401 {
                write!(f, "; add the credentials the server expects to the extension's headers, e.g. `Authorization: Bearer ${{TOKEN}}` with TOKEN in env_keys")
            } else {
                write!(f, "; the credentials in the extension's headers are not allowed to use this server: check the token and its scopes")
            }
        }
        HttpFailure::NotFound => write!(f, "{url} answered 404 Not Found; is the path in the extension's uri right? Streamable HTTP endpoints usually end in /mcp"),
        HttpFailure::Redirect { status, location } => match location {
            Some(l) => write!(f, "{url} redirects ({status}) to {l}; set the extension's uri to the final address"),
            None => write!(f, "{url} redirects ({status}) without a usable Location (or in a loop); set the extension's uri to the server's real MCP endpoint"),
        },
        HttpFailure::NotMcp { status, content_type, snippet } => {
            let what = if content_type.contains("html") {
                "an HTML page".to_string()
            } else if content_type.is_empty() {
                "a body without a content type".to_string()
            } else {
                format!("`{content_type}`")
            };
            write!(f, "{url} is not an MCP endpoint: it answered {status} with {what}")?;
            if !snippet.is_empty() {
                write!(f, " ({snippet})")?;
            }
            write!(f, "; point the extension's uri at the server's Streamable HTTP MCP endpoint (usually ending in /mcp)")
        }
        HttpFailure::Status { status, snippet } => {
            write!(f, "{url} answered HTTP {status}")?;
            if !snippet.is_empty() {
                write!(f, ": {snippet}")?;
            }
            if *status == 405 {
                write!(f, "; the server does not take POST here: point the uri at its Streamable HTTP endpoint (an old HTTP+SSE server must be upgraded)")
            } else if *status >= 500 {
                write!(f, "; the server failed, check its logs")
            } else {
                write!(f, "; check the extension's uri and headers")
            }
        }
        HttpFailure::BadUri(detail) => write!(f, "the extension's uri {url:?} is not a usable http:// or https:// URL: {detail}"),
        HttpFailure::Proxy(detail) => write!(f, "the proxy failed connecting to {url}: {detail}; check HTTPS_PROXY/HTTP_PROXY and NO_PROXY"),
        HttpFailure::Io(detail) => write!(f, "talking to {url} failed: {detail}"),
        HttpFailure::SignInRequired { url: open } => write!(
            f,
            "{url} needs sign-in: open {open} in a browser on the machine gosling runs on (or run `gosling auth NAME` there), then add the extension again"
        ),
        HttpFailure::OAuth(detail) => write!(f, "signing in to {url} failed: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Show<'a>(&'a str, &'a HttpFailure);
    impl fmt::Display for Show<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            describe(f, self.0, self.1)
        }
    }

    #[test]
    fn statuses_are_classified() {
        assert_eq!(
            HttpFailure::from_status(401, Some("Bearer realm=\"x\"".into()), None, b""),
            HttpFailure::Unauthorized { status: 401, challenge: Some("Bearer realm=\"x\"".into()) }
        );
        assert_eq!(HttpFailure::from_status(404, None, None, b""), HttpFailure::NotFound);
        assert_eq!(
            HttpFailure::from_status(500, None, None, b"  boom\n  now "),
            HttpFailure::Status { status: 500, snippet: "boom now".into() }
        );
        let msg = Show("http://h/mcp", &HttpFailure::from_status(401, Some("Bearer".into()), None, b"")).to_string();
        assert!(msg.contains("WWW-Authenticate: Bearer") && msg.contains("headers"), "{msg}");
    }

    #[test]
    fn io_errors_are_classified() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(classify_io(&refused, Duration::from_secs(1)), HttpFailure::ConnectionRefused);
        let dns = std::io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(classify_io(&dns, Duration::from_secs(1)), HttpFailure::Dns);
    }

    #[test]
    fn long_snippets_are_cut() {
        let s = snippet(&[b'a'; 500]);
        assert_eq!(s.chars().count(), 201);
    }
}
