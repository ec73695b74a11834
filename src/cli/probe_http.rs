//! `gosling probe URL`: connect to a Streamable HTTP MCP server, list its tools, print them,
//! and (when run by the MCP conformance runner, `MCP_CONFORMANCE_SCENARIO` set) do what the
//! scenario asks: call `add_numbers`, or call a tool whose server asks for elicitation and
//! accept with the schema's defaults.
//!
//! Exit code 0 on success, 1 with the error on stderr otherwise. Pure helpers (arguments from
//! a schema, the elicitation answer) are unit-tested here.

use crate::mcp::error::Error;
use crate::mcp::streamable_http::{check_protocol_version, HttpSpec, HttpTransport};
use crate::mcp::transport::{Inbound, Transport};
use crate::wire::jsonrpc::{ErrorObject, Id, Message, METHOD_NOT_FOUND};
use crossbeam_channel::Receiver;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);
const PROTOCOL: &str = "2025-06-18";

/// Runs the probe; the returned text is what to print on stdout.
pub fn run(url: &str, scenario: Option<&str>) -> Result<String, Error> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let spec = HttpSpec { uri: url.to_string(), headers: Vec::new(), timeout: TIMEOUT, extension: "probe".into() };
    let transport = HttpTransport::connect(&spec, tx)?;
    let mut s = Session { t: transport, rx, next: 0 };
    let result = s.probe(scenario);
    s.t.close();
    result
}

struct Session {
    t: Arc<HttpTransport>,
    rx: Receiver<Inbound>,
    next: i64,
}

impl Session {
    fn probe(&mut self, scenario: Option<&str>) -> Result<String, Error> {
        let init = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL,
                "capabilities": {"roots": {"listChanged": false}, "elicitation": {}},
                "clientInfo": {"name": "gosling", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        check_protocol_version("probe", &init)?;
        self.t.send(&Message::notification("notifications/initialized", None))?;
        let mut out = format!("server: {} {}\nprotocol: {}\n", init["serverInfo"]["name"], init["serverInfo"]["version"], init["protocolVersion"]);
        let tools = if init["capabilities"].get("tools").is_some() { self.request("tools/list", json!({}))? } else { json!({"tools": []}) };
        let tools = tools["tools"].as_array().cloned().unwrap_or_default();
        for t in &tools {
            out.push_str(&format!("tool: {}\n", t["name"].as_str().unwrap_or("?")));
        }
        let to_call: Vec<&Value> = match scenario {
            Some("tools_call") => tools.iter().filter(|t| t["name"] == "add_numbers").collect(),
            Some(s) if s.starts_with("elicitation") || s == "sse-retry" => tools.iter().collect(),
            _ => Vec::new(),
        };
        for t in to_call {
            let args = sample_arguments(&t["inputSchema"]);
            let r = self.request("tools/call", json!({"name": t["name"], "arguments": args}))?;
            out.push_str(&format!("call {}: {}\n", t["name"].as_str().unwrap_or("?"), r["content"]));
        }
        Ok(out)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value, Error> {
        self.next += 1;
        let id = Id::Num(self.next);
        self.t.send(&Message::request(id.clone(), method, Some(params)))?;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Inbound::Message(Message::Response { id: rid, result })) if rid == id => return Ok(result),
                Ok(Inbound::Message(Message::Error { id: Some(rid), error })) if rid == id => return Err(Error::Rpc(error)),
                Ok(Inbound::Message(Message::Request { id: sid, method, params })) => {
                    let answer = match method.as_str() {
                        "ping" => Message::Response { id: sid, result: json!({}) },
                        "roots/list" => Message::Response { id: sid, result: json!({"roots": []}) },
                        "elicitation/create" => Message::Response { id: sid, result: accept_with_defaults(params.as_ref().unwrap_or(&Value::Null)) },
                        _ => Message::Error { id: Some(sid), error: ErrorObject::new(METHOD_NOT_FOUND, format!("{method} is not supported by gosling probe")) },
                    };
                    self.t.send(&answer)?;
                }
                Ok(Inbound::Message(_)) => {}
                Ok(Inbound::Closed(e)) => return Err(e),
                Err(_) => return Err(Error::Timeout { method: method.to_string(), after: TIMEOUT }),
            }
        }
    }
}

/// Arguments for a tool from its input schema: each required property (every property when
/// none is required) gets its default, or a plain value of its type.
pub fn sample_arguments(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Value::Object(out) };
    let required: Vec<&str> = schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut n = 0;
    for (name, prop) in props {
        if !required.is_empty() && !required.contains(&name.as_str()) {
            continue;
        }
        n += 1;
        let v = if let Some(d) = prop.get("default") {
            d.clone()
        } else if let Some(first) = prop.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
            first.clone()
        } else {
            match prop.get("type").and_then(Value::as_str) {
                Some("integer") | Some("number") => Value::from(n),
                Some("boolean") => Value::Bool(true),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(serde_json::Map::new()),
                _ => Value::from("test"),
            }
        };
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

/// The answer to `elicitation/create`: accept, with every default of the requested schema.
pub fn accept_with_defaults(params: &Value) -> Value {
    let mut content = serde_json::Map::new();
    if let Some(props) = params.pointer("/requestedSchema/properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if let Some(d) = prop.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    json!({"action": "accept", "content": content})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_schema() {
        let schema = json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"note":{"type":"string"}},"required":["a","b"]});
        assert_eq!(sample_arguments(&schema), json!({"a": 1, "b": 2}));
        let schema = json!({"properties":{"s":{"type":"string","enum":["x","y"]},"f":{"type":"boolean"},"d":{"type":"integer","default":7}}});
        assert_eq!(sample_arguments(&schema), json!({"s": "x", "f": true, "d": 7}));
        assert_eq!(sample_arguments(&json!({})), json!({}));
    }

    #[test]
    fn elicitation_is_accepted_with_defaults() {
        let p = json!({"message":"m","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},"nick":{"type":"string"}}}});
        assert_eq!(accept_with_defaults(&p), json!({"action":"accept","content":{"name":"John Doe","age":30}}));
    }
}
