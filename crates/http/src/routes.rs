//! The route table: auth first, then `(path, method)` to a handler. Unknown paths are 404,
//! known paths with another method are 405 with `Allow`.

use crate::acp_routes as acp;
use crate::agent_routes as agent;
use crate::auth;
use crate::config_routes as config;
use crate::desktop_routes as desktop;
use crate::error::ApiError;
use crate::install_routes as install;
use crate::proxy;
use crate::reply_routes as reply;
use crate::server::{Request, Response, STATUS_BODY, STATUS_TYPE};
use crate::session_routes as session;
use crate::state::App;
use std::sync::Arc;

/// What a request gets from its head alone, before a request slot is taken or its body read
/// (`server::Gate`): a wrong Host, a refused origin, a CORS preflight, a peer over its guess
/// limit, a missing or wrong key are answered at once, so no client without the key holds a
/// slot. `None`: the request goes on to `handle`.
pub fn gate(app: &Arc<App>, req: &Request) -> Option<Response> {
    // DNS rebinding: a page of another site, its name re-pointed at 127.0.0.1, would reach
    // every route (and the web page) under its own origin; only our own names are answered.
    if let Err(e) = host_allowed(app.config(), req) {
        return Some(Response::error(&e));
    }
    // The built-in web page: public static assets, same-origin only (never CORS headers).
    if let Some(r) = super::web_routes::serve(req.method, req.path) {
        return Some(r);
    }
    let origin = match origin_allowed(app.config(), req, token_required(app)) {
        Ok(o) => o,
        Err(e) => return Some(Response::error(&e)),
    };
    let cors = |resp: Response| match &origin {
        Some(o) => with_cors(resp, o),
        None => resp,
    };
    if req.method == "OPTIONS" {
        return Some(match &origin {
            Some(o) => with_cors(Response::empty(204), o)
                .with_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
                .with_header(
                    "Access-Control-Allow-Headers",
                    "content-type, accept, x-secret-key, acp-connection-id, acp-session-id",
                )
                .with_header("Access-Control-Max-Age", "600"),
            None => Response::error(&ApiError::new(
                403,
                "cross-origin requests are not allowed from this origin; add it to GOSLING_CORS_ORIGINS if it is yours",
            )),
        });
    }
    // Every secret comparison is a guess limited per peer (wrong ones count): the key (header
    // or `/acp`'s `?token=`), the login token, and the proxy pages' `secret` parameter.
    let peer = peer_ip(req);
    let guessing = login_or_proxy(req) || (!auth::is_exempt(req.path) && !given_key(req).is_empty());
    if guessing {
        if let Err(wait) = app.throttle.check(peer) {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            log::debug!("http: refusing an attempt from {peer} for {secs} s (too many failed ones)");
            let e = ApiError::new(
                429,
                format!(
                    "too many failed attempts at the secret key, the `secret` parameter or the login token from {peer}; \
                     wait {secs} s and try again"
                ),
            );
            return Some(cors(Response::error(&e).with_header("Retry-After", &secs.to_string())));
        }
    }
    if let Err(e) = authorized(app, req) {
        if !given_key(req).is_empty() && app.throttle.failed(peer) {
            warn_limited(peer);
        }
        return Some(cors(Response::error(&e)));
    }
    None
}

pub fn handle(app: &Arc<App>, req: &Request) -> Response {
    // The server has already passed the head through `gate`; checking again costs little and
    // keeps this function whole on its own.
    if let Some(r) = gate(app, req) {
        return r;
    }
    let origin = origin_allowed(app.config(), req, token_required(app)).ok().flatten();
    let resp: Response = route(app, req).into();
    // The login route and the proxy pages answer 401 only for a wrong (or missing) secret.
    if login_or_proxy(req) && resp.status == 401 && app.throttle.failed(peer_ip(req)) {
        warn_limited(peer_ip(req));
    }
    match origin {
        Some(o) => with_cors(resp, &o),
        None => resp,
    }
}

fn peer_ip(req: &Request) -> std::net::IpAddr {
    req.peer.map(|p| p.ip()).unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]))
}

/// The routes that compare a secret of their own (login token, proxy `secret`).
fn login_or_proxy(req: &Request) -> bool {
    (req.path == "/auth/login" && req.method == "POST") || auth::checks_own_secret(req.path)
}

fn warn_limited(peer: std::net::IpAddr) {
    log::warn!(
        "http: too many wrong keys, secrets or login tokens from {peer}; refusing its attempts for a while (429)"
    );
}

/// The `Host` names we answer: `localhost`, `127.0.0.1`, `[::1]`, the address given with
/// `--host`/`GOOSE_HOST`, and `GOSLING_ALLOWED_HOSTS`, each with any port.
fn host_allowed(config: &gosling_config::Config, req: &Request) -> Result<(), ApiError> {
    let refuse = |why: String| {
        Err(ApiError::new(
            403,
            format!(
                "{why}; gosling answers only requests addressed to localhost, 127.0.0.1, [::1] or the address it was \
                 started with (--host), so that a web page cannot reach it through DNS rebinding; list other names \
                 in GOSLING_ALLOWED_HOSTS"
            ),
        ))
    };
    let Some(host) = req.header("host") else {
        return refuse("the request has no Host header".into());
    };
    let Some(name) = host_name(host) else {
        return refuse(format!("Host `{host}` is not a valid host[:port]"));
    };
    // The address given with --host is formatted only when the fixed names do not match (a
    // formatted address per request was a measurable share of `GET /status`, issue 30).
    let own = || match config.host {
        std::net::IpAddr::V4(a) if !a.is_unspecified() => Some(a.to_string()),
        std::net::IpAddr::V6(a) if !a.is_unspecified() => Some(format!("[{a}]")),
        _ => None,
    };
    // Compared without case, in place (the listed names are kept in lower case).
    let ok = ["localhost", "127.0.0.1", "[::1]"].iter().any(|n| n.eq_ignore_ascii_case(name))
        || own().is_some_and(|a| a.eq_ignore_ascii_case(name))
        || config.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(name));
    if ok {
        Ok(())
    } else {
        refuse(format!("Host `{host}` is not this server's name"))
    }
}

/// The name part of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`), or `None`
/// when it is malformed.
fn host_name(host: &str) -> Option<&str> {
    let (name, rest) = match host.strip_prefix('[') {
        Some(v6) => {
            let end = v6.find(']')? + 2;
            (&host[..end], &host[end..])
        }
        None => host.split_at(host.find(':').unwrap_or(host.len())),
    };
    let port_ok = match rest.strip_prefix(':') {
        Some(port) => !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()),
        None => rest.is_empty(),
    };
    (!name.is_empty() && port_ok).then_some(name)
}

/// The origin Goose Desktop 1.34's renderer sends: its packaged page is loaded from a
/// `file://` URL, and Electron sends that origin (1.34 has no custom app scheme yet).
pub const DESKTOP_ORIGIN: &str = "file://";

/// The WebSocket of ACP (goose-serve.md §3).
pub const ACP: &str = "/acp";

/// The one origin policy: which browser origin, if any, gets CORS headers. No `Origin` (the
/// CLI, scripts, Desktop's main process) and our own origin (the built-in web page) need none
/// and always pass. Then, for the HTTP API: Desktop's `file://` renderer and the origins
/// listed in `GOSLING_CORS_ORIGINS` (`null`, for a UI in a sandboxed frame, only when listed).
/// For the WebSocket at `/acp`, goose serve's rules (goose-serve.md §3.3): the listed origins
/// when there is a list (it replaces the defaults, as `--allowed-origin` does), else any
/// loopback http(s) origin (`localhost`, `127.0.0.0/8`, `[::1]`, any port: Desktop's dev
/// renderer) and, when a token is required, exactly `null` or `file://` (the packaged app).
/// Any other origin is refused outright (403), as the MCP specification asks of local servers,
/// since a simple cross-origin request would otherwise still run.
fn origin_allowed(
    config: &gosling_config::Config,
    req: &Request,
    token_required: bool,
) -> Result<Option<String>, ApiError> {
    let Some(origin) = req.header("origin") else {
        return Ok(None);
    };
    let host = req.header("host").unwrap_or("");
    let same = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|o| o == host);
    if same {
        return Ok(None);
    }
    let listed = config.cors_origins.iter().any(|o| o == origin);
    let allowed = if req.path == ACP {
        match config.cors_origins.is_empty() {
            false => listed,
            true => loopback_origin(origin) || (token_required && (origin == "null" || origin == DESKTOP_ORIGIN)),
        }
    } else {
        origin == DESKTOP_ORIGIN || listed
    };
    if allowed {
        return Ok(Some(origin.to_string()));
    }
    Err(ApiError::new(
        403,
        format!(
            "cross-origin requests from `{origin}` are refused; if that page is yours, add the origin to GOSLING_CORS_ORIGINS"
        ),
    ))
}

/// `http(s)://` + a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) + an optional port,
/// and nothing else (no path, no user info).
fn loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let Some(name) = host_name(rest) else {
        return false;
    };
    if name.len() != rest.len() && !rest[name.len()..].starts_with(':') {
        return false;
    }
    let name = name.to_ascii_lowercase();
    name == "localhost" || name == "[::1]" || name.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// The key a request offers: `X-Secret-Key`, or on `/acp` also `?token=` (a browser's
/// WebSocket cannot set headers, so Desktop puts the key in the URL).
fn given_key(req: &Request) -> String {
    match req.header("x-secret-key").filter(|k| !k.is_empty()) {
        Some(k) => k.to_string(),
        None if req.path == ACP => req.query_param("token").unwrap_or_default(),
        None => String::new(),
    }
}

/// Every route but the exempt ones takes the key; on `/acp` a wrong or missing one is 401
/// before any upgrade.
fn token_required(app: &App) -> bool {
    !app.secret().is_empty()
}

/// The web page's sign-in cookie, when the request is the page's own: the browser marks it
/// as a fetch of the same origin (`Sec-Fetch-Site: same-origin`, or an `Origin` that is this
/// server), or it carries the page's `X-Gosling-Page` header (which no other origin can send
/// without a CORS preflight that is refused, or that grants no credentials). Another site, or
/// a page on another port of this machine (same-site to a browser), never gets the cookie to
/// stand for the key. Never on `/acp`.
fn signed_in(app: &App, req: &Request) -> bool {
    if req.path == ACP {
        return false;
    }
    let host = req.header("host").unwrap_or("");
    let own_origin = req
        .header("origin")
        .and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")))
        .is_some_and(|o| o == host);
    let own =
        req.header("sec-fetch-site") == Some("same-origin") || own_origin || req.header("x-gosling-page").is_some();
    own && auth::cookie(req.header("cookie"), &auth::login_cookie_name(req.header("host")))
        .is_some_and(|id| app.signed_in.valid(id))
}

fn authorized(app: &App, req: &Request) -> Result<(), ApiError> {
    if auth::is_exempt(req.path) {
        return Ok(());
    }
    let given = given_key(req);
    if auth::secret_matches(given.as_bytes(), app.secret().as_bytes()) || (given.is_empty() && signed_in(app, req)) {
        Ok(())
    } else {
        let why = match (given.is_empty(), req.path == ACP) {
            (true, true) => "missing X-Secret-Key header or ?token=",
            (false, true) => "wrong X-Secret-Key header or ?token=",
            (true, false) => "missing X-Secret-Key header",
            (false, false) => "wrong X-Secret-Key header",
        };
        Err(ApiError::new(401, format!("Unauthorized: {why}")))
    }
}

/// Cross-origin callers we answer with CORS headers: those in GOSLING_CORS_ORIGINS (see
/// `origin_allowed`). Web pages of other sites get no CORS headers and are refused.
fn with_cors(r: Response, origin: &str) -> Response {
    r.with_header("Access-Control-Allow-Origin", origin).with_header("Vary", "Origin")
}

type R = Result<Response, ApiError>;

/// A route's handler: the app, the request, and the `{id}` or `{name}` of a parameterized path
/// (empty for the others).
type Handler = fn(&Arc<App>, &Request, &str) -> R;

/// Every route: method, path (`{id}`/`{name}` where the path carries one), handler.
const ROUTES: &[(&str, &str, Handler)] = &[
    // `server::serve_one` gives the same answer itself to a `GET /status` without an `Origin`.
    ("GET", "/status", |_, _, _| Ok(Response::text(200, STATUS_TYPE, STATUS_BODY))),
    // goose serve's diagnostics probe: the same answer, no key.
    ("GET", "/health", |_, _, _| Ok(Response::text(200, STATUS_TYPE, STATUS_BODY))),
    ("GET", "/acp", |a, r, _| acp::get(a, r)),
    ("GET", "/mcp-ui-proxy", |a, r, _| proxy::ui_proxy(r, a.secret())),
    ("GET", "/mcp-app-proxy", |a, r, _| proxy::app_proxy(r, a.secret())),
    ("GET", "/mcp-app-guest", |a, r, _| a.guests.get(r, a.secret())),
    ("POST", "/mcp-app-guest", |a, r, _| a.guests.post(r, a.secret())),
    ("POST", "/auth/login", |a, r, _| login(a, r)),
    ("POST", "/auth/logout", |a, r, _| Ok(logout(a, r))),
    // Whether this browser's page is signed in (so the page asks without a failed request).
    ("GET", "/auth/login", |a, r, _| Ok(Response::json(200, &serde_json::json!({ "signed_in": signed_in(a, r) })))),
    ("GET", "/config", |a, _, _| config::get_all(a)),
    ("GET", "/config/extensions", |a, _, _| config::get_extensions(a)),
    ("POST", "/config/extensions", |a, r, _| config::post_extension(a, r)),
    ("DELETE", "/config/extensions/{name}", |a, _, name| config::delete_extension(a, name)),
    ("POST", "/config/extensions/{name}/sign_out", |a, _, name| config::sign_out(a, name)),
    ("POST", "/config/upsert", |a, r, _| config::upsert(a, r)),
    ("POST", "/config/permissions", |a, r, _| config::upsert_permissions(a, r)),
    ("POST", "/config/read", |a, r, _| config::read(a, r)),
    ("POST", "/config/remove", |a, r, _| config::remove(a, r)),
    ("POST", "/agent/start", |a, r, _| agent::start(a, r)),
    ("POST", "/agent/resume", |a, r, _| agent::resume(a, r)),
    ("POST", "/agent/restart", |a, r, _| agent::restart(a, r)),
    ("POST", "/agent/stop", |a, r, _| agent::stop(a, r)),
    ("POST", "/agent/update_working_dir", |a, r, _| agent::update_working_dir(a, r)),
    ("POST", "/agent/add_extension", |a, r, _| agent::add_extension(a, r)),
    ("POST", "/agent/remove_extension", |a, r, _| agent::remove_extension(a, r)),
    ("POST", "/agent/read_resource", |a, r, _| agent::read_resource(a, r)),
    ("POST", "/agent/call_tool", |a, r, _| agent::call_tool(a, r)),
    ("GET", "/agent/tools", |a, r, _| agent::tools(a, r)),
    ("POST", "/extensions/install", |a, r, _| install::install(a, r)),
    ("POST", "/agent/update_provider", |a, r, _| reply::update_provider(a, r)),
    ("POST", "/action-required/tool-confirmation", |a, r, _| reply::confirm_tool(a, r)),
    ("POST", "/reply", |a, r, _| reply::reply(a, r)),
    ("POST", "/agent/update_from_session", |a, r, _| desktop::update_from_session(a, r)),
    ("POST", "/agent/update_session", |a, r, _| desktop::update_session(a, r)),
    ("GET", "/agent/list_apps", |a, r, _| desktop::list_apps(a, r)),
    ("GET", "/config/providers", |a, _, _| desktop::providers(a)),
    ("POST", "/config/set_provider", |a, r, _| desktop::set_provider(a, r)),
    ("POST", "/config/canonical-model-info", |_, r, _| desktop::canonical_model_info(r)),
    ("GET", "/config/slash_commands", |_, _, _| desktop::slash_commands()),
    ("GET", "/features", |_, _, _| desktop::features()),
    ("GET", "/dictation/config", |_, _, _| desktop::dictation_config()),
    ("POST", "/telemetry/event", |_, r, _| desktop::telemetry(r)),
    ("GET", "/sessions/insights", |a, _, _| desktop::insights(a)),
    ("GET", "/sessions/search", |a, r, _| desktop::search(a, r)),
    ("GET", "/sessions", |a, _, _| agent::list_sessions(a)),
    ("GET", "/sessions/{id}", |a, _, id| agent::get_session(a, id)),
    ("DELETE", "/sessions/{id}", |a, _, id| agent::delete_session(a, id)),
    ("POST", "/sessions/{id}/reply", |a, r, id| session::reply(a, id, r)),
    ("GET", "/sessions/{id}/events", |a, r, id| session::events(a, id, r)),
    ("POST", "/sessions/{id}/cancel", |a, r, id| session::cancel(a, id, r)),
    ("PUT", "/sessions/{id}/name", |a, r, id| session::rename(a, id, r)),
    ("POST", "/sessions/{id}/fork", |a, r, id| session::fork(a, id, r)),
    ("POST", "/sessions/{id}/truncate", |a, r, id| session::truncate(a, id, r)),
    ("POST", "/sessions/{id}/steer", |a, r, id| session::steer(a, id, r)),
    ("GET", "/sessions/{id}/extensions", |a, _, id| desktop::session_extensions(a, id)),
];

/// `path` as `ROUTES` names it, and its parameter: `/sessions/{id}…` and
/// `/config/extensions/{name}[/sign_out]` carry one.
fn pattern(path: &str) -> (String, &str) {
    if let Some(rest) = path.strip_prefix("/sessions/") {
        return match rest.split_once('/') {
            Some((id, what)) => (format!("/sessions/{{id}}/{what}"), id),
            None => ("/sessions/{id}".to_string(), rest),
        };
    }
    match path.strip_prefix("/config/extensions/") {
        Some(name) if name.ends_with("/sign_out") => {
            ("/config/extensions/{name}/sign_out".to_string(), name.strip_suffix("/sign_out").unwrap_or(name))
        }
        Some(name) => ("/config/extensions/{name}".to_string(), name),
        None => (path.to_string(), ""),
    }
}

/// The fault routes the integration tests use (`/debug/panic`, `/debug/sleep?ms=`): built only
/// with the `test-hooks` feature, and even then answered only when `GOSLING_TEST_FAULTS` is set.
/// Release builds carry neither the routes nor their names.
#[cfg(feature = "test-hooks")]
fn injected_fault(req: &Request) -> Option<R> {
    // Read once: the environment does not change under a running server, and a lookup per
    // request cost more than the route match.
    static TEST_FAULTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*TEST_FAULTS.get_or_init(|| gosling_config::settings::test_faults(&gosling_config::ProcessEnv)) {
        return None;
    }
    match req.path {
        "/debug/panic" => panic!("injected fault: /debug/panic (GOSLING_TEST_FAULTS is set)"),
        "/debug/sleep" => {
            let ms = req.query_param("ms").and_then(|v| v.parse().ok()).unwrap_or(1000u64).min(60_000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Some(Ok(Response::text(200, "text/plain; charset=utf-8", "slept")))
        }
        _ => None,
    }
}

fn route(app: &Arc<App>, req: &Request) -> R {
    let (m, path) = (req.method, req.path);
    #[cfg(feature = "test-hooks")]
    if let Some(r) = injected_fault(req) {
        return r;
    }
    // An exact path wins over a pattern (`/sessions/search` is not a session's id).
    let (pattern, param) = match ROUTES.iter().any(|(_, p, _)| *p == path) {
        true => (std::borrow::Cow::Borrowed(path), ""),
        false => {
            let (pattern, param) = pattern(path);
            (std::borrow::Cow::Owned(pattern), param)
        }
    };
    let routes = || ROUTES.iter().filter(|(_, p, _)| *p == pattern);
    if let Some((_, _, handler)) = routes().find(|(method, _, _)| *method == m) {
        return handler(app, req, param);
    }
    let methods: Vec<&str> = routes().map(|(method, _, _)| *method).collect();
    if methods.is_empty() {
        return Err(ApiError::not_found(format!("no route for {path}")));
    }
    Err(ApiError::new(405, format!("method {m} is not allowed on {path}; use {}", methods.join(" or "))))
}

/// `POST /auth/login`: signs the web page in — with the one-time login link's `token`, or the
/// `secret_key` typed once — as a cookie (`auth::LoginSessions`); the key is never sent back.
fn login(app: &App, req: &Request) -> R {
    #[derive(serde::Deserialize)]
    struct Login {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        secret_key: Option<String>,
    }
    let l: Login = req.json()?;
    let right = match (&l.token, &l.secret_key) {
        (Some(t), None) => app.login.redeem(t),
        (None, Some(k)) => auth::secret_matches(k.as_bytes(), app.secret().as_bytes()),
        _ => return Err(ApiError::bad_request("give either `token` (the login link's) or `secret_key`")),
    };
    if !right {
        let e = if l.token.is_some() {
            "this login link is wrong, expired or already used; restart gosling for a new one or enter the secret key"
        } else {
            "wrong secret key: it is GOOSE_SERVER__SECRET_KEY, or the file secret-key in gosling's state dir when that is unset"
        };
        return Err(ApiError::new(401, e));
    }
    log::info!("the web page signed in ({})", if l.token.is_some() { "one-time login link" } else { "secret key" });
    let id = app.signed_in.open();
    let secs = app.signed_in.lifetime().as_secs();
    let cookie = format!(
        "{}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={secs}{}",
        auth::login_cookie_name(req.header("host")),
        if app.config().tls.enabled { "; Secure" } else { "" }
    );
    Ok(Response::json(200, &serde_json::json!({ "signed_in": true, "expires_in_secs": secs }))
        .with_header("Set-Cookie", &cookie)
        .with_header("Cache-Control", "no-store"))
}

/// `POST /auth/logout`: signs this browser's page out (its cookie's sign-in ends now).
fn logout(app: &App, req: &Request) -> Response {
    let name = auth::login_cookie_name(req.header("host"));
    let was = auth::cookie(req.header("cookie"), &name).is_some_and(|id| app.signed_in.close(id));
    if was {
        log::info!("the web page signed out");
    }
    let expired = format!("{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    Response::json(200, &serde_json::json!({ "signed_out": was })).with_header("Set-Cookie", &expired)
}
