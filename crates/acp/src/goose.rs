//! goose's own ACP methods (`_goose/unstable/*`) that Goose Desktop 1.41+ calls over `goose
//! serve`, with the shapes of goose 1.45's published schema (`tests/contract/`): settings,
//! defaults, providers, the extension config, a session's info and extensions, tools and their
//! permissions, preferences; the ones gosling has nothing for answer empty lists (where Desktop
//! polls on load) or method-not-found.
//!
//! The params arrive typed (`goose_params::GooseCall`, read once) and the answers leave typed
//! (`goose_answers`, turned into JSON there): this module calls the core and builds the answer's
//! type from what it returns. The rules live below (`agent::settings`, `llm::catalog`, the trust policy,
//! the stores), shared with the HTTP routes.

use crate::goose_answers::{
    AppsList, ConfigAll, ConfigExtension, ConfigExtensions, ConfigValue, Defaults, Done, EmptyList, Exported,
    LiveVoice, Message, Preferences, PromptAnswer, PromptsList, ProviderConfig, ProviderEntry, ProviderField,
    ProviderStatus, ProvidersList, SessionExtensions, SessionInfo, Steered, ToolEntry, ToolsList,
};
use crate::goose_params::{imported, report, GooseCall, KeyValue};
use crate::protocol::invalid_params;
use crate::session::{agent_error, store_error, Agent, Reply};
use crate::session_update::SessionUpdate;
use crate::shapes::to_goose_extension;
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

/// Answers one of goose's methods, its params read into their type at the edge
/// (`GooseCall`, by `protocol`): the core called with them, the answer built from what it
/// returns.
pub fn call(agent: &Arc<Agent>, method: &str, call: GooseCall) -> Reply {
    use GooseCall as G;
    match call {
        G::ReadAllConfig => Ok(read_all(agent).to_value()),
        G::ReadConfig { key, secret } => {
            let value = settings::read(&agent.app, &key, secret).map_err(store_error)?;
            Ok(ConfigValue { value }.to_value())
        }
        G::UpsertConfig { key, value, secret } => {
            settings::upsert(&agent.app, &key, value, secret).map_err(setting_error)?;
            Ok(Done.to_value())
        }
        G::RemoveConfig { key, secret } => {
            settings::remove(&agent.app, &key, secret).map_err(setting_error)?;
            Ok(Done.to_value())
        }
        G::ReadDefaults => Ok(defaults(agent).to_value()),
        G::SaveDefaults { provider_id: id, model_id } => save_defaults(agent, &id, model_id),
        G::ClearDefaults => {
            for k in ["GOOSE_PROVIDER", "GOOSE_MODEL"] {
                settings::remove(&agent.app, k, false).map_err(setting_error)?;
            }
            Ok(defaults(agent).to_value())
        }
        G::ListProviders { provider_ids } => Ok(providers(agent, &provider_ids).to_value()),
        G::ReadProviderConfig { provider_id: id } => provider_config(agent, &id),
        G::SaveProviderConfig { provider_id: id, fields } => save_provider_config(agent, &id, &fields),
        G::DeleteProviderConfig { provider_id: id } => delete_provider_config(agent, &id),
        G::SessionInfo { session_id: sid } => {
            let s = agent.app.session_meta(&sid).map_err(|e| agent_error(e, &sid))?;
            Ok(SessionInfo { session: s }.to_value())
        }
        G::RenameSession { session_id: sid, title } => rename(agent, &sid, &title),
        G::TruncateConversation { session_id: sid, truncate_from } => {
            gosling_agent::history::truncate(&agent.app, &sid, truncate_from).map_err(|e| agent_error(e, &sid))?;
            Ok(Done.to_value())
        }
        G::ExportSession { session_id: sid } => {
            Ok(Exported { data: agent.app.export_session(&sid).map_err(|e| agent_error(e, &sid))? }.to_value())
        }
        G::UpdateWorkingDir(q) => {
            agent.app.update_working_dir(&q.session_id, &q.working_dir).map_err(|e| agent_error(e, &q.session_id))?;
            Ok(Done.to_value())
        }
        G::ImportSession(q) => {
            Ok(imported(&agent.app.import_session(&q.input, q.source).map_err(|e| agent_error(e, ""))?))
        }
        G::GetDiagnostics(q) => {
            Ok(report(&agent.app.diagnostics(&q.session_id, q.level).map_err(|e| agent_error(e, &q.session_id))?))
        }
        G::ListConfigExtensions => config_extensions(agent),
        G::AddConfigExtension { extension, enabled } => add_config_extension(agent, *extension, enabled),
        G::RemoveConfigExtension { config_key } => {
            agent.app.remove_config_extension(&name_to_key(&config_key)).map_err(|e| agent_error(e, ""))?;
            Ok(Done.to_value())
        }
        G::SetConfigExtensionEnabled { config_key, enabled } => set_enabled(agent, &config_key, enabled),
        G::ListSessionExtensions { session_id: sid } => {
            let configs = agent.app.session_extensions(&sid).map_err(|e| agent_error(e, &sid))?;
            Ok(SessionExtensions { configs }.to_value())
        }
        G::AddSessionExtension { session_id: sid, extension } => {
            agent.add_session_extension(&sid, *extension)?;
            Ok(Done.to_value())
        }
        G::RemoveSessionExtension { session_id: sid, key } => {
            agent.remove_session_extension(&sid, &key)?;
            Ok(Done.to_value())
        }
        G::ListTools { session_id: sid, extension_name } => tools(agent, &sid, extension_name.as_deref()),
        G::SetToolPermissions { levels } => set_permissions(agent, levels),
        G::ReadPreferences { keys } => preferences(agent, &keys),
        G::SavePreferences { values } => save_preferences(agent, &values),
        G::ListApps { session_id } => {
            Ok(AppsList { apps: gosling_agent::apps::list(&agent.app, session_id.as_deref()) }.to_value())
        }
        G::ListPrompts => {
            Ok(PromptsList { prompts: prompts::list(&agent.app).map_err(setting_error)? }.to_value())
        }
        G::GetPrompt { name } => {
            Ok(PromptAnswer { prompt: prompts::get(&agent.app, &name).map_err(setting_error)? }.to_value())
        }
        G::SavePrompt { name, content } => {
            let saved = prompts::save(&agent.app, &name, &content).map_err(setting_error)?;
            Ok(Message { message: format!("{} saved; the next turn sends it", saved.name) }.to_value())
        }
        G::ResetPrompt { name } => {
            let reset = prompts::reset(&agent.app, &name).map_err(setting_error)?;
            Ok(Message { message: format!("{} is the default again", reset.name) }.to_value())
        }
        // The Skills page: gosling loads no skills, recipes or subagents, so it has no sources
        // (goose answers the same over an empty home).
        G::ListSources => Ok(EmptyList::Sources.to_value()),
        // Readiness is checked for ACP agent providers (Claude Code, Codex, …); gosling's are
        // model APIs, whose state `providers/list` gives. goose refuses a model API the same way.
        G::CheckProviderReadiness { provider_id: id } => {
            let c = provider(&id)?;
            Err(invalid_params(format!(
                "provider {} is not an ACP agent provider, so it has no readiness check; providers/list says whether it is configured",
                c.name
            )))
        }
        G::LiveVoiceAvailability => {
            Ok(LiveVoice { status: "unavailable", message: "gosling has no live voice; type your message" }.to_value())
        }
        G::LiveVoiceStartOrStop => {
            Err(invalid_params("gosling has no live voice (session/live-voice/availability says unavailable); type your message"))
        }
        G::Steer { session_id: sid, expected_run_id, prompt } => {
            crate::updates::refuse_images(&prompt, || gosling_agent::usage::images(&agent.app, &sid))
                .map_err(invalid_params)?;
            let steered = agent.app.steer(&sid, &expected_run_id, prompt).map_err(setting_error)?;
            Ok(Steered { run_id: steered.run_id, message_id: steered.message_id }.to_value())
        }
        G::ListSlashCommands => Ok(EmptyList::SlashCommands.to_value()),
        G::ListAgentMentions => Ok(EmptyList::AgentMentions.to_value()),
        // Desktop polls these on load; gosling has no recipes or scheduler.
        G::ListRecipes => Ok(EmptyList::Recipes.to_value()),
        G::ListSchedules => Ok(EmptyList::Schedules.to_value()),
        G::Unknown => Err(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("{method} is not served by gosling (recipes, schedules, apps, dictation, local inference and custom providers are not part of it)"),
        )),
    }
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
fn read_all(agent: &Agent) -> ConfigAll {
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
    ConfigAll { config }
}

fn defaults(agent: &Agent) -> Defaults {
    Defaults { provider_id: agent.app.setting("GOOSE_PROVIDER"), model_id: agent.app.setting("GOOSE_MODEL") }
}

fn provider(id: &str) -> Result<&'static catalog::Provider, ErrorObject> {
    gosling_llm::canonical_provider(id).and_then(catalog::find).ok_or_else(|| {
        invalid_params(format!("provider {id:?} is not supported by gosling; use openai, anthropic or ollama"))
    })
}

fn save_defaults(agent: &Agent, id: &str, model: Option<String>) -> Reply {
    let provider = provider(id)?;
    let model = model.unwrap_or_else(|| provider.default_model.to_string());
    settings::upsert(&agent.app, "GOOSE_PROVIDER", json!(provider.name), false).map_err(setting_error)?;
    settings::upsert(&agent.app, "GOOSE_MODEL", json!(model), false).map_err(setting_error)?;
    Ok(defaults(agent).to_value())
}

/// goose's ProviderInventoryEntryDto for each provider gosling has (or of those asked for).
fn providers(agent: &Agent, only: &[String]) -> ProvidersList {
    let entries = catalog::PROVIDERS
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| o == c.name))
        .map(|c| ProviderEntry { provider: c, configured: catalog::is_configured(c.name, &|k| agent.app.setting(k)) })
        .collect();
    ProvidersList { entries }
}

fn provider_config(agent: &Agent, id: &str) -> Reply {
    let c = provider(id)?;
    let fields = c
        .keys
        .iter()
        .map(|(key, required, secret, _)| {
            let value = settings::read(&agent.app, key, *secret).ok().flatten();
            ProviderField {
                key,
                value: value.as_ref().and_then(Value::as_str).map(str::to_string),
                is_set: value.is_some(),
                is_secret: *secret,
                required: *required,
            }
        })
        .collect();
    Ok(ProviderConfig { fields }.to_value())
}

fn change_status(agent: &Agent, c: &catalog::Provider) -> Value {
    ProviderStatus { provider_id: c.name, is_configured: catalog::is_configured(c.name, &|k| agent.app.setting(k)) }
        .to_value()
}

fn save_provider_config(agent: &Agent, id: &str, fields: &[(String, String)]) -> Reply {
    let c = provider(id)?;
    for (key, value) in fields {
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

fn delete_provider_config(agent: &Agent, id: &str) -> Reply {
    let c = provider(id)?;
    for (key, _, secret, _) in c.keys {
        settings::remove(&agent.app, key, *secret).map_err(setting_error)?;
    }
    Ok(change_status(agent, c))
}

fn rename(agent: &Agent, sid: &str, title: &str) -> Reply {
    let title = agent.app.rename_session(sid, title).map_err(|e| agent_error(e, sid))?;
    let message_count = agent.app.session_meta(sid).ok().map(|s| s.message_count);
    agent.conn.update(sid, &SessionUpdate::SessionInfo { title, updated_at: None, user_set_name: true, message_count });
    Ok(Done.to_value())
}

fn config_extensions(agent: &Agent) -> Reply {
    let ex = agent.app.config_extensions().map_err(|e| agent_error(e, ""))?;
    let mut warnings = ex.warnings;
    let mut extensions = Vec::new();
    for e in &ex.entries {
        match to_goose_extension(&e.config) {
            Some(extension) => {
                extensions.push(ConfigExtension { extension, enabled: e.enabled, config_key: e.config.key() })
            }
            None => warnings.push(format!(
                "extension {} ({}) cannot be shown to goose serve's clients; manage it with the web page or /config/extensions",
                e.config.name(),
                e.config.type_name()
            )),
        }
    }
    Ok(ConfigExtensions { extensions, warnings }.to_value())
}

fn add_config_extension(agent: &Agent, config: gosling_extensions::config::ExtensionConfig, enabled: bool) -> Reply {
    // The same rules as `/config/extensions` (`agent::config_ops`).
    let name = config.name().to_string();
    let saved = agent.app.save_config_extension(config, enabled).map_err(|e| match e {
        gosling_agent::Error::Refused(e) => invalid_params(format!("extension {name}: {e}")),
        e => agent_error(e, ""),
    })?;
    if !saved.unresolved.is_empty() {
        log::info!("acp: config/extensions/add: saved switched off: {}", saved.unresolved.explain());
    }
    Ok(Done.to_value())
}

fn set_enabled(agent: &Agent, key: &str, enabled: bool) -> Reply {
    let key = name_to_key(key);
    agent.app.enable_config_extension(&key, enabled).map_err(|e| match e {
        e @ gosling_agent::Error::MissingSecrets { .. } => {
            invalid_params(format!("extension {key} cannot be enabled: {e}"))
        }
        e => agent_error(e, ""),
    })?;
    Ok(Done.to_value())
}

fn tools(agent: &Agent, sid: &str, extension: Option<&str>) -> Reply {
    let rt = agent.app.runtime(sid).map_err(|e| agent_error(e, sid))?;
    let filter = extension.map(runtime_key);
    let stored = permissions(agent);
    let default = agent.app.tool_permission_default(sid);
    let tools = rt
        .tools(filter.as_deref())
        .iter()
        .map(|t| {
            let mut info = gosling_extensions::runtime::tool_info(t, default.as_deref());
            let permission = match stored.get(&t.name) {
                Some(Value::String(level)) => Some(level.clone()),
                _ => default.clone(),
            };
            let strings = |v: &Value| -> Vec<String> {
                v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
            };
            ToolEntry {
                name: t.name.clone(),
                description: info["description"].as_str().unwrap_or("").to_string(),
                parameters: strings(&info["parameters"]),
                input_schema: info["input_schema"].take(),
                permission,
                output_schema: t.tool.output_schema.clone(),
            }
        })
        .collect();
    Ok(ToolsList { tools }.to_value())
}

fn permissions(agent: &Agent) -> Map<String, Value> {
    match agent.app.config_value(TOOL_PERMISSIONS) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn set_permissions(agent: &Agent, levels: Vec<(String, String)>) -> Reply {
    let levels: Vec<(String, Option<String>)> = levels.into_iter().map(|(tool, level)| (tool, Some(level))).collect();
    // The core's one atomic update (the rules and the merge are there, for every front end).
    settings::set_tool_permissions(&agent.app, &levels).map_err(|e| match e {
        gosling_agent::Error::BadPermission(why) => invalid_params(why),
        e => setting_error(e),
    })?;
    Ok(Done.to_value())
}

fn preference_key(k: &str) -> Result<&str, ErrorObject> {
    PREFERENCES
        .contains(&k)
        .then_some(k)
        .ok_or_else(|| invalid_params(format!("unknown preference {k:?}; goose's are {}", PREFERENCES.join(", "))))
}

fn preferences(agent: &Agent, asked: &[Value]) -> Reply {
    let keys: Vec<&str> = if asked.is_empty() {
        PREFERENCES.to_vec()
    } else {
        asked.iter().map(|k| preference_key(k.as_str().unwrap_or(""))).collect::<Result<_, _>>()?
    };
    let values = keys.iter().map(|k| (k.to_string(), agent.app.config_value(&format!("preferences.{k}")))).collect();
    Ok(Preferences { values }.to_value())
}

fn save_preferences(agent: &Agent, values: &[KeyValue]) -> Reply {
    for v in values {
        let key = preference_key(&v.key)?;
        let name = format!("preferences.{key}");
        match &v.value {
            Value::Null => settings::remove(&agent.app, &name, false).map(|_| ()),
            value => settings::upsert(&agent.app, &name, value.clone(), false),
        }
        .map_err(setting_error)?;
    }
    Ok(Done.to_value())
}
