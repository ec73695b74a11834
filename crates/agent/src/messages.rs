//! goose's `Message` / `MessageContent` / `MessageEvent` JSON, and the conversion between a
//! goose conversation and the provider-neutral `llm` messages.

use gosling_llm::{ChatMessage, Part, Role};
use serde_json::{json, Value};

/// Metadata key of an assistant message saved as far as it got when its answer stopped short
/// (Stop, a model error mid-stream); the web page shows it as "stopped".
pub const STOPPED: &str = "goslingStopped";
/// Metadata key of the message keeping a failed turn's error (as the `Error` event said it).
pub const ERROR: &str = "goslingError";

pub fn metadata() -> Value {
    json!({ "userVisible": true, "agentVisible": true })
}

/// A fresh message id.
pub fn new_id() -> String {
    format!("msg_{}", gosling_util::random_hex(8))
}

pub fn message(id: &str, role: &str, content: Vec<Value>) -> Value {
    json!({ "id": id, "role": role, "created": gosling_util::unix_secs(), "content": content, "metadata": metadata() })
}

pub fn text(t: &str) -> Value {
    json!({ "type": "text", "text": t })
}

pub fn tool_request(id: &str, name: &str, arguments: &Result<Value, gosling_llm::BadArguments>) -> Value {
    let call = match arguments {
        Ok(args) => json!({ "status": "success", "value": { "name": name, "arguments": args } }),
        Err(bad) => {
            json!({ "status": "error", "error": format!("-32602: invalid JSON arguments for {name}: {}", bad.raw) })
        }
    };
    json!({ "type": "toolRequest", "id": id, "toolCall": call })
}

pub fn frontend_tool_request(id: &str, name: &str, arguments: &Value) -> Value {
    json!({ "type": "frontendToolRequest", "id": id, "toolCall": { "status": "success", "value": { "name": name, "arguments": arguments } } })
}

/// A tool response: an MCP CallToolResult on success, goose's `{status:"error"}` otherwise.
pub fn tool_response(id: &str, result: Result<&Value, &str>) -> Value {
    let r = match result {
        Ok(v) => json!({ "status": "success", "value": v }),
        Err(e) => json!({ "status": "error", "error": e }),
    };
    json!({ "type": "toolResponse", "id": id, "toolResult": r })
}

pub fn tool_confirmation(id: &str, tool: &str, arguments: &Value) -> Value {
    json!({
        "type": "actionRequired",
        "data": { "actionType": "toolConfirmation", "id": id, "toolName": tool, "arguments": arguments,
                  "prompt": format!("Allow {tool} to run with these arguments?") }
    })
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

/// goose's CallToolResponse from an MCP CallToolResult (`isError` defaults to false).
pub fn call_tool_response(mut result: Value) -> Value {
    let mut take = |key: &str| result.get_mut(key).map(Value::take).filter(|v| !v.is_null());
    let content = take("content").unwrap_or_else(|| json!([]));
    let is_error = take("isError").and_then(|v| v.as_bool()).unwrap_or(false);
    let mut out = json!({ "content": content, "isError": is_error });
    if let Some(s) = take("structuredContent") {
        out["structuredContent"] = s;
    }
    if let Some(m) = take("_meta") {
        out["_meta"] = m;
    }
    out
}

/// A tool result as goose stores it: a CallToolResult, or (older sessions) a bare array; its
/// content and whether it is an error.
pub fn result_content(v: &Value) -> (Vec<Value>, bool) {
    match v {
        Value::Array(a) => (a.clone(), false),
        _ => (
            v.get("content").and_then(Value::as_array).cloned().unwrap_or_default(),
            v.get("isError").and_then(Value::as_bool).unwrap_or(false),
        ),
    }
}

/// The conversation as the model sees it: agent-visible messages, text and tool traffic.
pub fn to_llm(conversation: &[Value]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for m in conversation {
        if m.pointer("/metadata/agentVisible").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let role = match m.get("role").and_then(Value::as_str) {
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        };
        let mut parts = Vec::new();
        for c in m.get("content").and_then(Value::as_array).into_iter().flatten() {
            match c.get("type").and_then(Value::as_str) {
                Some("text") => parts.push(Part::Text(c.get("text").and_then(Value::as_str).unwrap_or("").to_string())),
                Some("toolRequest") | Some("frontendToolRequest") => {
                    let id = c.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    let call = c.get("toolCall").cloned().unwrap_or(Value::Null);
                    if let Some(v) = call.get("value") {
                        parts.push(Part::ToolCall {
                            id,
                            name: v.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                            arguments: v.get("arguments").cloned().unwrap_or_else(|| json!({})),
                        });
                    }
                }
                Some("toolResponse") => {
                    let id = c.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    let r = c.get("toolResult").cloned().unwrap_or(Value::Null);
                    let (content, is_error) = match r.get("status").and_then(Value::as_str) {
                        Some("success") => result_content(r.get("value").unwrap_or(&Value::Null)),
                        _ => (vec![text(r.get("error").and_then(Value::as_str).unwrap_or("tool call failed"))], true),
                    };
                    parts.push(Part::ToolResult { id, content, is_error });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_round_trip_to_llm() {
        let conv = vec![
            message("m0", "user", vec![text("hi")]),
            message("m1", "assistant", vec![text("calling"), tool_request("t1", "x__echo", &Ok(json!({"m":"a"})))]),
            message(
                "m2",
                "user",
                vec![tool_response("t1", Ok(&json!({"content":[{"type":"text","text":"a"}],"isError":false})))],
            ),
            json!({"role":"user","created":0,"content":[{"type":"text","text":"hidden"}],"metadata":{"userVisible":true,"agentVisible":false}}),
        ];
        let m = to_llm(&conv);
        assert_eq!(m.len(), 3);
        assert!(matches!(&m[1].parts[1], Part::ToolCall { name, .. } if name == "x__echo"));
        assert!(matches!(&m[2].parts[0], Part::ToolResult { is_error: false, content, .. } if content.len() == 1));
    }
}
