//! `/config/*`: persisted extensions and the key/value settings Desktop stores secrets with.

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use gosling_agent::settings;
use gosling_extensions::config::{name_to_key, ExtensionConfig, ExtensionEntry};
use serde_json::{json, Value};

type R = Result<Response, ApiError>;

pub fn get_extensions(app: &App) -> R {
    let ex = app.config_extensions()?;
    // gosling's addition: the names of the remote extensions with a stored sign-in (so the web
    // page offers "Sign out" only there). Whether, never the tokens; beside the entries, which
    // clients send back as configs.
    let signed_in: Vec<&str> = ex
        .entries
        .iter()
        .filter(|e| authorizer(app, e).is_some_and(|a| a.signed_in()))
        .map(|e| e.config.name())
        .collect();
    Ok(Response::json(200, &json!({ "extensions": ex.entries, "warnings": ex.warnings, "signed_in": signed_in })))
}

/// The sign-in of a `streamable_http` entry (its stored tokens, in the secrets store).
fn authorizer(app: &App, entry: &ExtensionEntry) -> Option<gosling_mcp::oauth::Authorizer> {
    let gosling_extensions::config::Kind::StreamableHttp { uri, .. } = &entry.config.kind else {
        return None;
    };
    let settings = gosling_mcp::oauth::Settings {
        client_id: None,
        client_secret: None,
        scopes: Vec::new(),
        client_metadata_url: None,
        client_name: "gosling".into(),
        sign_in: gosling_mcp::oauth::SignIn::Follow,
        store: app.sign_in_tokens(),
    };
    let timeout = std::time::Duration::from_secs(entry.config.timeout_secs().max(1));
    Some(gosling_mcp::oauth::Authorizer::new(uri, entry.config.name(), timeout, settings))
}

pub fn post_extension(app: &App, req: &Request) -> R {
    let body: Value = req.json()?;
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("`name` (string) is required"))?
        .to_string();
    let enabled = body
        .get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("`enabled` (true or false) is required"))?;
    let config = body
        .get("config")
        .cloned()
        .ok_or_else(|| ApiError::bad_request("`config` (an ExtensionConfig object) is required"))?;
    let config = ExtensionConfig::from_value(config)?;
    config.validate()?;
    // Saved through the authenticated API (Desktop calls this after its own confirmation): the
    // person's own config (`agent::config_ops`: the policy, a foreign approval dropped, saved
    // switched off while a secret it reads is not stored).
    let saved = app.save_config_extension(config, enabled).map_err(|e| match e {
        gosling_agent::Error::Refused(e) => ApiError::from(*e),
        e => ApiError::from(e),
    })?;
    let verb = if saved.existed { "Updated" } else { "Added" };
    let mut text = format!("{verb} extension {name}");
    if !saved.unresolved.is_empty() {
        text.push_str(&format!(" (saved disabled: {})", saved.unresolved.explain()));
    }
    Ok(Response::json(200, &Value::String(text)))
}

pub fn delete_extension(app: &App, raw_name: &str) -> R {
    let name = gosling_wire::percent::decode_lenient(raw_name);
    let key = name_to_key(&name);
    if app.remove_config_extension(&key)? {
        Ok(Response::json(200, &Value::String(format!("Removed extension {name}"))))
    } else {
        Err(ApiError::not_found(format!("Extension not found: no persisted extension has the key {key:?}")))
    }
}

/// Forgets the sign-in of a `streamable_http` extension: its OAuth tokens and the client
/// gosling registered (the web page's "Sign out"; `gosling auth NAME --forget` on a terminal).
/// Running extensions of this process drop their cached token too; the next request signs in.
pub fn sign_out(app: &App, raw_name: &str) -> R {
    let name = gosling_wire::percent::decode_lenient(raw_name);
    let key = name_to_key(&name);
    let Some(entry) = app.config_extension(&key)? else {
        return Err(ApiError::not_found(format!("Extension not found: no persisted extension has the key {key:?}")));
    };
    let Some(sign_in) = authorizer(app, &entry) else {
        return Err(ApiError::bad_request(format!(
            "extension {name:?} has type `{}`; only streamable_http extensions sign in",
            entry.config.type_name()
        )));
    };
    let n = sign_in.forget_all();
    log::info!("extension {key}: signed out ({n} stored records forgotten)");
    Ok(Response::json(200, &json!({ "forgotten": n })))
}

pub fn get_all(app: &App) -> R {
    // Values an extension carries in `envs`/`headers` (imported tokens) are never shown.
    // `in_force`: the model settings a turn uses now, and which the environment sets (gosling's
    // addition, for the web page's Settings; secrets only as set or not).
    Ok(Response::json(
        200,
        &json!({ "config": gosling_extensions::config::masked_config(app.config_values()?),
                 "in_force": gosling_agent::settings::in_force(app) }),
    ))
}

#[derive(serde::Deserialize)]
struct Upsert {
    key: String,
    value: Value,
    #[serde(default)]
    is_secret: bool,
}

#[derive(serde::Deserialize)]
struct KeyQuery {
    key: String,
    #[serde(default)]
    is_secret: bool,
}

fn setting_error(e: gosling_agent::Error) -> ApiError {
    match e {
        gosling_agent::Error::BadKey(why) => ApiError::bad_request(why),
        gosling_agent::Error::Store(e) | gosling_agent::Error::SaveMessage(e) => e.into(),
        e => ApiError::internal(e.to_string()),
    }
}

pub fn upsert(app: &App, req: &Request) -> R {
    let u: Upsert = req.json()?;
    settings::upsert(app, &u.key, u.value, u.is_secret).map_err(setting_error)?;
    Ok(Response::json(200, &Value::String(format!("Upserted key {}", u.key))))
}

#[derive(serde::Deserialize)]
struct ToolPermission {
    tool_name: String,
    /// goose's `PermissionLevel`; `null` (gosling's addition, the web page's "as the mode
    /// says") removes the tool's level.
    permission: Value,
}

#[derive(serde::Deserialize)]
struct UpsertPermissions {
    tool_permissions: Vec<ToolPermission>,
}

/// goosed's `POST /config/permissions`: sets the level of each tool named (`null`: removed),
/// leaving the others' (`settings::set_tool_permissions`, one locked update: two tabs setting
/// different tools both keep theirs).
pub fn upsert_permissions(app: &App, req: &Request) -> R {
    let body: UpsertPermissions = req.json()?;
    let levels = body
        .tool_permissions
        .into_iter()
        .map(|p| match p.permission {
            Value::Null => Ok((p.tool_name, None)),
            Value::String(level) => Ok((p.tool_name, Some(level))),
            other => Err(ApiError::bad_request(format!(
                "permission {other} of {}: use always_allow, ask_before, never_allow or null (as the mode says)",
                gosling_util::printable(&p.tool_name)
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    settings::set_tool_permissions(app, &levels).map_err(|e| match e {
        gosling_agent::Error::BadPermission(why) => ApiError::bad_request(why),
        e => setting_error(e),
    })?;
    Ok(Response::json(200, &Value::String("Permissions updated".into())))
}

pub fn read(app: &App, req: &Request) -> R {
    let q: KeyQuery = req.json()?;
    let value = settings::read(app, &q.key, q.is_secret)?;
    // goosed answers 200 `null` for a key that is not set: Goose Desktop reads GOOSE_PROVIDER
    // this way on a fresh install (and shows its provider picker for null).
    Ok(Response::json(200, &value.unwrap_or(Value::Null)))
}

pub fn remove(app: &App, req: &Request) -> R {
    let q: KeyQuery = req.json()?;
    if settings::remove(app, &q.key, q.is_secret).map_err(setting_error)? {
        Ok(Response::json(200, &Value::String(format!("Removed key {}", q.key))))
    } else {
        Err(ApiError::not_found(format!("Config key not found: {}", q.key)))
    }
}
