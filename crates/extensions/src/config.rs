//! goose's `ExtensionConfig` and the persisted `ExtensionEntry`, with goose's exact JSON shapes.
//!
//! What goose writes we read, and what we write goose reads: the `type` tag with snake_case
//! values, snake_case fields, `description` null or absent read as `""`, optional fields left
//! out when unset, and fields we do not know (e.g. `installation_notes`, `socket`) kept as they
//! came. This module only describes and checks configs; starting them is `extensions::runtime`'s
//! job.

use crate::error::Error;
use gosling_store::atomic::Error as StoreError;
use gosling_store::config_store::ConfigStore;
use gosling_util::{in_words, word_matches};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// goose's `DEFAULT_EXTENSION_TIMEOUT`, seconds: bounds initialize and each request.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// The one wording for an `sse` extension, wherever it is met (activation, import, deeplink,
/// policy warnings); callers add what to change in their own input.
pub use gosling_mcp::error::SSE_UNSUPPORTED;

/// Environment variables an extension config may not set (goose's list, compared
/// case-insensitively): they change how the child's runtime loads code. `ENV_FAMILIES` extends it.
pub const DISALLOWED_ENV_KEYS: &str = "PATH PATHEXT SystemRoot windir \
    LD_LIBRARY_PATH LD_PRELOAD LD_AUDIT LD_DEBUG LD_BIND_NOW LD_ASSUME_KERNEL \
    DYLD_LIBRARY_PATH DYLD_INSERT_LIBRARIES DYLD_FRAMEWORK_PATH PYTHONPATH PYTHONHOME NODE_OPTIONS RUBYOPT \
    GEM_PATH GEM_HOME CLASSPATH GO111MODULE GOROOT APPINIT_DLLS SESSIONNAME ComSpec TEMP TMP LOCALAPPDATA \
    USERPROFILE HOMEDRIVE HOMEPATH";

/// Every family refused beyond `DISALLOWED_ENV_KEYS`, each with why: `X*` is a prefix, `*X` a
/// suffix, anything else a whole name (upper case; names are compared upper-cased). Thought out
/// as an attacker would: anything that makes an interpreter, loader, package manager or container
/// engine load code or fetch from elsewhere. A name takes the first family it matches, in this
/// order. docs/install.md lists the same table; keep them together.
pub const ENV_FAMILIES: &[(&str, &str)] = &[
    (
        "it makes the dynamic loader or C library load other code",
        "LD_* DYLD_* GCONV_PATH GLIBC_TUNABLES HOSTALIASES LOCPATH NLSPATH RES_* LOCALDOMAIN \
         *LIBRARY_PATH *_PLUGIN_PATH *_MODULE_PATH GTK_* GIO_* OPENSSL_*",
    ),
    (
        "it makes a shell run code from it or from a file it names",
        "BASH_ENV ENV BASH_FUNC_* SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND IFS CDPATH ZDOTDIR",
    ),
    (
        "it makes Python or its package tools load code or fetch packages from elsewhere",
        "PYTHON* PIP_* PIPX_* UV_* VIRTUAL_ENV CONDA* POETRY_*",
    ),
    (
        "it makes Node.js or its package managers load code or fetch packages from elsewhere",
        "NODE_* NPM_* YARN_* PNPM_* COREPACK_* BUN_* DENO_* ELECTRON_* PREFIX",
    ),
    (
        "it makes the JVM or jbang load agents, classes or dependencies from elsewhere",
        "JAVA_* _JAVA_OPTIONS JDK_JAVA_OPTIONS JBANG_* MAVEN_* M2_HOME GRADLE_* *_OPTS *_OPTIONS",
    ),
    (
        "it makes an interpreter load code it names",
        "PERL* RUBY* GEM_* BUNDLE* LUA_* PHP* TCL* TK_LIBRARY R_PROFILE* R_ENVIRON* R_LIBS* \
         DOTNET_* COMPLUS_* CORECLR_* GOFLAGS GOPATH GOTOOLCHAIN GOENV RUSTC_WRAPPER",
    ),
    ("it points the container engine at another daemon or configuration", "DOCKER_* CONTAINER* PODMAN_* BUILDKIT_*"),
    (
        "it redirects where programs fetch from or whom they trust (proxy, registry, certificates)",
        "*_PROXY *_REGISTRY *_INDEX_URL *_CA_BUNDLE *_CA_CERTS SSL_* GIT_* NETRC WGETRC CURL_HOME \
         GOPROXY GOSUMDB GONOSUMDB GOINSECURE GOPRIVATE GONOPROXY",
    ),
    (
        "it names a program that tools start, or where they read their configuration",
        "HOME XDG_* SHELL EDITOR VISUAL PAGER BROWSER",
    ),
];

/// The message that refuses `key` as an extension's environment variable, if one does: its
/// name, the family (of `ENV_FAMILIES`, else goose's `DISALLOWED_ENV_KEYS`) and why, compared
/// case-insensitively. The one place that decides; every install path and the runtime ask here.
pub fn disallowed_env_message(key: &str) -> Option<String> {
    let upper = key.to_ascii_uppercase();
    let family = ENV_FAMILIES.iter().find_map(|(why, names)| {
        names.split_whitespace().find(|p| word_matches(p, &upper)).map(|p| (format!("the {p} family"), *why))
    });
    let goose = || {
        let listed = DISALLOWED_ENV_KEYS.split_whitespace().any(|k| k.eq_ignore_ascii_case(key));
        let why = "goose refuses it too: it changes how the child's runtime finds or loads code";
        listed.then(|| ("goose's disallowed list".to_string(), why))
    };
    let (family, why) = family.or_else(goose)?;
    Some(format!("environment variable {key} is refused ({family}): {why}; remove it"))
}

/// The last word of a name that a link, an import or a recipe may set: words that name data a
/// server reads — a credential, an address, an identifier, a quantity, a switch, a format — never
/// a program, code or a place code is loaded from. Two two-word endings: `FILE_PATH` (the path
/// of one data file, the official memory server's `MEMORY_FILE_PATH`) and `USER_AGENT`.
pub const DATA_WORDS: &str = "KEY KEYS TOKEN TOKENS SECRET SECRETS PASSWORD PASSWD PASS PASSPHRASE CREDENTIAL CREDENTIALS \
    URL URI URLS ENDPOINT HOST HOSTNAME PORT ADDR ADDRESS DOMAIN REGION ZONE BUCKET DATABASE DB SCHEMA TABLE COLLECTION \
    ID IDS NAME NAMES USER USERNAME LOGIN EMAIL ACCOUNT ORG ORGANIZATION TEAM PROJECT WORKSPACE TENANT CHANNEL REPO \
    REPOSITORY OWNER BRANCH MODEL VERSION LEVEL MODE TIMEOUT TTL LIMIT MAX MIN SIZE COUNT DEPTH RETRIES INTERVAL \
    ENABLED DISABLED ENABLE DISABLE DEBUG VERBOSE QUIET FORMAT LANG LANGUAGE LOCALE TZ TIMEZONE CURRENCY UNITS UA";

/// The environment rule for an extension that came from elsewhere (a link, an import, a
/// recipe), positive: besides `disallowed_env_message`, the name is upper-case words of letters
/// and digits joined by single `_`, at most 64 characters, and it ends in a word of `DATA_WORDS`
/// (or in `FILE_PATH`, `USER_AGENT`). So `API_KEY`, `LOG_LEVEL`, `DATABASE_URL` and `MEMORY_FILE_PATH` import,
/// and every name that makes a tool run a program or load code (`RSYNC_RSH`, `MANPAGER`,
/// `LESSOPEN`, `RUSTC_WORKSPACE_WRAPPER`, `JULIA_DEPOT_PATH`, …) does not, whether anyone
/// listed it or not. The person may still set any other name on an extension of their own (the
/// API, Desktop's settings).
pub fn untrusted_env_message(key: &str) -> Option<String> {
    if let Some(m) = disallowed_env_message(key) {
        return Some(m);
    }
    let from = "for an extension from a link, an import or a recipe";
    let fix = "set it yourself in the extension's settings if the server documents it and you trust it";
    let shaped = key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_uppercase())
        && key.split('_').all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
    if !shaped {
        return Some(format!(
            "environment variable {key} is refused {from} by the environment rule: such names are upper-case words of \
             letters and digits joined by `_` (like API_KEY or LOG_LEVEL), at most 64 characters; {fix}"
        ));
    }
    let words: Vec<&str> = key.split('_').collect();
    let last = words[words.len() - 1];
    let ending = &words[words.len().saturating_sub(2)..];
    let data = in_words(DATA_WORDS, last) || ending == ["FILE", "PATH"] || ending == ["USER", "AGENT"];
    if data {
        return None;
    }
    Some(format!(
        "environment variable {key} is refused {from} by the environment rule: a name set from elsewhere must be a \
         data setting, its last word naming data (KEY, TOKEN, SECRET, PASSWORD, URL, HOST, PORT, ID, \
         NAME, USER, PROJECT, MODEL, LEVEL, MODE, TIMEOUT, ENABLED, FORMAT, … or FILE_PATH, USER_AGENT; `{last}` is not one), since \
         other names can make a tool run a program or load code; {fix}"
    ))
}

/// What `GET /config` shows instead of a value an extension config carries in `envs` or
/// `headers` (an imported token, a key written into a link's config): never the value.
pub const MASKED: &str = "********";

/// `config.json` as `GET /config` shows it: every `envs` and `headers` value of every extension
/// masked, except a bare `${VAR}` reference (which names a stored secret, not its value).
pub fn masked_config(mut doc: Map<String, Value>) -> Map<String, Value> {
    let reference = |v: &str| {
        let t = v.trim();
        t.starts_with("${") && t.ends_with('}') && gosling_wire::template::vars(t).len() == 1 && !t[2..].contains('$')
    };
    if let Some(Value::Object(exts)) = doc.get_mut("extensions") {
        for ext in exts.values_mut() {
            for field in ["envs", "headers"] {
                if let Some(Value::Object(m)) = ext.get_mut(field) {
                    for v in m.values_mut() {
                        if !v.as_str().is_some_and(reference) {
                            *v = Value::String(MASKED.into());
                        }
                    }
                }
            }
        }
    }
    doc
}

/// Names gosling keeps for itself: its server key, TLS files, provider keys and settings. An
/// extension may never read these from the secrets store, even when the user stored a value
/// under that name (Desktop stores provider keys there too), so a link cannot ask for them.
/// `OAUTH:` is where gosling keeps the sign-in tokens of remote servers (one server's token must
/// never reach another extension).
pub const RESERVED_SECRET_PREFIXES: [&str; 6] = ["GOOSE_", "GOSLING_", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "OAUTH:"];

/// Provider keys goose Desktop may store beside gosling's own (other providers goose supports).
pub const RESERVED_SECRET_NAMES: &str = "GOOGLE_API_KEY GEMINI_API_KEY AZURE_OPENAI_API_KEY OPENROUTER_API_KEY \
    GROQ_API_KEY XAI_API_KEY MISTRAL_API_KEY DEEPSEEK_API_KEY DATABRICKS_TOKEN LITELLM_API_KEY TOGETHER_API_KEY \
    VENICE_API_KEY SNOWFLAKE_TOKEN TETRATE_API_KEY";

/// Whether `name` is one of gosling's own secrets or settings (case-insensitively).
pub fn is_reserved_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    RESERVED_SECRET_PREFIXES.iter().any(|p| upper.starts_with(p)) || in_words(RESERVED_SECRET_NAMES, &upper)
}

/// The store lookups a config needs, split: `missing` are not stored yet (the user can store
/// them), `refused` are gosling's own secret names (never resolved, whatever is stored). An
/// extension with either is saved disabled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unresolved {
    pub missing: Vec<String>,
    pub refused: Vec<String>,
}

impl Unresolved {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.refused.is_empty()
    }

    /// One line for answers and logs: what is missing and how to store it, what is refused and why.
    pub fn explain(&self) -> String {
        let mut parts = Vec::new();
        if let Some(first) = self.missing.first() {
            parts.push(format!(
                "secret(s) {} not stored; extensions read variables only from the secrets store, never from gosling's environment: \
                 store each with `gosling secret set {first}` (value on standard input), in the web page's Settings, \
                 or with POST /config/upsert {{\"key\":\"{first}\",\"value\":\"...\",\"is_secret\":true}}",
                self.missing.join(", ")
            ));
        }
        if !self.refused.is_empty() {
            parts.push(format!(
                "{} {} gosling's own secret(s) or settings (server key, TLS, model provider), which an extension may never read, \
                 even if a value is stored under that name; it cannot be enabled until it reads its own secret under another name",
                self.refused.join(", "),
                if self.refused.len() == 1 { "is one of" } else { "are" }
            ));
        }
        parts.join("; ")
    }
}

/// `secret_names(config)` split by `present(NAME)` (is it in the secrets store?) and by the
/// own-secrets rule. (A missing OAuth secret is reported when signing in, with its field.)
pub fn unresolved(config: &ExtensionConfig, present: &dyn Fn(&str) -> bool) -> Unresolved {
    let mut u = Unresolved::default();
    // A missing OAuth secret is reported when signing in, with its field; a reserved one here,
    // like any other.
    let oauth_keys: Vec<String> =
        config.oauth().map(|o| o.secret_keys()).unwrap_or_default().into_iter().map(|(_, k)| k).collect();
    for k in secret_names(config) {
        if is_reserved_secret(&k) {
            u.refused.push(k);
        } else if !present(&k) && !oauth_keys.contains(&k) {
            u.missing.push(k);
        }
    }
    u
}

/// The variables an extension reads from the secrets store: its `env_keys`, then the variables
/// its header values name that `envs` does not set, then `oauth.client_secret_key`, each once,
/// in order. These are looked up in
/// the secrets store only (never gosling's process environment).
pub fn secret_names(config: &ExtensionConfig) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(Vars { envs, env_keys, headers }) = config.vars() else { return out };
    for k in env_keys {
        if envs.get(k).is_none_or(|v| v.is_empty()) && !out.contains(k) {
            out.push(k.clone());
        }
    }
    for v in headers.into_iter().flat_map(|h| h.values()) {
        for var in gosling_wire::template::vars(v) {
            if !envs.contains_key(&var) && !out.contains(&var) {
                out.push(var);
            }
        }
    }
    // The OAuth secrets (client secret, key, identity provider's) are stored secrets like any
    // other: the same rules, the same summary.
    for (_, k) in config.oauth().map(|o| o.secret_keys()).unwrap_or_default() {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// An extension's config: what every kind has, and what its kind adds. Read and written in
/// goose's JSON shapes (`from_map`, `to_map`), field for field and in goose's order, so the
/// bytes stay goose's (tests/contract/extension_configs.json).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionConfig {
    /// May be empty only for a legacy `sse` entry.
    pub name: String,
    pub description: String,
    /// Seconds for initialize and each request (`timeout_secs`). Written for the kinds that
    /// run a server (stdio, builtin, streamable_http, inline_python).
    pub timeout: Option<u64>,
    /// goose's `bundled` (not written for inline_python or sse).
    pub bundled: Option<bool>,
    /// The tools offered; empty: all (not written for sse).
    pub available_tools: Vec<String>,
    /// Keys gosling does not know, kept as they came and written back after the others.
    pub extra: Map<String, Value>,
    pub kind: Kind,
}

/// What each `type` of extension adds to the common fields.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Legacy; kept so old config files load. Never activated.
    Sse {
        uri: Option<String>,
    },
    Stdio {
        cmd: String,
        args: Vec<String>,
        envs: BTreeMap<String, String>,
        env_keys: Vec<String>,
    },
    Builtin {
        display_name: Option<String>,
    },
    /// goose's in-process platform extensions: out of scope, read and written back untouched.
    Platform {
        display_name: Option<String>,
    },
    StreamableHttp {
        uri: String,
        envs: BTreeMap<String, String>,
        env_keys: Vec<String>,
        headers: BTreeMap<String, String>,
    },
    /// MCP `Tool` objects, kept as JSON: `{name, inputSchema, description?, ...}`.
    Frontend {
        tools: Vec<Value>,
        instructions: Option<String>,
    },
    InlinePython {
        code: String,
        dependencies: Option<Vec<String>>,
    },
}

/// The variables of a stdio or streamable_http config: `envs` (literal values), `env_keys`
/// (read from the secrets store) and the streamable_http `headers` (whose `${VAR}`s are).
pub struct Vars<'a> {
    pub envs: &'a BTreeMap<String, String>,
    pub env_keys: &'a [String],
    pub headers: Option<&'a BTreeMap<String, String>>,
}

impl Kind {
    /// Which common fields goose writes for this kind: `timeout`, `bundled`, `available_tools`.
    /// One the kind lacks stays among the unknown keys when read, and is kept there when set.
    fn common_fields(&self) -> [bool; 3] {
        match self {
            Kind::Sse { .. } => [false, false, false],
            Kind::Platform { .. } | Kind::Frontend { .. } => [false, true, true],
            Kind::InlinePython { .. } => [true, false, true],
            Kind::Stdio { .. } | Kind::Builtin { .. } | Kind::StreamableHttp { .. } => [true, true, true],
        }
    }
}

/// Reading a field as serde would: `need` (missing: serde's "missing field" error), `default`
/// (missing: the type's default) and `optional` (missing or null: `None`).
fn field<T: DeserializeOwned>(m: &mut Map<String, Value>, key: &str) -> Result<Option<T>, String> {
    // shift_remove: the unknown keys keep their order.
    m.shift_remove(key).map(|v| serde_json::from_value(v).map_err(|e| e.to_string())).transpose()
}

fn need<T: DeserializeOwned>(m: &mut Map<String, Value>, key: &str) -> Result<T, String> {
    field(m, key)?.ok_or_else(|| format!("missing field `{key}`"))
}

fn default<T: DeserializeOwned + Default>(m: &mut Map<String, Value>, key: &str) -> Result<T, String> {
    Ok(field(m, key)?.unwrap_or_default())
}

fn optional<T: DeserializeOwned>(m: &mut Map<String, Value>, key: &str) -> Result<Option<T>, String> {
    Ok(field::<Option<T>>(m, key)?.flatten())
}

impl ExtensionConfig {
    /// A config from goose's JSON object: `type`, the fields of that kind, and everything else
    /// kept in `extra`. `description` (and an `sse` entry's `name`) may be null or absent.
    fn from_map(mut m: Map<String, Value>) -> Result<ExtensionConfig, String> {
        let ty: String = need(&mut m, "type")?;
        let kind = match ty.as_str() {
            "sse" => Kind::Sse { uri: optional(&mut m, "uri")? },
            "stdio" => Kind::Stdio {
                cmd: need(&mut m, "cmd")?,
                args: need(&mut m, "args")?,
                envs: default(&mut m, "envs")?,
                env_keys: default(&mut m, "env_keys")?,
            },
            "builtin" => Kind::Builtin { display_name: optional(&mut m, "display_name")? },
            "platform" => Kind::Platform { display_name: optional(&mut m, "display_name")? },
            "streamable_http" => Kind::StreamableHttp {
                uri: need(&mut m, "uri")?,
                envs: default(&mut m, "envs")?,
                env_keys: default(&mut m, "env_keys")?,
                headers: default(&mut m, "headers")?,
            },
            "frontend" => {
                Kind::Frontend { tools: need(&mut m, "tools")?, instructions: optional(&mut m, "instructions")? }
            }
            "inline_python" => {
                Kind::InlinePython { code: need(&mut m, "code")?, dependencies: optional(&mut m, "dependencies")? }
            }
            other => return Err(format!("unknown variant `{other}`, expected one of {}", TYPES.join(", "))),
        };
        let name = match kind {
            Kind::Sse { .. } => optional(&mut m, "name")?.unwrap_or_default(),
            _ => need(&mut m, "name")?,
        };
        let description = optional(&mut m, "description")?.unwrap_or_default();
        let [timeout, bundled, tools] = kind.common_fields();
        Ok(ExtensionConfig {
            name,
            description,
            timeout: if timeout { optional(&mut m, "timeout")? } else { None },
            bundled: if bundled { optional(&mut m, "bundled")? } else { None },
            available_tools: if tools { default(&mut m, "available_tools")? } else { Vec::new() },
            extra: m,
            kind,
        })
    }

    /// goose's JSON object for this config: `type`, `name`, `description`, the kind's own
    /// fields, the common ones it has (`inline_python` writes `timeout` before
    /// `dependencies`), then the unknown keys.
    fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |key: &str, v: Value| {
            m.insert(key.to_string(), v);
        };
        put("type", self.type_name().into());
        put("name", json!(self.name));
        put("description", json!(self.description));
        let [has_timeout, has_bundled, has_tools] = self.kind.common_fields();
        match &self.kind {
            Kind::Sse { uri } => uri.iter().for_each(|u| put("uri", json!(u))),
            Kind::Stdio { cmd, args, envs, env_keys } => {
                for (k, v) in
                    [("cmd", json!(cmd)), ("args", json!(args)), ("envs", json!(envs)), ("env_keys", json!(env_keys))]
                {
                    put(k, v);
                }
            }
            Kind::Builtin { display_name } | Kind::Platform { display_name } => {
                display_name.iter().for_each(|d| put("display_name", json!(d)))
            }
            Kind::StreamableHttp { uri, envs, env_keys, headers } => {
                for (k, v) in [
                    ("uri", json!(uri)),
                    ("envs", json!(envs)),
                    ("env_keys", json!(env_keys)),
                    ("headers", json!(headers)),
                ] {
                    put(k, v);
                }
            }
            Kind::Frontend { tools, instructions } => {
                put("tools", json!(tools));
                instructions.iter().for_each(|i| put("instructions", json!(i)));
            }
            Kind::InlinePython { code, dependencies } => {
                put("code", json!(code));
                self.timeout.iter().for_each(|t| put("timeout", json!(t)));
                dependencies.iter().for_each(|d| put("dependencies", json!(d)));
            }
        }
        if has_timeout && !matches!(self.kind, Kind::InlinePython { .. }) {
            self.timeout.iter().for_each(|t| put("timeout", json!(t)));
        }
        if has_bundled {
            self.bundled.iter().for_each(|b| put("bundled", json!(b)));
        }
        if has_tools {
            put("available_tools", json!(self.available_tools));
        }
        for (k, v) in &self.extra {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        // A common field this kind's shape lacks is kept among the unknown keys, not dropped.
        let lacking = [
            (has_timeout, "timeout", json!(self.timeout)),
            (has_bundled, "bundled", json!(self.bundled)),
            (has_tools || self.available_tools.is_empty(), "available_tools", json!(self.available_tools)),
        ];
        for (_, key, v) in lacking.into_iter().filter(|(has, _, v)| !has && !v.is_null()) {
            m.entry(key.to_string()).or_insert(v);
        }
        m
    }
}

impl Serialize for ExtensionConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ExtensionConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ExtensionConfig, D::Error> {
        ExtensionConfig::from_map(Map::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A persisted extension: the config plus whether new sessions start it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtensionEntry {
    pub enabled: bool,
    #[serde(flatten)]
    pub config: ExtensionConfig,
}

/// `Error::Config`: `field` is the offending field.
fn cfg_err(field: &str, message: impl Into<String>) -> Error {
    Error::Config { field: field.to_string(), message: message.into() }
}

pub const TYPES: [&str; 7] = ["stdio", "streamable_http", "builtin", "frontend", "inline_python", "sse", "platform"];

/// goose's `name_to_key`: drop whitespace, lower-case. The persisted map's key.
pub fn name_to_key(name: &str) -> String {
    name.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase()
}

/// The key of a running extension and the prefix of its tools: `name_to_key`, then every
/// character other than ASCII letters, digits, `_` and `-` becomes `_`.
pub fn runtime_key(name: &str) -> String {
    name_to_key(name).chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

impl ExtensionConfig {
    /// Parses a config from JSON with messages that say what to fix, rather than serde's
    /// generic ones, for the mistakes people actually make.
    pub fn from_value(v: Value) -> Result<ExtensionConfig, Error> {
        let obj = v.as_object().ok_or_else(|| cfg_err("config", "must be a JSON object"))?;
        let ty = match obj.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(_) => return Err(cfg_err("type", format!("must be a string, one of: {}", TYPES.join(", ")))),
            None => return Err(cfg_err("type", format!("is missing; set it to one of: {}", TYPES.join(", ")))),
        };
        if !TYPES.contains(&ty) {
            return Err(cfg_err("type", format!("unknown type {ty:?}; use one of: {}", TYPES.join(", "))));
        }
        if ty == "streamable_http" && !obj.contains_key("uri") && obj.contains_key("url") {
            return Err(cfg_err("url", "streamable_http configs take the endpoint in `uri`, not `url`; use `uri`"));
        }
        let required: &[&str] = match ty {
            "stdio" => &["name", "cmd", "args"],
            "streamable_http" => &["name", "uri"],
            "frontend" => &["name", "tools"],
            "inline_python" => &["name", "code"],
            "sse" => &[],
            _ => &["name"],
        };
        for f in required {
            if obj.get(*f).is_none_or(Value::is_null) {
                let hint = match *f {
                    "args" => " (send [] for none)",
                    _ => "",
                };
                return Err(cfg_err(f, format!("is required for type {ty}{hint}")));
            }
        }
        serde_json::from_value(v.clone()).map_err(|e| {
            let msg = e.to_string();
            let field = msg.split('`').nth(1).unwrap_or("config").to_string();
            cfg_err(&field, msg)
        })
    }

    /// A config of `kind` with no timeout, bundled flag, tool filter or extra keys.
    pub fn new(name: impl Into<String>, description: impl Into<String>, kind: Kind) -> ExtensionConfig {
        ExtensionConfig {
            name: name.into(),
            description: description.into(),
            timeout: None,
            bundled: None,
            available_tools: Vec::new(),
            extra: Map::new(),
            kind,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Sse { .. } => "sse",
            Kind::Stdio { .. } => "stdio",
            Kind::Builtin { .. } => "builtin",
            Kind::Platform { .. } => "platform",
            Kind::StreamableHttp { .. } => "streamable_http",
            Kind::Frontend { .. } => "frontend",
            Kind::InlinePython { .. } => "inline_python",
        }
    }

    /// The persisted map's key (`name_to_key` of the name).
    pub fn key(&self) -> String {
        name_to_key(self.name())
    }

    /// gosling's optional `oauth` object of a `streamable_http` entry (goose has no such
    /// fields; kept in the entry's extra keys, so goose ignores it). `Err` says what is wrong.
    pub fn oauth(&self) -> Result<OAuthConfig, Error> {
        match self.kind {
            Kind::StreamableHttp { .. } => match self.extra.get("oauth") {
                None | Some(Value::Null) => Ok(OAuthConfig::default()),
                Some(v) => serde_json::from_value::<OAuthConfig>(v.clone())
                    .map_err(|e| {
                        cfg_err("oauth", format!("the extension's `oauth` object is invalid ({e}); expected {{\"client_id\", \"client_secret_key\", \"scopes\": [...], \"client_metadata_url\", \"grant\", \"client_assertion_key\", \"token_file\", \"idp\": {{...}}}}, all optional (docs/install.md, \"Signing in without a browser\")"))
                    })
                    .and_then(|o| o.checked()),
            },
            _ => Ok(OAuthConfig::default()),
        }
    }

    /// gosling's optional `protocol_version` of a stdio or streamable_http entry: the MCP
    /// revision to speak to this server, pinned (goose has no such field; kept in the entry's
    /// extra keys, so goose ignores it). `None`: gosling chooses (see `mcp::client`).
    pub fn protocol_version(&self) -> Result<Option<String>, Error> {
        match self.extra.get("protocol_version") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) if gosling_wire::mcp_version::is_known(v) => Ok(Some(v.clone())),
            Some(v) => Err(cfg_err(
                "protocol_version",
                format!(
                    "{v} is not an MCP revision gosling speaks; use one of {} (or leave it out to let gosling choose)",
                    gosling_wire::mcp_version::KNOWN.join(", ")
                ),
            )),
        }
    }

    /// Seconds allowed for initialize and for each request.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)
    }

    /// The variables the config names (stdio and streamable_http); `None` for other kinds.
    pub fn vars(&self) -> Option<Vars<'_>> {
        match &self.kind {
            Kind::Stdio { envs, env_keys, .. } => Some(Vars { envs, env_keys, headers: None }),
            Kind::StreamableHttp { envs, env_keys, headers, .. } => {
                Some(Vars { envs, env_keys, headers: Some(headers) })
            }
            _ => None,
        }
    }

    /// Checks that go beyond the shape: things that would make activation fail for sure.
    /// goose stores such configs anyway; we refuse them at the door with the fix.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.trim().is_empty() && !matches!(self.kind, Kind::Sse { .. }) {
            return Err(cfg_err("name", "must not be empty"));
        }
        self.protocol_version()?;
        match &self.kind {
            Kind::Stdio { cmd, envs, env_keys, .. } => {
                if cmd.trim().is_empty() {
                    return Err(cfg_err("cmd", "must name the program to run"));
                }
                check_env_names(envs.keys(), env_keys)?;
                self.sandbox()?;
            }
            Kind::StreamableHttp { uri, envs, env_keys, .. } => {
                if !(uri.starts_with("http://") || uri.starts_with("https://")) {
                    return Err(cfg_err("uri", format!("{uri:?} is not an http:// or https:// URL")));
                }
                check_env_names(envs.keys(), env_keys)?;
            }
            Kind::Frontend { tools, .. } => {
                for (i, t) in tools.iter().enumerate() {
                    if t.get("name").and_then(Value::as_str).is_none() {
                        return Err(cfg_err(&format!("tools[{i}].name"), "every frontend tool needs a string `name`"));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn check_env_names<'a>(envs: impl Iterator<Item = &'a String>, env_keys: &'a [String]) -> Result<(), Error> {
    for k in envs.chain(env_keys.iter()) {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(cfg_err("envs", format!("{k:?} is not a valid environment variable name")));
        }
    }
    Ok(())
}

impl fmt::Display for ExtensionConfig {
    /// The short forms goose logs, e.g. `Stdio(name: cmd args…)`; never includes env values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.kind {
            Kind::Sse { .. } => write!(f, "SSE({name}: unsupported)"),
            Kind::Stdio { cmd, args, .. } => write!(f, "Stdio({name}: {cmd} {})", args.join(" ")),
            Kind::Builtin { .. } => write!(f, "Builtin({name})"),
            Kind::Platform { .. } => write!(f, "Platform({name})"),
            Kind::StreamableHttp { uri, .. } => write!(f, "StreamableHttp({name}: {uri})"),
            Kind::Frontend { .. } => write!(f, "Frontend({name})"),
            Kind::InlinePython { .. } => write!(f, "InlinePython({name})"),
        }
    }
}

/// Extensions as read from the config store: the usable entries, and one warning per entry that
/// needs the user's attention (legacy `sse`, or an entry that does not parse — kept in the file
/// untouched, but skipped).
pub struct Extensions {
    pub entries: Vec<ExtensionEntry>,
    pub warnings: Vec<String>,
}

/// The config store's extension entries in goose's shape.
pub trait ExtensionStore {
    fn extensions(&self) -> Result<Extensions, Error>;
    fn extension(&self, key: &str) -> Result<Option<ExtensionEntry>, Error>;
    /// Creates or replaces the entry under its config's key; returns whether it existed.
    fn upsert_extension(&self, entry: &ExtensionEntry) -> Result<bool, Error>;
}

impl ExtensionStore for ConfigStore {
    fn extensions(&self) -> Result<Extensions, Error> {
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        for (key, value) in self.extension_values().map_err(Error::Store)? {
            match serde_json::from_value::<ExtensionEntry>(value) {
                Ok(entry) => {
                    if matches!(entry.config.kind, Kind::Sse { .. }) {
                        warnings.push(format!("'{key}': {SSE_UNSUPPORTED}"));
                    }
                    entries.push(entry);
                }
                Err(e) => {
                    log::warn!("store: skipping extension '{key}' in {}: {e}", self.config_path().display());
                    warnings.push(format!("'{key}': skipped, the stored entry is not a valid extension: {e}"));
                }
            }
        }
        Ok(Extensions { entries, warnings })
    }

    fn extension(&self, key: &str) -> Result<Option<ExtensionEntry>, Error> {
        Ok(self.extensions()?.entries.into_iter().find(|e| e.config.key() == key))
    }

    fn upsert_extension(&self, entry: &ExtensionEntry) -> Result<bool, Error> {
        let value = serde_json::to_value(entry).map_err(|e| {
            Error::Store(StoreError::Corrupt {
                path: self.config_path().to_path_buf(),
                detail: format!("extension {} cannot be written as JSON: {e}", entry.config.key()),
            })
        })?;
        self.upsert_extension_value(&entry.config.key(), value).map_err(Error::Store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of goose-contract.md §4 and §5, each as goose writes it.
    pub(crate) const GOOSE_EXAMPLES: [&str; 6] = [
        r#"{"type":"stdio","name":"everything","description":"","cmd":"npx","args":["-y","@modelcontextprotocol/server-everything"],"envs":{"LOG_LEVEL":"info"},"env_keys":["API_TOKEN"],"timeout":300,"available_tools":[]}"#,
        r#"{"type":"streamable_http","name":"remote","description":"","uri":"https://mcp.example.com/mcp","envs":{},"env_keys":["API_TOKEN"],"headers":{"Authorization":"Bearer ${API_TOKEN}"},"timeout":60,"available_tools":[]}"#,
        r#"{"type":"builtin","name":"developer","description":"","display_name":"Developer","timeout":300,"bundled":true,"available_tools":[]}"#,
        r#"{"type":"inline_python","name":"hello","description":"","code":"from mcp.server.fastmcp import FastMCP\n...","timeout":120,"dependencies":["requests"],"available_tools":[]}"#,
        r#"{"type":"frontend","name":"ui","description":"","tools":[{"name":"pick_file","inputSchema":{"type":"object","properties":{}}}],"instructions":"Use pick_file to ask the user for a file","available_tools":[]}"#,
        r#"{"type":"sse","name":"old","description":"","uri":"http://localhost:8000/sse"}"#,
    ];

    #[test]
    fn goose_examples_round_trip_byte_for_byte() {
        for ex in GOOSE_EXAMPLES {
            let c = ExtensionConfig::from_value(serde_json::from_str(ex).unwrap()).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), ex);
        }
    }

    #[test]
    fn entry_flattens_enabled() {
        let j = r#"{"enabled":true,"type":"builtin","name":"developer","description":"","display_name":"Developer","timeout":300,"bundled":true,"available_tools":[]}"#;
        let e: ExtensionEntry = serde_json::from_str(j).unwrap();
        assert!(e.enabled);
        assert_eq!(e.config.key(), "developer");
        assert_eq!(serde_json::to_string(&e).unwrap(), j);
    }

    #[test]
    fn minimal_configs_get_goose_defaults() {
        let c =
            ExtensionConfig::from_value(json!({"type":"stdio","name":"x","cmd":"echo","args":[],"description":null}))
                .unwrap();
        assert_eq!(c.description, "");
        assert_eq!(c.timeout_secs(), DEFAULT_TIMEOUT_SECS);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type":"stdio","name":"x","description":"","cmd":"echo","args":[],"envs":{},"env_keys":[],"available_tools":[]})
        );
        let sse = ExtensionConfig::from_value(json!({"type":"sse"})).unwrap();
        assert_eq!(sse.name(), "");
    }

    #[test]
    fn unknown_fields_are_kept() {
        let v = json!({"type":"streamable_http","name":"r","description":"","uri":"http://h/mcp","socket":"@s","installation_notes":"n"});
        let c = ExtensionConfig::from_value(v).unwrap();
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["socket"], "@s");
        assert_eq!(back["installation_notes"], "n");
    }

    /// The field and message of an `Error::Config`.
    fn config_error(e: Error) -> (String, String) {
        match e {
            Error::Config { field, message } => (field, message),
            e => panic!("not a config error: {e}"),
        }
    }

    #[test]
    fn helpful_errors() {
        let from = |v| config_error(ExtensionConfig::from_value(v).unwrap_err());
        let (field, message) = from(json!({"type":"streamable_http","name":"r","url":"http://h"}));
        assert_eq!(field, "url");
        assert!(message.contains("use `uri`"), "{message}");
        assert_eq!(from(json!({"type":"stdio","name":"r","cmd":"x"})).0, "args");
        assert_eq!(from(json!({"type":"ftp","name":"r"})).0, "type");
        assert_eq!(from(json!({"name":"r"})).0, "type");
        let (_, message) = from(json!({"type":"stdio","name":"r","cmd":"x","args":"a"}));
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn env_rules_match_families_case_insensitively() {
        for k in [
            "ld_preload",
            "LD_ANYTHING",
            "DYLD_FALLBACK_LIBRARY_PATH",
            "npm_config_node_options",
            "NPM_CONFIG_REGISTRY",
            "npm_config_script_shell",
            "BASH_ENV",
            "env",
            "PERL5OPT",
            "JAVA_TOOL_OPTIONS",
            "GCONV_PATH",
            "NODE_PATH",
            "PIP_INDEX_URL",
            "UV_INDEX_URL",
            "DOCKER_HOST",
            "https_proxy",
            "ALL_PROXY",
            "PYTHONSTARTUP",
            "PATH",
            "BASH_FUNC_x%%",
            "GIT_SSH_COMMAND",
            "SSL_CERT_FILE",
            "HOME",
            "XDG_CONFIG_HOME",
            "CONTAINER_HOST",
        ] {
            assert!(disallowed_env_message(k).unwrap().contains(k), "{k}");
        }
        for k in ["API_KEY", "GITHUB_TOKEN", "LOG_LEVEL", "MODE", "DATABASE_URL", "ENVIRONMENT"] {
            assert!(disallowed_env_message(k).is_none(), "{k}");
        }
        assert!(disallowed_env_message("npm_config_registry").unwrap().contains("the NPM_* family"));
        assert!(disallowed_env_message("path").unwrap().contains("goose's disallowed list"));
    }

    #[test]
    fn the_install_guide_lists_every_refused_family() {
        let guide = include_str!("../../../docs/install.md");
        for (_, names) in ENV_FAMILIES {
            for p in names.split_whitespace() {
                assert!(guide.contains(&format!("`{p}`")), "docs/install.md does not list `{p}`");
            }
        }
        for k in DISALLOWED_ENV_KEYS.split_whitespace().chain(RESERVED_SECRET_NAMES.split_whitespace()) {
            assert!(guide.contains(k), "docs/install.md does not list {k}");
        }
    }

    #[test]
    fn reserved_secrets() {
        for k in [
            "GOOSE_SERVER__SECRET_KEY",
            "openai_api_key",
            "ANTHROPIC_API_KEY",
            "GOOSE_TLS_KEY_PATH",
            "GOSLING_X",
            "GOOGLE_API_KEY",
            "oauth:https://mcp.example/mcp https://as.example",
        ] {
            assert!(is_reserved_secret(k), "{k}");
        }
        for k in ["API_TOKEN", "GITHUB_TOKEN", "MY_OPENAI_API_KEY"] {
            assert!(!is_reserved_secret(k), "{k}");
        }
    }

    #[test]
    fn secret_names_are_env_keys_then_header_variables() {
        let c = ExtensionConfig::from_value(json!({"type":"streamable_http","name":"r","uri":"http://h/mcp",
            "envs":{"LIT":"x"},"env_keys":["A","LIT"],"headers":{"X":"${LIT} ${B} $A"}}))
        .unwrap();
        assert_eq!(secret_names(&c), ["A", "B"]);
    }

    #[test]
    fn keys() {
        assert_eq!(name_to_key("My Tool"), "mytool");
        assert_eq!(name_to_key("GitHub"), "github");
        assert_eq!(runtime_key("My.Tool x"), "my_toolx");
    }
}

/// Sign-in settings of a `streamable_http` extension, all optional: without them gosling
/// registers itself dynamically (or uses `client_metadata_url` where supported).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client registered with the authorization server by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The name of the stored secret holding the client secret (the secrets store only, never
    /// the environment; never one of gosling's own; only if mapped to this extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_key: Option<String>,
    /// Scopes to ask for besides those the server's challenge names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// An https URL of a Client ID Metadata Document describing gosling, for servers that
    /// accept those instead of registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// How tokens are got without a person at a browser: `client_credentials`, `jwt_bearer`
    /// (workload identity) or `enterprise_managed`; absent: a person signs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// The name of the stored secret holding the client's P-256 private key (PEM, PKCS#8):
    /// the client authenticates with a signed JWT (`private_key_jwt`) instead of a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_assertion_key: Option<String>,
    /// `jwt_bearer`: the absolute path of the workload identity token the platform writes
    /// (read at every grant; not followed if it is a symbolic link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// `enterprise_managed`: the enterprise identity provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp: Option<IdpConfig>,
}

/// The enterprise identity provider of `grant: enterprise_managed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdpConfig {
    /// Its token endpoint (RFC 8693 token exchange), https.
    pub token_endpoint: String,
    /// gosling's client at the identity provider.
    pub client_id: String,
    /// The name of the stored secret holding that client's secret, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_key: Option<String>,
    /// The name of the stored secret holding the person's ID token from the identity provider.
    pub id_token_key: String,
}

/// The grants `oauth.grant` may name.
pub const OAUTH_GRANTS: [&str; 3] = ["client_credentials", "jwt_bearer", "enterprise_managed"];

impl OAuthConfig {
    /// The names of the stored secrets these settings read, each with its field.
    pub fn secret_keys(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        out.extend(self.client_secret_key.clone().map(|k| ("oauth.client_secret_key", k)));
        out.extend(self.client_assertion_key.clone().map(|k| ("oauth.client_assertion_key", k)));
        if let Some(idp) = &self.idp {
            out.extend(idp.client_secret_key.clone().map(|k| ("oauth.idp.client_secret_key", k)));
            out.push(("oauth.idp.id_token_key", idp.id_token_key.clone()));
        }
        out
    }

    /// The settings, if they make sense together; else what to fix.
    fn checked(self) -> Result<OAuthConfig, Error> {
        let grant = self.grant.as_deref();
        if let Some(g) = grant.filter(|g| !OAUTH_GRANTS.contains(g)) {
            return Err(cfg_err(
                "oauth.grant",
                format!("oauth.grant {g:?} is not one gosling knows; use one of {} (or leave it out for a person's sign-in)", OAUTH_GRANTS.join(", ")),
            ));
        }
        let needs =
            |field: &str, what: &str| Err(cfg_err(field, format!("oauth.grant {} needs {what}", grant.unwrap_or(""))));
        match grant {
            Some("client_credentials") if self.client_id.is_none() => return needs("oauth.client_id", "oauth.client_id, the client registered with the authorization server"),
            Some("client_credentials") if self.client_secret_key.is_none() && self.client_assertion_key.is_none() => {
                return needs("oauth.client_secret_key", "oauth.client_secret_key or oauth.client_assertion_key (the stored secret or private key the client authenticates with)")
            }
            Some("jwt_bearer") if self.token_file.is_none() => return needs("oauth.token_file", "oauth.token_file, the path of the workload identity token"),
            Some("enterprise_managed") if self.idp.is_none() => return needs("oauth.idp", "oauth.idp {\"token_endpoint\", \"client_id\", \"id_token_key\"}"),
            Some("enterprise_managed") if self.client_id.is_none() => return needs("oauth.client_id", "oauth.client_id, the client registered with the MCP server's authorization server"),
            _ => {}
        }
        if grant != Some("jwt_bearer") && self.token_file.is_some() {
            return Err(cfg_err(
                "oauth.token_file",
                "oauth.token_file is read only with oauth.grant jwt_bearer; set that, or remove token_file",
            ));
        }
        if grant != Some("enterprise_managed") && self.idp.is_some() {
            return Err(cfg_err(
                "oauth.idp",
                "oauth.idp is used only with oauth.grant enterprise_managed; set that, or remove idp",
            ));
        }
        if let Some(f) = &self.token_file {
            if !f.starts_with('/') || f.split('/').any(|c| c == "..") {
                return Err(cfg_err("oauth.token_file", "oauth.token_file must be an absolute path without `..`"));
            }
        }
        if let Some(idp) = &self.idp {
            if !idp.token_endpoint.starts_with("https://")
                && !idp.token_endpoint.starts_with("http://127.0.0.1")
                && !idp.token_endpoint.starts_with("http://localhost")
            {
                return Err(cfg_err(
                    "oauth.idp.token_endpoint",
                    "oauth.idp.token_endpoint must be an https URL (http only on this machine)",
                ));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod oauth_tests {
    use super::*;

    #[test]
    fn oauth_settings_are_optional_and_checked() {
        let c =
            ExtensionConfig::from_value(serde_json::json!({"type":"streamable_http","name":"r","uri":"http://h/mcp"}))
                .unwrap();
        assert_eq!(c.oauth().unwrap(), OAuthConfig::default());
        let c = ExtensionConfig::from_value(serde_json::json!({"type":"streamable_http","name":"r","uri":"http://h/mcp","oauth":{"client_id":"abc","client_secret_key":"R_SECRET","scopes":["a"]}})).unwrap();
        let o = c.oauth().unwrap();
        assert_eq!(
            (o.client_id.as_deref(), o.client_secret_key.as_deref(), o.scopes.len()),
            (Some("abc"), Some("R_SECRET"), 1)
        );
        let c = ExtensionConfig::from_value(
            serde_json::json!({"type":"streamable_http","name":"r","uri":"http://h/mcp","oauth":{"client_secret":"x"}}),
        )
        .unwrap();
        let Error::Config { message, .. } = c.oauth().unwrap_err() else { panic!("not a config error") };
        assert!(message.contains("client_secret_key") && !message.contains("\"x\""), "{message}");
    }

    fn oauth_of(o: serde_json::Value) -> Result<OAuthConfig, Error> {
        ExtensionConfig::from_value(
            serde_json::json!({"type":"streamable_http","name":"r","uri":"http://h/mcp","oauth":o}),
        )
        .unwrap()
        .oauth()
    }

    fn refusal(o: serde_json::Value) -> (String, String) {
        match oauth_of(o) {
            Err(Error::Config { field, message }) => (field, message),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn grants_without_a_browser_are_configured_whole() {
        let o = oauth_of(
            serde_json::json!({"grant":"client_credentials","client_id":"svc","client_assertion_key":"SVC_KEY"}),
        )
        .unwrap();
        assert_eq!(o.secret_keys(), vec![("oauth.client_assertion_key", "SVC_KEY".to_string())]);
        let o = oauth_of(serde_json::json!({"grant":"jwt_bearer","token_file":"/var/run/secrets/tokens/mcp"})).unwrap();
        assert_eq!(o.token_file.as_deref(), Some("/var/run/secrets/tokens/mcp"));
        let o =
            oauth_of(serde_json::json!({"grant":"enterprise_managed","client_id":"c","client_secret_key":"C_SECRET",
            "idp":{"token_endpoint":"https://idp.example/token","client_id":"gosling","id_token_key":"IDP_ID_TOKEN"}}))
            .unwrap();
        assert_eq!(
            o.secret_keys(),
            vec![
                ("oauth.client_secret_key", "C_SECRET".to_string()),
                ("oauth.idp.id_token_key", "IDP_ID_TOKEN".to_string())
            ]
        );
        // What is missing or wrong, by field, with what to set.
        for (o, field, says) in [
            (
                serde_json::json!({"grant":"password"}),
                "oauth.grant",
                "client_credentials, jwt_bearer, enterprise_managed",
            ),
            (serde_json::json!({"grant":"client_credentials"}), "oauth.client_id", "oauth.client_id"),
            (
                serde_json::json!({"grant":"client_credentials","client_id":"svc"}),
                "oauth.client_secret_key",
                "client_assertion_key",
            ),
            (serde_json::json!({"grant":"jwt_bearer"}), "oauth.token_file", "workload identity token"),
            (serde_json::json!({"grant":"jwt_bearer","token_file":"tokens/mcp"}), "oauth.token_file", "absolute path"),
            (
                serde_json::json!({"grant":"jwt_bearer","token_file":"/a/../etc/shadow"}),
                "oauth.token_file",
                "without `..`",
            ),
            (serde_json::json!({"token_file":"/t"}), "oauth.token_file", "jwt_bearer"),
            (serde_json::json!({"grant":"enterprise_managed","client_id":"c"}), "oauth.idp", "token_endpoint"),
            (
                serde_json::json!({"grant":"enterprise_managed","client_id":"c","idp":{"token_endpoint":"http://idp.example/token","client_id":"g","id_token_key":"K"}}),
                "oauth.idp.token_endpoint",
                "https",
            ),
            (
                serde_json::json!({"idp":{"token_endpoint":"https://i/t","client_id":"g","id_token_key":"K"}}),
                "oauth.idp",
                "enterprise_managed",
            ),
        ] {
            let (f, m) = refusal(o.clone());
            assert_eq!(f, field, "{o}: {m}");
            assert!(m.contains(says), "{o}: {m}");
        }
    }
}

#[cfg(test)]
mod store_tests {
    use super::*;
    use serde_json::json;

    fn store(tag: &str) -> (ConfigStore, std::path::PathBuf) {
        let d = std::env::temp_dir().join(format!("gosling-ext-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        (ConfigStore::open(&d).unwrap(), d)
    }

    #[test]
    fn extension_crud_and_warnings() {
        let (s, _d) = store("crud");
        let e: ExtensionEntry =
            serde_json::from_value(json!({"enabled":true,"type":"sse","name":"Old One","uri":"http://x/sse"})).unwrap();
        assert!(!s.upsert_extension(&e).unwrap());
        assert!(s.upsert_extension(&e).unwrap());
        let ex = s.extensions().unwrap();
        assert_eq!(ex.entries.len(), 1);
        assert_eq!(ex.warnings, ["'oldone': SSE is unsupported, migrate to streamable_http"]);
        assert!(s.remove_extension("oldone").unwrap());
        assert!(!s.remove_extension("oldone").unwrap());
    }

    #[test]
    fn invalid_stored_entry_is_skipped_but_kept() {
        let (s, d) = store("bad");
        std::fs::write(
            d.join("config.json"),
            r#"{"extensions":{"bad":{"enabled":true,"type":"stdio","name":"bad"}},"GOOSE_MODEL":"m"}"#,
        )
        .unwrap();
        let ex = s.extensions().unwrap();
        assert!(ex.entries.is_empty());
        assert_eq!(ex.warnings.len(), 1);
        s.set("X", json!(1)).unwrap();
        assert!(std::fs::read_to_string(d.join("config.json")).unwrap().contains("\"bad\""));
    }
}
