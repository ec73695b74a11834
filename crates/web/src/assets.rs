//! The page's files, embedded at build time, and the policy they are served under.
//!
//! Embedded deflated (`build.rs`; ~35 KB instead of ~100 KB of the static binary) and inflated
//! the first time each is served, then kept: the same bytes as the files in `src/`
//! (`tests::every_asset_is_served_as_its_file`).

use crate::inflate::inflate;
use std::sync::OnceLock;

/// One of the page's files: its deflated bytes and, once served, its text.
struct Packed {
    deflated: &'static [u8],
    text: OnceLock<String>,
}

impl Packed {
    const fn new(deflated: &'static [u8]) -> Packed {
        Packed { deflated, text: OnceLock::new() }
    }

    fn text(&'static self) -> &'static str {
        self.text.get_or_init(|| {
            // build.rs read each file as UTF-8 and the unit tests inflate every one.
            let bytes = inflate(self.deflated, 1 << 20).expect("web: build.rs deflated every asset");
            String::from_utf8(bytes).expect("web: build.rs deflated UTF-8 text")
        })
    }
}

static INDEX_HTML: Packed = Packed::new(include_bytes!(concat!(env!("OUT_DIR"), "/index.html.deflate")));
static APP_JS: Packed = Packed::new(include_bytes!(concat!(env!("OUT_DIR"), "/app.js.deflate")));
static STYLE_CSS: Packed = Packed::new(include_bytes!(concat!(env!("OUT_DIR"), "/style.css.deflate")));
static MARKDOWN_JS: Packed = Packed::new(include_bytes!(concat!(env!("OUT_DIR"), "/markdown.js.deflate")));

/// Paths served here, exempt from the secret-key check (compared exactly).
pub const PATHS: [&str; 4] = ["/", "/app.js", "/markdown.js", "/style.css"];

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The asset for `path`, or `None` when the path is not one of ours.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" => Some(("text/html; charset=utf-8", INDEX_HTML.text())),
        "/app.js" => Some(("text/javascript; charset=utf-8", APP_JS.text())),
        "/markdown.js" => Some(("text/javascript; charset=utf-8", MARKDOWN_JS.text())),
        "/style.css" => Some(("text/css; charset=utf-8", STYLE_CSS.text())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_served_as_its_file() {
        let files = [
            ("/", include_str!("index.html"), &INDEX_HTML),
            ("/app.js", include_str!("app.js"), &APP_JS),
            ("/markdown.js", include_str!("markdown.js"), &MARKDOWN_JS),
            ("/style.css", include_str!("style.css"), &STYLE_CSS),
        ];
        let mut packed = 0;
        for (path, file, asset_) in files {
            assert_eq!(asset(path).unwrap().1, file, "{path} is served as it is in crates/web/src");
            packed += asset_.deflated.len();
        }
        // What the size budget counts on (BENCHMARKS.md, 2026-11-29): the four at under 40%.
        let plain: usize = files.iter().map(|f| f.1.len()).sum();
        assert!(
            packed * 10 < plain * 4,
            "the page deflates to {packed} of {plain} bytes; build.rs packs worse than before"
        );
    }

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
