//! goose's conversation as Rust types: `Message`, its `Content` blocks, tool calls and their
//! results, in the lowest layer that needs them (the session store persists them). The core
//! (store, agent, acp, http) passes these around; goose's JSON exists only where a message
//! crosses an edge — a line of a session's `.jsonl` file, an HTTP body, an event frame —
//! through the `Serialize`/`Deserialize` impls here (ACP's updates are built from the fields).
//!
//! Lossless: a message written by goose or an older gosling loads and saves without losing a
//! field. Unknown keys of a message, its metadata, a content block and a tool call are kept in
//! `extra` and written back after the known ones; a content block of a type gosling does not
//! know, or of a known type whose shape is not goose's (a required field missing or of another
//! type, a key goose's closed shapes — `toolCall`, `toolResult`, `actionRequired.data` — do not
//! have), is kept whole as `Content::Other`. Equivalent, not identical: keys come back in
//! gosling's order, an explicit `null` of an optional field (`id`, `prompt`, a tool call's
//! `arguments`) and a `false` of gosling's own marks come back absent, and a missing
//! `metadata` comes back as goose's default.
//!
//! The codec goes through `serde_json::Value` (parsed once, then moved field by field into the
//! types) rather than derived visitors: the binary has `Value`'s code already, while derived
//! visitors for a dozen shapes would be instantiated once per deserializer type, and the static
//! binary's size budget is tight (BENCHMARKS.md).
//!
//! A tool response's result is typed too (`ToolResult`): goose's `CallToolResponse` is an MCP
//! `CallToolResult` (`wire::mcp_types`, lossless the same way; written with `isError` always,
//! as goose does, so one stored without it comes back with `false`), and older sessions' bare
//! content array is kept as one. A `toolResult` value that is neither an object nor an array is
//! not goose's shape: its block is kept whole as `Content::Other`. Tool arguments stay `Value`:
//! they are whatever JSON the model sends. Not here: what a message means to the model
//! (`agent::messages`).

use gosling_wire::fields::{put, with_extra};
use gosling_wire::mcp_types::{CallToolResult, ContentBlock};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Keys this codec does not interpret, in the order they came.
pub type Extra = Map<String, Value>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// goose's `Message`.
#[derive(Debug, PartialEq)]
pub struct Message {
    pub id: Option<String>,
    pub role: Role,
    /// Unix seconds.
    pub created: i64,
    pub content: Vec<Content>,
    pub metadata: Metadata,
    pub extra: Extra,
}

/// goose's `MessageMetadata`, with gosling's two marks.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    /// Shown to the person (`userVisible`).
    pub user_visible: bool,
    /// Sent to the model (`agentVisible`).
    pub agent_visible: bool,
    /// `goslingStopped`: an answer saved as far as it got (Stop, a model error mid-stream); the
    /// web page shows it as stopped. Written only when true.
    pub stopped: bool,
    /// `goslingError`: the message keeps a failed turn's error. Written only when true.
    pub error: bool,
    pub extra: Extra,
}

impl Default for Metadata {
    fn default() -> Metadata {
        Metadata { user_visible: true, agent_visible: true, stopped: false, error: false, extra: Extra::new() }
    }
}

/// goose's `MessageContent`, by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(Text),
    Image(Image),
    ToolRequest(ToolRequest),
    /// A call of a tool the client runs (goose's `frontendToolRequest`); the same shape.
    FrontendToolRequest(ToolRequest),
    ToolResponse(ToolResponse),
    ActionRequired(ActionRequired),
    Thinking(Thinking),
    RedactedThinking(RedactedThinking),
    SystemNotification(SystemNotification),
    /// A block of a type gosling does not know or in a shape it does not expect, kept whole.
    Other(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    pub text: String,
    /// `annotations`, `_meta`, …
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Base64.
    pub data: String,
    pub mime_type: String,
    pub extra: Extra,
}

/// A `toolRequest` (or `frontendToolRequest`): the call, or why the model's call is unusable
/// (goose's `toolCall: {status: "error", error}`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    pub id: String,
    pub call: Result<ToolCall, String>,
    /// `metadata`, `_meta`, …
    pub extra: Extra,
}

/// An MCP `tools/call` request's params, as goose keeps them in a `toolCall`'s `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    /// The model's arguments; `Null` when there are none (the key is then left out).
    pub arguments: Value,
    pub extra: Extra,
}

/// A `toolResponse`: the tool's result, or goose's `toolResult: {status: "error", error}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResponse {
    pub id: String,
    pub result: Result<ToolResult, String>,
    pub extra: Extra,
}

/// What a successful `toolResponse` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// goose's `CallToolResponse`: the MCP `CallToolResult` (boxed: it is ten times the size of
    /// the other variant).
    Call(Box<CallToolResult>),
    /// Older sessions: a bare array of content blocks.
    Content(Vec<ContentBlock>),
}

impl ToolResult {
    pub fn content(&self) -> &[ContentBlock] {
        match self {
            ToolResult::Call(r) => &r.content,
            ToolResult::Content(c) => c,
        }
    }

    /// Whether the tool failed (`isError`; a bare array never did).
    pub fn is_error(&self) -> bool {
        matches!(self, ToolResult::Call(r) if r.is_error())
    }

    /// goose's JSON of the result (a `CallToolResponse` always has `isError`).
    pub fn to_value(&self) -> Value {
        match self {
            ToolResult::Call(r) => r.to_value_with_is_error(),
            ToolResult::Content(c) => Value::Array(c.iter().map(ContentBlock::to_value).collect()),
        }
    }

    /// From goose's JSON: an object or an array (checked by `result_fits`).
    fn from_value(v: Value) -> ToolResult {
        match v {
            Value::Array(a) => ToolResult::Content(a.into_iter().map(ContentBlock::from_value).collect()),
            v => ToolResult::Call(Box::new(CallToolResult::from_value(v).unwrap_or_default())),
        }
    }
}

/// An `actionRequired` block: something only the person can answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRequired {
    pub data: Action,
    pub extra: Extra,
}

/// goose's `ActionRequiredData`, by its `actionType`.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// May this tool call run?
    ToolConfirmation { id: String, tool_name: String, arguments: Value, prompt: Option<String> },
    /// An extension's MCP elicitation: a form for the person (`requested_schema`; `Null` when
    /// absent).
    Elicitation { id: String, message: String, requested_schema: Value },
    /// The person's answer to an elicitation (`user_data`; `Null` when absent).
    ElicitationResponse { id: String, user_data: Value },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Thinking {
    pub thinking: String,
    pub signature: String,
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RedactedThinking {
    pub data: String,
    pub extra: Extra,
}

/// A note for the person (`systemNotification`).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemNotification {
    pub kind: NotificationKind,
    pub msg: String,
    /// `data`, …
    pub extra: Extra,
}

/// goose's `SystemNotificationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationKind {
    ThinkingMessage,
    InlineMessage,
    CreditsExhausted,
}

const NOTIFICATION_KINDS: [(NotificationKind, &str); 3] = [
    (NotificationKind::ThinkingMessage, "thinkingMessage"),
    (NotificationKind::InlineMessage, "inlineMessage"),
    (NotificationKind::CreditsExhausted, "creditsExhausted"),
];

// By hand, to keep it out of line: a derived clone is inlined into every clone of what holds
// messages (a `Session`, a conversation), several kilobytes of the binary each time.
impl Clone for Message {
    #[inline(never)]
    fn clone(&self) -> Message {
        Message {
            id: self.id.clone(),
            role: self.role,
            created: self.created,
            content: self.content.clone(),
            metadata: self.metadata.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl Message {
    /// A new message with goose's default metadata (visible to both), created now.
    pub fn new(id: impl Into<String>, role: Role, content: Vec<Content>) -> Message {
        Message::with_id(id.into(), role, content)
    }

    fn with_id(id: String, role: Role, content: Vec<Content>) -> Message {
        let created =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Message { id: Some(id), role, created, content, metadata: Metadata::default(), extra: Extra::new() }
    }

    /// The text of its text blocks, joined by spaces.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        texts.join(" ")
    }

    /// A message from goose's JSON; what is wrong when it is not one.
    pub fn from_value(v: Value) -> Result<Message, String> {
        let Value::Object(mut m) = v else { return Err("a message must be a JSON object".into()) };
        let id = match take(&mut m, "id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err("a message's `id` must be a string".into()),
        };
        let role = match take(&mut m, "role") {
            Some(Value::String(r)) if r == "user" => Role::User,
            Some(Value::String(r)) if r == "assistant" => Role::Assistant,
            _ => return Err("a message's `role` must be \"user\" or \"assistant\"".into()),
        };
        let created = match take(&mut m, "created").as_ref().and_then(Value::as_i64) {
            Some(t) => t,
            None => return Err("a message's `created` must be an integer (Unix seconds)".into()),
        };
        let content = match take(&mut m, "content") {
            Some(Value::Array(a)) => a.into_iter().map(Content::from_value).collect(),
            _ => return Err("a message's `content` must be an array".into()),
        };
        let metadata = match take(&mut m, "metadata") {
            None => Metadata::default(),
            Some(Value::Object(md)) => Metadata::from_map(md)?,
            Some(_) => return Err("a message's `metadata` must be an object".into()),
        };
        Ok(Message { id, role, created, content, metadata, extra: m })
    }

    /// goose's JSON of this message.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(id) = &self.id {
            put(&mut m, "id", id.as_str());
        }
        put(&mut m, "role", self.role.as_str());
        put(&mut m, "created", self.created);
        put(&mut m, "content", Value::Array(self.content.iter().map(Content::to_value).collect()));
        put(&mut m, "metadata", self.metadata.to_value());
        with_extra(m, &self.extra)
    }
}

impl Metadata {
    fn from_map(mut m: Map<String, Value>) -> Result<Metadata, String> {
        let mut flag = |key: &str, default: bool| match take(&mut m, key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(b),
            Some(_) => Err(format!("a message's `metadata.{key}` must be a boolean")),
        };
        let user_visible = flag("userVisible", true)?;
        let agent_visible = flag("agentVisible", true)?;
        let stopped = flag("goslingStopped", false)?;
        let error = flag("goslingError", false)?;
        Ok(Metadata { user_visible, agent_visible, stopped, error, extra: m })
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "userVisible", self.user_visible);
        put(&mut m, "agentVisible", self.agent_visible);
        if self.stopped {
            put(&mut m, "goslingStopped", true);
        }
        if self.error {
            put(&mut m, "goslingError", true);
        }
        with_extra(m, &self.extra)
    }
}

impl Content {
    pub fn text(text: impl Into<String>) -> Content {
        Content::Text(Text { text: text.into(), extra: Extra::new() })
    }

    /// A content block from goose's JSON: typed when gosling knows its type and shape,
    /// `Other` (kept whole) otherwise.
    pub fn from_value(v: Value) -> Content {
        let Value::Object(mut m) = v else { return Content::Other(v) };
        let kind = field(&m, "type").and_then(Value::as_str).unwrap_or("").to_string();
        let is_str = |m: &Map<String, Value>, k: &str| field(m, k).is_some_and(Value::is_string);
        let c = match kind.as_str() {
            "text" if is_str(&m, "text") => Content::Text(Text { text: take_str(&mut m, "text"), extra: Extra::new() }),
            "image" if is_str(&m, "data") && is_str(&m, "mimeType") => Content::Image(Image {
                data: take_str(&mut m, "data"),
                mime_type: take_str(&mut m, "mimeType"),
                extra: Extra::new(),
            }),
            "toolRequest" | "frontendToolRequest"
                if is_str(&m, "id") && status_fits(field(&m, "toolCall"), call_fits) =>
            {
                let call = take_status(&mut m, "toolCall").map(|v| {
                    let Value::Object(mut c) = v else { unreachable!("checked by call_fits") };
                    let name = take_str(&mut c, "name");
                    let arguments = take(&mut c, "arguments").unwrap_or(Value::Null);
                    ToolCall { name, arguments, extra: c }
                });
                let r = ToolRequest { id: take_str(&mut m, "id"), call, extra: Extra::new() };
                match kind.as_str() {
                    "toolRequest" => Content::ToolRequest(r),
                    _ => Content::FrontendToolRequest(r),
                }
            }
            "toolResponse" if is_str(&m, "id") && status_fits(field(&m, "toolResult"), result_fits) => {
                let result = take_status(&mut m, "toolResult").map(ToolResult::from_value);
                Content::ToolResponse(ToolResponse { id: take_str(&mut m, "id"), result, extra: Extra::new() })
            }
            "actionRequired" if field(&m, "data").is_some_and(action_fits) => {
                let Some(Value::Object(mut d)) = take(&mut m, "data") else { unreachable!("checked by action_fits") };
                let id = take_str(&mut d, "id");
                let mut pop = |k: &str| take(&mut d, k).unwrap_or(Value::Null);
                let data = match pop("actionType").as_str() {
                    Some("toolConfirmation") => Action::ToolConfirmation {
                        id,
                        tool_name: pop("toolName").as_str().unwrap_or_default().to_string(),
                        arguments: pop("arguments"),
                        prompt: pop("prompt").as_str().map(str::to_string),
                    },
                    Some("elicitation") => Action::Elicitation {
                        id,
                        message: pop("message").as_str().unwrap_or_default().to_string(),
                        requested_schema: pop("requested_schema"),
                    },
                    _ => Action::ElicitationResponse { id, user_data: pop("user_data") },
                };
                Content::ActionRequired(ActionRequired { data, extra: Extra::new() })
            }
            "thinking" if is_str(&m, "thinking") && is_str(&m, "signature") => Content::Thinking(Thinking {
                thinking: take_str(&mut m, "thinking"),
                signature: take_str(&mut m, "signature"),
                extra: Extra::new(),
            }),
            "redactedThinking" if is_str(&m, "data") => {
                Content::RedactedThinking(RedactedThinking { data: take_str(&mut m, "data"), extra: Extra::new() })
            }
            "systemNotification" if is_str(&m, "msg") => {
                let kind = field(&m, "notificationType").and_then(Value::as_str);
                match NOTIFICATION_KINDS.iter().find(|(_, name)| Some(*name) == kind) {
                    Some((kind, _)) => {
                        take(&mut m, "notificationType");
                        let msg = take_str(&mut m, "msg");
                        Content::SystemNotification(SystemNotification { kind: *kind, msg, extra: Extra::new() })
                    }
                    None => return Content::Other(Value::Object(m)),
                }
            }
            _ => return Content::Other(Value::Object(m)),
        };
        take(&mut m, "type");
        c.with_extra(m)
    }

    fn with_extra(mut self, extra: Extra) -> Content {
        match &mut self {
            Content::Text(Text { extra: e, .. })
            | Content::Image(Image { extra: e, .. })
            | Content::ToolRequest(ToolRequest { extra: e, .. })
            | Content::FrontendToolRequest(ToolRequest { extra: e, .. })
            | Content::ToolResponse(ToolResponse { extra: e, .. })
            | Content::ActionRequired(ActionRequired { extra: e, .. })
            | Content::Thinking(Thinking { extra: e, .. })
            | Content::RedactedThinking(RedactedThinking { extra: e, .. })
            | Content::SystemNotification(SystemNotification { extra: e, .. }) => *e = extra,
            Content::Other(_) => {}
        }
        self
    }

    /// goose's JSON of this block.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let mut kind = |k: &str| put(&mut m, "type", k);
        let extra = match self {
            Content::Other(v) => return v.clone(),
            Content::Text(t) => {
                kind("text");
                put(&mut m, "text", t.text.as_str());
                &t.extra
            }
            Content::Image(i) => {
                kind("image");
                put(&mut m, "data", i.data.as_str());
                put(&mut m, "mimeType", i.mime_type.as_str());
                &i.extra
            }
            Content::ToolRequest(r) | Content::FrontendToolRequest(r) => {
                kind(if matches!(self, Content::ToolRequest(_)) { "toolRequest" } else { "frontendToolRequest" });
                put(&mut m, "id", r.id.as_str());
                let call = r.call.as_ref().map(|c| {
                    let mut v = Map::new();
                    put(&mut v, "name", c.name.as_str());
                    if !c.arguments.is_null() {
                        put(&mut v, "arguments", c.arguments.clone());
                    }
                    with_extra(v, &c.extra)
                });
                put(&mut m, "toolCall", status(call.map_err(String::clone)));
                &r.extra
            }
            Content::ToolResponse(r) => {
                kind("toolResponse");
                put(&mut m, "id", r.id.as_str());
                put(&mut m, "toolResult", status(r.result.as_ref().map(ToolResult::to_value).map_err(String::clone)));
                &r.extra
            }
            Content::ActionRequired(a) => {
                kind("actionRequired");
                let mut d = Map::new();
                match &a.data {
                    Action::ToolConfirmation { id, tool_name, arguments, prompt } => {
                        put(&mut d, "actionType", "toolConfirmation");
                        put(&mut d, "id", id.as_str());
                        put(&mut d, "toolName", tool_name.as_str());
                        put(&mut d, "arguments", arguments.clone());
                        if let Some(p) = prompt {
                            put(&mut d, "prompt", p.as_str());
                        }
                    }
                    Action::Elicitation { id, message, requested_schema } => {
                        put(&mut d, "actionType", "elicitation");
                        put(&mut d, "id", id.as_str());
                        put(&mut d, "message", message.as_str());
                        put(&mut d, "requested_schema", requested_schema.clone());
                    }
                    Action::ElicitationResponse { id, user_data } => {
                        put(&mut d, "actionType", "elicitationResponse");
                        put(&mut d, "id", id.as_str());
                        put(&mut d, "user_data", user_data.clone());
                    }
                }
                put(&mut m, "data", Value::Object(d));
                &a.extra
            }
            Content::Thinking(t) => {
                kind("thinking");
                put(&mut m, "thinking", t.thinking.as_str());
                put(&mut m, "signature", t.signature.as_str());
                &t.extra
            }
            Content::RedactedThinking(t) => {
                kind("redactedThinking");
                put(&mut m, "data", t.data.as_str());
                &t.extra
            }
            Content::SystemNotification(n) => {
                kind("systemNotification");
                let name = NOTIFICATION_KINDS.iter().find(|(k, _)| *k == n.kind).map_or("", |(_, name)| name);
                put(&mut m, "notificationType", name);
                put(&mut m, "msg", n.msg.as_str());
                &n.extra
            }
        };
        with_extra(m, extra)
    }
}

// The map's hashing is inlined where its methods are called: one copy each (not one per field)
// keeps the codec small.
#[inline(never)]
fn field<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.get(key)
}

#[inline(never)]
fn take(m: &mut Map<String, Value>, key: &str) -> Option<Value> {
    m.shift_remove(key)
}

/// Removes `key` (checked to hold a string) and returns its string.
fn take_str(m: &mut Map<String, Value>, key: &str) -> String {
    match take(m, key) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// goose's `ToolResult` wrapper: exactly `{status: "success", value}` (the value passing
/// `value_fits`) or `{status: "error", error: string}`.
fn status_fits(v: Option<&Value>, value_fits: fn(&Value) -> bool) -> bool {
    let Some(Value::Object(o)) = v else { return false };
    o.len() == 2
        && match field(o, "status").and_then(Value::as_str) {
            Some("success") => field(o, "value").is_some_and(value_fits),
            Some("error") => field(o, "error").is_some_and(Value::is_string),
            _ => false,
        }
}

/// Removes the wrapper at `key` (checked by `status_fits`): its value, or its error.
fn take_status(m: &mut Map<String, Value>, key: &str) -> Result<Value, String> {
    let Some(Value::Object(mut o)) = take(m, key) else { return Err(String::new()) };
    match take(&mut o, "value") {
        Some(v) => Ok(v),
        None => Err(take_str(&mut o, "error")),
    }
}

fn status(r: Result<Value, String>) -> Value {
    let mut m = Map::new();
    match r {
        Ok(v) => {
            put(&mut m, "status", "success");
            put(&mut m, "value", v);
        }
        Err(e) => {
            put(&mut m, "status", "error");
            put(&mut m, "error", e);
        }
    }
    Value::Object(m)
}

/// A tool response's value: a `CallToolResponse` object or (older sessions) a content array.
fn result_fits(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

/// A tool call's params: an object with a string `name` (`arguments`, when present, any JSON).
fn call_fits(v: &Value) -> bool {
    v.as_object().and_then(|o| field(o, "name")).is_some_and(Value::is_string)
}

/// An `actionRequired`'s `data`: one of goose's three shapes, with no other key.
fn action_fits(v: &Value) -> bool {
    let Value::Object(d) = v else { return false };
    let keys: &[&str] = match field(d, "actionType").and_then(Value::as_str) {
        Some("toolConfirmation") if field(d, "toolName").is_some_and(Value::is_string) => {
            if !field(d, "prompt").is_none_or(|p| p.is_string() || p.is_null()) {
                return false;
            }
            &["actionType", "id", "toolName", "arguments", "prompt"]
        }
        Some("elicitation") if field(d, "message").is_some_and(Value::is_string) => {
            &["actionType", "id", "message", "requested_schema"]
        }
        Some("elicitationResponse") => &["actionType", "id", "user_data"],
        _ => return false,
    };
    field(d, "id").is_some_and(Value::is_string) && d.keys().all(|k| keys.contains(&k.as_str()))
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Message, D::Error> {
        Message::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Parses `v` as a message, checks the typed value, and that it serializes back to `v`.
    fn round_trip(v: Value) -> Message {
        let m: Message = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
        let line = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Message>(&line).unwrap(), m);
        m
    }

    fn message(content: Value) -> Value {
        json!({"id": "m1", "role": "assistant", "created": 1735725600, "content": [content],
               "metadata": {"userVisible": true, "agentVisible": true}})
    }

    fn one(content: Value) -> Content {
        round_trip(message(content)).content.remove(0)
    }

    #[test]
    fn every_known_variant_round_trips_typed() {
        let c = one(json!({"type": "text", "text": "hi", "annotations": {"priority": 1}, "_meta": {"k": "v"}}));
        let Content::Text(t) = c else { panic!("{c:?}") };
        assert_eq!((t.text.as_str(), t.extra.len()), ("hi", 2));

        let c = one(json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}));
        assert!(matches!(c, Content::Image(Image { ref mime_type, .. }) if mime_type == "image/png"), "{c:?}");

        let c = one(json!({"type": "toolRequest", "id": "t1",
            "toolCall": {"status": "success", "value": {"name": "dev__shell", "arguments": {"command": "ls"}}},
            "metadata": {"a": 1}, "_meta": {"b": 2}}));
        let Content::ToolRequest(r) = c else { panic!("{c:?}") };
        let call = r.call.unwrap();
        assert_eq!(
            (r.id.as_str(), call.name.as_str(), &call.arguments),
            ("t1", "dev__shell", &json!({"command": "ls"}))
        );
        assert_eq!(r.extra.len(), 2);

        let c =
            one(json!({"type": "toolRequest", "id": "t2", "toolCall": {"status": "error", "error": "-32602: bad"}}));
        assert!(matches!(c, Content::ToolRequest(ToolRequest { call: Err(ref e), .. }) if e == "-32602: bad"), "{c:?}");

        let c = one(json!({"type": "frontendToolRequest", "id": "f1",
            "toolCall": {"status": "success", "value": {"name": "pick_file"}}}));
        let Content::FrontendToolRequest(r) = c else { panic!("{c:?}") };
        assert_eq!(r.call.unwrap().arguments, Value::Null, "no arguments stays no arguments");

        let result = json!({"content": [{"type": "text", "text": "a"}], "structuredContent": {"n": 1},
            "isError": false, "_meta": {"m": 1}, "later": true});
        let c = one(json!({"type": "toolResponse", "id": "t1", "toolResult": {"status": "success", "value": result}}));
        let Content::ToolResponse(ToolResponse { result: Ok(ToolResult::Call(ref r)), .. }) = c else {
            panic!("{c:?}")
        };
        assert_eq!((r.content[0].as_text(), r.is_error(), r.extra.len()), (Some("a"), false, 1));
        assert_eq!(c.to_value()["toolResult"]["value"], result);
        // goose always writes isError: one stored without it comes back false.
        let c = Content::from_value(json!({"type": "toolResponse", "id": "t1",
            "toolResult": {"status": "success", "value": {"content": []}}}));
        assert_eq!(c.to_value()["toolResult"]["value"], json!({"content": [], "isError": false}));
        let c =
            one(json!({"type": "toolResponse", "id": "t1", "toolResult": {"status": "error", "error": "declined"}}));
        assert!(matches!(c, Content::ToolResponse(ToolResponse { result: Err(ref e), .. }) if e == "declined"));
        // Older sessions: a bare content array.
        let c = one(json!({"type": "toolResponse", "id": "t1",
            "toolResult": {"status": "success", "value": [{"type": "text", "text": "a"}]}}));
        let Content::ToolResponse(ToolResponse { result: Ok(ToolResult::Content(ref blocks)), .. }) = c else {
            panic!("{c:?}")
        };
        assert_eq!(blocks[0].as_text(), Some("a"));
        assert_eq!(c.to_value()["toolResult"]["value"], json!([{"type": "text", "text": "a"}]));

        let c = one(json!({"type": "actionRequired", "data": {"actionType": "toolConfirmation", "id": "t1",
            "toolName": "dev__shell", "arguments": {"command": "ls"}, "prompt": "Allow?"}}));
        let Content::ActionRequired(ActionRequired {
            data: Action::ToolConfirmation { tool_name, prompt, .. }, ..
        }) = c
        else {
            panic!("{c:?}")
        };
        assert_eq!((tool_name.as_str(), prompt.as_deref()), ("dev__shell", Some("Allow?")));
        let c = one(json!({"type": "actionRequired", "data": {"actionType": "elicitation", "id": "e1",
            "message": "Name?", "requested_schema": {"type": "object"}}}));
        assert!(matches!(c, Content::ActionRequired(ActionRequired { data: Action::Elicitation { .. }, .. })));
        let c = one(json!({"type": "actionRequired", "data": {"actionType": "elicitationResponse", "id": "e1",
            "user_data": {"name": "A"}}}));
        let Content::ActionRequired(ActionRequired { data: Action::ElicitationResponse { id, user_data }, .. }) = c
        else {
            panic!("{c:?}")
        };
        assert_eq!((id.as_str(), user_data), ("e1", json!({"name": "A"})));

        let c = one(json!({"type": "thinking", "thinking": "hmm", "signature": "sig"}));
        assert!(matches!(c, Content::Thinking(Thinking { ref thinking, .. }) if thinking == "hmm"));
        let c = one(json!({"type": "redactedThinking", "data": "xyz"}));
        assert!(matches!(c, Content::RedactedThinking(_)));
        let c = one(json!({"type": "systemNotification", "notificationType": "inlineMessage", "msg": "oops",
            "data": {"x": 1}}));
        let Content::SystemNotification(n) = c else { panic!("{c:?}") };
        assert_eq!(
            (n.kind, n.msg.as_str(), n.extra.get("data")),
            (NotificationKind::InlineMessage, "oops", Some(&json!({"x": 1})))
        );
    }

    #[test]
    fn unknown_types_shapes_and_fields_are_kept_whole() {
        // Types gosling does not know, and known types in shapes it does not expect.
        for c in [
            json!({"type": "toolConfirmationRequest", "id": "t1", "toolName": "x", "arguments": {}}),
            json!({"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}),
            json!({"type": "text", "text": 5}),
            json!({"type": "toolRequest", "id": "t1", "toolCall": {"status": "success", "value": {"name": "x"}, "more": 1}}),
            json!({"type": "toolResponse", "id": "t1", "toolResult": {"status": "pending"}}),
            json!({"type": "toolResponse", "id": "t1", "toolResult": {"status": "success", "value": "done"}}),
            json!({"type": "actionRequired", "data": {"actionType": "elicitation", "id": "e1", "message": "m", "new": 1}}),
            json!({"type": "systemNotification", "notificationType": "newKind", "msg": "m"}),
            json!("a bare string"),
            json!({"no": "type"}),
        ] {
            assert!(matches!(one(c.clone()), Content::Other(ref v) if *v == c), "{c}");
        }
        // Unknown fields of a message, its metadata and a tool call are kept.
        let v = json!({"id": "m1", "role": "user", "created": 1, "content": [{"type": "toolRequest", "id": "t1",
            "toolCall": {"status": "success", "value": {"name": "x", "arguments": {}, "task": {"ttl": 5}}}}],
            "metadata": {"userVisible": false, "agentVisible": true, "goslingStopped": true, "future": [1]},
            "goose_future_field": {"a": null}});
        let m = round_trip(v);
        assert!(m.metadata.stopped && !m.metadata.user_visible && !m.metadata.error);
        assert_eq!(m.extra.get("goose_future_field"), Some(&json!({"a": null})));
        let Content::ToolRequest(r) = &m.content[0] else { panic!() };
        assert_eq!(r.call.as_ref().unwrap().extra.get("task"), Some(&json!({"ttl": 5})));
    }

    #[test]
    fn gosling_writes_goose_shapes_in_goose_order() {
        let mut m = Message::new("m1", Role::Assistant, vec![Content::text("hi")]);
        m.created = 7;
        m.metadata.error = true;
        m.metadata.agent_visible = false;
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"id":"m1","role":"assistant","created":7,"content":[{"type":"text","text":"hi"}],"metadata":{"userVisible":true,"agentVisible":false,"goslingError":true}}"#
        );
        assert_eq!(m.text(), "hi");
        // Optional fields goose may send as null come back absent; a missing metadata is goose's default.
        let m: Message =
            serde_json::from_str(r#"{"id":null,"role":"user","created":1,"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#)
                .unwrap();
        assert_eq!((m.id.as_deref(), m.metadata == Metadata::default(), m.text()), (None, true, "a b".into()));
    }

    #[test]
    fn a_message_that_is_not_one_says_what_is_wrong() {
        let err = |s: &str| serde_json::from_str::<Message>(s).unwrap_err().to_string();
        assert!(err(r#"{"created":1,"content":[]}"#).contains("`role`"));
        assert!(err(r#"{"role":"system","created":1,"content":[]}"#).contains("`role`"));
        assert!(err(r#"{"role":"user","content":[]}"#).contains("`created`"));
        assert!(err(r#"{"role":"user","created":1,"content":{}}"#).contains("`content`"));
        assert!(
            err(r#"{"role":"user","created":1,"content":[],"metadata":{"userVisible":"yes"}}"#).contains("userVisible")
        );
        assert!(err(r#"[1]"#).contains("JSON object"));
        assert!(err(r#"{"role":"user""#).contains("EOF"));
    }
}
