//! `gosling probe`: connect to one MCP server and show what it offers — how people debug an
//! extension before installing it.
//!
//! ```text
//! gosling probe [--timeout SECS] [--call TOOL [--args JSON]] -- CMD ARGS…   (stdio)
//! gosling probe [--timeout SECS] [--call TOOL [--args JSON]] URL            (Streamable HTTP)
//! ```
//!
//! Prints one JSON object: server info, protocol version, capabilities, instructions, and the
//! tools, resources, resource templates and prompts the server declared — or, with `--call`,
//! the tool's result. Exit 0 on success; 1 with the actionable error on stderr; 2 for usage.
//! Run by the MCP conformance runner (`MCP_CONFORMANCE_SCENARIO` set, URL last), it plays the
//! scenario instead (`probe_http`).

use crate::mcp::client::{CallContext, Client, ClientOptions};
use crate::mcp::oauth::{Authorizer, MemoryStore, Settings, SignIn, TokenStore};
use crate::mcp::stdio::StdioSpec;
use crate::mcp::streamable_http::HttpSpec;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "usage: gosling probe [--timeout SECS] [--call TOOL [--args JSON]] [--client-id ID] [--client-secret-env VAR] [--scope S]… [--client-metadata-url URL] [--sign-in browser|follow] (-- CMD ARGS… | URL)";

enum Target {
    Stdio(Vec<String>),
    Url(String),
}

struct Args {
    timeout: Duration,
    call: Option<(String, Value)>,
    target: Target,
    oauth: OAuthArgs,
}

/// Sign-in options for a URL that needs OAuth.
#[derive(Default)]
struct OAuthArgs {
    client_id: Option<String>,
    /// The environment variable holding the client secret (never the secret on argv).
    client_secret_env: Option<String>,
    scopes: Vec<String>,
    client_metadata_url: Option<String>,
    /// Follow the authorization URL ourselves instead of asking a person.
    follow: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut timeout = Duration::from_secs(30);
    let mut call: Option<String> = None;
    let mut call_args = json!({});
    let mut oauth = OAuthArgs::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| args.get(i + 1).cloned().ok_or(format!("{a} needs a value; {USAGE}"));
        match a {
            "--timeout" => {
                let v = value(i)?;
                let secs: u64 = v.parse().map_err(|_| format!("--timeout {v:?} is not a number of seconds"))?;
                timeout = Duration::from_secs(secs.max(1));
                i += 2;
            }
            "--call" => {
                call = Some(value(i)?);
                i += 2;
            }
            "--client-id" => {
                oauth.client_id = Some(value(i)?);
                i += 2;
            }
            "--client-secret-env" => {
                oauth.client_secret_env = Some(value(i)?);
                i += 2;
            }
            "--scope" => {
                oauth.scopes.push(value(i)?);
                i += 2;
            }
            "--client-metadata-url" => {
                oauth.client_metadata_url = Some(value(i)?);
                i += 2;
            }
            "--sign-in" => {
                oauth.follow = match value(i)?.as_str() {
                    "browser" => false,
                    "follow" => true,
                    other => return Err(format!("--sign-in {other:?}: expected browser or follow")),
                };
                i += 2;
            }
            "--args" => {
                let v = value(i)?;
                call_args = serde_json::from_str(&v).map_err(|e| {
                    format!("--args is not valid JSON ({e}); pass an object such as '{{\"message\":\"hi\"}}'")
                })?;
                if !call_args.is_object() {
                    return Err("--args must be a JSON object".into());
                }
                i += 2;
            }
            "--" => {
                let cmd = args[i + 1..].to_vec();
                if cmd.is_empty() {
                    return Err(format!("nothing to run after --; {USAGE}"));
                }
                return Ok(Args { timeout, call: call.map(|c| (c, call_args)), target: Target::Stdio(cmd), oauth });
            }
            url if url.starts_with("http://") || url.starts_with("https://") => {
                if i + 1 != args.len() {
                    return Err(format!("the URL must come last; {USAGE}"));
                }
                return Ok(Args {
                    timeout,
                    call: call.map(|c| (c, call_args)),
                    target: Target::Url(url.to_string()),
                    oauth,
                });
            }
            other => return Err(format!("unexpected argument {other:?}; {USAGE}")),
        }
    }
    Err(format!("say what to probe; {USAGE}"))
}

fn options(timeout: Duration) -> ClientOptions {
    ClientOptions {
        extension: "probe".into(),
        timeout,
        roots: Some(vec![std::env::current_dir().unwrap_or_else(|_| "/".into())]),
        elicitation: Some(Arc::new(super::probe_http::accept_with_defaults)),
        sampling: None,
        client_name: "gosling-probe".into(),
        client_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Sign-in settings from the flags. Tokens go to the secrets store of the config dir, so a
/// later probe or the server reuses them; without a usable store, to memory.
fn oauth_settings(o: &OAuthArgs) -> Result<Settings, String> {
    let client_secret = match &o.client_secret_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            format!("--client-secret-env {var}: the environment variable {var} is not set; export it with the client secret")
        })?),
        None => None,
    };
    let dir = crate::config::config_dir(&crate::config::ProcessEnv);
    let store: Arc<dyn TokenStore> = match crate::store::config_store::ConfigStore::open(&dir) {
        Ok(s) => Arc::new(crate::extensions::runtime::SecretsTokens(Arc::new(s))),
        Err(e) => {
            log::warn!("{e}; sign-in tokens are kept in memory only");
            Arc::new(MemoryStore::default())
        }
    };
    Ok(Settings {
        client_id: o.client_id.clone(),
        client_secret,
        scopes: o.scopes.clone(),
        client_metadata_url: o.client_metadata_url.clone(),
        client_name: "gosling".into(),
        sign_in: if o.follow { SignIn::Follow } else { SignIn::Browser { wait: BROWSER_WAIT } },
        store,
    })
}

/// How long `probe` and `auth` wait for the person to finish signing in.
pub const BROWSER_WAIT: Duration = Duration::from_secs(300);

/// What the server offers, as one JSON object (only the primitives it declared).
pub fn describe(client: &Client) -> Result<Value, crate::mcp::error::Error> {
    let caps = client.capabilities();
    let mut out = json!({
        "serverInfo": client.server_info(),
        "protocolVersion": client.protocol_version(),
        "capabilities": caps,
        "instructions": client.instructions(),
    });
    if caps.get("tools").is_some() {
        out["tools"] = Value::Array(client.list_tools()?);
    }
    if caps.get("resources").is_some() {
        out["resources"] = Value::Array(client.list_resources()?);
        out["resourceTemplates"] = Value::Array(client.list_resource_templates()?);
    }
    if caps.get("prompts").is_some() {
        out["prompts"] = Value::Array(client.list_prompts()?);
    }
    Ok(out)
}

pub fn main(args: &[String]) -> ExitCode {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gosling probe: {e}");
            return ExitCode::from(2);
        }
    };
    if let (Target::Url(url), Ok(scenario)) = (&a.target, std::env::var("MCP_CONFORMANCE_SCENARIO")) {
        let settings = match oauth_settings(&a.oauth) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("gosling probe: {e}");
                return ExitCode::from(2);
            }
        };
        let context = std::env::var("MCP_CONFORMANCE_CONTEXT").ok();
        let auth = super::probe_http::conformance_auth(url, context.as_deref(), settings);
        return match super::probe_http::run(url, Some(&scenario), Some(auth)) {
            Ok(out) => {
                print!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gosling probe: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let connected = match &a.target {
        Target::Stdio(cmd) => {
            let spec = StdioSpec { cmd: cmd[0].clone(), args: cmd[1..].to_vec(), ..Default::default() };
            crate::mcp::connect_stdio(&spec, options(a.timeout))
        }
        Target::Url(url) => {
            let auth = match oauth_settings(&a.oauth) {
                Ok(s) => Arc::new(Authorizer::new(url, "probe", a.timeout, s)),
                Err(e) => {
                    eprintln!("gosling probe: {e}");
                    return ExitCode::from(2);
                }
            };
            let spec = HttpSpec {
                uri: url.clone(),
                headers: Vec::new(),
                timeout: a.timeout,
                extension: "probe".into(),
                auth: Some(auth),
            };
            crate::mcp::connect_http(&spec, options(a.timeout))
        }
    };
    let client = match connected {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gosling probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &a.call {
        Some((tool, args)) => client.call_tool(tool, Some(args.clone()), &CallContext::default()),
        None => describe(&client),
    };
    client.close();
    match result {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v).expect("JSON values serialize"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gosling probe: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses() {
        let a = parse(&s(&["--timeout", "5", "--call", "echo", "--args", "{\"m\":1}", "--", "node", "x.js"])).unwrap();
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert!(matches!(a.target, Target::Stdio(ref c) if c == &s(&["node", "x.js"])));
        assert_eq!(a.call.unwrap().1, json!({"m":1}));
        assert!(matches!(parse(&s(&["http://h/mcp"])).unwrap().target, Target::Url(_)));
        assert!(parse(&s(&[])).is_err());
        assert!(parse(&s(&["--"])).is_err());
        assert!(parse(&s(&["--args", "[1]", "--", "x"])).is_err());
        assert!(parse(&s(&["http://h/mcp", "extra"])).is_err());
    }
}
