//! `gosling probe URL`: connect to a Streamable HTTP MCP server, list its tools, print them,
//! and (when run by the MCP conformance runner, `MCP_CONFORMANCE_SCENARIO` set) do what the
//! scenario asks: call `add_numbers`, or call a tool whose server asks for elicitation and
//! accept with the schema's defaults.
//!
//! Exit code 0 on success, 1 with the error on stderr otherwise. Pure helpers (arguments from
//! a schema, the elicitation answer) are unit-tested here.

use gosling_mcp::client::{CallContext, ClientOptions};
use gosling_mcp::error::Error;
use gosling_mcp::oauth::{Authorizer, MemoryStore, Settings, SignIn};
use gosling_mcp::streamable_http::HttpSpec;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the probe; the returned text is what to print on stdout. `auth` signs in when the
/// server asks (conformance: following the authorization URL itself).
pub fn run(url: &str, scenario: Option<&str>, auth: Option<Arc<Authorizer>>) -> Result<String, Error> {
    let spec =
        HttpSpec { uri: url.to_string(), headers: Vec::new(), timeout: TIMEOUT, extension: "probe".into(), auth };
    // Elicitation is answered with the schema's defaults (`answer_with_defaults`): only tool
    // calls can trigger one, and the probe calls tools only for a conformance scenario, which
    // expects that.
    let opts = ClientOptions { roots: None, client_name: "gosling".into(), ..super::probe::base_options(TIMEOUT) };
    let client = gosling_mcp::connect_http(&spec, opts)?;
    let result = (|| {
        let mut out = format!(
            "server: {} {}\nprotocol: {} ({})\n",
            client.server_info()["name"],
            client.server_info()["version"],
            client.protocol_version(),
            client.negotiation()
        );
        let tools = if client.capabilities().get("tools").is_some() { client.list_tools()? } else { Vec::new() };
        for t in &tools {
            out.push_str(&format!("tool: {}\n", t["name"].as_str().unwrap_or("?")));
        }
        let to_call: Vec<&Value> = match scenario {
            Some("tools_call") => tools.iter().filter(|t| t["name"] == "add_numbers").collect(),
            Some(s) if s.starts_with("elicitation") || s == "sse-retry" || s.starts_with("auth/") => {
                tools.iter().collect()
            }
            _ => Vec::new(),
        };
        for t in to_call {
            let name = t["name"].as_str().unwrap_or("");
            let r = client.call_tool(name, Some(sample_arguments(&t["inputSchema"])), &CallContext::default())?;
            out.push_str(&format!("call {name}: {}\n", r["content"]));
        }
        Ok(out)
    })();
    client.close();
    result
}

/// The authorizer of a conformance run: pre-registered credentials from the runner's
/// `MCP_CONFORMANCE_CONTEXT` (`client_id`, `client_secret`) over `base`'s, tokens in memory,
/// and the authorization URL followed by the probe itself (the runner's server approves).
pub fn conformance_auth(url: &str, context: Option<&str>, mut base: Settings) -> Arc<Authorizer> {
    let ctx: Value = context.and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
    if let Some(id) = ctx.get("client_id").and_then(Value::as_str) {
        base.client_id = Some(id.to_string());
        base.client_secret = ctx.get("client_secret").and_then(Value::as_str).map(str::to_string);
    }
    base.sign_in = SignIn::Follow;
    base.store = Arc::new(MemoryStore::default());
    Arc::new(Authorizer::new(url, "probe", TIMEOUT, base))
}

/// The names a schema's `required` lists.
fn required(schema: &Value) -> Vec<&str> {
    schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// Arguments for a tool from its input schema: each required property (every property when
/// none is required) gets its default, or a plain value of its type.
pub fn sample_arguments(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Value::Object(out) };
    let required = required(schema);
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

/// The answer to `elicitation/create` when nobody is there to ask: accept with the schema's
/// defaults when they satisfy it (every required field has a default, and every default fits
/// its property's type and enum), else decline.
pub fn answer_with_defaults(params: &Value) -> Value {
    let schema = &params["requestedSchema"];
    let mut content = serde_json::Map::new();
    for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
        if let Some(d) = prop.get("default") {
            if !fits(prop, d) {
                return json!({"action": "decline"});
            }
            content.insert(name.clone(), d.clone());
        }
    }
    if required(schema).iter().any(|r| !content.contains_key(*r)) {
        return json!({"action": "decline"});
    }
    json!({"action": "accept", "content": content})
}

/// Whether a default value is of its property's type and, with an enum, one of its values.
fn fits(prop: &Value, v: &Value) -> bool {
    let typed = match prop.get("type").and_then(Value::as_str) {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => v.is_array(),
        _ => true,
    };
    typed && prop.get("enum").and_then(Value::as_array).is_none_or(|values| values.contains(v))
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
    fn elicitation_is_accepted_with_defaults_only_when_they_satisfy_the_schema() {
        let p = json!({"message":"m","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},"nick":{"type":"string"}},"required":["name"]}});
        assert_eq!(answer_with_defaults(&p), json!({"action":"accept","content":{"name":"John Doe","age":30}}));
        // A required field without a default: nobody can fill it in.
        let p = json!({"requestedSchema":{"properties":{"nick":{"type":"string"}},"required":["nick"]}});
        assert_eq!(answer_with_defaults(&p), json!({"action":"decline"}));
        // A default that does not fit its own schema.
        let p = json!({"requestedSchema":{"properties":{"age":{"type":"integer","default":"old"}}}});
        assert_eq!(answer_with_defaults(&p), json!({"action":"decline"}));
        let p = json!({"requestedSchema":{"properties":{"c":{"type":"string","enum":["r","g"],"default":"b"}}}});
        assert_eq!(answer_with_defaults(&p), json!({"action":"decline"}));
    }
}
