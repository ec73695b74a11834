//! Anthropic Messages, streamed.
//!
//! Request: `model`, `max_tokens` (required), `system`, `messages` with content blocks
//! (`text`, `tool_use` in assistant turns, `tool_result` blocks first in the following user
//! turn), `tools` with `input_schema`, `stream: true`; headers `x-api-key` (when set) and
//! `anthropic-version: 2023-06-01`. Response: named events `message_start` (input usage),
//! `content_block_start` (text or tool_use with id/name), `content_block_delta` (`text_delta`,
//! `input_json_delta` fragments), `content_block_stop`, `message_delta` (stop reason, output
//! usage), `message_stop` (the end), `ping`, `error`.

use serde::ser::{Serialize, SerializeMap, Serializer};
#[cfg(test)]
use serde_json::json;
use serde_json::Value;

use crate::body::TextBlock;
use crate::error::Error;
use crate::settings::Settings;
use crate::stream::{Call, Flow, Sink};
use crate::text::{clip, content_as_text, parse_arguments, parse_chunk};
use crate::types::{ChatMessage, ChatRequest, Completion, Part, Role, ToolCallOut, ToolSpec, Usage};

pub const API_VERSION: &str = "2023-06-01";

/// The request's headers: the API version, and the key when there is one.
pub(super) fn headers(s: &Settings) -> Vec<(&'static str, String)> {
    let key = s.api_key.iter().map(|k| ("x-api-key", k.clone()));
    std::iter::once(("anthropic-version", API_VERSION.to_string())).chain(key).collect()
}

/// MCP content blocks as Anthropic `tool_result` content.
#[cfg(test)]
fn result_blocks(content: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for c in content {
        match c.get("type").and_then(Value::as_str) {
            Some("image") => out.push(json!({
                "type": "image",
                "source": {"type": "base64",
                           "media_type": c.get("mimeType").and_then(Value::as_str).unwrap_or("image/png"),
                           "data": c.get("data").and_then(Value::as_str).unwrap_or("")}
            })),
            _ => {
                let text = content_as_text(std::slice::from_ref(c));
                if !text.is_empty() {
                    out.push(json!({"type": "text", "text": text}));
                }
            }
        }
    }
    out
}

/// The request body as a `Value` tree: the form the body was built in before
/// `request_bytes`, kept as the reference the tests compare the bytes with.
#[cfg(test)]
pub fn request_body(model: &str, max_tokens: u32, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    for m in &req.messages {
        let mut blocks = Vec::new();
        match m.role {
            Role::Assistant => {
                for p in &m.parts {
                    match p {
                        Part::Text(t) if !t.is_empty() => blocks.push(json!({"type": "text", "text": t})),
                        Part::ToolCall { id, name, arguments } => {
                            let input = if arguments.is_object() { arguments.clone() } else { json!({}) };
                            blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                        }
                        _ => {}
                    }
                }
            }
            Role::User => {
                for p in &m.parts {
                    if let Part::ToolResult { id, content, is_error } = p {
                        let mut b =
                            json!({"type": "tool_result", "tool_use_id": id, "content": result_blocks(content)});
                        if *is_error {
                            b["is_error"] = true.into();
                        }
                        blocks.push(b);
                    }
                }
                for p in &m.parts {
                    match p {
                        Part::Text(t) if !t.is_empty() => blocks.push(json!({"type": "text", "text": t})),
                        Part::Image { mime_type, data } => blocks.push(json!({
                            "type": "image",
                            "source": {"type": "base64", "media_type": mime_type, "data": data}
                        })),
                        _ => {}
                    }
                }
            }
        }
        if blocks.is_empty() {
            continue;
        }
        let role = if m.role == Role::User { "user" } else { "assistant" };
        messages.push(json!({"role": role, "content": blocks}));
    }
    let max_tokens = req.max_tokens.map_or(max_tokens, |m| m.min(max_tokens));
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": messages, "stream": true});
    if !req.system.is_empty() {
        body["system"] = req.system.clone().into();
    }
    if !req.tools.is_empty() {
        let tool = |t: &ToolSpec| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema});
        body["tools"] = req.tools.iter().map(tool).collect();
    }
    body
}

/// The request body as JSON bytes, written straight from the conversation (no `Value` tree
/// built and copied on every model call); the same bytes `serde_json::to_vec(&request_body(…))`
/// gave (a unit test compares them).
pub fn request_bytes(model: &str, max_tokens: u32, req: &ChatRequest) -> Result<Vec<u8>, Error> {
    let max_tokens = req.max_tokens.map_or(max_tokens, |m| m.min(max_tokens));
    serde_json::to_vec(&Body { model, max_tokens, req }).map_err(encode_error)
}

/// `request_bytes`, with the messages a recent request of this process began with taken from
/// their kept encodings (`kept::Messages`) instead of encoded again, and the session's tool list
/// too (`kept::Tools`), as `openai::request_bytes_reusing` does. The same bytes as
/// `request_bytes` (a unit test compares them).
pub fn request_bytes_reusing(model: &str, max_tokens: u32, req: &ChatRequest) -> Result<Vec<u8>, Error> {
    let max_tokens = req.max_tokens.map_or(max_tokens, |m| m.min(max_tokens));
    let entry = MESSAGES.encode(&req.messages, |m| {
        let blocks = blocks(m);
        if blocks.is_empty() {
            return Ok(Vec::new());
        }
        let role = if m.role == Role::User { "user" } else { "assistant" };
        serde_json::to_vec(&Message(role, &blocks)).map_err(encode_error)
    })?;
    let mut out = Vec::with_capacity(entry.size() + req.system.len() + 256);
    out.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut out, model).map_err(encode_error)?;
    out.extend_from_slice(format!(",\"max_tokens\":{max_tokens},\"messages\":[").as_bytes());
    for (i, bytes) in entry.parts().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(bytes);
    }
    MESSAGES.keep(entry);
    out.extend_from_slice(b"],\"stream\":true");
    if !req.system.is_empty() {
        out.extend_from_slice(b",\"system\":");
        serde_json::to_writer(&mut out, &req.system).map_err(encode_error)?;
    }
    if !req.tools.is_empty() {
        out.extend_from_slice(b",\"tools\":");
        let encode =
            |tools: &[ToolSpec]| serde_json::to_vec(&tools.iter().map(Tool).collect::<Vec<_>>()).map_err(encode_error);
        TOOLS.append(&req.tools, encode, &mut out)?;
    }
    out.push(b'}');
    Ok(out)
}

fn encode_error(e: serde_json::Error) -> Error {
    Error::Protocol(format!("cannot encode the request: {e}"))
}

/// This format's kept encodings of recent requests' messages and tool lists.
static MESSAGES: crate::kept::Messages = crate::kept::Messages::new();
static TOOLS: crate::kept::Tools = crate::kept::Tools::new();

/// The body, borrowed: `model`, `max_tokens`, `messages`, `stream`, then `system` and `tools`
/// when there are any (the order `request_body` inserts them).
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    req: &'a ChatRequest,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let messages: Vec<(&str, Vec<Block>)> = req
            .messages
            .iter()
            .map(|m| (if m.role == Role::User { "user" } else { "assistant" }, blocks(m)))
            .filter(|(_, b)| !b.is_empty())
            .collect();
        let messages: Vec<Message> = messages.iter().map(|(role, blocks)| Message(role, blocks)).collect();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("model", self.model)?;
        m.serialize_entry("max_tokens", &self.max_tokens)?;
        m.serialize_entry("messages", &messages)?;
        m.serialize_entry("stream", &true)?;
        if !req.system.is_empty() {
            m.serialize_entry("system", &req.system)?;
        }
        if !req.tools.is_empty() {
            let tools: Vec<Tool> = req.tools.iter().map(Tool).collect();
            m.serialize_entry("tools", &tools)?;
        }
        m.end()
    }
}

/// `{"role", "content": [blocks]}`.
struct Message<'a>(&'a str, &'a [Block<'a>]);

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", self.0)?;
        m.serialize_entry("content", self.1)?;
        m.end()
    }
}

/// `{"name", "description", "input_schema"}`.
struct Tool<'a>(&'a ToolSpec);

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("name", &self.0.name)?;
        m.serialize_entry("description", &self.0.description)?;
        m.serialize_entry("input_schema", &self.0.input_schema)?;
        m.end()
    }
}

/// A content block, borrowing from the conversation.
enum Block<'a> {
    Text(&'a str),
    /// A text made from MCP content (`content_as_text`).
    Owned(String),
    /// id, name, input (anything but an object is sent as `{}`).
    ToolUse(&'a str, &'a str, &'a Value),
    /// id, MCP content, is_error.
    ToolResult(&'a str, &'a [Value], bool),
    /// media type, base64 data.
    Image(&'a str, &'a str),
}

/// A message's blocks in the order `request_body` builds them: an assistant's texts and tool
/// uses; a user's tool results first, then texts and images.
fn blocks(m: &ChatMessage) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    match m.role {
        Role::Assistant => {
            for p in &m.parts {
                match p {
                    Part::Text(t) if !t.is_empty() => blocks.push(Block::Text(t)),
                    Part::ToolCall { id, name, arguments } => blocks.push(Block::ToolUse(id, name, arguments)),
                    _ => {}
                }
            }
        }
        Role::User => {
            for p in &m.parts {
                if let Part::ToolResult { id, content, is_error } = p {
                    blocks.push(Block::ToolResult(id, content, *is_error));
                }
            }
            for p in &m.parts {
                match p {
                    Part::Text(t) if !t.is_empty() => blocks.push(Block::Text(t)),
                    Part::Image { mime_type, data } => blocks.push(Block::Image(mime_type, data)),
                    _ => {}
                }
            }
        }
    }
    blocks
}

/// MCP content blocks as Anthropic `tool_result` content (as `result_blocks`).
fn result_content(content: &[Value]) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    for c in content {
        match c.get("type").and_then(Value::as_str) {
            Some("image") => out.push(Block::Image(
                c.get("mimeType").and_then(Value::as_str).unwrap_or("image/png"),
                c.get("data").and_then(Value::as_str).unwrap_or(""),
            )),
            _ => {
                let text = content_as_text(std::slice::from_ref(c));
                if !text.is_empty() {
                    out.push(Block::Owned(text));
                }
            }
        }
    }
    out
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Block::Text(t) => TextBlock(t).serialize(s),
            Block::Owned(t) => TextBlock(t).serialize(s),
            Block::ToolUse(id, name, input) => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("type", "tool_use")?;
                m.serialize_entry("id", id)?;
                m.serialize_entry("name", name)?;
                if input.is_object() {
                    m.serialize_entry("input", input)?;
                } else {
                    m.serialize_entry("input", &EmptyObject)?;
                }
                m.end()
            }
            Block::ToolResult(id, content, is_error) => {
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("type", "tool_result")?;
                m.serialize_entry("tool_use_id", id)?;
                m.serialize_entry("content", &result_content(content))?;
                if *is_error {
                    m.serialize_entry("is_error", &true)?;
                }
                m.end()
            }
            Block::Image(mime, data) => {
                struct Source<'a>(&'a str, &'a str);
                impl Serialize for Source<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut m = s.serialize_map(Some(3))?;
                        m.serialize_entry("type", "base64")?;
                        m.serialize_entry("media_type", self.0)?;
                        m.serialize_entry("data", self.1)?;
                        m.end()
                    }
                }
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "image")?;
                m.serialize_entry("source", &Source(mime, data))?;
                m.end()
            }
        }
    }
}

/// `{}`.
struct EmptyObject;

impl Serialize for EmptyObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))?.end()
    }
}

struct StreamBlock {
    index: u64,
    id: String,
    name: String,
    json: String,
    /// `input` given in full at content_block_start (used when no delta follows).
    initial: Option<Value>,
}

/// One request and its stream.
pub(super) fn attempt(call: &Call, sink: &mut Sink) -> Result<Completion, Error> {
    let s = call.settings;
    let mut out = Completion::default();
    let mut tools: Vec<StreamBlock> = Vec::new();
    let mut usage: Option<Usage> = None;
    let mut handle = |ev: &gosling_wire::sse::Event| -> Result<Flow, Error> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let v = parse_chunk(&s.provider, data)?;
        let kind = if ev.event.is_empty() {
            v.get("type").and_then(Value::as_str).unwrap_or("").to_string()
        } else {
            ev.event.clone()
        };
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    usage = Some(Usage {
                        input_tokens: n("input_tokens")
                            + n("cache_creation_input_tokens")
                            + n("cache_read_input_tokens"),
                        output_tokens: n("output_tokens"),
                    });
                }
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let b = v.get("content_block").cloned().unwrap_or(Value::Null);
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_use") | Some("server_tool_use") => tools.push(StreamBlock {
                        index,
                        id: b.get("id").and_then(Value::as_str).unwrap_or("").to_string(),
                        name: b.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                        json: String::new(),
                        initial: b.get("input").filter(|i| i.as_object().is_some_and(|o| !o.is_empty())).cloned(),
                    }),
                    Some("text") => {
                        sink.text(&mut out, b.get("text").and_then(Value::as_str).unwrap_or(""))?;
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let d = v.get("delta").cloned().unwrap_or(Value::Null);
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        sink.text(&mut out, d.get("text").and_then(Value::as_str).unwrap_or(""))?;
                    }
                    Some("input_json_delta") => {
                        let frag = d.get("partial_json").and_then(Value::as_str).unwrap_or("");
                        match tools.iter_mut().rev().find(|b| b.index == index) {
                            Some(b) => b.json.push_str(frag),
                            None => {
                                return Err(Error::Protocol(format!(
                                    "input_json_delta for content block {index}, which is not a tool_use block: {}",
                                    clip(data, 200)
                                )))
                            }
                        }
                    }
                    // thinking_delta, signature_delta, citations: not used.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.stop_reason = Some(r.to_string());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    let u = usage.get_or_insert_with(Usage::default);
                    u.output_tokens = n;
                    if let Some(i) = v.pointer("/usage/input_tokens").and_then(Value::as_u64) {
                        if i > 0 {
                            u.input_tokens = i;
                        }
                    }
                }
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                let kind = v.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
                let msg = v.pointer("/error/message").and_then(Value::as_str).unwrap_or("");
                return Err(Error::Remote(clip(&format!("{kind}: {msg}"), 300)));
            }
            // ping, content_block_stop, unknown future events.
            _ => {}
        }
        Ok(Flow::Continue)
    };
    call.exchange(&mut handle, &|| false)?;
    out.usage = usage;
    out.tool_calls = tools
        .into_iter()
        .map(|b| ToolCallOut {
            id: if b.id.is_empty() { format!("toolu_{}", b.index) } else { b.id },
            name: b.name,
            arguments: match (b.json.trim().is_empty(), b.initial) {
                (true, Some(v)) => Ok(v),
                _ => parse_arguments(&b.json),
            },
        })
        .collect();
    log::debug!("llm: anthropic finished ({:?}, {} tool calls)", out.stop_reason, out.tool_calls.len());
    Ok(out)
}
