//! The built-in web page (`GET /`, `/app.js`, `/style.css`) for hosts without Goose Desktop.
//!
//! Owns only static assets embedded at build time. They hold nothing secret: the page asks the
//! user for the secret key (or reads it from the URL fragment, which never reaches the server)
//! and sends it as `X-Secret-Key` like any other client. Every response carries a strict CSP and
//! anti-framing headers, and never CORS headers (`http::web_routes` serves them).

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
