//! The other routes Goose Desktop 1.34 calls, answering what it reads: providers and model
//! information, features, session insights and search, a session's extensions, mode changes,
//! MCP apps, slash commands, dictation (not configured) and telemetry (accepted and dropped:
//! gosling never sends anything anywhere).

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use gosling_agent::ops::{SessionQuery, SEARCH_BUDGET};
use gosling_extensions::config::ExtensionConfig;
use gosling_llm as llm;
use gosling_llm::catalog::PROVIDERS;
use serde::Deserialize;
use serde_json::{json, Value};

type R = Result<Response, ApiError>;

/// Whether gosling could run this provider with the current settings (the same check a turn
/// makes, with any model).
fn is_configured(app: &App, provider: &str) -> bool {
    llm::catalog::is_configured(provider, &|k| app.setting(k))
}

pub fn providers(app: &App) -> R {
    let list: Vec<Value> = PROVIDERS
        .iter()
        .map(|p| {
            let keys: Vec<Value> = p
                .keys
                .iter()
                .map(|(name, required, secret, default)| {
                    json!({ "name": name, "required": required, "secret": secret, "default": default,
                            "oauth_flow": false, "primary": *required || *secret })
                })
                .collect();
            let models: Vec<Value> =
                p.models.iter().map(|m| json!({ "name": m.name, "context_limit": m.context_limit })).collect();
            json!({
                "name": p.name,
                "provider_type": "Builtin",
                "is_configured": is_configured(app, p.name),
                "metadata": {
                    "name": p.name, "display_name": p.display_name, "description": p.description,
                    "default_model": p.default_model, "known_models": models, "model_doc_link": p.doc_link,
                    "config_keys": keys,
                },
            })
        })
        .collect();
    Ok(Response::json(200, &Value::Array(list)))
}

#[derive(Deserialize)]
struct ProviderModel {
    provider: String,
    model: String,
}

pub fn set_provider(app: &App, req: &Request) -> R {
    let r: ProviderModel = req.json()?;
    let provider = gosling_llm::canonical_provider(&r.provider).ok_or_else(|| {
        ApiError::bad_request(format!(
            "provider {:?} is not supported by gosling; use openai, ollama or anthropic",
            r.provider
        ))
    })?;
    if r.model.trim().is_empty() {
        return Err(ApiError::bad_request("`model` must name a model"));
    }
    app.set_config_value("GOOSE_PROVIDER", json!(provider))?;
    app.set_config_value("GOOSE_MODEL", json!(r.model.trim()))?;
    log::info!("provider set to {provider}, model {}", r.model.trim());
    Ok(Response::empty(200))
}

pub fn canonical_model_info(req: &Request) -> R {
    let r: ProviderModel = req.json()?;
    let provider = gosling_llm::canonical_provider(&r.provider);
    let known = PROVIDERS
        .iter()
        .filter(|p| Some(p.name) == provider)
        .flat_map(|p| p.models.iter())
        .find(|m| r.model == m.name || r.model.starts_with(&format!("{}-", m.name)));
    Ok(Response::json(
        200,
        &match (provider, known) {
            (Some(p), Some(m)) => json!({
                "source": "gosling",
                "model_info": { "provider": p, "model": r.model, "context_limit": m.context_limit, "currency": "$" },
            }),
            // Desktop falls back to its own defaults; `source` says why there is nothing.
            _ => json!({ "source": "unknown: gosling has no information about this model", "model_info": null }),
        },
    ))
}

pub fn features() -> R {
    // None of goose's optional features (code mode, local inference, …) exist in gosling.
    Ok(Response::json(200, &json!({ "features": {} })))
}

pub fn insights(app: &App) -> R {
    let sessions = app.list_sessions()?;
    let tokens: i64 = sessions.iter().map(|s| s.accumulated_total_tokens.or(s.total_tokens).unwrap_or(0)).sum();
    Ok(Response::json(200, &json!({ "totalSessions": sessions.len(), "totalTokens": tokens })))
}

/// goose's `GET /sessions/search?query=&limit=&after_date=&before_date=`: sessions whose name
/// or messages hold `query` (any case), newest first, at most `limit` (10; 50 at most). The
/// search is the core's (`Host::search_sessions`); `X-Search-Complete: false` when its
/// budget ran out before the oldest sessions were read.
pub fn search(app: &App, req: &Request) -> R {
    let query = req
        .query_param("query")
        .map(|q| q.trim().to_string())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing the `query` query parameter (the text to search for)"))?;
    let limit = match req.query_param("limit") {
        None => 10,
        Some(l) => l.parse::<usize>().map_err(|_| ApiError::bad_request(format!("limit={l:?} is not a number")))?,
    }
    .min(50);
    let after = req.query_param("after_date");
    let before = req.query_param("before_date");
    let asked = SessionQuery { types: vec![], working_dir: None, query: Some(&query), budget: SEARCH_BUDGET };
    let found = app.search_sessions(&asked)?;
    // The entries as the store's index holds them (goose's Session JSON), copied, not parsed.
    let mut body = Vec::from(&b"["[..]);
    let dated = found.iter().filter(|m| {
        after.as_deref().is_none_or(|a| m.updated_at() >= a) && before.as_deref().is_none_or(|b| m.updated_at() <= b)
    });
    for (i, m) in dated.take(limit).enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(m.json().as_bytes());
    }
    body.push(b']');
    let r = Response::bytes(200, "application/json", body);
    Ok(r.with_header("X-Search-Complete", if found.complete == Some(false) { "false" } else { "true" }))
}

pub fn session_extensions(app: &App, id: &str) -> R {
    let mut list = gosling_agent::stored_extensions(&app.session_meta(id)?);
    list.retain(|v| ExtensionConfig::from_value(v.clone()).is_ok());
    Ok(Response::json(200, &json!({ "extensions": list })))
}

#[derive(Deserialize)]
struct SessionId {
    session_id: String,
}

pub fn update_from_session(app: &App, req: &Request) -> R {
    let r: SessionId = req.json()?;
    // goose reloads the agent's recipe prompt here; gosling's agent reads the session at each
    // turn, so there is nothing to reload once the agent runs.
    app.runtime(&r.session_id)?;
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
struct UpdateSession {
    session_id: String,
    #[serde(default)]
    goose_mode: Option<String>,
}

pub fn update_session(app: &App, req: &Request) -> R {
    let r: UpdateSession = req.json()?;
    let Some(mode) = &r.goose_mode else { return Ok(Response::empty(200)) };
    app.set_mode(&r.session_id, mode).map_err(|e| match e {
        e @ gosling_agent::Error::SessionNotFound(_) => ApiError::bad_request(e.to_string()),
        e => e.into(),
    })?;
    Ok(Response::empty(200))
}

pub fn list_apps(app: &App, req: &Request) -> R {
    let apps: Vec<Value> = match req.query_param("session_id").and_then(|id| app.runtime(&id).ok()) {
        None => Vec::new(),
        Some(rt) => rt
            .ui_resources()
            .into_iter()
            .map(|(ext, r)| {
                let mut a = json!({
                    "uri": r.uri,
                    "name": r.name,
                    "mimeType": r.mime_type.as_deref().unwrap_or("text/html;profile=mcp-app"),
                    "mcpServers": [ext],
                    // A window size (goose's schema requires one; gosling's apps name none).
                    "width": 800, "height": 600, "resizable": true,
                });
                if let Some(d) = r.description {
                    a["description"] = Value::String(d);
                }
                a
            })
            .collect(),
    };
    Ok(Response::json(200, &json!({ "apps": apps })))
}

pub fn slash_commands() -> R {
    // gosling has no recipes or skills to offer as commands.
    Ok(Response::json(200, &json!({ "commands": [] })))
}

pub fn dictation_config() -> R {
    // No dictation provider: gosling sends no audio anywhere.
    Ok(Response::json(200, &json!({})))
}

pub fn telemetry(req: &Request) -> R {
    #[derive(Deserialize)]
    struct Event {
        event_name: String,
    }
    let e: Event = req.json()?;
    log::debug!("telemetry event {:?} dropped: gosling sends no telemetry", e.event_name);
    Ok(Response::empty(202))
}
