//! The route table: auth first, then `(path, method)` to a handler. Unknown paths are 404,
//! known paths with another method are 405 with `Allow`.

use crate::app::App;
use crate::http::auth;
use crate::http::config_routes as config;
use crate::http::error::ApiError;
use crate::http::proxy;
use crate::http::server::{Request, Response};

pub fn handle(app: &App, req: &Request) -> Response {
    if !auth::is_exempt(&req.path) {
        let given = req.header("x-secret-key").unwrap_or("");
        if !auth::secret_matches(given.as_bytes(), app.secret().as_bytes()) {
            let why = if given.is_empty() { "missing X-Secret-Key header" } else { "wrong X-Secret-Key header" };
            return Response::error(&ApiError::new(401, format!("Unauthorized: {why}")));
        }
    }
    route(app, req).into()
}

fn route(app: &App, req: &Request) -> Result<Response, ApiError> {
    let m = req.method.as_str();
    let path = req.path.as_str();
    let allow = |methods: &[&str]| -> Result<(), ApiError> {
        if methods.contains(&m) {
            Ok(())
        } else {
            Err(ApiError::new(405, format!("method {m} is not allowed on {path}; use {}", methods.join(" or "))))
        }
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
        "/debug/panic" if std::env::var_os("GOSLING_TEST_FAULTS").is_some() => {
            panic!("injected fault: /debug/panic (GOSLING_TEST_FAULTS is set)")
        }
        "/debug/sleep" if std::env::var_os("GOSLING_TEST_FAULTS").is_some() => {
            let ms = req.query_param("ms").and_then(|v| v.parse().ok()).unwrap_or(1000u64).min(60_000);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(Response::text(200, "text/plain; charset=utf-8", "slept"))
        }
        _ => {
            if let Some(name) = path.strip_prefix("/config/extensions/") {
                allow(&["DELETE"])?;
                return config::delete_extension(app, name);
            }
            Err(ApiError::not_found(format!("no route for {path}")))
        }
    }
}
