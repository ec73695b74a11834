//! The ACP methods: `initialize`, `authenticate`, `session/new`, `session/load`,
//! `session/set_mode`, `session/prompt` (with `session/request_permission` to the client in
//! approve modes) and the `session/cancel` notification.

use crate::conn::{CallError, Conn, Incoming, Wire};
use crate::fs::{EditorFs, FsCaps};
use crate::updates::{self, Live};
use crate::{invalid_params, AUTH_REQUIRED, PROTOCOL_VERSION, RESOURCE_NOT_FOUND};
use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_agent::elicit::Answer;
use gosling_agent::events::{ChannelSink, Event};
use gosling_agent::host::Host;
use gosling_agent::messages as msg;
use gosling_agent::reply::{Mode, Outcome, Turn};
use gosling_agent::usage::TurnUsage;
use gosling_agent::{session_extensions, store_extensions};
use gosling_extensions::config::ExtensionStore;
use gosling_extensions::config::{runtime_key, ExtensionConfig, SSE_UNSUPPORTED};
use gosling_extensions::policy::InstallSource;
use gosling_extensions::runtime::SessionRuntime;
use gosling_store::sessions::Session;
use gosling_util::lock;
use gosling_wire::jsonrpc::{ErrorObject, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND};
use gosling_wire::peer::{self, Busy, Responder};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) type Reply = Result<Value, ErrorObject>;

/// The id of the one auth method: configure a model provider.
pub const AUTH_METHOD: &str = "gosling-provider";
/// How long a permission question may stay open (the turn loop's own limit is the same).
const PERMISSION_WAIT: Duration = Duration::from_secs(30 * 60);
/// How long an extension's question waits for the person in the editor.
const ELICITATION_WAIT: Duration = Duration::from_secs(30 * 60);
/// Sessions in one `session/list` page (as goose).
const LIST_PAGE: usize = 50;
/// The session field holding its thinking effort (`session/set_config_option`).
const THINKING_EFFORT: &str = "gosling_thinking_effort";
/// The thinking efforts offered (goose's); gosling's providers do not use them yet.
const EFFORTS: [&str; 4] = ["off", "low", "medium", "high"];
/// After a cancel, how long events the turn already sent are still relayed.
const CANCEL_DRAIN: Duration = Duration::from_millis(300);
/// How often the prompt loop wakes while the turn is quiet (a deadline on each wait).
const PROMPT_TICK: Duration = Duration::from_secs(1);
/// Turn events queued before the writer; a slow editor applies backpressure.
const EVENT_QUEUE: usize = 256;

/// How long `session/list` with a `query` reads messages (newest sessions first) before it
/// answers with what it found.
const SEARCH_BUDGET: Duration = Duration::from_millis(80);

const METHODS: &str = "initialize, authenticate, session/new, session/load, session/list, session/delete, session/close, session/set_mode, session/set_config_option, session/prompt, session/fork, the session/cancel notification and goose's _goose/unstable/* methods";

/// A prompt in flight: dropping `cancel` stops the turn.
struct Running {
    cancel: Option<Sender<()>>,
    cancelled: Arc<AtomicBool>,
}

/// A session opened on this connection (`session/new` or `session/load`).
struct Open {
    cwd: String,
    running: Mutex<Option<Running>>,
}

pub struct Agent {
    pub(crate) app: Arc<Host>,
    pub(crate) conn: Arc<Conn>,
    /// The client takes goose's custom notifications (`_goose/unstable/session/update`):
    /// `clientCapabilities._meta.goose.customNotifications`.
    custom_notifications: AtomicBool,
    fs: Mutex<FsCaps>,
    /// The client takes ACP's form-mode `elicitation/create` (`clientCapabilities.elicitation.form`).
    forms: AtomicBool,
    open: Mutex<HashMap<String, Arc<Open>>>,
    /// Answers goose's own methods (`_goose/…`, the `goose` module), given by whoever wires the
    /// connection, so the standard methods here do not depend on goose's.
    goose: GooseMethods,
}

/// The prefix of goose's own methods.
pub const GOOSE_METHODS: &str = "_goose/";

/// The answerer of goose's own methods (`goose::call`).
pub type GooseMethods = fn(&Arc<Agent>, &str, &Value) -> Reply;

pub(crate) fn store_error(e: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(INTERNAL_ERROR, format!("acp: the session store failed: {e}"))
}

pub(crate) fn str_param<'a>(p: &'a Value, k: &str) -> Result<&'a str, ErrorObject> {
    p.get(k).and_then(Value::as_str).ok_or_else(|| invalid_params(format!("missing the string parameter `{k}`")))
}

/// An error of the core's session operations (`agent::history`), as ACP says it.
pub(crate) fn agent_error(e: gosling_agent::Error) -> ErrorObject {
    use gosling_agent::Error;
    match e {
        Error::SessionNotFound(id) => session_not_found(&id),
        Error::Busy(_) => ErrorObject::new(INVALID_REQUEST, e.to_string()),
        Error::Store(e) | Error::SaveMessage(e) => store_error(e),
        e => ErrorObject::new(INTERNAL_ERROR, e.to_string()),
    }
}

pub(crate) fn session_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(
        RESOURCE_NOT_FOUND,
        format!("Session {id} not found; create one with session/new or open it with session/load"),
    )
}

/// An ACP McpServer as a goose extension config: stdio (no `type`, or `stdio`) and `http`
/// (Streamable HTTP). SSE is refused: MCP replaced it with Streamable HTTP.
pub fn mcp_server(i: usize, s: &Value) -> Result<ExtensionConfig, ErrorObject> {
    let field = format!("mcpServers[{i}]");
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid_params(format!("{field}: missing `name`")))?;
    let pairs = |k: &str| -> serde_json::Map<String, Value> {
        s.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p.get("name")?.as_str()?.to_string(), p.get("value")?.clone())))
            .collect()
    };
    let v = match s.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let cmd = s.get("command").and_then(Value::as_str).ok_or_else(|| invalid_params(format!("{field} ({name}): missing `command`")))?;
            json!({ "type": "stdio", "name": name, "description": "", "cmd": cmd,
                    "args": s.get("args").cloned().unwrap_or_else(|| json!([])), "envs": pairs("env") })
        }
        Some("http") => {
            let url = s.get("url").and_then(Value::as_str).ok_or_else(|| invalid_params(format!("{field} ({name}): missing `url`")))?;
            json!({ "type": "streamable_http", "name": name, "description": "", "uri": url, "headers": pairs("headers") })
        }
        Some("sse") => {
            return Err(invalid_params(format!(
                "{field} ({name}): {SSE_UNSUPPORTED} (mcpCapabilities.sse is false; pass the server's Streamable HTTP endpoint as type \"http\")"
            )))
        }
        Some(other) => return Err(invalid_params(format!("{field} ({name}): unknown transport type {other:?}; use stdio or http"))),
    };
    let c = ExtensionConfig::from_value(v).map_err(|e| invalid_params(format!("{field} ({name}): {e}")))?;
    c.validate().map_err(|e| invalid_params(format!("{field} ({name}): {e}")))?;
    Ok(c)
}

fn to_values(configs: &[ExtensionConfig]) -> Vec<Value> {
    configs.iter().filter_map(|c| serde_json::to_value(c).ok()).collect()
}

/// What waits for a prompt's answer to be written (the model's title of the session).
#[derive(Default)]
struct AfterAnswer(Mutex<(bool, Vec<Deferred>)>);

type Deferred = Box<dyn FnOnce() + Send>;

impl AfterAnswer {
    fn new() -> Arc<AfterAnswer> {
        Arc::default()
    }

    /// Runs `f` now if the answer is out, else once it is.
    fn then(&self, f: Deferred) {
        let mut g = lock(&self.0);
        if g.0 {
            drop(g);
            f();
        } else {
            g.1.push(f);
        }
    }

    /// The answer is written: what waited runs.
    fn answered(&self) {
        let held = {
            let mut g = lock(&self.0);
            g.0 = true;
            std::mem::take(&mut g.1)
        };
        for f in held {
            f();
        }
    }
}

/// The reader's dispatch: the client's requests and notifications, through the one peer.
impl peer::Handler<Wire> for Arc<Agent> {
    fn request(&self, req: Incoming<'_>) -> peer::Answer {
        Agent::request(self, req)
    }
    fn notification(&self, method: &str, params: Option<Value>) {
        Agent::notification(self, method, params.unwrap_or(Value::Null))
    }
}

/// One of the connection's `MAX_IN_FLIGHT` slots for answering `req` later, or the error that
/// says why not.
fn take_slot(req: &Incoming<'_>) -> Result<Responder<Wire>, ErrorObject> {
    req.defer().map_err(|busy| match busy {
        Busy::Full { max } => ErrorObject::new(
            INTERNAL_ERROR,
            format!("acp: {max} requests of this connection are being answered already; wait for one to finish"),
        ),
        Busy::DuplicateId => ErrorObject::new(
            INVALID_REQUEST,
            format!("acp: request id {} is still being answered; give each request a fresh id", req.id),
        ),
    })
}

/// Answers `req` from a thread of its own with what `f` returns.
fn later(req: &Incoming<'_>, f: impl FnOnce() -> Reply + Send + 'static) -> peer::Answer {
    match take_slot(req) {
        Ok(responder) => run_later(responder, f, || ()),
        Err(e) => peer::Answer::Now(Err(e)),
    }
}

/// Answers from a thread of its own with what `f` returns, then runs `then`.
fn run_later(
    responder: Responder<Wire>,
    f: impl FnOnce() -> Reply + Send + 'static,
    then: impl FnOnce() + Send + 'static,
) -> peer::Answer {
    // The responder (and its slot) goes with the thread, or is dropped with the closure if no
    // thread starts.
    let run = move || {
        responder.respond(f());
        then();
    };
    match std::thread::Builder::new().name("acp-request".into()).spawn(run) {
        Ok(_) => peer::Answer::Later,
        Err(e) => peer::Answer::Now(Err(ErrorObject::new(INTERNAL_ERROR, format!("acp: cannot start a thread: {e}")))),
    }
}

impl Agent {
    pub fn new(app: Arc<Host>, conn: Arc<Conn>, goose: GooseMethods) -> Agent {
        Agent {
            app,
            conn,
            goose,
            custom_notifications: AtomicBool::new(false),
            fs: Mutex::default(),
            forms: AtomicBool::new(false),
            open: Mutex::default(),
        }
    }

    /// Dispatches one request: answered at once, or later from a thread of its own (methods
    /// that start extensions, wait for the model or for the person).
    pub fn request(self: &Arc<Self>, req: Incoming<'_>) -> peer::Answer {
        let (method, params) = (req.method.as_str(), req.params.clone().unwrap_or(Value::Null));
        log::debug!("acp: request {} {method}", req.id);
        peer::Answer::Now(match method {
            "initialize" => self.initialize(&params),
            "authenticate" => self.authenticate(&params),
            "session/set_mode" => self.set_mode(&params),
            "session/list" => self.list(&params),
            "session/delete" => self.delete(&params),
            "session/close" => self.close(&params),
            "session/set_config_option" => self.set_config_option(&params),
            m if m.starts_with(GOOSE_METHODS) => {
                // Some start extensions or wait for them.
                let (me, method, goose) = (self.clone(), m.to_string(), self.goose);
                return later(&req, move || goose(&me, &method, &params));
            }
            "session/new" => {
                let me = self.clone();
                return later(&req, move || me.new_session(&params));
            }
            "session/load" => {
                let me = self.clone();
                return later(&req, move || me.load(&params));
            }
            "session/fork" => {
                let me = self.clone();
                return later(&req, move || me.fork(&params));
            }
            "session/prompt" => {
                // The slot first: a prompt refused for want of one leaves nothing marked running.
                let responder = match take_slot(&req) {
                    Ok(r) => r,
                    Err(e) => return peer::Answer::Now(Err(e)),
                };
                match self.begin_prompt(&params) {
                    Ok((open, sid, cancel_rx, cancelled)) => {
                        let (me, asked) = (self.clone(), responder.cancel().clone());
                        let gate = AfterAnswer::new();
                        let after = gate.clone();
                        return run_later(
                            responder,
                            move || {
                                let r = me.prompt(&sid, &open, &params, (cancel_rx, &asked), &cancelled, &gate);
                                *lock(&open.running) = None;
                                r
                            },
                            move || after.answered(),
                        );
                    }
                    Err(e) => Err(e),
                }
            }
            other => Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("unknown method {other:?}; gosling acp serves {METHODS}"),
            )),
        })
    }

    pub fn notification(&self, method: &str, params: Value) {
        match method {
            "session/cancel" => self.cancel_prompt(params.get("sessionId").and_then(Value::as_str).unwrap_or("")),
            other => log::debug!("acp: ignoring the notification {other}"),
        }
    }

    /// Stops the prompt running in session `sid`: it answers `cancelled` (`session/cancel`, or
    /// `$/cancel_request` naming the prompt's request).
    fn cancel_prompt(&self, sid: &str) {
        let open = lock(&self.open).get(sid).cloned();
        match open.and_then(|o| {
            lock(&o.running).as_mut().map(|r| {
                r.cancelled.store(true, Ordering::SeqCst);
                r.cancel.take()
            })
        }) {
            Some(_) => log::info!("acp: session {sid}: prompt cancelled"),
            None => log::debug!("acp: cancel for session {sid:?}: no prompt is running"),
        }
    }

    /// What keeps the model from running, if anything (then `initialize` offers the auth method).
    fn provider_problem(&self) -> Option<String> {
        gosling_llm::Settings::resolve(&gosling_config::ProcessEnv, &|k| self.app.setting(k), (None, None))
            .err()
            .map(|e| e.to_string())
    }

    fn initialize(&self, p: &Value) -> Reply {
        let asked = p
            .get("protocolVersion")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid_params("`protocolVersion` must be a whole number (gosling speaks ACP 1)"))?;
        if asked != PROTOCOL_VERSION {
            log::info!("acp: the client asked for protocol {asked}; answering {PROTOCOL_VERSION}");
        }
        let fs = p.pointer("/clientCapabilities/fs");
        let caps = FsCaps {
            read: fs.and_then(|f| f.get("readTextFile")).and_then(Value::as_bool).unwrap_or(false),
            write: fs.and_then(|f| f.get("writeTextFile")).and_then(Value::as_bool).unwrap_or(false),
        };
        *lock(&self.fs) = caps;
        let forms = p.pointer("/clientCapabilities/elicitation/form").is_some_and(|f| !f.is_null());
        self.forms.store(forms, Ordering::SeqCst);
        let custom = p.pointer("/clientCapabilities/_meta/goose/customNotifications").and_then(Value::as_bool);
        self.custom_notifications.store(custom == Some(true), Ordering::SeqCst);
        // One method always (registries require one); it says what to set while none works.
        let description = match self.provider_problem() {
            None => "A model provider is configured (GOOSE_PROVIDER, GOOSE_MODEL and its key)".to_string(),
            Some(why) => format!("{why}. Set them in the agent's environment in your editor's agent settings (or in gosling's config with the web page), then restart the agent"),
        };
        let auth_methods =
            json!([{ "id": AUTH_METHOD, "name": "Configure a model provider", "description": description }]);
        let images = gosling_agent::usage::defaults(&|k| self.app.setting(k))
            .is_some_and(|m| gosling_llm::catalog::takes_images(&m.provider));
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                // Images when the configured provider is sent them (a session on another refuses them).
                "promptCapabilities": { "image": images, "audio": false, "embeddedContext": true },
                "mcpCapabilities": { "http": true, "sse": false },
                "sessionCapabilities": { "list": {}, "close": {}, "delete": {} },
                "auth": {},
            },
            "agentInfo": { "name": "gosling", "title": "gosling", "version": env!("CARGO_PKG_VERSION") },
            "authMethods": auth_methods,
        }))
    }

    fn authenticate(&self, p: &Value) -> Reply {
        let m = str_param(p, "methodId")?;
        if m != AUTH_METHOD {
            return Err(invalid_params(format!("unknown auth method {m:?}; gosling offers {AUTH_METHOD:?}")));
        }
        match self.provider_problem() {
            None => Ok(json!({})),
            Some(why) => Err(ErrorObject::new(
                AUTH_REQUIRED,
                format!("{why}; gosling cannot log in for you: set these in the agent's environment and restart it"),
            )),
        }
    }

    fn modes(&self, session_mode: Option<&str>) -> Value {
        let current = self.app.mode_for(session_mode).name();
        json!({
            "currentModeId": current,
            "availableModes": [
                { "id": "auto", "name": "Auto", "description": "Run tools without asking" },
                { "id": "approve", "name": "Approve", "description": "Ask before every tool call" },
                { "id": "smart_approve", "name": "Smart approve", "description": "Ask before tools that are not marked read-only" },
                { "id": "chat", "name": "Chat", "description": "No tools: answer only" },
            ],
        })
    }

    fn set_mode(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        let mode = str_param(p, "modeId")?;
        if Mode::parse(mode).is_none() {
            return Err(invalid_params(format!("unknown mode {mode:?}; use auto, approve, smart_approve or chat")));
        }
        let done =
            self.app.sessions.update_meta(sid, |s| s.goose_mode = Some(mode.to_string())).map_err(store_error)?;
        done.ok_or_else(|| session_not_found(sid))?;
        log::info!("acp: session {sid}: mode {mode}");
        Ok(json!({}))
    }

    /// Checks the cwd and the editor's MCP servers against the trust policy.
    fn client_servers(&self, p: &Value) -> Result<Vec<ExtensionConfig>, ErrorObject> {
        let list = match p.get("mcpServers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.iter().enumerate().map(|(i, s)| mcp_server(i, s)).collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid_params("`mcpServers` must be an array")),
        };
        for c in &list {
            self.check_policy(c)?;
        }
        Ok(list)
    }

    fn check_policy(&self, c: &ExtensionConfig) -> Result<(), ErrorObject> {
        match self.app.policy.check(c, InstallSource::AddExtension) {
            Ok(warnings) => {
                warnings.iter().for_each(|w| log::warn!("{w}"));
                Ok(())
            }
            Err(e) => Err(invalid_params(format!("extension {}: {e}", c.name()))),
        }
    }

    fn cwd(p: &Value) -> Result<String, ErrorObject> {
        let cwd = str_param(p, "cwd")?;
        // The one rule every front end applies (`~` expanded against HOME).
        gosling_config::working_dir(cwd, &gosling_config::ProcessEnv)
            .map(|d| d.display().to_string())
            .map_err(|e| invalid_params(format!("cwd: {e}")))
    }

    /// Starts the session's extensions (replacing a runtime it already had), with the
    /// editor's file system for the developer builtin when the client offers it.
    fn start_runtime(&self, sid: &str, cwd: &str, configs: Vec<ExtensionConfig>) -> Vec<Value> {
        let rt = SessionRuntime::new(sid, PathBuf::from(cwd), self.app.runtime_deps.clone());
        let caps = *lock(&self.fs);
        if caps.read {
            match EditorFs::new(self.conn.clone(), sid, Path::new(cwd), caps) {
                Ok(efs) => rt.set_delegate(Some(Arc::new(move |c: &ExtensionConfig, t: &str, a: Option<&Value>| {
                    efs.call(c, t, a)
                }))),
                Err(e) => log::warn!("acp: session {sid}: the editor's file system is not used: {e}"),
            }
        }
        let mut results = Vec::new();
        for r in rt.load_all(configs) {
            match &r.error {
                Some(e) => {
                    log::warn!("acp: session {sid}: extension {} did not start: {e}", r.name);
                    results.push(json!({ "name": r.name, "success": false, "error": e.to_string() }));
                }
                None => results.push(json!({ "name": r.name, "success": true })),
            }
        }
        if let Some(old) = self.app.agents.insert(rt) {
            old.shutdown();
        }
        let open = Arc::new(Open { cwd: cwd.to_string(), running: Mutex::new(None) });
        lock(&self.open).insert(sid.to_string(), open);
        results
    }

    /// goose's `_meta.enabledExtensions` of `session/new` (Goose Desktop's choice for the
    /// chat, as GooseExtension objects) and the `--with-builtin` builtins, under the policy.
    fn meta_extensions(&self, p: &Value) -> Result<Option<Vec<ExtensionConfig>>, ErrorObject> {
        let Some(list) = p.pointer("/_meta/enabledExtensions").filter(|v| !v.is_null()) else { return Ok(None) };
        let list = list.as_array().ok_or_else(|| invalid_params("`_meta.enabledExtensions` must be an array"))?;
        let mut out = Vec::new();
        for (i, e) in list.iter().enumerate() {
            let c = crate::shapes::from_goose_extension(e)
                .map_err(|e| invalid_params(format!("_meta.enabledExtensions[{i}]: {e}")))?;
            self.check_policy(&c)
                .map_err(|e| invalid_params(format!("_meta.enabledExtensions[{i}]: {}", e.message)))?;
            out.push(c);
        }
        Ok(Some(out))
    }

    fn new_session(&self, p: &Value) -> Reply {
        let cwd = Self::cwd(p)?;
        let client = self.client_servers(p)?;
        let chosen = self.meta_extensions(p)?;
        let keys: HashSet<String> = client.iter().map(|c| runtime_key(c.name())).collect();
        let mut configs: Vec<ExtensionConfig> = self
            .app
            .store
            .extensions()
            .map_err(store_error)?
            .entries
            .into_iter()
            .filter(|e| e.enabled && !keys.contains(&runtime_key(e.config.name())))
            .map(|e| e.config)
            .collect();
        if let Some(chosen) = chosen {
            // The client's list replaces the enabled set (Desktop resolves it from the config).
            configs = chosen.into_iter().filter(|c| !keys.contains(&runtime_key(c.name()))).collect();
        }
        for name in &self.app.config.with_builtins {
            if !configs.iter().chain(&client).any(|c| runtime_key(c.name()) == runtime_key(name)) {
                let v = json!({ "type": "builtin", "name": name, "description": "", "timeout": 300 });
                configs.extend(ExtensionConfig::from_value(v).ok());
            }
        }
        for c in &configs {
            self.check_policy(c)?;
        }
        configs.extend(client);
        let mut session = self.app.sessions.create(&cwd, to_values(&configs)).map_err(store_error)?;
        gosling_agent::usage::record_model(&self.app, &mut session).map_err(agent_error)?;
        let results = self.start_runtime(&session.id, &cwd, configs);
        log::info!("acp: session {} started in {cwd}", session.id);
        Ok(json!({
            "sessionId": session.id,
            "modes": self.modes(None),
            "configOptions": self.config_options(&session),
            "_meta": { "extensionResults": results, "workingDir": cwd },
        }))
    }

    /// The session's provider, model and thinking effort as ACP config options (`select`).
    fn config_options(&self, s: &Session) -> Value {
        let provider = s
            .provider_name
            .clone()
            .or_else(|| self.app.setting("GOOSE_PROVIDER"))
            .and_then(|p| gosling_llm::canonical_provider(&p).map(str::to_string));
        let model = s
            .model_config
            .as_ref()
            .and_then(|m| m.get("model_name"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.app.setting("GOOSE_MODEL"));
        let providers: Vec<Value> = gosling_llm::catalog::PROVIDERS
            .iter()
            .map(|p| json!({ "value": p.name, "name": p.display_name }))
            .collect();
        let mut models: Vec<Value> = provider
            .as_deref()
            .and_then(gosling_llm::catalog::find)
            .map(|p| p.models.iter().map(|m| json!({ "value": m.name, "name": m.name })).collect())
            .unwrap_or_default();
        if let Some(m) = &model {
            if !models.iter().any(|o| o["value"] == *m) {
                models.push(json!({ "value": m, "name": m }));
            }
        }
        let effort = s.extra.get(THINKING_EFFORT).and_then(Value::as_str).unwrap_or("off").to_string();
        let efforts: Vec<Value> = EFFORTS.iter().map(|e| json!({ "value": e, "name": e })).collect();
        json!([
            { "id": "provider", "name": "Provider", "type": "select", "currentValue": provider.unwrap_or_default(), "options": providers },
            { "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": model.unwrap_or_default(), "options": models },
            { "id": "thinking_effort", "name": "Thinking effort", "category": "thought_level", "type": "select", "currentValue": effort, "options": efforts },
        ])
    }

    /// `session/set_config_option`: the session's provider, model or thinking effort, kept on
    /// the session (a turn reads its provider and model from there); sends
    /// `config_option_update` before the answer, as goose does.
    fn set_config_option(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        let id = str_param(p, "configId")?;
        let value = p
            .get("value")
            .and_then(|v| v.as_str().map(str::to_string).or_else(|| v.as_bool().map(|b| b.to_string())))
            .ok_or_else(|| invalid_params("`value` must be the chosen option's value"))?;
        let change: Box<dyn FnOnce(&mut Session)> = match id {
            "provider" => {
                let provider = gosling_llm::canonical_provider(&value).ok_or_else(|| {
                    invalid_params(format!(
                        "provider {value:?} is not supported by gosling; use openai, anthropic or ollama"
                    ))
                })?;
                Box::new(move |s| s.provider_name = Some(provider.to_string()))
            }
            "model" if !value.trim().is_empty() => {
                Box::new(move |s| s.model_config = Some(json!({ "model_name": value.trim() })))
            }
            "thinking_effort" if EFFORTS.contains(&value.as_str()) => Box::new(move |s| {
                s.extra.insert(THINKING_EFFORT.into(), json!(value));
            }),
            "model" | "thinking_effort" => {
                return Err(invalid_params(format!(
                    "{id}: {value:?} is not an option; see the session's configOptions"
                )))
            }
            other => {
                return Err(invalid_params(format!(
                    "unknown config option {other:?}; gosling has provider, model and thinking_effort"
                )))
            }
        };
        let options = self.app.sessions.update_meta(sid, move |s| {
            change(s);
            self.config_options(s)
        });
        let options = options.map_err(store_error)?.ok_or_else(|| session_not_found(sid))?;
        self.conn.update(sid, json!({ "sessionUpdate": "config_option_update", "configOptions": options }));
        Ok(json!({ "configOptions": options }))
    }

    /// `session/list`: newest first, `_meta.types` (goose's session types; default all) and
    /// `_meta.query` (words in the title), 50 a page, `cursor` the offset of the next one.
    fn list(&self, p: &Value) -> Reply {
        let types: Vec<&str> = p
            .pointer("/_meta/types")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let query =
            p.pointer("/_meta/query").and_then(Value::as_str).map(str::to_lowercase).filter(|q| !q.trim().is_empty());
        let cwd = p.get("cwd").and_then(Value::as_str);
        let start = match p.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .ok_or_else(|| invalid_params("`cursor` must be a nextCursor this agent returned"))?,
        };
        let mut all = self.app.sessions.list().map_err(store_error)?;
        all.retain(|s| {
            (types.is_empty() || types.contains(&s.session_type.as_str())) && cwd.is_none_or(|c| s.working_dir == c)
        });
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        let mut searched = None;
        if let Some(q) = &query {
            // A title that holds the query, or (newest first, within the budget) a message.
            let named = |s: &Session| s.name.to_lowercase().contains(q.as_str());
            let others: Vec<&str> = all.iter().filter(|s| !named(s)).map(|s| s.id.as_str()).collect();
            let found = gosling_store::search::sessions_saying(&self.app.sessions, &others, q, SEARCH_BUDGET);
            all.retain(|s| named(s) || found.ids.contains(&s.id));
            searched = Some(found.complete);
        }
        let page: Vec<Value> = all.iter().skip(start).take(LIST_PAGE).map(crate::shapes::session_info).collect();
        let next = (start + LIST_PAGE < all.len()).then(|| (start + LIST_PAGE).to_string());
        let mut answer = json!({ "sessions": page, "nextCursor": next });
        if let Some(complete) = searched {
            // False: the budget ran out before the oldest sessions' messages were read.
            answer["_meta"] = json!({ "searchComplete": complete });
        }
        Ok(answer)
    }

    /// `session/delete`: its running prompt cancelled, its extensions stopped, its files gone.
    fn delete(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        self.release(sid);
        if gosling_agent::delete_session(&self.app, sid).map_err(store_error)? {
            Ok(json!({}))
        } else {
            Err(session_not_found(sid))
        }
    }

    /// `session/close`: the session stays stored; its prompt is cancelled and its extensions stop.
    fn close(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        self.release(sid);
        if let Some(rt) = self.app.agents.remove(sid) {
            rt.shutdown();
        }
        Ok(json!({}))
    }

    /// Cancels a running prompt of `sid` on this connection and forgets the session here.
    fn release(&self, sid: &str) {
        if let Some(o) = lock(&self.open).remove(sid) {
            if let Some(r) = lock(&o.running).as_mut() {
                r.cancelled.store(true, Ordering::SeqCst);
                r.cancel.take();
            }
        }
    }

    /// Adds an extension to a live session, as `/agent/add_extension` does: the trust policy,
    /// its secrets present, started in the session's runtime, kept in its extension set.
    pub(crate) fn add_session_extension(&self, sid: &str, config: ExtensionConfig) -> Result<(), ErrorObject> {
        self.check_policy(&config)?;
        let unresolved = self.app.unresolved_secrets(&config);
        if !unresolved.is_empty() {
            return Err(invalid_params(format!("extension {}: {}", config.name(), unresolved.explain())));
        }
        let rt = self.app.agents.get(sid).ok_or_else(|| session_not_found(sid))?;
        rt.wait_loaded();
        rt.add(config.clone())
            .map_err(|e| ErrorObject::new(INTERNAL_ERROR, format!("extension {} did not start: {e}", config.name())))?;
        gosling_agent::keep_session_extension(&self.app.sessions, sid, config.name(), Some(&config))
            .map_err(store_error)?
            .ok_or_else(|| session_not_found(sid))
    }

    pub(crate) fn remove_session_extension(&self, sid: &str, name: &str) -> Result<(), ErrorObject> {
        let rt = self.app.agents.get(sid).ok_or_else(|| session_not_found(sid))?;
        rt.wait_loaded();
        rt.remove(name);
        gosling_agent::keep_session_extension(&self.app.sessions, sid, name, None)
            .map_err(store_error)?
            .ok_or_else(|| session_not_found(sid))
    }

    fn load(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        let cwd = Self::cwd(p)?;
        let client = self.client_servers(p)?;
        let mut session = self.app.sessions.get(sid).map_err(store_error)?.ok_or_else(|| session_not_found(sid))?;
        let mut configs = session_extensions(&session);
        let known: HashSet<String> = configs.iter().map(|c| runtime_key(c.name())).collect();
        let added: Vec<ExtensionConfig> =
            client.into_iter().filter(|c| !known.contains(&runtime_key(c.name()))).collect();
        if !added.is_empty() || session.working_dir != cwd {
            configs.extend(added);
            let values = to_values(&configs);
            let change = |s: &mut Session| {
                s.working_dir = cwd.clone();
                store_extensions(s, values.clone());
            };
            self.app.sessions.update_meta(sid, change).map_err(store_error)?.ok_or_else(|| session_not_found(sid))?;
            change(&mut session);
        }
        let results = self.start_runtime(sid, &cwd, configs);
        for u in updates::replay(session.conversation.as_deref().unwrap_or_default(), &cwd) {
            self.conn.update(sid, u);
        }
        log::info!("acp: session {sid} loaded in {cwd}");
        Ok(json!({
            "modes": self.modes(session.goose_mode.as_deref()),
            "configOptions": self.config_options(&session),
            "_meta": { "extensionResults": results, "workingDir": cwd },
        }))
    }

    /// `session/fork` (ACP, unstable): a new session with the conversation up to
    /// `_meta.conversationBefore` (the `created` time of the first message left out, unix
    /// seconds; all of it without), made by the core (`agent::history::fork`), then opened as
    /// `session/load` opens one; the answer is load's with the new `sessionId`.
    fn fork(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        let cwd = Self::cwd(p)?;
        let before = match p.pointer("/_meta/conversationBefore") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().ok_or_else(|| {
                invalid_params("`_meta.conversationBefore` must be a whole number: the `created` time (unix seconds) of the first message to leave out")
            })?),
        };
        let new = gosling_agent::history::fork(&self.app, sid, before, &cwd).map_err(agent_error)?;
        let servers = p.get("mcpServers").cloned().unwrap_or_else(|| json!([]));
        let mut answer = self.load(&json!({ "sessionId": new.id, "cwd": cwd, "mcpServers": servers }))?;
        answer["sessionId"] = json!(new.id);
        // goose adds the new session's listing `_meta` (messageCount, createdAt, …).
        if let (Some(meta), Value::Object(info)) =
            (answer["_meta"].as_object_mut(), &crate::shapes::session_info(&new)["_meta"])
        {
            for (k, v) in info {
                meta.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Ok(answer)
    }

    /// Claims the session for one prompt: a second prompt while one runs is refused.
    #[allow(clippy::type_complexity)] // the four parts the prompt thread takes over
    fn begin_prompt(&self, p: &Value) -> Result<(Arc<Open>, String, Receiver<()>, Arc<AtomicBool>), ErrorObject> {
        let sid = str_param(p, "sessionId")?;
        let open = lock(&self.open).get(sid).cloned();
        let Some(open) = open else {
            return Err(match self.app.sessions.get_meta(sid) {
                Ok(Some(_)) => ErrorObject::new(
                    RESOURCE_NOT_FOUND,
                    format!("session {sid} is not open in this connection; open it with session/load first"),
                ),
                _ => session_not_found(sid),
            });
        };
        let mut running = lock(&open.running);
        if running.is_some() {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                format!("a prompt is already running in session {sid}; wait for its stopReason or send session/cancel"),
            ));
        }
        let (tx, rx) = bounded(1);
        let cancelled = Arc::new(AtomicBool::new(false));
        *running = Some(Running { cancel: Some(tx), cancelled: cancelled.clone() });
        drop(running);
        Ok((open, sid.to_string(), rx, cancelled))
    }

    /// The turn for a new user message, prepared exactly as `/reply` prepares it (the message
    /// is saved before the turn starts).
    fn prepare_turn(&self, sid: &str, user_message: gosling_store::message::Message) -> Result<Turn, ErrorObject> {
        use gosling_agent::Error;
        Turn::prepare(&self.app, sid, user_message, None).map_err(|e| match e {
            Error::SessionNotFound(_) | Error::NoAgent(_) => session_not_found(sid),
            // The editor shows auth errors as "log in": here, set the provider variables.
            Error::Model(e) => ErrorObject::new(AUTH_REQUIRED, e.to_string()),
            Error::SaveMessage(e) | Error::Store(e) => store_error(e),
            e @ (Error::OutOfTurns(_) | Error::BadKey(_)) => ErrorObject::new(INTERNAL_ERROR, e.to_string()),
            // The session is answering a prompt sent through the HTTP API meanwhile.
            e @ (Error::Busy(_) | Error::RequestActive) => ErrorObject::new(INVALID_REQUEST, e.to_string()),
            Error::Steer(why) => invalid_params(why),
        })
    }

    /// Runs one turn and streams it as `session/update`s; answers the stop reason. `cancel`: the
    /// channel `session/cancel` closes, and the flag `$/cancel_request` for this prompt (or the
    /// connection's end) sets.
    fn prompt(
        &self,
        sid: &str,
        open: &Open,
        p: &Value,
        (cancel, asked): (Receiver<()>, &peer::Cancel),
        cancelled: &AtomicBool,
        after_answer: &Arc<AfterAnswer>,
    ) -> Reply {
        let blocks = p
            .get("prompt")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid_params("`prompt` must be an array of content blocks"))?;
        let content =
            updates::prompt_content(blocks, &gosling_agent::usage::images(&self.app, sid)).map_err(invalid_params)?;
        let user = gosling_store::message::Message::new(msg::new_id(), gosling_store::message::Role::User, content);
        let mut turn = self.prepare_turn(sid, user)?;
        // The turn's run, which Desktop steers into (`session/steer`), until it ends.
        self.conn.update(sid, updates::active_run(Some(turn.run_id())));
        // The core named the session from its first message (`agent::title`): announced, and
        // again when the model's title replaces it after the turn.
        let announce = |conn: &Conn, sid: &str, title: &str, updated: &str| {
            conn.update(
                sid,
                json!({ "sessionUpdate": "session_info_update", "title": title, "updatedAt": updated,
                        "_meta": { "userSetName": false } }),
            );
        };
        if let Some((title, updated)) = &turn.titled {
            announce(&self.conn, sid, title, updated);
            // The model's title names the exchange: the editor hears of it after the answer.
            let (conn, sid, gate) = (self.conn.clone(), sid.to_string(), after_answer.clone());
            turn.on_model_title = Some(Box::new(move |title, updated| {
                gate.then(Box::new(move || announce(&conn, &sid, &title, &updated)))
            }));
        }
        let first_status = match turn.mode {
            Mode::Auto | Mode::Chat => "in_progress",
            Mode::Approve | Mode::SmartApprove => "pending",
        };
        let (tx, rx) = bounded::<Event>(EVENT_QUEUE);
        // The turn is the session's, not this connection's: `/sessions/{id}/events` followers
        // (the web page, Desktop 1.34) see it too.
        let request_id = format!("acp-{}", gosling_util::random_hex(8));
        let sink = gosling_agent::also_on_bus(&self.app, sid, &request_id, Arc::new(ChannelSink(tx)));
        let elicitations = self.app.elicitations.clone();
        let turn_cancel = cancel.clone();
        let handle = std::thread::Builder::new()
            .name("acp-turn".into())
            .spawn(move || turn.run(sink, turn_cancel, &elicitations))
            .map_err(|e| ErrorObject::new(INTERNAL_ERROR, format!("acp: cannot start the turn: {e}")))?;
        let mut error = None;
        // The model's text so far, for a plan written as a task list; each new plan is sent.
        let (mut text, mut last_plan) = (String::new(), None);
        let mut send_plan = |text: &str| {
            let p = updates::plan(text);
            if let Some(plan) = p.clone().filter(|_| p != last_plan) {
                self.conn.update(sid, plan);
                last_plan = p;
            }
        };
        // Tool calls announced and not yet closed: a cancel closes them (failed), so no editor
        // keeps a spinner for a call that will never report.
        let mut open_calls: Vec<String> = Vec::new();
        let mut cancelled_at = None;
        // The turn's tokens, for the answer's `usage` (none yet: zero).
        let mut used = TurnUsage::default();
        loop {
            if asked.is_cancelled() && !cancelled.load(Ordering::SeqCst) {
                self.cancel_prompt(sid);
            }
            let ev = crossbeam_channel::select! {
                recv(rx) -> ev => match ev {
                    Ok(ev) => ev,
                    Err(_) => break,
                },
                recv(cancel) -> _ => {
                    // The sender is dropped on cancel: from now on only the events already
                    // sent are read, for a short while; the turn ends in its own time.
                    cancelled_at.get_or_insert_with(std::time::Instant::now);
                    match rx.recv_timeout(CANCEL_DRAIN) {
                        Ok(ev) => ev,
                        Err(_) => break,
                    }
                },
                default(PROMPT_TICK) => continue,
            };
            if cancelled_at.is_some_and(|t| t.elapsed() > CANCEL_DRAIN) {
                break;
            }
            match ev {
                Event::Message { message, .. } => {
                    for l in updates::live(&message, first_status, &open.cwd) {
                        match l {
                            Live::Update(u) => {
                                let call = u["toolCallId"].as_str().unwrap_or("").to_string();
                                match u["sessionUpdate"].as_str() {
                                    Some("agent_message_chunk") => {
                                        text.push_str(u["content"]["text"].as_str().unwrap_or(""))
                                    }
                                    Some("tool_call") => {
                                        send_plan(&std::mem::take(&mut text));
                                        if !matches!(u["status"].as_str(), Some("completed" | "failed")) {
                                            open_calls.push(call);
                                        }
                                    }
                                    Some("tool_call_update")
                                        if matches!(u["status"].as_str(), Some("completed" | "failed")) =>
                                    {
                                        open_calls.retain(|c| *c != call)
                                    }
                                    _ => {}
                                }
                                self.conn.update(sid, u);
                            }
                            Live::Permission { id, tool, arguments } => {
                                self.ask(sid, open, &id, &tool, &arguments, &cancel);
                            }
                            Live::Elicitation { id, message, schema } => {
                                let answer = self.elicit(sid, &message, &schema, &cancel);
                                self.app.elicitations.answer(&id, answer);
                            }
                        }
                    }
                }
                Event::Notification { request_id, method, params } => {
                    let progress = (method == "notifications/progress").then_some(&params);
                    match progress.and_then(|p| updates::tool_progress(&request_id, p)) {
                        Some(u) => {
                            self.conn.update(sid, u);
                        }
                        None => log::debug!("acp: session {sid}: {method} for tool call {request_id}"),
                    }
                }
                Event::Error(e) => error = Some(e),
                Event::Finish(tokens) => {
                    used = TurnUsage::from(&tokens);
                    self.usage_update(sid, Some(&tokens));
                }
            }
        }
        send_plan(&text);
        self.conn.update(sid, updates::active_run(None));
        if cancelled.load(Ordering::SeqCst) {
            for call in open_calls {
                let mut u = updates::tool_status(&call, "failed");
                u["content"] = json!([{ "type": "content", "content": { "type": "text", "text": "cancelled" } }]);
                self.conn.update(sid, u);
            }
            // The turn thread ends by itself (a tool call in flight returns first); it holds
            // the session's turn until then.
            drop(handle);
            return Ok(json!({ "stopReason": "cancelled", "usage": updates::prompt_usage(&used) }));
        }
        let outcome = handle.join().unwrap_or(Outcome::Failed); // wait: its events ended: the turn returned
        match (outcome, error) {
            (Outcome::Finished, _) => Ok(json!({ "stopReason": "end_turn", "usage": updates::prompt_usage(&used) })),
            (Outcome::OutOfTurns, _) => {
                Ok(json!({ "stopReason": "max_turn_requests", "usage": updates::prompt_usage(&used) }))
            }
            (Outcome::Failed, e) => Err(ErrorObject::new(
                INTERNAL_ERROR,
                e.unwrap_or_else(|| "the turn failed without saying why; see the agent's stderr".into()),
            )),
        }
    }

    /// The context meter (`agent::usage`): ACP's `usage_update` for every client, goose's own
    /// for clients that declared `customNotifications`.
    fn usage_update(&self, sid: &str, last: Option<&gosling_agent::messages::Tokens>) {
        let meter = match gosling_agent::usage::meter(&self.app, sid, last) {
            Ok(m) => m,
            Err(e) => return log::debug!("acp: session {sid}: no usage update: {e}"),
        };
        let (goose, acp) = updates::usage_updates(&meter);
        if self.custom_notifications.load(Ordering::SeqCst) {
            self.conn.notify("_goose/unstable/session/update", json!({ "sessionId": sid, "update": goose }));
        }
        self.conn.update(sid, acp);
    }

    /// Relays an extension's MCP elicitation (a form for the person) to the editor as ACP's
    /// form-mode `elicitation/create`, and returns the person's answer. A client that takes no
    /// forms, an error or a timeout answer "cancel" at once (the extension goes on).
    fn elicit(&self, sid: &str, message: &str, schema: &Value, cancel: &Receiver<()>) -> Answer {
        if !self.forms.load(Ordering::SeqCst) {
            log::info!(
                "acp: session {sid}: an extension asked {message:?}; the editor takes no forms, so it is cancelled"
            );
            return Answer::Cancel;
        }
        let params = json!({ "sessionId": sid, "mode": "form", "message": message, "requestedSchema": schema });
        match self.conn.request("elicitation/create", params, ELICITATION_WAIT, Some(cancel)) {
            Ok(r) => match r.get("action").and_then(Value::as_str) {
                Some("accept") => {
                    Answer::Accept(r.get("content").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({})))
                }
                Some("decline") => Answer::Decline,
                _ => Answer::Cancel,
            },
            Err(e) => {
                log::info!("acp: session {sid}: elicitation/create: {e:?}; the extension hears cancel");
                Answer::Cancel
            }
        }
    }

    /// Asks the client whether a tool may run (approve modes) and hands the answer to the
    /// waiting turn. "Always" is remembered for the session by the turn loop
    /// (`reply::Confirmations`), whichever front end asks next.
    fn ask(&self, sid: &str, open: &Open, id: &str, tool: &str, args: &Value, cancel: &Receiver<()>) {
        let allow = |action: &str| {
            if !self.app.confirmations.answer(id, action) {
                log::info!("acp: session {sid}: the permission answer for {id} came after the turn stopped waiting");
            }
        };
        let mut call = updates::tool_call(id, tool, args, "pending", &open.cwd);
        call.as_object_mut().map(|o| o.remove("sessionUpdate"));
        let params = json!({
            "sessionId": sid,
            "toolCall": call,
            "options": [
                { "optionId": "allow_once", "name": "Allow once", "kind": "allow_once" },
                { "optionId": "allow_always", "name": "Always allow", "kind": "allow_always" },
                { "optionId": "reject_once", "name": "Reject", "kind": "reject_once" },
                { "optionId": "reject_always", "name": "Always reject", "kind": "reject_always" },
            ],
        });
        let action = match self.conn.request("session/request_permission", params, PERMISSION_WAIT, Some(cancel)) {
            Ok(v) => match (
                v.pointer("/outcome/outcome").and_then(Value::as_str),
                v.pointer("/outcome/optionId").and_then(Value::as_str),
            ) {
                (Some("selected"), Some("allow_once")) => "allow_once",
                (Some("selected"), Some("allow_always")) => "always_allow",
                (Some("selected"), Some("reject_once")) => "deny_once",
                (Some("selected"), Some("reject_always")) => "always_deny",
                (Some("cancelled"), _) => "cancel",
                other => {
                    log::warn!(
                        "acp: session {sid}: unexpected permission outcome {other:?}; the tool call is declined"
                    );
                    "deny_once"
                }
            },
            Err(CallError::Cancelled { .. }) => return,
            Err(e) => {
                log::warn!("acp: session {sid}: {e}; the tool call is declined");
                "deny_once"
            }
        };
        if matches!(action, "allow_once" | "always_allow") {
            self.conn.update(sid, updates::tool_status(id, "in_progress"));
        }
        allow(action)
    }

    /// Cancels running prompts and stops every session's extensions (stdin ended).
    pub fn shutdown(&self) {
        for o in lock(&self.open).values() {
            if let Some(r) = lock(&o.running).as_mut() {
                r.cancelled.store(true, Ordering::SeqCst);
                r.cancel.take();
            }
        }
        self.app.shutdown();
    }
}
