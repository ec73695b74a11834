//! What gosling puts in a goose conversation (the tool requests, responses and confirmations
//! of a turn, with their wording), goose's token and tool-call JSON, and the conversation as
//! the model sees it (provider-neutral `llm` messages). The message types themselves are
//! `store::message`'s.

use gosling_llm::{ChatMessage, Part, Role};
use gosling_store::message::{
    Action, ActionRequired, Content, Message, ToolCall, ToolRequest, ToolResponse, ToolResult,
};
use gosling_store::sessions::Lineage;
use gosling_wire::mcp_types::{CallToolResult, ContentBlock};
use serde_json::{json, Value};

/// A fresh message id.
pub fn new_id() -> String {
    format!("msg_{}", gosling_util::random_hex(8))
}

/// A model's tool call; arguments that are not JSON become goose's `toolCall` error.
pub fn tool_request(id: &str, name: &str, arguments: &Result<Value, gosling_llm::BadArguments>) -> Content {
    let call = match arguments {
        Ok(args) => Ok(ToolCall { name: name.to_string(), arguments: args.clone(), extra: Default::default() }),
        Err(bad) => Err(format!("-32602: invalid JSON arguments for {name}: {}", bad.raw)),
    };
    Content::ToolRequest(ToolRequest { id: id.to_string(), call, extra: Default::default() })
}

pub fn frontend_tool_request(id: &str, name: &str, arguments: &Value) -> Content {
    let call = ToolCall { name: name.to_string(), arguments: arguments.clone(), extra: Default::default() };
    Content::FrontendToolRequest(ToolRequest { id: id.to_string(), call: Ok(call), extra: Default::default() })
}

/// A tool response: an MCP CallToolResult on success, goose's `{status:"error"}` otherwise.
/// Why a tool call has no result, as goose records it in a tool response: a JSON-RPC error
/// code and its message (goose's `ErrorData`, written `"<code>: <message>"` in the stored
/// response, which is the only place it becomes text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallError {
    pub code: i64,
    pub message: String,
}

impl ToolCallError {
    /// The model's arguments are not what the tool takes (not JSON, not an object).
    pub fn invalid_params(message: impl Into<String>) -> ToolCallError {
        ToolCallError { code: gosling_wire::jsonrpc::INVALID_PARAMS, message: message.into() }
    }

    /// The call failed in gosling or the extension (an error answer, a timeout, a panic).
    pub fn internal(message: impl Into<String>) -> ToolCallError {
        ToolCallError { code: gosling_wire::jsonrpc::INTERNAL_ERROR, message: message.into() }
    }
}

impl std::fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A tool response that failed with a JSON-RPC error (`ToolCallError`).
pub fn tool_error(id: &str, e: &ToolCallError) -> Content {
    tool_response(id, Err(e.to_string()))
}

pub fn tool_response(id: &str, result: Result<CallToolResult, String>) -> Content {
    Content::ToolResponse(ToolResponse {
        id: id.to_string(),
        result: result.map(|r| ToolResult::Call(Box::new(r))),
        extra: Default::default(),
    })
}

pub fn tool_confirmation(id: &str, tool: &str, arguments: &Value) -> Content {
    let data = Action::ToolConfirmation {
        id: id.to_string(),
        tool_name: tool.to_string(),
        arguments: arguments.clone(),
        prompt: Some(format!("Allow {tool} to run with these arguments?")),
    };
    Content::ActionRequired(ActionRequired { data, extra: Default::default() })
}

/// goose's TokenState (camelCase, all required).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokens {
    pub input: i64,
    pub output: i64,
    pub acc_input: i64,
    pub acc_output: i64,
}

impl Tokens {
    pub fn state(&self) -> Value {
        json!({
            "inputTokens": self.input, "outputTokens": self.output, "totalTokens": self.input + self.output,
            "accumulatedInputTokens": self.acc_input, "accumulatedOutputTokens": self.acc_output,
            "accumulatedTotalTokens": self.acc_input + self.acc_output,
        })
    }
}

/// goose's CallToolResponse JSON from an MCP CallToolResult: the result's own JSON with
/// `isError` always present (false when the server left it out); keys gosling does not know
/// are kept.
pub fn call_tool_response(result: &CallToolResult) -> Value {
    result.to_value_with_is_error()
}

/// An MCP text content item (what a failed tool call tells the model and the editor).
pub fn text_item(t: &str) -> Value {
    json!({ "type": "text", "text": t })
}

/// The conversation as the model sees it: agent-visible messages, text and tool traffic.
pub fn to_llm<'a>(conversation: impl IntoIterator<Item = &'a Message>) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for m in conversation.into_iter().filter(|m| m.metadata.agent_visible) {
        let role = match m.role {
            gosling_store::message::Role::Assistant => Role::Assistant,
            gosling_store::message::Role::User => Role::User,
        };
        let mut parts = Vec::new();
        for c in &m.content {
            match c {
                Content::Text(t) => parts.push(Part::Text(t.text.clone())),
                Content::Image(i) if m.role == gosling_store::message::Role::User => {
                    parts.push(Part::Image { mime_type: i.mime_type.clone(), data: i.data.clone() })
                }
                Content::ToolRequest(r) | Content::FrontendToolRequest(r) => {
                    if let Ok(call) = &r.call {
                        let arguments = if call.arguments.is_null() { json!({}) } else { call.arguments.clone() };
                        parts.push(Part::ToolCall { id: r.id.clone(), name: call.name.clone(), arguments });
                    }
                }
                Content::ToolResponse(r) => {
                    let (content, is_error) = match &r.result {
                        Ok(t) => (t.content().iter().map(ContentBlock::to_value).collect(), t.is_error()),
                        Err(e) => (vec![text_item(e)], true),
                    };
                    parts.push(Part::ToolResult { id: r.id.clone(), content, is_error });
                }
                _ => {}
            }
        }
        if !parts.is_empty() {
            out.push(ChatMessage { role, parts });
        }
    }
    out
}

/// What a call whose result was never saved is answered with (`pair_tool_traffic`).
pub const INTERRUPTED: &str =
    "no result was saved for this call: the server stopped while it ran, so it may or may not have run";

/// Pairs every tool call with its result before the conversation goes to the model, as the
/// providers require (each call answered in the next message, each result answering a call
/// of the message before): a call whose result was never saved — gosling stopped, or the
/// power went, while it ran (`reply::Turn::save_deferred`) — is answered as interrupted, and
/// a result whose call is not there is left out. Looks at the messages from `from` on and at
/// the one before (whose calls the first may answer); the calls of the last message stay
/// open (a frontend tool's results come with the next message). The first place it changed,
/// if it changed anything.
pub fn pair_tool_traffic(messages: &mut Vec<ChatMessage>, from: usize) -> Option<usize> {
    let calls = |m: &ChatMessage| -> Vec<String> {
        m.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { id, .. } if m.role == Role::Assistant => Some(id.clone()),
                _ => None,
            })
            .collect()
    };
    let mut changed = None;
    let mut i = from;
    while i < messages.len() {
        let asked = if i == 0 { Vec::new() } else { calls(&messages[i - 1]) };
        if messages[i].role == Role::User {
            let before = messages[i].parts.len();
            messages[i].parts.retain(|p| !matches!(p, Part::ToolResult { id, .. } if !asked.contains(id)));
            if messages[i].parts.len() != before {
                changed.get_or_insert(i);
            }
            if messages[i].parts.is_empty() {
                messages.remove(i);
                continue;
            }
        }
        let mut missing = asked;
        if messages[i].role == Role::User {
            missing.retain(|c| !messages[i].parts.iter().any(|p| matches!(p, Part::ToolResult { id, .. } if id == c)));
        } else if !missing.is_empty() {
            messages.insert(i, ChatMessage { role: Role::User, parts: Vec::new() });
        }
        if !missing.is_empty() {
            changed.get_or_insert(i);
        }
        let answers = missing.into_iter().map(|id| Part::ToolResult {
            id,
            content: vec![text_item(INTERRUPTED)],
            is_error: true,
        });
        messages[i].parts.splice(0..0, answers);
        i += 1;
    }
    changed
}

/// Each session's earlier conversation as the model sees it, kept from one turn to the next:
/// `covers` stored messages of `lineage` converted (`to_llm`), so the next turn converts only
/// what was stored since. A few sessions' (those turning now), the most recent first.
struct Converted {
    session: String,
    lineage: Lineage,
    covers: usize,
    messages: Vec<ChatMessage>,
}

static CONVERTED: std::sync::Mutex<Vec<Converted>> = std::sync::Mutex::new(Vec::new());
/// As many as the store keeps parsed conversations (a lineage comes back only while the store
/// keeps its conversation parsed).
const CONVERTED_KEPT: usize = 4;

/// What session `session`'s last turn kept of its conversation's conversion, taken out, and how
/// many stored messages it covers — when they are still the start of the conversation (the
/// same `lineage`, no more of them than `stored`); else nothing (empty, 0).
pub fn take_converted(session: &str, lineage: Lineage, stored: usize) -> (Vec<ChatMessage>, usize) {
    let mut kept = gosling_util::lock(&CONVERTED);
    let Some(i) = kept.iter().position(|c| c.session == session) else { return (Vec::new(), 0) };
    let c = kept.remove(i);
    match lineage.lasts() && c.lineage == lineage && c.covers <= stored {
        true => (c.messages, c.covers),
        false => (Vec::new(), 0),
    }
}

/// Keeps `messages`, the conversion of the first `covers` stored messages of session
/// `session`'s conversation of `lineage`, for its next turn (`take_converted`).
pub fn keep_converted(session: &str, lineage: Lineage, covers: usize, messages: Vec<ChatMessage>) {
    let mut kept = gosling_util::lock(&CONVERTED);
    kept.retain(|c| c.session != session);
    // A conversation the store does not keep parsed comes back with another lineage: its
    // conversion (as long as it is) would only take room.
    if lineage.lasts() {
        kept.insert(0, Converted { session: session.to_string(), lineage, covers, messages });
        kept.truncate(CONVERTED_KEPT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_store::message::Role::{Assistant, User};

    #[test]
    fn tool_call_errors_keep_goose_s_code_and_words() {
        let bad = ToolCallError::invalid_params("arguments are not JSON");
        assert_eq!(bad.to_string(), "-32602: arguments are not JSON");
        assert_eq!(ToolCallError::internal("the tool call panicked").code, -32603);
        match tool_error("t1", &bad) {
            Content::ToolResponse(r) => assert_eq!(r.result.err().as_deref(), Some("-32602: arguments are not JSON")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn conversation_round_trip_to_llm() {
        let mut hidden = Message::new("m3", User, vec![Content::text("hidden")]);
        hidden.metadata.agent_visible = false;
        let conv = vec![
            Message::new("m0", User, vec![Content::text("hi")]),
            Message::new(
                "m1",
                Assistant,
                vec![Content::text("calling"), tool_request("t1", "x__echo", &Ok(json!({"m":"a"})))],
            ),
            Message::new("m2", User, vec![tool_response("t1", Ok(CallToolResult::text("a", false)))]),
            hidden,
        ];
        let m = to_llm(&conv);
        assert_eq!(m.len(), 3);
        assert!(matches!(&m[1].parts[1], Part::ToolCall { name, .. } if name == "x__echo"));
        assert!(matches!(&m[2].parts[0], Part::ToolResult { is_error: false, content, .. } if content.len() == 1));
    }

    fn call(id: &str) -> Part {
        Part::ToolCall { id: id.into(), name: "x__y".into(), arguments: json!({}) }
    }
    fn result(id: &str) -> Part {
        Part::ToolResult { id: id.into(), content: vec![text_item("ok")], is_error: false }
    }
    fn chat(role: Role, parts: Vec<Part>) -> ChatMessage {
        ChatMessage { role, parts }
    }

    #[test]
    fn calls_without_results_are_answered_as_interrupted_and_results_without_calls_left_out() {
        let text = |t: &str| Part::Text(t.into());
        let mut m = vec![
            chat(Role::User, vec![text("hi")]),
            // Both calls ran; only one result was saved before the power went.
            chat(Role::Assistant, vec![text("calling"), call("a"), call("b")]),
            chat(Role::User, vec![result("b")]),
            // Its result was lost with the rest of the turn: the next message is the person's.
            chat(Role::Assistant, vec![call("c")]),
            chat(Role::User, vec![text("again")]),
            // A result whose request was lost.
            chat(Role::User, vec![result("gone")]),
            chat(Role::Assistant, vec![call("d")]),
            chat(Role::Assistant, vec![text("answer")]),
            // The last message's calls stay open (a frontend tool's result comes next).
            chat(Role::Assistant, vec![call("e")]),
        ];
        assert_eq!(pair_tool_traffic(&mut m, 0), Some(2), "the first change: the lost result of the first call");
        let interrupted =
            |id: &str| Part::ToolResult { id: id.into(), content: vec![text_item(INTERRUPTED)], is_error: true };
        assert_eq!(
            m,
            vec![
                chat(Role::User, vec![text("hi")]),
                chat(Role::Assistant, vec![text("calling"), call("a"), call("b")]),
                chat(Role::User, vec![interrupted("a"), result("b")]),
                chat(Role::Assistant, vec![call("c")]),
                chat(Role::User, vec![interrupted("c"), text("again")]),
                chat(Role::Assistant, vec![call("d")]),
                chat(Role::User, vec![interrupted("d")]),
                chat(Role::Assistant, vec![text("answer")]),
                chat(Role::Assistant, vec![call("e")]),
            ]
        );
        // Paired already: nothing changes, from any point on.
        let before = m.clone();
        for from in 0..m.len() {
            assert_eq!(pair_tool_traffic(&mut m, from), None);
        }
        assert_eq!(m, before);
        // The open call is answered by the next message when it comes.
        m.push(chat(Role::User, vec![result("e")]));
        assert_eq!(pair_tool_traffic(&mut m, before.len()), None);
        assert_eq!(m.len(), before.len() + 1);
        assert_eq!(m.last().unwrap().parts, [result("e")]);
    }

    /// A session's kept conversion comes back only for the lineage it was made from and while
    /// it covers no more messages than are stored; taking it takes it out.
    #[test]
    fn a_kept_conversion_is_given_back_for_its_lineage_only() {
        use gosling_store::sessions::SessionStore;
        let dir = std::env::temp_dir().join(format!("gosling-kept-conversion-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SessionStore::open(&dir).unwrap();
        let id = store.create("/w", vec![]).unwrap().id;
        store.append_message(&id, &Message::new("m0", User, vec![Content::text("hi")])).unwrap();
        let empty = store.create("/w", vec![]).unwrap().id;
        let (_, _, none) = store.get_shared(&empty).unwrap().unwrap();
        assert!(!none.lasts(), "an empty conversation is not kept parsed");
        let (_, stored, lineage) = store.get_shared(&id).unwrap().unwrap();
        store.replace_conversation(&id, &stored).unwrap();
        let (_, _, rewritten) = store.get_shared(&id).unwrap().unwrap();
        assert_ne!(lineage, rewritten);
        let converted = to_llm(stored.iter());
        let session = format!("kept-{id}");
        keep_converted(&session, lineage, 1, converted.clone());
        assert_eq!(take_converted(&session, rewritten, 1), (Vec::new(), 0), "another lineage: nothing");
        assert_eq!(take_converted(&session, lineage, 1), (Vec::new(), 0), "taken out by the miss before");
        keep_converted(&session, lineage, 1, converted.clone());
        assert_eq!(take_converted(&session, lineage, 0), (Vec::new(), 0), "covers more than is stored: nothing");
        keep_converted(&session, lineage, 1, converted.clone());
        assert_eq!(take_converted(&session, lineage, 3), (converted.clone(), 1), "the same lineage, grown: given back");
        assert_eq!(take_converted(&session, lineage, 3), (Vec::new(), 0), "once");
        // A lineage that does not last (the store keeps no parsed copy) is not kept.
        keep_converted(&session, none, 0, converted);
        assert_eq!(take_converted(&session, none, 3), (Vec::new(), 0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
