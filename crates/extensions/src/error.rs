//! `Error`: every failure of the extensions layer, one type. Its variants are what callers
//! decide on (a status code, goose's ExtensionError text, which policy rule refused); the detail
//! they carry (`Refusal`, `Unavailable`, `Malformed`, `Invalid`, `Blocked`) is plain data with a
//! text, not an error of its own. `source()` is the lower layer's error where there is one.
//!
//! A leaf module: the others use it, it uses none of them.

use gosling_util::printable;
use std::fmt;

/// A failure of the extensions layer.
#[derive(Debug)]
pub enum Error {
    // ---- Configs, links and imports: the client's input is wrong.
    /// A config that cannot be used as given; `field` names the offending field.
    Config { field: String, message: String },
    /// A rejected link, or a link or import that would replace an installed extension: `param`
    /// is the query parameter (or `scheme`, `host`, `link`, `name`) at fault and `rule` says what
    /// it must look like.
    Link { param: String, rule: String },
    /// An `mcpServers` file or entry that cannot be imported: `entry` is the server's name (None
    /// for the file as a whole), `field` the offending field.
    Import { entry: Option<String>, field: String, message: String },
    /// An `mcpServers` file that is not JSON.
    ImportJson(serde_json::Error),

    // ---- The trust policy.
    /// A rule of the trust policy refuses the install or the launch; `Refusal` names the rule.
    Refused(Refusal),
    /// The policy was asked about a config that is itself unusable (an `Error::Config`).
    PolicyConfig(Box<Error>),
    /// The policy's own setup is wrong: `origin` (an env var or file) and what is wrong with it.
    PolicySetup { origin: String, detail: String },

    // ---- Consent (`consent`): the person's approval of a launch from elsewhere.
    /// Nothing approved this launch (no `approve` given, not on the allowlist).
    ConsentNeeded { name: String, digest: String },
    /// The launch differs from the one approved.
    ConsentChanged { name: String, approved: String, now: String },
    /// A stored consent record that cannot be read.
    ConsentMalformed { name: String, detail: String },

    // ---- Activation (`runtime`); the texts are goose's ExtensionError texts.
    /// The config cannot run as given (goose: "invalid config: ...").
    InvalidConfig(Invalid),
    /// The trust policy or the consent in force refuses to start it.
    NotStarted(Blocked),
    /// Starting or initializing the server failed (goose: "failed to initialize MCP client: ...").
    Start(gosling_mcp::error::Error),
    /// gosling itself failed, not the config or the server: an activation panicked.
    Panicked,
    /// gosling itself failed: no thread for an activation.
    Thread(std::io::Error),
    /// gosling itself failed: an `inline_python` extension's code could not be written.
    Script(gosling_store::atomic::Error),

    // ---- Tool calls and resource reads (`runtime`).
    /// No active extension provides this tool (or it is filtered by `available_tools`).
    UnknownTool(String),
    /// No active extension of this name in the session.
    UnknownExtension(String),
    /// A `frontend` tool: the client must execute it.
    FrontendTool(String),
    /// The extension's child died and is being restarted.
    Restarting { extension: String, detail: String },
    /// The extension's server answered with an error, or the connection failed.
    Mcp { extension: String, error: Box<gosling_mcp::error::Error> },

    // ---- The config store (`config::ExtensionStore`).
    /// Reading or writing the extensions of the config store failed.
    Store(gosling_store::atomic::Error),
}

impl Error {
    /// A config error as goose's activation text ("invalid config: ...").
    pub fn invalid_config(e: Error) -> Error {
        Error::InvalidConfig(Invalid::Config(Box::new(e)))
    }

    /// A policy or consent refusal of a launch, as activation reports it ("not started: ...").
    pub fn not_started(e: Error) -> Error {
        Error::NotStarted(Blocked::Check(Box::new(e)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { field, message } => write!(f, "invalid extension config: `{field}`: {message}"),
            Error::Link { param, rule } => write!(f, "deeplink: `{param}`: {rule}"),
            Error::Import { entry: Some(e), field, message } => {
                write!(f, "import: mcpServers.{}.{field}: {message}", printable(e))
            }
            Error::Import { entry: None, field, message } => write!(f, "import: `{field}`: {message}"),
            Error::ImportJson(e) => write!(f, "import: `file`: is not valid JSON: {e}"),
            Error::Refused(r) => r.fmt(f),
            Error::PolicyConfig(e) => write!(f, "policy: {e}"),
            Error::PolicySetup { origin, detail } => write!(f, "policy: {origin}: {detail}"),
            Error::ConsentNeeded { name, digest } => write!(
                f,
                "consent: extension {:?} came from elsewhere and runs only after you approve its launch: review its summary \
                 and send its digest as approve ({digest})",
                printable(name)
            ),
            Error::ConsentChanged { name, approved, now } => write!(
                f,
                "consent: extension {:?} is not the launch that was approved (approved {approved}, now {now}); nothing was \
                 saved or started: review its summary again and approve the new digest (a stored extension: save it through \
                 Desktop's settings or POST /config/extensions, which is your approval, or remove it and install it again)",
                printable(name)
            ),
            Error::ConsentMalformed { name, detail } => write!(
                f,
                "consent: the stored approval of extension {:?} cannot be read ({detail}); save the extension again through \
                 Desktop's settings or POST /config/extensions",
                printable(name)
            ),
            Error::InvalidConfig(i) => write!(f, "invalid config: {i}"),
            Error::NotStarted(b) => write!(
                f,
                "not started: the current trust policy refuses it: {b} (change the allowlist or remove the extension)"
            ),
            Error::Start(e) => write!(f, "failed to initialize MCP client: {e}"),
            Error::Panicked => write!(f, "internal error: activation panicked"),
            Error::Thread(e) => write!(f, "internal error: cannot start a thread: {e}"),
            Error::Script(e) => write!(f, "internal error: {e}"),
            Error::UnknownTool(t) => write!(f, "tool {t:?} not found; list the session's tools with GET /agent/tools"),
            Error::UnknownExtension(e) => {
                write!(f, "extension {e:?} is not active in this session; add it with /agent/add_extension")
            }
            Error::FrontendTool(t) => write!(
                f,
                "frontend tool execution requires the frontend host: {t} is run by the client, not the server"
            ),
            Error::Restarting { extension, detail } => {
                write!(f, "extension {extension} is restarting after its process exited; retry shortly. {detail}")
            }
            Error::Mcp { extension, error } => write!(f, "extension {extension}: {error}"),
            Error::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::PolicyConfig(e) => Some(&**e),
            Error::InvalidConfig(Invalid::Config(e)) | Error::NotStarted(Blocked::Check(e)) => Some(&**e),
            Error::InvalidConfig(Invalid::Builtin(e)) => Some(e),
            Error::InvalidConfig(Invalid::Headers(e)) | Error::Start(e) => Some(e),
            Error::Mcp { error, .. } => Some(&**error),
            Error::ImportJson(e) => Some(e),
            Error::Thread(e) => Some(e),
            Error::Script(e) | Error::Store(e) => Some(e),
            Error::Config { .. }
            | Error::Link { .. }
            | Error::Import { .. }
            | Error::Refused(_)
            | Error::PolicySetup { .. }
            | Error::ConsentNeeded { .. }
            | Error::ConsentChanged { .. }
            | Error::ConsentMalformed { .. }
            | Error::InvalidConfig(Invalid::Message(_))
            | Error::NotStarted(Blocked::Unmapped { .. } | Blocked::OwnSecret { .. } | Blocked::Unconfinable { .. })
            | Error::Panicked
            | Error::UnknownTool(_)
            | Error::UnknownExtension(_)
            | Error::FrontendTool(_)
            | Error::Restarting { .. } => None,
        }
    }
}

/// The text of rule 6 (own secrets): `name`, read by `field`, is one of gosling's own.
fn reserved_secret_message(name: &str, field: &str) -> String {
    format!(
        "{field}: {name} is one of gosling's own secrets or settings (server key, TLS, model provider); \
         an extension may never read it, even if a value is stored under that name; give the extension \
         its own secret under another name"
    )
}

/// Which rule of the trust policy refused (`Error::Refused`), with the argument or variable at
/// fault and what to do. Data, not an error: `policy` decides, this only says.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
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
    AllowlistUnavailable { url: String, detail: Unavailable },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::CommandNotAllowed { cmd, allowed } => {
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
            Refusal::InlineCode { cmd, arg, why, rule } => write!(
                f,
                "policy: `{} … {}` refused by the {rule} rule: {why}; docs/install.md lists each launcher's and interpreter's grammar",
                printable(cmd),
                printable(arg)
            ),
            Refusal::ShellMetacharacter { arg, pattern } => write!(
                f,
                "policy: argument {:?} refused by the no-shell-syntax rule (it contains {pattern:?}); arguments are passed to the program as they are, remove the shell syntax",
                printable(arg)
            ),
            Refusal::NotAllowlisted { what, lists } => write!(
                f,
                "policy: `{}` refused by the allowlist rule (not on {lists}); ask your administrator to add it, or set GOOSE_ALLOWLIST_WARNING=true to install with a warning",
                printable(what)
            ),
            Refusal::AllowlistUnavailable { url, detail } => write!(
                f,
                "policy: refused by the allowlist rule: GOOSE_ALLOWLIST={url} could not be loaded ({detail}); installs are refused until it loads: fix the URL or unset GOOSE_ALLOWLIST"
            ),
            Refusal::NotAPackage { cmd, arg, why } => write!(
                f,
                "policy: `{} … {}` refused by the package-spec rule: {why}; see docs/install.md for the grammar",
                printable(cmd),
                printable(arg)
            ),
            Refusal::ContainerReach { cmd, arg, why } => write!(
                f,
                "policy: `{} … {}` refused by the container-isolation rule: {why}",
                printable(cmd),
                printable(arg)
            ),
            Refusal::EnvRefused { field, message, .. } => {
                write!(f, "policy: refused by the environment rule: {field}: {}", printable(message))
            }
            Refusal::ReservedSecret { field, name } => write!(
                f,
                "policy: refused by the own-secrets rule: {}",
                reserved_secret_message(&printable(name), field)
            ),
        }
    }
}

/// Why goose's allowlist (`GOOSE_ALLOWLIST`) could not be used, for the refusal of installs
/// while it is unavailable (`Refusal::AllowlistUnavailable`).
#[derive(Debug, Clone, PartialEq)]
pub enum Unavailable {
    NotHttp,
    Fetch(String),
    Status(u16),
    /// The YAML could not be read as goose's allowlist.
    Yaml(Malformed),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NotHttp => write!(f, "it must be an http:// or https:// URL"),
            Unavailable::Fetch(e) => write!(f, "{e}"),
            Unavailable::Status(s) => write!(f, "HTTP status {s}"),
            Unavailable::Yaml(e) => write!(f, "{e}"),
        }
    }
}

/// Why a text is not goose's allowlist YAML.
#[derive(Debug, Clone, PartialEq)]
pub enum Malformed {
    /// A line of the YAML (1-based) and what is wrong with it.
    Line(usize, YamlProblem),
    NoExtensionsKey,
    /// The 1-based item without a command.
    EmptyCommand(usize),
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Line(n, p) => write!(f, "line {n}: {p}"),
            Malformed::NoExtensionsKey => write!(f, "no top-level `extensions:` key"),
            Malformed::EmptyCommand(i) => write!(f, "extensions item {i} has no non-empty `command`"),
        }
    }
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

/// Why a config cannot run (`Error::InvalidConfig`, goose's "invalid config: ...").
#[derive(Debug)]
pub enum Invalid {
    /// gosling's own explanation: a type gosling does not run, a missing secret, no Python.
    Message(String),
    /// A check of the config refused it: a field (`Error::Config`, of which goose shows only the
    /// message) or a policy rule on the launch as configured (`Error::Refused`).
    Config(Box<Error>),
    /// The builtin cannot be launched.
    Builtin(gosling_builtins::Error),
    /// The header values cannot be filled in from the extension's variables.
    Headers(gosling_mcp::error::Error),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Message(m) => f.write_str(m),
            Invalid::Config(e) => match &**e {
                Error::Config { message, .. } => f.write_str(message),
                e => e.fmt(f),
            },
            Invalid::Builtin(e) => e.fmt(f),
            Invalid::Headers(e) => e.fmt(f),
        }
    }
}

/// Why the trust policy or the consent in force refuses to start an extension
/// (`Error::NotStarted`).
#[derive(Debug)]
pub enum Blocked {
    /// The policy's check (`Error::Refused`, `PolicyConfig`, `PolicySetup`) or the consent check
    /// (`Error::Consent…`) refused it.
    Check(Box<Error>),
    /// It reads `secrets` that its consent record does not let it read.
    Unmapped { name: String, secrets: Vec<String> },
    /// Its OAuth client secret (`field`) is `name`, one of gosling's own secrets.
    OwnSecret { name: String, field: &'static str },
    /// This kernel cannot confine a stdio extension (`missing`: Landlock, user namespaces) and
    /// the operator did not opt it out (`sandbox.unconfined`, `GOSLING_UNCONFINED=1`).
    Unconfinable { name: String, missing: String },
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocked::Check(e) => e.fmt(f),
            Blocked::Unmapped { name, secrets } => write!(
                f,
                "consent: extension {name} reads {}, which the person did not approve for it; nothing was started: review its summary and approve it again",
                secrets.join(", ")
            ),
            Blocked::OwnSecret { name, field } => f.write_str(&reserved_secret_message(name, field)),
            Blocked::Unconfinable { name, missing } => write!(
                f,
                "sandbox: extension {name} was not started: this kernel lacks {missing}, so it cannot be confined; run gosling on a kernel that has them, or opt out knowingly with \"sandbox\": {{\"unconfined\": true}} in its config (or GOSLING_UNCONFINED=1 for all)"
            ),
        }
    }
}
