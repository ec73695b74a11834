//! OpenAI-compatible chat completions, streamed: OpenAI itself, Ollama (`/v1`), llama.cpp's
//! server, vLLM, LM Studio.
//!
//! Request: `model`, `messages` (system first, tool results as `role: tool` messages right
//! after the assistant message that called them), `tools` as functions, `stream: true` with
//! `stream_options.include_usage`. Response: `data:` chunks of `chat.completion.chunk` until
//! `[DONE]`; text in `choices[0].delta.content`, tool calls in `delta.tool_calls[]`
//! accumulated by `index` (arguments arrive as string fragments split anywhere), usage in a
//! final chunk with empty `choices`. No `Authorization` header without a key.

use serde::ser::{Serialize, SerializeMap, Serializer};
#[cfg(test)]
use serde_json::json;
use serde_json::Value;

use crate::body::{Join, JsonText, TextBlock};

use crate::error::Error;
use crate::settings::Settings;
use crate::stream::{Call, Flow, Sink};
use crate::text::{clip, content_as_text, parse_arguments, parse_chunk};
use crate::types::{ChatMessage, ChatRequest, Completion, Part, Role, ToolCallOut, ToolSpec, Usage};

/// The request's headers: the key as a bearer token, when there is one.
pub(super) fn headers(s: &Settings) -> Vec<(&'static str, String)> {
    s.api_key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect()
}

/// The texts of a message's parts.
fn texts(parts: &[Part]) -> Vec<&str> {
    parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect()
}

/// The request body as a `Value` tree: the form the body was built in before
/// `request_bytes`, kept as the reference the tests compare the bytes with.
#[cfg(test)]
pub fn request_body(model: &str, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        match m.role {
            Role::Assistant => {
                let text = texts(&m.parts);
                let calls: Vec<Value> = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall { id, name, arguments } => Some(json!({
                            "id": id, "type": "function",
                            "function": {"name": name, "arguments": arguments.to_string()}
                        })),
                        _ => None,
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    // OpenAI rejects an assistant message with neither content nor tool calls.
                    continue;
                }
                let content = if text.is_empty() { Value::Null } else { Value::String(text.concat()) };
                let mut msg = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
            Role::User => {
                // Tool results first: they must follow the assistant's tool_calls directly.
                let mut images = Vec::new();
                for p in &m.parts {
                    if let Part::ToolResult { id, content, is_error } = p {
                        let mut text = content_as_text(content);
                        if *is_error && !text.starts_with("Error") {
                            text = format!("Error: {text}");
                        }
                        messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                        for c in content {
                            if c.get("type").and_then(Value::as_str) == Some("image") {
                                let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("image/png");
                                let data = c.get("data").and_then(Value::as_str).unwrap_or("");
                                images.push(json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}));
                            }
                        }
                    }
                }
                let text = texts(&m.parts);
                // The person's own images: one user message with its text and the images.
                let own: Vec<Value> = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Image { mime_type, data } => Some(
                            json!({"type": "image_url", "image_url": {"url": format!("data:{mime_type};base64,{data}")}}),
                        ),
                        _ => None,
                    })
                    .collect();
                if !own.is_empty() {
                    let mut content: Vec<Value> = text.iter().map(|t| json!({"type": "text", "text": t})).collect();
                    content.extend(own);
                    content.extend(images);
                    messages.push(json!({"role": "user", "content": content}));
                } else if !images.is_empty() {
                    // Tool messages take only text; images follow as a user message.
                    let mut content = vec![
                        json!({"type": "text", "text": if text.is_empty() { "Images from the tool results above.".to_string() } else { text.join("\n") }}),
                    ];
                    content.extend(images);
                    messages.push(json!({"role": "user", "content": content}));
                } else if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text.join("\n")}));
                }
            }
        }
    }
    let mut body =
        json!({"model": model, "messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    if !req.tools.is_empty() {
        let function =
            |t: &ToolSpec| json!({"name": t.name, "description": t.description, "parameters": t.input_schema});
        body["tools"] = req.tools.iter().map(|t| json!({"type": "function", "function": function(t)})).collect();
    }
    if let Some(max) = req.max_tokens {
        body["max_tokens"] = max.into();
    }
    body
}

/// The request body as JSON bytes, written straight from the conversation (no `Value` tree
/// built and copied on every model call); the same bytes `serde_json::to_vec(&request_body(…))`
/// gave (a unit test compares them).
pub fn request_bytes(model: &str, req: &ChatRequest) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(&Body { model, req }).map_err(encode_error)
}

fn encode_error(e: serde_json::Error) -> Error {
    Error::Protocol(format!("cannot encode the request: {e}"))
}

/// `request_bytes`, with the messages a recent request of this process began with taken from
/// their kept encodings (`kept::Messages`) instead of encoded again, and the session's tool list
/// too (`kept::Tools`). The same bytes as `request_bytes` (a unit test compares them); a message
/// is reused only when it is equal, part for part, to the one encoded.
pub fn request_bytes_reusing(model: &str, req: &ChatRequest) -> Result<Vec<u8>, Error> {
    let entry = MESSAGES.encode(&req.messages, |m| {
        let mut msgs = Vec::new();
        message(m, &mut msgs);
        let mut bytes = Vec::new();
        for (i, msg) in msgs.iter().enumerate() {
            if i > 0 {
                bytes.push(b',');
            }
            serde_json::to_writer(&mut bytes, msg).map_err(encode_error)?;
        }
        Ok(bytes)
    })?;
    let mut out = Vec::with_capacity(entry.size() + req.system.len() + 256);
    out.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut out, model).map_err(encode_error)?;
    out.extend_from_slice(b",\"messages\":[");
    let mut first = true;
    if !req.system.is_empty() {
        serde_json::to_writer(&mut out, &Msg::System(&req.system)).map_err(encode_error)?;
        first = false;
    }
    for bytes in entry.parts() {
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(bytes);
        first = false;
    }
    MESSAGES.keep(entry);
    out.extend_from_slice(b"],\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    if !req.tools.is_empty() {
        out.extend_from_slice(b",\"tools\":");
        let encode =
            |tools: &[ToolSpec]| serde_json::to_vec(&tools.iter().map(Tool).collect::<Vec<_>>()).map_err(encode_error);
        TOOLS.append(&req.tools, encode, &mut out)?;
    }
    if let Some(max) = req.max_tokens {
        out.extend_from_slice(format!(",\"max_tokens\":{max}").as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// This format's kept encodings of recent requests' messages and tool lists.
static MESSAGES: crate::kept::Messages = crate::kept::Messages::new();
static TOOLS: crate::kept::Tools = crate::kept::Tools::new();

/// The body, borrowed: `model`, `messages`, `stream`, `stream_options`, then `tools` and
/// `max_tokens` when there are any (the order `request_body` inserts them).
struct Body<'a> {
    model: &'a str,
    req: &'a ChatRequest,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("model", self.model)?;
        m.serialize_entry("messages", &messages(req))?;
        m.serialize_entry("stream", &true)?;
        m.serialize_entry("stream_options", &IncludeUsage)?;
        if !req.tools.is_empty() {
            let tools: Vec<Tool> = req.tools.iter().map(Tool).collect();
            m.serialize_entry("tools", &tools)?;
        }
        if let Some(max) = req.max_tokens {
            m.serialize_entry("max_tokens", &max)?;
        }
        m.end()
    }
}

/// `{"include_usage": true}`.
struct IncludeUsage;

impl Serialize for IncludeUsage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("include_usage", &true)?;
        m.end()
    }
}

/// `{"type": "function", "function": {"name", "description", "parameters"}}`.
struct Tool<'a>(&'a ToolSpec);

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolSpec);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("name", &self.0.name)?;
                m.serialize_entry("description", &self.0.description)?;
                m.serialize_entry("parameters", &self.0.input_schema)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.0))?;
        m.end()
    }
}

/// One message of the body, borrowing from the conversation.
enum Msg<'a> {
    System(&'a str),
    /// The texts (concatenated), the tool calls (id, name, arguments).
    Assistant(Vec<&'a str>, Vec<(&'a str, &'a str, &'a Value)>),
    Tool(&'a str, String),
    /// A user message with content parts (texts and images).
    Parts(Vec<Item<'a>>),
    /// A user message of texts joined by newlines.
    Text(Vec<&'a str>),
}

/// A user message's content part.
enum Item<'a> {
    Text(&'a str),
    Joined(Vec<&'a str>),
    /// `data:{mime};base64,{data}`.
    Image(&'a str, &'a str),
}

/// The messages in the order `request_body` builds them.
fn messages(req: &ChatRequest) -> Vec<Msg<'_>> {
    let mut out = Vec::new();
    if !req.system.is_empty() {
        out.push(Msg::System(&req.system));
    }
    for m in &req.messages {
        message(m, &mut out);
    }
    out
}

/// The body's messages for one conversation message (none, one, or a tool message per result
/// and a user message): each depends on its own message only.
fn message<'a>(m: &'a ChatMessage, out: &mut Vec<Msg<'a>>) {
    match m.role {
        Role::Assistant => {
            let text = texts(&m.parts);
            let calls: Vec<_> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, arguments } => Some((id.as_str(), name.as_str(), arguments)),
                    _ => None,
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                // OpenAI rejects an assistant message with neither content nor tool calls.
                return;
            }
            out.push(Msg::Assistant(text, calls));
        }
        Role::User => {
            // Tool results first: they must follow the assistant's tool_calls directly.
            let mut images = Vec::new();
            for p in &m.parts {
                if let Part::ToolResult { id, content, is_error } = p {
                    let mut text = content_as_text(content);
                    if *is_error && !text.starts_with("Error") {
                        text = format!("Error: {text}");
                    }
                    out.push(Msg::Tool(id, text));
                    for c in content {
                        if c.get("type").and_then(Value::as_str) == Some("image") {
                            let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("image/png");
                            let data = c.get("data").and_then(Value::as_str).unwrap_or("");
                            images.push(Item::Image(mime, data));
                        }
                    }
                }
            }
            let text = texts(&m.parts);
            // The person's own images: one user message with its text and the images.
            let own: Vec<Item> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Image { mime_type, data } => Some(Item::Image(mime_type, data)),
                    _ => None,
                })
                .collect();
            if !own.is_empty() {
                let mut content: Vec<Item> = text.iter().map(|t| Item::Text(t)).collect();
                content.extend(own);
                content.extend(images);
                out.push(Msg::Parts(content));
            } else if !images.is_empty() {
                // Tool messages take only text; images follow as a user message.
                let first = if text.is_empty() {
                    Item::Text("Images from the tool results above.")
                } else {
                    Item::Joined(text)
                };
                let mut content = vec![first];
                content.extend(images);
                out.push(Msg::Parts(content));
            } else if !text.is_empty() {
                out.push(Msg::Text(text));
            }
        }
    }
}

impl Serialize for Msg<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            Msg::System(t) => {
                m.serialize_entry("role", "system")?;
                m.serialize_entry("content", t)?;
            }
            Msg::Assistant(text, calls) => {
                m.serialize_entry("role", "assistant")?;
                if text.is_empty() {
                    m.serialize_entry("content", &())?;
                } else {
                    m.serialize_entry("content", &Join(text, ""))?;
                }
                if !calls.is_empty() {
                    let calls: Vec<CallOut> =
                        calls.iter().map(|&(id, name, arguments)| CallOut { id, name, arguments }).collect();
                    m.serialize_entry("tool_calls", &calls)?;
                }
            }
            Msg::Tool(id, text) => {
                m.serialize_entry("role", "tool")?;
                m.serialize_entry("tool_call_id", id)?;
                m.serialize_entry("content", text)?;
            }
            Msg::Parts(items) => {
                m.serialize_entry("role", "user")?;
                m.serialize_entry("content", items)?;
            }
            Msg::Text(text) => {
                m.serialize_entry("role", "user")?;
                m.serialize_entry("content", &Join(text, "\n"))?;
            }
        }
        m.end()
    }
}

/// `{"id", "type": "function", "function": {"name", "arguments": <the JSON as a string>}}`.
struct CallOut<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a Value,
}

impl Serialize for CallOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a str, &'a Value);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("name", self.0)?;
                m.serialize_entry("arguments", &JsonText(self.1))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", self.id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.name, self.arguments))?;
        m.end()
    }
}

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Item::Text(t) => TextBlock(t).serialize(s),
            Item::Joined(t) => TextBlock(Join(t, "\n")).serialize(s),
            Item::Image(mime, data) => {
                struct Url<'a>(&'a str, &'a str);
                impl Serialize for Url<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut m = s.serialize_map(Some(1))?;
                        m.serialize_entry("url", &format_args!("data:{};base64,{}", self.0, self.1))?;
                        m.end()
                    }
                }
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "image_url")?;
                m.serialize_entry("image_url", &Url(mime, data))?;
                m.end()
            }
        }
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    args: String,
}

/// One request and its stream.
pub(super) fn attempt(call: &Call, sink: &mut Sink) -> Result<Completion, Error> {
    let s = call.settings;
    let mut out = Completion::default();
    // Indexed by the chunk's `index`, kept in first-seen order.
    let mut calls: Vec<(u64, PartialCall)> = Vec::new();
    // A finish_reason makes an end without `[DONE]` acceptable (some servers omit it).
    let finished = std::cell::Cell::new(false);
    let mut handle = |ev: &gosling_wire::sse::Event| -> Result<Flow, Error> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let v = parse_chunk(&s.provider, data)?;
        if let Some(e) = v.get("error") {
            let msg = e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string());
            return Err(Error::Remote(clip(&msg, 300)));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.usage = Some(Usage {
                input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                output_tokens: u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
            });
        }
        let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(Flow::Continue);
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                sink.text(&mut out, t)?;
            }
            if let Some(tcs) = delta.get("tool_calls").and_then(Value::as_array) {
                for (pos, tc) in tcs.iter().enumerate() {
                    let index = tc.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                    let i = calls.iter().position(|(ix, _)| *ix == index).unwrap_or_else(|| {
                        calls.push((index, PartialCall::default()));
                        calls.len() - 1
                    });
                    let c = &mut calls[i].1;
                    if let Some(id) = tc.get("id").and_then(Value::as_str).filter(|x| !x.is_empty()) {
                        c.id = id.to_string();
                    }
                    if let Some(f) = tc.get("function") {
                        if let Some(n) = f.get("name").and_then(Value::as_str).filter(|x| !x.is_empty()) {
                            if c.name.is_empty() {
                                c.name = n.to_string();
                            }
                        }
                        match f.get("arguments") {
                            Some(Value::String(a)) => c.args.push_str(a),
                            // Some servers send the arguments as an object.
                            Some(a @ Value::Object(_)) => c.args.push_str(&a.to_string()),
                            _ => {}
                        }
                    }
                }
            }
        }
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            out.stop_reason = Some(r.to_string());
            finished.set(true);
        }
        Ok(Flow::Continue)
    };
    call.exchange(&mut handle, &|| finished.get())?;
    out.tool_calls = calls
        .into_iter()
        .map(|(index, c)| ToolCallOut {
            id: if c.id.is_empty() { format!("call_{index}") } else { c.id },
            name: c.name,
            arguments: parse_arguments(&c.args),
        })
        .collect();
    log::debug!("llm: {} finished ({:?}, {} tool calls)", s.provider, out.stop_reason, out.tool_calls.len());
    Ok(out)
}
