//! `sampling/createMessage` from an extension's server (a legacy request of its own, or an
//! input request of a 2026-07-28 server): the session's model answers it, when the person says so.
//!
//! Sampling is the person's decision in every mode: each request is asked about by the route
//! an elicitation takes (event stream, `/reply`, web page, ACP) — a question that shows which
//! extension wants the model and the start of what it asks, with an "always" box that grants
//! that extension sampling for the rest of the session (kept in memory, like a tool's
//! always-allow) — unless the person already granted it. Chat mode refuses (a chat-only
//! session runs no tools, so none of its servers should be using the model). No turn running,
//! nobody answering within the elicitation deadline, a decline: refused.
//!
//! Bounds (each refusal is a JSON-RPC error to the server saying why): at most
//! [`MAX_IN_FLIGHT`] requests of one session at once (the rest refused at once, never
//! queued), at most [`MAX_PER_TURN`] answered or asked about per turn, at most
//! [`MAX_PROMPT_BYTES`] of prompt (system prompt and text), and `maxTokens` clipped to
//! [`MAX_TOKENS`] (the result's `_meta` says so).
//!
//! The server's `systemPrompt` and `maxTokens` are used (`max_tokens` for OpenAI-style
//! providers; Anthropic's is lowered to it); `includeContext` is treated as "none" (gosling never hands one
//! server's conversation to another); `modelPreferences` are hints only: the session's model
//! answers. Every request is audited as the tool `sampling/createMessage` (arguments hashed).

use crate::elicit::Elicitations;
use crate::permissions::Mode;
use gosling_llm::{self as llm, ChatMessage, ChatRequest, Part, Role};
use gosling_store::audit::{AuditLog, Entry};
use gosling_store::sessions::SessionStore;
use gosling_util::lock;
use gosling_wire::jsonrpc::{ErrorObject, INVALID_PARAMS};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The code of a refused sampling request (the MCP spec's example: "User rejected sampling
/// request").
pub const REFUSED: i64 = -1;
/// How much of the server's prompt the person is shown when asked.
const SHOWN_PROMPT: usize = 500;
/// Sampling requests of one session being asked about or answered at once.
pub const MAX_IN_FLIGHT: usize = 2;
/// Sampling requests asked about or answered in one turn of a session.
pub const MAX_PER_TURN: usize = 10;
/// The most tokens a sampling answer may have; a larger `maxTokens` is clipped to it.
pub const MAX_TOKENS: u32 = 4096;
/// The most bytes of prompt (system prompt and message text) one request may carry.
pub const MAX_PROMPT_BYTES: usize = 1 << 20;

pub type Setting = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What answering sampling needs from the host.
pub struct Sampling {
    pub sessions: Arc<SessionStore>,
    pub setting: Setting,
    pub elicitations: Arc<Elicitations>,
    pub audit: AuditLog,
    pub limits: Limits,
}

/// What the bounds count, per session.
#[derive(Default)]
pub struct Limits {
    /// Requests being asked about or answered, per session.
    in_flight: Mutex<HashMap<String, usize>>,
    /// Per session: the turn counted and how many requests it had.
    per_turn: Mutex<HashMap<String, (u64, usize)>>,
    /// `(session, extension)` the person granted sampling for the session.
    granted: Mutex<HashSet<(String, String)>>,
}

/// One request's place among a session's in-flight ones; freed on drop.
struct Slot<'a> {
    limits: &'a Limits,
    session: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut m = lock(&self.limits.in_flight);
        if let Some(n) = m.get_mut(&self.session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.session);
            }
        }
    }
}

impl Limits {
    fn slot(&self, session: &str) -> Option<Slot<'_>> {
        let mut m = lock(&self.in_flight);
        let n = m.entry(session.to_string()).or_default();
        if *n >= MAX_IN_FLIGHT {
            return None;
        }
        *n += 1;
        Some(Slot { limits: self, session: session.to_string() })
    }

    /// Counts one request against `turn`; false when the turn already had its share.
    fn count(&self, session: &str, turn: u64) -> bool {
        let mut m = lock(&self.per_turn);
        let entry = m.entry(session.to_string()).or_insert((turn, 0));
        if entry.0 != turn {
            *entry = (turn, 0);
        }
        if entry.1 >= MAX_PER_TURN {
            return false;
        }
        entry.1 += 1;
        true
    }

    fn granted(&self, session: &str, extension: &str) -> bool {
        lock(&self.granted).contains(&(session.to_string(), extension.to_string()))
    }

    fn grant(&self, session: &str, extension: &str) {
        lock(&self.granted).insert((session.to_string(), extension.to_string()));
    }
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
        if mode == Mode::Chat {
            return Err(refused("this session is in chat mode, which runs no tools and no sampling"));
        }
        let (request, clipped) = chat_request(params)?;
        let Some(_slot) = self.limits.slot(session) else {
            return Err(refused(&format!(
                "too many sampling requests at once: at most {MAX_IN_FLIGHT} per session are asked about or answered at a time; send the next one after an answer"
            )));
        };
        let Some(turn) = self.elicitations.turn(session) else {
            return Err(refused(
                "no turn is running in this session, so nobody can be asked; sampling is answered only during a turn",
            ));
        };
        if !self.limits.count(session, turn) {
            return Err(refused(&format!(
                "over the per-turn limit: at most {MAX_PER_TURN} sampling requests per turn; the next turn may ask again"
            )));
        }
        if !self.limits.granted(session, extension) {
            self.ask(session, extension, &request)?;
        }
        let model = meta
            .as_ref()
            .and_then(|m| m.model_config.as_ref())
            .and_then(|m| m.get("model_name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let provider_name = meta.as_ref().and_then(|m| m.provider_name.clone());
        let settings =
            llm::Settings::resolve(&gosling_config::ProcessEnv, &setting, (provider_name.as_deref(), model.as_deref()))
                .map_err(|e| ErrorObject::new(INVALID_PARAMS, format!("the session has no usable model: {e}")))?;
        let provider = llm::from_settings(&settings)
            .map_err(|e| ErrorObject::new(INVALID_PARAMS, format!("the session has no usable model: {e}")))?;
        let completion = provider
            .complete(&request, &mut |_| true)
            .map_err(|e| ErrorObject::new(gosling_wire::jsonrpc::INTERNAL_ERROR, format!("the model failed: {e}")))?;
        let stop = match completion.stop_reason.as_deref() {
            Some("length" | "max_tokens") => "maxTokens",
            _ => "endTurn",
        };
        log::info!("sampling: {extension} in session {session}: answered by {}", settings.model);
        let mut result = json!({
            "role": "assistant",
            "content": { "type": "text", "text": completion.text },
            "model": settings.model,
            "stopReason": stop,
        });
        if let Some(asked) = clipped {
            result["_meta"] = json!({ "gosling/maxTokensClipped": {
                "requested": asked,
                "used": MAX_TOKENS,
                "why": format!("gosling answers sampling with at most {MAX_TOKENS} tokens"),
            }});
        }
        Ok(result)
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
            "requestedSchema": { "type": "object", "properties": {
                "always": {
                    "type": "boolean",
                    "title": format!("Always allow {extension} to use the model in this session"),
                    "default": false,
                },
            }},
        });
        let answer = self.elicitations.ask(session, extension, &question);
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {
                if answer.pointer("/content/always").and_then(Value::as_bool) == Some(true) {
                    log::info!("sampling: {extension} granted sampling for session {session}");
                    self.limits.grant(session, extension);
                }
                Ok(())
            }
            Some("decline") => Err(refused("the user declined the sampling request")),
            _ => Err(refused(&format!(
                "nobody answered the sampling request (no one watching the session, or no answer within {} s)",
                self.elicitations.timeout().as_secs()
            ))),
        }
    }
}

fn refused(why: &str) -> ErrorObject {
    ErrorObject::new(REFUSED, format!("User rejected sampling request: {why}"))
}

/// The model request for a CreateMessageRequest's params: its system prompt and text
/// messages, `maxTokens` at most [`MAX_TOKENS`] (with the asked number when it was clipped).
fn chat_request(params: &Value) -> Result<(ChatRequest, Option<u64>), ErrorObject> {
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
    let bytes = system.len()
        + out.iter().flat_map(|m| &m.parts).map(|p| if let Part::Text(t) = p { t.len() } else { 0 }).sum::<usize>();
    if bytes > MAX_PROMPT_BYTES {
        return Err(refused(&format!(
            "the prompt is {bytes} bytes; sampling takes at most {MAX_PROMPT_BYTES} bytes of system prompt and messages"
        )));
    }
    let asked = params.get("maxTokens").and_then(Value::as_u64);
    let clipped = asked.filter(|&m| m > MAX_TOKENS as u64);
    let max_tokens = Some(asked.map_or(MAX_TOKENS, |m| m.clamp(1, MAX_TOKENS as u64) as u32));
    Ok((ChatRequest { system, messages: out, tools: Default::default(), max_tokens }, clipped))
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
        let (r, clipped) = chat_request(&p).unwrap();
        assert_eq!((r.max_tokens, clipped), (Some(10), None));
        assert_eq!(r.system, "be brief");
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.messages[0].parts, vec![Part::Text("capital of France?".into())]);
        assert_eq!(r.messages[1].parts[1], Part::Text("[image content]".into()));
        assert!(r.tools.is_empty(), "a sampling request offers the model no tools");
        let (r, clipped) = chat_request(&json!({"maxTokens": 4_000_000_000u64, "messages": p["messages"]})).unwrap();
        assert_eq!((r.max_tokens, clipped), (Some(MAX_TOKENS), Some(4_000_000_000)));
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        assert!(chat_request(&json!({})).unwrap_err().message.contains("`messages`"));
        let e = chat_request(&json!({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]}));
        assert!(e.unwrap_err().message.contains("messages[0].role"));
        assert!(chat_request(&json!({"messages": []})).unwrap_err().message.contains("at least one"));
    }
}
