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
//! Does not own where tokens live: the layer above passes a `TokenStore` (the secrets store
//! for the server, memory for the conformance probe). Tokens, refresh tokens, client secrets
//! and codes are never logged and never put in an error message.

use crate::mcp::http_error::HttpFailure;
use crate::util::base64_encode;
use crate::wire::percent::form_encode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SignIn {
    /// Print the URL (and open it with the desktop's opener when there is one), then wait up
    /// to this long for the loopback redirect: `gosling auth`, `gosling probe`.
    Browser { wait: Duration },
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
}

impl Token {
    /// This token (or token-to-be) after a successful token answer `v`. A refresh token or
    /// scope the answer does not repeat stays as it was (RFC 6749 §6).
    fn renewed(&self, v: &Value) -> Token {
        let now = crate::util::unix_secs();
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        Token {
            access_token: text("access_token").unwrap_or_default(),
            refresh_token: text("refresh_token").or_else(|| self.refresh_token.clone()),
            expires_at: v.get("expires_in").and_then(Value::as_i64).map(|s| now + s),
            issued_at: now,
            scope: text("scope").unwrap_or_else(|| self.scope.clone()),
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
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").field("server_url", &self.server_url).finish_non_exhaustive()
    }
}

/// The parts of a `WWW-Authenticate: Bearer …` challenge we use.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Challenge {
    pub error: Option<String>,
    pub scope: Option<String>,
    pub resource_metadata: Option<String>,
}

/// Parses the Bearer challenge's auth-params (quoted or token values).
pub fn parse_challenge(header: &str) -> Challenge {
    let mut c = Challenge::default();
    let header = header.trim();
    let mut rest = match header.split_once(char::is_whitespace) {
        Some((scheme, r)) if scheme.eq_ignore_ascii_case("bearer") => r,
        _ if header.eq_ignore_ascii_case("bearer") => "",
        _ => header,
    };
    loop {
        rest = rest.trim_start_matches(|ch: char| ch == ',' || ch.is_ascii_whitespace());
        if rest.is_empty() {
            return c;
        }
        let end = rest.find(['=', ',']).unwrap_or(rest.len());
        let name = rest[..end].trim().to_ascii_lowercase();
        rest = &rest[end..];
        let Some(after) = rest.strip_prefix('=') else { continue };
        let after = after.trim_start_matches(' ');
        let value = if let Some(quoted) = after.strip_prefix('"') {
            // Up to the closing quote (or the end); a backslash escapes the next character.
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            rest = "";
            while let Some((i, ch)) = chars.next() {
                match ch {
                    '"' => {
                        rest = &quoted[i + 1..];
                        break;
                    }
                    '\\' => value.push(chars.next().map_or('\\', |(_, escaped)| escaped)),
                    _ => value.push(ch),
                }
            }
            value
        } else {
            let end = after.find(',').unwrap_or(after.len());
            rest = &after[end..];
            after[..end].trim().to_string()
        };
        match name.as_str() {
            "error" => c.error = Some(value),
            "scope" => c.scope = Some(value),
            "resource_metadata" => c.resource_metadata = Some(value),
            _ => {}
        }
    }
}

/// `scheme://authority` and the path (no query or fragment) of an http(s) URL.
fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let rest = rest.split(['#', '?']).next().unwrap_or("");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() {
        return None;
    }
    Some((format!("{scheme}://{}", authority.to_ascii_lowercase()), path.to_string()))
}

/// The canonical URI of an MCP server: lower-case scheme and host, no fragment or query, no
/// trailing slash on the path.
pub fn canonical_resource(url: &str) -> String {
    split_url(url).map_or_else(|| url.to_string(), |(origin, path)| format!("{origin}{}", path.trim_end_matches('/')))
}

/// Protected-resource metadata URLs to try for a server: path-based first, then the root.
pub fn prm_candidates(server_url: &str) -> Vec<String> {
    let Some((origin, path)) = split_url(server_url) else { return Vec::new() };
    let path = path.trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    out.push(format!("{origin}/.well-known/oauth-protected-resource"));
    out
}

/// Authorization-server metadata URLs to try for an issuer, in the spec's order.
pub fn as_metadata_candidates(issuer: &str) -> Vec<String> {
    let Some((origin, path)) = split_url(issuer) else { return Vec::new() };
    let path = path.trim_end_matches('/');
    let mut out = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        out.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    out
}

/// Whether a protected-resource metadata `resource` may stand for `server_url`: same origin,
/// and the server's path at or below the resource's.
pub fn resource_matches(resource: &str, server_url: &str) -> bool {
    let (Some((ro, rp)), Some((so, sp))) = (split_url(resource), split_url(server_url)) else { return false };
    let (rp, sp) = (rp.trim_end_matches('/'), sp.trim_end_matches('/'));
    ro == so && (sp == rp || sp.starts_with(&format!("{rp}/")) || rp.is_empty())
}

/// Scopes to ask for: the challenge's, else the configured ones, else the resource's
/// `scopes_supported`, else none; on a step-up, united with what the last token had.
/// `offline_access` is added when the authorization server lists it (for a refresh token).
pub fn select_scopes(
    challenge: Option<&str>,
    configured: &[String],
    resource_supported: Option<&[String]>,
    previous: Option<&str>,
    as_supported: Option<&[String]>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let add = |s: &str, out: &mut Vec<String>| {
        if !s.is_empty() && !out.iter().any(|x| x == s) {
            out.push(s.to_string());
        }
    };
    if let Some(c) = challenge.filter(|c| !c.trim().is_empty()) {
        if let Some(p) = previous {
            p.split_whitespace().for_each(|s| add(s, &mut out));
        }
        c.split_whitespace().for_each(|s| add(s, &mut out));
        configured.iter().for_each(|s| add(s, &mut out));
    } else if !configured.is_empty() {
        configured.iter().for_each(|s| add(s, &mut out));
    } else if let Some(sup) = resource_supported {
        sup.iter().for_each(|s| add(s, &mut out));
    }
    if !out.is_empty() && as_supported.is_some_and(|s| s.iter().any(|x| x == "offline_access")) {
        add("offline_access", &mut out);
    }
    out
}

/// Whether a token issued at `issued_at` and expiring at `expires_at` should be refreshed now.
pub fn needs_refresh(now: i64, issued_at: i64, expires_at: Option<i64>) -> bool {
    expires_at.is_some_and(|exp| now >= exp - REFRESH_SKEW_SECS.min((exp - issued_at).max(0) / 4))
}

/// The key of one server's token in the store: resource and issuer.
pub fn token_key(resource: &str, issuer: &str) -> String {
    format!("oauth:{resource} {issuer}")
}

/// The key of the client registered (dynamic registration) with `issuer` for `resource`.
/// Deliberately not under `token_key`'s prefix: loading tokens never reads it.
pub fn registration_key(resource: &str, issuer: &str) -> String {
    format!("oauth-client:{resource} {issuer}")
}

/// A client gosling registered with an authorization server (dynamic registration), kept
/// beside the tokens and reused by the next sign-in to the same server until it is refused.
#[derive(Clone, Serialize, Deserialize)]
struct Registration {
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    auth_method: String,
    /// The loopback redirect registered with it: its port is listened on again.
    redirect_uri: String,
}

/// The PKCE S256 challenge of a verifier.
pub fn pkce_challenge(verifier: &str) -> String {
    base64_encode(&crate::util::sha256(verifier.as_bytes()), true)
}

fn random_b64(n: usize) -> String {
    base64_encode(&crate::util::random_bytes(n), true)
}

fn form(pairs: &[(&str, impl AsRef<str>)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v.as_ref()))).collect::<Vec<_>>().join("&")
}

/// The query parameters of a URL or request target.
pub fn query_params(target: &str) -> Vec<(String, String)> {
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    crate::wire::percent::form_pairs(q.split('#').next().unwrap_or(""))
}

fn strings(v: &Value, key: &str) -> Option<Vec<String>> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// Which network an address is on, for where sign-in requests may go: an MCP server may send
/// gosling to an address on a network only when it is on that network itself (or on this
/// machine), so its metadata cannot make gosling reach what only gosling can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reach {
    Public,
    /// RFC 1918, shared address space (100.64/10), benchmarking (198.18/15), IPv6 ULA.
    Private,
    /// 169.254/16 (cloud metadata services live here), fe80::/10.
    LinkLocal,
    /// 127/8, 0/8, ::1, ::.
    Loopback,
}

impl Reach {
    fn name(self) -> &'static str {
        match self {
            Reach::Public => "public",
            Reach::Private => "private-network",
            Reach::LinkLocal => "link-local",
            Reach::Loopback => "loopback",
        }
    }
}

pub fn reach(ip: std::net::IpAddr) -> Reach {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            match (a, b) {
                (127, _) | (0, _) => Reach::Loopback,
                (169, 254) => Reach::LinkLocal,
                (10, _) | (192, 168) => Reach::Private,
                (172, b) if (16..32).contains(&b) => Reach::Private,
                (100, b) if (64..128).contains(&b) => Reach::Private,
                (198, 18 | 19) => Reach::Private,
                _ => Reach::Public,
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return reach(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() || v6.is_unspecified() {
                Reach::Loopback
            } else if first & 0xffc0 == 0xfe80 {
                Reach::LinkLocal
            } else if first & 0xfe00 == 0xfc00 {
                Reach::Private
            } else {
                Reach::Public
            }
        }
    }
}

/// Scheme, host (without brackets) and port of an http(s) URL; `None` for anything else,
/// user info (`user@host`) included.
fn host_port(url: &str) -> Option<(String, String, u16)> {
    let (origin, _) = split_url(url)?;
    let (scheme, authority) = origin.split_once("://")?;
    if authority.contains('@') {
        return None;
    }
    let default = if scheme == "https" { 443 } else { 80 };
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default,
    };
    (!host.is_empty()).then(|| (scheme.to_string(), host.to_string(), port))
}

/// Where every address of `host` is (an IP literal is not looked up).
fn host_reach(host: &str, port: u16) -> Result<Vec<Reach>, String> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![reach(ip)]);
    }
    // wait: the system resolver's own timeouts (as every connect of ureq's)
    let addrs =
        std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).map_err(|_| "it does not resolve".to_string())?;
    let out: Vec<Reach> = addrs.map(|a| reach(a.ip())).collect();
    if out.is_empty() {
        return Err("it has no address".into());
    }
    Ok(out)
}

/// Whether gosling may send a sign-in request to an endpoint whose addresses are `endpoint`
/// (scheme `scheme`) on behalf of an MCP server on `server` (the most internal of its
/// addresses). `same_plain_host`: the endpoint is on the server's own host and the server is
/// itself plain http (its tokens already travel that way). `Err`: why not.
pub fn endpoint_allowed(scheme: &str, endpoint: &[Reach], server: Reach, same_plain_host: bool) -> Result<(), String> {
    if let Some(r) = endpoint.iter().find(|&&r| r != Reach::Public && r != server && server != Reach::Loopback) {
        return Err(format!(
            "it is on a {} address and the MCP server is not (an MCP server may point only to its own network or the public one)",
            r.name()
        ));
    }
    let local = endpoint.iter().all(|&r| r == Reach::Loopback);
    if scheme != "https" && !local && !same_plain_host {
        return Err("it is not https (plain http only on this machine or the MCP server's own host)".into());
    }
    Ok(())
}

/// The most internal network the MCP server at `server_url` is on; a name that does not
/// resolve counts as public (the strictest).
fn server_reach(server_url: &str) -> Reach {
    host_port(server_url)
        .and_then(|(_, h, p)| host_reach(&h, p).ok())
        .and_then(|r| r.into_iter().max())
        .unwrap_or(Reach::Public)
}

/// The name resolver of the sign-in agent: every address a connection is about to use is
/// checked against the MCP server's network again (`endpoint_allowed`), so a name whose DNS
/// answer changed since `check_endpoint` looked (rebinding) is refused too. Through a proxy
/// the proxy resolves, and only `check_endpoint`'s look applies.
#[derive(Debug)]
struct CheckedResolver {
    server_url: String,
    server: std::sync::OnceLock<Reach>,
}

impl ureq::unversioned::resolver::Resolver for CheckedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        use ureq::unversioned::resolver::DefaultResolver;
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let server = *self.server.get_or_init(|| server_reach(&self.server_url));
        let reaches: Vec<Reach> = addrs.iter().map(|a| reach(a.ip())).collect();
        // The scheme was judged by `check_endpoint`; here only where the addresses are.
        endpoint_allowed("https", &reaches, server, true).map_err(|why| {
            ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("refusing to connect to {}: {why}", uri.host().unwrap_or("")),
            ))
        })?;
        Ok(addrs)
    }
}

/// What discovery found out about the authorization server.
struct Discovery {
    resource: String,
    resource_scopes: Option<Vec<String>>,
    issuer: String,
    meta: Value,
    /// Nothing was discovered: the 2025-03-26 default endpoints are a guess, and a server
    /// that does not do OAuth at all looks exactly like this.
    guessed: bool,
}

impl Authorizer {
    pub fn new(server_url: &str, extension: &str, timeout: Duration, settings: Settings) -> Authorizer {
        let roots = crate::mcp::tls_roots::root_certs().unwrap_or_else(|e| {
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
        }
    }

    fn resource_id(&self) -> String {
        canonical_resource(&self.server_url)
    }

    /// Refuses a sign-in request to `url` (the `what` of the authorization server) that the
    /// MCP server's own origin does not allow (`endpoint_allowed`), before anything is sent.
    fn check_endpoint(&self, what: &str, url: &str) -> Result<(), HttpFailure> {
        let refuse = |why: String| {
            Err(HttpFailure::OAuth(format!("refusing to contact the {what} {}: {why}", display_host(url))))
        };
        let Some((scheme, host, port)) = host_port(url) else {
            return refuse("it is not an http(s) URL".into());
        };
        let endpoint = match host_reach(&host, port) {
            Ok(r) => r,
            Err(why) => return refuse(why),
        };
        let server = host_port(&self.server_url);
        let server_reach = server_reach(&self.server_url);
        let same_plain_host =
            server.as_ref().is_some_and(|(s, h, _)| s == "http" && scheme == "http" && h.eq_ignore_ascii_case(&host));
        match endpoint_allowed(&scheme, &endpoint, server_reach, same_plain_host) {
            Ok(()) => Ok(()),
            Err(why) => {
                log::warn!("mcp: {}: {what} {}: {why}", self.extension, display_host(url));
                refuse(why)
            }
        }
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
        let now = crate::util::unix_secs();
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

    /// A JSON object from a 200 answer to a GET of `url`; `Err` when `url` is not one the
    /// server may send us to.
    fn get_json(&self, what: &str, url: &str) -> Result<Option<Value>, HttpFailure> {
        self.check_endpoint(what, url)?;
        Ok(self.fetch_json(url))
    }

    fn fetch_json(&self, url: &str) -> Option<Value> {
        let resp = self.agent.get(url).header("Accept", "application/json").call();
        let resp = resp.inspect_err(|e| log::debug!("mcp: {}: GET {url} failed: {e}", self.extension)).ok()?;
        let status = resp.status().as_u16();
        log::debug!("mcp: {}: GET {url} -> {status}", self.extension);
        (status == 200).then(|| json_body(resp)).filter(Value::is_object)
    }

    fn discover(&self, ch: &Challenge) -> Result<Discovery, HttpFailure> {
        let mut prm = match &ch.resource_metadata {
            Some(url) => self.get_json("protected-resource metadata", url)?,
            None => None,
        };
        for u in prm_candidates(&self.server_url) {
            if prm.is_some() {
                break;
            }
            prm = self.get_json("protected-resource metadata", &u)?;
        }
        let (resource, resource_scopes, issuer) = match &prm {
            Some(p) => {
                let resource = p.get("resource").and_then(Value::as_str).unwrap_or("").to_string();
                if !resource.is_empty() && !resource_matches(&resource, &self.server_url) {
                    return Err(HttpFailure::OAuth(format!(
                        "the server's protected-resource metadata names the resource {resource}, which is not {}; refusing to sign in (the metadata may be forged or misconfigured)",
                        self.server_url
                    )));
                }
                let issuer = strings(p, "authorization_servers").and_then(|a| a.into_iter().next()).ok_or_else(|| {
                    HttpFailure::OAuth("the server's protected-resource metadata lists no authorization_servers; the server is misconfigured".into())
                })?;
                let resource = if resource.is_empty() { self.resource_id() } else { resource };
                (resource, strings(p, "scopes_supported"), issuer)
            }
            // A 2025-03-26 server: its origin is the authorization server.
            None => {
                let (origin, _) = split_url(&self.server_url)
                    .ok_or_else(|| HttpFailure::BadUri("expected http://host[:port]/path".into()))?;
                (self.resource_id(), None, origin)
            }
        };
        self.check_endpoint("authorization server", &issuer)?;
        let meta = as_metadata_candidates(&issuer).iter().find_map(|u| self.fetch_json(u));
        let guessed = prm.is_none() && meta.is_none();
        let meta = match meta {
            Some(m) => m,
            None if prm.is_none() => {
                // 2025-03-26 fallback: the default endpoints at the server's origin.
                serde_json::json!({
                    "issuer": issuer,
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "registration_endpoint": format!("{issuer}/register"),
                })
            }
            None => {
                return Err(HttpFailure::OAuth(format!(
                    "no authorization server metadata found for {issuer} (tried {}); the server's authorization server is misconfigured or unreachable",
                    as_metadata_candidates(&issuer).join(", ")
                )))
            }
        };
        if ["authorization_endpoint", "token_endpoint"].iter().any(|k| meta.get(k).and_then(Value::as_str).is_none()) {
            return Err(HttpFailure::OAuth(format!(
                "the authorization server metadata of {issuer} lacks authorization_endpoint or token_endpoint"
            )));
        }
        for key in ["authorization_endpoint", "token_endpoint", "registration_endpoint", "revocation_endpoint"] {
            if let Some(url) = meta.get(key).and_then(Value::as_str) {
                self.check_endpoint(&key.replace('_', " "), url)?;
            }
        }
        if strings(&meta, "code_challenge_methods_supported")
            .is_some_and(|methods| !methods.iter().any(|m| m == "S256"))
        {
            return Err(HttpFailure::OAuth(format!(
                "the authorization server {issuer} does not support PKCE S256, which MCP requires; refusing to sign in"
            )));
        }
        Ok(Discovery { resource, resource_scopes, issuer, meta, guessed })
    }

    /// A client identity the extension configures: a pre-registered client, else a Client ID
    /// Metadata Document URL the server supports. `None`: dynamic registration.
    fn configured_identity(&self, d: &Discovery) -> Option<Registration> {
        if let Some(id) = &self.settings.client_id {
            let secret = self.settings.client_secret.clone();
            let auth_method = if secret.is_some() { secret_method(&d.meta) } else { "none".into() };
            return Some(Registration {
                client_id: id.clone(),
                client_secret: secret,
                auth_method,
                redirect_uri: String::new(),
            });
        }
        let url = self.settings.client_metadata_url.as_ref()?;
        (d.meta.get("client_id_metadata_document_supported").and_then(Value::as_bool) == Some(true)).then(|| {
            Registration {
                client_id: url.clone(),
                client_secret: None,
                auth_method: "none".into(),
                redirect_uri: String::new(),
            }
        })
    }

    /// The client registered with this server by an earlier sign-in, if any.
    fn stored_registration(&self, d: &Discovery) -> Option<Registration> {
        let v = self.settings.store.get(&registration_key(&self.resource_id(), &d.issuer))?;
        serde_json::from_str(&v).ok()
    }

    fn forget_registration(&self, d: &Discovery) {
        self.settings.store.put(&registration_key(&self.resource_id(), &d.issuer), None);
    }

    /// Dynamic client registration (RFC 7591) for `redirect_uri`; the client is kept in the
    /// token store for the next sign-in.
    fn register(&self, d: &Discovery, redirect_uri: &str) -> Result<Registration, SignInError> {
        let Some(reg) = d.meta.get("registration_endpoint").and_then(Value::as_str) else {
            return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                "the authorization server {} supports neither dynamic client registration nor (a configured) client ID metadata document; register a client with it and set the extension's oauth.client_id (and oauth.client_secret_key naming a stored secret), or set oauth.client_metadata_url",
                d.issuer
            ))));
        };
        self.check_endpoint("registration endpoint", reg)?;
        let supported = strings(&d.meta, "token_endpoint_auth_methods_supported").unwrap_or_default();
        let wanted = ["none", "client_secret_basic", "client_secret_post"]
            .into_iter()
            .find(|m| supported.iter().any(|s| s == m))
            .unwrap_or("none");
        let body = serde_json::json!({
            "client_name": self.settings.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
        });
        let resp = self
            .agent
            .post(reg)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| {
                HttpFailure::OAuth(format!(
                    "dynamic client registration at {} failed: {}",
                    display_host(reg),
                    oauth_io(&e)
                ))
            })?;
        let status = resp.status().as_u16();
        let v = json_body(resp);
        if !(200..300).contains(&status) {
            if d.guessed {
                // No metadata anywhere and no registration at the default path: this server
                // wants other credentials, not OAuth. The caller reports its own 401.
                return Err(SignInError::NotOAuth);
            }
            return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                "dynamic client registration at {} answered {status}{}; register a client by hand and set the extension's oauth.client_id",
                display_host(reg),
                oauth_error_text(&v)
            ))));
        }
        let id = v.get("client_id").and_then(Value::as_str).ok_or_else(|| {
            HttpFailure::OAuth(format!("dynamic client registration at {} returned no client_id", display_host(reg)))
        })?;
        let secret = v.get("client_secret").and_then(Value::as_str).map(str::to_string);
        let auth_method = match v.get("token_endpoint_auth_method").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None if secret.is_some() => secret_method(&d.meta),
            None => "none".into(),
        };
        log::info!("mcp: {}: registered a client with {}", self.extension, d.issuer);
        let r = Registration {
            client_id: id.to_string(),
            client_secret: secret,
            auth_method,
            redirect_uri: redirect_uri.into(),
        };
        match serde_json::to_string(&r) {
            Ok(text) => self.settings.store.put(&registration_key(&self.resource_id(), &d.issuer), Some(&text)),
            Err(e) => log::warn!("mcp: {}: cannot serialize the client registration: {e}", self.extension),
        }
        Ok(r)
    }

    /// The loopback listener and the client to sign in as: the configured client, else the
    /// one registered before (its redirect port listened on again), else a new registration.
    /// The flag says the client is a stored registration (which the server may have forgotten).
    fn listener_and_client(
        &self,
        d: &Discovery,
        reuse: bool,
    ) -> Result<(TcpListener, String, Registration, bool), SignInError> {
        let bind = |port: u16| {
            TcpListener::bind(("127.0.0.1", port))
                .map_err(|e| HttpFailure::OAuth(format!("cannot listen on 127.0.0.1 for the sign-in redirect: {e}")))
        };
        let fresh = || -> Result<(TcpListener, String), SignInError> {
            let listener = bind(0)?;
            let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            Ok((listener, format!("http://127.0.0.1:{port}{CALLBACK_PATH}")))
        };
        if let Some(client) = self.configured_identity(d) {
            let (listener, redirect_uri) = fresh()?;
            return Ok((listener, redirect_uri, client, false));
        }
        if let Some(reg) = self.stored_registration(d).filter(|_| reuse) {
            let port = reg.redirect_uri.strip_prefix("http://127.0.0.1:").and_then(|r| r.split('/').next());
            match port.and_then(|p| p.parse::<u16>().ok()).map(bind) {
                Some(Ok(listener)) => return Ok((listener, reg.redirect_uri.clone(), reg, true)),
                _ => log::info!(
                    "mcp: {}: the redirect port of the client registered before is taken; registering another",
                    self.extension
                ),
            }
        }
        let (listener, redirect_uri) = fresh()?;
        let reg = self.register(d, &redirect_uri)?;
        Ok((listener, redirect_uri, reg, false))
    }

    /// Whether the authorization server still knows a stored client: its authorization
    /// endpoint refuses an unknown client with a 4xx page instead of sending the browser on
    /// (RFC 6749 §4.1.2.1 forbids redirecting then), where a person would be stuck.
    fn client_refused(&self, url: &str) -> bool {
        if self.check_endpoint("authorization endpoint", url).is_err() {
            return false;
        }
        match self.agent.get(url).call() {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let _ = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec();
                matches!(status, 400 | 401)
            }
            Err(_) => false,
        }
    }

    /// The whole authorization code flow; on success the token is stored. A stored client
    /// the server refuses is forgotten, and a new one registered, once.
    fn sign_in(self: &Arc<Self>, ch: &Challenge, previous_scope: Option<&str>) -> Result<(), SignInError> {
        // A background sign-in already waiting for this server's browser: hand out its URL
        // again rather than start another listener (each /agent/resume would).
        let background = matches!(self.settings.sign_in, SignIn::Background { .. });
        if background && previous_scope.is_none() {
            if let Some(url) = pending()
                .get(&self.resource_id())
                .and_then(|(url, until)| (Instant::now() < *until).then(|| url.clone()))
            {
                return Err(HttpFailure::SignInRequired { url }.into());
            }
        }
        let d = self.discover(ch)?;
        match self.sign_in_as(&d, ch, previous_scope, true) {
            Err(SignInError::ClientRefused(why)) => {
                log::info!(
                    "mcp: {}: {} refused the client registered before ({why}); registering again",
                    self.extension,
                    d.issuer
                );
                self.forget_registration(&d);
                self.sign_in_as(&d, ch, previous_scope, false)
            }
            r => r,
        }
    }

    fn sign_in_as(
        self: &Arc<Self>,
        d: &Discovery,
        ch: &Challenge,
        previous_scope: Option<&str>,
        reuse: bool,
    ) -> Result<(), SignInError> {
        let background = matches!(self.settings.sign_in, SignIn::Background { .. });
        let (listener, redirect_uri, client, reused) = self.listener_and_client(d, reuse)?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let scopes = select_scopes(
            ch.scope.as_deref(),
            &self.settings.scopes,
            d.resource_scopes.as_deref(),
            previous_scope,
            strings(&d.meta, "scopes_supported").as_deref(),
        );
        let verifier = random_b64(32);
        let state = random_b64(16);
        let auth_endpoint = d.meta["authorization_endpoint"].as_str().unwrap_or_default();
        let scope = scopes.join(" ");
        let challenge = pkce_challenge(&verifier);
        let mut params = vec![
            ("response_type", "code"),
            ("client_id", &client.client_id),
            ("redirect_uri", &redirect_uri),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", &state),
        ];
        if !scope.is_empty() {
            params.push(("scope", &scope));
        }
        params.push(("resource", &d.resource));
        let sep = if auth_endpoint.contains('?') { '&' } else { '?' };
        let url = format!("{auth_endpoint}{sep}{}", form(&params));
        if reused && self.settings.sign_in != SignIn::Follow && self.client_refused(&url) {
            return Err(SignInError::ClientRefused("its authorization endpoint answered 4xx".into()));
        }
        let flow = Flow {
            client: Token {
                issuer: d.issuer.clone(),
                resource: d.resource.clone(),
                token_endpoint: d.meta["token_endpoint"].as_str().unwrap_or_default().to_string(),
                client_id: client.client_id,
                client_secret: client.client_secret,
                auth_method: client.auth_method,
                ..Token::default()
            },
            redirect_uri: redirect_uri.clone(),
            verifier,
            state,
        };
        let wait = match self.settings.sign_in {
            SignIn::Browser { wait } | SignIn::Background { wait } => wait,
            SignIn::Follow => self.timeout.max(Duration::from_secs(30)),
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let me = Arc::clone(self);
        let key = self.resource_id();
        let my_url = url.clone();
        if background {
            pending().insert(key.clone(), (url.clone(), Instant::now() + wait));
        }
        std::thread::Builder::new()
            .name(format!("oauth-callback-{}", self.extension))
            .spawn(move || {
                let r = me.await_callback(listener, &flow, Instant::now() + wait);
                if background {
                    let mut p = pending();
                    // Done (signed in, refused or timed out): forget it, unless a newer one replaced it.
                    if p.get(&key).is_some_and(|(u, _)| *u == my_url) {
                        p.remove(&key);
                    }
                }
                let _ = tx.send(r);
            })
            .map_err(|e| HttpFailure::OAuth(format!("cannot start the sign-in listener thread: {e}")))?;
        match self.settings.sign_in {
            SignIn::Background { .. } => {
                log::info!(
                    "mcp: {}: sign-in required; waiting for the browser at {}",
                    self.extension,
                    display_host(&url)
                );
                return Err(HttpFailure::SignInRequired { url }.into());
            }
            SignIn::Browser { .. } => {
                eprintln!(
                    "Sign in to `{}`: open this URL in a browser on this machine:\n\n  {url}\n\nThe browser comes back to 127.0.0.1:{port}; over SSH, forward it first: ssh -L {port}:127.0.0.1:{port} HOST\n",
                    self.extension
                );
                open_in_browser(&url);
            }
            SignIn::Follow => {
                if let Err(e) = self.follow(&url, &redirect_uri) {
                    // The listener waits for nobody now: wake it so it gives up at once.
                    let _ = TcpStream::connect(("127.0.0.1", port));
                    return Err(match e {
                        FollowError::Refused(status) if reused => {
                            SignInError::ClientRefused(format!("its authorization endpoint answered {status}"))
                        }
                        FollowError::Refused(status) => SignInError::Failed(HttpFailure::OAuth(format!(
                            "the authorization server answered {status} instead of approving; sign in with a browser (gosling auth NAME)"
                        ))),
                        FollowError::Failed(f) => SignInError::Failed(f),
                    });
                }
            }
        }
        let r = rx.recv_timeout(wait + Duration::from_secs(5)).unwrap_or_else(|_| {
            Err(HttpFailure::OAuth(format!("nobody finished signing in within {wait:?}; run it again")).into())
        });
        match r {
            // Only a stored registration is registered again; a new one refused is an error.
            Err(SignInError::ClientRefused(why)) if !reused => Err(SignInError::Failed(HttpFailure::OAuth(why))),
            r => r,
        }
    }

    /// Plays the browser: GET the authorization URL, then each redirect, until our listener
    /// (`redirect_uri`), whose own answer does not matter here: the exchange reports.
    fn follow(&self, url: &str, redirect_uri: &str) -> Result<(), FollowError> {
        let mut next = url.to_string();
        for _ in 0..10 {
            if next.starts_with(redirect_uri) {
                // Our own loopback listener: the one address the checked agent must not refuse.
                let local: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .max_redirects(0)
                    .timeout_global(Some(self.timeout.clamp(Duration::from_secs(5), Duration::from_secs(60))))
                    .proxy(None)
                    .build()
                    .into();
                let _ = local.get(&next).call().map(|r| r.into_body().into_with_config().limit(MAX_BODY).read_to_vec());
                return Ok(());
            }
            self.check_endpoint("authorization endpoint", &next).map_err(FollowError::Failed)?;
            let resp = self.agent.get(&next).call().map_err(|e| {
                FollowError::Failed(HttpFailure::OAuth(format!(
                    "fetching the authorization URL failed: {}",
                    oauth_io(&e)
                )))
            })?;
            let status = resp.status().as_u16();
            let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
            let _ = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec();
            match (status, location) {
                (300..=399, Some(l)) => next = resolve(&next, &l),
                (200..=299, _) => {
                    return Err(FollowError::Failed(HttpFailure::OAuth(format!(
                        "the authorization server shows a page at {} that needs a person (a login or consent form) instead of approving at once; --sign-in follow cannot fill it in: sign in with a browser (gosling auth NAME, without --sign-in follow)",
                        display_host(&next)
                    ))))
                }
                (s, _) => return Err(FollowError::Refused(s)),
            }
        }
        Err(FollowError::Failed(HttpFailure::OAuth("the authorization URL redirected more than 10 times".into())))
    }
    /// Waits for the redirect with our `state`, exchanges the code, stores the token, then
    /// answers the browser.
    fn await_callback(&self, listener: TcpListener, flow: &Flow, deadline: Instant) -> Result<(), SignInError> {
        let _ = listener.set_nonblocking(true);
        loop {
            // wait: the listener is non-blocking; the loop checks the deadline
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(SignInError::Failed(HttpFailure::OAuth(
                            "nobody finished signing in in time; run it again".into(),
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => {
                    return Err(SignInError::Failed(HttpFailure::OAuth(format!("the sign-in listener failed: {e}"))))
                }
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
            // The head must come whole within 10 s, and before the sign-in's deadline: a client
            // trickling a byte at a time cannot hold the listener past either.
            let Some(target) = read_request_target(&stream, deadline.min(Instant::now() + Duration::from_secs(10)))
            else {
                continue;
            };
            if !target.starts_with(CALLBACK_PATH) {
                respond(stream, 404, "Not found");
                continue;
            }
            let q = query_params(&target);
            let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if get("state").as_deref() != Some(flow.state.as_str()) {
                respond(stream, 400, "This sign-in link is stale or forged (state does not match); start again.");
                continue;
            }
            if let Some(err) = get("error") {
                respond(stream, 400, "Sign-in was refused; you can close this tab.");
                let code = known_error_code(&err).unwrap_or("an unrecognised error");
                return Err(SignInError::Failed(HttpFailure::OAuth(format!(
                    "the authorization server refused the sign-in: {code}"
                ))));
            }
            let Some(code) = get("code") else {
                respond(stream, 400, "The redirect carries no code.");
                continue;
            };
            return match self.exchange(flow, &code) {
                Ok(()) => {
                    respond(stream, 200, "Signed in. You can close this tab and return to gosling.");
                    Ok(())
                }
                Err(e) => {
                    let client_refused =
                        matches!(&e, TokenError::Refused { code: Some(c), .. } if c == "invalid_client");
                    let f = e.into_failure();
                    respond(stream, 500, &format!("Signing in failed: {}", Show(&f)));
                    match f {
                        HttpFailure::OAuth(why) if client_refused => Err(SignInError::ClientRefused(why)),
                        f => Err(SignInError::Failed(f)),
                    }
                }
            };
        }
    }

    /// POSTs a token request as the client `t` names (its endpoint, id, secret and method).
    fn token_request(&self, t: &Token, mut params: Vec<(&str, String)>) -> Result<Value, TokenError> {
        let endpoint = &t.token_endpoint;
        // A token's refresh goes only to the token endpoint it was issued by, and only if the
        // server may still send us there.
        self.check_endpoint("token endpoint", endpoint).map_err(|f| TokenError::Refused { failure: f, code: None })?;
        let mut req = self.agent.post(endpoint).header("Accept", "application/json");
        match (t.auth_method.as_str(), &t.client_secret) {
            ("client_secret_basic", Some(secret)) => {
                let cred =
                    base64_encode(format!("{}:{}", form_encode(&t.client_id), form_encode(secret)).as_bytes(), false);
                req = req.header("Authorization", format!("Basic {cred}"));
                // RFC 6749 lets Basic stand alone, but the authorization servers people run
                // (the Python SDK's, rmcp's) refuse a token request without `client_id`, and
                // every SDK client sends it: so do we.
                params.push(("client_id", t.client_id.clone()));
            }
            ("client_secret_post", Some(secret)) => {
                params.push(("client_id", t.client_id.clone()));
                params.push(("client_secret", secret.clone()));
            }
            _ => params.push(("client_id", t.client_id.clone())),
        }
        let resp = req
            .header("Content-Type", "application/x-www-form-urlencoded")
            .send(form(&params).as_bytes())
            .map_err(|e| {
                TokenError::Unreachable(HttpFailure::OAuth(format!(
                    "the token request to {} failed: {}",
                    display_host(endpoint),
                    oauth_io(&e)
                )))
            })?;
        let status = resp.status().as_u16();
        let v = json_body(resp);
        if !(200..300).contains(&status) || v.get("access_token").and_then(Value::as_str).is_none() {
            return Err(TokenError::Refused {
                failure: HttpFailure::OAuth(format!(
                    "the token endpoint {} answered {status}{}",
                    display_host(endpoint),
                    oauth_error_text(&v)
                )),
                code: oauth_error_code(&v).map(str::to_string),
            });
        }
        Ok(v)
    }

    fn exchange(&self, flow: &Flow, code: &str) -> Result<(), TokenError> {
        let params = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_string()),
            ("redirect_uri", flow.redirect_uri.clone()),
            ("code_verifier", flow.verifier.clone()),
            ("resource", flow.client.resource.clone()),
        ];
        let v = self.token_request(&flow.client, params)?;
        let token = flow.client.renewed(&v);
        log::info!("mcp: {}: signed in with {}", self.extension, flow.client.issuer);
        self.save(token);
        Ok(())
    }

    fn refresh(&self, t: &Token) -> Result<Token, HttpFailure> {
        let Some(rt) = &t.refresh_token else {
            return Err(HttpFailure::OAuth("no refresh token".into()));
        };
        let params = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", rt.clone()),
            ("resource", t.resource.clone()),
        ];
        let v = match self.token_request(t, params) {
            Ok(v) => v,
            Err(TokenError::Refused { failure, code }) => {
                // The refresh token is spent or revoked: forget it so the next 401 signs in;
                // a client the server no longer knows is registered again then.
                self.forget(t);
                if code.as_deref() == Some("invalid_client") {
                    self.settings.store.put(&registration_key(&self.resource_id(), &t.issuer), None);
                }
                return Err(failure);
            }
            // Unreachable for now: keep the token and its refresh token for the next try.
            Err(TokenError::Unreachable(e)) => return Err(e),
        };
        let new = t.renewed(&v);
        log::info!("mcp: {}: refreshed the access token", self.extension);
        self.save(new.clone());
        Ok(new)
    }
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

/// The first of the client-secret methods the authorization server lists, else Basic.
fn secret_method(meta: &Value) -> String {
    let supported = strings(meta, "token_endpoint_auth_methods_supported").unwrap_or_default();
    ["client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| supported.iter().any(|s| s == m))
        .unwrap_or("client_secret_basic")
        .to_string()
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

/// How playing the browser failed: a status other than a redirect or a page, or otherwise.
enum FollowError {
    Refused(u16),
    Failed(HttpFailure),
}

/// A failed token request: no answer (keep what we have), or an answer refusing it.
enum TokenError {
    Unreachable(HttpFailure),
    /// With the answer's registered OAuth error code, if it had one.
    Refused {
        failure: HttpFailure,
        code: Option<String>,
    },
}

impl TokenError {
    fn into_failure(self) -> HttpFailure {
        match self {
            TokenError::Unreachable(f) | TokenError::Refused { failure: f, .. } => f,
        }
    }
}

/// One sign-in waiting for its redirect.
struct Flow {
    /// The token record to be: issuer, resource, token endpoint and client, no token yet.
    client: Token,
    redirect_uri: String,
    verifier: String,
    state: String,
}

/// The origin of a URL, for log lines that must not carry query strings.
fn display_host(url: &str) -> String {
    split_url(url).map(|(o, p)| format!("{o}{p}")).unwrap_or_default()
}

fn resolve(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    match split_url(base) {
        Some((origin, _)) if location.starts_with('/') => format!("{origin}{location}"),
        Some((origin, path)) => {
            let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            format!("{origin}{dir}/{location}")
        }
        None => location.to_string(),
    }
}

/// A ureq error as text for an OAuth message (never carries our request's headers).
fn oauth_io(e: &ureq::Error) -> String {
    Show(&HttpFailure::from_ureq(e, Duration::from_secs(0))).to_string()
}

struct Show<'a>(&'a HttpFailure);
impl std::fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::mcp::http_error::describe(f, "the authorization server", self.0)
    }
}

/// A bounded answer body as JSON (`Null` when it is not JSON or cannot be read).
fn json_body(resp: ureq::http::Response<ureq::Body>) -> Value {
    let body = resp.into_body().into_with_config().limit(MAX_BODY).read_to_vec().unwrap_or_default();
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// The error codes OAuth registers (RFC 6749 §4.1.2.1 and §5.2, RFC 7591 §3.2.2, RFC 8707,
/// RFC 6750): the only text of an authorization server's error answer we repeat.
const OAUTH_ERROR_CODES: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "access_denied",
    "unsupported_response_type",
    "server_error",
    "temporarily_unavailable",
    "invalid_redirect_uri",
    "invalid_client_metadata",
    "invalid_software_statement",
    "unapproved_software_statement",
    "invalid_target",
    "invalid_token",
    "insufficient_scope",
];

/// The registered OAuth error code of an error answer, if it has one.
fn oauth_error_code(v: &Value) -> Option<&'static str> {
    known_error_code(v.get("error").and_then(Value::as_str)?)
}

fn known_error_code(code: &str) -> Option<&'static str> {
    OAUTH_ERROR_CODES.iter().find(|c| **c == code).copied()
}

/// `: CODE` for an error answer with a registered OAuth error code, `: an unrecognised error`
/// for one with another, else nothing. Never echoes the answer itself (its description, or an
/// internal service's error page, stays out of our messages).
fn oauth_error_text(v: &Value) -> String {
    match (v.get("error").and_then(Value::as_str), oauth_error_code(v)) {
        (_, Some(code)) => format!(": {code}"),
        (Some(_), None) => ": an unrecognised error".into(),
        _ => String::new(),
    }
}

/// Reads one HTTP request head (at most 16 KiB, all of it before `until`) and returns its
/// target.
fn read_request_target(stream: &TcpStream, until: Instant) -> Option<String> {
    let mut reader = BufReader::new(std::io::Read::take(stream, 16 << 10));
    // Each read may wait only for what is left of the time.
    let time_left = || {
        let left = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).ok()
    };
    let mut line = String::new();
    time_left()?;
    reader.read_line(&mut line).ok()?; // wait: bounded by the read timeout set just above
    let mut parts = line.split_whitespace();
    let (is_get, target) = (parts.next()? == "GET", parts.next()?.to_string());
    // The header lines, up to the blank line or the end.
    loop {
        line.clear();
        time_left()?;
        // wait: bounded by the read timeout set just above
        if !matches!(reader.read_line(&mut line), Ok(n) if n > 0 && !line.trim().is_empty()) {
            break;
        }
    }
    is_get.then_some(target)
}

fn respond(mut stream: TcpStream, status: u16, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>gosling sign-in</title><p>{}</p>",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// Opens `url` with the desktop's opener when there is a desktop (argv, never a shell).
pub fn open_in_browser(url: &str) {
    let cmd = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some() {
        "xdg-open"
    } else {
        return;
    };
    let spawned = std::process::Command::new(cmd)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reap it on a thread so no zombie is left behind.
        Ok(mut child) => {
            // wait: the opener (xdg-open and the like) returns at once
            let _ = std::thread::Builder::new().name("opener".into()).spawn(move || child.wait());
        }
        Err(e) => log::debug!("mcp: cannot run {cmd}: {e}"),
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
