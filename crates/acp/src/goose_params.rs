//! goose's own methods (`_goose/unstable/*`) as Rust types: each method's params read once
//! from the request into its type (a missing or mistyped field is an invalid-params error that
//! names it), and each answer built from the core's typed result. `goose.rs` dispatches on
//! these; JSON stays here, at the edge. Hand-written like `protocol.rs` (no derive visitors).

use gosling_agent::diagnostics::{Level, Report};
use gosling_agent::import::{ImportSource, Imported};
use gosling_extensions::config::ExtensionConfig;
use gosling_store::message::Content;
use gosling_wire::jsonrpc::ErrorObject;
use serde_json::{json, Map, Value};

/// `_goose/unstable/session/working-dir/update`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateWorkingDir {
    pub session_id: String,
    pub working_dir: String,
}

/// `_goose/unstable/session/import`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSession {
    pub input: String,
    pub source: ImportSource,
}

/// `_goose/unstable/diagnostics/get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDiagnostics {
    pub session_id: String,
    pub level: Level,
}

/// One `{key, value}` of `providers/config/save`'s `fields` or `preferences/save`'s `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue {
    pub key: String,
    pub value: Value,
}

/// A request for one of goose's methods, read once from its method and params: each method
/// its own variant with the fields it takes, typed. `Unknown` is a method gosling does not
/// serve (the dispatch answers −32601 with what it does serve).
#[derive(Debug, Clone, PartialEq)]
pub enum GooseCall {
    ReadAllConfig,
    ReadConfig {
        key: String,
        secret: bool,
    },
    UpsertConfig {
        key: String,
        value: Value,
        secret: bool,
    },
    RemoveConfig {
        key: String,
        secret: bool,
    },
    ReadDefaults,
    SaveDefaults {
        provider_id: String,
        model_id: Option<String>,
    },
    ClearDefaults,
    ListProviders {
        provider_ids: Vec<String>,
    },
    ReadProviderConfig {
        provider_id: String,
    },
    SaveProviderConfig {
        provider_id: String,
        fields: Vec<(String, String)>,
    },
    DeleteProviderConfig {
        provider_id: String,
    },
    CheckProviderReadiness {
        provider_id: String,
    },
    SessionInfo {
        session_id: String,
    },
    RenameSession {
        session_id: String,
        title: String,
    },
    TruncateConversation {
        session_id: String,
        truncate_from: i64,
    },
    ExportSession {
        session_id: String,
    },
    UpdateWorkingDir(UpdateWorkingDir),
    ImportSession(ImportSession),
    GetDiagnostics(GetDiagnostics),
    ListConfigExtensions,
    /// The extension as goose's `GooseExtension`, translated (`shapes::from_goose_extension`).
    AddConfigExtension {
        extension: Box<ExtensionConfig>,
        enabled: bool,
    },
    RemoveConfigExtension {
        config_key: String,
    },
    SetConfigExtensionEnabled {
        config_key: String,
        enabled: bool,
    },
    ListSessionExtensions {
        session_id: String,
    },
    AddSessionExtension {
        session_id: String,
        extension: Box<ExtensionConfig>,
    },
    /// Desktop 1.5x names it by `extensionKey`, 1.41–1.45 by `name`.
    RemoveSessionExtension {
        session_id: String,
        key: String,
    },
    ListTools {
        session_id: String,
        extension_name: Option<String>,
    },
    SetToolPermissions {
        levels: Vec<(String, String)>,
    },
    ReadPreferences {
        keys: Vec<Value>,
    },
    SavePreferences {
        values: Vec<KeyValue>,
    },
    ListApps {
        session_id: Option<String>,
    },
    ListPrompts,
    GetPrompt {
        name: String,
    },
    SavePrompt {
        name: String,
        content: String,
    },
    ResetPrompt {
        name: String,
    },
    ListSources,
    LiveVoiceAvailability,
    LiveVoiceStartOrStop,
    Steer {
        session_id: String,
        expected_run_id: String,
        prompt: Vec<Content>,
    },
    ListSlashCommands,
    ListAgentMentions,
    ListRecipes,
    ListSchedules,
    Unknown,
}

impl GooseCall {
    /// Reads `params` once into `method`'s type (`method` with or without the
    /// `_goose/unstable/` prefix).
    pub fn read(method: &str, p: &Value) -> Result<GooseCall, ErrorObject> {
        let name = method.strip_prefix("_goose/unstable/").unwrap_or(method);
        let empty = Map::new();
        let m = match p {
            Value::Null => &empty,
            p => object(p)?,
        };
        let secret = || m.get("isSecret").and_then(Value::as_bool).unwrap_or(false);
        let sid = || string(m, "sessionId");
        let provider_id = || string(m, "providerId");
        Ok(match name {
            "config/read-all" => GooseCall::ReadAllConfig,
            "config/read" => GooseCall::ReadConfig { key: string(m, "key")?, secret: secret() },
            "config/upsert" => GooseCall::UpsertConfig {
                key: string(m, "key")?,
                value: m.get("value").cloned().ok_or_else(|| invalid_params("missing `value`"))?,
                secret: secret(),
            },
            "config/remove" => GooseCall::RemoveConfig { key: string(m, "key")?, secret: secret() },
            "defaults/read" => GooseCall::ReadDefaults,
            "defaults/save" => GooseCall::SaveDefaults {
                provider_id: provider_id()?,
                model_id: m.get("modelId").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string),
            },
            "defaults/clear" => GooseCall::ClearDefaults,
            "providers/list" => GooseCall::ListProviders {
                provider_ids: m
                    .get("providerIds")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            },
            "providers/config/read" => GooseCall::ReadProviderConfig { provider_id: provider_id()? },
            "providers/config/save" => {
                let provider_id = provider_id()?;
                let fields = m
                    .get("fields")
                    .and_then(Value::as_array)
                    .ok_or_else(|| invalid_params("`fields` must be an array of {key, value}"))?;
                let fields = fields
                    .iter()
                    .map(|f| {
                        let f = object(f).map_err(|_| invalid_params("each of `fields` must be an object {key, value}"))?;
                        Ok((string(f, "key")?, string(f, "value")?))
                    })
                    .collect::<Result<_, ErrorObject>>()?;
                GooseCall::SaveProviderConfig { provider_id, fields }
            }
            "providers/config/delete" => GooseCall::DeleteProviderConfig { provider_id: provider_id()? },
            "providers/readiness/check" => GooseCall::CheckProviderReadiness { provider_id: provider_id()? },
            "session/info" => GooseCall::SessionInfo { session_id: sid()? },
            "session/rename" => GooseCall::RenameSession { session_id: sid()?, title: string(m, "title")? },
            "session/conversation/truncate" => GooseCall::TruncateConversation {
                session_id: sid()?,
                truncate_from: m.get("truncateFrom").and_then(Value::as_i64).ok_or_else(|| {
                    invalid_params("`truncateFrom` must be a whole number: the `created` time (unix seconds) of the first message to drop")
                })?,
            },
            "session/export" => GooseCall::ExportSession { session_id: sid()? },
            "session/working-dir/update" => GooseCall::UpdateWorkingDir(UpdateWorkingDir::read(p)?),
            "session/import" => GooseCall::ImportSession(ImportSession::read(p)?),
            "diagnostics/get" => GooseCall::GetDiagnostics(GetDiagnostics::read(p)?),
            "config/extensions/list" => GooseCall::ListConfigExtensions,
            "config/extensions/add" => GooseCall::AddConfigExtension {
                extension: Box::new(extension(m)?),
                enabled: m.get("enabled").and_then(Value::as_bool).unwrap_or(false),
            },
            "config/extensions/remove" => GooseCall::RemoveConfigExtension { config_key: string(m, "configKey")? },
            "config/extensions/set-enabled" => GooseCall::SetConfigExtensionEnabled {
                config_key: string(m, "configKey")?,
                enabled: m
                    .get("enabled")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| invalid_params("`enabled` must be true or false"))?,
            },
            "session/extensions/list" => GooseCall::ListSessionExtensions { session_id: sid()? },
            "session/extensions/add" => {
                let session_id = sid()?;
                GooseCall::AddSessionExtension { session_id, extension: Box::new(extension(m)?) }
            }
            "session/extensions/remove" => {
                let key = match m.get("extensionKey").and_then(Value::as_str) {
                    Some(k) => k.to_string(),
                    None => m.get("name").and_then(Value::as_str).map(str::to_string).ok_or_else(|| {
                        invalid_params("missing the string parameter `extensionKey` (or `name`, as Desktop 1.45 sends it)")
                    })?,
                };
                GooseCall::RemoveSessionExtension { session_id: sid()?, key }
            }
            "tools/list" => GooseCall::ListTools {
                session_id: sid()?,
                extension_name: m
                    .get("extensionName")
                    .and_then(Value::as_str)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string),
            },
            "tools/permissions/set" => {
                let list = m
                    .get("toolPermissions")
                    .and_then(Value::as_array)
                    .ok_or_else(|| invalid_params("`toolPermissions` must be an array of {toolName, permission}"))?;
                let levels = list
                    .iter()
                    .map(|e| {
                        let e = object(e)
                            .map_err(|_| invalid_params("each of `toolPermissions` must be an object {toolName, permission}"))?;
                        Ok((string(e, "toolName")?, string(e, "permission")?))
                    })
                    .collect::<Result<_, ErrorObject>>()?;
                GooseCall::SetToolPermissions { levels }
            }
            "preferences/read" => GooseCall::ReadPreferences {
                keys: m.get("keys").and_then(Value::as_array).cloned().unwrap_or_default(),
            },
            "preferences/save" => GooseCall::SavePreferences {
                values: m
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|v| KeyValue {
                        key: v.get("key").and_then(Value::as_str).unwrap_or("").to_string(),
                        value: v.get("value").cloned().unwrap_or(Value::Null),
                    })
                    .collect(),
            },
            "apps/list" => GooseCall::ListApps { session_id: m.get("sessionId").and_then(Value::as_str).map(str::to_string) },
            "config/prompts/list" => GooseCall::ListPrompts,
            "config/prompts/get" => GooseCall::GetPrompt { name: string(m, "name")? },
            "config/prompts/save" => GooseCall::SavePrompt { name: string(m, "name")?, content: string(m, "content")? },
            "config/prompts/reset" => GooseCall::ResetPrompt { name: string(m, "name")? },
            "sources/list" => GooseCall::ListSources,
            "session/live-voice/availability" => GooseCall::LiveVoiceAvailability,
            "session/live-voice/start" | "session/live-voice/stop" => GooseCall::LiveVoiceStartOrStop,
            "session/steer" => {
                let session_id = sid()?;
                let expected_run_id = string(m, "expectedRunId")?;
                let blocks = m
                    .get("prompt")
                    .and_then(Value::as_array)
                    .ok_or_else(|| invalid_params("`prompt` must be an array of content blocks"))?;
                let prompt = crate::updates::prompt_content(blocks).map_err(invalid_params)?;
                GooseCall::Steer { session_id, expected_run_id, prompt }
            }
            "slash-commands/list" => GooseCall::ListSlashCommands,
            "agent-mentions/list" => GooseCall::ListAgentMentions,
            "recipes/list" => GooseCall::ListRecipes,
            "schedules/list" => GooseCall::ListSchedules,
            _ => GooseCall::Unknown,
        })
    }
}

/// `extension`: goose's GooseExtension, as an extension config.
fn extension(m: &Map<String, Value>) -> Result<ExtensionConfig, ErrorObject> {
    crate::shapes::from_goose_extension(m.get("extension").unwrap_or(&Value::Null)).map_err(invalid_params)
}

/// JSON-RPC's invalid params, with what to fix (`protocol` reads these calls, so this module
/// does not import it back).
fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(gosling_wire::jsonrpc::INVALID_PARAMS, message)
}

fn object(p: &Value) -> Result<&Map<String, Value>, ErrorObject> {
    p.as_object().ok_or_else(|| invalid_params("`params` must be an object"))
}

fn string(m: &Map<String, Value>, k: &str) -> Result<String, ErrorObject> {
    match m.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(invalid_params(format!("missing the string parameter `{k}`"))),
        Some(_) => Err(invalid_params(format!("`{k}` must be a string"))),
    }
}

impl UpdateWorkingDir {
    pub fn read(p: &Value) -> Result<UpdateWorkingDir, ErrorObject> {
        let m = object(p)?;
        Ok(UpdateWorkingDir { session_id: string(m, "sessionId")?, working_dir: string(m, "workingDir")? })
    }
}

impl ImportSession {
    pub fn read(p: &Value) -> Result<ImportSession, ErrorObject> {
        let m = object(p)?;
        let input = string(m, "input")?;
        let source = string(m, "source")?;
        let source = ImportSource::parse(&source).ok_or_else(|| {
            invalid_params(format!(
                "`source` {source:?} is not one of auto, json, nostr; send \"json\" with an exported session"
            ))
        })?;
        Ok(ImportSession { input, source })
    }
}

impl GetDiagnostics {
    pub fn read(p: &Value) -> Result<GetDiagnostics, ErrorObject> {
        let m = object(p)?;
        let level = match m.get("level") {
            None | Some(Value::Null) => Level::Summary,
            Some(Value::String(l)) => {
                Level::parse(l).ok_or_else(|| invalid_params(format!("`level` {l:?} is not summary or full")))?
            }
            Some(_) => return Err(invalid_params("`level` must be \"summary\" or \"full\"")),
        };
        Ok(GetDiagnostics { session_id: string(m, "sessionId")?, level })
    }
}

/// goose's ImportSessionResponse.
pub fn imported(i: &Imported) -> Value {
    json!({ "sessionId": i.session_id, "title": i.title, "updatedAt": i.updated_at, "messageCount": i.message_count })
}

/// goose's diagnostics report (`schemaVersion` 1): its keys, with gosling's values; the
/// extensions' states under `extensions.states`, the errors as lines.
pub fn report(r: &Report) -> Value {
    let names: Vec<&str> = r.extensions.iter().map(|e| e.name.as_str()).collect();
    let states: Vec<Value> = r
        .extensions
        .iter()
        .map(|e| json!({ "name": e.name, "state": e.state.word(), "detail": e.state.detail() }))
        .collect();
    let session = r.session.as_ref().map(|s| {
        json!({ "id": s.id, "workingDir": s.working_dir, "messageCount": s.message_count, "sessionType": s.session_type })
    });
    json!({ "report": {
        "schemaVersion": 1,
        "generatedAt": r.generated_at,
        "level": r.level.name(),
        "system": {
            "app_version": r.version, "os": r.os, "os_version": r.os_version, "architecture": r.architecture,
            "provider": r.provider, "model": r.model, "enabled_extensions": names,
        },
        "config": null,
        "extensions": { "enabled": names, "states": states },
        "session": session,
        "logs": { "cli": [], "llm": [] },
        "prompts": [],
        "schedule": null,
        "scheduledRecipes": [],
        "errors": r.errors,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_agent::diagnostics::{ExtensionState, State};

    fn says(e: ErrorObject, words: &str) {
        assert_eq!(e.code, gosling_wire::jsonrpc::INVALID_PARAMS);
        assert!(e.message.contains(words), "{}", e.message);
    }

    fn read(method: &str, p: Value) -> GooseCall {
        GooseCall::read(&format!("_goose/unstable/{method}"), &p).unwrap_or_else(|e| panic!("{method}: {}", e.message))
    }

    fn refused(method: &str, p: Value) -> String {
        GooseCall::read(&format!("_goose/unstable/{method}"), &p).unwrap_err().message
    }

    /// Every method gosling serves, read from the params Desktop sends (goose 1.45's schema
    /// and 1.52's Desktop), into its variant.
    #[test]
    fn each_goose_method_reads_into_its_type() {
        use GooseCall as G;
        let s = || "20261128_1".to_string();
        let mcp = json!({"type":"mcp","server":{"name":"everything","command":"npx","args":["-y","@modelcontextprotocol/server-everything"],"env":[]},"envKeys":[]});
        let cases: Vec<(&str, Value, GooseCall)> = vec![
            ("config/read-all", json!({}), G::ReadAllConfig),
            ("config/read", json!({"key":"GOOSE_MODEL"}), G::ReadConfig { key: "GOOSE_MODEL".into(), secret: false }),
            (
                "config/upsert",
                json!({"key":"K","value":{"a":1},"isSecret":true}),
                G::UpsertConfig { key: "K".into(), value: json!({"a":1}), secret: true },
            ),
            ("config/remove", json!({"key":"K","isSecret":false}), G::RemoveConfig { key: "K".into(), secret: false }),
            ("defaults/read", json!({}), G::ReadDefaults),
            (
                "defaults/save",
                json!({"providerId":"openai","modelId":" gpt-4o "}),
                G::SaveDefaults { provider_id: "openai".into(), model_id: Some("gpt-4o".into()) },
            ),
            (
                "defaults/save",
                json!({"providerId":"ollama","modelId":""}),
                G::SaveDefaults { provider_id: "ollama".into(), model_id: None },
            ),
            ("defaults/clear", json!({}), G::ClearDefaults),
            ("providers/list", json!({}), G::ListProviders { provider_ids: vec![] }),
            (
                "providers/list",
                json!({"providerIds":["openai"]}),
                G::ListProviders { provider_ids: vec!["openai".into()] },
            ),
            (
                "providers/config/read",
                json!({"providerId":"openai"}),
                G::ReadProviderConfig { provider_id: "openai".into() },
            ),
            (
                "providers/config/save",
                json!({"providerId":"openai","fields":[{"key":"OPENAI_API_KEY","value":"sk"}]}),
                G::SaveProviderConfig {
                    provider_id: "openai".into(),
                    fields: vec![("OPENAI_API_KEY".into(), "sk".into())],
                },
            ),
            (
                "providers/config/delete",
                json!({"providerId":"openai"}),
                G::DeleteProviderConfig { provider_id: "openai".into() },
            ),
            (
                "providers/readiness/check",
                json!({"providerId":"openai"}),
                G::CheckProviderReadiness { provider_id: "openai".into() },
            ),
            ("session/info", json!({"sessionId":s()}), G::SessionInfo { session_id: s() }),
            (
                "session/rename",
                json!({"sessionId":s(),"title":"T"}),
                G::RenameSession { session_id: s(), title: "T".into() },
            ),
            (
                "session/conversation/truncate",
                json!({"sessionId":s(),"truncateFrom":1700000000}),
                G::TruncateConversation { session_id: s(), truncate_from: 1_700_000_000 },
            ),
            ("session/export", json!({"sessionId":s()}), G::ExportSession { session_id: s() }),
            (
                "session/working-dir/update",
                json!({"sessionId":s(),"workingDir":"/w"}),
                G::UpdateWorkingDir(UpdateWorkingDir { session_id: s(), working_dir: "/w".into() }),
            ),
            (
                "session/import",
                json!({"input":"{}","source":"json"}),
                G::ImportSession(ImportSession { input: "{}".into(), source: ImportSource::Json }),
            ),
            (
                "diagnostics/get",
                json!({"sessionId":s(),"level":"full"}),
                G::GetDiagnostics(GetDiagnostics { session_id: s(), level: Level::Full }),
            ),
            ("config/extensions/list", json!({}), G::ListConfigExtensions),
            (
                "config/extensions/remove",
                json!({"configKey":"memory"}),
                G::RemoveConfigExtension { config_key: "memory".into() },
            ),
            (
                "config/extensions/set-enabled",
                json!({"configKey":"memory","enabled":true}),
                G::SetConfigExtensionEnabled { config_key: "memory".into(), enabled: true },
            ),
            ("session/extensions/list", json!({"sessionId":s()}), G::ListSessionExtensions { session_id: s() }),
            (
                "session/extensions/remove",
                json!({"sessionId":s(),"extensionKey":"everything"}),
                G::RemoveSessionExtension { session_id: s(), key: "everything".into() },
            ),
            (
                "session/extensions/remove",
                json!({"sessionId":s(),"name":"everything"}),
                G::RemoveSessionExtension { session_id: s(), key: "everything".into() },
            ),
            ("tools/list", json!({"sessionId":s()}), G::ListTools { session_id: s(), extension_name: None }),
            (
                "tools/list",
                json!({"sessionId":s(),"extensionName":"everything"}),
                G::ListTools { session_id: s(), extension_name: Some("everything".into()) },
            ),
            (
                "tools/permissions/set",
                json!({"toolPermissions":[{"toolName":"everything__echo","permission":"always_allow"}]}),
                G::SetToolPermissions { levels: vec![("everything__echo".into(), "always_allow".into())] },
            ),
            (
                "preferences/read",
                json!({"keys":["gooseThinkingEffort"]}),
                G::ReadPreferences { keys: vec![json!("gooseThinkingEffort")] },
            ),
            (
                "preferences/save",
                json!({"values":[{"key":"gooseThinkingEffort","value":"high"}]}),
                G::SavePreferences {
                    values: vec![KeyValue { key: "gooseThinkingEffort".into(), value: json!("high") }],
                },
            ),
            ("apps/list", json!({}), G::ListApps { session_id: None }),
            ("apps/list", json!({"sessionId":s()}), G::ListApps { session_id: Some(s()) }),
            ("config/prompts/list", json!({}), G::ListPrompts),
            ("config/prompts/get", json!({"name":"system.md"}), G::GetPrompt { name: "system.md".into() }),
            (
                "config/prompts/save",
                json!({"name":"system.md","content":"Be brief."}),
                G::SavePrompt { name: "system.md".into(), content: "Be brief.".into() },
            ),
            ("config/prompts/reset", json!({"name":"system.md"}), G::ResetPrompt { name: "system.md".into() }),
            ("sources/list", json!({}), G::ListSources),
            ("session/live-voice/availability", json!({"sessionId":s()}), G::LiveVoiceAvailability),
            ("session/live-voice/start", json!({"sessionId":s(),"offerSdp":"v=0"}), G::LiveVoiceStartOrStop),
            ("session/live-voice/stop", json!({"sessionId":s()}), G::LiveVoiceStartOrStop),
            ("slash-commands/list", json!({}), G::ListSlashCommands),
            ("agent-mentions/list", json!({}), G::ListAgentMentions),
            ("recipes/list", json!({}), G::ListRecipes),
            ("schedules/list", json!({}), G::ListSchedules),
            ("context/report", json!({"sessionId":s()}), G::Unknown),
        ];
        for (method, params, want) in cases {
            assert_eq!(read(method, params.clone()), want, "{method} {params}");
        }
        // The two that carry an extension config and a prompt.
        let G::AddConfigExtension { extension, enabled: true } =
            read("config/extensions/add", json!({"extension":mcp,"enabled":true}))
        else {
            panic!()
        };
        assert_eq!(extension.name(), "everything");
        let G::AddSessionExtension { session_id, extension } =
            read("session/extensions/add", json!({"sessionId":s(),"extension":{"type":"builtin","name":"memory"}}))
        else {
            panic!()
        };
        assert_eq!((session_id.as_str(), extension.name()), ("20261128_1", "memory"));
        let G::Steer { expected_run_id, prompt, .. } = read(
            "session/steer",
            json!({"sessionId":s(),"expectedRunId":"run_1","prompt":[{"type":"text","text":"also this"}]}),
        ) else {
            panic!()
        };
        assert_eq!((expected_run_id.as_str(), prompt.len()), ("run_1", 1));
    }

    /// Each method's missing or mistyped field is refused with the field's name.
    #[test]
    fn each_goose_method_refuses_what_it_cannot_read() {
        assert!(refused("config/read", json!({})).contains("`key`"));
        assert!(refused("config/upsert", json!({"key":"K"})).contains("`value`"));
        assert!(refused("defaults/save", json!({"modelId":"m"})).contains("`providerId`"));
        assert!(refused("providers/config/save", json!({"providerId":"openai"})).contains("`fields`"));
        assert!(
            refused("providers/config/save", json!({"providerId":"openai","fields":[{"key":"K"}]})).contains("`value`")
        );
        assert!(refused("session/rename", json!({"sessionId":"s"})).contains("`title`"));
        assert!(refused("session/conversation/truncate", json!({"sessionId":"s","truncateFrom":"x"}))
            .contains("whole number"));
        assert!(refused("config/extensions/add", json!({"extension":{"type":"nope"}})).contains("type"));
        assert!(refused("config/extensions/set-enabled", json!({"configKey":"m"})).contains("true or false"));
        assert!(refused("session/extensions/remove", json!({"sessionId":"s"})).contains("`extensionKey`"));
        assert!(refused("tools/list", json!({})).contains("`sessionId`"));
        assert!(
            refused("tools/permissions/set", json!({"toolPermissions":[{"toolName":"t"}]})).contains("`permission`")
        );
        assert!(refused("config/prompts/save", json!({"name":"system.md"})).contains("`content`"));
        assert!(refused("session/steer", json!({"sessionId":"s","expectedRunId":"r"})).contains("`prompt`"));
        assert!(refused("session/info", json!("s")).contains("object"));
    }

    #[test]
    fn working_dir_update_reads_as_desktop_sends_it() {
        let p = json!({"sessionId":"20261128_1","workingDir":"/home/me/project"});
        let want = UpdateWorkingDir { session_id: "20261128_1".into(), working_dir: "/home/me/project".into() };
        assert_eq!(UpdateWorkingDir::read(&p).unwrap(), want);
        says(UpdateWorkingDir::read(&json!({"sessionId":"s"})).unwrap_err(), "`workingDir`");
        says(UpdateWorkingDir::read(&json!({"sessionId":"s","workingDir":7})).unwrap_err(), "must be a string");
        says(UpdateWorkingDir::read(&json!([])).unwrap_err(), "object");
    }

    #[test]
    fn import_reads_its_source_and_answers_goose_shape() {
        let p = json!({"input":"{}","source":"json"});
        assert_eq!(ImportSession::read(&p).unwrap(), ImportSession { input: "{}".into(), source: ImportSource::Json });
        assert_eq!(ImportSession::read(&json!({"input":"","source":"auto"})).unwrap().source, ImportSource::Auto);
        assert_eq!(ImportSession::read(&json!({"input":"","source":"nostr"})).unwrap().source, ImportSource::Nostr);
        says(ImportSession::read(&json!({"input":"x","source":"yaml"})).unwrap_err(), "auto, json, nostr");
        says(ImportSession::read(&json!({"source":"json"})).unwrap_err(), "`input`");
        let i = Imported {
            session_id: "20261128_2".into(),
            message_count: 3,
            title: "A chat".into(),
            updated_at: "2026-11-28T21:00:00Z".into(),
            left_out: vec!["everything".into()],
        };
        assert_eq!(
            imported(&i),
            json!({"sessionId":"20261128_2","title":"A chat","updatedAt":"2026-11-28T21:00:00Z","messageCount":3})
        );
    }

    #[test]
    fn diagnostics_reads_its_level_and_answers_goose_report() {
        let g = GetDiagnostics::read(&json!({"sessionId":"s"})).unwrap();
        assert_eq!(g, GetDiagnostics { session_id: "s".into(), level: Level::Summary });
        assert_eq!(GetDiagnostics::read(&json!({"sessionId":"s","level":"full"})).unwrap().level, Level::Full);
        says(GetDiagnostics::read(&json!({"sessionId":"s","level":"all"})).unwrap_err(), "summary or full");
        says(GetDiagnostics::read(&json!({"level":"full"})).unwrap_err(), "`sessionId`");
        let r = Report {
            generated_at: "2026-11-28T21:00:00Z".into(),
            level: Level::Summary,
            version: "1.0.0",
            os: "linux",
            os_version: "6.1".into(),
            architecture: "x86_64",
            provider: Some("openai".into()),
            model: None,
            extensions: vec![
                ExtensionState { name: "developer".into(), state: State::Running },
                ExtensionState { name: "broken".into(), state: State::Failed("exit 1".into()) },
            ],
            session: None,
            errors: vec!["extension broken failed: exit 1".into()],
        };
        let v = report(&r);
        let report = &v["report"];
        assert_eq!(report["schemaVersion"], 1);
        assert_eq!(report["system"]["enabled_extensions"], json!(["developer", "broken"]));
        assert_eq!(report["system"]["model"], Value::Null);
        assert_eq!(report["extensions"]["states"][1], json!({"name":"broken","state":"failed","detail":"exit 1"}));
        assert_eq!(report["errors"], json!(["extension broken failed: exit 1"]));
        assert_eq!(report["session"], Value::Null);
    }
}
