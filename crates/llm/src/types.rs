//! The neutral conversation types a provider takes and returns, and the `Provider` trait. The
//! turn loop (agent/) converts goose messages to and from these.

use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// A tool call the assistant made earlier in the conversation.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// The result of a tool call, sent back in a user message. `content` holds MCP content
    /// blocks (`{"type":"text","text":…}`, `{"type":"image","data":…,"mimeType":…}`, …).
    ToolResult {
        id: String,
        content: Vec<serde_json::Value>,
        is_error: bool,
    },
    /// An image the person sent (base64 `data`), in a user message; sent only to providers
    /// that take images (`catalog::Provider::images`).
    Image {
        mime_type: String,
        data: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object (MCP's `inputSchema`).
    pub input_schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Empty: no tools are offered. Shared: a session's list is made once while its tools
    /// stay the same, not copied into every request.
    pub tools: std::sync::Arc<Vec<ToolSpec>>,
    /// A cap on the answer's tokens from the caller (an extension's sampling request):
    /// OpenAI-style providers get `max_tokens`; Anthropic's required one is lowered to it.
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOut {
    pub id: String,
    pub name: String,
    /// `Err` holds the raw text the model produced when it was not valid JSON, so the loop can
    /// send it back to the model as a tool error. Empty arguments become `Ok({})`.
    pub arguments: Result<serde_json::Value, BadArguments>,
}

/// Tool-call arguments the model wrote that are not JSON: the raw text, to show the model.
/// Part of what the model said, not an error of this layer (that is `Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadArguments {
    pub raw: String,
}

impl std::fmt::Display for BadArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the arguments are not valid JSON: {}", self.raw)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// All streamed text, concatenated.
    pub text: String,
    /// In the order the model started them.
    pub tool_calls: Vec<ToolCallOut>,
    /// None when the server sent no usage.
    pub usage: Option<Usage>,
    /// The provider's own words: OpenAI `stop`/`tool_calls`/`length`, Anthropic
    /// `end_turn`/`tool_use`/`max_tokens`.
    pub stop_reason: Option<String>,
}

/// A piece of the completion, handed to the caller as soon as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    Text(&'a str),
}

/// The caller's "stop now" (a turn cancelled, a title past its deadline), asked while the
/// provider waits. Cheap to clone, and owned (`'static`): the model's connection asks it from
/// inside ureq's read, on the caller's thread (`stream::Watch`).
#[derive(Clone)]
pub struct Cancel(std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl Cancel {
    /// Stops when `f` says so.
    pub fn new(f: impl Fn() -> bool + Send + Sync + 'static) -> Cancel {
        Cancel(std::sync::Arc::new(f))
    }

    /// Never stops.
    pub fn never() -> Cancel {
        Cancel::new(|| false)
    }

    pub fn is_set(&self) -> bool {
        (self.0)()
    }
}

pub trait Provider: Send + Sync {
    /// "openai", "ollama" or "anthropic" (the canonical name, after aliases).
    fn name(&self) -> &str;
    /// Streams one completion. `on_delta` returns false to abort (the client went away): the
    /// HTTP stream is dropped and `Error::Cancelled` returned. Text already passed to `on_delta`
    /// stays delivered even when an error follows.
    fn complete(&self, req: &ChatRequest, on_delta: &mut dyn FnMut(Delta) -> bool) -> Result<Completion, Error> {
        self.complete_cancellable(req, on_delta, &Cancel::never())
    }

    /// As `complete`, and `cancelled` is asked about every 100 ms while the provider is silent
    /// (waiting for the headers, between chunks, during a retry's wait): when it says stop the
    /// call returns `Error::Cancelled` at once. Use it to stop within a second of a client
    /// hanging up even when the model sends nothing for a while. Not asked while a connection
    /// is being made (a host that does not answer): that ends at the connect timeout.
    fn complete_cancellable(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(Delta) -> bool,
        cancelled: &Cancel,
    ) -> Result<Completion, Error>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{anthropic, openai};

    /// A conversation with every kind of part: the system text, texts split in parts, tool
    /// calls (object and non-object arguments), tool results (text, image, resource, JSON,
    /// an error, an empty one), the person's images, an empty assistant message, tools and a
    /// token cap, with characters JSON escapes.
    fn every_kind_of_part(tools: bool, max_tokens: Option<u32>, system: &str) -> ChatRequest {
        use serde_json::json;
        let text = |t: &str| Part::Text(t.to_string());
        ChatRequest {
            system: system.to_string(),
            messages: vec![
                ChatMessage { role: Role::User, parts: vec![text("list \"files\"\n\u{1}é"), text("and more")] },
                ChatMessage { role: Role::Assistant, parts: vec![] },
                ChatMessage {
                    role: Role::Assistant,
                    parts: vec![
                        text("I'll look."),
                        text(""),
                        text(" Twice."),
                        Part::ToolCall {
                            id: "c1".into(),
                            name: "ls".into(),
                            arguments: json!({"path": "/tmp", "n": [1, 2.5, null, true]}),
                        },
                        Part::ToolCall { id: "c2".into(), name: "odd".into(), arguments: json!("not an object") },
                    ],
                },
                ChatMessage {
                    role: Role::User,
                    parts: vec![
                        Part::ToolResult {
                            id: "c1".into(),
                            content: vec![
                                json!({"type": "text", "text": "a\tb"}),
                                json!({"type": "image", "data": "AAAA", "mimeType": "image/jpeg"}),
                                json!({"type": "image", "data": "BBBB"}),
                                json!({"type": "resource", "resource": {"uri": "file:///x", "text": "inside"}}),
                                json!({"type": "audio", "data": "zz"}),
                                json!({"type": "text", "text": ""}),
                            ],
                            is_error: false,
                        },
                        Part::ToolResult {
                            id: "c2".into(),
                            content: vec![json!({"type": "text", "text": "no such tool"})],
                            is_error: true,
                        },
                        Part::ToolResult {
                            id: "c3".into(),
                            content: vec![json!({"type": "text", "text": "Error: already said"})],
                            is_error: true,
                        },
                        Part::ToolResult { id: "c4".into(), content: vec![], is_error: false },
                    ],
                },
                ChatMessage {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall { id: "c5".into(), name: "shot".into(), arguments: json!({}) }],
                },
                ChatMessage {
                    role: Role::User,
                    parts: vec![
                        Part::ToolResult {
                            id: "c5".into(),
                            content: vec![json!({"type": "image", "data": "CCCC", "mimeType": "image/png"})],
                            is_error: false,
                        },
                        text("and this one?"),
                        text("second line"),
                    ],
                },
                ChatMessage {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall { id: "c6".into(), name: "shot".into(), arguments: json!({}) }],
                },
                ChatMessage {
                    role: Role::User,
                    parts: vec![Part::ToolResult {
                        id: "c6".into(),
                        content: vec![json!({"type": "image", "data": "DDDD", "mimeType": "image/gif"})],
                        is_error: false,
                    }],
                },
                ChatMessage {
                    role: Role::User,
                    parts: vec![
                        text("what is this?"),
                        Part::Image { mime_type: "image/png".into(), data: "iVBORw0=".into() },
                        Part::ToolResult {
                            id: "c7".into(),
                            content: vec![json!({"type": "image", "data": "EEEE"})],
                            is_error: false,
                        },
                        text("and that"),
                        Part::Image { mime_type: "image/webp".into(), data: "UklG".into() },
                    ],
                },
                ChatMessage { role: Role::User, parts: vec![text("")] },
                ChatMessage { role: Role::Assistant, parts: vec![text("Done \u{2028} — ok")] },
            ],
            tools: if tools {
                vec![
                    ToolSpec {
                        name: "ls".into(),
                        description: "Lists \"files\".".into(),
                        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
                    },
                    ToolSpec {
                        name: "shot".into(),
                        description: String::new(),
                        input_schema: json!({"type": "object"}),
                    },
                ]
                .into()
            } else {
                Default::default()
            },
            max_tokens,
        }
    }

    /// The bodies written straight to bytes are the bytes the `Value` tree gave, for both
    /// wire formats, with and without tools, a cap and a system text.
    #[test]
    fn the_bodies_written_as_bytes_are_the_trees_bytes() {
        for (tools, max, system) in [(true, Some(64), "Be brief."), (false, None, ""), (true, Some(100_000), "")] {
            let req = every_kind_of_part(tools, max, system);
            let tree = serde_json::to_vec(&openai::request_body("gpt-x", &req)).unwrap();
            let bytes = openai::request_bytes("gpt-x", &req).unwrap();
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(tree).unwrap(),
                "openai, tools {tools}, max {max:?}"
            );
            let tree = serde_json::to_vec(&anthropic::request_body("claude-x", 4096, &req)).unwrap();
            let bytes = anthropic::request_bytes("claude-x", 4096, &req).unwrap();
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(tree).unwrap(),
                "anthropic, tools {tools}, max {max:?}"
            );
        }
        // Every part reached the body: the texts, the calls, the results and the images.
        let body =
            String::from_utf8(openai::request_bytes("m", &every_kind_of_part(true, None, "s")).unwrap()).unwrap();
        for needle in [
            "I'll look. Twice.",
            "\"tool_calls\"",
            "Error: no such tool",
            "data:image/gif;base64,DDDD",
            "data:image/webp;base64,UklG",
            "and this one?\\nsecond line",
        ] {
            assert!(body.contains(needle), "{needle} missing from {body}");
        }
    }

    /// The person's image goes to OpenAI as an `image_url` data URL after the text, to
    /// Anthropic as a base64 image block.
    #[test]
    fn a_persons_image_is_sent_in_each_providers_form() {
        let req = ChatRequest {
            system: String::new(),
            messages: vec![ChatMessage {
                role: Role::User,
                parts: vec![
                    Part::Text("what is this?".into()),
                    Part::Image { mime_type: "image/png".into(), data: "iVBORw0=".into() },
                ],
            }],
            tools: Default::default(),
            max_tokens: None,
        };
        let o = openai::request_body("m", &req);
        assert_eq!(
            o["messages"][0],
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0="}}]})
        );
        let a = anthropic::request_body("m", 100, &req);
        assert_eq!(
            a["messages"][0]["content"][1],
            serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="}})
        );
    }

    /// The body built from the encodings of recent requests is the body built whole, in both
    /// wire formats: for a conversation that grows a message at a time, one edited in its
    /// middle, one cut short, two conversations taking turns, with and without a system text,
    /// tools and a cap.
    #[test]
    fn a_body_reusing_earlier_encodings_is_the_body_encoded_whole() {
        let full = every_kind_of_part(true, Some(64), "Be brief.");
        let same = |req: &ChatRequest| {
            let whole = String::from_utf8(openai::request_bytes("gpt-x", req).unwrap()).unwrap();
            let reused = String::from_utf8(openai::request_bytes_reusing("gpt-x", req).unwrap()).unwrap();
            assert_eq!(reused, whole, "OpenAI, {} messages", req.messages.len());
            let whole = String::from_utf8(anthropic::request_bytes("claude-x", 4096, req).unwrap()).unwrap();
            let reused = String::from_utf8(anthropic::request_bytes_reusing("claude-x", 4096, req).unwrap()).unwrap();
            assert_eq!(reused, whole, "Anthropic, {} messages", req.messages.len());
            let parsed: serde_json::Value = serde_json::from_str(&reused).expect("JSON");
            assert_eq!(parsed, anthropic::request_body("claude-x", 4096, req), "the body request_body builds");
        };
        for n in 0..=full.messages.len() {
            let mut req = full.clone();
            req.messages.truncate(n);
            same(&req);
            // The other conversation between two of this one's calls.
            let mut other = every_kind_of_part(false, None, "");
            other.messages.rotate_left(1);
            other.messages.truncate(n);
            same(&other);
        }
        // A message edited in the middle is encoded again, the ones after it too.
        let mut edited = full.clone();
        edited.messages[1].parts.push(Part::Text("an edit".into()));
        same(&edited);
        // Back to the first, then cut short.
        same(&full);
        let mut cut = full.clone();
        cut.messages.truncate(2);
        same(&cut);
        same(&full);
        // Another tool list (a session whose tools changed) is encoded as itself, never taken
        // for the earlier one; the earlier one's encoding still serves it.
        let mut fewer = full.clone();
        fewer.tools = std::sync::Arc::new(full.tools[..1].to_vec());
        same(&fewer);
        same(&full);
        same(&fewer);
    }
}
