//! The ACP methods: `initialize`, `authenticate`, `session/new`, `session/load`,
//! `session/set_mode`, `session/prompt` (with `session/request_permission` to the client in
//! approve modes) and the `session/cancel` notification.

use crate::conn::{CallError, Conn, Incoming, Wire};
use crate::fs::{EditorFs, FsCaps};
use crate::protocol::{invalid_params, AUTH_REQUIRED, PROTOCOL_VERSION, RESOURCE_NOT_FOUND};
use crate::updates::{self, Live};
use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_agent::elicit::Answer;
use gosling_agent::events::{ChannelSink, Event};
use gosling_agent::extension_set::{Origin, StoredExtension};
use gosling_agent::host::Host;
use gosling_agent::messages as msg;
use gosling_agent::ops::{DelegateFor, ModelChoice, NewSession, OpenSession, SessionQuery, Wait};
use gosling_agent::permissions::Decision;
use gosling_agent::reply::{Mode, Outcome, Turn};
use gosling_extensions::config::{runtime_key, ExtensionConfig, SSE_UNSUPPORTED};
use gosling_extensions::policy::InstallSource;
use gosling_extensions::runtime::{LoadResult, ToolDelegate};
use gosling_store::sessions::Session;
use gosling_util::lock;
use gosling_wire::jsonrpc::{ErrorObject, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND};
use gosling_wire::peer::{self, Busy, Responder};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
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
    /// What other processes append to the session reaches the editor while it is open here.
    _others: Option<gosling_agent::follow::Following>,
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

pub(crate) fn session_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(
        RESOURCE_NOT_FOUND,
        format!("Session {id} not found; create one with session/new or open it with session/load"),
    )
}

/// A session operation's failure (`agent::ops`) as ACP's error; `sid` names the session.
pub(crate) fn agent_error(e: gosling_agent::Error, sid: &str) -> ErrorObject {
    use gosling_agent::Error as E;
    match e {
        E::SessionNotFound(id) | E::NoAgent(id) => session_not_found(if id.is_empty() { sid } else { &id }),
        // The editor shows auth errors as "log in": here, set the provider variables.
        E::Model(e) => ErrorObject::new(AUTH_REQUIRED, e.to_string()),
        E::SaveMessage(e) | E::Store(e) => store_error(e),
        e @ (E::BadKey(_)
        | E::UnknownMode(_)
        | E::MissingSecrets { .. }
        | E::Refused(_)
        | E::BadName(_)
        | E::UnknownProvider(_)
        | E::NoModel
        | E::NotConfigured(_)) => invalid_params(e.to_string()),
        // The session is answering a prompt sent through the HTTP API meanwhile.
        e @ (E::Busy(_) | E::RequestActive) => ErrorObject::new(INVALID_REQUEST, e.to_string()),
        e @ (E::OutOfTurns(_) | E::NotStarted { .. } | E::Extensions(_)) => {
            ErrorObject::new(INTERNAL_ERROR, e.to_string())
        }
    }
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
            "session/cancel" => {
                let sid = params.get("sessionId").and_then(Value::as_str).unwrap_or("").to_string();
                self.cancel_prompt(&sid);
                // A turn another front end runs in the session (the HTTP API's) stops too; off
                // the reader thread, since a bus request is given a moment to wind down.
                let app = self.app.clone();
                let spawned =
                    std::thread::Builder::new().name("acp-cancel".into()).spawn(move || app.cancel_turn(&sid));
                if let Err(e) = spawned {
                    log::warn!("acp: cannot start a thread to cancel: {e}");
                }
            }
            other => log::debug!("acp: ignoring the notification {other}"),
        }
    }

    /// Stops the prompt this connection runs in session `sid` (only its own: the connection's
    /// end, unlike `session/cancel`, leaves a turn another front end runs alone): it answers
    /// `cancelled` (`session/cancel`, `$/cancel_request` naming the prompt's request, the end).
    pub fn cancel_prompt(&self, sid: &str) {
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
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": { "image": false, "audio": false, "embeddedContext": true },
                "mcpCapabilities": { "http": true, "sse": false },
                "sessionCapabilities": { "list": {}, "close": {}, "delete": {} },
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
        self.app.set_mode(sid, str_param(p, "modeId")?).map_err(|e| agent_error(e, sid))?;
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
        self.app
            .policy_check(c, InstallSource::AddExtension)
            .map_err(|e| invalid_params(format!("extension {}: {e}", c.name())))
    }

    fn cwd(p: &Value) -> Result<String, ErrorObject> {
        let cwd = str_param(p, "cwd")?;
        // The one rule every front end applies (`~` expanded against HOME).
        gosling_config::working_dir(cwd, &gosling_config::ProcessEnv)
            .map(|d| d.display().to_string())
            .map_err(|e| invalid_params(format!("cwd: {e}")))
    }

    /// The developer builtin's files through the editor's file system, when the client offers it.
    fn delegate(&self, cwd: &str) -> Option<DelegateFor> {
        let caps = *lock(&self.fs);
        if !caps.read {
            return None;
        }
        let (conn, cwd) = (self.conn.clone(), PathBuf::from(cwd));
        Some(Box::new(move |sid: &str| match EditorFs::new(conn, sid, &cwd, caps) {
            Ok(efs) => {
                let d: ToolDelegate =
                    Arc::new(move |c: &ExtensionConfig, t: &str, a: Option<&Value>| efs.call(c, t, a));
                Some(d)
            }
            Err(e) => {
                log::warn!("acp: session {sid}: the editor's file system is not used: {e}");
                None
            }
        }))
    }

    /// The session is open on this connection; goose's `extensionResults` of its start.
    fn opened(&self, sid: &str, cwd: &str, results: &[LoadResult]) -> Vec<Value> {
        let others = self.follow_others(sid, cwd);
        let open = Arc::new(Open { cwd: cwd.to_string(), running: Mutex::new(None), _others: others });
        lock(&self.open).insert(sid.to_string(), open);
        results
            .iter()
            .map(|r| match &r.error {
                Some(e) => json!({ "name": r.name, "success": false, "error": e }),
                None => json!({ "name": r.name, "success": true }),
            })
            .collect()
    }

    /// The messages other processes (the web page's server, another editor) append to the
    /// session, sent to the editor as `session/load` replays them (`agent::follow`).
    fn follow_others(&self, sid: &str, cwd: &str) -> Option<gosling_agent::follow::Following> {
        struct Updates {
            conn: std::sync::Weak<Conn>,
            sid: String,
            cwd: String,
        }
        impl gosling_agent::events::Sink for Updates {
            fn emit(&self, ev: Event) -> bool {
                let Some(conn) = self.conn.upgrade() else { return false };
                if let Event::Message { message, .. } = ev {
                    for u in updates::replay(std::slice::from_ref(&message), &self.cwd) {
                        conn.update(&self.sid, u);
                    }
                }
                true
            }
        }
        let sink = Updates { conn: Arc::downgrade(&self.conn), sid: sid.to_string(), cwd: cwd.to_string() };
        self.app
            .follow_others(sid, Arc::new(sink))
            .map_err(|e| log::warn!("acp: session {sid}: other processes' turns are not followed: {e}"))
            .ok()
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
        let error = |e| agent_error(e, "");
        let mut set = match chosen {
            // The client's list replaces the enabled set (Desktop resolves it from the config).
            Some(chosen) => self.app.chosen_extensions(chosen).map_err(error)?,
            None => self.app.enabled_extensions().map_err(error)?,
        };
        set.retain(|e| !keys.contains(&runtime_key(e.config.name())));
        let mut own = client;
        for name in &self.app.config().with_builtins {
            if !set.iter().map(|e| &e.config).chain(&own).any(|c| runtime_key(c.name()) == runtime_key(name)) {
                let v = json!({ "type": "builtin", "name": name, "description": "", "timeout": 300 });
                own.extend(ExtensionConfig::from_value(v).ok());
            }
        }
        set.extend(own.into_iter().map(|config| StoredExtension { config, origin: Origin::Session }));
        let new = NewSession {
            working_dir: cwd.clone(),
            extensions: set,
            source: InstallSource::AddExtension,
            recipe: None,
            wait: Wait::Started,
            delegate: self.delegate(&cwd),
        };
        let started = self.app.start_session(new).map_err(|e| match e {
            gosling_agent::Error::Refused(e) => invalid_params(e.to_string()),
            e => agent_error(e, ""),
        })?;
        let session = started.session;
        let results = self.opened(&session.id, &cwd, &started.results);
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
        match id {
            "provider" => {
                let choice = ModelChoice { provider: Some(value), ..Default::default() };
                self.app.set_model(sid, choice).map_err(|e| agent_error(e, sid))?;
            }
            "model" if !value.trim().is_empty() => {
                let choice = ModelChoice { model: Some(value), ..Default::default() };
                self.app.set_model(sid, choice).map_err(|e| agent_error(e, sid))?;
            }
            "thinking_effort" if EFFORTS.contains(&value.as_str()) => {
                self.app.set_session_value(sid, THINKING_EFFORT, json!(value)).map_err(|e| agent_error(e, sid))?;
            }
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
        }
        let options = self.config_options(&self.app.session_meta(sid).map_err(|e| agent_error(e, sid))?);
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
        let query = p.pointer("/_meta/query").and_then(Value::as_str);
        let cwd = p.get("cwd").and_then(Value::as_str);
        let start = match p.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.parse::<usize>().ok())
                .ok_or_else(|| invalid_params("`cursor` must be a nextCursor this agent returned"))?,
        };
        let asked = SessionQuery { types, working_dir: cwd, query, budget: SEARCH_BUDGET };
        let (all, searched) = self.app.search_sessions(&asked).map_err(|e| agent_error(e, ""))?;
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
        self.app.delete_session(sid).map_err(|e| agent_error(e, sid))?;
        Ok(json!({}))
    }

    /// `session/close`: the session stays stored; its prompt is cancelled and its extensions stop.
    fn close(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        self.release(sid);
        match self.app.stop_session(sid) {
            Ok(()) | Err(gosling_agent::Error::NoAgent(_)) => Ok(json!({})),
            Err(e) => Err(agent_error(e, sid)),
        }
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

    /// Adds an extension to a live session (`agent::ops`, as `/agent/add_extension`), with the
    /// same words for the same failures.
    pub(crate) fn add_session_extension(&self, sid: &str, config: ExtensionConfig) -> Result<(), ErrorObject> {
        self.app.add_extension(sid, config).map_err(|e| match e {
            gosling_agent::Error::Refused(e) => invalid_params(e.to_string()),
            e @ gosling_agent::Error::MissingSecrets { .. } => invalid_params(format!("Failed to add extension: {e}")),
            e @ gosling_agent::Error::NotStarted { .. } => {
                ErrorObject::new(INTERNAL_ERROR, format!("Failed to add extension: {e}"))
            }
            e => agent_error(e, sid),
        })
    }

    pub(crate) fn remove_session_extension(&self, sid: &str, name: &str) -> Result<(), ErrorObject> {
        self.app.remove_extension(sid, name).map_err(|e| agent_error(e, sid))
    }

    /// `session/load`: the stored session opened here (its extension set as the person left it,
    /// less what the config took back, plus the editor's `mcpServers`), its conversation replayed.
    fn load(&self, p: &Value) -> Reply {
        let sid = str_param(p, "sessionId")?;
        let cwd = Self::cwd(p)?;
        let client = self.client_servers(p)?;
        let open =
            OpenSession { working_dir: Some(cwd.clone()), added: client, restart: true, delegate: self.delegate(&cwd) };
        let opened = self.app.open_session(sid, open).map_err(|e| match e {
            gosling_agent::Error::Refused(e) => invalid_params(e.to_string()),
            e => agent_error(e, sid),
        })?;
        let session = opened.session;
        let results = self.opened(sid, &cwd, &opened.results);
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
        let new = gosling_agent::history::fork(&self.app, sid, before, &cwd).map_err(|e| agent_error(e, sid))?;
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
            return Err(match self.app.session_meta(sid) {
                Ok(_) => ErrorObject::new(
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
        Turn::prepare(&self.app, sid, user_message, None).map_err(|e| agent_error(e, sid))
    }

    /// Runs one turn and streams it as `session/update`s; answers the stop reason. `cancel`: the
    /// channel `session/cancel` closes, and the flag `$/cancel_request` for this prompt (or the
    /// connection's end) sets.
    fn prompt(
        &self,
        sid: &str,
        open: &Arc<Open>,
        p: &Value,
        (cancel, asked): (Receiver<()>, &peer::Cancel),
        cancelled: &AtomicBool,
        after_answer: &Arc<AfterAnswer>,
    ) -> Reply {
        let blocks = p
            .get("prompt")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid_params("`prompt` must be an array of content blocks"))?;
        let content = updates::prompt_content(blocks).map_err(invalid_params)?;
        let user = gosling_store::message::Message::new(msg::new_id(), gosling_store::message::Role::User, content);
        let mut turn = self.prepare_turn(sid, user)?;
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
        // Any front end may stop it (`/sessions/{id}/cancel` naming this request or none).
        let own = open.clone();
        let _cancel = self.app.on_cancel(
            sid,
            &request_id,
            Box::new(move || {
                if let Some(r) = lock(&own.running).as_mut() {
                    r.cancelled.store(true, Ordering::SeqCst);
                    r.cancel.take();
                }
            }),
        );
        let sink = self.app.also_on_bus(sid, &request_id, Arc::new(ChannelSink(tx)));
        let (host, turn_cancel) = (self.app.clone(), cancel.clone());
        let handle = std::thread::Builder::new()
            .name("acp-turn".into())
            .spawn(move || host.run_turn(turn, sink, turn_cancel))
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
                                self.app.answer_elicitation(&id, answer);
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
                Event::Finish(tokens) => self.usage_update(sid, &tokens),
            }
        }
        send_plan(&text);
        if cancelled.load(Ordering::SeqCst) {
            for call in open_calls {
                let mut u = updates::tool_status(&call, "failed");
                u["content"] = json!([{ "type": "content", "content": { "type": "text", "text": "cancelled" } }]);
                self.conn.update(sid, u);
            }
            // The turn thread ends by itself (a tool call in flight returns first); it holds
            // the session's turn until then.
            drop(handle);
            return Ok(json!({ "stopReason": "cancelled" }));
        }
        let outcome = handle.join().unwrap_or(Outcome::Failed); // wait: its events ended: the turn returned
        match (outcome, error) {
            (Outcome::Finished, _) => Ok(json!({ "stopReason": "end_turn" })),
            (Outcome::OutOfTurns, _) => Ok(json!({ "stopReason": "max_turn_requests" })),
            (Outcome::Failed, e) => Err(ErrorObject::new(
                INTERNAL_ERROR,
                e.unwrap_or_else(|| "the turn failed without saying why; see the agent's stderr".into()),
            )),
        }
    }

    /// goose's token meter (`_goose/unstable/session/update` `usage_update`), for clients that
    /// declared `customNotifications`.
    fn usage_update(&self, sid: &str, t: &gosling_agent::messages::Tokens) {
        if !self.custom_notifications.load(Ordering::SeqCst) {
            return;
        }
        let s = self.app.session_meta(sid).ok();
        let model = s
            .as_ref()
            .and_then(|s| s.model_config.as_ref()?.get("model_name")?.as_str().map(str::to_string))
            .or_else(|| self.app.setting("GOOSE_MODEL"));
        let limit = gosling_llm::catalog::PROVIDERS
            .iter()
            .flat_map(|p| p.models)
            .find(|m| Some(m.name) == model.as_deref())
            .map_or(0, |m| m.context_limit);
        let acc_in = s.as_ref().and_then(|s| s.accumulated_input_tokens).unwrap_or(t.acc_input).max(0);
        let acc_out = s.as_ref().and_then(|s| s.accumulated_output_tokens).unwrap_or(t.acc_output).max(0);
        self.conn.notify(
            "_goose/unstable/session/update",
            json!({ "sessionId": sid, "update": {
                "sessionUpdate": "usage_update", "used": (t.input + t.output).max(0), "contextLimit": limit,
                "accumulatedInputTokens": acc_in, "accumulatedOutputTokens": acc_out,
            }}),
        );
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
        let allow = |action: Decision| {
            if !self.app.confirm_tool(id, action) {
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
                (Some("selected"), Some("allow_once")) => Decision::AllowOnce,
                (Some("selected"), Some("allow_always")) => Decision::AlwaysAllow,
                (Some("selected"), Some("reject_once")) => Decision::DenyOnce,
                (Some("selected"), Some("reject_always")) => Decision::AlwaysDeny,
                (Some("cancelled"), _) => Decision::Cancel,
                other => {
                    log::warn!(
                        "acp: session {sid}: unexpected permission outcome {other:?}; the tool call is declined"
                    );
                    Decision::DenyOnce
                }
            },
            Err(CallError::Cancelled { .. }) => return,
            Err(e) => {
                log::warn!("acp: session {sid}: {e}; the tool call is declined");
                Decision::DenyOnce
            }
        };
        if matches!(action, Decision::AllowOnce | Decision::AlwaysAllow) {
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
