//! The route table: auth first, then `(path, method)` to a handler. Unknown paths are 404,
//! known paths with another method are 405 with `Allow`.

use crate::app::App;
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

pub fn handle(app: &std::sync::Arc<App>, req: &Request) -> Response {
    // The built-in web page: public static assets, same-origin only (never CORS headers).
    if let Some(r) = super::web_routes::serve(&req.method, &req.path) {
        return r;
    }
    let origin = req.header("origin").filter(|o| cors_allowed(o)).map(str::to_string);
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
    let resp = authorized(app, req).and_then(|()| route(app, req)).into();
    match origin {
        Some(o) => with_cors(resp, &o),
        None => resp,
    }
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

/// Cross-origin callers we answer with CORS headers: goose Desktop's renderer (a `file://`
/// page, whose Origin is `null` or `file://`) and the origins listed in GOSLING_CORS_ORIGINS.
/// Web pages of other sites get no CORS headers, so browsers keep them out (they would also
/// need the secret key).
fn cors_allowed(origin: &str) -> bool {
    if origin == "null" || origin.starts_with("file://") {
        return true;
    }
    std::env::var("GOSLING_CORS_ORIGINS")
        .is_ok_and(|list| list.split(',').map(str::trim).any(|o| !o.is_empty() && o == origin))
}

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
