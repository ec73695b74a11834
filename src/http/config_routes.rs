//! `/config/*`: persisted extensions and the key/value settings Desktop stores secrets with.

use crate::extensions::config::ExtensionStore;
use crate::extensions::config::{name_to_key, ExtensionConfig, ExtensionEntry};
use crate::http::error::ApiError;
use crate::http::server::{Request, Response};
use crate::http::state::App;
use serde_json::{json, Value};

type R = Result<Response, ApiError>;

pub fn get_extensions(app: &App) -> R {
    let ex = app.store.extensions()?;
    Ok(Response::json(200, &json!({ "extensions": ex.entries, "warnings": ex.warnings })))
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
    app.check_policy(&config, crate::extensions::policy::InstallSource::ConfigApi)?;
    // An extension whose secrets are not stored yet is saved disabled (on every install path),
    // so no session tries to start it; the answer says which secrets and how to store them.
    let unresolved = app.unresolved_secrets(&config);
    let enabled = enabled && unresolved.is_empty();
    let existed = app.store.upsert_extension(&ExtensionEntry { enabled, config })?;
    log::info!("extension {name} {} (enabled: {enabled})", if existed { "updated" } else { "added" });
    let verb = if existed { "Updated" } else { "Added" };
    let mut text = format!("{verb} extension {name}");
    if !unresolved.is_empty() {
        text.push_str(&format!(" (saved disabled: {})", unresolved.explain()));
    }
    Ok(Response::json(200, &Value::String(text)))
}

pub fn delete_extension(app: &App, raw_name: &str) -> R {
    let name = crate::wire::percent::decode_lenient(raw_name);
    let key = name_to_key(&name);
    if app.store.remove_extension(&key)? {
        log::info!("extension {key} removed");
        Ok(Response::json(200, &Value::String(format!("Removed extension {name}"))))
    } else {
        Err(ApiError::not_found(format!("Extension not found: no persisted extension has the key {key:?}")))
    }
}

pub fn get_all(app: &App) -> R {
    // Values an extension carries in `envs`/`headers` (imported tokens) are never shown.
    Ok(Response::json(200, &json!({ "config": crate::extensions::config::masked_config(app.store.all()?) })))
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

fn check_key(key: &str) -> Result<(), ApiError> {
    if key.trim().is_empty() || key.len() > 256 {
        return Err(ApiError::bad_request("`key` must be a non-empty name of at most 256 bytes"));
    }
    if key == "extensions" {
        return Err(ApiError::bad_request("`extensions` is managed through /config/extensions"));
    }
    Ok(())
}

pub fn upsert(app: &App, req: &Request) -> R {
    let u: Upsert = req.json()?;
    check_key(&u.key)?;
    if u.is_secret {
        let value = match u.value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        app.store.set_secret(&u.key, &value)?;
        log::info!("secret {} set", u.key);
    } else {
        app.store.set(&u.key, u.value)?;
        log::info!("config {} set", u.key);
    }
    Ok(Response::json(200, &Value::String(format!("Upserted key {}", u.key))))
}

/// What a read of a secret shows: that it is set, never its value.
pub const SECRET_MASK: &str = "********";

pub fn read(app: &App, req: &Request) -> R {
    let q: KeyQuery = req.json()?;
    let value = if q.is_secret {
        app.store.get_secret(&q.key)?.map(|_| Value::String(SECRET_MASK.into()))
    } else {
        match readable_env(&q.key) {
            Some(v) => Some(v),
            None => app.store.get(&q.key)?,
        }
    };
    // goosed answers 200 `null` for a key that is not set: Goose Desktop reads GOOSE_PROVIDER
    // this way on a fresh install (and shows its provider picker for null).
    Ok(Response::json(200, &value.unwrap_or(Value::Null)))
}

/// A goose setting given in the environment, which wins over the store (as in goose's config
/// and in the settings a turn uses). Only `GOOSE_*` keys
/// that cannot hold a credential: `/config/read` never shows a key or a secret.
fn readable_env(key: &str) -> Option<Value> {
    let upper = key.to_ascii_uppercase();
    let credential = ["SECRET", "KEY", "TOKEN", "PASSWORD"].iter().any(|w| upper.contains(w));
    if !key.starts_with("GOOSE_") || credential {
        return None;
    }
    std::env::var(key).ok().filter(|v| !v.is_empty()).map(Value::String)
}

pub fn remove(app: &App, req: &Request) -> R {
    let q: KeyQuery = req.json()?;
    check_key(&q.key)?;
    let removed = if q.is_secret { app.store.remove_secret(&q.key)? } else { app.store.remove(&q.key)? };
    if removed {
        Ok(Response::json(200, &Value::String(format!("Removed key {}", q.key))))
    } else {
        Err(ApiError::not_found(format!("Config key not found: {}", q.key)))
    }
}
