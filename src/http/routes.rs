//! The route table: auth first, then `(path, method)` to a handler. Unknown paths are 404,
//! known paths with another method are 405 with `Allow`.

use crate::http::agent_routes as agent;
use crate::http::auth;
use crate::http::config_routes as config;
use crate::http::desktop_routes as desktop;
use crate::http::error::ApiError;
use crate::http::install_routes as install;
use crate::http::proxy;
use crate::http::reply_routes as reply;
use crate::http::server::{Request, Response};
use crate::http::session_routes as session;
use crate::http::state::App;

pub fn handle(app: &std::sync::Arc<App>, req: &Request) -> Response {
    // DNS rebinding: a page of another site, its name re-pointed at 127.0.0.1, would reach
    // every route (and the web page) under its own origin; only our own names are answered.
    if let Err(e) = host_allowed(&app.config, req) {
        return Response::error(&e);
    }
    // The built-in web page: public static assets, same-origin only (never CORS headers).
    if let Some(r) = super::web_routes::serve(&req.method, &req.path) {
        return r;
    }
    let origin = match origin_allowed(&app.config, req) {
        Ok(o) => o,
        Err(e) => return Response::error(&e),
    };
    if req.method == "OPTIONS" {
        return match origin {
            Some(o) => with_cors(Response::empty(204), &o)
                .with_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
                .with_header("Access-Control-Allow-Headers", "content-type, x-secret-key")
                .with_header("Access-Control-Max-Age", "600"),
            None => Response::error(&ApiError::new(
                403,
                "cross-origin requests are not allowed from this origin; add it to GOSLING_CORS_ORIGINS if it is yours",
            )),
        };
    }
    // Guesses at the key or the login token are limited per peer (wrong ones count).
    let peer = req.peer.map(|p| p.ip()).unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
    let login = req.path == "/auth/login" && req.method == "POST";
    let guessing = login || (!auth::is_exempt(&req.path) && req.header("x-secret-key").is_some_and(|k| !k.is_empty()));
    if guessing {
        if let Err(wait) = app.throttle.check(peer) {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            log::debug!("http: refusing an attempt from {peer} for {secs} s (too many failed ones)");
            let e = ApiError::new(
                429,
                format!("too many failed attempts at the secret key or login token from {peer}; wait {secs} s and try again"),
            );
            let resp = Response::error(&e).with_header("Retry-After", &secs.to_string());
            return match origin {
                Some(o) => with_cors(resp, &o),
                None => resp,
            };
        }
    }
    let key = authorized(app, req);
    let wrong_key = guessing && !login && key.is_err();
    let resp: Response = key.and_then(|()| route(app, req)).into();
    if (wrong_key || (login && resp.status == 401)) && app.throttle.failed(peer) {
        log::warn!("http: too many wrong keys or login tokens from {peer}; refusing its attempts for a while (429)");
    }
    match origin {
        Some(o) => with_cors(resp, &o),
        None => resp,
    }
}

/// The `Host` names we answer: `localhost`, `127.0.0.1`, `[::1]`, the address given with
/// `--host`/`GOOSE_HOST`, and `GOSLING_ALLOWED_HOSTS`, each with any port.
fn host_allowed(config: &crate::config::Config, req: &Request) -> Result<(), ApiError> {
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
    let name = host_name(host).map(str::to_ascii_lowercase);
    let Some(name) = name else {
        return refuse(format!("Host `{host}` is not a valid host[:port]"));
    };
    let own = match config.host {
        std::net::IpAddr::V4(a) if !a.is_unspecified() => Some(a.to_string()),
        std::net::IpAddr::V6(a) if !a.is_unspecified() => Some(format!("[{a}]")),
        _ => None,
    };
    let ok = matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]")
        || own.as_deref() == Some(name.as_str())
        || config.allowed_hosts.contains(&name);
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

/// Which browser origin, if any, gets CORS headers. No `Origin` (the CLI, scripts) and our own
/// origin (the built-in web page) need none; Desktop's `file://` renderer and an origin listed
/// in `GOSLING_CORS_ORIGINS` (`null`, for a UI in a sandboxed frame, only when listed) get them;
/// any other origin is refused outright (403), as the MCP specification asks of local servers,
/// since a simple cross-origin request would otherwise still run.
fn origin_allowed(config: &crate::config::Config, req: &Request) -> Result<Option<String>, ApiError> {
    let Some(origin) = req.header("origin") else {
        return Ok(None);
    };
    if origin == DESKTOP_ORIGIN || config.cors_origins.iter().any(|o| o == origin) {
        return Ok(Some(origin.to_string()));
    }
    let host = req.header("host").unwrap_or("");
    let same = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|o| o == host);
    if same {
        return Ok(None);
    }
    Err(ApiError::new(
        403,
        format!(
            "cross-origin requests from `{origin}` are refused; if that page is yours, add the origin to GOSLING_CORS_ORIGINS"
        ),
    ))
}

fn authorized(app: &App, req: &Request) -> Result<(), ApiError> {
    if auth::is_exempt(&req.path) {
        return Ok(());
    }
    let given = req.header("x-secret-key").unwrap_or("");
    if auth::secret_matches(given.as_bytes(), app.secret().as_bytes()) {
        Ok(())
    } else {
        let why = if given.is_empty() { "missing X-Secret-Key header" } else { "wrong X-Secret-Key header" };
        Err(ApiError::new(401, format!("Unauthorized: {why}")))
    }
}

/// Cross-origin callers we answer with CORS headers: those in GOSLING_CORS_ORIGINS (see
/// `origin_allowed`). Web pages of other sites get no CORS headers and are refused.
fn with_cors(r: Response, origin: &str) -> Response {
    r.with_header("Access-Control-Allow-Origin", origin).with_header("Vary", "Origin")
}

fn route(app: &std::sync::Arc<App>, req: &Request) -> Result<Response, ApiError> {
    let m = req.method.as_str();
    let path = req.path.as_str();
    let allow = |methods: &[&str]| -> Result<(), ApiError> {
        if methods.contains(&m) {
            Ok(())
        } else {
            Err(ApiError::new(405, format!("method {m} is not allowed on {path}; use {}", methods.join(" or "))))
        }
    };
    let post = |f: fn(&App, &Request) -> Result<Response, ApiError>| -> Result<Response, ApiError> {
        allow(&["POST"])?;
        f(app, req)
    };
    match path {
        "/status" => {
            allow(&["GET"])?;
            Ok(Response::text(200, "text/plain; charset=utf-8", "ok"))
        }
        "/mcp-ui-proxy" => {
            allow(&["GET"])?;
            proxy::ui_proxy(req, app.secret())
        }
        "/mcp-app-proxy" => {
            allow(&["GET"])?;
            proxy::app_proxy(req, app.secret())
        }
        "/mcp-app-guest" => match m {
            "GET" => app.guests.get(req, app.secret()),
            _ => {
                allow(&["POST"])?;
                app.guests.post(req, app.secret())
            }
        },
        "/auth/login" => {
            allow(&["POST"])?;
            #[derive(serde::Deserialize)]
            struct Login {
                token: String,
            }
            let l: Login = req.json()?;
            if app.login.redeem(&l.token) {
                log::info!("the one-time login link was used");
                Ok(Response::json(200, &serde_json::json!({ "secret_key": app.secret() })))
            } else {
                Err(ApiError::new(401, "this login link is wrong, expired or already used; restart gosling for a new one or enter the secret key"))
            }
        }
        "/config" => {
            allow(&["GET"])?;
            config::get_all(app)
        }
        "/config/extensions" => match m {
            "GET" => config::get_extensions(app),
            _ => {
                allow(&["POST"])?;
                config::post_extension(app, req)
            }
        },
        "/config/upsert" => {
            allow(&["POST"])?;
            config::upsert(app, req)
        }
        "/config/read" => {
            allow(&["POST"])?;
            config::read(app, req)
        }
        "/config/remove" => {
            allow(&["POST"])?;
            config::remove(app, req)
        }
        "/agent/start" => post(agent::start),
        "/agent/resume" => post(agent::resume),
        "/agent/restart" => post(agent::restart),
        "/agent/stop" => post(agent::stop),
        "/agent/update_working_dir" => post(agent::update_working_dir),
        "/agent/add_extension" => post(agent::add_extension),
        "/agent/remove_extension" => post(agent::remove_extension),
        "/agent/read_resource" => post(agent::read_resource),
        "/agent/call_tool" => post(agent::call_tool),
        "/extensions/install" => post(install::install),
        "/agent/update_provider" => post(reply::update_provider),
        "/action-required/tool-confirmation" => post(reply::confirm_tool),
        "/reply" => {
            allow(&["POST"])?;
            reply::reply(app, req)
        }
        "/agent/tools" => {
            allow(&["GET"])?;
            agent::tools(app, req)
        }
        "/agent/update_from_session" => post(desktop::update_from_session),
        "/agent/update_session" => post(desktop::update_session),
        "/agent/list_apps" => {
            allow(&["GET"])?;
            desktop::list_apps(app, req)
        }
        "/config/providers" => {
            allow(&["GET"])?;
            desktop::providers(app)
        }
        "/config/set_provider" => post(desktop::set_provider),
        "/config/canonical-model-info" => {
            allow(&["POST"])?;
            desktop::canonical_model_info(req)
        }
        "/config/slash_commands" => {
            allow(&["GET"])?;
            desktop::slash_commands()
        }
        "/features" => {
            allow(&["GET"])?;
            desktop::features()
        }
        "/dictation/config" => {
            allow(&["GET"])?;
            desktop::dictation_config()
        }
        "/telemetry/event" => {
            allow(&["POST"])?;
            desktop::telemetry(req)
        }
        "/sessions/insights" => {
            allow(&["GET"])?;
            desktop::insights(app)
        }
        "/sessions/search" => {
            allow(&["GET"])?;
            desktop::search(app, req)
        }
        "/sessions" => {
            allow(&["GET"])?;
            agent::list_sessions(app)
        }
        "/debug/panic" if std::env::var_os("GOSLING_TEST_FAULTS").is_some() => {
            panic!("injected fault: /debug/panic (GOSLING_TEST_FAULTS is set)")
        }
        "/debug/sleep" if std::env::var_os("GOSLING_TEST_FAULTS").is_some() => {
            let ms = req.query_param("ms").and_then(|v| v.parse().ok()).unwrap_or(1000u64).min(60_000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(Response::text(200, "text/plain; charset=utf-8", "slept"))
        }
        _ => {
            if let Some((id, what)) = path.strip_prefix("/sessions/").and_then(|rest| rest.split_once('/')) {
                return match what {
                    "reply" => {
                        allow(&["POST"])?;
                        session::reply(app, id, req)
                    }
                    "events" => {
                        allow(&["GET"])?;
                        session::events(app, id, req)
                    }
                    "cancel" => {
                        allow(&["POST"])?;
                        session::cancel(app, id, req)
                    }
                    "extensions" => {
                        allow(&["GET"])?;
                        desktop::session_extensions(app, id)
                    }
                    _ => Err(ApiError::not_found(format!("no route for {path}"))),
                };
            }
            if let Some(id) = path.strip_prefix("/sessions/").filter(|id| !id.contains('/')) {
                return match m {
                    "DELETE" => agent::delete_session(app, id),
                    _ => {
                        allow(&["GET"])?;
                        agent::get_session(app, id)
                    }
                };
            }
            if let Some(name) = path.strip_prefix("/config/extensions/") {
                allow(&["DELETE"])?;
                return config::delete_extension(app, name);
            }
            Err(ApiError::not_found(format!("no route for {path}")))
        }
    }
}
