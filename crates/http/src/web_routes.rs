//! Serves the built-in page's assets (`web`) with a strict CSP and anti-framing headers.

use crate::server::Response;
use gosling_web as web;

/// Serves `path` (GET or HEAD only); `None` when the path is not a web asset.
pub fn serve(method: &str, path: &str) -> Option<Response> {
    let (ctype, body) = web::asset(path)?;
    let resp = if method == "GET" || method == "HEAD" {
        Response::text(200, ctype, body)
    } else {
        Response::text(
            405,
            "text/plain; charset=utf-8",
            format!("web: method {method} is not allowed on {path}; use GET"),
        )
        .with_header("Allow", "GET")
    };
    Some(
        resp.with_header("Content-Security-Policy", web::CSP)
            .with_header("X-Frame-Options", "DENY")
            .with_header("X-Content-Type-Options", "nosniff")
            .with_header("Referrer-Policy", "no-referrer")
            .with_header("Cache-Control", "no-store"),
    )
}
