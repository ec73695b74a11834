//! The shared-secret check: `X-Secret-Key` on every route but the few goose leaves open.

use gosling_util::lock;

/// Paths reachable without the header (compared exactly, query ignored). The proxy pages
/// check a `secret` query parameter themselves. `/`, `/app.js` and `/style.css` are the
/// built-in web page's static assets (src/web), which hold nothing secret.
pub const EXEMPT: [&str; 10] = [
    "/status",
    "/health",
    "/mcp-ui-proxy",
    "/mcp-app-proxy",
    "/mcp-app-guest",
    "/auth/login",
    "/auth/logout",
    "/",
    "/app.js",
    "/style.css",
];

pub fn is_exempt(path: &str) -> bool {
    EXEMPT.contains(&path)
}

/// The proxy pages: exempt from the header, they compare a `secret` parameter themselves;
/// a 401 from them is a wrong guess, counted by `Throttle` like a wrong key.
pub fn checks_own_secret(path: &str) -> bool {
    matches!(path, "/mcp-ui-proxy" | "/mcp-app-proxy" | "/mcp-app-guest")
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
            token: std::sync::Mutex::new(Some((gosling_util::random_hex(24), std::time::Instant::now()))),
            lifetime,
        }
    }

    pub fn peek(&self) -> Option<String> {
        lock(&self.token).as_ref().map(|(t, _)| t.clone())
    }

    /// True once for the right token within its lifetime; the token is gone afterwards. A
    /// wrong guess leaves it in place (guessing is limited by `Throttle`, per peer), so an
    /// attacker cannot spoil the link the user is about to open.
    pub fn redeem(&self, given: &str) -> bool {
        let mut token = lock(&self.token);
        let right = match token.as_ref() {
            Some((t, born)) => born.elapsed() < self.lifetime && secret_matches(given.as_bytes(), t.as_bytes()),
            None => false,
        };
        if right {
            token.take();
        }
        right
    }
}

/// The web page's sign-ins: `POST /auth/login` (the one-time link's token, or the key typed
/// once) opens one and sets its random id as an HttpOnly, SameSite=Strict cookie (Secure over
/// HTTPS), so the key itself never reaches the page's storage and every tab of the browser is
/// signed in. Kept in memory only: a restart signs every page out, as does `POST /auth/logout`
/// for its own; each lasts `lifetime` at most. The cookie stands for the key only on requests
/// the browser marks as the page's own (`routes::authorized`), never on `/acp`.
pub struct LoginSessions {
    ids: std::sync::Mutex<Vec<(String, std::time::Instant)>>,
    lifetime: std::time::Duration,
}

impl LoginSessions {
    /// Sign-ins kept at most; past it the oldest is signed out.
    const MAX: usize = 64;

    pub fn new(lifetime: std::time::Duration) -> LoginSessions {
        LoginSessions { ids: std::sync::Mutex::new(Vec::new()), lifetime }
    }

    pub fn lifetime(&self) -> std::time::Duration {
        self.lifetime
    }

    /// A new sign-in's id (32 random bytes, hex).
    pub fn open(&self) -> String {
        let id = gosling_util::random_hex(32);
        let mut ids = lock(&self.ids);
        let lifetime = self.lifetime;
        ids.retain(|(_, born)| born.elapsed() < lifetime);
        if ids.len() >= Self::MAX {
            ids.remove(0);
        }
        ids.push((id.clone(), std::time::Instant::now()));
        id
    }

    /// Whether `given` is a sign-in still open (compared in constant time with each).
    pub fn valid(&self, given: &str) -> bool {
        let ids = lock(&self.ids);
        let mut found = false;
        for (id, born) in ids.iter() {
            found |= secret_matches(given.as_bytes(), id.as_bytes()) && born.elapsed() < self.lifetime;
        }
        found
    }

    /// Signs `given` out; true when it was signed in.
    pub fn close(&self, given: &str) -> bool {
        let mut ids = lock(&self.ids);
        let before = ids.len();
        ids.retain(|(id, _)| !secret_matches(given.as_bytes(), id.as_bytes()));
        ids.len() != before
    }
}

/// The sign-in cookie's name for the server a request reached: the port is part of it, since
/// browsers share cookies across the ports of a host (two servers on one machine each keep
/// their own sign-in).
pub fn login_cookie_name(host_header: Option<&str>) -> String {
    let port = host_header
        .and_then(|h| h.rsplit_once(':'))
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    match port {
        Some(p) => format!("gosling_login_{p}"),
        None => "gosling_login".to_string(),
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').filter_map(|kv| kv.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v.trim())
}

/// Failed guesses at the secret key, a proxy page's `secret` or the login token, limited per peer address: a token
/// bucket of `BURST` wrong guesses, refilled at `PER_SEC`. Right guesses never touch it, so
/// any number of clients with the key work in parallel. An empty bucket refuses every attempt
/// (right or wrong) until it refills, so a refusal says nothing about the guess; wrong guesses
/// already in flight when it empties are still counted (the bucket goes into debt), so
/// parallel guessing cannot overdraw it. Guesses are counted per source (`Throttle::source`),
/// not per address: every loopback address is one source (a local process has all of 127/8),
/// and an IPv6 peer is its /64 (what one host is given).
pub struct Throttle {
    peers: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (f64, std::time::Instant)>>,
}

impl Throttle {
    /// Wrong guesses a peer may make in a row before it has to wait.
    pub const BURST: f64 = 30.0;
    /// Wrong guesses per second after that.
    pub const PER_SEC: f64 = 1.0;
    /// Peers remembered at most; past it, those with the fullest buckets are forgotten.
    const MAX_PEERS: usize = 4096;

    pub fn new() -> Throttle {
        Throttle { peers: std::sync::Mutex::new(std::collections::HashMap::new()) }
    }

    /// The source a peer's guesses count against: loopback (127/8, `::1`, and both mapped into
    /// IPv6) is one source, `127.0.0.1`; an IPv4-mapped address is its IPv4 address; another
    /// IPv6 address is its /64 network; an IPv4 address is itself.
    pub fn source(peer: std::net::IpAddr) -> std::net::IpAddr {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let v4 = match peer {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        };
        match (v4, peer) {
            (Some(a), _) if a.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            (Some(a), _) => IpAddr::V4(a),
            (None, IpAddr::V6(a)) if a.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            (None, IpAddr::V6(a)) => {
                let s = a.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
            (None, IpAddr::V4(a)) => IpAddr::V4(a),
        }
    }

    /// Whether `peer` may make an attempt now, or how long until it may.
    pub fn check(&self, peer: std::net::IpAddr) -> Result<(), std::time::Duration> {
        let peer = Self::source(peer);
        let now = std::time::Instant::now();
        let peers = lock(&self.peers);
        match peers.get(&peer) {
            Some((tokens, at)) => {
                let have = refill(*tokens, *at, now);
                if have < 1.0 {
                    Err(std::time::Duration::from_secs_f64((1.0 - have) / Self::PER_SEC))
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    /// Counts a wrong guess from `peer`; true when this one used up its attempts.
    pub fn failed(&self, peer: std::net::IpAddr) -> bool {
        let peer = Self::source(peer);
        let now = std::time::Instant::now();
        let mut peers = lock(&self.peers);
        if peers.len() >= Self::MAX_PEERS && !peers.contains_key(&peer) {
            let mut all: Vec<(std::net::IpAddr, f64)> =
                peers.iter().map(|(ip, (t, at))| (*ip, refill(*t, *at, now))).collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (ip, _) in all.into_iter().take(Self::MAX_PEERS / 4) {
                peers.remove(&ip);
            }
        }
        let (tokens, at) = peers.entry(peer).or_insert((Self::BURST, now));
        let before = refill(*tokens, *at, now);
        *tokens = (before - 1.0).max(-Self::BURST);
        *at = now;
        before >= 1.0 && *tokens < 1.0
    }
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new()
    }
}

fn refill(tokens: f64, at: std::time::Instant, now: std::time::Instant) -> f64 {
    (tokens + now.saturating_duration_since(at).as_secs_f64() * Throttle::PER_SEC).min(Throttle::BURST)
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
        assert!(!t.redeem(""));
        assert!(t.redeem(&tok), "a wrong guess does not burn the token");
        let t = LoginToken::new(std::time::Duration::ZERO);
        let tok = t.peek().unwrap();
        assert!(!t.redeem(&tok), "an expired token does not work");
    }

    #[test]
    fn login_sessions_open_check_close_and_expire() {
        let l = LoginSessions::new(std::time::Duration::from_secs(60));
        let id = l.open();
        assert_eq!(id.len(), 64);
        assert!(l.valid(&id) && !l.valid("") && !l.valid(&id[1..]));
        assert!(l.close(&id) && !l.valid(&id) && !l.close(&id));
        let l = LoginSessions::new(std::time::Duration::ZERO);
        assert!(!l.valid(&l.open()), "an expired sign-in is no sign-in");
        assert_eq!(login_cookie_name(Some("127.0.0.1:3000")), "gosling_login_3000");
        assert_eq!(login_cookie_name(Some("[::1]:80")), "gosling_login_80");
        assert_eq!(login_cookie_name(Some("localhost")), "gosling_login");
        assert_eq!(login_cookie_name(Some("h:x;y")), "gosling_login");
        assert_eq!(cookie(Some("a=1; gosling_login_3000=abc ; b=2"), "gosling_login_3000"), Some("abc"));
        assert_eq!(cookie(Some("xgosling_login=abc"), "gosling_login"), None);
    }

    #[test]
    fn throttle_limits_each_peer_on_wrong_guesses_only() {
        let t = Throttle::new();
        let a: std::net::IpAddr = [127, 0, 0, 1].into();
        let b: std::net::IpAddr = [10, 0, 0, 2].into();
        for i in 0..Throttle::BURST as usize {
            assert!(t.check(a).is_ok());
            assert_eq!(t.failed(a), i + 1 == Throttle::BURST as usize, "reports the attempt that used them up");
        }
        let wait = t.check(a).unwrap_err();
        assert!(wait > std::time::Duration::ZERO && wait <= std::time::Duration::from_secs(1), "{wait:?}");
        // Guesses already in flight still count: the wait grows.
        assert!(!t.failed(a));
        assert!(t.check(a).unwrap_err() > std::time::Duration::from_secs(1));
        assert!(t.check(b).is_ok(), "another peer is not affected");
        // Every loopback address is the same source: a local process cannot spread its guesses.
        for other in ["127.0.0.2", "127.255.1.9", "::1", "::ffff:127.0.0.3"] {
            assert!(t.check(other.parse().unwrap()).is_err(), "{other} shares 127.0.0.1's guesses");
        }
        // An IPv6 host is its /64.
        let v6a: std::net::IpAddr = "2001:db8:1:2::5".parse().unwrap();
        let v6b: std::net::IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        for _ in 0..Throttle::BURST as usize {
            t.failed(v6a);
        }
        assert!(t.check(v6b).is_err(), "the same /64 is one source");
        assert!(t.check("2001:db8:1:3::5".parse().unwrap()).is_ok());
        assert!(t.check("10.0.0.3".parse().unwrap()).is_ok());
    }
}
