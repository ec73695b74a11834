//! Trust policy for installing extensions: which commands a link or an import may run, which
//! arguments are refused, and the administrator's allowlists.
//!
//! Three rules, each named in the refusal it produces:
//! 1. **allowed commands** (deep links and imports only, as goose checks links): a stdio `cmd`
//!    must be exactly one of `DEFAULT_COMMANDS` — a bare name, never a path — or one the site
//!    added with `GOSLING_ALLOWED_COMMANDS=a,b` or `"allowed_commands": [...]` in the allowlist
//!    file (those entries are matched exactly too, so a site may allow a full path).
//! 2. **no inline code** (deep links and imports): goose refuses `npx -c`; we also refuse the
//!    other ways of making an allowed launcher run a string as code:
//!    - `npx`/`npx.cmd`: an argument `-c`, `--call`, `-e`, `--eval`, `--node-options`,
//!      `--script-shell`, `--shell` (or their `--opt=value` forms), or any single-dash cluster
//!      containing `c` (`-yc`), anywhere in the arguments, as goose does for `-c`;
//!    - `jbang`: `-c`/`--code` (runs the given source);
//!    - `gosling`/`goosed`: only `mcp NAME` (a builtin), never `agent` or other subcommands;
//!    - every command: an argument naming a shell or script interpreter (`sh`, `bash`, `python3`,
//!      `node`, `pwsh`, `cmd`, … also as `--entrypoint=sh` or `/bin/sh`) followed later by an
//!      inline-code flag (`-c`, `-e`, `-p`, `-r`, `--eval`, `--print`, `--command`, `-Command`,
//!      `/c`, `/k`, `eval`, or a short cluster like `-lc`): catches `uvx python -c …`,
//!      `docker run img sh -c …`, `docker run --entrypoint sh img -c …`;
//!    - every command: an argument with shell metacharacters `$(`, `` ` ``, `;`, `&&`, `||`, `|`
//!      or a line break (`npx.cmd` runs through cmd.exe on Windows, and a launcher that reaches
//!      a shell would run them). A lone `&` is allowed: URLs need it.
//! 3. **allowlist** (every install path, once configured): goose's `GOOSE_ALLOWLIST` (a URL
//!    serving YAML `extensions: [- id: …, command: …]`; the stdio command line `cmd args…` must
//!    start with one of the `command`s) and our local file (`GOSLING_ALLOWLIST_FILE`, else
//!    `<config dir>/allowlist.json` when it exists): `{"commands": [prefixes], "urls": [URL
//!    prefixes], "allowed_commands": [names for rule 1]}`. A command passes if any configured
//!    list allows it. Remote (`streamable_http`) extensions are checked against `urls` when the
//!    file has that key (`"urls": []` refuses all), otherwise they pass with a warning, as goose
//!    lets remote links through marked untrusted. `inline_python` runs arbitrary code, so it is
//!    refused whenever a command allowlist is configured. `GOOSE_ALLOWLIST_WARNING=true` turns
//!    allowlist refusals (only those) into warnings.
//!
//! Differences from goose, on purpose: an allowlist URL that cannot be fetched or parsed refuses
//! installs (goose allows everything); an empty remote list still allows everything, as in goose,
//! but a local file's lists mean exactly what they say. Prefix matching is goose's plain string
//! prefix for commands (`uvx mcp-server-fetch` also admits `uvx mcp-server-fetch-x`: end an entry
//! with a space to pin it); URL prefixes must end at a `/`, `?`, `#` or the end, so
//! `https://mcp.example.com` does not admit `https://mcp.example.com.evil.io`.
//!
//! `Policy::from_env` does the one network fetch (bounded: 15 s, 1 MiB); `check` is pure.

use crate::config::Env;
use crate::extensions::config::{ConfigError, ExtensionConfig};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// goose's allowed stdio commands for links, plus `gosling` (our own builtins).
pub const DEFAULT_COMMANDS: [&str; 9] =
    ["cu", "docker", "jbang", "npx", "uvx", "goosed", "npx.cmd", "i-ching-mcp-server", "gosling"];

/// Largest allowlist (remote YAML or local JSON) read, in bytes.
pub const MAX_ALLOWLIST_BYTES: u64 = 1 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// How an extension is being added. Rules 1 and 2 (commands, inline code) apply to `DeepLink`
/// and `Import`; the allowlist applies to all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallSource {
    /// A `goose://extension?…` link (`gosling install`, the install route).
    DeepLink,
    /// `POST /config/extensions`.
    ConfigApi,
    /// `POST /agent/add_extension`.
    AddExtension,
    /// `gosling import` of an `mcpServers` file.
    Import,
    /// Other command-line paths that take a config the user wrote.
    Cli,
}

impl InstallSource {
    fn checks_commands(self) -> bool {
        match self {
            InstallSource::DeepLink | InstallSource::Import => true,
            InstallSource::ConfigApi | InstallSource::AddExtension | InstallSource::Cli => false,
        }
    }
}

/// A refused install, or a policy that cannot be set up.
#[derive(Debug)]
pub enum PolicyError {
    /// Rule 1: `cmd` is not an allowed command. Add it with `GOSLING_ALLOWED_COMMANDS`.
    CommandNotAllowed { cmd: String, allowed: Vec<String> },
    /// Rule 2: `arg` would make `cmd` run inline code; `why` names the exact pattern.
    InlineCode { cmd: String, arg: String, why: String },
    /// Rule 2: `arg` contains shell syntax (`pattern`).
    ShellMetacharacter { arg: String, pattern: &'static str },
    /// Rule 3: `what` (a command line, URL or inline_python name) matches no entry of `lists`.
    NotAllowlisted { what: String, lists: String },
    /// Rule 3: `GOOSE_ALLOWLIST` is set but could not be loaded, so nothing can be checked.
    AllowlistUnavailable { url: String, detail: String },
    /// The config itself is unusable (e.g. a disallowed environment variable).
    InvalidConfig(ConfigError),
    /// The policy's own setup is wrong: `origin` (an env var or file) and what is wrong with it.
    Setup { origin: String, detail: String },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::CommandNotAllowed { cmd, allowed } => {
                let path = if cmd.contains('/') || cmd.contains('\\') { "; paths are not allowed, use the bare command name" } else { "" };
                write!(
                    f,
                    "policy: command `{}` refused by the allowed-commands rule (links and imports may run only: {}){path}; \
                     an administrator can allow more with GOSLING_ALLOWED_COMMANDS={} or \"allowed_commands\" in the allowlist file",
                    crate::extensions::deeplink::printable(cmd),
                    allowed.join(", "),
                    crate::extensions::deeplink::printable(cmd)
                )
            }
            PolicyError::InlineCode { cmd, arg, why } => write!(
                f,
                "policy: `{cmd} … {}` refused by the no-inline-code rule: {why}; install the server as a package and run it by name instead",
                crate::extensions::deeplink::printable(arg)
            ),
            PolicyError::ShellMetacharacter { arg, pattern } => write!(
                f,
                "policy: argument {:?} refused by the no-shell-syntax rule (it contains {pattern:?}); arguments are passed to the program as they are, remove the shell syntax",
                crate::extensions::deeplink::printable(arg)
            ),
            PolicyError::NotAllowlisted { what, lists } => write!(
                f,
                "policy: `{}` refused by the allowlist rule (not on {lists}); ask your administrator to add it, or set GOOSE_ALLOWLIST_WARNING=true to install with a warning",
                crate::extensions::deeplink::printable(what)
            ),
            PolicyError::AllowlistUnavailable { url, detail } => write!(
                f,
                "policy: refused by the allowlist rule: GOOSE_ALLOWLIST={url} could not be loaded ({detail}); installs are refused until it loads: fix the URL or unset GOOSE_ALLOWLIST"
            ),
            PolicyError::InvalidConfig(e) => write!(f, "policy: {e}"),
            PolicyError::Setup { origin, detail } => write!(f, "policy: {origin}: {detail}"),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PolicyError::InvalidConfig(e) => Some(e),
            PolicyError::CommandNotAllowed { .. }
            | PolicyError::InlineCode { .. }
            | PolicyError::ShellMetacharacter { .. }
            | PolicyError::NotAllowlisted { .. }
            | PolicyError::AllowlistUnavailable { .. }
            | PolicyError::Setup { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
enum Remote {
    Loaded(Vec<String>),
    Unavailable(String),
}

#[derive(Debug, Clone)]
struct LocalList {
    path: PathBuf,
    commands: Option<Vec<String>>,
    urls: Option<Vec<String>>,
}

/// The policy in force. Build it with `from_env` (or `permissive` when none is configured).
#[derive(Debug, Clone)]
pub struct Policy {
    allowed_commands: Vec<String>,
    remote: Option<(String, Remote)>,
    local: Option<LocalList>,
    warn_only: bool,
}

impl Policy {
    /// No allowlist, the default commands, refusals are refusals.
    pub fn permissive() -> Policy {
        Policy {
            allowed_commands: DEFAULT_COMMANDS.iter().map(|s| s.to_string()).collect(),
            remote: None,
            local: None,
            warn_only: false,
        }
    }

    /// Reads `GOSLING_ALLOWED_COMMANDS`, the local allowlist file and `GOOSE_ALLOWLIST` (fetched
    /// now; a failed fetch does not fail here but makes every check refuse, see the module
    /// header). Errors are setup mistakes: a bad env value, a missing or malformed file.
    pub fn from_env(env: &dyn Env, config_dir: &Path) -> Result<Policy, PolicyError> {
        let mut p = Policy::permissive();
        if let Some(list) = env.get("GOSLING_ALLOWED_COMMANDS") {
            for c in list.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                if c.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
                    return Err(PolicyError::Setup {
                        origin: "GOSLING_ALLOWED_COMMANDS".into(),
                        detail: format!("{c:?} is not a command name (comma-separated names, no spaces)"),
                    });
                }
                p.allow_command(c);
            }
        }
        let (file, explicit) = match env.get("GOSLING_ALLOWLIST_FILE") {
            Some(f) => (PathBuf::from(f), true),
            None => (config_dir.join("allowlist.json"), false),
        };
        if explicit || file.exists() {
            let (local, extra) = read_local(&file)?;
            for c in extra {
                p.allow_command(&c);
            }
            p.local = Some(local);
        }
        if let Some(real_url) = env.get("GOOSE_ALLOWLIST") {
            // Shown in messages and logs without credentials or query (it may carry a token).
            let url = redact_url(&real_url);
            let state = match fetch(&real_url).and_then(|t| parse_allowlist_yaml(&t)) {
                Ok(list) => {
                    if list.is_empty() {
                        log::warn!("policy: GOOSE_ALLOWLIST={url} lists no commands; as in goose, an empty allowlist allows every command");
                    }
                    Remote::Loaded(list)
                }
                Err(detail) => {
                    log::warn!("policy: GOOSE_ALLOWLIST={url} could not be loaded: {detail}; installs will be refused");
                    Remote::Unavailable(detail)
                }
            };
            p.remote = Some((url, state));
        }
        p.warn_only = env
            .get("GOOSE_ALLOWLIST_WARNING")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1");
        Ok(p)
    }

    fn allow_command(&mut self, c: &str) {
        if !self.allowed_commands.iter().any(|a| a == c) {
            self.allowed_commands.push(c.to_string());
        }
    }

    /// The commands rule 1 admits, defaults first.
    pub fn allowed_commands(&self) -> &[String] {
        &self.allowed_commands
    }

    /// Whether any allowlist (remote or local) is configured.
    pub fn has_allowlist(&self) -> bool {
        self.remote.is_some() || self.local.is_some()
    }

    /// Checks `config` added through `source`. Ok carries warnings to show the user (allowlist
    /// in warning mode, remote server not covered, legacy sse); Err says which rule refused.
    pub fn check(&self, config: &ExtensionConfig, source: InstallSource) -> Result<Vec<String>, PolicyError> {
        config.validate().map_err(PolicyError::InvalidConfig)?;
        let mut warnings = Vec::new();
        match config {
            ExtensionConfig::Stdio { cmd, args, .. } => {
                if source.checks_commands() {
                    self.check_command(cmd, args)?;
                }
                let line = format!("{cmd} {}", args.join(" ")).trim().to_string();
                self.check_command_allowlist(&line, &mut warnings)?;
            }
            ExtensionConfig::StreamableHttp { uri, .. } => self.check_url_allowlist(uri, &mut warnings)?,
            ExtensionConfig::InlinePython { name, .. } => {
                if self.has_command_list() {
                    let e = PolicyError::NotAllowlisted {
                        what: format!("inline_python extension {name}"),
                        lists: format!("{} (inline Python runs arbitrary code)", self.lists()),
                    };
                    self.refuse_or_warn(e, &mut warnings)?;
                }
            }
            ExtensionConfig::Sse { .. } => {
                warnings.push(format!("'{}': SSE is unsupported, migrate to streamable_http", config.key()))
            }
            ExtensionConfig::Builtin { .. } | ExtensionConfig::Platform { .. } | ExtensionConfig::Frontend { .. } => {}
        }
        Ok(warnings)
    }

    fn has_command_list(&self) -> bool {
        self.remote.is_some() || self.local.as_ref().is_some_and(|l| l.commands.is_some())
    }

    fn lists(&self) -> String {
        let mut v = Vec::new();
        if let Some((url, _)) = &self.remote {
            v.push(format!("GOOSE_ALLOWLIST={url}"));
        }
        if let Some(l) = &self.local {
            v.push(l.path.display().to_string());
        }
        v.join(" or ")
    }

    fn refuse_or_warn(&self, e: PolicyError, warnings: &mut Vec<String>) -> Result<(), PolicyError> {
        if self.warn_only {
            log::warn!("{e} (installing anyway: GOOSE_ALLOWLIST_WARNING=true)");
            warnings.push(format!("{e} (installing anyway because GOOSE_ALLOWLIST_WARNING=true)"));
            Ok(())
        } else {
            Err(e)
        }
    }

    fn check_command(&self, cmd: &str, args: &[String]) -> Result<(), PolicyError> {
        if !self.allowed_commands.iter().any(|a| a == cmd) {
            return Err(PolicyError::CommandNotAllowed {
                cmd: cmd.to_string(),
                allowed: self.allowed_commands.clone(),
            });
        }
        check_args(cmd, args)
    }

    fn check_command_allowlist(&self, line: &str, warnings: &mut Vec<String>) -> Result<(), PolicyError> {
        let mut configured = false;
        let mut unavailable = None;
        if let Some((url, state)) = &self.remote {
            match state {
                Remote::Loaded(list) if list.is_empty() => {}
                Remote::Loaded(list) => {
                    configured = true;
                    if list.iter().any(|p| line.starts_with(p.as_str())) {
                        return Ok(());
                    }
                }
                Remote::Unavailable(detail) => {
                    configured = true;
                    unavailable = Some(PolicyError::AllowlistUnavailable { url: url.clone(), detail: detail.clone() });
                }
            }
        }
        if let Some(LocalList { commands: Some(list), .. }) = &self.local {
            configured = true;
            if list.iter().any(|p| line.starts_with(p.as_str())) {
                return Ok(());
            }
        }
        if !configured {
            return Ok(());
        }
        let e =
            unavailable.unwrap_or_else(|| PolicyError::NotAllowlisted { what: line.to_string(), lists: self.lists() });
        self.refuse_or_warn(e, warnings)
    }

    fn check_url_allowlist(&self, uri: &str, warnings: &mut Vec<String>) -> Result<(), PolicyError> {
        match &self.local {
            Some(LocalList { urls: Some(list), path, .. }) => {
                if list.iter().any(|p| url_has_prefix(uri, p)) {
                    Ok(())
                } else {
                    self.refuse_or_warn(
                        PolicyError::NotAllowlisted {
                            what: uri.to_string(),
                            lists: format!("the urls of {}", path.display()),
                        },
                        warnings,
                    )
                }
            }
            _ => {
                if self.has_allowlist() {
                    warnings.push(format!(
                        "remote extension {} is not covered by the allowlist (it lists commands only); it is trusted as the server at that URL is",
                        crate::extensions::deeplink::printable(uri)
                    ));
                }
                Ok(())
            }
        }
    }
}

/// `url` without `user:password@` and without its query and fragment.
fn redact_url(url: &str) -> String {
    let (base, rest) = url.split_once(['?', '#']).map_or((url, false), |(b, _)| (b, true));
    let start = base.find("://").map_or(0, |i| i + 3);
    let auth_end = base[start..].find('/').map_or(base.len(), |i| start + i);
    let host = base[start..auth_end].rsplit('@').next().unwrap_or("");
    let creds = if base[start..auth_end].contains('@') { "…@" } else { "" };
    format!("{}{creds}{host}{}{}", &base[..start], &base[auth_end..], if rest { "?…" } else { "" })
}

/// Lower-cases the scheme and authority of a URL (paths stay case-sensitive).
fn normalize_origin(u: &str) -> String {
    let start = u.find("://").map_or(0, |i| i + 3);
    let end = u[start..].find(['/', '?', '#']).map_or(u.len(), |i| start + i);
    format!("{}{}", u[..end].to_ascii_lowercase(), &u[end..])
}

/// `uri` starts with `prefix`, and the prefix ends at a boundary (`/`, `?`, `#` or the end).
fn url_has_prefix(uri: &str, prefix: &str) -> bool {
    let (u, p) = (normalize_origin(uri), normalize_origin(prefix));
    if p.is_empty() || !u.starts_with(&p) {
        return false;
    }
    p.ends_with(['/', '?', '#']) || matches!(u[p.len()..].chars().next(), None | Some('/' | '?' | '#'))
}

const INTERPRETERS: [&str; 27] = [
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "csh",
    "tcsh",
    "fish",
    "ash",
    "busybox",
    "pwsh",
    "powershell",
    "cmd",
    "node",
    "nodejs",
    "deno",
    "bun",
    "perl",
    "ruby",
    "php",
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "osascript",
];

/// `sh`, `/bin/bash`, `python3.12`, `pwsh.exe`, `--entrypoint=sh` → the interpreter's name.
fn interpreter(arg: &str) -> Option<&'static str> {
    let v = if arg.starts_with("--") { arg.split_once('=').map(|(_, v)| v)? } else { arg };
    let base = v.rsplit(['/', '\\']).next().unwrap_or(v);
    let base = base.strip_suffix(".exe").unwrap_or(base).to_ascii_lowercase();
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS
        .iter()
        .copied()
        .find(|i| *i == base || (trimmed.starts_with("python") || trimmed.starts_with("pypy")) && *i == trimmed)
}

/// Flags that make an interpreter run the next argument as code.
fn is_eval_flag(arg: &str) -> bool {
    const EXACT: [&str; 14] = [
        "-c",
        "-e",
        "-p",
        "-r",
        "--eval",
        "--print",
        "--command",
        "-command",
        "-encodedcommand",
        "-enc",
        "/c",
        "/k",
        "eval",
        "--exec",
    ];
    let lower = arg.to_ascii_lowercase();
    if EXACT.contains(&lower.as_str())
        || lower.starts_with("--eval=")
        || lower.starts_with("--print=")
        || lower.starts_with("--command=")
    {
        return true;
    }
    // Short clusters: `-lc`, `-ec`, `-pe`, `-Bc`.
    let body = arg.strip_prefix('-').unwrap_or("");
    !arg.starts_with("--")
        && (2..=6).contains(&body.len())
        && body.bytes().all(|b| b.is_ascii_alphabetic())
        && (body.contains('c') || body.contains('e'))
}

const METACHARS: [&str; 8] = ["$(", "`", ";", "&&", "||", "|", "\n", "\r"];

/// Rule 2 for one command line; see the module header for the exact list.
fn check_args(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    let refuse =
        |arg: &str, why: String| Err(PolicyError::InlineCode { cmd: cmd.to_string(), arg: arg.to_string(), why });
    for arg in args {
        if let Some(m) = METACHARS.iter().find(|m| arg.contains(**m)) {
            return Err(PolicyError::ShellMetacharacter { arg: arg.clone(), pattern: m });
        }
    }
    if cmd == "npx" || cmd == "npx.cmd" {
        for arg in args {
            let opt = arg.split_once('=').map_or(arg.as_str(), |(o, _)| o);
            let cluster_c = arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 1 && arg[1..].contains('c');
            if matches!(opt, "-c" | "--call" | "-e" | "--eval" | "--node-options" | "--script-shell" | "--shell")
                || cluster_c
            {
                return refuse(
                    arg,
                    format!("npx with `{opt}` can run an arbitrary shell command or code (code injection)"),
                );
            }
        }
    }
    if (cmd == "gosling" || cmd == "goosed") && !(args.len() == 2 && args[0] == "mcp" && !args[1].starts_with('-')) {
        let shown = args.first().map_or("", String::as_str);
        return refuse(shown, format!("{cmd} may only be installed as `{cmd} mcp NAME` (a builtin extension), not to start a server or run other subcommands"));
    }
    if cmd == "jbang" {
        for arg in args {
            let opt = arg.split_once('=').map_or(arg.as_str(), |(o, _)| o);
            if matches!(opt, "-c" | "--code") {
                return refuse(arg, "jbang with `--code` runs the source text given in the link".into());
            }
        }
    }
    for (i, arg) in args.iter().enumerate() {
        if let Some(interp) = interpreter(arg) {
            if let Some(flag) = args[i + 1..].iter().find(|a| is_eval_flag(a)) {
                return refuse(flag, format!("`{arg}` followed by `{flag}` makes {interp} run an inline script"));
            }
        }
    }
    Ok(())
}

/// Reads the local allowlist file: `(list, allowed_commands)`.
fn read_local(path: &Path) -> Result<(LocalList, Vec<String>), PolicyError> {
    let origin = || path.display().to_string();
    let setup = |detail: String| PolicyError::Setup { origin: origin(), detail };
    let meta = std::fs::metadata(path).map_err(|e| {
        setup(format!("cannot read the allowlist file: {e}; create it or unset GOSLING_ALLOWLIST_FILE"))
    })?;
    if meta.len() > MAX_ALLOWLIST_BYTES {
        return Err(setup(format!("is larger than {MAX_ALLOWLIST_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| setup(format!("cannot read the allowlist file: {e}")))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| setup(format!("is not valid JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| setup(r#"must be a JSON object like {"commands": [...], "urls": [...]}"#.into()))?;
    let list = |key: &str| -> Result<Option<Vec<String>>, PolicyError> {
        match obj.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| setup(format!("`{key}` must be a list of non-empty strings")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(setup(format!("`{key}` must be a list of strings"))),
        }
    };
    for k in obj.keys() {
        if !matches!(k.as_str(), "commands" | "urls" | "allowed_commands") {
            return Err(setup(format!("unknown key `{k}`; the file takes `commands`, `urls` and `allowed_commands`")));
        }
    }
    let extra = list("allowed_commands")?.unwrap_or_default();
    for c in &extra {
        if c.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            return Err(setup(format!("allowed_commands: {c:?} is not a command name (no spaces)")));
        }
    }
    let local = LocalList { path: path.to_path_buf(), commands: list("commands")?, urls: list("urls")? };
    Ok((local, extra))
}

/// GETs the allowlist, bounded in time and size.
fn fetch(url: &str) -> Result<String, String> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err("it must be an http:// or https:// URL".into());
    }
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(FETCH_TIMEOUT))
        .max_redirects(5)
        .build()
        .new_agent();
    let mut resp = agent.get(url).call().map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("HTTP status {status}"));
    }
    resp.body_mut().with_config().limit(MAX_ALLOWLIST_BYTES).read_to_string().map_err(|e| e.to_string())
}

/// Parses goose's allowlist YAML: a top-level `extensions:` list whose items carry `command:`
/// (plain, single- or double-quoted scalars). Only that block form is understood; anything that
/// would leave an item without a command is an error rather than a silently shorter list.
pub fn parse_allowlist_yaml(text: &str) -> Result<Vec<String>, String> {
    let mut in_list = false;
    let mut seen_key = false;
    let mut items: Vec<Option<String>> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') || body == "---" {
            continue;
        }
        let indent = line.len() - body.len();
        if indent == 0 && !body.starts_with('-') {
            in_list = false;
            if let Some(rest) = body.strip_prefix("extensions:") {
                seen_key = true;
                let rest = strip_comment(rest).trim();
                match rest {
                    "" => in_list = true,
                    "[]" => {}
                    _ => {
                        return Err(format!(
                            "line {}: only the block list form `extensions:` / `  - command: …` is supported",
                            n + 1
                        ))
                    }
                }
            }
            continue;
        }
        if !in_list {
            continue;
        }
        let mut entry = body;
        if let Some(rest) = body.strip_prefix('-') {
            if !(rest.is_empty() || rest.starts_with(' ')) {
                return Err(format!("line {}: expected `- ` to start a list item", n + 1));
            }
            items.push(None);
            entry = rest.trim_start();
            if entry.is_empty() {
                continue;
            }
        }
        if entry.starts_with('{') {
            return Err(format!(
                "line {}: flow mappings ({{…}}) are not supported; write `- id: …` / `  command: …`",
                n + 1
            ));
        }
        if let Some(value) = entry.strip_prefix("command:") {
            let cmd = yaml_scalar(value).map_err(|e| format!("line {}: {e}", n + 1))?;
            match items.last_mut() {
                Some(slot) if slot.is_none() => *slot = Some(cmd),
                Some(_) => return Err(format!("line {}: an item has two `command` keys", n + 1)),
                None => return Err(format!("line {}: `command` outside a list item", n + 1)),
            }
        }
    }
    if !seen_key {
        return Err("no top-level `extensions:` key".into());
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            c.filter(|c| !c.trim().is_empty())
                .ok_or_else(|| format!("extensions item {} has no non-empty `command`", i + 1))
        })
        .collect()
}

fn strip_comment(s: &str) -> &str {
    match s.find(" #") {
        Some(i) => &s[..i],
        None if s.trim_start().starts_with('#') => "",
        None => s,
    }
}

/// A YAML scalar on one line: `'…'` (with `''`), `"…"` (with `\"`, `\\`), or plain.
fn yaml_scalar(v: &str) -> Result<String, String> {
    let v = v.trim();
    if let Some(rest) = v.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
        Err("unterminated single-quoted value".into())
    } else if let Some(rest) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Ok(out),
                '\\' => match chars.next() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('t') => out.push('\t'),
                    Some('/') => out.push('/'),
                    Some(o) => return Err(format!("unsupported escape \\{o} in a double-quoted value")),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err("unterminated double-quoted value".into())
    } else {
        Ok(strip_comment(v).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    struct MapEnv(HashMap<String, String>);
    impl Env for MapEnv {
        fn get(&self, key: &str) -> Option<String> {
            self.0.get(key).cloned()
        }
    }
    fn env(pairs: &[(&str, &str)]) -> MapEnv {
        MapEnv(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    fn stdio(cmd: &str, args: &[&str]) -> ExtensionConfig {
        ExtensionConfig::from_value(json!({"type":"stdio","name":"x","cmd":cmd,"args":args})).unwrap()
    }
    fn remote(uri: &str) -> ExtensionConfig {
        ExtensionConfig::from_value(json!({"type":"streamable_http","name":"r","description":"","uri":uri})).unwrap()
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosling-policy-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn allowed_commands_rule_for_links_and_imports_only() {
        let p = Policy::permissive();
        for c in DEFAULT_COMMANDS {
            let args: &[&str] = if c == "gosling" || c == "goosed" { &["mcp", "developer"] } else { &["pkg"] };
            assert!(p.check(&stdio(c, args), InstallSource::DeepLink).is_ok(), "{c}");
        }
        for bad in ["bash", "/usr/bin/npx", "./npx", "NPX", "npx ", "python3", "node"] {
            let e = p.check(&stdio(bad, &[]), InstallSource::DeepLink).unwrap_err();
            assert!(matches!(e, PolicyError::CommandNotAllowed { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("allowed-commands rule"), "{e}");
            assert!(p.check(&stdio(bad, &[]), InstallSource::Import).is_err());
            for s in [InstallSource::ConfigApi, InstallSource::AddExtension, InstallSource::Cli] {
                assert!(p.check(&stdio(bad, &[]), s).is_ok(), "{bad} via {s:?}");
            }
        }
        assert!(p
            .check(&stdio("/usr/bin/npx", &[]), InstallSource::DeepLink)
            .unwrap_err()
            .to_string()
            .contains("paths are not allowed"));
    }

    #[test]
    fn inline_code_is_refused() {
        let p = Policy::permissive();
        let refused: &[(&str, &[&str])] = &[
            ("npx", &["-c", "echo hi"]),
            ("npx", &["-y", "pkg", "-c", "x"]),
            ("npx.cmd", &["-c", "x"]),
            ("npx", &["--call", "x"]),
            ("npx", &["--call=x"]),
            ("npx", &["-yc", "x"]),
            ("npx", &["-e", "x"]),
            ("npx", &["--eval=x"]),
            ("npx", &["--node-options=--require=/tmp/x.js", "pkg"]),
            ("npx", &["--script-shell", "/bin/sh"]),
            ("jbang", &["--code", "class A{}"]),
            ("uvx", &["python", "-c", "import os"]),
            ("uvx", &["--from", "x", "python3.12", "-c", "import os"]),
            ("docker", &["run", "-i", "alpine", "sh", "-c", "id"]),
            ("docker", &["run", "--entrypoint=sh", "alpine", "-c", "id"]),
            ("docker", &["run", "--entrypoint", "/bin/bash", "alpine", "-lc", "id"]),
            ("uvx", &["node", "--eval", "1"]),
            ("npx", &["pkg", "$(id)"]),
            ("npx", &["pkg", "`id`"]),
            ("uvx", &["pkg;id"]),
            ("uvx", &["a && b"]),
            ("uvx", &["a | b"]),
            ("uvx", &["a\nb"]),
            ("gosling", &["agent", "--host", "0.0.0.0"]),
            ("gosling", &["install", "--yes", "goose://extension?cmd=uvx&name=x"]),
            ("goosed", &["agent"]),
            ("gosling", &["mcp"]),
        ];
        for (cmd, args) in refused {
            let e = p.check(&stdio(cmd, args), InstallSource::DeepLink).unwrap_err();
            assert!(
                matches!(e, PolicyError::InlineCode { .. } | PolicyError::ShellMetacharacter { .. }),
                "{cmd} {args:?}: {e}"
            );
        }
        let fine: &[(&str, &[&str])] = &[
            ("npx", &["-y", "@modelcontextprotocol/server-everything"]),
            ("npx", &["-y", "mcp-remote", "https://h/mcp?a=1&b=2"]),
            ("uvx", &["mcp-server-fetch"]),
            ("uvx", &["--from", "git+https://github.com/x/y", "y-server", "--config", "c.json"]),
            ("docker", &["run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/github/github-mcp-server"]),
            ("uvx", &["python-dotenv-mcp", "-c", "x"]),
            ("gosling", &["mcp", "developer"]),
            ("goosed", &["mcp", "memory"]),
        ];
        for (cmd, args) in fine {
            assert!(p.check(&stdio(cmd, args), InstallSource::DeepLink).is_ok(), "{cmd} {args:?}");
        }
        // The API paths take the user's own config: no argument rules there.
        assert!(p.check(&stdio("npx", &["-c", "x"]), InstallSource::ConfigApi).is_ok());
    }

    #[test]
    fn yaml_allowlist() {
        let y = "# comment\nextensions:\n  - id: fetch\n    command: uvx mcp-server-fetch\n  - id: \"e\"\n    command: \"npx -y @modelcontextprotocol/server-everything\" # trailing\n  - command: 'it''s'\nother: 1\n";
        assert_eq!(
            parse_allowlist_yaml(y).unwrap(),
            ["uvx mcp-server-fetch", "npx -y @modelcontextprotocol/server-everything", "it's"]
        );
        assert_eq!(parse_allowlist_yaml("extensions: []\n").unwrap(), Vec::<String>::new());
        assert!(parse_allowlist_yaml("foo: 1\n").is_err());
        assert!(parse_allowlist_yaml("extensions:\n  - id: x\n").is_err());
        assert!(parse_allowlist_yaml("extensions:\n  - {id: x, command: y}\n").is_err());
        assert!(parse_allowlist_yaml("extensions:\n  - command: \"open\n").is_err());
    }

    #[test]
    fn local_allowlist_file_applies_to_every_source() {
        let d = tmpdir("local");
        std::fs::write(
            d.join("allowlist.json"),
            r#"{"commands":["uvx mcp-server-fetch"],"urls":["https://mcp.example.com/"],"allowed_commands":["node"]}"#,
        )
        .unwrap();
        let p = Policy::from_env(&env(&[]), &d).unwrap();
        assert!(p.has_allowlist());
        assert!(p.allowed_commands().iter().any(|c| c == "node"));
        for s in [
            InstallSource::DeepLink,
            InstallSource::ConfigApi,
            InstallSource::AddExtension,
            InstallSource::Import,
            InstallSource::Cli,
        ] {
            assert!(p.check(&stdio("uvx", &["mcp-server-fetch"]), s).unwrap().is_empty());
            let e = p.check(&stdio("uvx", &["other"]), s).unwrap_err();
            assert!(e.to_string().contains("allowlist rule") && e.to_string().contains("allowlist.json"), "{e}");
            assert!(p.check(&remote("https://mcp.example.com/mcp"), s).is_ok());
            assert!(p.check(&remote("https://MCP.example.com/mcp"), s).is_ok());
            assert!(p.check(&remote("https://evil.example.com/mcp"), s).is_err());
            let ip = ExtensionConfig::from_value(
                json!({"type":"inline_python","name":"py","description":"","code":"print(1)"}),
            )
            .unwrap();
            assert!(p.check(&ip, s).is_err());
        }
        // `node` was added to rule 1 by the file, but the allowlist still has the last word.
        assert!(matches!(
            p.check(&stdio("node", &["x.js"]), InstallSource::DeepLink),
            Err(PolicyError::NotAllowlisted { .. })
        ));
    }

    #[test]
    fn allowlist_url_is_redacted_in_messages() {
        assert_eq!(redact_url("https://u:p@h.io/a.yaml?token=s3"), "https://…@h.io/a.yaml?…");
        assert_eq!(redact_url("http://h.io/a.yaml"), "http://h.io/a.yaml");
        let d = tmpdir("redact");
        let p = Policy::from_env(&env(&[("GOOSE_ALLOWLIST", "http://127.0.0.1:9/a.yaml?token=s3cret")]), &d).unwrap();
        let e = p.check(&stdio("uvx", &["x"]), InstallSource::Cli).unwrap_err().to_string();
        assert!(!e.contains("s3cret") && e.contains("http://127.0.0.1:9/a.yaml?…"), "{e}");
    }

    #[test]
    fn url_prefixes_end_at_a_boundary() {
        assert!(url_has_prefix("https://h.io/mcp", "https://h.io"));
        assert!(url_has_prefix("https://h.io", "https://h.io"));
        assert!(!url_has_prefix("https://h.io.evil/mcp", "https://h.io"));
        assert!(!url_has_prefix("https://h.io:8443/mcp", "https://h.io"));
        assert!(url_has_prefix("https://h.io/mcp/x", "https://h.io/mcp/"));
        assert!(!url_has_prefix("https://h.io/MCP", "https://h.io/mcp"));
    }

    #[test]
    fn warning_mode_and_setup_errors() {
        let d = tmpdir("warn");
        let f = d.join("list.json");
        std::fs::write(&f, r#"{"commands":["uvx mcp-server-fetch"]}"#).unwrap();
        let fs = f.to_str().unwrap();
        let p =
            Policy::from_env(&env(&[("GOSLING_ALLOWLIST_FILE", fs), ("GOOSE_ALLOWLIST_WARNING", "true")]), &d).unwrap();
        let w = p.check(&stdio("uvx", &["other"]), InstallSource::ConfigApi).unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("GOOSE_ALLOWLIST_WARNING=true"), "{w:?}");
        // Warning mode does not relax rules 1 and 2.
        assert!(p.check(&stdio("bash", &[]), InstallSource::DeepLink).is_err());
        assert!(p.check(&stdio("npx", &["-c", "x"]), InstallSource::DeepLink).is_err());
        // Only commands listed: remote servers pass with a warning.
        assert_eq!(p.check(&remote("https://any.example/mcp"), InstallSource::DeepLink).unwrap().len(), 1);

        std::fs::write(&f, r#"{"command":["typo"]}"#).unwrap();
        assert!(Policy::from_env(&env(&[("GOSLING_ALLOWLIST_FILE", fs)]), &d)
            .unwrap_err()
            .to_string()
            .contains("unknown key `command`"));
        std::fs::write(&f, "not json").unwrap();
        assert!(Policy::from_env(&env(&[("GOSLING_ALLOWLIST_FILE", fs)]), &d).is_err());
        assert!(Policy::from_env(&env(&[("GOSLING_ALLOWLIST_FILE", "/nonexistent/x.json")]), &d).is_err());
        assert!(Policy::from_env(&env(&[("GOSLING_ALLOWED_COMMANDS", "a b")]), &d).is_err());
        let p = Policy::from_env(&env(&[("GOSLING_ALLOWED_COMMANDS", "node, /opt/x/server ,")]), &d).unwrap();
        assert!(!p.has_allowlist());
        assert!(p.check(&stdio("/opt/x/server", &[]), InstallSource::DeepLink).is_ok());
        assert!(p.check(&stdio("node", &["s.js"]), InstallSource::Import).is_ok());
    }

    #[test]
    fn unreachable_remote_allowlist_refuses() {
        let d = tmpdir("remote");
        // Port 9 on loopback: nothing listens there; the connect fails at once.
        let p = Policy::from_env(&env(&[("GOOSE_ALLOWLIST", "http://127.0.0.1:9/allowlist.yaml")]), &d).unwrap();
        let e = p.check(&stdio("uvx", &["mcp-server-fetch"]), InstallSource::ConfigApi).unwrap_err();
        assert!(matches!(e, PolicyError::AllowlistUnavailable { .. }), "{e}");
        assert!(e.to_string().contains("unset GOOSE_ALLOWLIST"), "{e}");
        let b = ExtensionConfig::from_value(json!({"type":"builtin","name":"developer"})).unwrap();
        assert!(p.check(&b, InstallSource::ConfigApi).is_ok());
    }
}
