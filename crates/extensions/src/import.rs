//! `mcpServers` files (Claude Desktop's `claude_desktop_config.json`, Cursor's `mcp.json`,
//! `.mcp.json`) turned into goose extension configs.
//!
//! All three share one shape: `{"mcpServers": {NAME: {...}}}`. An entry with `command` (+
//! `args`, `env`) becomes a `stdio` config whose `envs` are the given values; one with `url`
//! becomes `streamable_http` (its `headers` kept as written, `${VAR}` included). `type: "sse"`,
//! or an `url` ending in `/sse` with no `type`, is kept as a legacy `sse` config that will not
//! run, with goose's migration warning. An env value that only names a variable (`"K": "${K}"`,
//! Cursor's `"${env:K}"`) becomes `env_keys: [K]` (a secret resolved at start), and variables a
//! header refers to (`${VAR}`, `${env:VAR}` → `${VAR}`) join `env_keys` so they resolve. Fields
//! we do not use are reported as warnings, never silently dropped. This module parses only; the policy and the store are the caller's.

use crate::config::{name_to_key, ExtensionConfig, Kind, DEFAULT_TIMEOUT_SECS, SSE_UNSUPPORTED};
use crate::error::Error;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Largest file accepted, in bytes.
pub const MAX_IMPORT_BYTES: usize = 4 << 20;

/// One server of the file, ready for the policy and the store.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportItem {
    pub config: ExtensionConfig,
    /// Whether it should start in new sessions: false for `sse` entries and for entries the
    /// file marks `"disabled": true` (Cline, Roo).
    pub enabled: bool,
    pub warnings: Vec<String>,
}

/// `Error::Import` for the server `entry`'s `field`.
fn ierr(entry: &str, field: &str, message: impl Into<String>) -> Error {
    Error::Import { entry: Some(entry.to_string()), field: field.to_string(), message: message.into() }
}

/// Fields every importer understands; others are reported.
const KNOWN: [&str; 8] = ["command", "args", "env", "url", "headers", "type", "disabled", "transport"];

/// Parses the text of an `mcpServers` file, entries in file order.
pub fn parse_mcp_servers(text: &str) -> Result<Vec<ImportItem>, Error> {
    let top = |field: &str, message: String| Error::Import { entry: None, field: field.to_string(), message };
    if text.len() > MAX_IMPORT_BYTES {
        return Err(top("file", format!("is larger than {MAX_IMPORT_BYTES} bytes")));
    }
    let doc: Value = serde_json::from_str(text).map_err(Error::ImportJson)?;
    let servers = match doc.get("mcpServers") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err(top("mcpServers", "must be an object mapping server names to their settings".into())),
        None => return Err(top("mcpServers", "is missing; expected {\"mcpServers\": {\"name\": {\"command\": …}}} as Claude Desktop, Cursor and .mcp.json write it".into())),
    };
    let mut items: Vec<ImportItem> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    for (name, v) in servers {
        let item = parse_entry(name, v)?;
        let key = name_to_key(name);
        if let Some((_, other)) = keys.iter().find(|(k, _)| *k == key) {
            return Err(ierr(name, "name", format!("has the same key `{key}` as server {other:?} (names are compared without spaces and case); rename one")));
        }
        keys.push((key, name.clone()));
        items.push(item);
    }
    Ok(items)
}

fn string_map(entry: &str, field: &str, v: Option<&Value>) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let s = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return Err(ierr(entry, &format!("{field}.{k}"), "must be a string")),
                };
                out.insert(k.clone(), s);
            }
        }
        Some(_) => return Err(ierr(entry, field, "must be an object of name → string")),
    }
    Ok(out)
}

fn parse_entry(name: &str, v: &Value) -> Result<ImportItem, Error> {
    if name.trim().is_empty() {
        return Err(ierr(name, "name", "server names must not be blank"));
    }
    if name.chars().any(char::is_control) {
        return Err(ierr(name, "name", "server names must not contain control characters"));
    }
    let obj: &Map<String, Value> =
        v.as_object().ok_or_else(|| ierr(name, "", "must be an object with `command` or `url`"))?;
    let mut warnings = Vec::new();
    for k in obj.keys() {
        if !KNOWN.contains(&k.as_str()) {
            warnings.push(format!("{name}: field `{k}` is not supported by goose extensions and was ignored"));
        }
    }
    let ty = match obj.get("type").or_else(|| obj.get("transport")) {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.to_ascii_lowercase()),
        Some(_) => return Err(ierr(name, "type", "must be a string: stdio, http or sse")),
    };
    let enabled = !matches!(obj.get("disabled"), Some(Value::Bool(true)));
    let str_field = |f: &str| -> Result<Option<String>, Error> {
        match obj.get(f) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ierr(name, f, "must be a string")),
        }
    };
    let command = str_field("command")?;
    let url = str_field("url")?;
    let env = string_map(name, "env", obj.get("env"))?;
    for k in env.keys() {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(ierr(name, "env", format!("{k:?} is not a valid environment variable name")));
        }
    }
    match (command, url) {
        (Some(_), Some(_)) => {
            Err(ierr(name, "url", "an entry has either `command` (local) or `url` (remote), not both"))
        }
        (None, None) => Err(ierr(name, "command", "an entry needs `command` (a local server) or `url` (a remote one)")),
        (Some(cmd), None) => {
            if let Some(t) = ty.as_deref().filter(|t| *t != "stdio") {
                return Err(ierr(
                    name,
                    "type",
                    format!("{t:?} does not go with `command`; use \"stdio\" or leave it out"),
                ));
            }
            if cmd.trim().is_empty() {
                return Err(ierr(name, "command", "must name the program to run"));
            }
            let args = match obj.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        x.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| ierr(name, &format!("args[{i}]"), "must be a string"))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(ierr(name, "args", "must be a list of strings")),
            };
            if obj.get("headers").is_some() {
                warnings.push(format!("{name}: `headers` apply only to remote servers and were ignored"));
            }
            let (envs, env_keys) = split_env_refs(name, env, &mut warnings);
            let kind = Kind::Stdio { cmd, args, envs, env_keys };
            let config =
                ExtensionConfig { timeout: Some(DEFAULT_TIMEOUT_SECS), ..ExtensionConfig::new(name, "", kind) };
            Ok(ImportItem { config, enabled, warnings })
        }
        (None, Some(url)) => {
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return Err(ierr(name, "url", format!("{url:?} must be an http:// or https:// URL")));
            }
            if obj.get("args").is_some() {
                warnings.push(format!("{name}: `args` apply only to local servers and were ignored"));
            }
            let path_is_sse = lower.split(['?', '#']).next().unwrap_or("").trim_end_matches('/').ends_with("/sse");
            let sse = match ty.as_deref() {
                Some("sse") => true,
                None => path_is_sse,
                Some("http" | "streamable_http" | "streamable-http" | "streamablehttp") => false,
                Some(t) => {
                    return Err(ierr(
                        name,
                        "type",
                        format!("{t:?} is not a remote transport; use \"http\" (Streamable HTTP) or \"sse\""),
                    ))
                }
            };
            // The same URL and header rules as a link: no credentials in the URL, no `Host` or
            // other transport-managed header, no CR/LF in a value.
            crate::deeplink::check_url(&url).map_err(|rule| ierr(name, "url", rule))?;
            let mut headers = string_map(name, "headers", obj.get("headers"))?;
            for (h, v) in &headers {
                crate::deeplink::check_header(h, v)
                    .map_err(|rule| ierr(name, &format!("headers.{}", gosling_util::printable(h)), rule))?;
            }
            if sse {
                warnings.push(format!(
                    "'{}': {SSE_UNSUPPORTED} (imported disabled; point `url` at the server's Streamable HTTP endpoint)",
                    name_to_key(name)
                ));
                if !headers.is_empty() || !env.is_empty() {
                    warnings.push(format!("{name}: `headers` and `env` of an sse entry are not kept"));
                }
                let config = ExtensionConfig::new(name, "", Kind::Sse { uri: Some(url) });
                return Ok(ImportItem { config, enabled: false, warnings });
            }
            let (envs, mut env_keys) = split_env_refs(name, env, &mut warnings);
            for v in headers.values_mut() {
                *v = v.replace("${env:", "${");
                for var in gosling_wire::template::vars(v) {
                    if !envs.contains_key(&var) && !env_keys.contains(&var) {
                        env_keys.push(var);
                    }
                }
            }
            let kind = Kind::StreamableHttp { uri: url, envs, env_keys, headers };
            let config =
                ExtensionConfig { timeout: Some(DEFAULT_TIMEOUT_SECS), ..ExtensionConfig::new(name, "", kind) };
            Ok(ImportItem { config, enabled, warnings })
        }
    }
}

/// Splits `env` into literal values (`envs`) and references to a variable of the same name
/// (`"K": "${K}"` or Cursor's `"${env:K}"`), which become `env_keys`: secrets resolved when
/// the extension starts, as goose does, instead of the literal text `${K}`. A reference to a
/// different name cannot be expressed in goose's config and is kept literally, with a warning.
fn split_env_refs(
    entry: &str,
    env: BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut envs = BTreeMap::new();
    let mut keys = Vec::new();
    for (k, v) in env {
        // Cursor writes `${env:K}`; otherwise the one `${VAR}` grammar (`wire::template`).
        let normalized = v.replace("${env:", "${");
        let pieces = gosling_wire::template::pieces(&normalized);
        let inner = match pieces.as_slice() {
            [gosling_wire::template::Piece::Var(n)] if normalized.starts_with("${") => Some(*n),
            _ => None,
        };
        match inner {
            Some(var) if var == k => keys.push(k),
            Some(var) => {
                warnings.push(format!(
                    "{entry}: env {k} refers to ${{{var}}}, which goose does not expand; the text is passed literally"
                ));
                envs.insert(k, v);
            }
            None => {
                envs.insert(k, v);
            }
        }
    }
    (envs, keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_desktop_file_with_three_servers() {
        let text = r#"{"mcpServers": {
            "fetch": {"command": "uvx", "args": ["mcp-server-fetch"], "env": {"API_KEY": "k-123"}},
            "Remote Docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
            "old": {"type": "sse", "url": "http://localhost:8000/sse"}
        }}"#;
        let items = parse_mcp_servers(text).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(
            serde_json::to_value(&items[0].config).unwrap(),
            json!({"type":"stdio","name":"fetch","description":"","cmd":"uvx","args":["mcp-server-fetch"],"envs":{"API_KEY":"k-123"},"env_keys":[],"timeout":300,"available_tools":[]})
        );
        assert!(items[0].enabled && items[0].warnings.is_empty());
        let c = serde_json::to_value(&items[1].config).unwrap();
        assert_eq!(c["type"], "streamable_http");
        assert_eq!(c["uri"], "https://docs.example.com/mcp");
        assert_eq!(c["headers"]["Authorization"], "Bearer ${DOCS_TOKEN}");
        assert_eq!(c["env_keys"], json!(["DOCS_TOKEN"]));
        assert_eq!(items[2].config.type_name(), "sse");
        assert!(!items[2].enabled);
        assert!(items[2].warnings[0].contains("SSE is unsupported, migrate to streamable_http"));
    }

    #[test]
    fn env_references_become_env_keys() {
        let items = parse_mcp_servers(r#"{"mcpServers":{
            "gh":{"command":"docker","args":["run","-i","-e","GITHUB_TOKEN","img"],"env":{"GITHUB_TOKEN":"${GITHUB_TOKEN}","MODE":"ro","OTHER":"${X}"}},
            "r":{"url":"https://h/mcp","headers":{"Authorization":"Bearer ${env:TOKEN}"}}}}"#).unwrap();
        let c = serde_json::to_value(&items[0].config).unwrap();
        assert_eq!(c["env_keys"], json!(["GITHUB_TOKEN"]));
        assert_eq!(c["envs"], json!({"MODE":"ro","OTHER":"${X}"}));
        assert_eq!(items[0].warnings.len(), 1);
        let c = serde_json::to_value(&items[1].config).unwrap();
        assert_eq!(c["headers"]["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(c["env_keys"], json!(["TOKEN"]));
    }

    #[test]
    fn sse_by_path_and_types() {
        let items = parse_mcp_servers(r#"{"mcpServers":{"a":{"url":"http://h/sse"},"b":{"url":"http://h/sse","type":"http"},"c":{"command":"npx","type":"stdio","cwd":"/x","disabled":true}}}"#).unwrap();
        assert_eq!(items[0].config.type_name(), "sse");
        assert_eq!(items[1].config.type_name(), "streamable_http");
        assert_eq!(items[2].config.type_name(), "stdio");
        assert!(!items[2].enabled);
        assert!(items[2].warnings[0].contains("`cwd`"), "{:?}", items[2].warnings);
    }

    #[test]
    fn errors_name_entry_and_field() {
        let cases = [
            (r#"{}"#, "import: `mcpServers`"),
            (r#"{"mcpServers":[]}"#, "import: `mcpServers`"),
            (r#"nope"#, "import: `file`"),
            (r#"{"mcpServers":{"x":{}}}"#, "mcpServers.x.command"),
            (r#"{"mcpServers":{"x":{"command":"a","url":"http://h"}}}"#, "mcpServers.x.url"),
            (r#"{"mcpServers":{"x":{"command":"a","args":"b"}}}"#, "mcpServers.x.args"),
            (r#"{"mcpServers":{"x":{"command":"a","args":[1]}}}"#, "mcpServers.x.args[0]"),
            (r#"{"mcpServers":{"x":{"command":"a","env":{"K":{}}}}}"#, "mcpServers.x.env.K"),
            (r#"{"mcpServers":{"x":{"url":"ftp://h"}}}"#, "mcpServers.x.url"),
            (r#"{"mcpServers":{"x":{"url":"http://h","type":"stdio"}}}"#, "mcpServers.x.type"),
            (r#"{"mcpServers":{"x":{"command":"a","type":"http"}}}"#, "mcpServers.x.type"),
            (r#"{"mcpServers":{"My X":{"command":"a"},"myx":{"command":"b"}}}"#, "mcpServers.myx.name"),
        ];
        for (text, want) in cases {
            let e = parse_mcp_servers(text).unwrap_err().to_string();
            assert!(e.starts_with("import: ") && e.contains(want), "{text}: {e}");
        }
    }
}
