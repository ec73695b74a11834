//! The ACP methods: `initialize`, `authenticate`, `session/new`, `session/load`,
//! `session/set_mode`, `session/prompt` (with `session/request_permission` to the client in
//! approve modes) and the `session/cancel` notification.

use crate::client_requests::{Elicitation, ElicitationAnswer, PermissionOutcome, RequestPermission};
use crate::conn::{CallError, Conn, Incoming, Wire};
use crate::fs::{EditorFs, FsCaps};
use crate::protocol::{
    self as acp, invalid_params, ExtensionResult, Initialized, Notification, Prompted, Request, SessionList,
    SessionOpened, StopReason, PROTOCOL_VERSION, RESOURCE_NOT_FOUND,
};
use crate::session_update::{self as su, Notice, NoticeSeverity, SessionUpdate};
use crate::updates::{self, Live};
use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_agent::elicit::Answer;
use gosling_agent::events::{ChannelSink, Event};
use gosling_agent::extension_set::{Origin, StoredExtension};
use gosling_agent::host::Host;
use gosling_agent::messages as msg;
use gosling_agent::ops::{DelegateFor, ModelChoice, NewSession, OpenSession, SessionQuery, Wait, SEARCH_BUDGET};
use gosling_agent::permissions::Decision;
use gosling_agent::reply::{Mode, Outcome, Turn};
use gosling_agent::usage::TurnUsage;
use gosling_extensions::config::{runtime_key, ExtensionConfig};
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

const METHODS: &str = "initialize, authenticate, session/new, session/load, session/resume, session/list, session/delete, session/close, session/set_mode, session/set_config_option, session/prompt, session/fork, the session/cancel notification and goose's _goose/unstable/* methods";

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
    /// The client presents ACP's `notice` updates (`clientCapabilities.session.notices`).
    notices: AtomicBool,
    open: Mutex<HashMap<String, Arc<Open>>>,
    /// The sessions this connection sent prompts to: their turns stop when it ends.
    prompted: Mutex<HashSet<String>>,
    /// Answers goose's own methods (`_goose/…`, the `goose` module), given by whoever wires the
    /// connection, so the standard methods here do not depend on goose's.
    goose: GooseMethods,
}

/// The answerer of goose's own methods (`goose::call`).
pub type GooseMethods = fn(&Arc<Agent>, &str, crate::goose_params::GooseCall) -> Reply;

pub(crate) fn store_error(e: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(INTERNAL_ERROR, format!("acp: the session store failed: {e}"))
}

pub(crate) fn session_not_found(id: &str) -> ErrorObject {
    ErrorObject::new(
        RESOURCE_NOT_FOUND,
        format!("Session {id} not found: no session has this id; list them with session/list, or create one with session/new"),
    )
}

/// A session operation's failure (`agent::ops`) as ACP's error; `sid` names the session.
pub(crate) fn agent_error(e: gosling_agent::Error, sid: &str) -> ErrorObject {
    use gosling_agent::Error as E;
    match e {
        E::SessionNotFound(id) | E::NoAgent(id) => session_not_found(if id.is_empty() { sid } else { &id }),
        // The editor shows auth errors as "log in": here, set the provider variables.
        // A missing provider, model or key (or one the provider refuses) is ACP's
        // `auth_required`; a model that fails otherwise is not a log-in problem.
        E::Model(e @ (gosling_llm::Error::NotConfigured(_) | gosling_llm::Error::Http { status: 401 | 403, .. })) => {
            acp::auth_required(AUTH_METHOD, &e.to_string())
        }
        E::Model(e) => ErrorObject::new(INTERNAL_ERROR, e.to_string()),
        E::SaveMessage(e) | E::Store(e) => store_error(e),
        e @ (E::BadKey(_)
        | E::UnknownMode(_)
        | E::MissingSecrets { .. }
        | E::Refused(_)
        | E::BadName(_)
        | E::BadPermission(_)
        | E::UnknownProvider(_)
        | E::NoModel
        | E::NotConfigured(_)
        | E::BadWorkingDir(_)
        | E::BadImport(_)) => invalid_params(e.to_string()),
        // The session is answering a prompt sent through the HTTP API meanwhile.
        e @ (E::Busy(_) | E::RequestActive) => ErrorObject::new(INVALID_REQUEST, e.to_string()),
        E::Steer(why) => invalid_params(why),
        e @ (E::OutOfTurns(_) | E::NotStarted { .. } | E::Extensions(_)) => {
            ErrorObject::new(INTERNAL_ERROR, e.to_string())
        }
    }
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
        match Notification::parse(method, params) {
            Ok(n) => Agent::notification(self, n),
            Err(e) => log::warn!("acp: ignoring the notification {method}: {}", e.message),
        }
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
/// The commands an editor may offer in gosling's sessions (`available_commands_update`): none.
/// gosling runs no slash commands (it has no recipes, skills or compaction commands, and its
/// extensions' prompts are not commands); a message starting with `/` goes to the model as
/// written, so announcing one would promise what does not happen.
fn commands() -> Vec<Value> {
    Vec::new()
}

fn later(req: &Incoming<'_>, f: impl FnOnce() -> Reply + Send + 'static) -> peer::Answer {
    match take_slot(req) {
        Ok(responder) => run_later(responder, f, || ()),
        Err(e) => peer::Answer::Now(Err(e)),
    }
}

/// The threads that answer requests later (`run_later`), kept between requests (a thread
/// started per prompt cost a `clone` and its stack every turn); one ends after 5 minutes
/// without a request.
static REQUESTS: gosling_util::Workers = gosling_util::Workers::new("acp-request", Duration::from_secs(300));

/// Answers on a thread of `REQUESTS` with what `f` returns, then runs `then`.
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
    match REQUESTS.run(run) {
        Ok(_) => peer::Answer::Later,
        Err(e) => peer::Answer::Now(Err(ErrorObject::new(INTERNAL_ERROR, format!("acp: cannot start a thread: {e}")))),
    }
}

/// Each model call of a turn, as the turn's events show it: a call ends when the tokens the
/// events carry grow (the turn adds each call's usage as it completes); its message is the
/// assistant message it wrote; it started when the turn's previous step ended (the prompt,
/// the tool results, the previous call). Measured here, at the edge that sends it.
struct CallClock {
    started: std::time::Instant,
    first: Option<std::time::Instant>,
    message: Option<String>,
    seen: (i64, i64),
}

impl CallClock {
    fn new() -> CallClock {
        CallClock { started: std::time::Instant::now(), first: None, message: None, seen: (0, 0) }
    }

    /// Takes one event (its message, if any, and tokens); the usage of the call that just
    /// ended, when one did.
    fn see(
        &mut self,
        message: Option<&gosling_store::message::Message>,
        tokens: &gosling_agent::messages::Tokens,
    ) -> Option<su::MessageUsage> {
        use gosling_store::message::Role;
        let now = std::time::Instant::now();
        let assistant = message.filter(|m| m.role == Role::Assistant).and_then(|m| m.id.clone());
        let mut ended = None;
        if (tokens.acc_input, tokens.acc_output) != self.seen {
            self.seen = (tokens.acc_input, tokens.acc_output);
            let ms = |t: std::time::Instant| t.saturating_duration_since(self.started).as_millis() as u64;
            ended = self.message.take().or(assistant.clone()).map(|message_id| su::MessageUsage {
                message_id,
                input: tokens.input,
                output: tokens.output,
                elapsed_ms: ms(now),
                first_token_ms: self.first.map(ms),
            });
            (self.started, self.first) = (now, None);
        }
        match (message, assistant) {
            // A text chunk of the call under way.
            (Some(m), Some(id)) if ended.is_none() => {
                let text = m.content.iter().any(|c| matches!(c, gosling_store::message::Content::Text(_)));
                if text && self.first.is_none() {
                    self.first = Some(now);
                }
                self.message.get_or_insert(id);
            }
            // The tools' results (or a steered message): the next call starts now.
            (Some(m), None) if m.role == Role::User => {
                (self.started, self.first, self.message) = (now, None, None);
            }
            _ => {}
        }
        ended
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
            notices: AtomicBool::new(false),
            open: Mutex::default(),
            prompted: Mutex::default(),
        }
    }

    /// Dispatches one request: answered at once, or later from a thread of its own (methods
    /// that start extensions, wait for the model or for the person).
    pub fn request(self: &Arc<Self>, mut req: Incoming<'_>) -> peer::Answer {
        log::debug!("acp: request {} {}", req.id, req.method);
        let request = match Request::parse(&req.method, req.params.take()) {
            Ok(r) => r,
            Err(e) => return peer::Answer::Now(Err(e)),
        };
        peer::Answer::Now(match request {
            Request::Initialize(p) => self.initialize(&p),
            Request::Authenticate(p) => self.authenticate(&p),
            Request::SetMode(p) => self.set_mode(&p),
            Request::ListSessions(p) => self.list(&p),
            Request::DeleteSession(p) => self.delete(&p),
            Request::CloseSession(p) => self.close(&p),
            Request::SetConfigOption(p) => self.set_config_option(&p),
            Request::Goose { method, call } => {
                // Some start extensions or wait for them.
                let (me, goose) = (self.clone(), self.goose);
                let steered = match &call {
                    crate::goose_params::GooseCall::Steer { session_id, .. } => Some(session_id.clone()),
                    _ => None,
                };
                return later(&req, move || {
                    let answer = goose(&me, &method, call);
                    // A steer taken is confirmed as goose confirms it, so Desktop keeps the
                    // message it showed for it even when the turn ends before the model reads it.
                    if let (Some(sid), Ok(v)) = (&steered, &answer) {
                        if let (Some(run), Some(message)) = (v["runId"].as_str(), v["messageId"].as_str()) {
                            let queued = SessionUpdate::QueuedSteer { run_id: run.into(), message_id: message.into() };
                            me.conn.update(sid, &queued);
                        }
                    }
                    answer
                });
            }
            Request::NewSession(p) => {
                let me = self.clone();
                return self.open_later(&req, None, move || me.new_session(p));
            }
            Request::LoadSession(p) => {
                let (me, sid) = (self.clone(), p.session_id.clone());
                return self.open_later(&req, Some(sid), move || me.load(p, true));
            }
            Request::ResumeSession(p) => {
                let (me, sid) = (self.clone(), p.session_id.clone());
                return self.open_later(&req, Some(sid), move || me.load(p, false));
            }
            Request::ForkSession(p) => {
                let me = self.clone();
                return self.open_later(&req, None, move || me.fork(p));
            }
            Request::Prompt(p) => {
                lock(&self.prompted).insert(p.session_id.clone());
                // The slot first: a prompt refused for want of one leaves nothing marked running.
                let responder = match take_slot(&req) {
                    Ok(r) => r,
                    Err(e) => return peer::Answer::Now(Err(e)),
                };
                match self.begin_prompt(&p.session_id) {
                    Ok((open, cancel_rx, cancelled)) => {
                        let (me, asked) = (self.clone(), responder.cancel().clone());
                        let gate = AfterAnswer::new();
                        let after = gate.clone();
                        return run_later(
                            responder,
                            move || {
                                let r = me.prompt(p, &open, (cancel_rx, &asked), &cancelled, &gate);
                                *lock(&open.running) = None;
                                r
                            },
                            move || after.answered(),
                        );
                    }
                    Err(e) => Err(e),
                }
            }
            Request::Unknown(other) => Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("unknown method {other:?}; gosling acp serves {METHODS}"),
            )),
        })
    }

    pub fn notification(&self, n: Notification) {
        match n {
            Notification::Cancel(p) => {
                let sid = p.session_id;
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
            Notification::Other(other) => log::debug!("acp: ignoring the notification {other}"),
        }
    }

    /// The connection ends: the prompts it started stop (only its own, see `cancel_prompt`).
    pub fn end_connection(&self) {
        let prompted = std::mem::take(&mut *lock(&self.prompted));
        for sid in prompted {
            self.cancel_prompt(&sid);
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

    fn initialize(&self, p: &acp::Initialize) -> Reply {
        let asked = p.protocol_version;
        if asked != PROTOCOL_VERSION {
            log::info!("acp: the client asked for protocol {asked}; answering {PROTOCOL_VERSION}");
        }
        *lock(&self.fs) = p.fs;
        self.forms.store(p.elicitation_form, Ordering::SeqCst);
        self.notices.store(p.notices, Ordering::SeqCst);
        self.custom_notifications.store(p.custom_notifications, Ordering::SeqCst);
        // One method always (registries require one); it says what to set while none works.
        let description = match self.provider_problem() {
            None => "A model provider is configured (GOOSE_PROVIDER, GOOSE_MODEL and its key)".to_string(),
            Some(why) => format!("{why}. Set them in the agent's environment in your editor's agent settings (or in gosling's config with the web page), then restart the agent"),
        };
        let images = gosling_agent::usage::defaults(&|k| self.app.setting(k))
            .is_some_and(|m| gosling_llm::catalog::takes_images(&m.provider));
        let answer = Initialized {
            auth_method: AUTH_METHOD,
            auth_description: description,
            version: env!("CARGO_PKG_VERSION"),
            images,
        };
        Ok(answer.to_value())
    }

    fn authenticate(&self, p: &acp::Authenticate) -> Reply {
        let m = &p.method_id;
        if m != AUTH_METHOD {
            return Err(invalid_params(format!("unknown auth method {m:?}; gosling offers {AUTH_METHOD:?}")));
        }
        match self.provider_problem() {
            None => Ok(acp::empty()),
            Some(why) => Err(acp::auth_required(
                AUTH_METHOD,
                &format!("{why}; gosling cannot log in for you: set these in the agent's environment and restart it"),
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

    fn set_mode(&self, p: &acp::SetMode) -> Reply {
        let sid = &p.session_id;
        self.app.set_mode(sid, &p.mode_id).map_err(|e| agent_error(e, sid))?;
        Ok(acp::empty())
    }

    /// Checks the editor's MCP servers against the trust policy.
    fn client_servers(&self, list: Vec<ExtensionConfig>) -> Result<Vec<ExtensionConfig>, ErrorObject> {
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

    fn cwd(cwd: &str) -> Result<String, ErrorObject> {
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
    fn opened(&self, sid: &str, cwd: &str, results: &[LoadResult]) -> Vec<ExtensionResult> {
        let others = self.follow_others(sid, cwd);
        let open = Arc::new(Open { cwd: cwd.to_string(), running: Mutex::new(None), _others: others });
        lock(&self.open).insert(sid.to_string(), open);
        // An editor that presents notices hears of each extension that did not start (goose's
        // clients read `extensionResults` instead). Sent before the answer: ACP says a notice may
        // go unseen, and the answer's `extensionResults` holds the same.
        if self.notices.load(Ordering::SeqCst) {
            for r in results {
                if let Some(e) = &r.error {
                    let notice = Notice {
                        severity: NoticeSeverity::Warning,
                        title: format!("Extension {} did not start", r.name),
                        description: Some(e.clone()),
                    };
                    self.conn.update(sid, &SessionUpdate::Notice(notice));
                }
            }
        }
        results.iter().map(|r| ExtensionResult { name: r.name.clone(), error: r.error.clone() }).collect()
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
                        conn.update(&self.sid, &u);
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
    /// chat) under the policy.
    fn meta_extensions(&self, list: Option<Vec<ExtensionConfig>>) -> Result<Option<Vec<ExtensionConfig>>, ErrorObject> {
        let Some(list) = list else { return Ok(None) };
        for (i, c) in list.iter().enumerate() {
            self.check_policy(c).map_err(|e| invalid_params(format!("_meta.enabledExtensions[{i}]: {}", e.message)))?;
        }
        Ok(Some(list))
    }

    fn new_session(&self, p: acp::NewSession) -> Result<SessionOpened, ErrorObject> {
        let cwd = Self::cwd(&p.cwd)?;
        let client = self.client_servers(p.mcp_servers)?;
        let chosen = self.meta_extensions(p.enabled_extensions)?;
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
        let mut session = started.session;
        gosling_agent::usage::record_model(&self.app, &mut session).map_err(|e| agent_error(e, &session.id))?;
        let results = self.opened(&session.id, &cwd, &started.results);
        log::info!("acp: session {} started in {cwd}", session.id);
        Ok(SessionOpened {
            session_id: Some(session.id.clone()),
            modes: self.modes(None),
            config_options: self.config_options(&session),
            extension_results: results,
            working_dir: cwd,
            more_meta: Default::default(),
            forked: None,
        })
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
        // The session's mode as a config option too (goose offers both): the modes, described.
        let modes = self.modes(s.goose_mode.as_deref());
        let mode_options: Vec<Value> = modes["availableModes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| json!({ "value": m["id"], "name": m["name"], "description": m["description"] }))
            .collect();
        json!([
            { "id": "provider", "name": "Provider", "type": "select", "currentValue": provider.unwrap_or_default(), "options": providers },
            { "id": "mode", "name": "Mode", "description": "When gosling asks before it runs a tool", "category": "mode", "type": "select", "currentValue": modes["currentModeId"], "options": mode_options },
            { "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": model.unwrap_or_default(), "options": models },
            { "id": "thinking_effort", "name": "Thinking effort", "description": "How hard a model that reasons thinks before it answers (off: it is not asked to)", "category": "thought_level", "type": "select", "currentValue": effort, "options": efforts },
        ])
    }

    /// `session/set_config_option`: the session's provider, model or thinking effort, kept on
    /// the session (a turn reads its provider and model from there); sends
    /// `config_option_update` before the answer, as goose does.
    fn set_config_option(&self, p: &acp::SetConfigOption) -> Reply {
        let (sid, id, value) = (p.session_id.as_str(), p.config_id.as_str(), p.value.clone());
        match id {
            "provider" => {
                let choice = ModelChoice { provider: Some(value), ..Default::default() };
                self.app.set_model(sid, choice).map_err(|e| agent_error(e, sid))?;
            }
            "model" if !value.trim().is_empty() => {
                let choice = ModelChoice { model: Some(value), ..Default::default() };
                self.app.set_model(sid, choice).map_err(|e| agent_error(e, sid))?;
            }
            "mode" => {
                self.app.set_mode(sid, &value).map_err(|e| agent_error(e, sid))?;
                self.conn.update(sid, &SessionUpdate::CurrentMode { mode_id: value });
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
                    "unknown config option {other:?}; gosling has provider, mode, model and thinking_effort"
                )))
            }
        }
        let options = self.config_options(&self.app.session_meta(sid).map_err(|e| agent_error(e, sid))?);
        self.conn.update(sid, &SessionUpdate::ConfigOptions(options.clone()));
        Ok(json!({ "configOptions": options }))
    }

    /// `session/list`: newest first, `_meta.types` (goose's session types; default all) and
    /// `_meta.query` (text of the title or the messages), 50 a page, `cursor` the offset of
    /// the next one; the page's entries from the store's index (nothing parsed).
    fn list(&self, p: &acp::ListSessions) -> Reply {
        let types: Vec<&str> = p.types.iter().map(String::as_str).collect();
        let (query, cwd, start) = (p.query.as_deref(), p.cwd.as_deref(), p.cursor);
        let asked = SessionQuery { types, working_dir: cwd, query, budget: SEARCH_BUDGET };
        let found = self.app.search_sessions(&asked).map_err(|e| agent_error(e, ""))?;
        let (page, more) = found.page(start, LIST_PAGE);
        let page: Vec<Value> = page.iter().map(crate::shapes::listed_info).collect();
        let next = more.then(|| (start + LIST_PAGE).to_string());
        Ok(SessionList { sessions: page, next_cursor: next, search_complete: found.complete }.to_value())
    }

    /// `session/delete`: its running prompt cancelled, its extensions stopped, its files gone.
    fn delete(&self, p: &acp::SessionRef) -> Reply {
        let sid = &p.session_id;
        self.release(sid);
        self.app.delete_session(sid).map_err(|e| agent_error(e, sid))?;
        Ok(acp::empty())
    }

    /// `session/close`: the session stays stored; its prompt is cancelled and its extensions stop.
    fn close(&self, p: &acp::SessionRef) -> Reply {
        let sid = &p.session_id;
        self.release(sid);
        match self.app.stop_session(sid) {
            Ok(()) | Err(gosling_agent::Error::NoAgent(_)) => Ok(acp::empty()),
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
    /// Answers a request that opens a session (new, load, resume, fork) from a thread of its
    /// own; once the answer is out (the client knows the session), the session's commands
    /// follow as `available_commands_update`, as goose 1.5x sends them. `sid`: the session
    /// asked for, when the answer does not name it.
    fn open_later(
        self: &Arc<Self>,
        req: &Incoming<'_>,
        sid: Option<String>,
        f: impl FnOnce() -> Result<SessionOpened, ErrorObject> + Send + 'static,
    ) -> peer::Answer {
        let responder = match take_slot(req) {
            Ok(r) => r,
            Err(e) => return peer::Answer::Now(Err(e)),
        };
        let opened: Arc<Mutex<Option<String>>> = Arc::default();
        let (me, seen) = (self.clone(), opened.clone());
        let answer = move || {
            let r = f()?;
            *lock(&seen) = r.forked.clone().or_else(|| r.session_id.clone()).or(sid);
            Ok(r.to_value())
        };
        let then = move || {
            if let Some(sid) = lock(&opened).take() {
                me.conn.update(&sid, &SessionUpdate::AvailableCommands(commands()));
            }
        };
        run_later(responder, answer, then)
    }

    /// `session/load` (`replay`: the conversation is sent as updates) and `session/resume`
    /// (ACP: opened without them).
    fn load(&self, p: acp::LoadSession, replay: bool) -> Result<SessionOpened, ErrorObject> {
        let sid = p.session_id.as_str();
        let cwd = Self::cwd(&p.cwd)?;
        let client = self.client_servers(p.mcp_servers)?;
        let open = OpenSession {
            working_dir: Some(cwd.clone()),
            added: client,
            restart: true,
            delegate: self.delegate(&cwd),
            without_conversation: true,
        };
        let opened = self.app.open_session(sid, open).map_err(|e| match e {
            gosling_agent::Error::Refused(e) => invalid_params(e.to_string()),
            e => agent_error(e, sid),
        })?;
        let session = opened.session;
        let results = self.opened(sid, &cwd, &opened.results);
        if replay {
            // Replayed as it is read from the file (bounded memory; the first message goes out
            // before the last is read).
            let each = |m: gosling_store::message::Message| {
                for u in updates::replay(std::slice::from_ref(&m), &cwd) {
                    self.conn.update(sid, &u);
                }
            };
            self.app.each_message(sid, |_| {}, each).map_err(|e| agent_error(e, sid))?;
        }
        log::info!("acp: session {sid} {} in {cwd}", if replay { "loaded" } else { "resumed" });
        Ok(SessionOpened {
            session_id: None,
            modes: self.modes(session.goose_mode.as_deref()),
            config_options: self.config_options(&session),
            extension_results: results,
            working_dir: cwd,
            more_meta: Default::default(),
            forked: None,
        })
    }

    /// `session/fork` (ACP, unstable): a new session with the conversation up to
    /// `_meta.conversationBefore` (the `created` time of the first message left out, unix
    /// seconds; all of it without), made by the core (`agent::history::fork`), then opened as
    /// `session/load` opens one; the answer is load's with the new `sessionId`.
    fn fork(&self, p: acp::ForkSession) -> Result<SessionOpened, ErrorObject> {
        let sid = p.session_id.as_str();
        let cwd = Self::cwd(&p.cwd)?;
        let new = gosling_agent::history::fork(&self.app, sid, p.conversation_before, &cwd)
            .map_err(|e| agent_error(e, sid))?;
        let load = acp::LoadSession { session_id: new.id.clone(), cwd, mcp_servers: p.mcp_servers, extra: p.extra };
        let mut answer = self.load(load, true)?;
        answer.forked = Some(new.id.clone());
        // goose adds the new session's listing `_meta` (messageCount, createdAt, …).
        if let Value::Object(info) = &crate::shapes::session_info(&new)["_meta"] {
            answer.more_meta = info.clone();
        }
        Ok(answer)
    }

    /// Claims the session for one prompt: a second prompt while one runs is refused.
    #[allow(clippy::type_complexity)] // the three parts the prompt thread takes over
    fn begin_prompt(&self, sid: &str) -> Result<(Arc<Open>, Receiver<()>, Arc<AtomicBool>), ErrorObject> {
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
        Ok((open, rx, cancelled))
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
        p: acp::Prompt,
        open: &Arc<Open>,
        (cancel, asked): (Receiver<()>, &peer::Cancel),
        cancelled: &AtomicBool,
        after_answer: &Arc<AfterAnswer>,
    ) -> Reply {
        let sid = p.session_id.as_str();
        updates::refuse_images(&p.content, || gosling_agent::usage::images(&self.app, sid)).map_err(invalid_params)?;
        let user = gosling_store::message::Message::new(msg::new_id(), gosling_store::message::Role::User, p.content);
        let mut turn = self.prepare_turn(sid, user)?;
        let (run_id, titled) = (turn.run_id().to_string(), turn.titled.clone());
        // The core named the session from its first message (`agent::title`): announced, and
        // again when the model's title replaces it after the turn.
        // With the messages the session holds then (goose's `_meta.messageCount`).
        let announce = |app: &Host, conn: &Conn, sid: &str, title: &str, updated: &str| {
            let info = SessionUpdate::SessionInfo {
                title: title.to_string(),
                updated_at: Some(updated.to_string()),
                user_set_name: false,
                message_count: app.session_meta(sid).ok().map(|s| s.message_count),
            };
            conn.update(sid, &info);
        };
        if titled.is_some() {
            // The model's title names the exchange: the editor hears of it after the answer.
            let (app, conn, sid, gate) = (self.app.clone(), self.conn.clone(), sid.to_string(), after_answer.clone());
            turn.on_model_title = Some(Box::new(move |title, updated| {
                gate.then(Box::new(move || announce(&app, &conn, &sid, &title, &updated)))
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
        let outcome = self
            .app
            .start_turn(turn, sink, cancel.clone())
            .map_err(|e| ErrorObject::new(INTERNAL_ERROR, format!("acp: cannot start the turn: {e}")))?;
        // Sent while the turn's thread asks the model, not before it starts: its events wait in
        // the channel until the loop below reads them, so the editor still hears these first.
        // The turn's run, which Desktop steers into (`session/steer`), until it ends.
        self.conn.update(sid, &updates::active_run(Some(&run_id)));
        if let Some((title, updated)) = &titled {
            announce(&self.app, &self.conn, sid, title, updated);
        }
        let mut error = None;
        // The model's text so far, for a plan written as a task list; each new plan is sent.
        let (mut text, mut last_plan) = (String::new(), None);
        let mut send_plan = |text: &str| {
            let p = updates::plan(text);
            if let Some(plan) = p.clone().filter(|_| p != last_plan) {
                self.conn.update(sid, &plan);
                last_plan = p;
            }
        };
        // Tool calls announced and not yet closed: a cancel closes them (failed), so no editor
        // keeps a spinner for a call that will never report.
        let mut open_calls: Vec<String> = Vec::new();
        // The last assistant message streamed (its id and time), which an output-limit note joins.
        let mut last_reply: Option<(String, i64)> = None;
        let mut cancelled_at = None;
        // The turn's tokens, for the answer's `usage` (none yet: zero).
        let mut used = TurnUsage::default();
        let mut clock = CallClock::new();
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
                Event::Message { message, tokens } => {
                    if let (gosling_store::message::Role::Assistant, Some(id)) = (&message.role, &message.id) {
                        last_reply = Some((id.clone(), message.created));
                    }
                    if let Some(u) = clock.see(Some(&message), &tokens) {
                        self.message_usage(sid, u);
                    }
                    for l in updates::live(&message, first_status, &open.cwd) {
                        match l {
                            Live::Update(u) => {
                                match &u {
                                    SessionUpdate::Chunk(c) if c.kind == su::ChunkKind::Agent => text.push_str(&c.text),
                                    SessionUpdate::ToolCall(c) => {
                                        send_plan(&std::mem::take(&mut text));
                                        if !su::is_final(&c.status) {
                                            open_calls.push(c.id.clone());
                                        }
                                    }
                                    SessionUpdate::ToolCallUpdate(c) if su::is_final(&c.status) => {
                                        open_calls.retain(|id| *id != c.id)
                                    }
                                    _ => {}
                                }
                                self.conn.update(sid, &u);
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
                            self.conn.update(sid, &u);
                        }
                        None => log::debug!("acp: session {sid}: {method} for tool call {request_id}"),
                    }
                }
                Event::Error(e) => error = Some(e),
                Event::Finish(tokens) => {
                    if let Some(u) = clock.see(None, &tokens) {
                        self.message_usage(sid, u);
                    }
                    used = TurnUsage::from(&tokens);
                    self.usage_update(sid, Some(&tokens));
                }
            }
        }
        send_plan(&text);
        self.conn.update(sid, &updates::active_run(None));
        if cancelled.load(Ordering::SeqCst) {
            for call in open_calls {
                let mut u = updates::tool_status(&call, "failed");
                u.content = Some(vec![su::text_content("cancelled")]);
                self.conn.update(sid, &SessionUpdate::ToolCallUpdate(u));
            }
            // The turn ends by itself (a tool call in flight returns first); it holds the
            // session's turn until then.
            drop(outcome);
            return Ok(Prompted { stop: StopReason::Cancelled, usage: used }.to_value());
        }
        let outcome = outcome.recv().unwrap_or(Outcome::Failed); // wait: its events ended: the turn returned
        match (outcome, error) {
            (Outcome::Finished, _) => Ok(Prompted { stop: StopReason::EndTurn, usage: used }.to_value()),
            (Outcome::OutputLimit, _) => {
                if let Some((id, created)) = &last_reply {
                    self.conn.update(sid, &updates::output_limit_note(id, *created));
                }
                Ok(Prompted { stop: StopReason::MaxTokens, usage: used }.to_value())
            }
            (Outcome::OutOfTurns, _) => Ok(Prompted { stop: StopReason::MaxTurnRequests, usage: used }.to_value()),
            (Outcome::Failed, e) => Err(ErrorObject::new(
                INTERNAL_ERROR,
                e.unwrap_or_else(|| "the turn failed without saying why; see the agent's stderr".into()),
            )),
        }
    }

    /// One model call's usage (goose's `message_usage`), for clients that declared
    /// `customNotifications`.
    fn message_usage(&self, sid: &str, u: su::MessageUsage) {
        if self.custom_notifications.load(Ordering::SeqCst) {
            let update = SessionUpdate::MessageUsage(u).to_value();
            self.conn.notify("_goose/unstable/session/update", json!({ "sessionId": sid, "update": update }));
        }
    }

    /// The context meter (`agent::usage`): ACP's `usage_update` for every client, goose's own
    /// for clients that declared `customNotifications`.
    fn usage_update(&self, sid: &str, last: Option<&gosling_agent::messages::Tokens>) {
        let meter = match gosling_agent::usage::meter(&self.app, sid, last) {
            Ok(m) => m,
            Err(e) => return log::debug!("acp: session {sid}: no usage update: {e}"),
        };
        let usage = SessionUpdate::Usage {
            used: meter.used,
            context_limit: meter.context_limit,
            accumulated_input: meter.accumulated_input,
            accumulated_output: meter.accumulated_output,
        };
        if self.custom_notifications.load(Ordering::SeqCst) {
            self.conn.notify("_goose/unstable/session/update", json!({ "sessionId": sid, "update": usage.to_value() }));
        }
        self.conn.update(sid, &SessionUpdate::ContextUsage { used: meter.used, size: meter.context_limit });
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
        let ask =
            Elicitation { session_id: sid.to_string(), message: message.to_string(), requested_schema: schema.clone() };
        match self.conn.request("elicitation/create", ask.params(), ELICITATION_WAIT, Some(cancel)) {
            Ok(r) => match ElicitationAnswer::parse(&r) {
                ElicitationAnswer::Accept(content) => Answer::Accept(content),
                ElicitationAnswer::Decline => Answer::Decline,
                ElicitationAnswer::Cancel => Answer::Cancel,
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
        let call = updates::tool_call(id, tool, args, "pending", &open.cwd);
        let params = RequestPermission { session_id: sid.to_string(), tool_call: call }.params();
        let action = match self.conn.request("session/request_permission", params, PERMISSION_WAIT, Some(cancel)) {
            Ok(v) => match PermissionOutcome::parse(&v) {
                PermissionOutcome::Selected(id) if id == "allow_once" => Decision::AllowOnce,
                PermissionOutcome::Selected(id) if id == "allow_always" => Decision::AlwaysAllow,
                PermissionOutcome::Selected(id) if id == "reject_once" => Decision::DenyOnce,
                PermissionOutcome::Selected(id) if id == "reject_always" => Decision::AlwaysDeny,
                PermissionOutcome::Cancelled => Decision::Cancel,
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
            self.conn.update(sid, &SessionUpdate::ToolCallUpdate(updates::tool_status(id, "in_progress")));
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
