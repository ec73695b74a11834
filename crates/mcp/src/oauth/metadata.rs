//! What a protected MCP server and its authorization server publish, and where gosling may go
//! because of it: `WWW-Authenticate` challenges, protected-resource and authorization-server
//! metadata discovery (the spec's URL orders), canonical resources and scopes, the store keys,
//! and the endpoint policy (`Reach`, `endpoint_allowed`, `Authorizer::check_endpoint`, the
//! sign-in agent's `CheckedResolver`); error answers summarised to registered OAuth codes.

use super::*;

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
        Some((scheme, r)) if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("dpop") => r,
        _ if header.eq_ignore_ascii_case("bearer") || header.eq_ignore_ascii_case("dpop") => "",
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

/// An http(s) URL read by `http::Uri` (already in the build through ureq): its scheme,
/// lower-cased, and authority; `None` for anything else.
fn http_uri(url: &str) -> Option<(String, ureq::http::Uri)> {
    let uri: ureq::http::Uri = url.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    if (scheme != "http" && scheme != "https") || uri.authority().is_none_or(|a| a.as_str().is_empty()) {
        return None;
    }
    Some((scheme, uri))
}

/// `scheme://authority` and the path (no query or fragment) of an http(s) URL.
pub(super) fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, uri) = http_uri(url)?;
    let authority = uri.authority()?.as_str().to_ascii_lowercase();
    // `Uri` reads an absent path as `/`; the path as written is kept (`/` and none differ).
    let path =
        if uri.path() == "/" && !url.split(['?', '#']).next().unwrap_or("").ends_with('/') { "" } else { uri.path() };
    Some((format!("{scheme}://{authority}"), path.to_string()))
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

/// The query parameters of a URL or request target.
pub fn query_params(target: &str) -> Vec<(String, String)> {
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    gosling_wire::percent::form_pairs(q.split('#').next().unwrap_or(""))
}

pub(super) fn strings(v: &Value, key: &str) -> Option<Vec<String>> {
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
    pub(super) fn name(self) -> &'static str {
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
pub(super) fn host_port(url: &str) -> Option<(String, String, u16)> {
    let (scheme, uri) = http_uri(url)?;
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    // `Authority` leaves a port that is not a number out rather than refusing it.
    let after_host = &authority.as_str()[authority.as_str().rfind(']').map_or(0, |i| i + 1)..];
    let port = match authority.port_u16() {
        Some(p) => p,
        None if after_host.contains(':') => return None,
        None if scheme == "https" => 443,
        None => 80,
    };
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    (!host.is_empty()).then_some((scheme, host, port))
}

/// Where every address of `host` is (an IP literal is not looked up).
pub(super) fn host_reach(host: &str, port: u16) -> Result<Vec<Reach>, String> {
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
pub(super) fn server_reach(server_url: &str) -> Reach {
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
pub(super) struct CheckedResolver {
    pub(super) server_url: String,
    pub(super) server: std::sync::OnceLock<Reach>,
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
pub(super) struct Discovery {
    pub(super) resource: String,
    pub(super) resource_scopes: Option<Vec<String>>,
    pub(super) issuer: String,
    pub(super) meta: Value,
    /// Nothing was discovered: the 2025-03-26 default endpoints are a guess, and a server
    /// that does not do OAuth at all looks exactly like this.
    pub(super) guessed: bool,
}

/// The first of the client-secret methods the authorization server lists, else Basic.
pub(super) fn secret_method(meta: &Value) -> String {
    let supported = strings(meta, "token_endpoint_auth_methods_supported").unwrap_or_default();
    ["client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| supported.iter().any(|s| s == m))
        .unwrap_or("client_secret_basic")
        .to_string()
}

/// The origin of a URL, for log lines that must not carry query strings.
pub(super) fn display_host(url: &str) -> String {
    split_url(url).map(|(o, p)| format!("{o}{p}")).unwrap_or_default()
}

pub(super) fn resolve(base: &str, location: &str) -> String {
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

/// The error codes OAuth registers (RFC 6749 §4.1.2.1 and §5.2, RFC 7591 §3.2.2, RFC 8707,
/// RFC 6750): the only text of an authorization server's error answer we repeat.
pub(super) const OAUTH_ERROR_CODES: &[&str] = &[
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
pub(super) fn oauth_error_code(v: &Value) -> Option<&'static str> {
    known_error_code(v.get("error").and_then(Value::as_str)?)
}

pub(super) fn known_error_code(code: &str) -> Option<&'static str> {
    OAUTH_ERROR_CODES.iter().find(|c| **c == code).copied()
}

/// `: CODE` for an error answer with a registered OAuth error code, `: an unrecognised error`
/// for one with another, else nothing. Never echoes the answer itself (its description, or an
/// internal service's error page, stays out of our messages).
pub(super) fn oauth_error_text(v: &Value) -> String {
    match (v.get("error").and_then(Value::as_str), oauth_error_code(v)) {
        (_, Some(code)) => format!(": {code}"),
        (Some(_), None) => ": an unrecognised error".into(),
        _ => String::new(),
    }
}

impl Authorizer {
    /// Refuses a sign-in request to `url` (the `what` of the authorization server) that the
    /// MCP server's own origin does not allow (`endpoint_allowed`), before anything is sent.
    pub(super) fn check_endpoint(&self, what: &str, url: &str) -> Result<(), HttpFailure> {
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

    /// A JSON object from a 200 answer to a GET of `url`; `Err` when `url` is not one the
    /// server may send us to.
    pub(super) fn get_json(&self, what: &str, url: &str) -> Result<Option<Value>, HttpFailure> {
        self.check_endpoint(what, url)?;
        Ok(self.fetch_json(url))
    }

    pub(super) fn fetch_json(&self, url: &str) -> Option<Value> {
        let resp = self.agent.get(url).header("Accept", "application/json").call();
        let resp = resp.inspect_err(|e| log::debug!("mcp: {}: GET {url} failed: {e}", self.extension)).ok()?;
        let status = resp.status().as_u16();
        log::debug!("mcp: {}: GET {url} -> {status}", self.extension);
        (status == 200).then(|| json_body(resp)).filter(Value::is_object)
    }

    pub(super) fn discover(&self, ch: &Challenge) -> Result<Discovery, HttpFailure> {
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
        // RFC 8414 §3.3: metadata names the issuer its well-known URL was built from, exactly;
        // other metadata (poisoned or misplaced) is not used at all. (A 2025-03-26 server
        // without resource metadata names no issuer: its origin was a guess, not an identifier.)
        if let Some(named) = meta.get("issuer").and_then(Value::as_str).filter(|_| prm.is_some()) {
            if named != issuer {
                return Err(HttpFailure::OAuth(format!(
                    "the authorization server metadata found for {issuer} names another issuer ({}); refusing to use it (RFC 8414 §3.3: it may be forged or misconfigured)",
                    display_host(named)
                )));
            }
        }
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
}
