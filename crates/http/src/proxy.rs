//! The MCP-UI and MCP-Apps relay pages Desktop frames untrusted UI resources with.
//!
//! Each page is only served when the `secret` query parameter matches (these paths are exempt
//! from the header check because an iframe cannot send headers). The pages hold no data of
//! ours: they relay `postMessage` traffic between the host window and a nested frame.

use crate::auth::secret_matches;
use crate::error::ApiError;
use crate::server::{Request, Response};
use gosling_util::lock;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;

const UI_PROXY_HTML: &str = include_str!("proxy_ui.html");
const APP_PROXY_HTML: &str = include_str!("proxy_app.html");

fn check_secret(req_secret: Option<String>, secret: &str) -> Result<(), ApiError> {
    match req_secret {
        Some(s) if secret_matches(s.as_bytes(), secret.as_bytes()) => Ok(()),
        // The seed asks for 401 both when the parameter is missing and when it is wrong.
        Some(_) => Err(ApiError::new(401, "Unauthorized: the `secret` query parameter does not match")),
        None => Err(ApiError::new(401, "Unauthorized: add the `secret` query parameter")),
    }
}

pub fn ui_proxy(req: &Request, secret: &str) -> Result<Response, ApiError> {
    check_secret(req.query_param("secret"), secret)?;
    Ok(Response::text(200, "text/html; charset=utf-8", UI_PROXY_HTML))
}

fn domains(req: &Request, key: &str) -> String {
    req.query_param(key)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_alphanumeric() || ":/.-_*".contains(c)))
        .map(|d| format!(" {d}"))
        .collect()
}

pub fn app_proxy(req: &Request, secret: &str) -> Result<Response, ApiError> {
    check_secret(req.query_param("secret"), secret)?;
    let resource = domains(req, "resource_domains");
    let script = domains(req, "script_domains");
    let csp = format!(
        "default-src 'none'; script-src 'self' 'unsafe-inline'{resource}{script}; script-src-elem 'self' 'unsafe-inline'{resource}{script}; \
         style-src 'self' 'unsafe-inline'{resource}; style-src-elem 'self' 'unsafe-inline'{resource}; connect-src 'self'{connect}; \
         img-src 'self' data: blob:{resource}; media-src 'self' data: blob:{resource}; font-src 'self'{resource}; \
         frame-src 'self'{frame}; object-src 'none'; base-uri 'self'{base}",
        connect = domains(req, "connect_domains"),
        frame = domains(req, "frame_domains"),
        base = domains(req, "base_uri_domains"),
    );
    let html = APP_PROXY_HTML.replace("{{OUTER_CSP}}", &csp);
    Ok(Response::text(200, "text/html; charset=utf-8", html).with_header("Referrer-Policy", "no-referrer"))
}

/// HTML handed over by `POST /mcp-app-guest`, served once by `GET /mcp-app-guest`.
#[derive(Default)]
pub struct GuestPages {
    pages: Mutex<HashMap<String, (String, Option<String>)>>,
}

const MAX_GUEST_PAGES: usize = 256;

impl GuestPages {
    pub fn post(&self, req: &Request, secret: &str) -> Result<Response, ApiError> {
        #[derive(serde::Deserialize)]
        struct Body {
            secret: String,
            html: String,
            csp: Option<String>,
        }
        let b: Body = req.json()?;
        check_secret(Some(b.secret), secret)?;
        let nonce = gosling_util::random_hex(16);
        let mut pages = lock(&self.pages);
        if pages.len() >= MAX_GUEST_PAGES {
            return Err(ApiError::new(503, "too many unread guest pages; fetch or drop earlier ones first"));
        }
        pages.insert(nonce.clone(), (b.html, b.csp));
        Ok(Response::json(200, &json!({ "nonce": nonce })))
    }

    pub fn get(&self, req: &Request, secret: &str) -> Result<Response, ApiError> {
        check_secret(req.query_param("secret"), secret)?;
        let nonce = req.query_param("nonce").unwrap_or_default();
        let page = lock(&self.pages).remove(&nonce);
        let (html, csp) = page.ok_or_else(|| ApiError::not_found("Guest content not found or already consumed"))?;
        let mut r =
            Response::text(200, "text/html; charset=utf-8", html).with_header("Referrer-Policy", "strict-origin");
        if let Some(csp) = csp {
            r = r.with_header("Content-Security-Policy", &csp);
        }
        Ok(r)
    }
}
