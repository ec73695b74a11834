//! What gosling sends in ACP's `session/update` notifications (and goose's
//! `_goose/unstable/session/update`), as Rust types: one variant per `sessionUpdate` kind.
//! The producers (`updates`, `session`, `goose`) build these; [`SessionUpdate::to_value`] is the
//! one place they become JSON, with the keys in the order goose's clients have always seen.
//! Pure: uses no other module.

use serde_json::{json, Map, Value};

/// One `session/update` payload.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionUpdate {
    /// `agent_message_chunk`, `user_message_chunk` or `agent_thought_chunk`: a text block.
    Chunk(Chunk),
    /// `tool_call`: a call announced.
    ToolCall(ToolCall),
    /// `tool_call_update`: a call's status, content or result.
    ToolCallUpdate(ToolCallUpdate),
    /// `plan`: the model's task list.
    Plan(Vec<PlanEntry>),
    /// `available_commands_update`: the commands the client may offer (each an ACP
    /// AvailableCommand object).
    AvailableCommands(Vec<Value>),
    /// `current_mode_update`: the session's mode changed.
    CurrentMode { mode_id: String },
    /// `config_option_update`: the session's config options (ACP's SessionConfigOption list).
    ConfigOptions(Value),
    /// `session_info_update`: the session's title (and goose's `_meta.messageCount`, the
    /// messages it holds then).
    SessionInfo { title: String, updated_at: Option<String>, user_set_name: bool, message_count: Option<u64> },
    /// goose's `usage_update` (sent as `_goose/unstable/session/update`): the token meter.
    Usage { used: u64, context_limit: u64, accumulated_input: u64, accumulated_output: u64 },
    /// ACP's standard `usage_update`: `used` tokens of the model's context window (`size`).
    ContextUsage { used: u64, size: u64 },
    /// goose's `message_usage` (sent as `_goose/unstable/session/update`): one model call's
    /// tokens and timing, on the assistant message it wrote.
    MessageUsage(MessageUsage),
    /// goose's `session_info_update` naming the turn running now (`_meta.goose.activeRunId`),
    /// which Desktop steers into; `None` when it ended.
    ActiveRun(Option<String>),
    /// goose's `session_info_update` confirming a steered message (`_meta.goose.queuedSteer`):
    /// Desktop keeps the message it showed for the steer only once this (or the message's
    /// own chunk) names it, and drops it when the turn ends unconfirmed.
    QueuedSteer { run_id: String, message_id: String },
    /// ACP's `notice`: something the person should know outside a message (an extension that
    /// failed to start, a model call retried). Sent only to a client whose `initialize`
    /// advertised `clientCapabilities.session.notices`. gosling never compacts a conversation,
    /// so it has no `compaction_update` / `compaction_summary_chunk` to send and no variant
    /// for them.
    Notice(Notice),
}

/// ACP's `NoticeSeverity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeSeverity {
    Info,
    Warning,
    Error,
}

/// ACP's `Notice`: a non-empty plain-text `title` that stands alone, and an optional `description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub severity: NoticeSeverity,
    pub title: String,
    pub description: Option<String>,
}

/// One model call's usage (`message_usage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageUsage {
    pub message_id: String,
    pub input: i64,
    pub output: i64,
    /// From the call's start (as the turn's events show it) to its tokens.
    pub elapsed_ms: u64,
    /// From the call's start to its first streamed text, when it streamed any.
    pub first_token_ms: Option<u64>,
}

/// Who speaks in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    Agent,
    User,
    Thought,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub kind: ChunkKind,
    pub text: String,
    /// The person's image (`mimeType`, base64 `data`), sent instead of the text.
    pub image: Option<(String, String)>,
    /// The goose message the chunk belongs to (ACP's `messageId` and goose's `_meta`).
    pub message: Option<GooseMeta>,
}

/// goose's message identity on an update (`_meta.goose`), as Goose Desktop reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct GooseMeta {
    pub message_id: String,
    pub created: i64,
    /// A tool call's tool and extension (`_meta.goose.toolCall`).
    pub tool: Option<(String, String)>,
    /// The person's text was steered into a running turn (`_meta.goose.steer`).
    pub steer: bool,
    /// The chunk says the message stopped at the model's output limit
    /// (`_meta.goose.outputTokenLimitReached` and `fallbackContent`): Desktop shows its own
    /// warning under the message instead of this chunk's text when the message has text;
    /// other clients show the text.
    pub output_limit: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub title: String,
    pub kind: &'static str,
    pub status: String,
    pub raw_input: Value,
    /// Absolute paths the call touches.
    pub locations: Vec<String>,
    /// ACP ToolCallContent items (a call that could not be made says why here).
    pub content: Option<Vec<Value>>,
    pub message: Option<GooseMeta>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallUpdate {
    pub id: String,
    pub status: String,
    /// ACP ToolCallContent items.
    pub content: Option<Vec<Value>>,
    pub raw_output: Option<Value>,
    pub message: Option<GooseMeta>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanEntry {
    pub content: String,
    pub status: &'static str,
}

/// ACP ToolCallContent holding one text block.
pub fn text_content(text: &str) -> Value {
    json!({ "type": "content", "content": { "type": "text", "text": text } })
}

/// A call's status that closes it.
pub fn is_final(status: &str) -> bool {
    matches!(status, "completed" | "failed")
}

fn put(m: &mut Map<String, Value>, k: &str, v: impl Into<Value>) {
    m.insert(k.to_string(), v.into());
}

fn put_meta(m: &mut Map<String, Value>, meta: &Option<GooseMeta>) {
    if let Some(g) = meta {
        let mut goose = json!({ "messageId": g.message_id, "created": g.created });
        if let Some((tool, extension)) = &g.tool {
            goose["toolCall"] = json!({ "toolName": tool, "extensionName": extension });
        }
        if g.steer {
            goose["steer"] = json!(true);
        }
        if g.output_limit {
            goose["outputTokenLimitReached"] = json!(true);
            goose["fallbackContent"] = json!(true);
        }
        put(m, "_meta", json!({ "goose": goose }));
    }
}

impl ChunkKind {
    pub fn name(self) -> &'static str {
        match self {
            ChunkKind::Agent => "agent_message_chunk",
            ChunkKind::User => "user_message_chunk",
            ChunkKind::Thought => "agent_thought_chunk",
        }
    }
}

impl SessionUpdate {
    /// The `sessionUpdate` discriminator.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionUpdate::Chunk(c) => c.kind.name(),
            SessionUpdate::ToolCall(_) => "tool_call",
            SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
            SessionUpdate::Plan(_) => "plan",
            SessionUpdate::AvailableCommands(_) => "available_commands_update",
            SessionUpdate::CurrentMode { .. } => "current_mode_update",
            SessionUpdate::ConfigOptions(_) => "config_option_update",
            SessionUpdate::SessionInfo { .. } => "session_info_update",
            SessionUpdate::Usage { .. } | SessionUpdate::ContextUsage { .. } => "usage_update",
            SessionUpdate::ActiveRun(_) | SessionUpdate::QueuedSteer { .. } => "session_info_update",
            SessionUpdate::MessageUsage(_) => "message_usage",
            SessionUpdate::Notice(_) => "notice",
        }
    }

    /// The update as the wire's JSON object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "sessionUpdate", self.kind());
        self.put_fields(&mut m);
        Value::Object(m)
    }

    fn put_fields(&self, m: &mut Map<String, Value>) {
        match self {
            SessionUpdate::Chunk(c) => {
                match &c.image {
                    Some((mime_type, data)) => {
                        put(m, "content", json!({ "type": "image", "data": data, "mimeType": mime_type }))
                    }
                    None => put(m, "content", json!({ "type": "text", "text": c.text })),
                }
                if let Some(g) = &c.message {
                    put(m, "messageId", g.message_id.as_str());
                }
                put_meta(m, &c.message);
            }
            SessionUpdate::ToolCall(c) => c.put_fields(m),
            SessionUpdate::ToolCallUpdate(u) => {
                put(m, "toolCallId", u.id.as_str());
                put(m, "status", u.status.as_str());
                if let Some(c) = &u.content {
                    put(m, "content", c.clone());
                }
                if let Some(r) = &u.raw_output {
                    put(m, "rawOutput", r.clone());
                }
                put_meta(m, &u.message);
            }
            SessionUpdate::Plan(entries) => {
                let entries: Vec<Value> = entries
                    .iter()
                    .map(|e| json!({ "content": e.content, "priority": "medium", "status": e.status }))
                    .collect();
                put(m, "entries", entries);
            }
            SessionUpdate::AvailableCommands(c) => put(m, "availableCommands", c.clone()),
            SessionUpdate::CurrentMode { mode_id } => put(m, "currentModeId", mode_id.as_str()),
            SessionUpdate::ConfigOptions(o) => put(m, "configOptions", o.clone()),
            SessionUpdate::SessionInfo { title, updated_at, user_set_name, message_count } => {
                put(m, "title", title.as_str());
                if let Some(u) = updated_at {
                    put(m, "updatedAt", u.as_str());
                }
                let mut meta = json!({ "userSetName": user_set_name });
                if let Some(n) = message_count {
                    meta["messageCount"] = json!(n);
                }
                put(m, "_meta", meta);
            }
            SessionUpdate::Usage { used, context_limit, accumulated_input, accumulated_output } => {
                put(m, "used", *used);
                put(m, "contextLimit", *context_limit);
                put(m, "accumulatedInputTokens", *accumulated_input);
                put(m, "accumulatedOutputTokens", *accumulated_output);
            }
            SessionUpdate::ContextUsage { used, size } => {
                put(m, "used", *used);
                put(m, "size", *size);
            }
            SessionUpdate::ActiveRun(run) => put(m, "_meta", json!({ "goose": { "activeRunId": run } })),
            SessionUpdate::QueuedSteer { run_id, message_id } => {
                put(m, "_meta", json!({ "goose": { "queuedSteer": { "messageId": message_id, "runId": run_id } } }))
            }
            SessionUpdate::MessageUsage(u) => {
                put(m, "messageId", u.message_id.as_str());
                let mut usage = json!({ "inputTokens": u.input, "outputTokens": u.output,
                    "totalTokens": u.input + u.output, "elapsedMs": u.elapsed_ms, "isCompaction": false });
                if let Some(f) = u.first_token_ms {
                    usage["timeToFirstTokenMs"] = json!(f);
                }
                put(m, "usage", usage);
            }
            SessionUpdate::Notice(n) => {
                let severity = match n.severity {
                    NoticeSeverity::Info => "info",
                    NoticeSeverity::Warning => "warning",
                    NoticeSeverity::Error => "error",
                };
                put(m, "severity", severity);
                put(m, "title", n.title.as_str());
                if let Some(d) = &n.description {
                    put(m, "description", d.as_str());
                }
            }
        }
    }
}

impl ToolCall {
    fn put_fields(&self, m: &mut Map<String, Value>) {
        put(m, "toolCallId", self.id.as_str());
        put(m, "title", self.title.as_str());
        put(m, "kind", self.kind);
        put(m, "status", self.status.as_str());
        put(m, "rawInput", self.raw_input.clone());
        let locations: Vec<Value> = self.locations.iter().map(|p| json!({ "path": p })).collect();
        put(m, "locations", locations);
        if let Some(c) = &self.content {
            put(m, "content", c.clone());
        }
        put_meta(m, &self.message);
    }

    /// ACP's ToolCallUpdate object of `session/request_permission` (the call without its
    /// `sessionUpdate`).
    pub fn to_permission_value(&self) -> Value {
        let mut m = Map::new();
        self.put_fields(&mut m);
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Option<GooseMeta> {
        Some(GooseMeta { message_id: "m1".into(), created: 7, tool: None, steer: false, output_limit: false })
    }

    #[test]
    fn an_output_limit_note_has_gooses_flags() {
        let u = crate::updates::output_limit_note("m1", 7).to_value();
        assert_eq!(u["sessionUpdate"], "agent_message_chunk");
        assert_eq!(u["messageId"], "m1");
        assert_eq!(u["_meta"]["goose"]["outputTokenLimitReached"], true);
        assert_eq!(u["_meta"]["goose"]["fallbackContent"], true);
        assert!(u["content"]["text"].as_str().is_some_and(|t| t.contains("output limit")), "{u}");
    }

    #[test]
    fn queued_steer_has_gooses_shape() {
        let u = SessionUpdate::QueuedSteer { run_id: "run_1".into(), message_id: "msg_1".into() };
        assert_eq!(
            u.to_value(),
            json!({"sessionUpdate": "session_info_update",
                "_meta": {"goose": {"queuedSteer": {"messageId": "msg_1", "runId": "run_1"}}}})
        );
    }

    #[test]
    fn notice_has_acps_shape() {
        let n = Notice {
            severity: NoticeSeverity::Warning,
            title: "Extension x failed to start".into(),
            description: Some("spawn failed".into()),
        };
        assert_eq!(
            SessionUpdate::Notice(n.clone()).to_value().to_string(),
            r#"{"sessionUpdate":"notice","severity":"warning","title":"Extension x failed to start","description":"spawn failed"}"#
        );
        let bare = Notice { severity: NoticeSeverity::Info, description: None, ..n };
        assert_eq!(
            SessionUpdate::Notice(bare).to_value(),
            json!({ "sessionUpdate": "notice", "severity": "info", "title": "Extension x failed to start" })
        );
    }

    #[test]
    fn every_kind_has_its_wire_shape() {
        let chunk =
            SessionUpdate::Chunk(Chunk { kind: ChunkKind::Agent, text: "hi".into(), image: None, message: meta() });
        assert_eq!(
            chunk.to_value().to_string(),
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m1","_meta":{"goose":{"messageId":"m1","created":7}}}"#
        );
        let thought =
            SessionUpdate::Chunk(Chunk { kind: ChunkKind::Thought, text: "hm".into(), image: None, message: None });
        assert_eq!(
            thought.to_value(),
            json!({ "sessionUpdate": "agent_thought_chunk", "content": { "type": "text", "text": "hm" } })
        );
        let call = ToolCall {
            id: "t1".into(),
            title: "x__y: a".into(),
            kind: "read",
            status: "pending".into(),
            raw_input: json!({ "path": "a" }),
            locations: vec!["/w/a".into()],
            content: None,
            message: Some(GooseMeta {
                message_id: "m1".into(),
                created: 7,
                tool: Some(("x__y".into(), "x".into())),
                steer: false,
                output_limit: false,
            }),
        };
        assert_eq!(
            SessionUpdate::ToolCall(call.clone()).to_value().to_string(),
            r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x__y: a","kind":"read","status":"pending","rawInput":{"path":"a"},"locations":[{"path":"/w/a"}],"_meta":{"goose":{"messageId":"m1","created":7,"toolCall":{"toolName":"x__y","extensionName":"x"}}}}"#
        );
        assert_eq!(call.to_permission_value().get("sessionUpdate"), None);
        assert_eq!(call.to_permission_value()["toolCallId"], "t1");
        let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            id: "t1".into(),
            status: "failed".into(),
            content: Some(vec![text_content("cancelled")]),
            raw_output: Some(json!({ "error": "x" })),
            message: None,
        });
        assert_eq!(
            update.to_value().to_string(),
            r#"{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"cancelled"}}],"rawOutput":{"error":"x"}}"#
        );
        let plan = SessionUpdate::Plan(vec![PlanEntry { content: "test".into(), status: "pending" }]);
        assert_eq!(
            plan.to_value(),
            json!({ "sessionUpdate": "plan", "entries": [{ "content": "test", "priority": "medium", "status": "pending" }] })
        );
        let info = SessionUpdate::SessionInfo {
            title: "T".into(),
            updated_at: None,
            user_set_name: true,
            message_count: None,
        };
        assert_eq!(
            info.to_value().to_string(),
            r#"{"sessionUpdate":"session_info_update","title":"T","_meta":{"userSetName":true}}"#
        );
        let info = SessionUpdate::SessionInfo {
            title: "T".into(),
            updated_at: Some("now".into()),
            user_set_name: false,
            message_count: Some(3),
        };
        assert_eq!(info.to_value()["updatedAt"], "now");
        assert_eq!(info.to_value()["_meta"], json!({ "userSetName": false, "messageCount": 3 }));
        let usage = SessionUpdate::Usage { used: 3, context_limit: 10, accumulated_input: 1, accumulated_output: 2 };
        assert_eq!(
            usage.to_value().to_string(),
            r#"{"sessionUpdate":"usage_update","used":3,"contextLimit":10,"accumulatedInputTokens":1,"accumulatedOutputTokens":2}"#
        );
        assert_eq!(
            SessionUpdate::ConfigOptions(json!([])).to_value(),
            json!({ "sessionUpdate": "config_option_update", "configOptions": [] })
        );
        assert_eq!(
            SessionUpdate::CurrentMode { mode_id: "auto".into() }.to_value(),
            json!({ "sessionUpdate": "current_mode_update", "currentModeId": "auto" })
        );
        assert_eq!(
            SessionUpdate::AvailableCommands(vec![]).to_value(),
            json!({ "sessionUpdate": "available_commands_update", "availableCommands": [] })
        );
        let usage = |first| {
            SessionUpdate::MessageUsage(MessageUsage {
                message_id: "m1".into(),
                input: 100,
                output: 10,
                elapsed_ms: 8,
                first_token_ms: first,
            })
            .to_value()
        };
        assert_eq!(
            usage(Some(3)),
            json!({ "sessionUpdate": "message_usage", "messageId": "m1", "usage": { "inputTokens": 100,
                "outputTokens": 10, "totalTokens": 110, "elapsedMs": 8, "timeToFirstTokenMs": 3, "isCompaction": false } })
        );
        assert!(usage(None)["usage"].get("timeToFirstTokenMs").is_none());
    }
}
