//! `sampling/createMessage` from an extension's server (a legacy request of its own, or an
//! input request of a 2026-07-28 server): the session's model answers it.
//!
//! The session's GOOSE_MODE decides: auto runs it; approve and smart_approve ask the person
//! first, by the route an elicitation takes (event stream, `/reply`, web page) — a question
//! that shows which extension wants the model and the start of what it asks; chat refuses
//! (a chat-only session runs no tools, so none of its servers should be using the model).
//! The server's `systemPrompt` and `maxTokens` are used (`max_tokens` for OpenAI-style
//! providers; Anthropic's is lowered to it); `includeContext` is treated as "none" (gosling never hands one
//! server's conversation to another); `modelPreferences` are hints only: the session's model
//! answers. Every request is audited as the tool `sampling/createMessage` (arguments hashed).

use crate::agent::elicit::Elicitations;
use crate::agent::reply::Mode;
use crate::llm::{self, ChatMessage, ChatRequest, Part, Role};
use crate::store::audit::{AuditLog, Entry};
use crate::store::sessions::SessionStore;
use crate::wire::jsonrpc::{ErrorObject, INVALID_PARAMS};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The code of a refused sampling request (the MCP spec's example: "User rejected sampling
/// request").
pub const REFUSED: i64 = -1;
/// How much of the server's prompt the person is shown when asked.
const SHOWN_PROMPT: usize = 500;

pub type Setting = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What answering sampling needs from the host.
pub struct Sampling {
    pub sessions: Arc<SessionStore>,
    pub setting: Setting,
    pub elicitations: Arc<Elicitations>,
    pub audit: AuditLog,
}

impl Sampling {
    /// Answers one `sampling/createMessage` of `extension` in `session`: an MCP
    /// CreateMessageResult, or the error the server gets.
    pub fn create_message(&self, session: &str, extension: &str, params: &Value) -> Result<Value, ErrorObject> {
        let started = Instant::now();
        let result = self.run(session, extension, params);
        let status = match &result {
            Ok(_) => "ok",
            Err(e) if e.code == REFUSED => "refused",
            Err(_) => "error",
        };
        self.audit.record(&Entry {
            session,
            extension,
            tool: "sampling/createMessage",
            arguments: params,
            status,
            duration: started.elapsed(),
        });
        result
    }

    fn run(&self, session: &str, extension: &str, params: &Value) -> Result<Value, ErrorObject> {
        let meta = self.sessions.get_meta(session).ok().flatten();
        let setting = |k: &str| (self.setting)(k);
        let mode = Mode::resolve(meta.as_ref().and_then(|m| m.goose_mode.as_deref()), &setting);
        let request = chat_request(params)?;
        match mode {
            Mode::Chat => return Err(refused("this session is in chat mode, which runs no tools and no sampling")),
            Mode::Approve | Mode::SmartApprove => self.ask(session, extension, &request)?,
            Mode::Auto => {}
        }
        let model = meta
            .as_ref()
            .and_then(|m| m.model_config.as_ref())
            .and_then(|m| m.get("model_name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let provider_name = meta.as_ref().and_then(|m| m.provider_name.clone());
        let settings =
            llm::Settings::resolve(&crate::config::ProcessEnv, &setting, (provider_name.as_deref(), model.as_deref()))
                .map_err(|e| ErrorObject::new(INVALID_PARAMS, format!("the session has no usable model: {e}")))?;
        let provider = llm::from_settings(&settings)
            .map_err(|e| ErrorObject::new(INVALID_PARAMS, format!("the session has no usable model: {e}")))?;
        let completion = provider
            .complete(&request, &mut |_| true)
            .map_err(|e| ErrorObject::new(crate::wire::jsonrpc::INTERNAL_ERROR, format!("the model failed: {e}")))?;
        let stop = match completion.stop_reason.as_deref() {
            Some("length" | "max_tokens") => "maxTokens",
            _ => "endTurn",
        };
        log::info!("sampling: {extension} in session {session}: answered by {}", settings.model);
        Ok(json!({
            "role": "assistant",
            "content": { "type": "text", "text": completion.text },
            "model": settings.model,
            "stopReason": stop,
        }))
    }

    /// Asks the person whether `extension` may use the model for this prompt.
    fn ask(&self, session: &str, extension: &str, request: &ChatRequest) -> Result<(), ErrorObject> {
        let prompt: String = request
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let question = json!({
            "message": format!(
                "The extension {extension} wants to use the model with this prompt. Allow it?\n\n{}",
                llm::clip(&prompt, SHOWN_PROMPT)
            ),
            "requestedSchema": { "type": "object", "properties": {} },
        });
        let answer = self.elicitations.ask(session, extension, &question);
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => Ok(()),
            Some("decline") => Err(refused("the user declined the sampling request")),
            _ => Err(refused("the user did not answer the sampling request")),
        }
    }
}

fn refused(why: &str) -> ErrorObject {
    ErrorObject::new(REFUSED, format!("User rejected sampling request: {why}"))
}

/// The model request for a CreateMessageRequest's params: its system prompt and text messages.
fn chat_request(params: &Value) -> Result<ChatRequest, ErrorObject> {
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| ErrorObject::new(INVALID_PARAMS, "sampling/createMessage needs `messages`, an array"))?;
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                return Err(ErrorObject::new(
                    INVALID_PARAMS,
                    format!("messages[{i}].role is {other:?}; expected \"user\" or \"assistant\""),
                ))
            }
        };
        // `content` is one block or (2025-11-25 on) an array of blocks; text is what a model
        // without tools takes, anything else is described.
        let blocks: Vec<&Value> = match m.get("content") {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(b @ Value::Object(_)) => vec![b],
            _ => return Err(ErrorObject::new(INVALID_PARAMS, format!("messages[{i}].content is missing"))),
        };
        let parts = blocks
            .into_iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => Part::Text(b.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
                other => Part::Text(format!("[{} content]", other.unwrap_or("unknown"))),
            })
            .collect();
        out.push(ChatMessage { role, parts });
    }
    if out.is_empty() {
        return Err(ErrorObject::new(INVALID_PARAMS, "sampling/createMessage needs at least one message"));
    }
    let system = params.get("systemPrompt").and_then(Value::as_str).unwrap_or("").to_string();
    let max_tokens = params.get("maxTokens").and_then(Value::as_u64).map(|m| m.clamp(1, u32::MAX as u64) as u32);
    Ok(ChatRequest { system, messages: out, tools: Vec::new(), max_tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_message_request_becomes_a_model_request() {
        let p = json!({"systemPrompt": "be brief", "maxTokens": 10, "messages": [
            {"role": "user", "content": {"type": "text", "text": "capital of France?"}},
            {"role": "assistant", "content": [{"type": "text", "text": "Paris"}, {"type": "image", "data": "", "mimeType": "image/png"}]},
        ]});
        let r = chat_request(&p).unwrap();
        assert_eq!(r.system, "be brief");
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.messages[0].parts, vec![Part::Text("capital of France?".into())]);
        assert_eq!(r.messages[1].parts[1], Part::Text("[image content]".into()));
        assert!(r.tools.is_empty(), "a sampling request offers the model no tools");
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        assert!(chat_request(&json!({})).unwrap_err().message.contains("`messages`"));
        let e = chat_request(&json!({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]}));
        assert!(e.unwrap_err().message.contains("messages[0].role"));
        assert!(chat_request(&json!({"messages": []})).unwrap_err().message.contains("at least one"));
    }
}
