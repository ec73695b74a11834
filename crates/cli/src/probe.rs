//! `gosling probe`: connect to one MCP server and show what it offers — how people debug an
//! extension before installing it.
//!
//! ```text
//! gosling probe [OPTIONS] [--env NAME=VALUE]… [--env-file FILE] -- CMD ARGS…   (stdio)
//! gosling probe [OPTIONS] [SIGN-IN OPTIONS] URL                              (Streamable HTTP)
//!   OPTIONS: --timeout SECS, and one of --call TOOL | --prompt NAME (each with --args JSON) | --read URI
//!   SIGN-IN: --client-id ID, --client-secret-env VAR, --scope S…, --client-metadata-url URL,
//!            --sign-in browser|follow
//! ```
//!
//! Prints one JSON object: server info, protocol version and how it was chosen (`negotiation`),
//! capabilities, instructions, and the
//! tools, resources, resource templates and prompts the server declared (a declared list the
//! server does not implement becomes a line in `notes`) — or the tool's result, the prompt, the
//! resource (a stdio server's description also says what this kernel offers for confinement,
//! `gosling_sandbox`: the probe itself runs the server unconfined). Exit 0 on success; 1 with the actionable error on stderr; 2 for usage. A server
//! that needs sign-in gets the OAuth flow (mcp/oauth/); tokens go to the secrets store. Run
//! by the MCP conformance runner (`MCP_CONFORMANCE_SCENARIO` set, URL last), it plays the
//! scenario instead (`conformance`, in builds with the `test-hooks` feature; `cli::probe_main`
//! dispatches).

use gosling_mcp::client::{CallContext, Client, ClientOptions};
use gosling_mcp::oauth::{Authorizer, MemoryStore, Settings, SignIn, TokenStore};
use gosling_mcp::stdio::StdioSpec;
use gosling_mcp::streamable_http::HttpSpec;
use gosling_wire::mcp_types::{Prompt, Resource, ResourceTemplate, Tool};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const HELP: &str = "\
Connects to one MCP server (a command after `--`, run on stdio, or a streamable HTTP URL) and
prints what it offers as JSON: tools, prompts, resources; or calls one tool (--call), gets one
prompt (--prompt) or reads one resource (--read). Exit 0 on success, 1 when the server fails,
2 for a usage error.";

const USAGE: &str = "usage: gosling probe [--timeout SECS] [--call TOOL [--args JSON] [--times N] | --prompt NAME [--args JSON] | --read URI] [--env NAME=VALUE]… [--env-file FILE] [--client-id ID] [--client-secret-env VAR] [--scope S]… [--client-metadata-url URL] [--sign-in browser|follow] [--protocol-version REV] (-- CMD ARGS… | URL)";

pub(crate) enum Target {
    Stdio(Vec<String>),
    Url(String),
}

pub(crate) struct Args {
    timeout: Duration,
    action: Action,
    pub(crate) target: Target,
    pub(crate) oauth: OAuthArgs,
    /// Variables for a stdio server (`--env`, `--env-file`); values are never printed.
    env: Vec<(String, String)>,
    /// `--protocol-version`: the revision to speak, as an extension's `protocol_version`.
    protocol_version: Option<String>,
}

/// What to do once connected.
#[derive(Debug, PartialEq)]
enum Action {
    Describe,
    /// A tool, its arguments, and how many times to call it on the one connection (`--times`).
    Call(String, Value, u32),
    Prompt(String, Value),
    Read(String),
}

/// Sign-in options for a URL that needs OAuth.
#[derive(Default)]
pub(crate) struct OAuthArgs {
    client_id: Option<String>,
    /// The environment variable holding the client secret (never the secret on argv).
    client_secret_env: Option<String>,
    scopes: Vec<String>,
    client_metadata_url: Option<String>,
    /// Follow the authorization URL ourselves instead of asking a person.
    follow: bool,
}

/// A command line `gosling probe` cannot use; says what to fix (never repeats a value given
/// with `--env`).
#[derive(Debug)]
pub(crate) enum UsageError {
    NeedsValue(String),
    NotSeconds(String),
    SignIn(String),
    ArgsJson(String),
    ArgsNotObject,
    NothingToRun,
    UrlNotLast,
    EnvWithUrl,
    Unexpected(String),
    NothingToProbe,
    ManyActions,
    Env(EnvError),
    EnvFileRead { path: String, error: std::io::Error },
    EnvFileLine { path: String, line: usize, error: EnvError },
    SecretUnset(String),
    UnknownRevision(String),
    Times(String),
}

/// A `NAME=VALUE` that is not one.
#[derive(Debug, PartialEq)]
pub(crate) enum EnvError {
    NoEquals,
    BadName(String),
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvError::NoEquals => write!(f, "expected NAME=VALUE"),
            EnvError::BadName(name) => write!(f, "{name:?} is not a valid variable name"),
        }
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::NeedsValue(flag) => write!(f, "{flag} needs a value; {USAGE}"),
            UsageError::NotSeconds(v) => write!(f, "--timeout {v:?} is not a number of seconds"),
            UsageError::SignIn(v) => write!(f, "--sign-in {v:?}: expected browser or follow"),
            UsageError::ArgsJson(e) => {
                write!(f, "--args is not valid JSON ({e}); pass an object such as '{{\"message\":\"hi\"}}'")
            }
            UsageError::ArgsNotObject => write!(f, "--args must be a JSON object"),
            UsageError::NothingToRun => write!(f, "nothing to run after --; {USAGE}"),
            UsageError::UrlNotLast => write!(f, "the URL must come last; {USAGE}"),
            UsageError::EnvWithUrl => write!(
                f,
                "--env and --env-file set a stdio server's environment; a URL has none (use the extension's headers)"
            ),
            UsageError::Unexpected(a) => write!(f, "unexpected argument {a:?}; {USAGE}"),
            UsageError::NothingToProbe => write!(f, "say what to probe; {USAGE}"),
            UsageError::ManyActions => write!(f, "--call, --prompt and --read exclude each other; {USAGE}"),
            UsageError::Env(e) => write!(f, "--env: {e}"),
            UsageError::EnvFileRead { path, error } => write!(f, "--env-file {path}: {error}"),
            UsageError::EnvFileLine { path, line, error } => write!(f, "--env-file {path}: line {line}: {error}"),
            UsageError::UnknownRevision(v) => write!(
                f,
                "--protocol-version {v:?} is not an MCP revision gosling speaks; use one of {}",
                gosling_wire::mcp_version::KNOWN.join(", ")
            ),
            UsageError::Times(v) => write!(f, "--times {v:?}: expected a number of calls from 1 to 100, with --call"),
            UsageError::SecretUnset(var) => write!(
                f,
                "--client-secret-env {var}: the environment variable {var} is not set; export it with the client secret"
            ),
        }
    }
}

pub(crate) fn parse(args: &[String]) -> Result<Args, UsageError> {
    let mut timeout = Duration::from_secs(30);
    let mut call: Option<String> = None;
    let mut prompt: Option<String> = None;
    let mut read: Option<String> = None;
    let mut call_args = json!({});
    let mut times: Option<u32> = None;
    let mut oauth = OAuthArgs::default();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut protocol_version = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        let mut value = || rest.next().cloned().ok_or_else(|| UsageError::NeedsValue(a.to_string()));
        match a.as_str() {
            "--timeout" => {
                let v = value()?;
                let secs: u64 = v.parse().map_err(|_| UsageError::NotSeconds(v.clone()))?;
                timeout = Duration::from_secs(secs.max(1));
            }
            "--call" => call = Some(value()?),
            "--times" => {
                let v = value()?;
                times = Some(v.parse().ok().filter(|n| (1..=100).contains(n)).ok_or(UsageError::Times(v))?);
            }
            "--prompt" => prompt = Some(value()?),
            "--read" => read = Some(value()?),
            "--env" => env.push(parse_env_pair(&value()?).map_err(UsageError::Env)?),
            "--env-file" => {
                let path = value()?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|error| UsageError::EnvFileRead { path: path.clone(), error })?;
                env.extend(parse_env_file(&text).map_err(|(line, error)| UsageError::EnvFileLine {
                    path: path.clone(),
                    line,
                    error,
                })?);
            }
            "--protocol-version" => {
                let v = value()?;
                if !gosling_wire::mcp_version::is_known(&v) {
                    return Err(UsageError::UnknownRevision(v));
                }
                protocol_version = Some(v);
            }
            "--client-id" => oauth.client_id = Some(value()?),
            "--client-secret-env" => oauth.client_secret_env = Some(value()?),
            "--scope" => oauth.scopes.push(value()?),
            "--client-metadata-url" => oauth.client_metadata_url = Some(value()?),
            "--sign-in" => {
                oauth.follow = match value()?.as_str() {
                    "browser" => false,
                    "follow" => true,
                    other => return Err(UsageError::SignIn(other.to_string())),
                };
            }
            "--args" => {
                call_args = serde_json::from_str(&value()?).map_err(|e| UsageError::ArgsJson(e.to_string()))?;
                if !call_args.is_object() {
                    return Err(UsageError::ArgsNotObject);
                }
            }
            "--" => {
                let cmd = rest.as_slice().to_vec();
                if cmd.is_empty() {
                    return Err(UsageError::NothingToRun);
                }
                let action = action(call, prompt, read, call_args, times)?;
                return Ok(Args { timeout, action, target: Target::Stdio(cmd), oauth, env, protocol_version });
            }
            url if url.starts_with("http://") || url.starts_with("https://") => {
                if !rest.as_slice().is_empty() {
                    return Err(UsageError::UrlNotLast);
                }
                if !env.is_empty() {
                    return Err(UsageError::EnvWithUrl);
                }
                let action = action(call, prompt, read, call_args, times)?;
                return Ok(Args {
                    timeout,
                    action,
                    target: Target::Url(url.to_string()),
                    oauth,
                    env,
                    protocol_version,
                });
            }
            other => return Err(UsageError::Unexpected(other.to_string())),
        }
    }
    Err(UsageError::NothingToProbe)
}

fn action(
    call: Option<String>,
    prompt: Option<String>,
    read: Option<String>,
    args: Value,
    times: Option<u32>,
) -> Result<Action, UsageError> {
    if let (Some(n), None) = (times, &call) {
        return Err(UsageError::Times(n.to_string()));
    }
    match (call, prompt, read) {
        (None, None, None) => Ok(Action::Describe),
        (Some(t), None, None) => Ok(Action::Call(t, args, times.unwrap_or(1))),
        (None, Some(p), None) => Ok(Action::Prompt(p, args)),
        (None, None, Some(u)) => Ok(Action::Read(u)),
        _ => Err(UsageError::ManyActions),
    }
}

/// `NAME=VALUE`; the error never repeats the value.
fn parse_env_pair(s: &str) -> Result<(String, String), EnvError> {
    let (name, value) = s.split_once('=').ok_or(EnvError::NoEquals)?;
    let name = name.trim();
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(EnvError::BadName(name.to_string()));
    }
    Ok((name.to_string(), value.to_string()))
}

/// A `.env` file: `NAME=VALUE` lines, `export ` allowed, `#` comments and blank lines
/// skipped, one pair of surrounding quotes removed.
/// A bad line is `(its number, what is wrong)`.
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, (usize, EnvError)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (name, value) = parse_env_pair(line).map_err(|e| (n + 1, e))?;
        let v = value.trim();
        let v = match (v.chars().next(), v.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(e)) if v.len() >= 2 && q == e => &v[1..v.len() - 1],
            _ => v,
        };
        out.push((name, v.to_string()));
    }
    Ok(out)
}

fn options(a: &Args) -> ClientOptions {
    ClientOptions { protocol_version: a.protocol_version.clone(), ..base_options(a.timeout) }
}

pub(super) fn base_options(timeout: Duration) -> ClientOptions {
    ClientOptions {
        extension: "probe".into(),
        timeout,
        roots: Some(vec![std::env::current_dir().unwrap_or_else(|_| "/".into())]),
        elicitation: Some(Arc::new(answer_with_defaults)),
        sampling: None,
        client_name: "gosling-probe".into(),
        client_version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: None,
    }
}

/// Sign-in settings from the flags. Tokens go to the secrets store of the config dir, so a
/// later probe or the server reuses them; without a usable store, to memory.
pub(crate) fn oauth_settings(open: &crate::Opener, o: &OAuthArgs) -> Result<Settings, UsageError> {
    let secret = |var: &String| {
        gosling_config::settings::named_variable(&gosling_config::ProcessEnv, var)
            .ok_or_else(|| UsageError::SecretUnset(var.clone()))
    };
    let client_secret = o.client_secret_env.as_ref().map(secret).transpose()?;
    let store: Arc<dyn TokenStore> = match open.store() {
        Ok(s) => Arc::new(gosling_extensions::runtime::SecretsTokens(Arc::new(s))),
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
        sign_in: if o.follow { SignIn::Follow } else { browser() },
        store,
    })
}

/// How long `probe` and `auth` wait for the person to finish signing in.
pub const BROWSER_WAIT: Duration = Duration::from_secs(300);

/// Sign-in in the person's browser, the URL shown on standard error.
pub fn browser() -> SignIn {
    SignIn::Browser { wait: BROWSER_WAIT, show: |text| eprintln!("{text}") }
}

/// What the server offers, as one JSON object (only the primitives it declared).
pub fn describe(client: &Client) -> Result<Value, gosling_mcp::error::Error> {
    let caps = client.capabilities();
    let mut out = json!({
        "serverInfo": client.server_info(),
        "protocolVersion": client.protocol_version(),
        "negotiation": client.negotiation(),
        "capabilities": caps,
        "instructions": client.instructions(),
    });
    let mut notes: Vec<String> = Vec::new();
    let mut list = |key: &str, method: &str, r: Result<Vec<Value>, gosling_mcp::error::Error>| match r {
        Ok(items) => {
            out[key] = Value::Array(items);
            Ok(())
        }
        // A declared capability with a list the server does not implement: say so, go on.
        Err(gosling_mcp::error::Error::Rpc(e)) if e.code == gosling_wire::jsonrpc::METHOD_NOT_FOUND => {
            notes.push(format!("the server does not implement {method} ({}: {})", e.code, e.message));
            Ok(())
        }
        Err(e) => Err(e),
    };
    if caps.get("tools").is_some() {
        list("tools", "tools/list", client.list_tools().map(|ts| ts.iter().map(Tool::to_value).collect()))?;
    }
    if caps.get("resources").is_some() {
        list(
            "resources",
            "resources/list",
            client.list_resources().map(|rs| rs.iter().map(Resource::to_value).collect()),
        )?;
        list(
            "resourceTemplates",
            "resources/templates/list",
            client.list_resource_templates().map(|ts| ts.iter().map(ResourceTemplate::to_value).collect()),
        )?;
    }
    if caps.get("prompts").is_some() {
        list("prompts", "prompts/list", client.list_prompts().map(|ps| ps.iter().map(Prompt::to_value).collect()))?;
    }
    if !notes.is_empty() {
        out["notes"] = json!(notes);
    }
    Ok(out)
}

pub fn main(open: &crate::Opener, args: &[String]) -> ExitCode {
    if asks_for_help(args) {
        println!("{USAGE}\n\n{}", HELP);
        return ExitCode::SUCCESS;
    }
    finish(parse(args).map_err(Failed::Usage).and_then(|a| run(open, &a)))
}

/// `-h`/`--help` before `--` (after it, it belongs to the command being probed).
pub(crate) fn asks_for_help(args: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help")
}

/// Prints what a probe found, or why it failed, and gives the exit code.
pub(crate) fn finish(result: Result<String, Failed>) -> ExitCode {
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failed::Usage(e)) => {
            eprintln!("gosling probe: {e}");
            ExitCode::from(2)
        }
        Err(Failed::Server(e)) => {
            eprintln!("gosling probe: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a probe printed nothing: the command line (exit 2) or the server (exit 1).
pub(crate) enum Failed {
    Usage(UsageError),
    Server(gosling_mcp::error::Error),
}

/// Connects, does what `a` asks and returns what to print.
pub(crate) fn run(open: &crate::Opener, a: &Args) -> Result<String, Failed> {
    let connected = match &a.target {
        Target::Stdio(cmd) => {
            let spec = StdioSpec {
                cmd: cmd[0].clone(),
                args: cmd[1..].to_vec(),
                env: a.env.clone(),
                redact: a.env.iter().map(|(_, v)| v.clone()).collect(),
                ..Default::default()
            };
            gosling_mcp::connect_stdio(&spec, options(a))
        }
        Target::Url(url) => {
            let settings = oauth_settings(open, &a.oauth).map_err(Failed::Usage)?;
            let spec = HttpSpec {
                uri: url.clone(),
                headers: Vec::new(),
                timeout: a.timeout,
                extension: "probe".into(),
                auth: Some(Arc::new(Authorizer::new(url, "probe", a.timeout, settings))),
            };
            gosling_mcp::connect_http(&spec, options(a))
        }
    };
    let client = connected.map_err(Failed::Server)?;
    let result = match &a.action {
        Action::Describe => describe(&client),
        Action::Call(tool, args, 1) => {
            client.call_tool(tool, Some(args.clone()), &CallContext::default()).map(|r| r.to_value())
        }
        // Several calls on one connection (one MCP session): a JSON array of their results, to
        // see what a server keeps between calls.
        Action::Call(tool, args, n) => (0..*n)
            .map(|_| client.call_tool(tool, Some(args.clone()), &CallContext::default()).map(|r| r.to_value()))
            .collect::<Result<Vec<Value>, _>>()
            .map(Value::Array),
        Action::Prompt(name, args) => client.get_prompt(name, Some(args.clone())).map(|r| r.to_value()),
        Action::Read(uri) => client.read_resource(uri).map(|r| r.to_value()),
    };
    client.close();
    let mut v = result.map_err(Failed::Server)?;
    if let (Action::Describe, Target::Stdio(_)) = (&a.action, &a.target) {
        // What this kernel offers for confinement (issue 36): the probe runs the server as is,
        // an extension of gosling's runs confined where this says nothing is missing.
        let kernel = gosling_sys::probe();
        v["gosling_sandbox"] = json!({
            "kernel": kernel.describe(),
            "landlock_abi": kernel.landlock_abi,
            "user_namespaces": kernel.user_namespaces,
            "confined_by_probe": false,
        });
    }
    Ok(format!("{}\n", serde_json::to_string_pretty(&v).expect("JSON values serialize")))
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

/// The names a schema's `required` lists.
pub(crate) fn required(schema: &Value) -> Vec<&str> {
    schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
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
        assert_eq!(a.action, Action::Call("echo".into(), json!({"m":1}), 1));
        assert!(matches!(parse(&s(&["http://h/mcp"])).unwrap().target, Target::Url(_)));
        assert!(parse(&s(&[])).is_err());
        assert!(parse(&s(&["--"])).is_err());
        assert!(parse(&s(&["--args", "[1]", "--", "x"])).is_err());
        assert!(parse(&s(&["http://h/mcp", "extra"])).is_err());
        let a = parse(&s(&["--prompt", "p", "--args", "{\"a\":\"b\"}", "--env", "T=x=y", "--", "srv"])).unwrap();
        assert_eq!((a.action, a.env), (Action::Prompt("p".into(), json!({"a":"b"})), vec![("T".into(), "x=y".into())]));
        assert_eq!(
            parse(&s(&["--read", "memo://one", "--", "srv"])).unwrap().action,
            Action::Read("memo://one".into())
        );
        assert!(parse(&s(&["--read", "u", "--call", "t", "--", "srv"])).err().unwrap().to_string().contains("exclude"));
        assert_eq!(
            parse(&s(&["--call", "count", "--times", "3", "--", "srv"])).unwrap().action,
            Action::Call("count".into(), json!({}), 3)
        );
        for bad in [
            &["--times", "0", "--call", "t"][..],
            &["--call", "t", "--times", "101"],
            &["--call", "t", "--times", "x"],
            &["--times", "2"],
        ] {
            let mut v = s(bad);
            v.extend(s(&["--", "srv"]));
            assert!(parse(&v).err().unwrap().to_string().contains("from 1 to 100, with --call"), "{bad:?}");
        }
        let e = parse(&s(&["--env", "T=secret-value", "http://h/mcp"])).err().unwrap().to_string();
        assert!(e.contains("stdio") && !e.contains("secret-value"), "{e}");
        let e = parse(&s(&["--env", "1X=secret-value", "--", "srv"])).err().unwrap().to_string();
        assert!(e.contains("not a valid variable name") && !e.contains("secret-value"), "{e}");
    }

    #[test]
    fn env_files_parse() {
        let text = "# comment\n\nexport A=1\nB=\"two words\"\nC='x'\nD=\n";
        let got = parse_env_file(text).unwrap();
        let want: Vec<(String, String)> = [("A", "1"), ("B", "two words"), ("C", "x"), ("D", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        let (line, e) = parse_env_file("A=1\nnot a pair secret\n").unwrap_err();
        assert_eq!((line, e), (2, EnvError::NoEquals));
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
