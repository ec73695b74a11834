//! `PolicyError`: every refusal of the trust policy, each naming the rule, the argument or
//! variable at fault, and what to do. Only the text lives here; the rules decide elsewhere.

use super::yaml::YamlError;
use crate::config::ConfigError;
use gosling_util::printable;
use std::fmt;

/// A refused install, or a policy that cannot be set up.
#[derive(Debug)]
pub enum PolicyError {
    /// Rule 1: `cmd` is not an allowed command. Add it with `GOSLING_ALLOWED_COMMANDS`.
    CommandNotAllowed { cmd: String, allowed: Vec<String> },
    /// Rules 2 and 3: `arg` is outside the grammar of `cmd` (an option not listed, a nested
    /// launcher, a program gosling does not run, inline code); `rule` names which rule, `why`
    /// the grammar that was expected.
    InlineCode { cmd: String, arg: String, why: String, rule: &'static str },
    /// Rule 3: `arg` contains shell syntax (`pattern`).
    ShellMetacharacter { arg: String, pattern: &'static str },
    /// Rule 2: what a launcher (`npx`, `uvx`, `jbang`) or `docker run` is asked to run, `arg`,
    /// is not a registry package or image (a path, a URL, a bad spec); `why` gives the grammar.
    NotAPackage { cmd: String, arg: String, why: String },
    /// Rule 4: `arg` would give a container access to the host (an option not listed, a mount
    /// outside the working dir, an entrypoint override).
    ContainerReach { cmd: String, arg: String, why: String },
    /// Rule 5: an environment variable (in `field`: envs, env_keys or a header) that makes a
    /// program load code or fetch from elsewhere, or (for links, imports and recipes) one
    /// outside the names untrusted content may set; `message` says which and why.
    EnvRefused { field: String, name: String, message: String },
    /// Rule 6: an extension variable names one of gosling's own secrets or settings.
    ReservedSecret { field: String, name: String },
    /// Rule 7: `what` (a command line, URL or inline_python name) matches no entry of `lists`.
    NotAllowlisted { what: String, lists: String },
    /// Rule 7: `GOOSE_ALLOWLIST` is set but could not be loaded, so nothing can be checked.
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
            PolicyError::InlineCode { cmd, arg, why, rule } => write!(
                f,
                "policy: `{} … {}` refused by the {rule} rule: {why}; docs/install.md lists each launcher's and interpreter's grammar",
                printable(cmd),
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
                "policy: `{} … {}` refused by the package-spec rule: {why}; see docs/install.md for the grammar",
                printable(cmd),
                printable(arg)
            ),
            PolicyError::ContainerReach { cmd, arg, why } => write!(
                f,
                "policy: `{} … {}` refused by the container-isolation rule: {why}",
                printable(cmd),
                printable(arg)
            ),
            PolicyError::EnvRefused { field, message, .. } => {
                write!(f, "policy: refused by the environment rule: {field}: {}", printable(message))
            }
            PolicyError::ReservedSecret { field, name } => write!(
                f,
                "policy: refused by the own-secrets rule: {}",
                crate::config::reserved_secret_message(&printable(name), field)
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

/// Why goose's allowlist (`GOOSE_ALLOWLIST`) could not be used, for the message that
/// refuses installs while it is unavailable.
#[derive(Debug, Clone, PartialEq)]
pub enum AllowlistError {
    NotHttp,
    Fetch(String),
    Status(u16),
    /// The YAML could not be read as goose's allowlist.
    Yaml(YamlError),
}

impl fmt::Display for AllowlistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowlistError::NotHttp => write!(f, "it must be an http:// or https:// URL"),
            AllowlistError::Fetch(e) => write!(f, "{e}"),
            AllowlistError::Status(s) => write!(f, "HTTP status {s}"),
            AllowlistError::Yaml(e) => write!(f, "{e}"),
        }
    }
}
