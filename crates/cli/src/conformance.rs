//! The MCP conformance runner's client: `gosling probe URL` run by the runner
//! (`MCP_CONFORMANCE_SCENARIO` set) does what the scenario asks: call `add_numbers`, or call a
//! tool whose server asks for elicitation and accept with the schema's defaults, signing in with
//! the runner's pre-registered credentials. Built only with the `test-hooks` feature: release
//! builds carry no conformance branch.
//!
//! Exit code 0 on success, 1 with the error on stderr otherwise.

use super::probe::{self, required, Failed, Target};
use gosling_mcp::client::{CallContext, ClientOptions};
use gosling_mcp::error::Error;
use gosling_mcp::oauth::{Authorizer, MemoryStore, Settings, SignIn};
use gosling_mcp::streamable_http::HttpSpec;
use gosling_wire::mcp_types::Tool;
use serde_json::Value;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// `gosling probe ARGS` run by the conformance runner: a URL target plays `scenario`; anything
/// else is an ordinary probe.
pub fn main(open: &crate::Opener, args: &[String], scenario: &str) -> ExitCode {
    probe::finish(probe::parse(args).map_err(Failed::Usage).and_then(|a| match &a.target {
        Target::Url(url) => {
            let settings = probe::oauth_settings(open, &a.oauth).map_err(Failed::Usage)?;
            let context = std::env::var("MCP_CONFORMANCE_CONTEXT").ok();
            let auth = conformance_auth(url, context.as_deref(), settings);
            run(url, Some(scenario), Some(auth)).map_err(Failed::Server)
        }
        Target::Stdio(_) => probe::run(open, &a),
    }))
}

/// Runs the probe; the returned text is what to print on stdout. `auth` signs in when the
/// server asks (conformance: following the authorization URL itself).
pub fn run(url: &str, scenario: Option<&str>, auth: Option<Arc<Authorizer>>) -> Result<String, Error> {
    let spec =
        HttpSpec { uri: url.to_string(), headers: Vec::new(), timeout: TIMEOUT, extension: "probe".into(), auth };
    // Elicitation is answered with the schema's defaults (`probe::answer_with_defaults`): only tool
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
            out.push_str(&format!("tool: {}\n", t.name));
        }
        let to_call: Vec<&Tool> = match scenario {
            Some("tools_call") => tools.iter().filter(|t| t.name == "add_numbers").collect(),
            Some(s) if s.starts_with("elicitation") || s == "sse-retry" || s.starts_with("auth/") => {
                tools.iter().collect()
            }
            _ => Vec::new(),
        };
        for t in to_call {
            let name = t.name.as_str();
            let r = client.call_tool(name, Some(sample_arguments(&t.input_schema)), &CallContext::default())?;
            out.push_str(&format!("call {name}: {}\n", r.to_value()["content"]));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_follow_the_schema() {
        let schema = json!({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"note":{"type":"string"}},"required":["a","b"]});
        assert_eq!(sample_arguments(&schema), json!({"a": 1, "b": 2}));
        let schema = json!({"properties":{"s":{"type":"string","enum":["x","y"]},"f":{"type":"boolean"},"d":{"type":"integer","default":7}}});
        assert_eq!(sample_arguments(&schema), json!({"s": "x", "f": true, "d": 7}));
        assert_eq!(sample_arguments(&json!({})), json!({}));
    }
}
