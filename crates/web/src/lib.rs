//! The built-in web page (`GET /`, `/app.js`, `/markdown.js`, `/style.css`) for hosts without
//! Goose Desktop: a chat app on the same session API as Desktop.
//!
//! Owns only static assets embedded at build time. They hold nothing secret: the page trades
//! the one-time login link's token (from the URL fragment, which never reaches the server) or
//! the key typed once for a sign-in cookie (`POST /auth/login`; HttpOnly, so no script reads
//! it) and marks its requests with `X-Gosling-Page`; the key is never kept in the page. Every
//! response carries a strict CSP and anti-framing headers, and never CORS headers
//! (`http::web_routes` serves them).
//!
//! The root declares the modules and re-exports their items at the crate's top level.
#![deny(unsafe_code)]

mod assets;
#[cfg(test)]
mod deflate;
mod inflate;

pub use assets::{asset, CSP, PATHS};
