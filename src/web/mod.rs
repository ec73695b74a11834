//! The built-in web page (`GET /`, `/app.js`, `/style.css`) for hosts without Goose Desktop.
//!
//! Owns only static assets embedded at build time. They hold nothing secret: the page asks the
//! user for the secret key (or reads it from the URL fragment, which never reaches the server)
//! and sends it as `X-Secret-Key` like any other client. Every response carries a strict CSP and
//! anti-framing headers, and never CORS headers.

use crate::http::server::Response;

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");

/// Paths served here, exempt from the secret-key check (compared exactly).
pub const PATHS: [&str; 3] = ["/", "/app.js", "/style.css"];

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The asset for `path`, or `None` when the path is not one of ours.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" => Some(("text/html; charset=utf-8", INDEX_HTML)),
        "/app.js" => Some(("text/javascript; charset=utf-8", APP_JS)),
        "/style.css" => Some(("text/css; charset=utf-8", STYLE_CSS)),
        _ => None,
    }
}

/// Serves `path` (GET or HEAD only); `None` when the path is not a web asset.
pub fn serve(method: &str, path: &str) -> Option<Response> {
    let (ctype, body) = asset(path)?;
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
    Some(secure(resp))
}

fn secure(r: Response) -> Response {
    r.with_header("Content-Security-Policy", CSP)
        .with_header("X-Frame-Options", "DENY")
        .with_header("X-Content-Type-Options", "nosniff")
        .with_header("Referrer-Policy", "no-referrer")
        .with_header("Cache-Control", "no-store")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_have_no_inline_script() {
        assert!(asset("/index.html").is_none());
        let (_, html) = asset("/").unwrap();
        for tag in html.split("<script").skip(1) {
            let head = &tag[..tag.find('>').unwrap()];
            assert!(head.contains("src="), "inline script in index.html: {head}");
        }
        assert!(!html.contains("onclick="), "inline handlers are blocked by the CSP");
    }
}
