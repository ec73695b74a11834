//! The MCP authorization client (spec 2025-11-25, "Authorization"), for Streamable HTTP.
//!
//! Owns: reading `WWW-Authenticate` challenges; protected-resource metadata (the challenge's
//! `resource_metadata`, else the path-based then the root well-known URL); authorization-server
//! metadata (RFC 8414 with path insertion, OIDC with path insertion, OIDC with path appending;
//! for a 2025-03-26 server without resource metadata, the server's origin and, failing that,
//! its `/authorize`, `/token`, `/register`); the client identity (pre-registered, a Client ID
//! Metadata Document URL, dynamic registration, else an error saying what to configure); PKCE
//! S256; the `resource` parameter; scope selection and step-up; the authorization code grant
//! through a one-shot loopback listener on 127.0.0.1; refresh.
//!
//! By concept: `metadata` (challenges, discovery, where requests may go), `flow` (client
//! identity, PKCE, exchange and refresh), `callback` (the loopback listener); here the
//! `Authorizer`, its tokens and the store.
//!
//! Does not own where tokens live: the layer above passes a `TokenStore` (the secrets store
//! for the server, memory for the conformance probe). Tokens, refresh tokens, client secrets
//! and codes are never logged and never put in an error message.

use crate::http_error::HttpFailure;
use dpop::{supports_dpop, Nonce};
use gosling_util::base64_encode;
use gosling_wire::percent::form_encode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod callback;
mod dpop;
mod flow;
mod grant;
mod jws;
mod metadata;
pub use callback::*;
pub use flow::*;
pub use grant::*;
pub use jws::SigningKey;
pub use metadata::*;

/// Where tokens are kept, keyed by `token_key(resource, issuer)`. Values are JSON and secret.
pub trait TokenStore: Send + Sync {
    fn get(&self, key: &str) -> Option<String>;
    /// Stores (`Some`) or forgets (`None`) a value. Failures are the store's to report.
    fn put(&self, key: &str, value: Option<&str>);
    /// Keys that start with `prefix`.
    fn keys(&self, prefix: &str) -> Vec<String>;
}

/// A store that lives as long as the process (the conformance probe, tests).
#[derive(Default)]
pub struct MemoryStore(Mutex<HashMap<String, String>>);

impl TokenStore for MemoryStore {
    fn get(&self, key: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }
    fn put(&self, key: &str, value: Option<&str>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match value {
            Some(v) => m.insert(key.to_string(), v.to_string()),
            None => m.remove(key),
        };
    }
    fn keys(&self, prefix: &str) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).keys().filter(|k| k.starts_with(prefix)).cloned().collect()
    }
}

/// How the person's browser step happens.
#[derive(Debug, Clone, Copy)]
pub enum SignIn {
    /// Show the URL with `show` (the command's own output: a library prints nothing), open it
    /// with the desktop's opener when there is one, then wait up to `wait` for the loopback
    /// redirect: `gosling auth`, `gosling probe`.
    Browser { wait: Duration, show: fn(&str) },
    /// Do not wait: listen in the background for this long, and fail the request with
    /// `SignInRequired { url }` so the caller can show the URL (the HTTP API).
    Background { wait: Duration },
    /// Fetch the authorization URL ourselves and follow its redirects to our listener: for
    /// tests and authorization servers that approve without a person.
    Follow,
}

/// The extension's OAuth settings (all optional) and where tokens go.
pub struct Settings {
    /// A pre-registered client (used first when set).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// Scopes to ask for in addition to those the server's challenge names.
    pub scopes: Vec<String>,
    /// A Client ID Metadata Document URL, used when the server supports those.
    pub client_metadata_url: Option<String>,
    /// `client_name` for dynamic registration.
    pub client_name: String,
    pub sign_in: SignIn,
    pub store: Arc<dyn TokenStore>,
}

/// Authorization rounds for one message (a sign-in, then one step-up) before giving up.
pub const MAX_ROUNDS: u32 = 2;

/// Largest metadata or token answer we read.
const MAX_BODY: u64 = 256 << 10;

/// A token is refreshed this long before it expires (at most a quarter of its lifetime).
const REFRESH_SKEW_SECS: i64 = 60;

const CALLBACK_PATH: &str = "/callback";

/// What we keep for one signed-in server. Serialized into the token store only.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Token {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    /// Unix seconds; none when the server gave no `expires_in`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    issued_at: i64,
    #[serde(default)]
    scope: String,
    issuer: String,
    resource: String,
    token_endpoint: String,
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    auth_method: String,
    /// Before the token: its requests carry DPoP proofs; after: the token is DPoP-bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dpop: bool,
}

impl Token {
    /// This token (or token-to-be) after a successful token answer `v`. A refresh token or
    /// scope the answer does not repeat stays as it was (RFC 6749 §6).
    fn renewed(&self, v: &Value) -> Token {
        let now = gosling_util::unix_secs();
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        Token {
            access_token: text("access_token").unwrap_or_default(),
            refresh_token: text("refresh_token").or_else(|| self.refresh_token.clone()),
            expires_at: v.get("expires_in").and_then(Value::as_i64).map(|s| now + s),
            issued_at: now,
            scope: text("scope").unwrap_or_else(|| self.scope.clone()),
            // Proofs were sent, and the server says it bound the token to the key (a server
            // that issued a Bearer token anyway gets it back as Bearer, RFC 9449 §5).
            dpop: self.dpop && text("token_type").is_some_and(|t| t.eq_ignore_ascii_case("dpop")),
            ..self.clone()
        }
    }
}

/// One protected MCP server's authorization state.
pub struct Authorizer {
    /// The MCP endpoint, as configured.
    server_url: String,
    extension: String,
    settings: Settings,
    agent: ureq::Agent,
    timeout: Duration,
    token: Mutex<Option<Token>>,
    /// The `forgets` generation of this server the cached token belongs to.
    forgets_seen: std::sync::atomic::AtomicU64,
    /// Held during a sign-in or refresh, so concurrent 401s start one flow.
    flow: Mutex<()>,
    /// How tokens are got (`with_grant`): a person's sign-in unless configured otherwise.
    grant: Grant,
    /// The client's key for `private_key_jwt` (`with_client_key`).
    client_key: Option<SigningKey>,
    /// This server's DPoP key, once loaded or made (`dpop`).
    dpop_key: Mutex<Option<Arc<SigningKey>>>,
    /// The last DPoP nonces of the token endpoint and of the MCP server.
    nonces: Mutex<(Option<String>, Option<String>)>,
}

/// How many times each server's sign-in was forgotten in this process (by resource): live
/// `Authorizer`s drop their cached token when it changes.
fn forgets() -> std::sync::MutexGuard<'static, HashMap<String, u64>> {
    static FORGETS: std::sync::OnceLock<Mutex<HashMap<String, u64>>> = std::sync::OnceLock::new();
    FORGETS.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Background sign-ins waiting for a browser, by server: the URL and until when (locked).
fn pending() -> std::sync::MutexGuard<'static, HashMap<String, (String, Instant)>> {
    static PENDING: std::sync::OnceLock<Mutex<HashMap<String, (String, Instant)>>> = std::sync::OnceLock::new();
    PENDING.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Why one sign-in attempt failed: the stored client was refused (register again), or
/// anything else.
enum SignInError {
    ClientRefused(String),
    /// The server shows no sign of OAuth (no metadata, no registration at the default path):
    /// callers report the server's own 401 instead, which says to configure headers.
    NotOAuth,
    Failed(HttpFailure),
}

impl From<HttpFailure> for SignInError {
    fn from(f: HttpFailure) -> SignInError {
        SignInError::Failed(f)
    }
}

impl SignInError {
    fn into_failure(self) -> HttpFailure {
        match self {
            SignInError::ClientRefused(why) => {
                HttpFailure::OAuth(format!("the authorization server refused the client: {why}"))
            }
            SignInError::NotOAuth => HttpFailure::Unauthorized { status: 401, challenge: None },
            SignInError::Failed(f) => f,
        }
    }
}

/// A ureq error as text for an OAuth message (never carries our request's headers).
fn oauth_io(e: &ureq::Error) -> String {
    Show(&HttpFailure::from_ureq(e, Duration::from_secs(0))).to_string()
}

struct Show<'a>(&'a HttpFailure);

impl std::fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::http_error::describe(f, "the authorization server", self.0)
    }
}

/// A bounded answer body as JSON (`Null` when it is not JSON or cannot be read).
fn json_body(resp: ureq::http::Response<ureq::Body>) -> Value {
    let body = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec().unwrap_or_default();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").field("server_url", &self.server_url).finish_non_exhaustive()
    }
}

impl Authorizer {
    pub fn new(server_url: &str, extension: &str, timeout: Duration, settings: Settings) -> Authorizer {
        let roots = crate::tls_roots::root_certs().unwrap_or_else(|e| {
            log::warn!("mcp: {extension}: {e}; using the platform's certificates for sign-in");
            ureq::tls::RootCerts::PlatformVerifier
        });
        let config = ureq::Agent::config_builder()
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(timeout.clamp(Duration::from_secs(5), Duration::from_secs(60))))
            .max_response_header_size(64 << 10)
            .proxy(ureq::Proxy::try_from_env())
            .user_agent(format!("gosling/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Authorizer {
            server_url: server_url.to_string(),
            extension: extension.to_string(),
            settings,
            agent: ureq::Agent::with_parts(
                config,
                ureq::unversioned::transport::DefaultConnector::new(),
                CheckedResolver { server_url: server_url.to_string(), server: std::sync::OnceLock::new() },
            ),
            timeout,
            token: Mutex::new(None),
            forgets_seen: std::sync::atomic::AtomicU64::new(0),
            flow: Mutex::new(()),
            grant: Grant::AuthorizationCode,
            client_key: None,
            dpop_key: Mutex::new(None),
            nonces: Mutex::new((None, None)),
        }
    }

    /// Gets tokens with `grant` instead of a person's sign-in (see `grant`).
    pub fn with_grant(mut self, grant: Grant) -> Authorizer {
        self.grant = grant;
        self
    }

    /// Authenticates the client at the token endpoint with a JWT signed by `key`
    /// (`private_key_jwt`) instead of a secret.
    pub fn with_client_key(mut self, key: SigningKey) -> Authorizer {
        self.client_key = Some(key);
        self
    }

    fn resource_id(&self) -> String {
        canonical_resource(&self.server_url)
    }

    fn current(&self) -> Option<Token> {
        let mut t = self.token.lock().unwrap_or_else(|p| p.into_inner());
        // Forgotten in this process since it was cached (`forget_all` of another Authorizer of
        // the same server, e.g. the web page's sign-out): read the store again.
        let generation = forgets().get(&self.resource_id()).copied().unwrap_or(0);
        if self.forgets_seen.swap(generation, std::sync::atomic::Ordering::SeqCst) != generation {
            *t = None;
        }
        if t.is_none() {
            *t = self.load();
        }
        t.clone()
    }

    fn load(&self) -> Option<Token> {
        let store = &self.settings.store;
        // Every issuer's key starts with the key of an empty issuer.
        let resource = self.resource_id();
        let mut keys = store.keys(&token_key(&resource, ""));
        keys.sort();
        keys.iter()
            .filter_map(|k| Some((k, serde_json::from_str::<Token>(&store.get(k)?).ok()?)))
            .find(|(k, t)| {
                // A token goes only to the server and authorization server it was issued for:
                // a record under this server's key that names another resource or issuer (a
                // store edited by hand, or by something else) is never sent.
                let bound = **k == token_key(&resource, &t.issuer) && resource_matches(&t.resource, &self.server_url);
                if !bound {
                    log::warn!(
                        "mcp: {}: ignoring a stored sign-in that was issued for another server or authorization server",
                        self.extension
                    );
                }
                bound
            })
            .map(|(_, t)| t)
    }

    fn save(&self, token: Token) {
        let key = token_key(&self.resource_id(), &token.issuer);
        match serde_json::to_string(&token) {
            Ok(v) => self.settings.store.put(&key, Some(&v)),
            Err(e) => log::warn!("mcp: {}: cannot serialize the token record: {e}", self.extension),
        }
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
    }

    fn forget(&self, token: &Token) {
        self.settings.store.put(&token_key(&self.resource_id(), &token.issuer), None);
        let mut t = self.token.lock().unwrap_or_else(|p| p.into_inner());
        if t.as_ref().is_some_and(|x| x.access_token == token.access_token) {
            *t = None;
        }
    }

    /// Whether a sign-in (a token record) is stored for this server: what "Sign out" would
    /// forget. Never the tokens.
    pub fn signed_in(&self) -> bool {
        !self.settings.store.keys(&token_key(&self.resource_id(), "")).is_empty()
    }

    /// Forgets every token and client registration stored for this server (`gosling auth
    /// NAME --forget`); the next request signs in afresh. Returns how many records went.
    pub fn forget_all(&self) -> usize {
        let _flow = self.flow.lock().unwrap_or_else(|p| p.into_inner());
        let store = &self.settings.store;
        let resource = self.resource_id();
        let mut keys = store.keys(&token_key(&resource, ""));
        keys.extend(store.keys(&registration_key(&resource, "")));
        for k in &keys {
            store.put(k, None);
        }
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *forgets().entry(resource).or_insert(0) += 1;
        keys.len()
    }

    /// The access token to send, refreshed first when it is about to expire. `None`: send no
    /// `Authorization` header (the server's 401 starts a sign-in).
    pub fn access_token(&self) -> Option<String> {
        let t = self.current()?;
        let now = gosling_util::unix_secs();
        if !needs_refresh(now, t.issued_at, t.expires_at) {
            return Some(t.access_token);
        }
        let _flow = self.flow.lock().unwrap_or_else(|p| p.into_inner());
        let t = self.current()?;
        if !needs_refresh(now, t.issued_at, t.expires_at) {
            return Some(t.access_token);
        }
        if t.refresh_token.is_some() {
            // A refused refresh forgets the tokens (refresh does that); one that got no
            // answer keeps them for the next try.
            match self.refresh(&t) {
                Ok(new) => return Some(new.access_token),
                Err(e) => log::warn!("mcp: {}: refreshing the access token failed: {}", self.extension, Show(&e)),
            }
        }
        if t.expires_at.is_some_and(|e| now >= e) {
            if t.refresh_token.is_none() {
                log::info!("mcp: {}: the access token expired; signing in again when the server asks", self.extension);
                self.forget(&t);
            }
            return None;
        }
        Some(t.access_token)
    }

    /// Handles a 401 or 403 for a request sent with `sent` (the token, if any) in authorization
    /// round `round` of that message. `Ok`: send it again. A 401 for a token that has a refresh
    /// token refreshes once (round 0); a failed refresh, or any other 401, signs in; a 403
    /// with `insufficient_scope` signs in again with the larger scope (step-up).
    pub fn on_challenge(
        self: &Arc<Self>,
        status: u16,
        challenge: Option<&str>,
        sent: Option<&str>,
        round: u32,
    ) -> Result<(), HttpFailure> {
        let ch = challenge.map(parse_challenge).unwrap_or_default();
        // A DPoP nonce the server wants (its `DPoP-Nonce` already kept): send it once more.
        if status == 401
            && ch.error.as_deref() == Some("use_dpop_nonce")
            && round == 0
            && self.nonce(Nonce::Resource).is_some()
        {
            return Ok(());
        }
        let step_up = status == 403 && ch.error.as_deref() == Some("insufficient_scope");
        if status == 403 && !step_up {
            return Err(HttpFailure::Unauthorized { status, challenge: challenge.map(str::to_string) });
        }
        if round >= MAX_ROUNDS {
            return Err(HttpFailure::OAuth(format!(
                "the server still refuses the request ({}) after {MAX_ROUNDS} rounds of signing in or refreshing; check which scopes the account may use (the extension's oauth.scopes) and the server's log",
                if step_up { "insufficient_scope" } else { "401" }
            )));
        }
        let _flow = self.flow.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current();
        if let (Some(cur), false) = (&current, step_up) {
            if sent != Some(cur.access_token.as_str()) {
                return Ok(()); // another request already refreshed or signed in
            }
            if round == 0 && cur.refresh_token.is_some() {
                match self.refresh(cur) {
                    Ok(_) => return Ok(()),
                    Err(e) => log::info!("mcp: {}: refresh failed ({}); signing in again", self.extension, Show(&e)),
                }
            }
            self.forget(cur);
        }
        let previous = current.filter(|_| step_up).map(|t| t.scope);
        self.sign_in_or_refusal(&ch, previous.as_deref(), status, challenge)
    }

    /// `sign_in`; for a server that shows no sign of OAuth, its own refusal (`status` and
    /// `challenge`) instead.
    fn sign_in_or_refusal(
        self: &Arc<Self>,
        ch: &Challenge,
        previous_scope: Option<&str>,
        status: u16,
        challenge: Option<&str>,
    ) -> Result<(), HttpFailure> {
        match self.sign_in(ch, previous_scope) {
            Err(SignInError::NotOAuth) => {
                Err(HttpFailure::Unauthorized { status, challenge: challenge.map(str::to_string) })
            }
            r => r.map_err(SignInError::into_failure),
        }
    }

    /// Signs in without waiting for the server's 401 (`gosling auth`): fetches the server's
    /// challenge with an unauthenticated initialize first. `Ok(false)`: the server did not ask
    /// for a sign-in (it answered without one).
    pub fn sign_in_now(self: &Arc<Self>) -> Result<bool, HttpFailure> {
        let _flow = self.flow.lock().unwrap_or_else(|p| p.into_inner());
        let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"gosling","version":"0"}}}"#;
        let resp = self
            .agent
            .post(&self.server_url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .send(body.as_bytes())
            .map_err(|e| HttpFailure::from_ureq(&e, self.timeout))?;
        let status = resp.status().as_u16();
        let challenge = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_string);
        let _ = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec();
        if status != 401 {
            return Ok(false);
        }
        let ch = challenge.as_deref().map(parse_challenge).unwrap_or_default();
        self.sign_in_or_refusal(&ch, None, status, challenge.as_deref()).map(|()| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn challenges_parse() {
        let c = parse_challenge(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
        assert_eq!(c.resource_metadata.as_deref(), Some("http://h/.well-known/oauth-protected-resource/mcp"));
        let c = parse_challenge("Bearer realm=x,error=invalid_token");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(parse_challenge("Bearer"), Challenge::default());
    }

    #[test]
    fn discovery_urls_follow_the_spec_order() {
        assert_eq!(
            prm_candidates("http://h:1/mcp"),
            ["http://h:1/.well-known/oauth-protected-resource/mcp", "http://h:1/.well-known/oauth-protected-resource"]
        );
        assert_eq!(prm_candidates("http://h:1"), ["http://h:1/.well-known/oauth-protected-resource"]);
        assert_eq!(
            as_metadata_candidates("https://a/tenant1"),
            [
                "https://a/.well-known/oauth-authorization-server/tenant1",
                "https://a/.well-known/openid-configuration/tenant1",
                "https://a/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            as_metadata_candidates("https://a/"),
            ["https://a/.well-known/oauth-authorization-server", "https://a/.well-known/openid-configuration"]
        );
    }

    #[test]
    fn resources_must_match_the_server() {
        assert!(resource_matches("http://h:1/mcp", "http://h:1/mcp"));
        assert!(resource_matches("http://h:1", "http://h:1/mcp"));
        assert!(resource_matches("HTTP://H:1/mcp/", "http://h:1/mcp"));
        assert!(!resource_matches("https://evil.example.com/mcp", "http://h:1/mcp"));
        assert!(!resource_matches("http://h:1/other", "http://h:1/mcp"));
        assert_eq!(canonical_resource("HTTP://Host:8/mcp/#x"), "http://host:8/mcp");
    }

    #[test]
    fn scopes_are_chosen_in_order() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(select_scopes(Some("a"), &[], Some(&s(&["x"])), None, None), s(&["a"]));
        assert_eq!(select_scopes(None, &[], Some(&s(&["x", "y"])), None, None), s(&["x", "y"]));
        assert!(select_scopes(None, &[], None, None, None).is_empty());
        assert_eq!(select_scopes(Some("b a"), &[], None, Some("a"), None), s(&["a", "b"]));
        assert_eq!(select_scopes(None, &s(&["c"]), Some(&s(&["x"])), None, None), s(&["c"]));
        assert_eq!(
            select_scopes(None, &[], Some(&s(&["x"])), None, Some(&s(&["x", "offline_access"]))),
            s(&["x", "offline_access"])
        );
        assert!(select_scopes(None, &[], None, None, Some(&s(&["offline_access"]))).is_empty());
    }

    #[test]
    fn pkce_challenge_of_the_rfc() {
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn forms_and_queries_round_trip() {
        assert_eq!(form_encode("a b&c=/é"), "a%20b%26c%3D%2F%C3%A9");
        let q = query_params("/callback?code=a%20b+c&state=x%2Fy&e=");
        assert_eq!(q, vec![("code".into(), "a b c".into()), ("state".into(), "x/y".into()), ("e".into(), "".into())]);
        assert_eq!(query_params("/cb?x=100%#frag"), vec![("x".into(), "100%".into())]);
    }

    #[test]
    fn refresh_happens_before_expiry() {
        assert!(!needs_refresh(100, 0, None));
        assert!(!needs_refresh(1000, 0, Some(3600)));
        assert!(needs_refresh(3550, 0, Some(3600)));
        assert!(!needs_refresh(2, 0, Some(10)));
        assert!(needs_refresh(8, 0, Some(10)));
    }

    #[test]
    fn addresses_are_placed_on_their_network() {
        let r = |s: &str| reach(s.parse().unwrap());
        assert_eq!(r("127.0.0.1"), Reach::Loopback);
        assert_eq!(r("0.0.0.0"), Reach::Loopback);
        assert_eq!(r("::1"), Reach::Loopback);
        assert_eq!(r("::ffff:127.0.0.1"), Reach::Loopback);
        assert_eq!(r("169.254.169.254"), Reach::LinkLocal);
        assert_eq!(r("fe80::1"), Reach::LinkLocal);
        for p in ["10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "fd00::1"] {
            assert_eq!(r(p), Reach::Private, "{p}");
        }
        for p in ["8.8.8.8", "172.32.0.1", "192.0.2.2", "2001:db8::1"] {
            assert_eq!(r(p), Reach::Public, "{p}");
        }
    }

    #[test]
    fn endpoints_go_only_where_the_server_may_send_us() {
        use Reach::*;
        // A public server: public https only.
        assert!(endpoint_allowed("https", &[Public], Public, false).is_ok());
        for inner in [Loopback, Private, LinkLocal] {
            let e = endpoint_allowed("https", &[Public, inner], Public, false).unwrap_err();
            assert!(e.contains(inner.name()), "{e}");
        }
        assert!(endpoint_allowed("http", &[Public], Public, false).unwrap_err().contains("not https"));
        assert!(endpoint_allowed("http", &[Public], Public, true).is_ok(), "the server's own plain-http host");
        // A private-network server: its network and the public one, never this machine's.
        assert!(endpoint_allowed("https", &[Private], Private, false).is_ok());
        assert!(endpoint_allowed("https", &[Loopback], Private, false).is_err());
        assert!(endpoint_allowed("https", &[LinkLocal], Private, false).is_err());
        // A server on this machine is a program the user runs: anything, plain http locally.
        for any in [Public, Private, LinkLocal, Loopback] {
            assert!(endpoint_allowed("https", &[any], Loopback, false).is_ok());
        }
        assert!(endpoint_allowed("http", &[Loopback], Loopback, false).is_ok());
    }

    #[test]
    fn urls_split_into_scheme_host_and_port() {
        let hp = |u: &str| host_port(u).map(|(s, h, p)| format!("{s} {h} {p}"));
        assert_eq!(hp("https://AS.example/token").as_deref(), Some("https as.example 443"));
        assert_eq!(hp("http://127.0.0.1:8080/x?y").as_deref(), Some("http 127.0.0.1 8080"));
        assert_eq!(hp("http://[::1]:9/x").as_deref(), Some("http ::1 9"));
        assert_eq!(hp("https://user@169.254.169.254/"), None, "user info is refused");
        assert_eq!(hp("file:///etc/passwd"), None);
        assert_eq!(hp("http://h:notaport/"), None);
    }

    #[test]
    fn error_answers_are_summarised_never_echoed() {
        let t = |v: Value| oauth_error_text(&v);
        assert_eq!(
            t(json!({"error": "invalid_grant", "error_description": "token abc123 revoked"})),
            ": invalid_grant"
        );
        assert_eq!(t(json!({"error": "db password is hunter2"})), ": an unrecognised error");
        // A token endpoint's refusal adds the server's own words (only with a registered code),
        // never a value the request carried (a refresh token it echoes), escaped and capped.
        let r = |v: Value| flow::token_refusal_text(&v, &["abc123", "verifier-xyz"]);
        assert_eq!(
            r(json!({"error": "invalid_grant", "error_description": "token abc123 revoked"})),
            ": invalid_grant (the authorization server says: \"token [redacted] revoked\")"
        );
        assert_eq!(r(json!({"error": "hunter2", "error_description": "hunter2"})), ": an unrecognised error");
        let long = r(json!({"error": "invalid_grant", "error_description": format!("\u{1b}[31m{}", "x".repeat(500))}));
        assert!(long.contains("\\u{1b}[31m") && !long.contains('\u{1b}'), "{long}");
        assert!(long.ends_with("…\")") && long.len() < flow::DESCRIPTION_MAX + 100, "{long}");
        assert_eq!(t(json!({"message": "internal"})), "");
        assert_eq!(oauth_error_code(&json!({"error": "invalid_client"})), Some("invalid_client"));
        assert_eq!(oauth_error_code(&json!({"error": "invalid_client_x"})), None);
    }

    #[test]
    fn redirects_resolve() {
        assert_eq!(resolve("http://a/b/c?x", "/d"), "http://a/d");
        assert_eq!(resolve("http://a/b/c", "d"), "http://a/b/d");
        assert_eq!(resolve("http://a/b", "http://127.0.0.1:5/callback?code=1"), "http://127.0.0.1:5/callback?code=1");
    }
}
