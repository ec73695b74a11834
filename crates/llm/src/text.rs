//! Small readers of what the model wrote: a chunk's JSON, tool-call arguments, content blocks as
//! text, and text clipped for messages.

use crate::error::Error;
use crate::types::BadArguments;

/// Parses one chunk's JSON, naming the chunk (shortened) when it is malformed.
pub(crate) fn parse_chunk(provider: &str, data: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(data).map_err(|e| {
        Error::Protocol(format!("malformed JSON in a chunk of the {provider} stream ({e}): {}", clip(data, 200)))
    })
}

/// At most `max` bytes of `s`, on a char boundary, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Tool-call arguments as the model wrote them: empty → `{}`, invalid JSON → `Err(raw)`.
pub(crate) fn parse_arguments(raw: &str) -> Result<serde_json::Value, BadArguments> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(raw).map_err(|_| BadArguments { raw: raw.to_string() })
}

/// The text of MCP content blocks for wire formats that take only text: text blocks as they
/// are, embedded text resources by their text, anything else as compact JSON.
pub(crate) fn content_as_text(content: &[serde_json::Value]) -> String {
    let mut out = Vec::new();
    for c in content {
        match c.get("type").and_then(|t| t.as_str()) {
            Some("text") => out.push(c.get("text").and_then(|t| t.as_str()).unwrap_or("").to_string()),
            Some("resource") if c.pointer("/resource/text").is_some() => {
                out.push(c.pointer("/resource/text").and_then(|t| t.as_str()).unwrap_or("").to_string())
            }
            Some("image") => out.push(format!("[image {}]", c.get("mimeType").and_then(|t| t.as_str()).unwrap_or(""))),
            _ => out.push(c.to_string()),
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_content() {
        assert_eq!(parse_arguments(""), Ok(serde_json::json!({})));
        assert_eq!(parse_arguments("{\"a\":1}"), Ok(serde_json::json!({"a":1})));
        assert_eq!(parse_arguments("{\"a\":"), Err(BadArguments { raw: "{\"a\":".to_string() }));
        let c = vec![
            serde_json::json!({"type":"text","text":"a"}),
            serde_json::json!({"type":"resource","resource":{"uri":"u","text":"b"}}),
        ];
        assert_eq!(content_as_text(&c), "a\nb");
        assert_eq!(clip("héllo", 2), "h…");
    }
}
