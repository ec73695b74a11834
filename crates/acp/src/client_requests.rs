//! The requests gosling sends the client, and the client's answers, as Rust types:
//! `session/request_permission`, `elicitation/create` (form mode), `fs/read_text_file` and
//! `fs/write_text_file`. `params` is the one place a request becomes JSON; `parse` the one place
//! an answer is read.

use crate::session_update::ToolCall;
use serde_json::{json, Value};

/// `session/request_permission`: may this tool call run? gosling offers the four ACP options.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPermission {
    pub session_id: String,
    pub tool_call: ToolCall,
}

/// The option ids gosling offers, with their names (the kind is the id).
pub const PERMISSION_OPTIONS: [(&str, &str); 4] = [
    ("allow_once", "Allow once"),
    ("allow_always", "Always allow"),
    ("reject_once", "Reject"),
    ("reject_always", "Always reject"),
];

impl RequestPermission {
    pub fn params(&self) -> Value {
        let options: Vec<Value> =
            PERMISSION_OPTIONS.iter().map(|(id, name)| json!({ "optionId": id, "name": name, "kind": id })).collect();
        json!({ "sessionId": self.session_id, "toolCall": self.tool_call.to_permission_value(), "options": options })
    }
}

/// The client's answer to `session/request_permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionOutcome {
    /// One of the offered options (by id).
    Selected(String),
    /// The prompt was cancelled while the question was open.
    Cancelled,
    /// Not an outcome ACP defines: what was there, for the log.
    Unexpected(String),
}

impl PermissionOutcome {
    pub fn parse(v: &Value) -> PermissionOutcome {
        let outcome = v.get("outcome");
        let field = |k: &str| outcome.and_then(|o| o.get(k)).and_then(Value::as_str);
        match (field("outcome"), field("optionId")) {
            (Some("selected"), Some(id)) => PermissionOutcome::Selected(id.to_string()),
            (Some("cancelled"), _) => PermissionOutcome::Cancelled,
            _ => PermissionOutcome::Unexpected(outcome.map_or_else(|| "no `outcome`".to_string(), Value::to_string)),
        }
    }
}

/// ACP's form-mode `elicitation/create`: an extension's question for the person.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    pub session_id: String,
    pub message: String,
    pub requested_schema: Value,
}

impl Elicitation {
    pub fn params(&self) -> Value {
        json!({ "sessionId": self.session_id, "mode": "form", "message": self.message, "requestedSchema": self.requested_schema })
    }
}

/// The client's answer to `elicitation/create`.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The form's content (an object; `{}` when the client sent none).
    Accept(Value),
    Decline,
    /// Cancelled, or an answer that is none of these.
    Cancel,
}

impl ElicitationAnswer {
    pub fn parse(v: &Value) -> ElicitationAnswer {
        match v.get("action").and_then(Value::as_str) {
            Some("accept") => ElicitationAnswer::Accept(
                v.get("content").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({})),
            ),
            Some("decline") => ElicitationAnswer::Decline,
            _ => ElicitationAnswer::Cancel,
        }
    }
}

/// `fs/read_text_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTextFile {
    pub session_id: String,
    pub path: String,
}

impl ReadTextFile {
    pub fn params(&self) -> Value {
        json!({ "sessionId": self.session_id, "path": self.path })
    }

    /// The file's text from the client's answer.
    pub fn parse_answer(v: &Value) -> Result<String, &'static str> {
        match v.get("content") {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err("acp: the editor's fs/read_text_file answer has no `content` string"),
        }
    }
}

/// `fs/write_text_file` (its answer is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTextFile {
    pub session_id: String,
    pub path: String,
    pub content: String,
}

impl WriteTextFile {
    pub fn params(&self) -> Value {
        json!({ "sessionId": self.session_id, "path": self.path, "content": self.content })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_permission() {
        let call = ToolCall {
            id: "t1".into(),
            title: "x__y".into(),
            kind: "other",
            status: "pending".into(),
            raw_input: json!({}),
            locations: vec![],
            content: None,
            message: None,
        };
        let p = RequestPermission { session_id: "s".into(), tool_call: call }.params();
        assert_eq!(p["sessionId"], "s");
        assert_eq!(p["toolCall"]["toolCallId"], "t1");
        assert_eq!(p["toolCall"].get("sessionUpdate"), None);
        assert_eq!(
            p["options"][1],
            json!({ "optionId": "allow_always", "name": "Always allow", "kind": "allow_always" })
        );
        assert_eq!(p["options"].as_array().unwrap().len(), 4);
        let sel = json!({ "outcome": { "outcome": "selected", "optionId": "reject_once" } });
        assert_eq!(PermissionOutcome::parse(&sel), PermissionOutcome::Selected("reject_once".into()));
        assert_eq!(
            PermissionOutcome::parse(&json!({ "outcome": { "outcome": "cancelled" } })),
            PermissionOutcome::Cancelled
        );
        let odd = PermissionOutcome::parse(&json!({ "outcome": { "outcome": "selected" } }));
        assert!(matches!(odd, PermissionOutcome::Unexpected(ref s) if s.contains("selected")), "{odd:?}");
        assert_eq!(PermissionOutcome::parse(&json!({})), PermissionOutcome::Unexpected("no `outcome`".into()));
    }

    #[test]
    fn elicitation() {
        let p = Elicitation {
            session_id: "s".into(),
            message: "Name?".into(),
            requested_schema: json!({"type": "object"}),
        };
        assert_eq!(
            p.params(),
            json!({ "sessionId": "s", "mode": "form", "message": "Name?", "requestedSchema": { "type": "object" } })
        );
        let a = ElicitationAnswer::parse(&json!({ "action": "accept", "content": { "name": "x" } }));
        assert_eq!(a, ElicitationAnswer::Accept(json!({ "name": "x" })));
        assert_eq!(
            ElicitationAnswer::parse(&json!({ "action": "accept", "content": 3 })),
            ElicitationAnswer::Accept(json!({}))
        );
        assert_eq!(ElicitationAnswer::parse(&json!({ "action": "decline" })), ElicitationAnswer::Decline);
        assert_eq!(ElicitationAnswer::parse(&json!({ "action": "maybe" })), ElicitationAnswer::Cancel);
        assert_eq!(ElicitationAnswer::parse(&json!(null)), ElicitationAnswer::Cancel);
    }

    #[test]
    fn fs_requests() {
        let r = ReadTextFile { session_id: "s".into(), path: "/w/a".into() };
        assert_eq!(r.params(), json!({ "sessionId": "s", "path": "/w/a" }));
        assert_eq!(ReadTextFile::parse_answer(&json!({ "content": "text" })), Ok("text".into()));
        assert!(ReadTextFile::parse_answer(&json!({ "content": 1 })).unwrap_err().contains("no `content` string"));
        assert!(ReadTextFile::parse_answer(&json!({})).is_err());
        let w = WriteTextFile { session_id: "s".into(), path: "/w/a".into(), content: "x".into() };
        assert_eq!(w.params(), json!({ "sessionId": "s", "path": "/w/a", "content": "x" }));
    }
}
