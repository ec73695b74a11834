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
use gosling_mcp::oauth::{Authorizer, Grant, MemoryStore, Settings, SignIn, SigningKey, TokenSource};
use gosling_mcp::streamable_http::HttpSpec;
use serde_json::Value;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Scenarios (by prefix) whose server wants each of its tools called once.
const CALL_EVERY_TOOL: &[&str] =
    &["elicitation", "sse-retry", "auth/", "sep-2322-", "http-invalid-tool-headers", "http-standard-headers"];

/// `gosling probe ARGS` run by the conformance runner: a URL target plays `scenario`; anything
/// else is an ordinary probe.
pub fn main(open: &crate::Opener, args: &[String], scenario: &str) -> ExitCode {
    probe::finish(probe::parse(args).map_err(Failed::Usage).and_then(|a| match &a.target {
        Target::Url(url) => {
            let settings = probe::oauth_settings(open, &a.oauth).map_err(Failed::Usage)?;
            let context = gosling_config::settings::conformance(
                &gosling_config::ProcessEnv,
                gosling_config::settings::Conformance::Context,
            );
            let ctx: Value = context.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
            let auth = conformance_auth(url, scenario, &ctx, settings).map_err(|e| Failed::Server(Error::Other(e)))?;
            run(url, Some(scenario), &ctx, Some(auth)).map_err(Failed::Server)
        }
        Target::Stdio(_) => probe::run(open, &a),
    }))
}

/// Runs the probe; the returned text is what to print on stdout. `auth` signs in when the
/// server asks (conformance: following the authorization URL itself).
pub fn run(url: &str, scenario: Option<&str>, ctx: &Value, auth: Option<Arc<Authorizer>>) -> Result<String, Error> {
    let spec =
        HttpSpec { uri: url.to_string(), headers: Vec::new(), timeout: TIMEOUT, extension: "probe".into(), auth };
    // Elicitation is answered with the schema's defaults (`probe::answer_with_defaults`): only tool
    // calls can trigger one, and the probe calls tools only for a conformance scenario, which
    // expects that.
    // The runner names the revision the scenario is played at; a modern one is pinned as an
    // extension's `protocol_version` would be (a legacy one is what gosling asks for first).
    let protocol_version = gosling_config::settings::conformance(
        &gosling_config::ProcessEnv,
        gosling_config::settings::Conformance::ProtocolVersion,
    )
    .filter(|v| gosling_wire::mcp_version::is_known(v) && gosling_wire::mcp_version::is_modern(v));
    let opts = ClientOptions {
        roots: None,
        client_name: "gosling".into(),
        protocol_version,
        ..super::probe::base_options(TIMEOUT)
    };
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
        // What to call: the runner's own list when its context names one (custom headers),
        // else what the scenario needs.
        let mut calls: Vec<(String, Value)> = Vec::new();
        let listed = ctx.get("toolCalls").and_then(Value::as_array);
        for c in listed.into_iter().flatten() {
            if let Some(name) = c.get("name").and_then(Value::as_str) {
                calls.push((
                    name.to_string(),
                    c.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default())),
                ));
            }
        }
        let by_name = |n: &str| tools.iter().find(|t| t.name == n);
        match scenario {
            _ if listed.is_some() => {}
            Some("tools_call") => {
                calls.extend(by_name("add_numbers").map(|t| (t.name.clone(), sample_arguments(&t.input_schema))))
            }
            // The schema as the client kept it, sent back for the runner to compare.
            Some("json-schema-2020-12-preservation") => {
                if let (Some(kept), Some(echo)) = (by_name("json_schema_2020_12_tool"), by_name("json_schema_echo")) {
                    calls.push((echo.name.clone(), serde_json::json!({ "schema": kept.input_schema })));
                }
            }
            Some(s) if CALL_EVERY_TOOL.iter().any(|p| s.starts_with(p)) => {
                calls.extend(tools.iter().map(|t| (t.name.clone(), sample_arguments(&t.input_schema))))
            }
            _ => {}
        }
        for (name, args) in calls {
            let r = client.call_tool(&name, Some(args), &CallContext::default())?;
            out.push_str(&format!("call {name}: {}\n", r.to_value()["content"]));
        }
        // Every kind of request once, for the scenarios that look at each one's headers.
        if scenario == Some("http-standard-headers") {
            if client.capabilities().get("resources").is_some() {
                for r in client.list_resources()? {
                    client.read_resource(&r.uri)?;
                    out.push_str(&format!("read {}\n", r.uri));
                }
            }
            if client.capabilities().get("prompts").is_some() {
                for p in client.list_prompts()? {
                    client.get_prompt(&p.name, None)?;
                    out.push_str(&format!("prompt {}\n", p.name));
                }
            }
        }
        Ok(out)
    })();
    client.close();
    result
}

/// The authorizer of a conformance run: pre-registered credentials from the runner's
/// `MCP_CONFORMANCE_CONTEXT` (`client_id`, `client_secret`) over `base`'s, tokens in memory,
/// and the authorization URL followed by the probe itself (the runner's server approves). The
/// extension scenarios name their grant, with what it needs in the context: a signing key
/// (`private_key_pem`), a workload token (`valid_jwt`), an identity provider and ID token.
pub fn conformance_auth(url: &str, scenario: &str, ctx: &Value, mut base: Settings) -> Result<Arc<Authorizer>, String> {
    let text = |k: &str| ctx.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(id) = text("client_id") {
        base.client_id = Some(id);
        base.client_secret = text("client_secret");
    }
    base.sign_in = SignIn::Follow;
    base.store = Arc::new(MemoryStore::default());
    let constant = |v: Option<String>, what: &str| -> Result<TokenSource, String> {
        let v = v.ok_or_else(|| format!("the scenario's context has no {what}"))?;
        Ok(Arc::new(move || Ok(v.clone())))
    };
    let mut auth = Authorizer::new(url, "probe", TIMEOUT, base);
    auth = match scenario {
        "auth/client-credentials-basic" => auth.with_grant(Grant::ClientCredentials),
        "auth/client-credentials-jwt" => {
            if text("signing_algorithm").is_some_and(|a| a != "ES256") {
                return Err("only ES256 client assertions are supported".into());
            }
            let key = SigningKey::from_pem(&text("private_key_pem").unwrap_or_default())?;
            auth.with_grant(Grant::ClientCredentials).with_client_key(key)
        }
        "auth/wif-jwt-bearer" => {
            auth.with_grant(Grant::JwtBearer { assertion: constant(text("valid_jwt"), "valid_jwt")? })
        }
        // The scenario's name up to runner 0.1.16, then its name since.
        "auth/cross-app-access-complete-flow" | "auth/enterprise-managed-authorization" => {
            auth.with_grant(Grant::EnterpriseManaged {
                idp_token_endpoint: text("idp_token_endpoint")
                    .ok_or("the scenario's context has no idp_token_endpoint")?,
                idp_client_id: text("idp_client_id").ok_or("the scenario's context has no idp_client_id")?,
                idp_client_secret: None,
                id_token: constant(text("idp_id_token"), "idp_id_token")?,
            })
        }
        _ => auth,
    };
    Ok(Arc::new(auth))
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
