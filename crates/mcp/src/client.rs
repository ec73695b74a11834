//! The MCP client: lifecycle, request multiplexing, primitives, server→client traffic.
//!
//! One `Client` per connected server, shared by many threads. Ids, the calls waiting for their
//! answers, deadlines, `notifications/cancelled` both ways, the bound on server requests
//! answered at once and the failing of every waiting call when the connection ends are the
//! one JSON-RPC peer's (`wire::peer`, MCP flavour). Whoever reads a message hands it to the
//! peer (`on_message`): the calling thread itself while it leads (`Transport::lead`: it reads
//! the connection while it waits, so its answer needs no hand-off), else a router thread fed
//! with `Inbound` by the transport. The peer completes calls by id (unknown, late and
//! duplicate ids are dropped) and passes the server's own requests and notifications to this
//! client's handler: requests (ping, roots/list, elicitation, anything else → method not
//! found), notifications (progress to the call that asked for it, log messages to our log,
//! `tools/list_changed` to the tool cache).

use crate::error::Error;
use crate::http_error::HttpFailure;
use crate::transport::{Inbound, Lead, Transport};
use crossbeam_channel::{Receiver, Sender};
use gosling_util::lock;
use gosling_wire::jsonrpc::{self, ErrorObject, Message, METHOD_NOT_FOUND};
use gosling_wire::mcp_types::{
    CallToolResult, GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use gosling_wire::mcp_version::{self, Era, Refusal};
use gosling_wire::peer::{self, Answer, Busy, GiveUp, Handler, Incoming, Peer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// Pages followed at most by a listing (a server that keeps returning cursors is cut off).
const MAX_PAGES: usize = 100;
/// The most one listing (all its pages together) may hold, as JSON bytes and as items. A
/// server past either is refused for that listing (`Error::TooLarge`), so what gosling keeps
/// for one extension stays bounded however many pages it sends.
pub const MAX_LIST_BYTES: usize = 8 << 20;
pub const MAX_LIST_ITEMS: usize = 10_000;
/// The largest tool result or resource read kept (JSON bytes); one message is also bounded by
/// the transport (a stdio line, an HTTP body or SSE event).
pub const MAX_RESULT_BYTES: usize = 8 << 20;
/// The longest wait for the answer to the modern probe (`server/discover`) sent after the
/// server refused `initialize` (so it is up), before taking it for a legacy one that ignores
/// requests before `initialize`. As the first message (a pinned modern revision) the probe gets
/// the whole start-up wait instead: a server still starting (npx fetching it, a cold Python) is
/// not a legacy server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Rounds of a multi-round-trip request (input required, answered, retried) before giving up.
const MAX_INPUT_ROUNDS: usize = 8;
/// How often a caller reading for its own answer (a lead) checks its deadline and cancel signal.
const LEAD_SLICE: Duration = Duration::from_millis(20);
/// How long one `subscriptions/listen` request is held open before it is renewed.
const LISTEN_WINDOW: Duration = Duration::from_secs(600);
/// The longest pause before opening a dropped `subscriptions/listen` again.
const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What a JSON value that is not an object is, for error messages.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Null => "null",
    }
}

/// The size of `v` as compact JSON, without building the text.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

pub type ElicitationHandler = Arc<dyn Fn(&Value) -> Value + Send + Sync>;
pub type SamplingHandler = Arc<dyn Fn(&Value) -> Result<Value, ErrorObject> + Send + Sync>;

pub struct ClientOptions {
    /// The extension's name, used in every error message and log line.
    pub extension: String,
    /// Bounds initialize and each request.
    pub timeout: Duration,
    /// Declare `roots` and answer `roots/list` with these directories.
    pub roots: Option<Vec<PathBuf>>,
    /// Declare `elicitation` and answer `elicitation/create` with this handler.
    pub elicitation: Option<ElicitationHandler>,
    /// Declare `sampling` and answer `sampling/createMessage` with this handler.
    pub sampling: Option<SamplingHandler>,
    pub client_name: String,
    pub client_version: String,
    /// The revision to speak, pinned (the extension's `protocol_version`); `None`: the newest
    /// legacy revision a server offers, else the modern one (see `negotiate`).
    pub protocol_version: Option<String>,
}

/// Per-call plumbing: where progress goes, and what cancels the call.
#[derive(Default)]
pub struct CallContext {
    /// Receives `{"method", "params"}` of each `notifications/progress` for this call, and of
    /// `notifications/message` logged while it runs.
    pub progress: Option<Sender<Value>>,
    /// A message or a disconnect cancels the call.
    pub cancel: Option<Receiver<()>>,
}

/// The transport as the peer's way out; a call on a connection that ended without a reason
/// fails with `Error::Closed`.
struct Out {
    extension: String,
    transport: Arc<dyn Transport>,
}

impl peer::Outbound for Out {
    type Error = Error;
    fn send(&self, msg: &Message) -> Result<(), Error> {
        self.transport.send(msg)
    }
    fn gone(&self) -> Error {
        Error::Closed { detail: format!("{}: the connection closed", self.extension) }
    }
}

struct Shared {
    extension: String,
    transport: Arc<dyn Transport>,
    peer: Arc<Peer<Out>>,
    /// progressToken → where its notifications go.
    progress: Mutex<HashMap<String, Sender<Value>>>,
    /// Calls in flight that want log messages too.
    listeners: Mutex<HashMap<i64, Sender<Value>>>,
    roots: RwLock<Option<Vec<PathBuf>>>,
    elicitation: Option<ElicitationHandler>,
    sampling: Option<SamplingHandler>,
    /// Shared with whoever listed them (a session's runtime keeps the same list, not a copy).
    tools: Mutex<Option<Arc<Vec<Tool>>>>,
    /// Bumped by every `tools/list_changed`: a listing that raced one is not cached.
    tools_generation: AtomicU64,
    /// The `_meta` of every request to a modern (2026-07-28) server; `None` for a legacy one.
    modern: RwLock<Option<Value>>,
}

/// The most server requests (elicitation, sampling) of one server answered at once, each on a
/// thread of its own (the peer's in-flight bound); more are refused at once, so a flood never
/// costs a thread each.
pub const MAX_ASKS_IN_FLIGHT: usize = 4;

pub struct Client {
    shared: Arc<Shared>,
    timeout: Duration,
    protocol_version: String,
    /// How the protocol revision was chosen (`gosling probe` prints it).
    negotiation: String,
    server_info: Value,
    capabilities: Value,
    instructions: Option<String>,
}

/// The MCP (syslog) level name for our log filter.
fn log_level_name(l: log::LevelFilter) -> &'static str {
    match l {
        log::LevelFilter::Trace | log::LevelFilter::Debug => "debug",
        log::LevelFilter::Info => "info",
        log::LevelFilter::Warn => "warning",
        log::LevelFilter::Error => "error",
        log::LevelFilter::Off => "emergency",
    }
}

fn root_list(dirs: &[PathBuf]) -> Value {
    let roots: Vec<Value> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let name = if i == 0 { "working_directory".to_string() } else { d.display().to_string() };
            json!({ "uri": format!("file://{}", d.display()), "name": name })
        })
        .collect();
    json!({ "roots": roots })
}

/// Adds the modern `_meta` keys to a request's params (keeping keys already there, such as a
/// progress token).
fn with_meta(params: &mut Value, meta: &Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let m = params.as_object_mut().map(|p| p.entry("_meta").or_insert_with(|| json!({})));
    if let (Some(Value::Object(m)), Value::Object(meta)) = (m, meta) {
        for (k, v) in meta {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// Chooses the protocol era and revision. Unless the extension pins one (`protocol_version`),
/// the legacy handshake comes first: `initialize` asking for `LEGACY_ASK`, which every server
/// written for sessions answers. A server that speaks both eras (every SDK's today) keeps its
/// elicitation and sampling requests (`ctx.elicit()`) and its session state that way, which a
/// modern connection would lose (ARCHITECTURE.md, "Where the two MCP eras meet"). A server
/// that refuses `initialize` is asked `server/discover` (2026-07-28 versioning rules): a modern
/// answer or a modern error means a modern server (every later request carries the `_meta`).
/// A pinned legacy revision goes straight to `initialize`; a pinned modern one straight to
/// `server/discover`. Returns the revision, the result that describes the server (discover's
/// or initialize's), and why.
fn negotiate(
    shared: &Arc<Shared>,
    opts: &ClientOptions,
    caps: &Value,
    client_info: &Value,
) -> Result<(String, Value, String), Error> {
    let pin = opts.protocol_version.as_deref();
    if let Some(p) = pin.filter(|p| !mcp_version::is_modern(p)) {
        return initialize(shared, opts, caps, client_info, p, format!("protocol_version {p} set for the extension"));
    }
    let mut refused = None;
    if pin.is_none() {
        let params =
            json!({ "protocolVersion": mcp_version::LEGACY_ASK, "capabilities": caps, "clientInfo": client_info });
        match shared.request("initialize", params, opts.timeout, None) {
            Ok(result) => {
                let agreed = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_string();
                if mcp_version::is_known(&agreed) && !mcp_version::is_modern(&agreed) {
                    shared.notify("notifications/initialized", json!({}))?;
                    let why = format!(
                        "initialize answered {agreed} (sessions first: they keep a server's elicitation, sampling and state; protocol_version {} for the modern revision)",
                        mcp_version::MODERN
                    );
                    return Ok((agreed, result, why));
                }
                if !mcp_version::is_modern(&agreed) {
                    return Err(Error::Other(format!(
                        "{}: the server wants protocol version {agreed:?}, we asked for {} and know {}; update the server or gosling",
                        opts.extension,
                        mcp_version::LEGACY_ASK,
                        mcp_version::KNOWN.join(", ")
                    )));
                }
                refused = Some(format!("initialize answered {agreed}"));
            }
            // A modern-only server refuses the handshake: ask it what it speaks.
            Err(Error::Rpc(e)) => refused = Some(format!("initialize refused ({})", e.code)),
            Err(Error::Http {
                failure: HttpFailure::Status { status, .. } | HttpFailure::NotMcp { status, .. },
                ..
            }) => refused = Some(format!("initialize got HTTP {status}")),
            Err(Error::Http { failure: HttpFailure::NotFound, .. }) => refused = Some("initialize got HTTP 404".into()),
            Err(e) => return Err(e),
        }
    }
    let probe_timeout = match refused {
        Some(_) => opts.timeout.min(PROBE_TIMEOUT),
        None => opts.timeout,
    };
    let refused = refused.map(|r| format!("{r}; ")).unwrap_or_default();
    let level = log_level_name(log::max_level());
    let mut version = pin.unwrap_or(mcp_version::MODERN).to_string();
    for _ in 0..2 {
        let meta = mcp_version::request_meta(&version, client_info, caps, level);
        let answer = shared.request("server/discover", json!({ "_meta": meta }), probe_timeout, None);
        let judged = match &answer {
            Ok(r) => mcp_version::judge_discover(Ok(r)),
            Err(Error::Rpc(e)) => mcp_version::judge_discover(Err(Refusal::Rpc(e.code, e.data.as_ref()))),
            Err(e @ (Error::Closed { .. } | Error::Cancelled { .. })) => return Err(e.clone()),
            Err(Error::Timeout { after, .. }) => {
                mcp_version::judge_discover(Err(Refusal::Other(&format!("no answer within {after:?}"))))
            }
            // A legacy HTTP server refuses a request without its session with a 4xx: fall back.
            // Anything else (nothing listens, TLS, sign-in) would fail `initialize` the same way.
            Err(Error::Http {
                failure: HttpFailure::Status { status, .. } | HttpFailure::NotMcp { status, .. },
                ..
            }) => mcp_version::judge_discover(Err(Refusal::Other(&format!("HTTP {status}")))),
            Err(Error::Http { failure: HttpFailure::NotFound, .. }) => {
                mcp_version::judge_discover(Err(Refusal::Other("HTTP 404")))
            }
            Err(e @ Error::Http { .. }) => return Err(e.clone()),
            Err(e) => mcp_version::judge_discover(Err(Refusal::Other(&e.to_string()))),
        };
        match (judged.era, pin) {
            (Era::Legacy { .. }, Some(p)) => {
                return Err(Error::Other(format!(
                    "{}: the extension's protocol_version is {p}, but the server does not speak it ({}); remove protocol_version or set a revision the server offers",
                    opts.extension, judged.why
                )))
            }
            (Era::Modern { version: v, .. }, Some(p)) if v != p => {
                return Err(Error::Other(format!(
                    "{}: the extension's protocol_version is {p}, but the server offers {v} ({}); remove protocol_version or set {v}",
                    opts.extension, judged.why
                )))
            }
            (Era::Modern { version: v, retry: true }, _) if v != version => version = v,
            (Era::Modern { version: v, .. }, _) => {
                let result = answer.unwrap_or_else(|_| json!({}));
                *shared.modern.write().unwrap_or_else(|e| e.into_inner()) =
                    Some(mcp_version::request_meta(&v, client_info, caps, level));
                if result.get("supportedVersions").is_none() {
                    // A modern error to the probe: ask again with the revision it serves.
                    let r = shared.request("server/discover", json!({}), opts.timeout, None)?;
                    return Ok((v, r, format!("{refused}{}", judged.why)));
                }
                return Ok((v, result, format!("{refused}{}", judged.why)));
            }
            (Era::Legacy { version: legacy }, None) => {
                return initialize(shared, opts, caps, client_info, &legacy, format!("{refused}{}", judged.why))
            }
        }
    }
    Err(Error::Other(format!("{}: server/discover keeps refusing protocol {version}", opts.extension)))
}

/// The legacy handshake: `initialize` asking for `version`, a version check,
/// `notifications/initialized`.
fn initialize(
    shared: &Arc<Shared>,
    opts: &ClientOptions,
    caps: &Value,
    client_info: &Value,
    version: &str,
    why: String,
) -> Result<(String, Value, String), Error> {
    let params = json!({ "protocolVersion": version, "capabilities": caps, "clientInfo": client_info });
    let result = shared.request("initialize", params, opts.timeout, None)?;
    let agreed = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_string();
    if !mcp_version::is_known(&agreed) || mcp_version::is_modern(&agreed) {
        return Err(Error::Other(format!(
            "{}: the server wants protocol version {agreed:?}, we asked for {version} and know {}; update the server or gosling",
            opts.extension,
            mcp_version::KNOWN.join(", ")
        )));
    }
    shared.notify("notifications/initialized", json!({}))?;
    Ok((agreed, result, why))
}

/// The client's side of the peer: the server's requests and notifications.
struct Router<'a>(&'a Arc<Shared>);

impl Handler<Out> for Router<'_> {
    /// Requests from the server. Handlers that may block (elicitation, sampling) run on
    /// their own thread, which sends the answer; the others are answered at once, and the
    /// answer is returned for the reader to send (the router through the transport, a lead
    /// through itself, as it must not wait for stdin while it holds the reading side).
    fn request(&self, req: Incoming<'_, Out>) -> Answer {
        let shared = self.0;
        match req.method.as_str() {
            "ping" => Answer::Now(Ok(json!({}))),
            "roots/list" => Answer::Now(shared.answer(&req.method, &Value::Null)),
            "elicitation/create" | "sampling/createMessage" => {
                let responder = match req.defer() {
                    Ok(r) => r,
                    Err(Busy::Full { .. }) => {
                        let why = format!(
                            "too many requests at once: this client answers at most {MAX_ASKS_IN_FLIGHT} elicitation or sampling requests of a server at a time; send the next one after an answer"
                        );
                        log::info!("mcp {}: {} refused: {why}", shared.extension, req.method);
                        return Answer::Now(Err(ErrorObject::new(-1, why)));
                    }
                    Err(Busy::DuplicateId) => {
                        return Answer::Now(Err(ErrorObject::new(
                            jsonrpc::INVALID_REQUEST,
                            format!("request id {} is already in use by a request being answered", req.id),
                        )))
                    }
                };
                let (me, method) = (shared.clone(), req.method);
                let params = req.params.unwrap_or(Value::Null);
                let spawned = thread::Builder::new()
                    .name(format!("mcp-ask-{}", shared.extension))
                    .spawn(move || responder.respond(me.answer(&method, &params)));
                if let Err(e) = spawned {
                    log::warn!("mcp {}: cannot start a thread for a server request: {e}", shared.extension);
                }
                Answer::Later
            }
            other => Answer::Now(Err(ErrorObject::new(METHOD_NOT_FOUND, format!("method not found: {other}")))),
        }
    }

    fn notification(&self, method: &str, params: Option<Value>) {
        self.0.on_notification(method, params)
    }
}

impl Shared {
    fn send_reply(&self, reply: &Message) {
        if let Err(e) = self.transport.send(reply) {
            log::debug!("mcp {}: answering a server request failed: {e}", self.extension);
        }
    }

    fn on_notification(&self, method: &str, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        match method {
            "notifications/progress" => {
                let token = match params.get("progressToken") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => return,
                };
                if let Some(tx) = lock(&self.progress).get(&token) {
                    let _ = tx.try_send(json!({ "method": method, "params": params }));
                }
            }
            "notifications/message" => {
                let level = params.get("level").and_then(Value::as_str).unwrap_or("info");
                let data = params.get("data").map(|d| d.to_string()).unwrap_or_default();
                let lvl = match level {
                    "debug" => log::Level::Debug,
                    "info" | "notice" => log::Level::Info,
                    "warning" => log::Level::Warn,
                    _ => log::Level::Error,
                };
                log::log!(target: "mcp::server_log", lvl, "{}: {data}", self.extension);
                for tx in lock(&self.listeners).values() {
                    let _ = tx.try_send(json!({ "method": method, "params": params }));
                }
            }
            "notifications/tools/list_changed" => {
                let mut tools = lock(&self.tools);
                self.tools_generation.fetch_add(1, Ordering::SeqCst);
                *tools = None;
            }
            other => log::debug!("mcp {}: notification {other}", self.extension),
        }
    }

    fn route(self: &Arc<Self>, inbound: Receiver<Inbound>) {
        // wait: ends when the transport's reader threads end (with the connection)
        for msg in inbound {
            match msg {
                Inbound::Message(m) => {
                    if let Some(reply) = self.on_message(m) {
                        self.send_reply(&reply);
                    }
                }
                Inbound::Closed(err) => {
                    self.peer.close(err);
                    return;
                }
            }
        }
        self.peer.close(Error::Closed { detail: format!("{}: the transport ended", self.extension) });
    }

    /// One message from the server, read by the router or by a caller that leads; returns
    /// the answer to send when it is a request answered at once.
    fn on_message(self: &Arc<Self>, msg: Message) -> Option<Message> {
        self.peer.receive(msg, &Router(self))
    }

    /// Hands what a lead read to `on_message`, then sends the answers to the server's
    /// requests through the lead. False once the connection has ended.
    fn lead_read(self: &Arc<Self>, lead: &mut (dyn Lead + '_), slice: Duration) -> bool {
        let mut replies = Vec::new();
        let open = lead.read(slice, &mut |m| replies.extend(self.on_message(m)));
        for reply in replies {
            if let Err(e) = lead.send(&reply) {
                log::debug!("mcp {}: answering a server request failed: {e}", self.extension);
            }
        }
        open
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), Error> {
        self.peer.notify(method, Some(params))
    }

    /// One request/response with a deadline and an optional cancel signal. The calling thread
    /// reads the answer itself when the transport lets it (`Transport::lead`).
    fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Result<Value, Error> {
        self.exchange(method, params, timeout, cancel, true)
    }

    /// `request`, for a request held open for long (`subscriptions/listen`), which should not
    /// keep reading for everyone else.
    fn request_follow(self: &Arc<Self>, method: &str, params: Value, timeout: Duration) -> Result<Value, Error> {
        self.exchange(method, params, timeout, None, false)
    }

    fn exchange(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
        may_lead: bool,
    ) -> Result<Value, Error> {
        let mut params = params;
        if let Some(meta) = self.modern.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            with_meta(&mut params, meta);
        }
        let (mut pending, msg) = self.peer.begin(method, Some(params), timeout)?;
        // Taken before sending, so no one else can read the answer first.
        let mut lead = if may_lead { self.transport.lead() } else { None };
        let sent = match lead.as_mut() {
            Some(lead) => lead.send(&msg),
            None => self.transport.send(&msg),
        };
        if let Err(e) = sent {
            drop(pending);
            if let Some(lead) = lead {
                self.end_lead(lead);
            }
            // The transport says the connection is gone (a stdio server that exited fails the
            // write before its end of stdout is read): the peer is closed now, so calls waiting
            // end and the owner sees `is_closed` and can restart the server.
            if matches!(e, Error::Closed { .. }) {
                self.peer.close(e.clone());
            }
            return Err(e);
        }
        if let Some(mut lead) = lead {
            let mut outcome = None;
            let mut cancelled = false;
            loop {
                if let Some(r) = pending.try_take() {
                    outcome = Some(r);
                    break;
                }
                if cancel.is_some_and(|c| !matches!(c.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))) {
                    cancelled = true;
                    break;
                }
                let left = pending.deadline().saturating_duration_since(Instant::now());
                // The connection ended: the router reports how, through the peer.
                if left.is_zero() || !self.lead_read(&mut *lead, left.min(LEAD_SLICE)) {
                    break;
                }
            }
            self.end_lead(lead);
            if cancelled {
                return Ok(pending.give_up(GiveUp::Cancelled)?);
            }
            if let Some(r) = outcome {
                return Ok(r?);
            }
        }
        Ok(pending.wait(cancel)?) // wait: bounded by the call's deadline (`Pending::wait`)
    }

    /// Gives the reading side back: what the lead read but has not handed out yet is handled
    /// now, and if other requests still wait, the reader thread reads for them at once.
    fn end_lead(self: &Arc<Self>, mut lead: Box<dyn Lead + '_>) {
        let mut replies = Vec::new();
        lead.flush(&mut |m| replies.extend(self.on_message(m)));
        drop(lead);
        for reply in replies {
            self.send_reply(&reply);
        }
        if self.peer.pending_count() > 0 {
            self.transport.nudge();
        }
    }

    /// A request that may answer "input required" (2026-07-28 multi-round-trip: `tools/call`,
    /// `resources/read`, `prompts/get`): each round's `inputRequests` are answered by the same
    /// handlers as a legacy server's own requests, and the request is sent again with the
    /// answers and the server's `requestState`. A legacy result (no `resultType`) is complete.
    fn request_with_input(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Result<Value, Error> {
        let mut round_params = params.clone();
        for _ in 0..MAX_INPUT_ROUNDS {
            let result = self.request(method, round_params, timeout, cancel)?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return Ok(result);
            }
            round_params = params.clone();
            if let Some(Value::Object(asks)) = result.get("inputRequests") {
                let mut answers = serde_json::Map::new();
                for (key, ask) in asks {
                    let ask_method = ask.get("method").and_then(Value::as_str).unwrap_or("");
                    let ask_params = ask.get("params").cloned().unwrap_or(Value::Null);
                    match self.answer(ask_method, &ask_params) {
                        Ok(answer) => {
                            answers.insert(key.clone(), answer);
                        }
                        // No answer can say "refused" (the server would only ask again): the
                        // request fails with the refusal.
                        Err(e) => {
                            log::info!("mcp {}: input request {key} ({ask_method}): {}", self.extension, e.message);
                            return Err(Error::Rpc(e));
                        }
                    }
                }
                round_params["inputResponses"] = Value::Object(answers);
            }
            if let Some(state) = result.get("requestState") {
                round_params["requestState"] = state.clone();
            }
        }
        Err(Error::Other(format!(
            "{}: {method} still asked for input after {MAX_INPUT_ROUNDS} rounds; giving up",
            self.extension
        )))
    }

    /// The answer to a server's request for input (legacy: a request of its own; modern: an
    /// entry of `inputRequests`).
    fn answer(&self, method: &str, params: &Value) -> Result<Value, ErrorObject> {
        match method {
            "roots/list" => match self.roots.read().unwrap_or_else(|e| e.into_inner()).as_deref() {
                Some(dirs) => Ok(root_list(dirs)),
                None => Err(ErrorObject::new(METHOD_NOT_FOUND, "roots are not supported by this client")),
            },
            "elicitation/create" => match &self.elicitation {
                Some(h) => Ok(h(params)),
                None => Err(ErrorObject::new(METHOD_NOT_FOUND, "elicitation is not supported by this client")),
            },
            "sampling/createMessage" => match &self.sampling {
                Some(h) => h(params),
                None => Err(ErrorObject::new(METHOD_NOT_FOUND, "sampling is not supported by this client")),
            },
            other => Err(ErrorObject::new(METHOD_NOT_FOUND, format!("method not found: {other}"))),
        }
    }

    /// Keeps a `subscriptions/listen` request open to a modern server, so its list changes
    /// arrive as `notifications/*/list_changed` (as a legacy server sends them unasked). The
    /// transport holds the stream as long as the server keeps it alive; when it ends after a
    /// while (the server closed it, or it fell silent) it is opened again at once; when it
    /// fails at once, again after a growing pause. It is renewed every `LISTEN_WINDOW`, and
    /// ends with the connection.
    fn listen(self: Arc<Self>, filter: Value, timeout: Duration) {
        let mut pause = Duration::from_secs(1);
        while !self.peer.is_closed() {
            let opened = Instant::now();
            let r = self.request_follow("subscriptions/listen", json!({ "notifications": filter }), LISTEN_WINDOW);
            // Whatever changed while no stream was open is not known: list again when asked.
            *lock(&self.tools) = None;
            self.tools_generation.fetch_add(1, Ordering::SeqCst);
            let lived = opened.elapsed();
            match r {
                Err(Error::Closed { .. }) | Err(Error::Cancelled { .. }) => return,
                Ok(_) | Err(Error::Timeout { .. }) => {
                    log::debug!("mcp {}: subscriptions/listen renewed after {lived:?}", self.extension);
                    pause = Duration::ZERO;
                }
                Err(e) if lived >= timeout.max(Duration::from_secs(5)) => {
                    log::debug!(
                        "mcp {}: the subscriptions/listen stream ended after {:?} ({e}); opening it again",
                        self.extension,
                        Duration::from_secs(lived.as_secs())
                    );
                    pause = Duration::ZERO;
                }
                Err(e) => {
                    pause = (pause * 2).clamp(Duration::from_secs(1), LISTEN_BACKOFF_MAX);
                    log::info!("mcp {}: subscriptions/listen failed ({e}); trying again in {pause:?}", self.extension);
                }
            }
            let until = Instant::now() + pause;
            while !self.peer.is_closed() && Instant::now() < until {
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Client {
    /// Runs the lifecycle: `initialize` (within the timeout), version check,
    /// `notifications/initialized`.
    pub fn connect(
        transport: Arc<dyn Transport>,
        inbound: Receiver<Inbound>,
        opts: ClientOptions,
    ) -> Result<Client, Error> {
        let out = Out { extension: opts.extension.clone(), transport: transport.clone() };
        let shared = Arc::new(Shared {
            extension: opts.extension.clone(),
            transport: transport.clone(),
            peer: Peer::new(peer::MCP_CLIENT, format!("mcp {}", opts.extension), out, MAX_ASKS_IN_FLIGHT),
            progress: Mutex::new(HashMap::new()),
            listeners: Mutex::new(HashMap::new()),
            roots: RwLock::new(opts.roots.clone()),
            elicitation: opts.elicitation.clone(),
            sampling: opts.sampling.clone(),
            tools: Mutex::new(None),
            tools_generation: AtomicU64::new(0),
            modern: RwLock::new(None),
        });
        {
            let s = shared.clone();
            thread::Builder::new()
                .name(format!("mcp-route-{}", opts.extension))
                .spawn(move || s.route(inbound))
                .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?;
        }
        let declared = [
            ("roots", opts.roots.is_some(), json!({ "listChanged": true })),
            ("elicitation", opts.elicitation.is_some(), json!({})),
            ("sampling", opts.sampling.is_some(), json!({})),
        ];
        let caps = declared.into_iter().filter(|(_, on, _)| *on).map(|(k, _, v)| (k.to_string(), v)).collect();
        let client_info = json!({ "name": opts.client_name, "version": opts.client_version });
        let negotiated = negotiate(&shared, &opts, &caps, &client_info);
        let (version, result, negotiation) = match negotiated {
            Ok(n) => n,
            Err(e) => {
                transport.close();
                let stderr = transport.diagnostics();
                let junk = transport.stdout_junk().map(|j| {
                    format!(
                        "the server printed something that is not JSON-RPC on stdout: \"{j}\"; an MCP stdio server must write only JSON-RPC messages there (logs go to stderr): check the command and its arguments"
                    )
                });
                return Err(match e {
                    Error::Timeout { after, .. } if junk.is_some() => Error::Other(format!(
                        "{}: no answer to initialize within {after:?}: {}{}",
                        opts.extension,
                        junk.unwrap_or_default(),
                        if stderr.is_empty() { String::new() } else { format!("; stderr: {stderr}") }
                    )),
                    Error::Closed { .. } if junk.is_some() => Error::Closed {
                        detail: format!(
                            "{}: process quit before initialization: {}{}",
                            opts.extension,
                            junk.unwrap_or_default(),
                            if stderr.is_empty() { String::new() } else { format!("; stderr = {stderr}") }
                        ),
                    },
                    Error::Closed { .. } if !stderr.is_empty() => Error::Closed {
                        detail: format!("{}: process quit before initialization: stderr = {stderr}", opts.extension),
                    },
                    Error::Timeout { after, .. } => Error::Other(format!(
                        "{}: no answer to initialize within {after:?}; check that the command is an MCP server speaking stdio/HTTP, or raise the extension's timeout{}",
                        opts.extension,
                        if stderr.is_empty() { String::new() } else { format!("; stderr: {stderr}") }
                    )),
                    other => other,
                });
            }
        };
        log::debug!("mcp {}: protocol {version} ({negotiation})", opts.extension);
        let capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        if mcp_version::is_modern(&version) {
            // No list_changed arrives unasked from a modern server: open the subscription.
            let mut filter = serde_json::Map::new();
            for (cap, key) in [
                ("tools", "toolsListChanged"),
                ("prompts", "promptsListChanged"),
                ("resources", "resourcesListChanged"),
            ] {
                if capabilities.pointer(&format!("/{cap}/listChanged")) == Some(&Value::Bool(true)) {
                    filter.insert(key.into(), Value::Bool(true));
                }
            }
            if !filter.is_empty() {
                let (s, timeout) = (shared.clone(), opts.timeout);
                let spawned = thread::Builder::new()
                    .name(format!("mcp-listen-{}", opts.extension))
                    .spawn(move || s.listen(Value::Object(filter), timeout));
                if let Err(e) = spawned {
                    log::warn!(
                        "mcp {}: cannot start the subscription thread ({e}); lists are re-read on restart only",
                        opts.extension
                    );
                }
            }
        } else if capabilities.get("logging").is_some() {
            // The server logs at the level we log at (its messages land in our log).
            let level = log_level_name(log::max_level());
            if let Err(e) = shared.request("logging/setLevel", json!({ "level": level }), opts.timeout, None) {
                log::warn!("mcp {}: logging/setLevel {level} failed: {e}", opts.extension);
            }
        }
        let server_info = result
            .get("serverInfo")
            .or_else(|| result.pointer(&format!("/_meta/{}", mcp_version::META_SERVER_INFO.replace('/', "~1"))))
            .cloned()
            .unwrap_or(Value::Null);
        Ok(Client {
            shared,
            timeout: opts.timeout,
            protocol_version: version,
            negotiation,
            server_info,
            capabilities,
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_string),
        })
    }

    /// How the protocol revision was chosen, e.g. `server/discover offered 2026-07-28, 2025-11-25`
    /// or `legacy: server/discover answered -32601; initialize`.
    pub fn negotiation(&self) -> &str {
        &self.negotiation
    }

    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }
    pub fn extension(&self) -> &str {
        &self.shared.extension
    }

    /// Refuses a request for a `capability` the server did not declare.
    fn require(&self, capability: &str) -> Result<(), Error> {
        match self.capabilities.get(capability) {
            Some(_) => Ok(()),
            None => Err(Error::Unsupported { extension: self.shared.extension.clone(), what: capability.to_string() }),
        }
    }

    /// Follows `nextCursor` through every page of a list method of `capability`.
    fn list_all(&self, capability: &str, method: &str, field: &str) -> Result<Vec<Value>, Error> {
        self.require(capability)?;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let mut cursor: Option<String> = None;
        let too_large = |limit: String| Error::TooLarge {
            extension: self.shared.extension.clone(),
            what: format!("{method} (all pages together)"),
            limit,
        };
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let mut page = self.shared.request(method, params, self.timeout, None)?;
            if let Some(Value::Array(items)) = page.get_mut(field).map(Value::take) {
                for item in items {
                    bytes += json_len(&item);
                    if bytes > MAX_LIST_BYTES {
                        return Err(too_large(format!("{} MiB", MAX_LIST_BYTES >> 20)));
                    }
                    if out.len() >= MAX_LIST_ITEMS {
                        return Err(too_large(format!("{MAX_LIST_ITEMS} items")));
                    }
                    out.push(item);
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(out),
            }
        }
        log::warn!("mcp {}: {method} still had more pages after {MAX_PAGES}; stopping", self.shared.extension);
        Ok(out)
    }

    /// The server's tools (all pages), cached until `notifications/tools/list_changed`.
    /// Tools that must run as tasks (`execution.taskSupport: "required"`) are left out: this
    /// client does not run tasks, and a plain call of one would only fail. So is an item that is
    /// not a tool (no string `name`: it could not be called).
    pub fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        self.list_tools_shared().map(|t| t.as_ref().clone())
    }

    /// `list_tools`, the cached list itself: the same `Arc` until the list changes, so a caller
    /// can tell an unchanged list by `Arc::ptr_eq` and copies nothing.
    pub fn list_tools_shared(&self) -> Result<Arc<Vec<Tool>>, Error> {
        if let Some(t) = lock(&self.shared.tools).clone() {
            return Ok(t);
        }
        let generation = self.shared.tools_generation.load(Ordering::SeqCst);
        let listed = self.list_all("tools", "tools/list", "tools")?;
        let mut tools = self.typed(listed, Tool::from_value, "a tool has a string name");
        tools.retain(|t| {
            if t.task_only() {
                log::info!(
                    "mcp {}: not listing tool {} (it requires task augmentation, which gosling does not run)",
                    self.shared.extension,
                    t.name
                );
            }
            !t.task_only()
        });
        if mcp_version::is_modern(&self.protocol_version) {
            // 2026-07-28: a tool whose x-mcp-header annotations break the rules MUST be dropped;
            // the others' annotated arguments travel as Mcp-Param-* headers too.
            tools.retain(|t| match crate::params::invalid(&t.input_schema) {
                None => true,
                Some(why) => {
                    log::warn!(
                        "mcp {}: not listing tool {} (invalid x-mcp-header: {why})",
                        self.shared.extension,
                        t.name
                    );
                    false
                }
            });
            let maps = tools
                .iter()
                .filter_map(|t| {
                    let map = crate::params::header_map(&t.input_schema);
                    (!map.is_empty()).then(|| (t.name.clone(), map))
                })
                .collect();
            self.shared.transport.set_param_headers(maps);
        }
        let tools = Arc::new(tools);
        let mut cache = lock(&self.shared.tools);
        if self.shared.tools_generation.load(Ordering::SeqCst) == generation {
            *cache = Some(tools.clone());
        }
        Ok(tools)
    }

    /// `tools/call`; returns the CallToolResult (an `isError` result is not an `Err`).
    pub fn call_tool(&self, name: &str, arguments: Option<Value>, ctx: &CallContext) -> Result<CallToolResult, Error> {
        if mcp_version::is_modern(&self.protocol_version) && lock(&self.shared.tools).is_none() {
            // The tool's x-mcp-header arguments are known from its listing only (a call made
            // without one, as probe's --call, would lack its Mcp-Param-* headers).
            if let Err(e) = self.list_tools() {
                log::debug!("mcp {}: tools/list before calling {name} failed: {e}", self.shared.extension);
            }
        }
        let mut params = json!({ "name": name, "arguments": arguments.unwrap_or_else(|| json!({})) });
        let progress = ctx.progress.as_ref().map(|tx| {
            let call_no = self.shared.peer.next_number();
            let token = format!("{}-{call_no}", self.shared.extension);
            params["_meta"] = json!({ "progressToken": token });
            lock(&self.shared.progress).insert(token.clone(), tx.clone());
            lock(&self.shared.listeners).insert(call_no, tx.clone());
            (token, call_no)
        });
        let started = Instant::now();
        let r = self.shared.request_with_input("tools/call", params, self.timeout, ctx.cancel.as_ref());
        if let Some((token, call_no)) = progress {
            lock(&self.shared.progress).remove(&token);
            lock(&self.shared.listeners).remove(&call_no);
        }
        log::debug!("mcp {}: tools/call {name} took {:?}", self.shared.extension, started.elapsed());
        let result = self.bounded(r?, || format!("the result of tool {name}"))?;
        let result = CallToolResult::from_value(result)
            .map_err(|v| self.not_an_object(&format!("the result of tool {name}"), "a CallToolResult object", &v))?;
        Ok(self.check_output(name, result))
    }

    /// A result whose `structuredContent` does not match the tool's `outputSchema` becomes an
    /// error result the model sees (the spec: clients SHOULD validate structured results).
    fn check_output(&self, name: &str, result: CallToolResult) -> CallToolResult {
        if result.is_error() {
            return result;
        }
        let schema = self
            .shared
            .tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|ts| ts.iter().find(|t| t.name == name).and_then(|t| t.output_schema.clone()));
        let Some(schema) = schema else { return result };
        let problem = match &result.structured_content {
            None => Some("the result has no structuredContent although the tool declares an outputSchema".to_string()),
            Some(sc) => crate::schema::mismatch(&schema, sc),
        };
        match problem {
            None => result,
            Some(p) => {
                log::warn!(
                    "mcp {}: tool {name} returned output that does not match its outputSchema: {p}",
                    self.shared.extension
                );
                CallToolResult::text(
                    format!("Tool {name} returned output that does not match its declared outputSchema: {p}"),
                    true,
                )
            }
        }
    }

    /// Refuses a result past `MAX_RESULT_BYTES`.
    fn bounded(&self, v: Value, what: impl FnOnce() -> String) -> Result<Value, Error> {
        if json_len(&v) > MAX_RESULT_BYTES {
            return Err(Error::TooLarge {
                extension: self.shared.extension.clone(),
                what: what(),
                limit: format!("{} MiB", MAX_RESULT_BYTES >> 20),
            });
        }
        Ok(v)
    }

    /// The server's resources (all pages). An item that is not a resource (no string `uri` and
    /// `name`) is left out (logged).
    pub fn list_resources(&self) -> Result<Vec<Resource>, Error> {
        let listed = self.list_all("resources", "resources/list", "resources")?;
        Ok(self.typed(listed, Resource::from_value, "a resource has a string uri and name"))
    }

    /// The server's resource templates (all pages). An item that is not a template (no string
    /// `uriTemplate` and `name`) is left out (logged).
    pub fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, Error> {
        let listed = self.list_all("resources", "resources/templates/list", "resourceTemplates")?;
        Ok(self.typed(listed, ResourceTemplate::from_value, "a resource template has a string uriTemplate and name"))
    }

    /// The server's prompts (all pages). An item that is not a prompt (no string `name`) is left
    /// out (logged).
    pub fn list_prompts(&self) -> Result<Vec<Prompt>, Error> {
        let listed = self.list_all("prompts", "prompts/list", "prompts")?;
        Ok(self.typed(listed, Prompt::from_value, "a prompt has a string name"))
    }

    /// Listed items as `T`, leaving out (logged) those that are not.
    fn typed<T>(&self, listed: Vec<Value>, from: fn(Value) -> Result<T, Value>, rule: &str) -> Vec<T> {
        listed
            .into_iter()
            .filter_map(|item| {
                from(item).map_err(|v| log::warn!("mcp {}: not listing {v} ({rule})", self.shared.extension)).ok()
            })
            .collect()
    }

    /// `resources/read`; a result that is not an object is an error.
    pub fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        self.require("resources")?;
        let r = self.shared.request_with_input("resources/read", json!({ "uri": uri }), self.timeout, None)?;
        let r = self.bounded(r, || format!("resource {uri}"))?;
        ReadResourceResult::from_value(r)
            .map_err(|v| self.not_an_object(&format!("the contents of resource {uri}"), "an object", &v))
    }

    /// `prompts/get`, bounded as a tool result is; a result that is not an object is an error.
    pub fn get_prompt(&self, name: &str, arguments: Option<Value>) -> Result<GetPromptResult, Error> {
        self.require("prompts")?;
        let mut params = json!({ "name": name });
        if let Some(a) = arguments {
            params["arguments"] = a;
        }
        let r = self.shared.request_with_input("prompts/get", params, self.timeout, None)?;
        let r = self.bounded(r, || format!("prompt {name}"))?;
        GetPromptResult::from_value(r).map_err(|v| self.not_an_object(&format!("prompt {name}"), "an object", &v))
    }

    /// The error for a result (`what`) that is `v`, not the object it must be (`expected`).
    fn not_an_object(&self, what: &str, expected: &str, v: &Value) -> Error {
        Error::Other(format!(
            "{}: {what} is {}, not {expected}; the server is broken",
            self.shared.extension,
            json_kind(v)
        ))
    }

    /// Checks the server answers: `ping` (legacy), `server/discover` (modern, which has no ping).
    pub fn ping(&self) -> Result<(), Error> {
        let method = if mcp_version::is_modern(&self.protocol_version) { "server/discover" } else { "ping" };
        self.shared.request(method, json!({}), self.timeout, None).map(|_| ())
    }

    pub fn is_closed(&self) -> bool {
        self.shared.peer.is_closed()
    }

    /// Recent stderr of a stdio server, for error messages.
    pub fn diagnostics(&self) -> String {
        self.shared.transport.diagnostics()
    }

    /// Ends the connection (stdio: the shutdown ladder). Idempotent.
    pub fn close(&self) {
        self.shared.transport.close();
        self.shared.peer.close(Error::Closed { detail: format!("{} was shut down", self.shared.extension) });
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}
