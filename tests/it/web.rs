//! The built-in web page: served without the key, nothing secret in it, strict headers, no
//! inline script, no CORS for other origins. (The page itself is driven in Chromium by
//! scripts/browser-test.)

use crate::support::*;

#[test]
fn the_page_is_served_with_strict_headers() {
    let s = Server::start();
    for (path, ctype) in [("/", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css")] {
        let r = http_with("GET", &s.url(path), &[("Origin", "https://evil.example")], None);
        assert_eq!(r.status, 200, "{path}");
        assert!(r.header("content-type").unwrap().starts_with(ctype), "{path}");
        let csp = r.header("content-security-policy").unwrap();
        for rule in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
            assert!(csp.contains(rule), "{path}: {csp}");
        }
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert!(r.header("access-control-allow-origin").is_none(), "no CORS for other origins");
        assert!(!r.text().contains(SECRET), "{path} reveals nothing");
    }
    let html = s.get("/").text();
    // Every script is a file of ours: no inline code (the CSP would block it anyway).
    for tag in html.split("<script").skip(1) {
        let open = &tag[..tag.find('>').unwrap()];
        assert!(open.contains("src=\"/app.js\""), "inline or foreign script: <script{open}>");
        assert!(tag[tag.find('>').unwrap() + 1..].trim_start().starts_with("</script>"), "script with a body");
    }
    assert!(!html.contains(" on") || !html.contains("onclick="), "no inline event handlers");
    assert_eq!(http("POST", &s.url("/"), None, Some(b"{}")).status, 405);
}
