//! The built-in web page for hosts without Goose Desktop: three files embedded at compile time,
//! served without the secret key (they hold nothing secret) under a strict Content-Security-
//! Policy. The page itself asks for the key and sends it as `X-Secret-Key` to the API.

use crate::http::server::Response;

const INDEX: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// Paths of the page's files (auth-exempt).
pub const PATHS: [&str; 3] = ["/", "/app.js", "/style.css"];

/// Only our own scripts, styles and API; no inline code, no framing, no other origins.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                       frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

pub fn serve(path: &str) -> Option<Response> {
    let (ctype, body) = match path {
        "/" => ("text/html; charset=utf-8", INDEX),
        "/app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "/style.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    Some(
        Response::text(200, ctype, body)
            .with_header("Content-Security-Policy", CSP)
            .with_header("X-Frame-Options", "DENY")
            .with_header("X-Content-Type-Options", "nosniff")
            .with_header("Referrer-Policy", "no-referrer")
            .with_header("Cache-Control", "no-cache"),
    )
}
