//! The shared-secret check: `X-Secret-Key` on every route but the few goose leaves open.

/// Paths reachable without the header (compared exactly, query ignored). The proxy pages
/// check a `secret` query parameter themselves. `/`, `/app.js` and `/style.css` are the
/// built-in web page's static assets (src/web), which hold nothing secret.
pub const EXEMPT: [&str; 8] =
    ["/status", "/mcp-ui-proxy", "/mcp-app-proxy", "/mcp-app-guest", "/auth/login", "/", "/app.js", "/style.css"];

pub fn is_exempt(path: &str) -> bool {
    EXEMPT.contains(&path)
}

/// Constant-time comparison: length first (the length of the secret is not the secret),
/// then every byte, without an early exit.
pub fn secret_matches(given: &[u8], secret: &[u8]) -> bool {
    if given.len() != secret.len() || secret.is_empty() {
        return false;
    }
    let mut diff = 0u8;
    for (a, b) in given.iter().zip(secret) {
        diff |= a ^ b;
    }
    std::hint::black_box(diff) == 0
}

/// The one-time login link for the web page: a random token, printed at start to a terminal,
/// that `POST /auth/login` trades once for the secret key within its lifetime. Nothing else
/// ever prints the key.
pub struct LoginToken {
    token: std::sync::Mutex<Option<(String, std::time::Instant)>>,
    lifetime: std::time::Duration,
}

impl LoginToken {
    pub fn new(lifetime: std::time::Duration) -> LoginToken {
        LoginToken {
            token: std::sync::Mutex::new(Some((crate::util::random_hex(24), std::time::Instant::now()))),
            lifetime,
        }
    }

    pub fn peek(&self) -> Option<String> {
        self.token.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(t, _)| t.clone())
    }

    /// True once for the right token within its lifetime; the token is gone afterwards
    /// (a wrong guess burns it too, so it cannot be brute-forced).
    pub fn redeem(&self, given: &str) -> bool {
        let taken = self.token.lock().unwrap_or_else(|e| e.into_inner()).take();
        match taken {
            Some((t, born)) => born.elapsed() < self.lifetime && secret_matches(given.as_bytes(), t.as_bytes()),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares() {
        assert!(secret_matches(b"abc", b"abc"));
        assert!(!secret_matches(b"abd", b"abc"));
        assert!(!secret_matches(b"ab", b"abc"));
        assert!(!secret_matches(b"", b""));
        assert!(is_exempt("/status"));
        assert!(!is_exempt("/status/"));
        assert!(!is_exempt("/config"));
        assert!(is_exempt("/") && is_exempt("/app.js") && is_exempt("/style.css"));
        assert!(!is_exempt("") && !is_exempt("//") && !is_exempt("/app.js/") && !is_exempt("/index.html"));
    }

    #[test]
    fn login_token_works_once() {
        let t = LoginToken::new(std::time::Duration::from_secs(60));
        let tok = t.peek().unwrap();
        assert!(t.redeem(&tok));
        assert!(!t.redeem(&tok));
        let t = LoginToken::new(std::time::Duration::from_secs(60));
        let tok = t.peek().unwrap();
        assert!(!t.redeem("wrong"));
        assert!(!t.redeem(&tok), "a wrong guess burns the token");
    }
}
