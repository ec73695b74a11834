//! The key/value settings clients read and write (goosed's `/config/read|upsert|remove`, goose
//! serve's `_goose/unstable/config/*`): one set of rules for both front ends. A secret is
//! never read back (only that it is set); a `GOOSE_*` setting in the environment wins over
//! the store, as in a turn; `extensions` is managed through the extension calls only.

use crate::error::Error;
use crate::host::Host;
use gosling_store::atomic;
use serde_json::Value;

pub use crate::permissions::TOOL_PERMISSIONS;

/// What a read of a secret shows: that it is set, never its value.
pub const SECRET_MASK: &str = "********";

fn check_key(key: &str) -> Result<(), Error> {
    if key.trim().is_empty() || key.len() > 256 {
        return Err(Error::BadKey("`key` must be a non-empty name of at most 256 bytes"));
    }
    if key == "extensions" {
        return Err(Error::BadKey("`extensions` is managed through the extension calls (/config/extensions)"));
    }
    Ok(())
}

/// A setting's value: a secret as `SECRET_MASK` when set; otherwise the environment's
/// `GOOSE_*` value (only keys that cannot hold a credential), else the stored one.
pub fn read(host: &Host, key: &str, is_secret: bool) -> Result<Option<Value>, atomic::Error> {
    if is_secret {
        return Ok(host.store.get_secret(key)?.map(|_| Value::String(SECRET_MASK.into())));
    }
    match readable_env(key) {
        Some(v) => Ok(Some(v)),
        None => host.store.get(key),
    }
}

/// A goose setting given in the environment, which wins over the store (as in goose's config
/// and in the settings a turn uses). Only `GOOSE_*` keys that cannot hold a credential: a
/// read never shows a key or a secret.
fn readable_env(key: &str) -> Option<Value> {
    let upper = key.to_ascii_uppercase();
    let credential = ["SECRET", "KEY", "TOKEN", "PASSWORD"].iter().any(|w| upper.contains(w));
    if !key.starts_with("GOOSE_") || credential {
        return None;
    }
    gosling_config::settings::user_setting(&gosling_config::ProcessEnv, key, || None).map(Value::String)
}

/// Stores a setting; a secret goes to the secrets store as a string.
pub fn upsert(host: &Host, key: &str, value: Value, is_secret: bool) -> Result<(), Error> {
    check_key(key)?;
    if is_secret {
        let value = match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        host.store.set_secret(key, &value).map_err(Error::Store)?;
        log::info!("secret {key} set");
    } else {
        host.store.set(key, value).map_err(Error::Store)?;
        log::info!("config {key} set");
    }
    Ok(())
}

/// goose's per-tool permission levels (`PermissionLevel`).
pub const PERMISSION_LEVELS: [&str; 3] = ["always_allow", "ask_before", "never_allow"];

/// Sets the permission level of each tool named (`(tool, level)`; `None` removes the tool's
/// level, which leaves it to the session's mode), leaving every other tool's as it is, in one
/// locked update of the config (goosed's `/config/permissions`, ACP's `tools/permissions/set`,
/// the web page's tool list): two clients setting different tools at once both keep theirs.
/// Nothing is written when one pair is refused.
pub fn set_tool_permissions(host: &Host, levels: &[(String, Option<String>)]) -> Result<(), Error> {
    for (tool, level) in levels {
        if tool.trim().is_empty() || tool.len() > 256 || tool.chars().any(char::is_control) {
            return Err(Error::BadPermission(format!(
                "tool name {:?}: name a tool (`extension__tool`, at most 256 bytes, one line)",
                gosling_util::printable(&tool.chars().take(64).collect::<String>())
            )));
        }
        let Some(level) = level else { continue };
        if !PERMISSION_LEVELS.contains(&level.as_str()) {
            return Err(Error::BadPermission(format!(
                "permission {:?} of {tool}: use always_allow, ask_before or never_allow",
                gosling_util::printable(&level.chars().take(64).collect::<String>())
            )));
        }
    }
    let entries: Vec<(String, Option<Value>)> =
        levels.iter().map(|(t, l)| (t.clone(), l.clone().map(Value::String))).collect();
    host.store.set_entries(TOOL_PERMISSIONS, &entries).map_err(Error::Store)?;
    let said: Vec<String> =
        levels.iter().map(|(t, l)| format!("{t}={}", l.as_deref().unwrap_or("(the mode)"))).collect();
    log::info!("tool permissions set: {}", said.join(", "));
    Ok(())
}

/// Removes a setting; false when it was not set.
pub fn remove(host: &Host, key: &str, is_secret: bool) -> Result<bool, Error> {
    check_key(key)?;
    if is_secret { host.store.remove_secret(key) } else { host.store.remove(key) }.map_err(Error::Store)
}

/// Every stored plain setting (and the extensions), as goose's read-all shows them; secrets
/// live in their own store and are never in it.
pub fn all(host: &Host) -> Result<serde_json::Map<String, Value>, atomic::Error> {
    host.store.all()
}

/// The model settings the web page's Settings dialog shows, and which secrets go with them.
pub const SHOWN: [&str; 7] =
    ["GOOSE_PROVIDER", "GOOSE_MODEL", "GOOSE_MODE", "OPENAI_HOST", "OPENAI_BASE_PATH", "ANTHROPIC_HOST", "OLLAMA_HOST"];
pub const SHOWN_SECRETS: [&str; 2] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// The settings in force (`SHOWN`: the environment's value, else the stored one), which of
/// them come from the environment (a stored value, if any, is overridden: a Save changes the
/// store, not what runs), which secrets are set — as `true`, never their values — and the
/// names of the stored secrets.
pub fn in_force(host: &Host) -> Value {
    let from_env = |k: &str| gosling_config::settings::in_environment(&gosling_config::ProcessEnv, k);
    let mut values = serde_json::Map::new();
    let mut environment = Vec::new();
    for k in SHOWN {
        if let Some(v) = host.setting(k) {
            values.insert(k.into(), Value::String(v));
        }
        if from_env(k) {
            environment.push(Value::String(k.into()));
        }
    }
    let mut secrets = serde_json::Map::new();
    for k in SHOWN_SECRETS {
        let set = from_env(k) || host.store.get_secret(k).ok().flatten().is_some();
        secrets.insert(k.into(), Value::Bool(set));
        if from_env(k) {
            environment.push(Value::String(k.into()));
        }
    }
    // The names of every stored secret (never a value; sign-in records left out), so the page
    // shows what is stored.
    let mut names: Vec<String> =
        host.store.secret_names().unwrap_or_default().into_iter().filter(|n| !n.starts_with("oauth:")).collect();
    names.sort();
    serde_json::json!({ "values": values, "from_environment": environment, "secrets_set": secrets, "secret_names": names })
}
