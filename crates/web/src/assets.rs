//! The page's files, embedded at build time, and the policy they are served under.

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const STYLE_CSS: &str = include_str!("style.css");
const MARKDOWN_JS: &str = include_str!("markdown.js");

/// Paths served here, exempt from the secret-key check (compared exactly).
pub const PATHS: [&str; 4] = ["/", "/app.js", "/markdown.js", "/style.css"];

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The asset for `path`, or `None` when the path is not one of ours.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" => Some(("text/html; charset=utf-8", INDEX_HTML)),
        "/app.js" => Some(("text/javascript; charset=utf-8", APP_JS)),
        "/markdown.js" => Some(("text/javascript; charset=utf-8", MARKDOWN_JS)),
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

    #[test]
    fn page_stays_under_100_kb() {
        let total: usize = PATHS.iter().map(|p| asset(p).map_or(0, |(_, body)| body.len())).sum();
        assert!(total < 100 * 1024, "the page's HTML, CSS and JS are {total} bytes; the budget is 100 KB");
    }

    #[test]
    fn page_references_no_external_url() {
        for path in PATHS {
            let (_, body) = asset(path).unwrap();
            for bad in ["http://", "https://", "url(//", "src=\"//", "href=\"//", "@import"] {
                assert!(!body.contains(bad), "{path} references {bad}…; the page loads nothing from elsewhere");
            }
        }
    }

    #[test]
    fn scripts_never_parse_html() {
        for path in ["/app.js", "/markdown.js"] {
            let (_, js) = asset(path).unwrap();
            for bad in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
                assert!(!js.contains(bad), "{path} uses {bad}; build DOM nodes with textContent instead");
            }
        }
    }
}
