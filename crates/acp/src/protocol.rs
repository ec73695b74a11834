//! ACP's messages as Rust types, and its numbers: what the client sends gosling (its requests
//! and the `session/cancel` notification) is read here once, into the method's type, and the
//! dispatch (`session::Agent`) only sees those types. JSON stays at this edge.
//!
//! The codec is hand-written in the style of `wire::fields` (no derive visitors: they cost
//! bytes in the static binary): a field is taken out of the params object only when it has the
//! expected shape; what the client sent beyond what gosling reads stays in `extra` (nothing
//! lost). A missing required field, or one of the wrong type, is an invalid-params error that
//! names the field and what it must be. goose's own methods (`_goose/…`) are read here too,
//! once, into their types by `goose_params::GooseCall`.

use crate::fs::FsCaps;
use crate::goose_params::GooseCall;
use crate::updates;
use gosling_extensions::config::{ExtensionConfig, SSE_UNSUPPORTED};
use gosling_store::message::Content;
use gosling_wire::jsonrpc::{self, ErrorObject};
use serde_json::{json, Map, Value};

/// The protocol version gosling speaks (ACP v1).
pub const PROTOCOL_VERSION: u64 = 1;
/// ACP's "authentication required" (the provider is not configured).
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP's "resource not found" (an unknown session).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// The longest message read from the client, a stdio line or a WebSocket message (prompts
/// can embed whole files and images).
pub const MAX_LINE: usize = 64 << 20;

/// The prefix of goose's own methods.
pub const GOOSE_METHODS: &str = "_goose/";

/// JSON-RPC's invalid params, with what to fix.
pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(jsonrpc::INVALID_PARAMS, message)
}

/// A request of the client, read once from its method and params.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Initialize(Initialize),
    Authenticate(Authenticate),
    NewSession(NewSession),
    LoadSession(LoadSession),
    /// `session/resume`: `session/load`'s params; opened without replaying the conversation.
    ResumeSession(LoadSession),
    ListSessions(ListSessions),
    DeleteSession(SessionRef),
    CloseSession(SessionRef),
    ForkSession(ForkSession),
    SetMode(SetMode),
    SetConfigOption(SetConfigOption),
    Prompt(Prompt),
    /// One of goose's own methods (`_goose/…`), its params read into their type
    /// (`goose_params::GooseCall`; `Unknown` for one gosling does not serve).
    Goose {
        method: String,
        call: GooseCall,
    },
    /// A method gosling does not serve (answered with METHOD_NOT_FOUND by the dispatch).
    Unknown(String),
}

/// A notification of the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// `session/cancel`: stop the session's running prompt.
    Cancel(SessionRef),
    /// Any other notification (ignored).
    Other(String),
}

/// `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Initialize {
    pub protocol_version: u64,
    pub fs: FsCaps,
    /// The client takes ACP's form-mode `elicitation/create` (`clientCapabilities.elicitation.form`).
    pub elicitation_form: bool,
    /// The client takes goose's custom notifications
    /// (`clientCapabilities._meta.goose.customNotifications`).
    pub custom_notifications: bool,
    /// The client presents ACP's `notice` session updates (`clientCapabilities.session.notices`
    /// present and not null).
    pub notices: bool,
    /// `clientCapabilities` whole, as sent.
    pub client_capabilities: Map<String, Value>,
    pub extra: Map<String, Value>,
}

/// `authenticate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticate {
    pub method_id: String,
    pub extra: Map<String, Value>,
}

/// `session/new`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// As sent; the handler applies the working-directory rule every front end applies.
    pub cwd: String,
    /// The editor's MCP servers as extension configs (the handler applies the trust policy).
    pub mcp_servers: Vec<ExtensionConfig>,
    /// goose's `_meta.enabledExtensions` (Goose Desktop's choice for the chat).
    pub enabled_extensions: Option<Vec<ExtensionConfig>>,
    pub extra: Map<String, Value>,
}

/// `session/load`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSession {
    pub session_id: String,
    pub cwd: String,
    pub mcp_servers: Vec<ExtensionConfig>,
    pub extra: Map<String, Value>,
}

/// `session/fork` (unstable).
#[derive(Debug, Clone, PartialEq)]
pub struct ForkSession {
    pub session_id: String,
    pub cwd: String,
    pub mcp_servers: Vec<ExtensionConfig>,
    /// goose's `_meta.conversationBefore`: the `created` time (unix seconds) of the first
    /// message left out.
    pub conversation_before: Option<i64>,
    pub extra: Map<String, Value>,
}

/// `session/list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListSessions {
    pub cwd: Option<String>,
    /// The offset of the page (a `nextCursor` gosling returned).
    pub cursor: usize,
    /// goose's `_meta.types` (session types; empty: all).
    pub types: Vec<String>,
    /// goose's `_meta.query` (words to search for).
    pub query: Option<String>,
    pub extra: Map<String, Value>,
}

/// Methods naming only a session: `session/delete`, `session/close`, `session/cancel`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRef {
    pub session_id: String,
    pub extra: Map<String, Value>,
}

/// `session/set_mode`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetMode {
    pub session_id: String,
    pub mode_id: String,
    pub extra: Map<String, Value>,
}

/// `session/set_config_option`.
#[derive(Debug, Clone, PartialEq)]
pub struct SetConfigOption {
    pub session_id: String,
    pub config_id: String,
    /// The chosen option's value (a boolean option's as `true`/`false`).
    pub value: String,
    pub extra: Map<String, Value>,
}

/// `session/prompt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub session_id: String,
    /// The prompt's content blocks as the user message's content.
    pub content: Vec<Content>,
    pub extra: Map<String, Value>,
}

/// Why a prompt's turn ended (`session/prompt`'s answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    /// The model stopped at its output limit.
    MaxTokens,
    MaxTurnRequests,
    Cancelled,
}

impl StopReason {
    /// `session/prompt`'s result.
    pub fn to_value(self) -> Value {
        let reason = match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Cancelled => "cancelled",
        };
        json!({ "stopReason": reason })
    }
}

/// `session/prompt`'s result: why the turn stopped and the tokens it used (ACP's `usage`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prompted {
    pub stop: StopReason,
    pub usage: gosling_agent::usage::TurnUsage,
}

impl Prompted {
    pub fn to_value(self) -> Value {
        let mut v = self.stop.to_value();
        let u = self.usage;
        v["usage"] = json!({ "totalTokens": u.total(), "inputTokens": u.input, "outputTokens": u.output });
        v
    }
}

/// One extension's start in goose's `_meta.extensionResults` of `session/new` and `session/load`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionResult {
    pub name: String,
    /// Why it did not start.
    pub error: Option<String>,
}

/// The answer of `session/new`, `session/load` and `session/fork`: the session's modes and
/// config options, and goose's `_meta` (the extensions' starts, the working directory, for a
/// fork the new session's listing fields).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOpened {
    /// `session/new` names the new session first; `session/fork` names it last.
    pub session_id: Option<String>,
    pub modes: Value,
    pub config_options: Value,
    pub extension_results: Vec<ExtensionResult>,
    pub working_dir: String,
    /// More of goose's `_meta` keys, after these (a fork's listing fields).
    pub more_meta: Map<String, Value>,
    /// The new session of `session/fork`, written last.
    pub forked: Option<String>,
}

impl SessionOpened {
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(id) = &self.session_id {
            m.insert("sessionId".into(), json!(id));
        }
        m.insert("modes".into(), self.modes.clone());
        m.insert("configOptions".into(), self.config_options.clone());
        let results: Vec<Value> = self
            .extension_results
            .iter()
            .map(|r| match &r.error {
                Some(e) => json!({ "name": r.name, "success": false, "error": e }),
                None => json!({ "name": r.name, "success": true }),
            })
            .collect();
        let mut meta = Map::new();
        meta.insert("extensionResults".into(), Value::Array(results));
        meta.insert("workingDir".into(), json!(self.working_dir));
        for (k, v) in &self.more_meta {
            meta.entry(k.as_str()).or_insert_with(|| v.clone());
        }
        m.insert("_meta".into(), Value::Object(meta));
        if let Some(id) = &self.forked {
            m.insert("sessionId".into(), json!(id));
        }
        Value::Object(m)
    }
}

/// `initialize`'s answer: ACP v1, what gosling offers, and its one auth method (configure a
/// model provider), whose description says what to set while none works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialized {
    pub auth_method: &'static str,
    pub auth_description: String,
    pub version: &'static str,
    /// The configured provider is sent the person's images (a session on another refuses them).
    pub images: bool,
}

impl Initialized {
    pub fn to_value(&self) -> Value {
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": { "image": self.images, "audio": false, "embeddedContext": true },
                "mcpCapabilities": { "http": true, "sse": false },
                "sessionCapabilities": { "list": {}, "close": {}, "delete": {}, "resume": {} },
                "auth": {},
            },
            "agentInfo": { "name": "gosling", "title": "gosling", "version": self.version },
            "authMethods": [auth_method(self.auth_method, &self.auth_description)],
        })
    }
}

/// One of `initialize`'s `authMethods` (ACP's AuthMethod of the default type `agent`).
pub fn auth_method(id: &str, description: &str) -> Value {
    json!({ "id": id, "name": "Configure a model provider", "description": description })
}

/// ACP's `auth_required` error: code -32000, the message as the SDK's
/// `RequestError.authRequired` writes it ("Authentication required: …", which acpx and Zed
/// recognise), and the methods that would help in `data.authMethods`.
pub fn auth_required(method_id: &str, why: &str) -> ErrorObject {
    ErrorObject {
        code: AUTH_REQUIRED,
        message: format!("Authentication required: {why}"),
        data: Some(json!({ "authMethods": [auth_method(method_id, why)] })),
    }
}

/// `session/list`'s answer: one page of sessions (goose's listing entries), the cursor of the
/// next, and goose's `_meta.searchComplete` when a query was searched.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionList {
    pub sessions: Vec<Value>,
    pub next_cursor: Option<String>,
    /// False: the search budget ran out before the oldest sessions' messages were read.
    pub search_complete: Option<bool>,
}

impl SessionList {
    pub fn to_value(&self) -> Value {
        let mut answer = json!({ "sessions": self.sessions, "nextCursor": self.next_cursor });
        if let Some(complete) = self.search_complete {
            answer["_meta"] = json!({ "searchComplete": complete });
        }
        answer
    }
}

/// An empty result (`authenticate`, `session/set_mode`, `session/delete`, `session/close`).
pub fn empty() -> Value {
    json!({})
}

impl Request {
    /// Reads `params` once into `method`'s type.
    pub fn parse(method: &str, params: Option<Value>) -> Result<Request, ErrorObject> {
        if method.starts_with(GOOSE_METHODS) {
            let call = GooseCall::read(method, &params.unwrap_or(Value::Null))?;
            return Ok(Request::Goose { method: method.to_string(), call });
        }
        let known = [
            "initialize",
            "authenticate",
            "session/new",
            "session/load",
            "session/resume",
            "session/list",
            "session/delete",
            "session/close",
            "session/fork",
            "session/set_mode",
            "session/set_config_option",
            "session/prompt",
        ];
        if !known.contains(&method) {
            return Ok(Request::Unknown(method.to_string()));
        }
        let mut f = Fields::of(params)?;
        Ok(match method {
            "initialize" => Request::Initialize(Initialize::read(&mut f)?),
            "authenticate" => Request::Authenticate(Authenticate { method_id: f.string("methodId")?, extra: f.rest() }),
            "session/new" => Request::NewSession(NewSession {
                cwd: f.string("cwd")?,
                mcp_servers: f.mcp_servers()?,
                enabled_extensions: f.enabled_extensions()?,
                extra: f.rest(),
            }),
            "session/load" => Request::LoadSession(LoadSession {
                session_id: f.string("sessionId")?,
                cwd: f.string("cwd")?,
                mcp_servers: f.mcp_servers()?,
                extra: f.rest(),
            }),
            "session/resume" => Request::ResumeSession(LoadSession {
                session_id: f.string("sessionId")?,
                cwd: f.string("cwd")?,
                mcp_servers: f.mcp_servers()?,
                extra: f.rest(),
            }),
            "session/fork" => Request::ForkSession(ForkSession {
                session_id: f.string("sessionId")?,
                cwd: f.string("cwd")?,
                mcp_servers: f.mcp_servers()?,
                conversation_before: f.conversation_before()?,
                extra: f.rest(),
            }),
            "session/list" => Request::ListSessions(ListSessions::read(&mut f)?),
            "session/delete" => Request::DeleteSession(SessionRef::read(&mut f)?),
            "session/close" => Request::CloseSession(SessionRef::read(&mut f)?),
            "session/set_mode" => Request::SetMode(SetMode {
                session_id: f.string("sessionId")?,
                mode_id: f.string("modeId")?,
                extra: f.rest(),
            }),
            "session/set_config_option" => Request::SetConfigOption(SetConfigOption {
                session_id: f.string("sessionId")?,
                config_id: f.string("configId")?,
                value: f.option_value()?,
                extra: f.rest(),
            }),
            _ => {
                let session_id = f.string("sessionId")?;
                let blocks = match f.m.shift_remove("prompt") {
                    Some(Value::Array(a)) => a,
                    _ => return Err(invalid_params("`prompt` must be an array of content blocks")),
                };
                // Whether the session's provider is sent images is the prompt's to check
                // (`updates::refuse_images`); the blocks' own shape is checked here.
                let content = updates::prompt_content(&blocks).map_err(invalid_params)?;
                Request::Prompt(Prompt { session_id, content, extra: f.rest() })
            }
        })
    }
}

impl Notification {
    /// Reads a notification's params once; a `session/cancel` without a session is an error
    /// (logged by the dispatch: notifications get no answer).
    pub fn parse(method: &str, params: Option<Value>) -> Result<Notification, ErrorObject> {
        match method {
            "session/cancel" => Ok(Notification::Cancel(SessionRef::read(&mut Fields::of(params)?)?)),
            other => Ok(Notification::Other(other.to_string())),
        }
    }
}

impl Initialize {
    fn read(f: &mut Fields) -> Result<Initialize, ErrorObject> {
        let protocol_version = match f.m.get("protocolVersion").and_then(Value::as_u64) {
            Some(v) => {
                f.m.shift_remove("protocolVersion");
                v
            }
            None => return Err(invalid_params("`protocolVersion` must be a whole number (gosling speaks ACP 1)")),
        };
        let caps = match f.m.shift_remove("clientCapabilities") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(invalid_params("`clientCapabilities` must be an object")),
        };
        let flag = |path: &[&str]| {
            let mut v = caps.get(path[0]);
            for k in &path[1..] {
                v = v.and_then(|v| v.get(k));
            }
            v
        };
        let fs = FsCaps {
            read: flag(&["fs", "readTextFile"]).and_then(Value::as_bool).unwrap_or(false),
            write: flag(&["fs", "writeTextFile"]).and_then(Value::as_bool).unwrap_or(false),
        };
        let elicitation_form = flag(&["elicitation", "form"]).is_some_and(|f| !f.is_null());
        let custom_notifications =
            flag(&["_meta", "goose", "customNotifications"]).and_then(Value::as_bool) == Some(true);
        let notices = flag(&["session", "notices"]).is_some_and(|n| !n.is_null());
        Ok(Initialize {
            protocol_version,
            fs,
            elicitation_form,
            custom_notifications,
            notices,
            client_capabilities: caps,
            extra: f.rest(),
        })
    }
}

impl ListSessions {
    fn read(f: &mut Fields) -> Result<ListSessions, ErrorObject> {
        let cwd = f.opt_string("cwd")?;
        let cursor = match f.m.shift_remove("cursor") {
            None | Some(Value::Null) => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .ok_or_else(|| invalid_params("`cursor` must be a nextCursor this agent returned"))?,
        };
        let meta = f.m.get("_meta");
        let types = meta
            .and_then(|m| m.get("types"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        let query = meta.and_then(|m| m.get("query")).and_then(Value::as_str).map(str::to_string);
        Ok(ListSessions { cwd, cursor, types, query, extra: f.rest() })
    }
}

impl SessionRef {
    fn read(f: &mut Fields) -> Result<SessionRef, ErrorObject> {
        Ok(SessionRef { session_id: f.string("sessionId")?, extra: f.rest() })
    }
}

/// A params object being read; what is left is the `extra` kept.
struct Fields {
    m: Map<String, Value>,
}

/// The JSON type of `v`, for errors.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Fields {
    fn of(params: Option<Value>) -> Result<Fields, ErrorObject> {
        match params {
            None | Some(Value::Null) => Ok(Fields { m: Map::new() }),
            Some(Value::Object(m)) => Ok(Fields { m }),
            Some(v) => Err(invalid_params(format!("`params` must be an object, not {}", kind(&v)))),
        }
    }

    /// A required string.
    fn string(&mut self, k: &str) -> Result<String, ErrorObject> {
        match self.m.get(k) {
            Some(Value::String(_)) => match self.m.shift_remove(k) {
                Some(Value::String(s)) => Ok(s),
                _ => unreachable!("checked just above"),
            },
            None | Some(Value::Null) => Err(invalid_params(format!("missing the string parameter `{k}`"))),
            Some(v) => Err(invalid_params(format!("`{k}` must be a string, not {}", kind(v)))),
        }
    }

    /// An optional string (`null` taken for absent).
    fn opt_string(&mut self, k: &str) -> Result<Option<String>, ErrorObject> {
        match self.m.get(k) {
            None | Some(Value::Null) => {
                self.m.shift_remove(k);
                Ok(None)
            }
            Some(_) => self.string(k).map(Some),
        }
    }

    /// `mcpServers`: absent or null is none.
    fn mcp_servers(&mut self) -> Result<Vec<ExtensionConfig>, ErrorObject> {
        match self.m.shift_remove("mcpServers") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a.iter().enumerate().map(|(i, s)| mcp_server(i, s)).collect(),
            Some(_) => Err(invalid_params("`mcpServers` must be an array")),
        }
    }

    /// `_meta.enabledExtensions` (left in `_meta`, which stays in `extra`).
    fn enabled_extensions(&self) -> Result<Option<Vec<ExtensionConfig>>, ErrorObject> {
        let Some(list) = self.m.get("_meta").and_then(|m| m.get("enabledExtensions")).filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let list = list.as_array().ok_or_else(|| invalid_params("`_meta.enabledExtensions` must be an array"))?;
        let mut out = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            out.push(
                crate::shapes::from_goose_extension(e)
                    .map_err(|e| invalid_params(format!("_meta.enabledExtensions[{i}]: {e}")))?,
            );
        }
        Ok(Some(out))
    }

    /// `_meta.conversationBefore` of `session/fork`.
    fn conversation_before(&self) -> Result<Option<i64>, ErrorObject> {
        match self.m.get("_meta").and_then(|m| m.get("conversationBefore")) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| {
                invalid_params("`_meta.conversationBefore` must be a whole number: the `created` time (unix seconds) of the first message to leave out")
            }),
        }
    }

    /// `value` of `session/set_config_option`: a string, or a boolean option's value.
    fn option_value(&mut self) -> Result<String, ErrorObject> {
        let v = self
            .m
            .get("value")
            .and_then(|v| v.as_str().map(str::to_string).or_else(|| v.as_bool().map(|b| b.to_string())));
        match v {
            Some(v) => {
                self.m.shift_remove("value");
                Ok(v)
            }
            None => Err(invalid_params("`value` must be the chosen option's value")),
        }
    }

    fn rest(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.m)
    }
}

/// An ACP McpServer as a goose extension config: stdio (no `type`, or `stdio`) and `http`
/// (Streamable HTTP). SSE is refused: MCP replaced it with Streamable HTTP.
pub fn mcp_server(i: usize, s: &Value) -> Result<ExtensionConfig, ErrorObject> {
    let field = format!("mcpServers[{i}]");
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid_params(format!("{field}: missing `name`")))?;
    let pairs = |k: &str| -> Map<String, Value> {
        s.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p.get("name")?.as_str()?.to_string(), p.get("value")?.clone())))
            .collect()
    };
    let v = match s.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let cmd = s.get("command").and_then(Value::as_str).ok_or_else(|| invalid_params(format!("{field} ({name}): missing `command`")))?;
            json!({ "type": "stdio", "name": name, "description": "", "cmd": cmd,
                    "args": s.get("args").cloned().unwrap_or_else(|| json!([])), "envs": pairs("env") })
        }
        Some("http") => {
            let url = s.get("url").and_then(Value::as_str).ok_or_else(|| invalid_params(format!("{field} ({name}): missing `url`")))?;
            json!({ "type": "streamable_http", "name": name, "description": "", "uri": url, "headers": pairs("headers") })
        }
        Some("sse") => {
            return Err(invalid_params(format!(
                "{field} ({name}): {SSE_UNSUPPORTED} (mcpCapabilities.sse is false; pass the server's Streamable HTTP endpoint as type \"http\")"
            )))
        }
        Some(other) => return Err(invalid_params(format!("{field} ({name}): unknown transport type {other:?}; use stdio or http"))),
    };
    let c = ExtensionConfig::from_value(v).map_err(|e| invalid_params(format!("{field} ({name}): {e}")))?;
    c.validate().map_err(|e| invalid_params(format!("{field} ({name}): {e}")))?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: &str, params: Value) -> Result<Request, ErrorObject> {
        Request::parse(method, Some(params))
    }

    /// The error's message, checked to be invalid params.
    fn refusal(method: &str, params: Value) -> String {
        let e = parse(method, params).expect_err("refused");
        assert_eq!(e.code, jsonrpc::INVALID_PARAMS, "{}", e.message);
        e.message
    }

    /// Each required field left out, then given the wrong type: the error names the field.
    fn requires(method: &str, good: Value, fields: &[(&str, &str)]) {
        for (field, what) in fields {
            let mut missing = good.clone();
            missing.as_object_mut().unwrap().remove(*field);
            let m = refusal(method, missing);
            assert!(m.contains(field) && m.contains(what), "{method} without {field}: {m}");
            let mut wrong = good.clone();
            wrong[*field] = json!({ "not": "this" });
            let m = refusal(method, wrong);
            assert!(m.contains(field), "{method} with an object for {field}: {m}");
        }
    }

    fn extra(pairs: Value) -> Map<String, Value> {
        pairs.as_object().unwrap().clone()
    }

    #[test]
    fn initialize() {
        let good = json!({
            "protocolVersion": 1,
            "clientCapabilities": { "fs": { "readTextFile": true, "writeTextFile": false },
                                    "elicitation": { "form": {} }, "terminal": true,
                                    "session": { "notices": {} },
                                    "_meta": { "goose": { "customNotifications": true } } },
            "clientInfo": { "name": "zed", "version": "1" },
        });
        let Request::Initialize(p) = parse("initialize", good.clone()).unwrap() else { panic!("not initialize") };
        assert_eq!(p.protocol_version, 1);
        assert_eq!(p.fs, FsCaps { read: true, write: false });
        assert!(p.elicitation_form && p.custom_notifications && p.notices);
        assert_eq!(Value::Object(p.client_capabilities), good["clientCapabilities"], "kept whole");
        assert_eq!(p.extra, extra(json!({ "clientInfo": { "name": "zed", "version": "1" } })), "unknown keys kept");
        // Without capabilities: none offered.
        let Request::Initialize(p) = parse("initialize", json!({ "protocolVersion": 7 })).unwrap() else { panic!() };
        assert_eq!(
            (p.protocol_version, p.fs, p.elicitation_form, p.custom_notifications, p.notices),
            (7, FsCaps::default(), false, false, false)
        );
        let m = refusal("initialize", json!({}));
        assert!(m.contains("`protocolVersion` must be a whole number"), "{m}");
        let m = refusal("initialize", json!({ "protocolVersion": "1" }));
        assert!(m.contains("`protocolVersion` must be a whole number"), "{m}");
        let m = refusal("initialize", json!({ "protocolVersion": 1, "clientCapabilities": [] }));
        assert!(m.contains("`clientCapabilities` must be an object"), "{m}");
        let m = refusal("initialize", json!([1]));
        assert!(m.contains("`params` must be an object, not an array"), "{m}");
    }

    #[test]
    fn authenticate() {
        let good = json!({ "methodId": "gosling-provider", "_meta": { "x": 1 } });
        let Request::Authenticate(p) = parse("authenticate", good.clone()).unwrap() else { panic!() };
        assert_eq!(p.method_id, "gosling-provider");
        assert_eq!(p.extra, extra(json!({ "_meta": { "x": 1 } })));
        requires("authenticate", good, &[("methodId", "string")]);
        let m = refusal("authenticate", json!({ "methodId": 3 }));
        assert_eq!(m, "`methodId` must be a string, not a number");
    }

    #[test]
    fn new_session() {
        let good = json!({
            "cwd": "/project",
            "mcpServers": [
                { "name": "files", "command": "/bin/files", "args": ["-v"], "env": [{ "name": "A", "value": "1" }] },
                { "type": "http", "name": "web", "url": "https://mcp.example/mcp", "headers": [] },
            ],
            "_meta": { "enabledExtensions": [{ "type": "builtin", "name": "developer" }], "other": true },
        });
        let Request::NewSession(p) = parse("session/new", good.clone()).unwrap() else { panic!() };
        assert_eq!(p.cwd, "/project");
        let names: Vec<&str> = p.mcp_servers.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["files", "web"]);
        let chosen: Vec<&str> = p.enabled_extensions.as_ref().unwrap().iter().map(|c| c.name()).collect();
        assert_eq!(chosen, ["developer"]);
        assert_eq!(p.extra, extra(json!({ "_meta": good["_meta"] })), "_meta kept whole");
        // mcpServers may be left out or null; enabledExtensions absent is "not chosen".
        let Request::NewSession(p) = parse("session/new", json!({ "cwd": "/w", "mcpServers": null })).unwrap() else {
            panic!()
        };
        assert!(p.mcp_servers.is_empty() && p.enabled_extensions.is_none());
        requires("session/new", good, &[("cwd", "string")]);
        let m = refusal("session/new", json!({ "cwd": "/w", "mcpServers": {} }));
        assert_eq!(m, "`mcpServers` must be an array");
        let m = refusal("session/new", json!({ "cwd": "/w", "mcpServers": [{ "command": "x" }] }));
        assert_eq!(m, "mcpServers[0]: missing `name`");
        let m = refusal("session/new", json!({ "cwd": "/w", "mcpServers": [{ "name": "a" }] }));
        assert_eq!(m, "mcpServers[0] (a): missing `command`");
        let m = refusal("session/new", json!({ "cwd": "/w", "mcpServers": [{ "type": "http", "name": "a" }] }));
        assert_eq!(m, "mcpServers[0] (a): missing `url`");
        let sse = json!({ "cwd": "/w", "mcpServers": [{ "type": "sse", "name": "a", "url": "http://x/sse" }] });
        assert!(refusal("session/new", sse).contains("mcpCapabilities.sse is false"));
        let m = refusal("session/new", json!({ "cwd": "/w", "mcpServers": [{ "type": "ws", "name": "a" }] }));
        assert!(m.contains("unknown transport type \"ws\"; use stdio or http"), "{m}");
        let m = refusal("session/new", json!({ "cwd": "/w", "_meta": { "enabledExtensions": {} } }));
        assert_eq!(m, "`_meta.enabledExtensions` must be an array");
        let m = refusal("session/new", json!({ "cwd": "/w", "_meta": { "enabledExtensions": [{ "type": "nope" }] } }));
        assert!(m.starts_with("_meta.enabledExtensions[0]: "), "{m}");
    }

    #[test]
    fn load_session() {
        let good = json!({ "sessionId": "s1", "cwd": "/w", "mcpServers": [], "extra": 1 });
        let Request::LoadSession(p) = parse("session/load", good.clone()).unwrap() else { panic!() };
        assert_eq!((p.session_id.as_str(), p.cwd.as_str(), p.mcp_servers.len()), ("s1", "/w", 0));
        assert_eq!(p.extra, extra(json!({ "extra": 1 })));
        requires("session/load", good, &[("sessionId", "string"), ("cwd", "string")]);
        let m = refusal("session/load", json!({ "sessionId": "s1", "cwd": "/w", "mcpServers": "none" }));
        assert_eq!(m, "`mcpServers` must be an array");
    }

    #[test]
    fn resume_session() {
        // As the ACP SDK client and acpx send it (`additionalDirectories` is kept, not read).
        let good = json!({ "sessionId": "s1", "cwd": "/w", "mcpServers": [], "additionalDirectories": ["/x"] });
        let Request::ResumeSession(p) = parse("session/resume", good.clone()).unwrap() else { panic!() };
        assert_eq!((p.session_id.as_str(), p.cwd.as_str(), p.mcp_servers.len()), ("s1", "/w", 0));
        assert_eq!(p.extra, extra(json!({ "additionalDirectories": ["/x"] })));
        let Request::ResumeSession(p) = parse("session/resume", json!({ "sessionId": "s1", "cwd": "/w" })).unwrap()
        else {
            panic!()
        };
        assert!(p.mcp_servers.is_empty());
        requires("session/resume", good, &[("sessionId", "string"), ("cwd", "string")]);
    }

    #[test]
    fn fork_session() {
        let good = json!({ "sessionId": "s1", "cwd": "/w", "_meta": { "conversationBefore": 1700000000 } });
        let Request::ForkSession(p) = parse("session/fork", good.clone()).unwrap() else { panic!() };
        assert_eq!(p.conversation_before, Some(1_700_000_000));
        assert_eq!(p.extra, extra(json!({ "_meta": { "conversationBefore": 1700000000 } })));
        let Request::ForkSession(p) = parse("session/fork", json!({ "sessionId": "s", "cwd": "/w" })).unwrap() else {
            panic!()
        };
        assert_eq!(p.conversation_before, None);
        requires("session/fork", good, &[("sessionId", "string"), ("cwd", "string")]);
        let m =
            refusal("session/fork", json!({ "sessionId": "s", "cwd": "/w", "_meta": { "conversationBefore": "x" } }));
        assert!(m.contains("`_meta.conversationBefore` must be a whole number"), "{m}");
    }

    #[test]
    fn list_sessions() {
        let good = json!({ "cwd": "/w", "cursor": "50", "_meta": { "types": ["user", 3], "query": "rust" } });
        let Request::ListSessions(p) = parse("session/list", good).unwrap() else { panic!() };
        assert_eq!((p.cwd.as_deref(), p.cursor, p.query.as_deref()), (Some("/w"), 50, Some("rust")));
        assert_eq!(p.types, ["user"]);
        // Everything is optional.
        let Request::ListSessions(p) = Request::parse("session/list", None).unwrap() else { panic!() };
        assert_eq!((p.cwd, p.cursor, p.types.len(), p.query), (None, 0, 0, None));
        let m = refusal("session/list", json!({ "cursor": "page two" }));
        assert_eq!(m, "`cursor` must be a nextCursor this agent returned");
        let m = refusal("session/list", json!({ "cursor": 50 }));
        assert_eq!(m, "`cursor` must be a nextCursor this agent returned");
        let m = refusal("session/list", json!({ "cwd": 1 }));
        assert_eq!(m, "`cwd` must be a string, not a number");
    }

    #[test]
    fn delete_and_close_session() {
        for method in ["session/delete", "session/close"] {
            let good = json!({ "sessionId": "s1", "_meta": {} });
            let p = match parse(method, good.clone()).unwrap() {
                Request::DeleteSession(p) | Request::CloseSession(p) => p,
                other => panic!("{other:?}"),
            };
            assert_eq!(p.session_id, "s1");
            assert_eq!(p.extra, extra(json!({ "_meta": {} })));
            requires(method, good, &[("sessionId", "string")]);
        }
        assert!(matches!(parse("session/delete", json!({ "sessionId": "s" })), Ok(Request::DeleteSession(_))));
        assert!(matches!(parse("session/close", json!({ "sessionId": "s" })), Ok(Request::CloseSession(_))));
    }

    #[test]
    fn set_mode() {
        let good = json!({ "sessionId": "s1", "modeId": "approve" });
        let Request::SetMode(p) = parse("session/set_mode", good.clone()).unwrap() else { panic!() };
        assert_eq!((p.session_id.as_str(), p.mode_id.as_str()), ("s1", "approve"));
        requires("session/set_mode", good, &[("sessionId", "string"), ("modeId", "string")]);
    }

    #[test]
    fn set_config_option() {
        let good = json!({ "sessionId": "s1", "configId": "model", "value": "gpt-5" });
        let Request::SetConfigOption(p) = parse("session/set_config_option", good.clone()).unwrap() else { panic!() };
        assert_eq!((p.session_id.as_str(), p.config_id.as_str(), p.value.as_str()), ("s1", "model", "gpt-5"));
        let Request::SetConfigOption(p) =
            parse("session/set_config_option", json!({ "sessionId": "s", "configId": "b", "value": true })).unwrap()
        else {
            panic!()
        };
        assert_eq!(p.value, "true", "a boolean option's value");
        requires("session/set_config_option", good.clone(), &[("sessionId", "string"), ("configId", "string")]);
        requires("session/set_config_option", good, &[("value", "the chosen option's value")]);
    }

    #[test]
    fn prompt() {
        let good = json!({
            "sessionId": "s1",
            "prompt": [{ "type": "text", "text": "hi" }, { "type": "resource_link", "uri": "file:///a.rs", "name": "a.rs" }],
            "_meta": { "x": 1 },
        });
        let Request::Prompt(p) = parse("session/prompt", good.clone()).unwrap() else { panic!() };
        assert_eq!(p.session_id, "s1");
        assert_eq!(p.content, [Content::text("hi"), Content::text("[a.rs](file:///a.rs)")]);
        assert_eq!(p.extra, extra(json!({ "_meta": { "x": 1 } })));
        requires("session/prompt", good.clone(), &[("sessionId", "string")]);
        requires("session/prompt", good, &[("prompt", "must be an array of content blocks")]);
        // An image's own shape is checked here; whether the session's provider takes images is
        // the prompt's to check (`Agent::prompt`).
        let image = json!({ "sessionId": "s", "prompt": [{ "type": "image", "data": "", "mimeType": "image/png" }] });
        assert!(refusal("session/prompt", image).contains("prompt[0]"));
        let png = json!({ "sessionId": "s", "prompt": [{ "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" }] });
        let Request::Prompt(p) = parse("session/prompt", png).unwrap() else { panic!() };
        assert!(matches!(p.content[..], [Content::Image(_)]));
        assert!(refusal("session/prompt", json!({ "sessionId": "s", "prompt": [] })).contains("prompt is empty"));
    }

    #[test]
    fn cancel() {
        let Notification::Cancel(p) =
            Notification::parse("session/cancel", Some(json!({ "sessionId": "s1" }))).unwrap()
        else {
            panic!()
        };
        assert_eq!(p.session_id, "s1");
        let e = Notification::parse("session/cancel", Some(json!({}))).unwrap_err();
        assert_eq!(e.message, "missing the string parameter `sessionId`");
        let e = Notification::parse("session/cancel", Some(json!({ "sessionId": 1 }))).unwrap_err();
        assert_eq!(e.message, "`sessionId` must be a string, not a number");
        assert_eq!(Notification::parse("$/progress", None).unwrap(), Notification::Other("$/progress".into()));
    }

    #[test]
    fn goose_and_unknown_methods() {
        let params = json!({ "sessionId": "s", "anything": [1] });
        assert_eq!(
            parse("_goose/unstable/session/extensions/list", params.clone()).unwrap(),
            Request::Goose {
                method: "_goose/unstable/session/extensions/list".into(),
                call: GooseCall::ListSessionExtensions { session_id: "s".into() }
            },
            "goose's params read once into their type"
        );
        let m = refusal("_goose/unstable/session/info", json!({}));
        assert_eq!(m, "missing the string parameter `sessionId`");
        assert_eq!(
            Request::parse("_goose/x", None).unwrap(),
            Request::Goose { method: "_goose/x".into(), call: GooseCall::Unknown }
        );
        // An unknown method is not an invalid-params error, whatever its params.
        assert_eq!(parse("session/stop", json!(3)).unwrap(), Request::Unknown("session/stop".into()));
    }

    #[test]
    fn responses() {
        assert_eq!(StopReason::EndTurn.to_value().to_string(), r#"{"stopReason":"end_turn"}"#);
        assert_eq!(StopReason::MaxTurnRequests.to_value()["stopReason"], "max_turn_requests");
        assert_eq!(StopReason::Cancelled.to_value()["stopReason"], "cancelled");
        assert_eq!(StopReason::MaxTokens.to_value()["stopReason"], "max_tokens");
        let mut opened = SessionOpened {
            session_id: Some("s1".into()),
            modes: json!({ "currentModeId": "auto" }),
            config_options: json!([]),
            extension_results: vec![
                ExtensionResult { name: "a".into(), error: None },
                ExtensionResult { name: "b".into(), error: Some("no".into()) },
            ],
            working_dir: "/w".into(),
            more_meta: Map::new(),
            forked: None,
        };
        assert_eq!(
            opened.to_value().to_string(),
            r#"{"sessionId":"s1","modes":{"currentModeId":"auto"},"configOptions":[],"_meta":{"extensionResults":[{"name":"a","success":true},{"name":"b","success":false,"error":"no"}],"workingDir":"/w"}}"#
        );
        opened.session_id = None;
        opened.forked = Some("s2".into());
        opened.more_meta = extra(json!({ "workingDir": "not this", "messageCount": 3 }));
        let v = opened.to_value();
        assert_eq!(v["sessionId"], "s2");
        assert_eq!(v["_meta"]["workingDir"], "/w", "a listing field never replaces the opened session's own");
        assert_eq!(v["_meta"]["messageCount"], 3);
        assert_eq!(v.as_object().unwrap().keys().next_back().map(String::as_str), Some("sessionId"));
    }

    #[test]
    fn initialize_and_list_answers() {
        let i =
            Initialized { auth_method: "m", auth_description: "set X".into(), version: "9", images: false }.to_value();
        assert_eq!(i["protocolVersion"], 1);
        assert_eq!(i["agentCapabilities"]["mcpCapabilities"], json!({ "http": true, "sse": false }));
        assert_eq!(
            i["authMethods"],
            json!([{ "id": "m", "name": "Configure a model provider", "description": "set X" }])
        );
        assert_eq!(i["agentInfo"]["version"], "9");
        let e = auth_required("m", "set X");
        assert_eq!(
            (e.code, e.message.as_str(), e.data),
            (
                -32000,
                "Authentication required: set X",
                Some(
                    json!({ "authMethods": [{ "id": "m", "name": "Configure a model provider", "description": "set X" }] })
                )
            )
        );
        let page =
            SessionList { sessions: vec![json!({ "sessionId": "a" })], next_cursor: None, search_complete: None };
        assert_eq!(page.to_value().to_string(), r#"{"sessions":[{"sessionId":"a"}],"nextCursor":null}"#);
        let page = SessionList { sessions: vec![], next_cursor: Some("50".into()), search_complete: Some(false) };
        assert_eq!(
            page.to_value(),
            json!({ "sessions": [], "nextCursor": "50", "_meta": { "searchComplete": false } })
        );
    }
}
