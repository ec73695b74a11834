//! Consent: the person approves the exact launch of an extension that came from elsewhere (a
//! `goose://` link, an imported `mcpServers` file, a recipe) before it runs.
//!
//! - `launch` is the canonical form of what runs: program and every argument (or URL, header
//!   names and values as written, `${VAR}` references unexpanded), environment names with their
//!   literal values, the secrets it reads by name, OAuth client settings, inline code. `digest`
//!   is its SHA-256. The display name, description and timeout are not part of it.
//! - `summary` is the one description every front end shows (install route and web page,
//!   `gosling install`, `gosling import`, recipes): the launch with secret-looking values masked,
//!   which stored secret each header and variable reads, and `risks` in plain words, plus the
//!   digest to approve.
//! - An approved config carries its record in the `gosling_consent` field of the stored entry
//!   (kept by goose-compatible readers as an unknown field): where it came from (`origin`), the
//!   approved `digest` and the `secrets` the person let it read. `check_activation` refuses one
//!   from elsewhere whose launch no longer has the approved digest (unless the operator's
//!   allowlist names it exactly), and `may_read` limits every secret lookup to the record's
//!   `secrets`. Configs written through the authenticated config API (what Desktop calls after
//!   its own confirmation) are the person's own: the API drops any record (`strip`), which is
//!   their approval of the launch and of the secrets it names, and keeps goose's bytes.
//!
//! Pure: no I/O.

use crate::config::{
    disallowed_env_message, is_reserved_secret, name_to_key, secret_names, untrusted_env_message, ExtensionConfig, Kind,
};
use crate::error::Error;
use crate::policy::{program_family, Policy};
use gosling_util::printable;
use gosling_wire::template::vars;
use serde_json::{json, Map, Value};

/// The field of a stored extension entry that holds its consent record.
pub const FIELD: &str = "gosling_consent";

/// Where an approved config came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A `goose://extension?…` link (`gosling install`, `POST /extensions/install`, the web page).
    Link,
    /// An `mcpServers` file (`gosling import`).
    Import,
    /// A recipe's `extensions` (`/agent/start`).
    Recipe,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Link => "link",
            Origin::Import => "import",
            Origin::Recipe => "recipe",
        }
    }

    fn parse(s: &str) -> Option<Origin> {
        [Origin::Link, Origin::Import, Origin::Recipe].into_iter().find(|o| o.as_str() == s)
    }
}

/// A consent record: `{"origin": …, "digest": "sha256:…", "secrets": [NAME, …]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    pub origin: Origin,
    pub digest: String,
    /// The stored secrets the person let this extension read.
    pub secrets: Vec<String>,
}

/// The canonical launch of `config` (see the module header). Keys in a fixed order, maps sorted.
pub fn launch(config: &ExtensionConfig) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(config.type_name()));
    m.insert("key".into(), json!(config.key()));
    match &config.kind {
        Kind::Stdio { cmd, args, envs, .. } => {
            m.insert("cmd".into(), json!(cmd));
            m.insert("args".into(), json!(args));
            m.insert("envs".into(), json!(envs));
        }
        Kind::StreamableHttp { uri, envs, headers, .. } => {
            m.insert("url".into(), json!(uri));
            m.insert("headers".into(), json!(headers));
            m.insert("envs".into(), json!(envs));
            if let Some(o) = config.extra.get("oauth") {
                m.insert("oauth".into(), o.clone());
            }
        }
        Kind::InlinePython { code, dependencies } => {
            m.insert("code".into(), json!(code));
            m.insert("dependencies".into(), json!(dependencies));
        }
        Kind::Sse { uri } => {
            m.insert("url".into(), json!(uri));
        }
        Kind::Frontend { tools, .. } => {
            m.insert("tools".into(), json!(tools));
        }
        Kind::Builtin { .. } | Kind::Platform { .. } => {}
    }
    m.insert("secrets".into(), json!(secret_names(config)));
    // What it may read, write and reach: widening it needs consent again. Only when the config
    // has a `sandbox` object (the defaults follow from the launch above).
    if matches!(config.kind, Kind::Stdio { .. } | Kind::InlinePython { .. }) && config.extra.contains_key("sandbox") {
        m.insert(
            "sandbox".into(),
            match config.sandbox() {
                Ok(sb) => {
                    let mut paths: Vec<String> = sb.paths.iter().map(|p| p.display().to_string()).collect();
                    let mut hosts = sb.hosts.clone();
                    paths.sort();
                    hosts.sort();
                    json!({"paths": paths, "hosts": hosts, "unconfined": sb.unconfined, "memory": sb.memory,
                        "processes": sb.processes, "open_files": sb.open_files})
                }
                Err(_) => config.extra.get("sandbox").cloned().unwrap_or(Value::Null),
            },
        );
    }
    Value::Object(m)
}

/// `sha256:` and the hex SHA-256 of the canonical launch's JSON.
pub fn digest(config: &ExtensionConfig) -> String {
    let bytes = serde_json::to_vec(&launch(config)).expect("a JSON value serializes");
    format!("sha256:{}", gosling_util::hex(&gosling_util::sha256(&bytes)))
}

/// The consent record `config` carries, if any.
pub fn consent_of(config: &ExtensionConfig) -> Result<Option<Consent>, Error> {
    let Some(v) = config.extra.get(FIELD) else { return Ok(None) };
    let bad = |detail: &str| Error::ConsentMalformed { name: config.name().to_string(), detail: detail.into() };
    let origin = v.get("origin").and_then(Value::as_str).and_then(Origin::parse).ok_or_else(|| bad("no origin"))?;
    let digest = v.get("digest").and_then(Value::as_str).ok_or_else(|| bad("no digest"))?.to_string();
    let secrets = match v.get("secrets") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => return Err(bad("no secrets list")),
    };
    Ok(Some(Consent { origin, digest, secrets }))
}

/// Removes any consent record (content from elsewhere never brings its own approval).
pub fn strip(config: &mut ExtensionConfig) {
    config.extra.shift_remove(FIELD);
}

/// `config` without its consent record, to compare launches.
pub fn stripped(config: &ExtensionConfig) -> ExtensionConfig {
    let mut c = config.clone();
    strip(&mut c);
    c
}

/// Records that the person approved `config` as it is now, from `origin`: its digest, and the
/// secrets it reads (never gosling's own) as the ones it may read.
pub fn stamp(config: &mut ExtensionConfig, origin: Origin) {
    strip(config);
    let secrets: Vec<String> = secret_names(config).into_iter().filter(|k| !is_reserved_secret(k)).collect();
    let record = json!({"origin": origin.as_str(), "digest": digest(config), "secrets": secrets});
    config.extra.insert(FIELD.into(), record);
}

/// Whether the operator's allowlist admits this launch without asking: the exact command line
/// or URL is listed (`Policy::allowlists_exactly`) and it reads no stored secret (which secrets
/// an extension gets is the person's call, never the allowlist's).
pub fn allowlisted(config: &ExtensionConfig, policy: &Policy) -> bool {
    policy.allowlists_exactly(config) && secret_names(config).is_empty()
}

/// For an install from elsewhere: Ok when `approve` is this launch's digest or the allowlist
/// admits it; otherwise what the person must approve, or that it changed since.
pub fn check_approval(config: &ExtensionConfig, approve: Option<&str>, policy: &Policy) -> Result<(), Error> {
    let now = digest(&stripped(config));
    match approve.map(str::trim) {
        Some(a) if a == now => Ok(()),
        Some(a) if !a.is_empty() => {
            Err(Error::ConsentChanged { name: config.name().to_string(), approved: a.to_string(), now })
        }
        _ if allowlisted(config, policy) => Ok(()),
        _ => Err(Error::ConsentNeeded { name: config.name().to_string(), digest: now }),
    }
}

/// At every activation: a config from elsewhere runs only with the digest it was approved with
/// (or when the allowlist admits it exactly). Configs without a record (the person's own) pass.
pub fn check_activation(config: &ExtensionConfig, policy: Option<&Policy>) -> Result<(), Error> {
    let Some(c) = consent_of(config)? else { return Ok(()) };
    let now = digest(&stripped(config));
    if now == c.digest || policy.is_some_and(|p| allowlisted(config, p)) {
        return Ok(());
    }
    Err(Error::ConsentChanged { name: config.name().to_string(), approved: c.digest, now })
}

/// Whether `config` may read the stored secret `name`: never one of gosling's own; with a
/// consent record, only the secrets the person mapped to it.
pub fn may_read(config: &ExtensionConfig, name: &str) -> bool {
    if is_reserved_secret(name) {
        return false;
    }
    match consent_of(config) {
        Ok(None) => true,
        Ok(Some(c)) => c.secrets.iter().any(|s| s == name),
        Err(_) => false,
    }
}

/// Whether a variable or header name marks its value as a secret: one of its words (split on
/// `_` and `-`) is KEY, TOKEN, SECRET, PASSWORD, … or it is `Authorization`/`Cookie`.
pub fn names_a_secret(name: &str) -> bool {
    const WORDS: &str = "KEY APIKEY TOKEN SECRET PASSWORD PASSWD PASS PWD PAT CREDENTIAL CREDENTIALS AUTH \
        AUTHORIZATION COOKIE PRIVATE SIGNATURE";
    name.to_ascii_uppercase().split(['_', '-']).any(|w| gosling_util::in_words(WORDS, w))
}

/// Whether `value` is nothing but `${VAR}` references (and punctuation or a `Bearer` scheme):
/// a reference is not a secret itself.
fn only_references(value: &str) -> bool {
    use gosling_wire::template::{pieces, Piece};
    pieces(value).iter().all(|p| match p {
        Piece::Var(_) => true,
        Piece::Text(t) => t.trim().is_empty() || t.trim() == "Bearer" || !t.chars().any(char::is_alphanumeric),
    })
}

/// A value as summaries show it: `(value, masked)` — as written, or `(hidden: N characters)`
/// when its name marks it as a secret and it is not just a reference.
pub fn shown_value(name: &str, value: &str) -> (String, bool) {
    if names_a_secret(name) && !only_references(value) {
        (format!("(hidden: {} characters)", value.chars().count()), true)
    } else {
        (value.to_string(), false)
    }
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

/// One `{"name", "value", "masked"}` entry of a summary.
fn shown_entry(name: &str, value: &str) -> Value {
    let (value, masked) = shown_value(name, value);
    json!({"name": name, "value": value, "masked": masked})
}

/// The host (and port) a URL really reaches, read by `http::Uri` (in the build through ureq):
/// `https://trusted.example@other.example/` is shown as `other.example`. A URL it cannot read
/// is shown whole.
fn host_of(url: &str) -> String {
    match url.trim().parse::<ureq::http::Uri>().ok().as_ref().and_then(|u| u.authority()) {
        Some(a) => match a.port() {
            Some(p) => format!("{}:{p}", a.host()),
            None => a.host().to_string(),
        },
        None => url.to_string(),
    }
}

/// The host part of `host_of`'s answer, without the port and IPv6 brackets.
fn bare_host(host: &str) -> &str {
    let h = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
        None => host.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(h, _)| h),
    };
    h.trim_end_matches('.')
}

/// The address a host names when it is written as one, read as the system's resolver reads it
/// (`inet_aton`: one to four parts, each decimal, octal with a leading `0` or hex with `0x`, the
/// last filling the remaining bytes — `2130706433`, `0177.1`, `0x7f.0.0.1`, `127.1` are all
/// 127.0.0.1), or an IPv6 address; `None` for a name.
fn host_address(host: &str) -> Option<std::net::IpAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let h = bare_host(host);
    if let Ok(v6) = h.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    let parts: Vec<&str> = h.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let number = |p: &str| -> Option<u64> {
        let lower = p.to_ascii_lowercase();
        let (digits, radix) = match lower.strip_prefix("0x") {
            Some(hex) => (hex.to_string(), 16),
            None if lower.len() > 1 && lower.starts_with('0') => (lower[1..].to_string(), 8),
            None => (lower, 10),
        };
        if digits.is_empty() && radix == 16 {
            return Some(0);
        }
        (!digits.is_empty() && digits.len() <= 12).then(|| u64::from_str_radix(&digits, radix).ok()).flatten()
    };
    let nums: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (head, last) = nums.split_at(nums.len() - 1);
    if head.iter().any(|n| *n > 255) || last[0] >= 1u64 << (8 * (4 - head.len())) {
        return None;
    }
    let mut value = last[0];
    for (i, n) in head.iter().enumerate() {
        value |= n << (8 * (3 - i));
    }
    Some(IpAddr::V4(Ipv4Addr::from(u32::try_from(value).ok()?)))
}

/// Where a server's host is, for the summary: `Some("this machine")` for a loopback name or
/// address (any spelling, IPv4-mapped IPv6 too), `Some("your local network")` for a private,
/// link-local, unique-local or unspecified address; `None` for anything else (a remote server).
fn where_is(host: &str) -> Option<&'static str> {
    use std::net::IpAddr;
    let h = bare_host(host);
    if h.eq_ignore_ascii_case("localhost") || h.to_ascii_lowercase().ends_with(".localhost") {
        return Some("this machine");
    }
    let ip = match host_address(host)? {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        ip => ip,
    };
    match ip {
        IpAddr::V4(a) if a.is_loopback() => Some("this machine"),
        IpAddr::V4(a) if a.is_unspecified() => Some("this machine"),
        IpAddr::V4(a) if a.is_private() || a.is_link_local() || a.octets()[0] == 100 && a.octets()[1] & 0xc0 == 64 => {
            Some("your local network")
        }
        IpAddr::V6(a) if a.is_loopback() || a.is_unspecified() => Some("this machine"),
        IpAddr::V6(a) if (a.segments()[0] & 0xfe00) == 0xfc00 || (a.segments()[0] & 0xffc0) == 0xfe80 => {
            Some("your local network")
        }
        _ => None,
    }
}

const DEVELOPER: &str = "the developer builtin runs the shell commands the model chooses, as you, in the working dir";

/// What is risky about this launch, in plain words, for the person deciding.
pub fn risks(config: &ExtensionConfig) -> Vec<String> {
    let mut out = Vec::new();
    match &config.kind {
        Kind::Stdio { cmd, args, envs, env_keys } => {
            let cmd_p = printable(cmd);
            match program_family(cmd) {
                "launcher" => out.push(format!(
                    "`{cmd_p}` downloads a package from a public registry and runs its code as you, with access to your files and network"
                )),
                "container" => out.push(format!(
                    "`{cmd_p}` runs a container image; the image is downloaded if missing and runs what its publisher put in it"
                )),
                "interpreter" => out.push(format!(
                    "`{cmd_p}` is an interpreter: it runs the script or module named in its arguments as you"
                )),
                "gosling" if args.iter().any(|a| a == "developer") => out.push(DEVELOPER.into()),
                "gosling" | "known" => {}
                _ => out.push(format!(
                    "`{cmd_p}` is a program gosling does not know: it runs as you, with access to your files and network"
                )),
            }
            let mut mount_next = false;
            for a in args {
                let ap = printable(a);
                let lower = a.to_ascii_lowercase();
                if mount_next {
                    out.push(format!("mounts `{ap}` from this machine into the container"));
                    mount_next = false;
                } else if matches!(a.as_str(), "-v" | "--volume" | "--mount") {
                    mount_next = true;
                } else if let Some(m) = ["--volume=", "--mount=", "-v"].iter().find_map(|p| a.strip_prefix(p)) {
                    if !m.is_empty() && program_family(cmd) == "container" {
                        out.push(format!("mounts `{}` from this machine into the container", printable(m)));
                    }
                }
                if lower.contains("://") {
                    out.push(format!("argument `{ap}` is a URL: the program may fetch and run what it points to"));
                } else if lower.starts_with("data:") || lower.contains("=data:") {
                    out.push(format!("argument `{ap}` is inline data (data:), which may carry code"));
                }
                if !a.starts_with('-') && matches!(program_family(a), "launcher" | "interpreter" | "refused") {
                    out.push(format!(
                        "argument `{ap}` names another launcher, interpreter or shell: what it runs is not shown here"
                    ));
                }
            }
            // The approved hosts are named once, in the sandbox's `Network:` line below.
            for k in envs.keys().chain(env_keys.iter()) {
                if disallowed_env_message(k).is_some() || untrusted_env_message(k).is_some() {
                    out.push(format!(
                        "variable `{}` can change where the program loads code, configuration or trust from",
                        printable(k)
                    ));
                }
            }
        }
        Kind::StreamableHttp { uri, .. } => {
            let host = host_of(uri);
            let place = where_is(&host);
            let shown = match host_address(&host) {
                Some(ip) if ip.to_string() != bare_host(&host) => format!("{} ({ip})", printable(&host)),
                _ => printable(&host),
            };
            out.push(match place {
                Some(place) => format!(
                    "connects to a server on {place}, {shown}: your requests and the tools' answers go through it"
                ),
                None => {
                    format!("connects to the remote server {shown}: your requests and the tools' answers go through it")
                }
            });
            if uri.to_ascii_lowercase().starts_with("http://") && place != Some("this machine") {
                out.push("the connection is not encrypted (http://): anyone on the network path can read it".into());
            }
        }
        Kind::InlinePython { .. } => out.push("runs the Python code it carries, as you".into()),
        Kind::Builtin { .. } if config.key() == "developer" => out.push(DEVELOPER.into()),
        Kind::Builtin { .. } | Kind::Platform { .. } | Kind::Frontend { .. } | Kind::Sse { .. } => {}
    }
    // What it may read, write and reach (issue 36), in every front end's summary.
    out.extend(sandbox_lines(config).into_iter().map(|l| format!("sandbox: {l}")));
    for k in secret_names(config) {
        if is_reserved_secret(&k) {
            out.push(format!("asks for {}, one of gosling's own secrets: it is never sent", printable(&k)));
        } else {
            out.push(format!("receives your stored secret {}", printable(&k)));
        }
    }
    out
}

/// The confinement of a stdio or inline_python extension in words (`sandbox::Sandbox::summary`;
/// a `sandbox` object that does not parse is shown as its error). Empty for other kinds.
pub fn sandbox_lines(config: &ExtensionConfig) -> Vec<String> {
    if !matches!(config.kind, Kind::Stdio { .. } | Kind::InlinePython { .. }) {
        return Vec::new();
    }
    if let Kind::Stdio { cmd, .. } = &config.kind {
        match program_family(cmd) {
            "gosling" => {
                return vec![
                    "gosling's own builtin server: not confined, like the builtins (another program of that name is confined)"
                        .into(),
                ]
            }
            "container" => {
                return vec!["runs in a container: held by the engine's isolation (the container-isolation rule), not by gosling's".into()]
            }
            _ => {}
        }
    }
    match config.sandbox() {
        Ok(sb) => sb.summary(gosling_config::settings::unconfined(&gosling_config::ProcessEnv)),
        Err(e) => vec![format!("will not start: {e}")],
    }
}

/// The one summary of what a config will run, for every front end. `present(NAME)`: is the
/// secret stored? Values whose names mark them as secrets are masked; stored secrets are named,
/// never shown. Ends with `risks` and the `digest` to approve.
pub fn summary(config: &ExtensionConfig, present: &dyn Fn(&str) -> bool) -> Value {
    let c = stripped(config);
    let unresolved = crate::config::unresolved(&c, present);
    let mut s = Map::new();
    s.insert("name".into(), json!(c.name()));
    s.insert("key".into(), json!(name_to_key(c.name())));
    s.insert("type".into(), json!(c.type_name()));
    let env_list = |envs: &std::collections::BTreeMap<String, String>, env_keys: &[String]| {
        let mut v: Vec<Value> =
            envs.iter().map(|(k, val)| merge(shown_entry(k, val), json!({"secret": false}))).collect();
        v.extend(env_keys.iter().filter(|k| !envs.contains_key(*k)).map(|k| json!({"name": k, "secret": true})));
        Value::Array(v)
    };
    match &c.kind {
        Kind::Stdio { cmd, args, envs, env_keys } => {
            s.insert("command".into(), json!(cmd));
            s.insert("args".into(), json!(args));
            s.insert("env".into(), env_list(envs, env_keys));
            s.insert("hosts".into(), json!(crate::egress::hosts_of(&c)));
        }
        Kind::StreamableHttp { uri, envs, env_keys, headers } => {
            s.insert("url".into(), json!(uri));
            s.insert("headers".into(), json!(headers.keys().collect::<Vec<_>>()));
            s.insert("header_values".into(), Value::Array(headers.iter().map(|(k, v)| shown_entry(k, v)).collect()));
            s.insert("env".into(), env_list(envs, env_keys));
        }
        Kind::InlinePython { dependencies, .. } => {
            s.insert("dependencies".into(), json!(dependencies));
        }
        Kind::Sse { uri } => {
            s.insert("url".into(), json!(uri));
        }
        Kind::Builtin { .. } | Kind::Platform { .. } | Kind::Frontend { .. } => {}
    }
    s.insert("secrets".into(), json!(secret_names(&c)));
    s.insert("reads".into(), Value::Array(secret_uses(&c, present)));
    s.insert("missing_secrets".into(), json!(unresolved.missing));
    s.insert("refused_secrets".into(), json!(unresolved.refused));
    s.insert("timeout".into(), json!(c.timeout_secs()));
    s.insert("description".into(), json!(c.description));
    s.insert("sandbox".into(), json!(sandbox_lines(&c)));
    s.insert("risks".into(), json!(risks(&c)));
    s.insert("digest".into(), json!(digest(&c)));
    Value::Object(s)
}

/// For the install summary: where each stored secret is read, `{"where": "header
/// Authorization" | "env API_KEY", "secret": NAME, "stored": bool, "refused": bool}` (refused:
/// one of gosling's own secrets, never read), in config order. Values are never included.
pub fn secret_uses(config: &ExtensionConfig, present: &dyn Fn(&str) -> bool) -> Vec<Value> {
    let names = secret_names(config);
    let mut out = Vec::new();
    let mut push = |place: String, secret: &str| {
        if names.iter().any(|n| n == secret) {
            let refused = is_reserved_secret(secret);
            out.push(
                json!({"where": place, "secret": secret, "stored": !refused && present(secret), "refused": refused}),
            );
        }
    };
    match &config.kind {
        Kind::Stdio { env_keys, .. } => env_keys.iter().for_each(|k| push(format!("env {k}"), k)),
        Kind::StreamableHttp { env_keys, headers, .. } => {
            for (h, v) in headers {
                for var in vars(v) {
                    push(format!("header {h}"), &var);
                }
            }
            for k in env_keys {
                if !headers.values().any(|v| vars(v).contains(k)) {
                    push(format!("env {k}"), k);
                }
            }
            for (field, k) in config.oauth().map(|o| o.secret_keys()).unwrap_or_default() {
                push(field.into(), &k);
            }
        }
        Kind::Sse { .. }
        | Kind::Builtin { .. }
        | Kind::Platform { .. }
        | Kind::Frontend { .. }
        | Kind::InlinePython { .. } => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(v: Value) -> ExtensionConfig {
        ExtensionConfig::from_value(v).unwrap()
    }

    #[test]
    fn widening_the_sandbox_changes_the_digest_and_the_summary_shows_it() {
        let base = json!({"type":"stdio","name":"x","cmd":"/usr/bin/python3","args":["/srv/s.py"]});
        let plain = digest(&cfg(base.clone()));
        let mut narrow = base.clone();
        narrow["sandbox"] = json!({"paths": ["/data/a"], "hosts": ["api.example.com:443"]});
        let d_narrow = digest(&cfg(narrow.clone()));
        assert_ne!(d_narrow, plain);
        for (key, wider) in [
            ("paths", json!(["/data/a", "/data/b"])),
            ("hosts", json!(["api.example.com:443", "other.example.com:443"])),
            ("unconfined", json!(true)),
            ("memory", json!("2GiB")),
            ("processes", json!(1024)),
            ("open_files", json!(4096)),
        ] {
            let mut w = narrow.clone();
            w["sandbox"][key] = wider;
            assert_ne!(digest(&cfg(w)), d_narrow, "widening {key} needs consent again");
        }
        // The same grants in another order are the same launch.
        let mut reordered = narrow.clone();
        reordered["sandbox"] = json!({"hosts": ["API.example.com:443"], "paths": ["/data/a"]});
        assert_eq!(digest(&cfg(reordered)), d_narrow);
        let shown = summary(&cfg(narrow), &|_| false);
        let text = shown["risks"].to_string();
        for want in ["sandbox: Confined", "/data/a", "Network: only api.example.com:443", "256 processes", "1024 MiB"] {
            assert!(text.contains(want), "{want}: {text}");
        }
        // The approved host is named once, in the sandbox's network line, in both lists.
        assert_eq!(text.matches("api.example.com").count(), 1, "{text}");
        assert_eq!(shown["sandbox"].to_string().matches("api.example.com").count(), 1, "{shown}");
        let mut loose = base;
        loose["sandbox"] = json!({"unconfined": true});
        assert!(summary(&cfg(loose), &|_| false)["risks"].to_string().contains("UNCONFINED"));
    }

    #[test]
    fn the_digest_covers_the_launch_and_nothing_else() {
        let base =
            json!({"type":"stdio","name":"x","cmd":"npx","args":["-y","pkg"],"envs":{"LOG":"1"},"env_keys":["TOKEN"]});
        let d = digest(&cfg(base.clone()));
        assert!(d.starts_with("sha256:") && d.len() == 7 + 64, "{d}");
        let mut other = base.clone();
        other["description"] = json!("changed words");
        other["timeout"] = json!(60);
        assert_eq!(digest(&cfg(other)), d);
        for (field, v) in [
            ("args", json!(["-y", "pkg2"])),
            ("cmd", json!("uvx")),
            ("envs", json!({"LOG":"2"})),
            ("env_keys", json!(["OTHER"])),
            ("name", json!("y")),
        ] {
            let mut changed = base.clone();
            changed[field] = v;
            assert_ne!(digest(&cfg(changed)), d, "{field}");
        }
        let mut stamped = cfg(base);
        stamp(&mut stamped, Origin::Link);
        assert_eq!(digest(&stripped(&stamped)), d);
        assert_eq!(consent_of(&stamped).unwrap().unwrap().secrets, ["TOKEN"]);
    }

    #[test]
    fn activation_refuses_a_changed_launch_from_elsewhere_only() {
        let mut c = cfg(json!({"type":"stdio","name":"x","cmd":"npx","args":["pkg"]}));
        stamp(&mut c, Origin::Link);
        assert!(check_activation(&c, None).is_ok());
        if let Kind::Stdio { args, .. } = &mut c.kind {
            args.push("--evil".into());
        }
        let e = check_activation(&c, None).unwrap_err();
        assert!(matches!(e, Error::ConsentChanged { .. }) && e.to_string().contains("approve the new digest"), "{e}");
        // Saved by the person (the config API drops the record): their own.
        assert!(check_activation(&stripped(&c), None).is_ok());
    }

    #[test]
    fn secrets_are_read_only_as_mapped() {
        let mut c = cfg(json!({"type":"stdio","name":"x","cmd":"npx","args":["pkg"],"env_keys":["A"]}));
        assert!(may_read(&c, "A") && may_read(&c, "B") && !may_read(&c, "OPENAI_API_KEY"));
        stamp(&mut c, Origin::Recipe);
        assert!(may_read(&c, "A") && !may_read(&c, "B"));
    }

    #[test]
    fn risks_name_urls_interpreters_nested_launchers_and_mounts() {
        let r = risks(&cfg(
            json!({"type":"stdio","name":"x","cmd":"docker","args":["run","-v","./d:/d","img","python","https://x.example/a"]}),
        ));
        let all = r.join("\n");
        for want in ["container image", "mounts `./d:/d`", "names another launcher", "is a URL"] {
            assert!(all.contains(want), "{want}: {all}");
        }
        let r = risks(&cfg(json!({"type":"stdio","name":"x","cmd":"node","args":["data:text/javascript,1"]})));
        assert!(r.iter().any(|x| x.contains("interpreter")) && r.iter().any(|x| x.contains("data:")), "{r:?}");
        let r = risks(&cfg(
            json!({"type":"streamable_http","name":"r","uri":"http://h.example/mcp","headers":{"A":"${T}"}}),
        ));
        assert!(r.iter().any(|x| x.contains("not encrypted")) && r.iter().any(|x| x.contains("secret T")), "{r:?}");
        // The host the URL really reaches is named, not the user info dressed as one.
        let r = risks(&cfg(
            json!({"type":"streamable_http","name":"r","uri":"https://docs.example.com@evil.example:8443/mcp"}),
        ));
        assert!(
            r.iter()
                .any(|x| x
                    .ends_with("remote server evil.example:8443: your requests and the tools' answers go through it")),
            "{r:?}"
        );
        let r = risks(&cfg(json!({"type":"streamable_http","name":"r","uri":"http://127.0.0.1:9/mcp"})));
        assert!(!r.iter().any(|x| x.contains("not encrypted")), "loopback: {r:?}");
    }

    #[test]
    fn numeric_hosts_are_named_where_they_are() {
        let risk = |uri: &str| risks(&cfg(json!({"type":"streamable_http","name":"r","uri":uri}))).join(" | ");
        for (uri, place) in [
            ("http://2130706433:9/mcp", "this machine, 2130706433:9 (127.0.0.1)"),
            ("http://0177.0.0.1:9/", "this machine, 0177.0.0.1:9 (127.0.0.1)"),
            ("http://0x7f.1:9/", "this machine, 0x7f.1:9 (127.0.0.1)"),
            ("http://127.1/", "this machine, 127.1 (127.0.0.1)"),
            ("http://0x7f000001/", "this machine"),
            ("http://[::1]:9/", "this machine"),
            ("http://[::ffff:127.0.0.1]:9/", "this machine"),
            ("http://[::ffff:7f00:1]/", "this machine"),
            ("http://0/", "this machine"),
            ("http://app.localhost:9/", "this machine"),
            ("http://167772161/", "your local network, 167772161 (10.0.0.1)"),
            ("http://0xc0.0xa8.1.1/", "your local network"),
            ("http://[fd00::1]/", "your local network"),
            ("http://[fe80::1]/", "your local network"),
            ("http://169.254.169.254/", "your local network"),
        ] {
            let r = risk(uri);
            assert!(r.contains(&format!("a server on {place}")) && !r.contains("remote server"), "{uri}: {r}");
            assert_eq!(r.contains("not encrypted"), !place.starts_with("this machine"), "{uri}: {r}");
        }
        for uri in ["http://8.8.8.8/", "https://1.2.3.4.example/", "http://4294967296/", "http://256.1.1.1/"] {
            assert!(risk(uri).contains("remote server"), "{uri}: {}", risk(uri));
        }
    }

    #[test]
    fn summaries_mask_secret_values() {
        let c = cfg(
            json!({"type":"stdio","name":"x","cmd":"npx","args":["pkg"],"envs":{"API_TOKEN":"sekrit-value","LEVEL":"info"}}),
        );
        let s = summary(&c, &|_| false).to_string();
        assert!(!s.contains("sekrit") && s.contains("hidden: 12 characters") && s.contains("info"), "{s}");
    }
}
