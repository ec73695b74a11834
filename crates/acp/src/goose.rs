//! goose's own ACP methods (`_goose/unstable/*`) that Goose Desktop 1.41+ calls over `goose
//! serve`, with the shapes of goose 1.45's published schema (`tests/contract/`): settings,
//! defaults, providers, the extension config, a session's info and extensions, tools and their
//! permissions, preferences; the ones gosling has nothing for answer empty lists (where Desktop
//! polls on load) or method-not-found.
//!
//! Owns only the translation: goose's `GooseExtension` ↔ `ExtensionConfig`, goose's DTOs from
//! the core's values. The rules live below (`agent::settings`, `llm::catalog`, the trust policy,
//! the stores), shared with the HTTP routes.

use crate::goose_params::{imported, report, GetDiagnostics, ImportSession, UpdateWorkingDir};
use crate::protocol::invalid_params;
use crate::session::{agent_error, store_error, str_param, Agent, Reply};
use crate::session_update::SessionUpdate;
use crate::shapes::{
    from_goose_extension, goose_app, goose_prompt, goose_prompt_entry, session_extension_entry, session_info,
    to_goose_extension,
};
use gosling_agent::prompts;
use gosling_agent::settings::{self, TOOL_PERMISSIONS};
use gosling_extensions::config::{name_to_key, runtime_key};
use gosling_llm::catalog;
use gosling_wire::jsonrpc::{ErrorObject, METHOD_NOT_FOUND};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The preference keys goose 1.45 defines (`PreferenceKey`).
const PREFERENCES: [&str; 5] = [
    "autoCompactThreshold",
    "gooseThinkingEffort",
    "voiceAutoSubmitPhrases",
    "voiceDictationProvider",
    "voiceDictationPreferredMic",
];

/// Whether `method` is answered here (the caller dispatches).
/// Answers one of goose's methods.
pub fn call(agent: &Arc<Agent>, method: &str, p: &Value) -> Reply {
    let name = method.strip_prefix("_goose/unstable/").unwrap_or(method);
    match name {
        "config/read-all" => Ok(read_all(agent)),
        "config/read" => {
            let key = str_param(p, "key")?;
            let v = settings::read(&agent.app, key, is_secret(p)).map_err(store_error)?;
            Ok(json!({ "value": v.unwrap_or(Value::Null) }))
        }
        "config/upsert" => {
            let key = str_param(p, "key")?;
            let value = p.get("value").cloned().ok_or_else(|| invalid_params("missing `value`"))?;
            settings::upsert(&agent.app, key, value, is_secret(p)).map_err(setting_error)?;
            Ok(json!({}))
        }
        "config/remove" => {
            settings::remove(&agent.app, str_param(p, "key")?, is_secret(p)).map_err(setting_error)?;
            Ok(json!({}))
        }
        "defaults/read" => Ok(defaults(agent)),
        "defaults/save" => save_defaults(agent, p),
        "defaults/clear" => {
            for k in ["GOOSE_PROVIDER", "GOOSE_MODEL"] {
                settings::remove(&agent.app, k, false).map_err(setting_error)?;
            }
            Ok(defaults(agent))
        }
        "providers/list" => Ok(providers(agent, p)),
        "providers/config/read" => provider_config(agent, p),
        "providers/config/save" => save_provider_config(agent, p),
        "providers/config/delete" => delete_provider_config(agent, p),
        "session/info" => {
            let sid = str_param(p, "sessionId")?;
            let s = agent.app.session_meta(sid).map_err(|e| agent_error(e, sid))?;
            Ok(json!({ "session": session_info(&s) }))
        }
        "session/rename" => rename(agent, p),
        "session/conversation/truncate" => {
            let sid = str_param(p, "sessionId")?;
            let from = p.get("truncateFrom").and_then(Value::as_i64).ok_or_else(|| {
                invalid_params("`truncateFrom` must be a whole number: the `created` time (unix seconds) of the first message to drop")
            })?;
            gosling_agent::history::truncate(&agent.app, sid, from).map_err(|e| agent_error(e, sid))?;
            Ok(json!({}))
        }
        "session/working-dir/update" => {
            let q = UpdateWorkingDir::read(p)?;
            agent.app.update_working_dir(&q.session_id, &q.working_dir).map_err(|e| agent_error(e, &q.session_id))?;
            Ok(json!({}))
        }
        "session/import" => {
            let q = ImportSession::read(p)?;
            Ok(imported(&agent.app.import_session(&q.input, q.source).map_err(|e| agent_error(e, ""))?))
        }
        "diagnostics/get" => {
            let q = GetDiagnostics::read(p)?;
            Ok(report(&agent.app.diagnostics(&q.session_id, q.level).map_err(|e| agent_error(e, &q.session_id))?))
        }
        "session/export" => {
            let sid = str_param(p, "sessionId")?;
            Ok(json!({ "data": agent.app.export_session(sid).map_err(|e| agent_error(e, sid))? }))
        }
        "config/extensions/list" => config_extensions(agent),
        "config/extensions/add" => add_config_extension(agent, p),
        "config/extensions/remove" => {
            let key = str_param(p, "configKey")?;
            agent.app.remove_config_extension(&name_to_key(key)).map_err(|e| agent_error(e, ""))?;
            Ok(json!({}))
        }
        "config/extensions/set-enabled" => set_enabled(agent, p),
        "session/extensions/list" => {
            let sid = str_param(p, "sessionId")?;
            let configs = agent.app.session_extensions(sid).map_err(|e| agent_error(e, sid))?;
            let list: Vec<Value> = configs.iter().filter_map(session_extension_entry).collect();
            Ok(json!({ "extensions": list }))
        }
        "session/extensions/add" => {
            let sid = str_param(p, "sessionId")?;
            let config = from_goose_extension(p.get("extension").unwrap_or(&Value::Null)).map_err(invalid_params)?;
            agent.add_session_extension(sid, config)?;
            Ok(json!({}))
        }
        "session/extensions/remove" => {
            // Desktop 1.5x names it by `extensionKey`, 1.41–1.45 by `name`.
            let key = match p.get("extensionKey").and_then(Value::as_str) {
                Some(k) => k,
                None => p.get("name").and_then(Value::as_str).ok_or_else(|| {
                    invalid_params("missing the string parameter `extensionKey` (or `name`, as Desktop 1.45 sends it)")
                })?,
            };
            agent.remove_session_extension(str_param(p, "sessionId")?, key)?;
            Ok(json!({}))
        }
        "tools/list" => tools(agent, p),
        "tools/permissions/set" => set_permissions(agent, p),
        "preferences/read" => preferences(agent, p),
        "preferences/save" => save_preferences(agent, p),
        "apps/list" => {
            let session = p.get("sessionId").and_then(Value::as_str);
            let apps: Vec<Value> = gosling_agent::apps::list(&agent.app, session).iter().map(goose_app).collect();
            Ok(json!({ "apps": apps }))
        }
        "config/prompts/list" => {
            let list = prompts::list(&agent.app).map_err(setting_error)?;
            Ok(json!({ "prompts": list.iter().map(goose_prompt_entry).collect::<Vec<_>>() }))
        }
        "config/prompts/get" => Ok(goose_prompt(&prompts::get(&agent.app, str_param(p, "name")?).map_err(setting_error)?)),
        "config/prompts/save" => {
            let saved =
                prompts::save(&agent.app, str_param(p, "name")?, str_param(p, "content")?).map_err(setting_error)?;
            Ok(json!({ "message": format!("{} saved; the next turn sends it", saved.name) }))
        }
        "config/prompts/reset" => {
            let reset = prompts::reset(&agent.app, str_param(p, "name")?).map_err(setting_error)?;
            Ok(json!({ "message": format!("{} is the default again", reset.name) }))
        }
        // The Skills page: gosling loads no skills, recipes or subagents, so it has no sources
        // (goose answers the same over an empty home).
        "sources/list" => Ok(json!({ "sources": [] })),
        // Readiness is checked for ACP agent providers (Claude Code, Codex, …); gosling's are
        // model APIs, whose state `providers/list` gives. goose refuses a model API the same way.
        "providers/readiness/check" => {
            let c = provider_id(p)?;
            Err(invalid_params(format!(
                "provider {} is not an ACP agent provider, so it has no readiness check; providers/list says whether it is configured",
                c.name
            )))
        }
        "session/live-voice/availability" => Ok(json!({
            "status": "unavailable",
            "message": "gosling has no live voice; type your message",
        })),
        "session/live-voice/start" | "session/live-voice/stop" => {
            Err(invalid_params("gosling has no live voice (session/live-voice/availability says unavailable); type your message"))
        }
        "session/steer" => {
            let sid = str_param(p, "sessionId")?;
            let expected = str_param(p, "expectedRunId")?;
            let blocks = p
                .get("prompt")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid_params("`prompt` must be an array of content blocks"))?;
            let content = crate::updates::prompt_content(blocks).map_err(invalid_params)?;
            crate::updates::refuse_images(&content, || gosling_agent::usage::images(&agent.app, sid))
                .map_err(invalid_params)?;
            let steered = agent.app.steer(sid, expected, content).map_err(setting_error)?;
            Ok(json!({ "runId": steered.run_id, "messageId": steered.message_id }))
        }
        "slash-commands/list" => Ok(json!({ "availableCommands": [] })),
        "agent-mentions/list" => Ok(json!({ "agents": [] })),
        // Desktop polls these on load; gosling has no recipes or scheduler.
        "recipes/list" => Ok(json!({ "recipes": [] })),
        "schedules/list" => Ok(json!({ "jobs": [] })),
        _ => Err(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("{method} is not served by gosling (recipes, schedules, apps, dictation, local inference and custom providers are not part of it)"),
        )),
    }
}

fn is_secret(p: &Value) -> bool {
    p.get("isSecret").and_then(Value::as_bool).unwrap_or(false)
}

fn setting_error(e: gosling_agent::Error) -> ErrorObject {
    match e {
        gosling_agent::Error::BadKey(why) => invalid_params(why),
        gosling_agent::Error::Steer(why) => invalid_params(why),
        gosling_agent::Error::Store(e) | gosling_agent::Error::SaveMessage(e) => store_error(e),
        e => ErrorObject::new(gosling_wire::jsonrpc::INTERNAL_ERROR, e.to_string()),
    }
}

/// Never fails (Desktop's start-up does not catch it): a store it cannot read answers `{}`.
fn read_all(agent: &Agent) -> Value {
    let mut config = settings::all(&agent.app).unwrap_or_else(|e| {
        log::warn!("acp: config/read-all: {e}; answering an empty config");
        Map::new()
    });
    // What the environment sets wins, as in a turn (non-credential GOOSE_* keys only).
    for k in ["GOOSE_PROVIDER", "GOOSE_MODEL", "GOOSE_MODE"] {
        if let Ok(Some(v)) = settings::read(&agent.app, k, false) {
            config.insert(k.into(), v);
        }
    }
    json!({ "config": config })
}

fn defaults(agent: &Agent) -> Value {
    json!({ "providerId": agent.app.setting("GOOSE_PROVIDER"), "modelId": agent.app.setting("GOOSE_MODEL") })
}

fn provider_id(p: &Value) -> Result<&'static catalog::Provider, ErrorObject> {
    let id = str_param(p, "providerId")?;
    gosling_llm::canonical_provider(id).and_then(catalog::find).ok_or_else(|| {
        invalid_params(format!("provider {id:?} is not supported by gosling; use openai, anthropic or ollama"))
    })
}

fn save_defaults(agent: &Agent, p: &Value) -> Reply {
    let provider = provider_id(p)?;
    let model = match p.get("modelId").and_then(Value::as_str).map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => provider.default_model.to_string(),
    };
    settings::upsert(&agent.app, "GOOSE_PROVIDER", json!(provider.name), false).map_err(setting_error)?;
    settings::upsert(&agent.app, "GOOSE_MODEL", json!(model), false).map_err(setting_error)?;
    Ok(defaults(agent))
}

/// goose's ProviderInventoryEntryDto for each provider gosling has.
fn providers(agent: &Agent, p: &Value) -> Value {
    let only: Vec<&str> =
        p.get("providerIds").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let entries: Vec<Value> = catalog::PROVIDERS
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.name))
        .map(|c| {
            let keys: Vec<Value> = c
                .keys
                .iter()
                .map(|(name, required, secret, default)| {
                    json!({ "name": name, "required": required, "secret": secret, "default": default,
                            "oauthFlow": false, "deviceCodeFlow": false, "primary": *required || *secret })
                })
                .collect();
            let models: Vec<Value> = c
                .models
                .iter()
                .map(|m| {
                    json!({ "id": m.name, "name": m.name, "family": m.family, "contextLimit": m.context_limit,
                                 "reasoning": m.reasoning, "recommended": m.name == c.default_model })
                })
                .collect();
            let configured = catalog::is_configured(c.name, &|k| agent.app.setting(k));
            json!({
                "providerId": c.name, "providerName": c.display_name, "description": c.description,
                "defaultModel": c.default_model,
                "configured": configured,
                // `category` for Desktop 1.41–1.45's schema, `available`, `visibleInSetup` and
                // `deprecated` for 1.5x's: each ignores the other's keys.
                "available": configured, "visibleInSetup": true, "deprecated": false, "acp": false,
                "providerType": "Builtin", "category": "model", "configKeys": keys, "setupSteps": c.setup_steps,
                "supportsRefresh": false, "refreshing": false, "models": models, "stale": false,
            })
        })
        .collect();
    json!({ "entries": entries })
}

fn provider_config(agent: &Agent, p: &Value) -> Reply {
    let c = provider_id(p)?;
    let fields: Vec<Value> = c
        .keys
        .iter()
        .map(|(key, required, secret, _)| {
            let value = settings::read(&agent.app, key, *secret).ok().flatten();
            json!({ "key": key, "value": value.as_ref().and_then(Value::as_str), "isSet": value.is_some(),
                    "isSecret": secret, "required": required })
        })
        .collect();
    Ok(json!({ "fields": fields }))
}

fn change_status(agent: &Agent, c: &catalog::Provider) -> Value {
    json!({
        "status": { "providerId": c.name, "isConfigured": catalog::is_configured(c.name, &|k| agent.app.setting(k)) },
        "refresh": { "started": [], "skipped": [] },
    })
}

fn save_provider_config(agent: &Agent, p: &Value) -> Reply {
    let c = provider_id(p)?;
    let fields = p
        .get("fields")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_params("`fields` must be an array of {key, value}"))?;
    for f in fields {
        let key = str_param(f, "key")?;
        let value = str_param(f, "value")?;
        let Some((_, _, secret, _)) = c.keys.iter().find(|k| k.0 == key) else {
            let known: Vec<&str> = c.keys.iter().map(|k| k.0).collect();
            return Err(invalid_params(format!(
                "{key:?} is not a setting of {}; it reads {}",
                c.name,
                known.join(", ")
            )));
        };
        settings::upsert(&agent.app, key, json!(value), *secret).map_err(setting_error)?;
    }
    Ok(change_status(agent, c))
}

fn delete_provider_config(agent: &Agent, p: &Value) -> Reply {
    let c = provider_id(p)?;
    for (key, _, secret, _) in c.keys {
        settings::remove(&agent.app, key, *secret).map_err(setting_error)?;
    }
    Ok(change_status(agent, c))
}

fn rename(agent: &Agent, p: &Value) -> Reply {
    let sid = str_param(p, "sessionId")?;
    let title = agent.app.rename_session(sid, str_param(p, "title")?).map_err(|e| agent_error(e, sid))?;
    agent.conn.update(sid, &SessionUpdate::SessionInfo { title, updated_at: None, user_set_name: true });
    Ok(json!({}))
}

fn config_extensions(agent: &Agent) -> Reply {
    let ex = agent.app.config_extensions().map_err(|e| agent_error(e, ""))?;
    let mut warnings = ex.warnings;
    let mut list = Vec::new();
    for e in &ex.entries {
        match to_goose_extension(&e.config) {
            Some(g) => list.push(json!({ "extension": g, "enabled": e.enabled, "configKey": e.config.key() })),
            None => warnings.push(format!(
                "extension {} ({}) cannot be shown to goose serve's clients; manage it with the web page or /config/extensions",
                e.config.name(),
                e.config.type_name()
            )),
        }
    }
    Ok(json!({ "extensions": list, "warnings": warnings }))
}

fn add_config_extension(agent: &Agent, p: &Value) -> Reply {
    let config = from_goose_extension(p.get("extension").unwrap_or(&Value::Null)).map_err(invalid_params)?;
    let enabled = p.get("enabled").and_then(Value::as_bool).unwrap_or(false);
    // The same rules as `/config/extensions` (`agent::config_ops`).
    let name = config.name().to_string();
    let saved = agent.app.save_config_extension(config, enabled).map_err(|e| match e {
        gosling_agent::Error::Refused(e) => invalid_params(format!("extension {name}: {e}")),
        e => agent_error(e, ""),
    })?;
    if !saved.unresolved.is_empty() {
        log::info!("acp: config/extensions/add: saved switched off: {}", saved.unresolved.explain());
    }
    Ok(json!({}))
}

fn set_enabled(agent: &Agent, p: &Value) -> Reply {
    let key = name_to_key(str_param(p, "configKey")?);
    let enabled =
        p.get("enabled").and_then(Value::as_bool).ok_or_else(|| invalid_params("`enabled` must be true or false"))?;
    agent.app.enable_config_extension(&key, enabled).map_err(|e| match e {
        e @ gosling_agent::Error::MissingSecrets { .. } => {
            invalid_params(format!("extension {key} cannot be enabled: {e}"))
        }
        e => agent_error(e, ""),
    })?;
    Ok(json!({}))
}

fn tools(agent: &Agent, p: &Value) -> Reply {
    let sid = str_param(p, "sessionId")?;
    let rt = agent.app.runtime(sid).map_err(|e| agent_error(e, sid))?;
    let filter = p.get("extensionName").and_then(Value::as_str).filter(|e| !e.is_empty()).map(runtime_key);
    let stored = permissions(agent);
    let default = agent.app.tool_permission_default(sid);
    let list: Vec<Value> = rt
        .tools(filter.as_deref())
        .iter()
        .map(|t| {
            let info = gosling_extensions::runtime::tool_info(t, default.as_deref());
            let permission = stored.get(&t.name).cloned().unwrap_or_else(|| info["permission"].clone());
            let mut item = json!({ "name": info["name"], "description": info["description"], "parameters": info["parameters"],
                    "inputSchema": info["input_schema"], "permission": permission });
            if let Some(out) = &t.tool.output_schema {
                item["outputSchema"] = out.clone();
            }
            item
        })
        .collect();
    Ok(json!({ "tools": list }))
}

fn permissions(agent: &Agent) -> Map<String, Value> {
    match agent.app.config_value(TOOL_PERMISSIONS) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn set_permissions(agent: &Agent, p: &Value) -> Reply {
    let list = p
        .get("toolPermissions")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_params("`toolPermissions` must be an array of {toolName, permission}"))?;
    let levels = list
        .iter()
        .map(|e| Ok((str_param(e, "toolName")?.to_string(), Some(str_param(e, "permission")?.to_string()))))
        .collect::<Result<Vec<_>, ErrorObject>>()?;
    // The core's one atomic update (the rules and the merge are there, for every front end).
    settings::set_tool_permissions(&agent.app, &levels).map_err(|e| match e {
        gosling_agent::Error::BadPermission(why) => invalid_params(why),
        e => setting_error(e),
    })?;
    Ok(json!({}))
}

fn preference_key(k: &Value) -> Result<&str, ErrorObject> {
    let k = k.as_str().unwrap_or("");
    PREFERENCES
        .contains(&k)
        .then_some(k)
        .ok_or_else(|| invalid_params(format!("unknown preference {k:?}; goose's are {}", PREFERENCES.join(", "))))
}

fn preferences(agent: &Agent, p: &Value) -> Reply {
    let asked: Vec<&Value> = p.get("keys").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    let keys: Vec<&str> = if asked.is_empty() {
        PREFERENCES.to_vec()
    } else {
        asked.into_iter().map(preference_key).collect::<Result<_, _>>()?
    };
    let values: Vec<Value> = keys
        .iter()
        .map(|k| json!({ "key": k, "value": agent.app.config_value(&format!("preferences.{k}")) }))
        .collect();
    Ok(json!({ "values": values }))
}

fn save_preferences(agent: &Agent, p: &Value) -> Reply {
    for v in p.get("values").and_then(Value::as_array).into_iter().flatten() {
        let key = preference_key(v.get("key").unwrap_or(&Value::Null))?;
        let name = format!("preferences.{key}");
        match v.get("value") {
            None | Some(Value::Null) => settings::remove(&agent.app, &name, false).map(|_| ()),
            Some(value) => settings::upsert(&agent.app, &name, value.clone(), false),
        }
        .map_err(setting_error)?;
    }
    Ok(json!({}))
}
