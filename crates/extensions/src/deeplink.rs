//! `goose://extension?…` install links: parsing, the config they describe, and the install plan.
//!
//! The parser is pure and strict: every parameter is decoded the way `URLSearchParams` decodes
//! it (`+` is a space, `%XX` a byte), but where a browser would guess (a stray `%`, bytes that
//! are not UTF-8, a parameter given twice) we refuse and name the parameter. Deliberate
//! differences from goose Desktop (goose-contract.md §14, §15):
//! - `url` without `transport` is a `streamable_http` extension (goose makes a dead `sse` one);
//!   `transport=sse` is refused with the migration message instead of being stored.
//! - A `header` value may contain `=`: we split on the first `=` only (goose truncates), and the
//!   value is not percent-decoded a second time.
//! - `env` names become `env_keys` (values are secrets supplied later, never `envs: {K: ""}`),
//!   as goose's settings form does when the user saves; `${VAR}`/`$VAR` used in header values
//!   are added to `env_keys` too, so they resolve at activation — from the secrets store only.
//! - Code-loading environment names and gosling's own secret names are refused (by the policy,
//!   with the family and the reason), not dropped.
//! - gosling's own: `allow_host=HOST[:PORT]` (repeatable, cmd links only) approves a host the
//!   confined extension may reach through gosling's egress proxy (`egress::HostPort`'s grammar,
//!   port 443 when left out); the config carries them as `"sandbox": {"hosts": ["HOST:PORT", …]}`,
//!   which the consent summary shows and the digest covers.
//!
//! Whether the command may run is not this module's call: `extensions::policy` decides that.
//! This module does no I/O.

use crate::config::{ExtensionConfig, ExtensionEntry, Kind, DEFAULT_TIMEOUT_SECS, SSE_UNSUPPORTED};
use crate::egress::HostPort;
use crate::error::Error;
use crate::policy::{InstallSource, Policy};
use gosling_util::printable;
use gosling_wire::percent::form_decode;
use gosling_wire::template::vars;
use serde_json::{json, Map, Value};

/// Longest link accepted, in bytes.
pub const MAX_LINK_LEN: usize = 32 * 1024;
/// Most `name=value` pairs accepted in one link.
pub const MAX_PARAMS: usize = 256;
/// Largest `timeout` accepted, seconds (one day).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;
const MAX_SHORT_FIELD: usize = 256;
/// Most `allow_host` parameters in one link.
pub const MAX_HOSTS: usize = 64;

/// `Error::Link`: `param` is the query parameter (or `scheme`, `host`, `link`) at fault and
/// `rule` says what it must look like.
fn err(param: &str, rule: impl Into<String>) -> Error {
    Error::Link { param: param.to_string(), rule: rule.into() }
}

/// A link (or an import) never silently replaces an installed extension: when `existing` (the
/// entry stored under the new config's key) differs from `config`, the install is refused with
/// how to replace it on purpose. Installing the same config again is fine.
pub fn check_not_replacing(existing: Option<&ExtensionEntry>, config: &ExtensionConfig) -> Result<(), Error> {
    match existing {
        Some(e) if crate::consent::stripped(&e.config) != crate::consent::stripped(config) => {
            let key = config.key();
            Err(err(
                "name",
                format!(
                    "{:?} would replace the installed extension `{key}` ({:?}, {}); a link or import never replaces an installed \
                     extension: to replace it on purpose, remove it first (Desktop's extension settings, or \
                     DELETE /config/extensions/{key}) and install again, or give the new one another name",
                    printable(config.name()),
                    printable(e.config.name()),
                    e.config.type_name()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Where the extension comes from: a local command or a remote server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSource {
    Stdio { cmd: String, args: Vec<String> },
    StreamableHttp { url: String },
}

/// One `env=KEY=description` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvParam {
    pub key: String,
    /// What the link says the value is for ("Your API key"); shown when prompting.
    pub description: String,
}

/// A parsed, validated link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeepLink {
    /// Trimmed, never blank.
    pub name: String,
    pub id: Option<String>,
    pub description: String,
    pub source: LinkSource,
    pub timeout: Option<u64>,
    /// In link order; names are unique (case-insensitively). streamable_http only.
    pub headers: Vec<(String, String)>,
    pub envs: Vec<EnvParam>,
    pub installation_notes: Option<String>,
    /// `allow_host` parameters, in link order, each once. stdio only.
    pub hosts: Vec<HostPort>,
    /// Parameters we do not know, in order (ignored, as goose ignores them).
    pub ignored: Vec<String>,
}

const SINGLE: [&str; 9] =
    ["name", "cmd", "url", "transport", "type", "id", "description", "timeout", "installation_notes"];

/// Parses a `goose://extension?…` link. Pure; see the module header for the rules.
pub fn parse(link: &str) -> Result<DeepLink, Error> {
    let link = link.trim();
    if link.len() > MAX_LINK_LEN {
        return Err(err("link", format!("is {} bytes long; at most {MAX_LINK_LEN} are accepted", link.len())));
    }
    let (scheme, rest) = match link.split_once(':') {
        Some((s, r)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) => (s, r),
        _ => return Err(err("scheme", "the link must start with goose://extension?")),
    };
    if !scheme.eq_ignore_ascii_case("goose") {
        return Err(err(
            "scheme",
            format!("must be goose:// (got {}:); only goose://extension? links install extensions", printable(scheme)),
        ));
    }
    let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(err("host", "the link must start with goose://extension?"));
    };
    let (target, query) = rest.split_once('?').unwrap_or((rest, ""));
    let host = target.strip_suffix('/').unwrap_or(target);
    if !host.eq_ignore_ascii_case("extension") {
        return Err(err(
            "host",
            format!("must be `extension` (got {:?}); only goose://extension? links are supported", printable(host)),
        ));
    }

    // Decode every pair first, so a bad escape anywhere is reported even if the pair is unknown.
    let mut pairs: Vec<(String, String)> = Vec::new();
    for raw in query.split('&').filter(|p| !p.is_empty()) {
        if pairs.len() == MAX_PARAMS {
            return Err(err("link", format!("has more than {MAX_PARAMS} parameters")));
        }
        let (rk, rv) = raw.split_once('=').unwrap_or((raw, ""));
        let key = form_decode(rk).map_err(|e| err(&printable(rk), format!("parameter name {e}")))?;
        let value = form_decode(rv).map_err(|e| err(&key, e.to_string()))?;
        pairs.push((key, value));
    }

    // (slot, the key as written, value): `type` fills the `transport` slot.
    let mut single: Vec<(&str, &str, String)> = Vec::new();
    let mut args = Vec::new();
    let mut header_raw = Vec::new();
    let mut env_raw = Vec::new();
    let mut host_raw = Vec::new();
    let mut ignored = Vec::new();
    for (key, value) in pairs {
        if let Some(known) = SINGLE.iter().find(|k| **k == key) {
            // `type` is goose's alias of `transport`: giving both is a duplicate too.
            let slot = if *known == "type" { "transport" } else { *known };
            if single.iter().any(|(k, _, _)| *k == slot) {
                let rule = if slot == "transport" {
                    "is given more than once (`transport` and its alias `type` count as one); give it once"
                } else {
                    "is given more than once; give it once"
                };
                return Err(err(&key, rule));
            }
            single.push((slot, known, value));
        } else {
            match key.as_str() {
                "arg" => args.push(value),
                "header" => header_raw.push(value),
                "env" => env_raw.push(value),
                "allow_host" => host_raw.push(value),
                _ => ignored.push(key),
            }
        }
    }
    let take = |k: &str| single.iter().find(|(s, _, _)| *s == k).map(|(_, _, v)| v.clone());
    // Errors about the transport name the key the link used (`transport` or `type`).
    let tkey = single.iter().find(|(s, _, _)| *s == "transport").map_or("transport", |(_, k, _)| *k);

    let name = take("name").map(|n| n.trim().to_string()).unwrap_or_default();
    if name.is_empty() {
        return Err(err("name", "is required and must not be blank (the extension's name)"));
    }
    check_line("name", &name, MAX_SHORT_FIELD)?;
    let id = take("id");
    if let Some(id) = &id {
        check_line("id", id, MAX_SHORT_FIELD)?;
    }
    let description = take("description").unwrap_or_default();
    check_text("description", &description)?;
    let installation_notes = take("installation_notes");
    if let Some(n) = &installation_notes {
        check_text("installation_notes", n)?;
    }
    let timeout = match take("timeout") {
        None => None,
        Some(t) => Some(parse_timeout(&t)?),
    };

    let transport = take("transport");
    if let Some(t) = &transport {
        if t.eq_ignore_ascii_case("sse") {
            return Err(err(
                tkey,
                format!("{SSE_UNSUPPORTED} (use transport=streamable_http with the server's Streamable HTTP endpoint)"),
            ));
        }
    }
    let source = match (take("cmd"), take("url")) {
        (Some(_), Some(_)) => {
            return Err(err("url", "a link gives either cmd (stdio) or url (streamable_http), not both"))
        }
        (None, None) => {
            return Err(err(
                "cmd",
                "one source is required: cmd (+ arg) for a local command, or url for a Streamable HTTP server",
            ))
        }
        (Some(cmd), None) => {
            if let Some(t) = transport.as_deref().filter(|t| *t != "stdio") {
                return Err(err(tkey, format!("{:?} does not go with cmd; leave it out or use stdio", printable(t))));
            }
            if cmd.trim().is_empty() || cmd != cmd.trim() {
                return Err(err("cmd", "must name the program to run, without surrounding spaces"));
            }
            check_line("cmd", &cmd, 1024)?;
            for a in &args {
                if a.chars().any(char::is_control) {
                    return Err(err("arg", format!("{:?} contains control characters", printable(a))));
                }
            }
            if !header_raw.is_empty() {
                return Err(err("header", "headers apply only to url (streamable_http) extensions, not to cmd"));
            }
            LinkSource::Stdio { cmd, args }
        }
        (None, Some(url)) => {
            if let Some(t) =
                transport.as_deref().filter(|t| !matches!(*t, "streamable_http" | "streamable-http" | "http"))
            {
                return Err(err(tkey, format!("{:?} is not supported with url; use streamable_http", printable(t))));
            }
            check_url(&url).map_err(|rule| err("url", rule))?;
            if !args.is_empty() {
                return Err(err("arg", "arguments apply only to cmd (stdio) extensions, not to url"));
            }
            if !host_raw.is_empty() {
                return Err(err(
                    "allow_host",
                    "applies only to cmd (stdio) extensions, whose network goes through gosling; a url extension \
                     is the server gosling connects to itself",
                ));
            }
            LinkSource::StreamableHttp { url }
        }
    };

    let mut envs: Vec<EnvParam> = Vec::new();
    for raw in env_raw {
        let (key, description) = raw.split_once('=').unwrap_or((&raw, ""));
        check_env_name("env", key)?;
        if envs.iter().any(|e| e.key == key) {
            return Err(err("env", format!("{key} is given more than once")));
        }
        check_text("env", description)?;
        envs.push(EnvParam { key: key.to_string(), description: description.to_string() });
    }

    let mut headers: Vec<(String, String)> = Vec::new();
    for raw in header_raw {
        let Some((k, v)) = raw.split_once('=') else {
            return Err(err("header", format!("{:?} must be Name=Value", printable(&raw))));
        };
        check_header(k, v).map_err(|rule| err("header", rule))?;
        if headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
            return Err(err("header", format!("{k} is given more than once")));
        }
        headers.push((k.to_string(), v.to_string()));
    }

    if host_raw.len() > MAX_HOSTS {
        return Err(err("allow_host", format!("is given {} times; at most {MAX_HOSTS} hosts", host_raw.len())));
    }
    let mut hosts: Vec<HostPort> = Vec::new();
    for raw in host_raw {
        let h = HostPort::parse(&raw).map_err(|rule| err("allow_host", rule))?;
        if hosts.contains(&h) {
            return Err(err("allow_host", format!("{h} is given more than once")));
        }
        hosts.push(h);
    }

    Ok(DeepLink { name, id, description, source, timeout, headers, envs, installation_notes, hosts, ignored })
}

impl DeepLink {
    /// goose's config for this link. stdio: `{type, name, description, cmd, args, envs: {},
    /// env_keys, timeout}`; streamable_http: `{type, name, description, uri, envs: {}, env_keys,
    /// headers, timeout}`; `installation_notes` rides along as goose's newer Desktop does.
    /// `timeout` is always written (300 when the link has none), as goose Desktop writes it.
    pub fn to_config(&self) -> ExtensionConfig {
        let mut extra = Map::new();
        if let Some(n) = &self.installation_notes {
            extra.insert("installation_notes".into(), Value::String(n.clone()));
        }
        if !self.hosts.is_empty() {
            extra.insert("sandbox".into(), crate::egress::sandbox_value(&self.hosts));
        }
        let env_keys = self.required_secrets();
        let timeout = Some(self.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS));
        let kind = match &self.source {
            LinkSource::Stdio { cmd, args } => {
                Kind::Stdio { cmd: cmd.clone(), args: args.clone(), envs: Default::default(), env_keys }
            }
            LinkSource::StreamableHttp { url } => Kind::StreamableHttp {
                uri: url.clone(),
                envs: Default::default(),
                env_keys,
                headers: self.headers.iter().cloned().collect(),
            },
        };
        ExtensionConfig { timeout, extra, ..ExtensionConfig::new(&self.name, &self.description, kind) }
    }

    /// Secrets the extension needs before it can run: the `env` names, then the variables
    /// header values refer to (`${VAR}` or `$VAR`), each once, in link order.
    pub fn required_secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.envs.iter().map(|e| e.key.clone()).collect();
        for (_, v) in &self.headers {
            for var in vars(v) {
                if !out.contains(&var) {
                    out.push(var);
                }
            }
        }
        out
    }
}

/// What installing a link will do, for a confirmation screen or an HTTP answer.
#[derive(Debug, Clone)]
pub struct InstallPlan {
    pub config: ExtensionConfig,
    /// Secrets the extension needs that `secret_present` said are not set, in link order.
    pub missing_secrets: Vec<String>,
    /// Names it reads that are gosling's own secrets: never resolved; it stays disabled.
    pub refused_secrets: Vec<String>,
    /// Policy warnings (e.g. allowlist in warning mode, remote server not covered by a list).
    pub warnings: Vec<String>,
    /// What will run, without secret values: name, key, type, command+args or url, env names
    /// with their descriptions, header names, timeout, notes, missing secrets, warnings.
    pub summary: Value,
}

impl InstallPlan {
    /// The entry to persist: enabled only when no secret is missing, so a session never tries
    /// to start an extension that cannot run yet (goose's "settings flow before activation").
    pub fn entry(&self) -> ExtensionEntry {
        ExtensionEntry {
            enabled: self.missing_secrets.is_empty() && self.refused_secrets.is_empty(),
            config: self.config.clone(),
        }
    }
}

/// Parses `link`, applies `policy` as for a deep link, and says what installing would do.
/// `secret_present(NAME)` tells whether a secret is stored (the secrets store only).
pub fn plan_install(link: &str, policy: &Policy, secret_present: &dyn Fn(&str) -> bool) -> Result<InstallPlan, Error> {
    let parsed = parse(link)?;
    let config = parsed.to_config();
    let mut warnings = policy.check(&config, InstallSource::DeepLink)?;
    if !parsed.ignored.is_empty() {
        warnings.push(format!(
            "ignored unknown link parameters: {}",
            parsed.ignored.iter().map(|p| printable(p)).collect::<Vec<_>>().join(", ")
        ));
    }
    let unresolved = crate::config::unresolved(&config, secret_present);
    if !unresolved.refused.is_empty() {
        let only = crate::config::Unresolved { missing: Vec::new(), refused: unresolved.refused.clone() };
        warnings.push(format!("policy: own-secrets rule: {}; it is saved disabled", only.explain()));
    }
    let (missing_secrets, refused_secrets) = (unresolved.missing, unresolved.refused);
    // The one summary every front end shows (`consent::summary`), with what only a link has:
    // the description each `env` parameter gives, its id and installation notes.
    let mut summary = crate::consent::summary(&config, secret_present);
    let s = summary.as_object_mut().expect("an object");
    if let Some(Value::Array(env)) = s.get_mut("env") {
        for e in env.iter_mut() {
            let name = e["name"].as_str().unwrap_or_default().to_string();
            if let Some(p) = parsed.envs.iter().find(|p| p.key == name) {
                e["description"] = json!(p.description);
            }
        }
    }
    if let Some(id) = &parsed.id {
        s.insert("id".into(), json!(id));
    }
    if let Some(n) = &parsed.installation_notes {
        s.insert("installation_notes".into(), json!(n));
    }
    s.insert("warnings".into(), json!(warnings));
    Ok(InstallPlan { config, missing_secrets, refused_secrets, warnings, summary })
}

/// A one-line field: no control characters, bounded length.
fn check_line(param: &str, v: &str, max: usize) -> Result<(), Error> {
    if v.chars().any(char::is_control) {
        return Err(err(param, "must not contain control characters (newlines, tabs, escapes)"));
    }
    if v.len() > max {
        return Err(err(param, format!("is longer than {max} bytes")));
    }
    Ok(())
}

/// Free text (descriptions, notes): newlines and tabs allowed, other control characters not.
fn check_text(param: &str, v: &str) -> Result<(), Error> {
    if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(err(param, "must not contain control characters other than newline and tab"));
    }
    if v.len() > 8192 {
        return Err(err(param, "is longer than 8192 bytes"));
    }
    Ok(())
}

fn parse_timeout(t: &str) -> Result<u64, Error> {
    let rule = || {
        err("timeout", format!("{:?} is not a whole number of seconds between 1 and {MAX_TIMEOUT_SECS}", printable(t)))
    };
    if t.is_empty() || t.len() > 12 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(rule());
    }
    match t.parse::<u64>() {
        Ok(n) if (1..=MAX_TIMEOUT_SECS).contains(&n) => Ok(n),
        _ => Err(rule()),
    }
}

/// http(s) only, with a host, no credentials, no spaces or control characters. Imports use it too.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return Err(format!("{:?} must be an http:// or https:// URL", printable(url)));
    };
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain spaces or control characters (percent-encode them)".into());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() || authority.starts_with(':') {
        return Err(format!("{:?} has no host", printable(url)));
    }
    if authority.contains('@') {
        return Err(
            "must not carry credentials (user:password@); send them with header=Authorization=… and an env secret"
                .into(),
        );
    }
    if url.len() > 4096 {
        return Err("is longer than 4096 bytes".into());
    }
    Ok(())
}

/// `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes. Which names are refused is the policy's call.
fn check_env_name(param: &str, key: &str) -> Result<(), Error> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(err(
            param,
            format!(
                "{:?} is not a valid environment variable name (letters, digits, _; not starting with a digit)",
                printable(key)
            ),
        ));
    }
    Ok(())
}

/// Headers the HTTP transport manages itself; a link may not override them.
const MANAGED_HEADERS: [&str; 8] =
    ["host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "mcp-session-id"];

/// A header a link or an import may set: a token name, not one the transport manages (`Host`,
/// `Content-Length`, …), a value without control characters (no CR/LF), bounded.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > 256 || !name.bytes().all(tchar) {
        return Err(format!("{:?} is not a valid HTTP header name", printable(name)));
    }
    if MANAGED_HEADERS.iter().any(|m| m.eq_ignore_ascii_case(name)) {
        return Err(format!("{name} is set by the HTTP transport and cannot be given in a link or an import"));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') || value.len() > 8192 {
        return Err(format!("the value of {name} must be at most 8192 bytes without control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERYTHING: &str = "goose://extension?cmd=npx&arg=-y&arg=%40modelcontextprotocol%2Fserver-everything&name=Everything&description=Demo&timeout=120&env=API_KEY%3DYour%20API%20key";

    #[test]
    fn contract_example() {
        let l = parse(EVERYTHING).unwrap();
        assert_eq!(l.name, "Everything");
        assert_eq!(
            l.source,
            LinkSource::Stdio {
                cmd: "npx".into(),
                args: vec!["-y".into(), "@modelcontextprotocol/server-everything".into()]
            }
        );
        assert_eq!(l.envs, vec![EnvParam { key: "API_KEY".into(), description: "Your API key".into() }]);
        assert_eq!(l.timeout, Some(120));
        assert_eq!(
            serde_json::to_value(l.to_config()).unwrap(),
            json!({"type":"stdio","name":"Everything","description":"Demo","cmd":"npx","args":["-y","@modelcontextprotocol/server-everything"],"envs":{},"env_keys":["API_KEY"],"timeout":120,"available_tools":[]})
        );
    }

    #[test]
    fn form_decoding() {
        assert_eq!(form_decode("a+b%20c%2B%3D").unwrap(), "a b c+=");
        assert_eq!(form_decode("%C3%A9t%C3%A9").unwrap(), "été");
        assert!(form_decode("%").is_err());
        assert!(form_decode("%4").is_err());
        assert!(form_decode("%zz").is_err());
        assert!(form_decode("%FF").is_err());
        assert!(form_decode("%C3").is_err());
        assert_eq!(form_decode("é").unwrap(), "é");
    }

    #[test]
    fn remote_with_headers() {
        let l = parse("goose://extension?name=R&url=https%3A%2F%2Fmcp.example.com%2Fmcp&header=Authorization%3DBearer%20%24%7BTOKEN%7D&header=X-Sig%3Da%3Db%3D%3D&env=EXTRA").unwrap();
        assert_eq!(l.required_secrets(), ["EXTRA", "TOKEN"]);
        let c = serde_json::to_value(l.to_config()).unwrap();
        assert_eq!(c["headers"], json!({"Authorization": "Bearer ${TOKEN}", "X-Sig": "a=b=="}));
        assert_eq!(c["env_keys"], json!(["EXTRA", "TOKEN"]));
        assert_eq!(c["uri"], "https://mcp.example.com/mcp");
        assert_eq!(c["timeout"], 300);
        assert_eq!(crate::config::secret_names(&l.to_config()), l.required_secrets());
    }

    #[test]
    fn plan_summarizes_without_secret_values() {
        let p = plan_install(EVERYTHING, &Policy::permissive(), &|_| false).unwrap();
        assert_eq!(p.missing_secrets, ["API_KEY"]);
        assert!(!p.entry().enabled);
        assert_eq!(p.summary["command"], "npx");
        assert_eq!(p.summary["key"], "everything");
        let p = plan_install(EVERYTHING, &Policy::permissive(), &|k| k == "API_KEY").unwrap();
        assert!(p.missing_secrets.is_empty());
        assert!(p.entry().enabled);
        let p = plan_install(
            "goose://extension?name=R&url=http://h/mcp&header=Authorization=Bearer%20sekrit",
            &Policy::permissive(),
            &|_| false,
        )
        .unwrap();
        assert!(!p.summary.to_string().contains("sekrit"));
    }

    #[test]
    fn allow_host_approves_hosts_into_the_sandbox_block_the_summary_and_the_digest() {
        let link = |hosts: &str| format!("goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch{hosts}");
        let l = parse(&link("&allow_host=API.example.com&allow_host=127.0.0.1%3A8080&allow_host=%5B%3A%3A1%5D%3A9"))
            .unwrap();
        let shown: Vec<String> = l.hosts.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["api.example.com:443", "127.0.0.1:8080", "[::1]:9"]);
        let c = serde_json::to_value(l.to_config()).unwrap();
        assert_eq!(c["sandbox"], json!({"hosts": ["api.example.com:443", "127.0.0.1:8080", "[::1]:9"]}));
        // The stored config reads back with its hosts, which the proxy's policy takes as they are.
        let back: ExtensionConfig = serde_json::from_value(c).unwrap();
        assert_eq!(crate::egress::policy_of(&back).unwrap().hosts, l.hosts);
        let plan = |l: &str| plan_install(l, &Policy::permissive(), &|_| false).unwrap();
        let with = plan(&link("&allow_host=api.example.com"));
        assert_eq!(with.summary["hosts"], json!(["api.example.com:443"]));
        let without = plan(&link(""));
        assert_eq!(without.summary["hosts"], json!([]));
        let other = plan(&link("&allow_host=api.example.com%3A8443"));
        let digests = [&with, &without, &other].map(|p| p.summary["digest"].as_str().unwrap().to_string());
        assert!(digests[0] != digests[1] && digests[0] != digests[2] && digests[1] != digests[2], "{digests:?}");
        assert_eq!(
            digests[1],
            crate::consent::digest(&parse(&link("")).unwrap().to_config()),
            "no hosts: the digest as before"
        );

        for (bad, says) in [
            ("&allow_host=2130706433", "dotted quad"),
            ("&allow_host=example.com%3A0", "1 to 65535"),
            ("&allow_host=%3A%3A1", "in brackets"),
            ("&allow_host=https%3A%2F%2Fexample.com", "no scheme"),
            ("&allow_host=", "must be HOST or HOST:PORT"),
            ("&allow_host=0.0.0.0%3A80", "unspecified"),
            ("&allow_host=a.example&allow_host=A.example%3A443", "a.example:443 is given more than once"),
        ] {
            let e = parse(&link(bad)).unwrap_err().to_string();
            assert!(e.starts_with("deeplink: `allow_host`: ") && e.contains(says), "{bad}: {e}");
        }
        let many: String = (0..=MAX_HOSTS).map(|i| format!("&allow_host=h{i}.example")).collect();
        assert!(parse(&link(&many)).unwrap_err().to_string().contains("at most 64 hosts"));
        let e =
            parse("goose://extension?name=R&url=https%3A%2F%2Fmcp.example.com%2Fmcp&allow_host=x.example").unwrap_err();
        assert!(e.to_string().contains("applies only to cmd (stdio) extensions"), "{e}");
    }

    #[test]
    fn fuzz_mutated_links_never_panic() {
        let seeds = [
            EVERYTHING,
            "goose://extension?name=R&url=https%3A%2F%2Fmcp.example.com%2Fmcp&header=Authorization%3DBearer%20%24%7BTOKEN%7D&env=TOKEN%3Dtoken",
            "goose://extension?cmd=uvx&arg=mcp-server-fetch&name=Fetch&id=fetch&installation_notes=Needs+uv&transport=stdio",
            "goose://extension/?name=x&cmd=docker&arg=run&arg=-i&arg=img#frag",
        ];
        let pieces = [
            "%",
            "%2",
            "%zz",
            "%C3",
            "%C3%A9",
            "%00",
            "%0A",
            "&",
            "=",
            "+",
            "#",
            "?",
            "&name=",
            "&cmd=",
            "&url=",
            "&arg=-c",
            "&timeout=",
            "&type=sse",
            "&header=",
            "&env=",
            "&allow_host=",
            "&allow_host=api.example.com",
            "[::1]:",
            "é",
            "\u{202E}",
            "${",
            "$",
            "/",
            ":",
            "goose:",
            "//",
            "&&",
            "%FF",
            "0",
            "99999999999999999999",
        ];
        let policy = Policy::permissive();
        let mut rng = gosling_util::XorShift(0x9E37_79B9_7F4A_7C15);
        let mut accepted = 0;
        for i in 0..10_000 {
            let mut s: Vec<char> = seeds[i % seeds.len()].chars().collect();
            for _ in 0..1 + rng.below(4) {
                let at = if s.is_empty() { 0 } else { rng.below(s.len() + 1) };
                match rng.below(5) {
                    0 => {
                        let p = pieces[rng.below(pieces.len())];
                        for (k, c) in p.chars().enumerate() {
                            s.insert(at + k, c);
                        }
                    }
                    1 if at < s.len() => {
                        let n = 1 + rng.below(6).min(s.len() - at - 1);
                        s.drain(at..at + n);
                    }
                    2 if at < s.len() => s[at] = char::from_u32(rng.below(0x3000) as u32).unwrap_or('x'),
                    3 => s.truncate(at),
                    _ => {
                        let c = s.clone();
                        let from = rng.below(c.len().max(1));
                        let chunk: Vec<char> = c.iter().skip(from).take(1 + rng.below(12)).copied().collect();
                        for (k, ch) in chunk.into_iter().enumerate() {
                            s.insert(at.min(s.len()) + k, ch);
                        }
                    }
                }
            }
            let link: String = s.into_iter().collect();
            if let Ok(l) = parse(&link) {
                accepted += 1;
                let _ = l.required_secrets();
                let c = l.to_config();
                let _ = serde_json::to_string(&c).unwrap();
                let _ = plan_install(&link, &policy, &|_| false);
            }
        }
        // The mutations must leave some links valid, or the fuzz only exercises the front door.
        assert!(accepted > 500, "only {accepted} mutated links parsed");
    }
}
