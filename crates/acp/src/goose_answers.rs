//! The answers of goose's own methods (`_goose/unstable/*`) as Rust types: `goose::call` builds
//! one of these from what the core returns, and each turns into JSON only here, at the edge, by
//! its own `to_value`, with the keys in the order goose 1.52 writes them (serde_json keeps
//! insertion order in this workspace).
//!
//! Written by hand like `protocol` and `session_update` (no serde derives: their visitors cost
//! bytes in the static binary). What is still goose's open JSON form is a `Value` on purpose:
//! a GooseExtension (`shapes::to_goose_extension`), a tool's input schema, a config value.

use crate::shapes::{goose_app, goose_prompt, goose_prompt_entry, session_extension_entry, session_info};
use gosling_agent::apps::App;
use gosling_agent::prompts::Prompt;
use gosling_extensions::config::ExtensionConfig;
use gosling_llm::catalog;
use gosling_store::sessions::Session;
use serde_json::{json, Map, Value};

/// `{}`: the answer of the methods that only act (upsert, remove, rename, truncate, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done;

impl Done {
    pub fn to_value(self) -> Value {
        Value::Object(Map::new())
    }
}

/// `config/read-all`: every setting, what the environment sets winning.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigAll {
    pub config: Map<String, Value>,
}

impl ConfigAll {
    pub fn to_value(self) -> Value {
        json!({ "config": self.config })
    }
}

/// `config/read`: one setting's value, `null` when unset.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigValue {
    pub value: Option<Value>,
}

impl ConfigValue {
    pub fn to_value(self) -> Value {
        json!({ "value": self.value.unwrap_or(Value::Null) })
    }
}

/// `defaults/read`, `defaults/save`, `defaults/clear`: the default provider and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub provider_id: Option<String>,
    pub model_id: Option<String>,
}

impl Defaults {
    pub fn to_value(&self) -> Value {
        json!({ "providerId": self.provider_id, "modelId": self.model_id })
    }
}

/// `providers/list`: goose's ProviderInventoryEntryDto for each provider gosling has.
pub struct ProvidersList {
    pub entries: Vec<ProviderEntry>,
}

/// One provider of the catalog and whether its settings are there.
#[derive(Clone, Copy)]
pub struct ProviderEntry {
    pub provider: &'static catalog::Provider,
    pub configured: bool,
}

impl ProvidersList {
    pub fn to_value(&self) -> Value {
        json!({ "entries": self.entries.iter().map(ProviderEntry::to_value).collect::<Vec<_>>() })
    }
}

impl ProviderEntry {
    pub fn to_value(&self) -> Value {
        let c = self.provider;
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
        json!({
            "providerId": c.name, "providerName": c.display_name, "description": c.description,
            "defaultModel": c.default_model,
            "configured": self.configured,
            // `category` for Desktop 1.41–1.45's schema, `available`, `visibleInSetup` and
            // `deprecated` for 1.5x's: each ignores the other's keys.
            "available": self.configured, "visibleInSetup": true, "deprecated": false, "acp": false,
            "providerType": "Builtin", "category": "model", "configKeys": keys, "setupSteps": c.setup_steps,
            "supportsRefresh": false, "refreshing": false, "models": models, "stale": false,
        })
    }
}

/// `providers/config/read`: each setting of a provider, secrets' values never shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub fields: Vec<ProviderField>,
}

/// One setting of a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderField {
    pub key: &'static str,
    /// The value when it is a plain string (a secret reads as set, not as its value).
    pub value: Option<String>,
    pub is_set: bool,
    pub is_secret: bool,
    pub required: bool,
}

impl ProviderConfig {
    pub fn to_value(&self) -> Value {
        let fields: Vec<Value> = self
            .fields
            .iter()
            .map(|f| {
                json!({ "key": f.key, "value": f.value, "isSet": f.is_set, "isSecret": f.is_secret,
                        "required": f.required })
            })
            .collect();
        json!({ "fields": fields })
    }
}

/// `providers/config/save` and `providers/config/delete`: the provider's state after the change
/// (gosling refreshes no model lists, so `refresh` starts and skips nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderStatus {
    pub provider_id: &'static str,
    pub is_configured: bool,
}

impl ProviderStatus {
    pub fn to_value(self) -> Value {
        json!({
            "status": { "providerId": self.provider_id, "isConfigured": self.is_configured },
            "refresh": { "started": [], "skipped": [] },
        })
    }
}

/// `session/info`: the session's listing entry (`shapes::session_info`).
pub struct SessionInfo {
    pub session: Session,
}

impl SessionInfo {
    pub fn to_value(&self) -> Value {
        json!({ "session": session_info(&self.session) })
    }
}

/// `session/export`: the session as goose's JSON export, one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub data: String,
}

impl Exported {
    pub fn to_value(self) -> Value {
        json!({ "data": self.data })
    }
}

/// `config/extensions/list`: the extensions of the config Desktop can show, and a warning for
/// each it cannot.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigExtensions {
    pub extensions: Vec<ConfigExtension>,
    pub warnings: Vec<String>,
}

/// One extension of the config: its GooseExtension form, whether it is on, its key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigExtension {
    pub extension: Value,
    pub enabled: bool,
    pub config_key: String,
}

impl ConfigExtensions {
    pub fn to_value(self) -> Value {
        let list: Vec<Value> = self
            .extensions
            .into_iter()
            .map(|e| json!({ "extension": e.extension, "enabled": e.enabled, "configKey": e.config_key }))
            .collect();
        json!({ "extensions": list, "warnings": self.warnings })
    }
}

/// `session/extensions/list`: the session's extensions, each as `shapes::session_extension_entry`
/// (the kinds Desktop cannot show are left out).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionExtensions {
    pub configs: Vec<ExtensionConfig>,
}

impl SessionExtensions {
    pub fn to_value(&self) -> Value {
        let list: Vec<Value> = self.configs.iter().filter_map(session_extension_entry).collect();
        json!({ "extensions": list })
    }
}

/// `tools/list`: the session's tools with their permission.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsList {
    pub tools: Vec<ToolEntry>,
}

/// One tool: its name, description, parameter names, schemas and permission level.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub name: String,
    pub description: String,
    pub parameters: Vec<String>,
    pub input_schema: Value,
    pub permission: Option<String>,
    pub output_schema: Option<Value>,
}

impl ToolsList {
    pub fn to_value(self) -> Value {
        let list: Vec<Value> = self
            .tools
            .into_iter()
            .map(|t| {
                let mut item = json!({ "name": t.name, "description": t.description, "parameters": t.parameters,
                        "inputSchema": t.input_schema, "permission": t.permission });
                if let Some(out) = t.output_schema {
                    item["outputSchema"] = out;
                }
                item
            })
            .collect();
        json!({ "tools": list })
    }
}

/// `preferences/read`: each asked preference's value, `null` when unset.
#[derive(Debug, Clone, PartialEq)]
pub struct Preferences {
    pub values: Vec<(String, Option<Value>)>,
}

impl Preferences {
    pub fn to_value(self) -> Value {
        let values: Vec<Value> = self.values.into_iter().map(|(k, v)| json!({ "key": k, "value": v })).collect();
        json!({ "values": values })
    }
}

/// `apps/list`: the MCP Apps the extensions offer (`shapes::goose_app`).
pub struct AppsList {
    pub apps: Vec<App>,
}

impl AppsList {
    pub fn to_value(&self) -> Value {
        json!({ "apps": self.apps.iter().map(goose_app).collect::<Vec<_>>() })
    }
}

/// `config/prompts/list`: the editable prompts (`shapes::goose_prompt_entry`).
pub struct PromptsList {
    pub prompts: Vec<Prompt>,
}

impl PromptsList {
    pub fn to_value(&self) -> Value {
        json!({ "prompts": self.prompts.iter().map(goose_prompt_entry).collect::<Vec<_>>() })
    }
}

/// `config/prompts/get`: one prompt (`shapes::goose_prompt`).
pub struct PromptAnswer {
    pub prompt: Prompt,
}

impl PromptAnswer {
    pub fn to_value(&self) -> Value {
        goose_prompt(&self.prompt)
    }
}

/// `config/prompts/save` and `config/prompts/reset`: what happened, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub message: String,
}

impl Message {
    pub fn to_value(self) -> Value {
        json!({ "message": self.message })
    }
}

/// `session/steer`: the run the message joined and the message's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steered {
    pub run_id: String,
    pub message_id: String,
}

impl Steered {
    pub fn to_value(self) -> Value {
        json!({ "runId": self.run_id, "messageId": self.message_id })
    }
}

/// `session/live-voice/availability`: whether live voice can start, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveVoice {
    pub status: &'static str,
    pub message: &'static str,
}

impl LiveVoice {
    pub fn to_value(self) -> Value {
        json!({ "status": self.status, "message": self.message })
    }
}

/// The lists gosling has nothing for (Desktop polls them on load): each answers its key with
/// an empty list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyList {
    /// `sources/list` (`sources`).
    Sources,
    /// `slash-commands/list` (`availableCommands`).
    SlashCommands,
    /// `agents/mentions/list` (`agents`).
    AgentMentions,
    /// `recipes/list` (`recipes`).
    Recipes,
    /// `schedules/list` (`jobs`).
    Schedules,
}

impl EmptyList {
    pub fn key(self) -> &'static str {
        match self {
            EmptyList::Sources => "sources",
            EmptyList::SlashCommands => "availableCommands",
            EmptyList::AgentMentions => "agents",
            EmptyList::Recipes => "recipes",
            EmptyList::Schedules => "jobs",
        }
    }

    pub fn to_value(self) -> Value {
        let mut m = Map::new();
        m.insert(self.key().into(), Value::Array(Vec::new()));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    //! One test per method: the answer's JSON shape — its keys in order and their JSON types —
    //! as goose 1.52's `goose serve` answers it (`tests/it/goose_diff.rs` compares the live
    //! answers; `tests/contract/goose-differences.json` lists where gosling's differ on purpose).
    use super::*;
    use gosling_wire::mcp_types::Resource;

    /// `{key:type,…}` in key order; an array as `[shape of its first item]`.
    fn shape(v: &Value) -> String {
        match v {
            Value::Null => "null".into(),
            Value::Bool(_) => "bool".into(),
            Value::Number(_) => "number".into(),
            Value::String(_) => "string".into(),
            Value::Array(a) => format!("[{}]", a.first().map(shape).unwrap_or_default()),
            Value::Object(m) => {
                let fields: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{}", shape(v))).collect();
                format!("{{{}}}", fields.join(","))
            }
        }
    }

    fn prompt(customized: bool) -> Prompt {
        Prompt {
            name: "system.md",
            description: "the system prompt",
            default_content: "You are goose.",
            content: "Be brief.".into(),
            customized,
        }
    }

    #[test]
    fn acting_methods_answer_an_empty_object() {
        // config/upsert, config/remove, session/rename, session/truncate, extensions add/remove, …
        assert_eq!(shape(&Done.to_value()), "{}");
    }

    #[test]
    fn config_read_all_is_the_config_object_in_its_order() {
        let mut config = Map::new();
        config.insert("GOOSE_PROVIDER".into(), json!("openai"));
        config.insert("extensions".into(), json!({"developer": {"enabled": true}}));
        let v = ConfigAll { config }.to_value();
        assert_eq!(shape(&v), "{config:{GOOSE_PROVIDER:string,extensions:{developer:{enabled:bool}}}}");
    }

    #[test]
    fn config_read_is_the_value_or_null() {
        assert_eq!(shape(&ConfigValue { value: Some(json!(0.8)) }.to_value()), "{value:number}");
        assert_eq!(shape(&ConfigValue { value: None }.to_value()), "{value:null}");
    }

    #[test]
    fn defaults_name_provider_then_model() {
        let set = Defaults { provider_id: Some("openai".into()), model_id: Some("gpt-4o".into()) };
        assert_eq!(shape(&set.to_value()), "{providerId:string,modelId:string}");
        let unset = Defaults { provider_id: None, model_id: None };
        assert_eq!(shape(&unset.to_value()), "{providerId:null,modelId:null}");
    }

    #[test]
    fn providers_list_entries_are_goose_inventory_entries() {
        let c = catalog::PROVIDERS.iter().find(|c| c.name == "openai").expect("openai is in the catalog");
        let v = ProvidersList { entries: vec![ProviderEntry { provider: c, configured: true }] }.to_value();
        assert_eq!(
            shape(&v),
            "{entries:[{providerId:string,providerName:string,description:string,defaultModel:string,\
             configured:bool,available:bool,visibleInSetup:bool,deprecated:bool,acp:bool,\
             providerType:string,category:string,\
             configKeys:[{name:string,required:bool,secret:bool,default:null,oauthFlow:bool,deviceCodeFlow:bool,primary:bool}],\
             setupSteps:[string],supportsRefresh:bool,refreshing:bool,\
             models:[{id:string,name:string,family:string,contextLimit:number,reasoning:bool,recommended:bool}],stale:bool}]}"
        );
        let e = &v["entries"][0];
        assert_eq!(
            (&e["providerId"], &e["configured"], &e["available"]),
            (&json!("openai"), &json!(true), &json!(true))
        );
        let recommended: Vec<&Value> =
            e["models"].as_array().unwrap().iter().filter(|m| m["recommended"] == json!(true)).collect();
        assert_eq!(recommended.len(), 1, "only the default model is recommended");
        assert_eq!(recommended[0]["id"], json!(c.default_model));
    }

    #[test]
    fn provider_config_read_fields_never_show_a_secret() {
        let fields = vec![
            ProviderField { key: "OPENAI_API_KEY", value: None, is_set: true, is_secret: true, required: true },
            ProviderField {
                key: "OPENAI_HOST",
                value: Some("https://api.openai.com".into()),
                is_set: true,
                is_secret: false,
                required: false,
            },
        ];
        let v = ProviderConfig { fields }.to_value();
        assert_eq!(shape(&v), "{fields:[{key:string,value:null,isSet:bool,isSecret:bool,required:bool}]}");
        assert_eq!(shape(&v["fields"][1]), "{key:string,value:string,isSet:bool,isSecret:bool,required:bool}");
    }

    #[test]
    fn provider_config_save_and_delete_answer_the_status_and_an_empty_refresh() {
        let v = ProviderStatus { provider_id: "anthropic", is_configured: false }.to_value();
        assert_eq!(shape(&v), "{status:{providerId:string,isConfigured:bool},refresh:{started:[],skipped:[]}}");
    }

    #[test]
    fn session_info_is_the_listing_entry_with_goose_meta() {
        let session = Session {
            id: "20261128_1".into(),
            name: "A title".into(),
            working_dir: "/w".into(),
            created_at: "2026-11-28T10:00:00Z".into(),
            updated_at: "2026-11-28T11:00:00Z".into(),
            provider_name: Some("openai".into()),
            model_config: Some(json!({"model_name": "gpt-4o"})),
            ..Default::default()
        };
        let v = SessionInfo { session }.to_value();
        assert_eq!(
            shape(&v),
            "{session:{sessionId:string,cwd:string,title:string,updatedAt:string,_meta:{messageCount:number,\
             createdAt:string,lastMessageAt:string,archivedAt:null,projectId:null,providerId:string,modelId:string,\
             sessionType:string,userSetName:bool,hasRecipe:bool}}}"
        );
    }

    #[test]
    fn session_export_is_one_string() {
        assert_eq!(shape(&Exported { data: "{\"id\":\"x\"}".into() }.to_value()), "{data:string}");
    }

    #[test]
    fn config_extensions_list_has_entries_and_warnings() {
        let extension = json!({"type": "builtin", "name": "developer", "description": "", "display_name": "Developer", "timeout": 300, "bundled": true});
        let list = ConfigExtensions {
            extensions: vec![ConfigExtension { extension, enabled: true, config_key: "developer".into() }],
            warnings: vec!["extension old (sse) cannot be shown".into()],
        };
        assert_eq!(
            shape(&list.to_value()),
            "{extensions:[{extension:{type:string,name:string,description:string,display_name:string,timeout:number,bundled:bool},\
             enabled:bool,configKey:string}],warnings:[string]}"
        );
        let empty = ConfigExtensions { extensions: vec![], warnings: vec![] };
        assert_eq!(shape(&empty.to_value()), "{extensions:[],warnings:[]}");
    }

    #[test]
    fn session_extensions_list_is_the_entries() {
        let config = |v: Value| ExtensionConfig::from_value(v).expect("a valid extension config");
        let configs = vec![
            config(
                json!({"type": "platform", "name": "todo", "description": "Todo", "display_name": "Todo", "bundled": true}),
            ),
            // Desktop cannot show an sse extension: it is left out.
            config(json!({"type": "sse", "name": "old", "description": "", "uri": "http://127.0.0.1:9/sse"})),
        ];
        let v = SessionExtensions { configs }.to_value();
        assert_eq!(
            shape(&v),
            "{extensions:[{type:string,name:string,description:string,display_name:string,bundled:bool,\
             extension:{type:string,name:string,description:string,display_name:string,bundled:bool},extensionKey:string}]}"
        );
        assert_eq!(v["extensions"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["extensions"][0]["extensionKey"], json!("todo"));
    }

    #[test]
    fn tools_list_names_schemas_and_permission() {
        let tool = |output: Option<Value>, permission: Option<&str>| ToolEntry {
            name: "developer__shell".into(),
            description: "Run a command".into(),
            parameters: vec!["command".into()],
            input_schema: json!({"type": "object"}),
            permission: permission.map(str::to_string),
            output_schema: output,
        };
        let v = ToolsList { tools: vec![tool(None, Some("ask_before"))] }.to_value();
        assert_eq!(
            shape(&v),
            "{tools:[{name:string,description:string,parameters:[string],inputSchema:{type:string},permission:string}]}"
        );
        let v = ToolsList { tools: vec![tool(Some(json!({"type": "object"})), None)] }.to_value();
        assert_eq!(
            shape(&v["tools"][0]),
            "{name:string,description:string,parameters:[string],inputSchema:{type:string},permission:null,outputSchema:{type:string}}"
        );
    }

    #[test]
    fn preferences_read_is_key_value_pairs() {
        let v = Preferences {
            values: vec![("autoCompactThreshold".into(), Some(json!(0.8))), ("gooseThinkingEffort".into(), None)],
        }
        .to_value();
        assert_eq!(shape(&v), "{values:[{key:string,value:number}]}");
        assert_eq!(v["values"][1], json!({"key": "gooseThinkingEffort", "value": null}));
    }

    #[test]
    fn apps_list_is_goose_app_entries() {
        let app = App {
            extension: "weather".into(),
            resource: Resource { uri: "ui://weather/map".into(), name: "map".into(), ..Default::default() },
            html: Some("<p>map</p>".into()),
        };
        let v = AppsList { apps: vec![app] }.to_value();
        assert_eq!(
            shape(&v),
            "{apps:[{uri:string,name:string,mimeType:string,mcpServers:[string],width:number,height:number,resizable:bool,text:string}]}"
        );
    }

    #[test]
    fn prompts_list_and_get_are_goose_prompt_entries() {
        let v = PromptsList { prompts: vec![prompt(true)] }.to_value();
        assert_eq!(
            shape(&v),
            "{prompts:[{name:string,description:string,defaultContent:string,isCustomized:bool,userContent:string}]}"
        );
        let v = PromptsList { prompts: vec![prompt(false)] }.to_value();
        assert!(v["prompts"][0].get("userContent").is_none(), "a default prompt has no userContent");
        let v = PromptAnswer { prompt: prompt(true) }.to_value();
        assert_eq!(shape(&v), "{name:string,content:string,defaultContent:string,isCustomized:bool}");
    }

    #[test]
    fn prompts_save_and_reset_answer_a_message() {
        assert_eq!(shape(&Message { message: "system.md saved".into() }.to_value()), "{message:string}");
    }

    #[test]
    fn steer_names_the_run_and_the_message() {
        let v = Steered { run_id: "run-1".into(), message_id: "msg-1".into() }.to_value();
        assert_eq!(shape(&v), "{runId:string,messageId:string}");
    }

    #[test]
    fn live_voice_availability_is_a_status_and_why() {
        let v = LiveVoice { status: "unavailable", message: "no live voice" }.to_value();
        assert_eq!(shape(&v), "{status:string,message:string}");
        assert_eq!(v["status"], json!("unavailable"));
    }

    #[test]
    fn the_lists_gosling_has_nothing_for_are_empty_under_goose_keys() {
        let answers: Vec<Value> = [
            EmptyList::Sources,
            EmptyList::SlashCommands,
            EmptyList::AgentMentions,
            EmptyList::Recipes,
            EmptyList::Schedules,
        ]
        .into_iter()
        .map(EmptyList::to_value)
        .collect();
        assert_eq!(
            answers,
            [
                json!({"sources": []}),
                json!({"availableCommands": []}),
                json!({"agents": []}),
                json!({"recipes": []}),
                json!({"jobs": []})
            ]
        );
    }
}
