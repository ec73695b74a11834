//! The shared-secret check: `X-Secret-Key` on every route but the few goose leaves open.

/// Paths reachable without the header (compared exactly, query ignored). The proxy pages
/// check a `secret` query parameter themselves.
pub const EXEMPT: [&str; 4] = ["/status", "/mcp-ui-proxy", "/mcp-app-proxy", "/mcp-app-guest"];

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
    }
}
