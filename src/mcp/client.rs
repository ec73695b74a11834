//! The MCP client: lifecycle, request multiplexing, primitives, server→client traffic.
//!
//! One `Client` per connected server, shared by many threads. Each request gets a fresh id
//! and a `bounded(1)` slot in the pending map; a router thread reads `Inbound` from the
//! transport and completes slots by id (unknown, late and duplicate ids are dropped), answers
//! the server's own requests (ping, roots/list, elicitation, anything else → method not
//! found), and routes notifications: progress to the call that asked for it, log messages to
//! our log, `tools/list_changed` to the tool cache. A call that times out or is cancelled
//! sends `notifications/cancelled`. When the transport closes, every pending call fails at
//! once with the transport's reason.

use crate::mcp::error::Error;
use crate::mcp::transport::{Inbound, Transport};
use crate::wire::jsonrpc::{ErrorObject, Id, Message, METHOD_NOT_FOUND};
use crate::wire::mcp_version::{self, PREFERRED as PROTOCOL_VERSION};
use crossbeam_channel::{bounded, select, Receiver, Sender};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
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

enum Slot {
    Ok(Value),
    Err(ErrorObject),
    Closed(Error),
}

struct Shared {
    extension: String,
    transport: Arc<dyn Transport>,
    pending: Mutex<HashMap<Id, Sender<Slot>>>,
    /// progressToken → where its notifications go.
    progress: Mutex<HashMap<String, Sender<Value>>>,
    /// Calls in flight that want log messages too.
    listeners: Mutex<HashMap<i64, Sender<Value>>>,
    roots: RwLock<Option<Vec<PathBuf>>>,
    elicitation: Option<ElicitationHandler>,
    sampling: Option<SamplingHandler>,
    tools: Mutex<Option<Vec<Value>>>,
    /// Bumped by every `tools/list_changed`: a listing that raced one is not cached.
    tools_generation: AtomicU64,
    closed: AtomicBool,
    close_reason: Mutex<Option<Error>>,
    next_id: AtomicI64,
}

pub struct Client {
    shared: Arc<Shared>,
    timeout: Duration,
    protocol_version: String,
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

impl Shared {
    fn fail_all(&self, err: Error) {
        self.closed.store(true, Ordering::SeqCst);
        self.close_reason.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(err.clone());
        let pending: Vec<_> = self.pending.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        for (_, tx) in pending {
            let _ = tx.try_send(Slot::Closed(err.clone()));
        }
    }

    fn respond(&self, id: Id, result: Result<Value, ErrorObject>) {
        let msg = match result {
            Ok(result) => Message::Response { id, result },
            Err(error) => Message::Error { id: Some(id), error },
        };
        if let Err(e) = self.transport.send(&msg) {
            log::debug!("mcp {}: answering a server request failed: {e}", self.extension);
        }
    }

    /// Requests from the server. Handlers that may block (elicitation, sampling) run on
    /// their own thread so the router keeps routing.
    fn on_request(self: &Arc<Self>, id: Id, method: &str, params: Option<Value>) {
        log::debug!("mcp {}: server request {method} ({id})", self.extension);
        match method {
            "ping" => self.respond(id, Ok(json!({}))),
            "roots/list" => {
                let roots = self.roots.read().unwrap_or_else(|e| e.into_inner()).clone();
                match roots {
                    Some(dirs) => self.respond(id, Ok(root_list(&dirs))),
                    None => self
                        .respond(id, Err(ErrorObject::new(METHOD_NOT_FOUND, "roots are not supported by this client"))),
                }
            }
            "elicitation/create" if self.elicitation.is_some() => {
                let (me, h) = (self.clone(), self.elicitation.clone().expect("checked"));
                let params = params.unwrap_or(Value::Null);
                thread::spawn(move || me.respond(id, Ok(h(&params))));
            }
            "sampling/createMessage" if self.sampling.is_some() => {
                let (me, h) = (self.clone(), self.sampling.clone().expect("checked"));
                let params = params.unwrap_or(Value::Null);
                thread::spawn(move || me.respond(id, h(&params)));
            }
            other => self.respond(id, Err(ErrorObject::new(METHOD_NOT_FOUND, format!("method not found: {other}")))),
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
                if let Some(tx) = self.progress.lock().unwrap_or_else(|e| e.into_inner()).get(&token) {
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
                for tx in self.listeners.lock().unwrap_or_else(|e| e.into_inner()).values() {
                    let _ = tx.try_send(json!({ "method": method, "params": params }));
                }
            }
            "notifications/tools/list_changed" => {
                let mut tools = self.tools.lock().unwrap_or_else(|e| e.into_inner());
                self.tools_generation.fetch_add(1, Ordering::SeqCst);
                *tools = None;
            }
            other => log::debug!("mcp {}: notification {other}", self.extension),
        }
    }

    fn route(self: &Arc<Self>, inbound: Receiver<Inbound>) {
        for msg in inbound {
            match msg {
                Inbound::Message(Message::Response { id, result }) => self.complete(&id, Slot::Ok(result)),
                Inbound::Message(Message::Error { id: Some(id), error }) => self.complete(&id, Slot::Err(error)),
                Inbound::Message(Message::Error { id: None, error }) => {
                    log::warn!("mcp {}: server sent an error without an id: {error}", self.extension)
                }
                Inbound::Message(Message::Request { id, method, params }) => self.on_request(id, &method, params),
                Inbound::Message(Message::Notification { method, params }) => self.on_notification(&method, params),
                Inbound::Closed(err) => {
                    self.fail_all(err);
                    return;
                }
            }
        }
        self.fail_all(Error::Closed { detail: format!("{}: the transport ended", self.extension) });
    }

    fn complete(&self, id: &Id, slot: Slot) {
        match self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(id) {
            Some(tx) => {
                let _ = tx.try_send(slot);
            }
            None => log::debug!("mcp {}: dropping a response to unknown or finished request {id}", self.extension),
        }
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), Error> {
        self.transport.send(&Message::notification(method, Some(params)))
    }

    /// One request/response with a deadline and an optional cancel signal.
    fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&Receiver<()>>,
    ) -> Result<Value, Error> {
        if self.closed.load(Ordering::SeqCst) {
            let reason = self.close_reason.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(reason.unwrap_or_else(|| Error::Closed { detail: format!("{} is closed", self.extension) }));
        }
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = bounded(1);
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), tx);
        log::debug!("mcp {}: -> {method} ({id})", self.extension);
        if let Err(e) = self.transport.send(&Message::request(id.clone(), method, Some(params))) {
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            return Err(e);
        }
        let never = crossbeam_channel::never();
        let cancel = cancel.unwrap_or(&never);
        let outcome = select! {
            recv(rx) -> slot => slot.ok(),
            recv(cancel) -> _ => {
                self.abandon(&id, "operation cancelled");
                return Err(Error::Cancelled { method: method.to_string() });
            },
            default(timeout) => {
                self.abandon(&id, "timed out");
                return Err(Error::Timeout { method: method.to_string(), after: timeout });
            },
        };
        match outcome {
            Some(Slot::Ok(v)) => Ok(v),
            Some(Slot::Err(e)) => Err(Error::Rpc(e)),
            Some(Slot::Closed(e)) => Err(e),
            None => Err(Error::Closed { detail: format!("{}: the connection closed", self.extension) }),
        }
    }

    fn abandon(&self, id: &Id, reason: &str) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        log::info!("mcp {}: request {id} abandoned ({reason}); sending notifications/cancelled", self.extension);
        let _ = self.notify("notifications/cancelled", json!({ "requestId": id.to_value(), "reason": reason }));
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
        let shared = Arc::new(Shared {
            extension: opts.extension.clone(),
            transport: transport.clone(),
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            listeners: Mutex::new(HashMap::new()),
            roots: RwLock::new(opts.roots.clone()),
            elicitation: opts.elicitation.clone(),
            sampling: opts.sampling.clone(),
            tools: Mutex::new(None),
            tools_generation: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            next_id: AtomicI64::new(1),
        });
        {
            let s = shared.clone();
            thread::Builder::new()
                .name(format!("mcp-route-{}", opts.extension))
                .spawn(move || s.route(inbound))
                .map_err(|e| Error::Other(format!("cannot start a thread: {e}")))?;
        }
        let mut caps = serde_json::Map::new();
        if opts.roots.is_some() {
            caps.insert("roots".into(), json!({ "listChanged": true }));
        }
        if opts.elicitation.is_some() {
            caps.insert("elicitation".into(), json!({}));
        }
        if opts.sampling.is_some() {
            caps.insert("sampling".into(), json!({}));
        }
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": caps,
            "clientInfo": { "name": opts.client_name, "version": opts.client_version },
        });
        let init = shared.request("initialize", params, opts.timeout, None);
        let result = match init {
            Ok(r) => r,
            Err(e) => {
                transport.close();
                let stderr = transport.diagnostics();
                return Err(match e {
                    Error::Closed { .. } if !stderr.is_empty() => {
                        Error::Closed { detail: format!("{}: process quit before initialization: stderr = {stderr}", opts.extension) }
                    }
                    Error::Timeout { after, .. } => Error::Other(format!(
                        "{}: no answer to initialize within {after:?}; check that the command is an MCP server speaking stdio/HTTP, or raise the extension's timeout{}",
                        opts.extension,
                        if stderr.is_empty() { String::new() } else { format!("; stderr: {stderr}") }
                    )),
                    other => other,
                });
            }
        };
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_string();
        if !mcp_version::is_known(&version) {
            transport.close();
            return Err(Error::Other(format!(
                "{}: the server wants protocol version {version:?}, we asked for {PROTOCOL_VERSION} and know {}; update the server or gosling",
                opts.extension,
                mcp_version::KNOWN.join(", ")
            )));
        }
        shared.notify("notifications/initialized", json!({}))?;
        log::debug!("mcp {}: initialized (protocol {version})", opts.extension);
        if result.pointer("/capabilities/logging").is_some() {
            // The server logs at the level we log at (its messages land in our log).
            let level = log_level_name(log::max_level());
            if let Err(e) = shared.request("logging/setLevel", json!({ "level": level }), opts.timeout, None) {
                log::warn!("mcp {}: logging/setLevel {level} failed: {e}", opts.extension);
            }
        }
        Ok(Client {
            shared,
            timeout: opts.timeout,
            protocol_version: version,
            server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_string),
        })
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

    fn require(&self, capability: &str, what: &str) -> Result<(), Error> {
        if self.capabilities.get(capability).is_some() {
            Ok(())
        } else {
            Err(Error::Unsupported { extension: self.shared.extension.clone(), what: what.to_string() })
        }
    }

    /// Follows `nextCursor` through every page of a list method.
    fn list_all(&self, method: &str, field: &str) -> Result<Vec<Value>, Error> {
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
    /// client does not run tasks, and a plain call of one would only fail.
    pub fn list_tools(&self) -> Result<Vec<Value>, Error> {
        self.require("tools", "tools")?;
        if let Some(t) = self.shared.tools.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(t);
        }
        let generation = self.shared.tools_generation.load(Ordering::SeqCst);
        let mut tools = self.list_all("tools/list", "tools")?;
        tools.retain(|t| {
            let task_only = t.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required");
            if task_only {
                log::info!(
                    "mcp {}: not listing tool {} (it requires task augmentation, which gosling does not run)",
                    self.shared.extension,
                    t["name"]
                );
            }
            !task_only
        });
        let mut cache = self.shared.tools.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared.tools_generation.load(Ordering::SeqCst) == generation {
            *cache = Some(tools.clone());
        }
        Ok(tools)
    }

    /// `tools/call`; returns the CallToolResult (an `isError` result is not an `Err`).
    pub fn call_tool(&self, name: &str, arguments: Option<Value>, ctx: &CallContext) -> Result<Value, Error> {
        let call_no = self.shared.next_id.fetch_add(1, Ordering::SeqCst);
        let mut params = json!({ "name": name, "arguments": arguments.unwrap_or_else(|| json!({})) });
        let token = format!("{}-{call_no}", self.shared.extension);
        if let Some(tx) = &ctx.progress {
            params["_meta"] = json!({ "progressToken": token });
            self.shared.progress.lock().unwrap_or_else(|e| e.into_inner()).insert(token.clone(), tx.clone());
            self.shared.listeners.lock().unwrap_or_else(|e| e.into_inner()).insert(call_no, tx.clone());
        }
        let started = Instant::now();
        let r = self.shared.request("tools/call", params, self.timeout, ctx.cancel.as_ref());
        if ctx.progress.is_some() {
            self.shared.progress.lock().unwrap_or_else(|e| e.into_inner()).remove(&token);
            self.shared.listeners.lock().unwrap_or_else(|e| e.into_inner()).remove(&call_no);
        }
        log::debug!("mcp {}: tools/call {name} took {:?}", self.shared.extension, started.elapsed());
        let result = self.bounded(r?, &format!("the result of tool {name}"))?;
        Ok(self.check_output(name, result))
    }

    /// A result whose `structuredContent` does not match the tool's `outputSchema` becomes an
    /// error result the model sees (the spec: clients SHOULD validate structured results).
    fn check_output(&self, name: &str, result: Value) -> Value {
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return result;
        }
        let schema = self
            .shared
            .tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|ts| ts.iter().find(|t| t["name"] == name).and_then(|t| t.get("outputSchema").cloned()));
        let Some(schema) = schema else { return result };
        let problem = match result.get("structuredContent") {
            None => Some("the result has no structuredContent although the tool declares an outputSchema".to_string()),
            Some(sc) => crate::mcp::schema::mismatch(&schema, sc),
        };
        match problem {
            None => result,
            Some(p) => {
                log::warn!(
                    "mcp {}: tool {name} returned output that does not match its outputSchema: {p}",
                    self.shared.extension
                );
                json!({
                    "content": [{"type": "text", "text": format!("Tool {name} returned output that does not match its declared outputSchema: {p}")}],
                    "isError": true,
                })
            }
        }
    }

    /// Refuses a result past `MAX_RESULT_BYTES`.
    fn bounded(&self, v: Value, what: &str) -> Result<Value, Error> {
        if json_len(&v) > MAX_RESULT_BYTES {
            return Err(Error::TooLarge {
                extension: self.shared.extension.clone(),
                what: what.to_string(),
                limit: format!("{} MiB", MAX_RESULT_BYTES >> 20),
            });
        }
        Ok(v)
    }

    pub fn list_resources(&self) -> Result<Vec<Value>, Error> {
        self.require("resources", "resources")?;
        self.list_all("resources/list", "resources")
    }

    pub fn list_resource_templates(&self) -> Result<Vec<Value>, Error> {
        self.require("resources", "resources")?;
        self.list_all("resources/templates/list", "resourceTemplates")
    }

    pub fn read_resource(&self, uri: &str) -> Result<Value, Error> {
        self.require("resources", "resources")?;
        let r = self.shared.request("resources/read", json!({ "uri": uri }), self.timeout, None)?;
        self.bounded(r, &format!("resource {uri}"))
    }

    pub fn list_prompts(&self) -> Result<Vec<Value>, Error> {
        self.require("prompts", "prompts")?;
        self.list_all("prompts/list", "prompts")
    }

    pub fn get_prompt(&self, name: &str, arguments: Option<Value>) -> Result<Value, Error> {
        self.require("prompts", "prompts")?;
        let mut params = json!({ "name": name });
        if let Some(a) = arguments {
            params["arguments"] = a;
        }
        self.shared.request("prompts/get", params, self.timeout, None)
    }

    pub fn ping(&self) -> Result<(), Error> {
        self.shared.request("ping", json!({}), self.timeout, None).map(|_| ())
    }

    /// New roots: later `roots/list` answers use them; the server is told they changed.
    pub fn set_roots(&self, roots: Vec<PathBuf>) {
        *self.shared.roots.write().unwrap_or_else(|e| e.into_inner()) = Some(roots);
        let _ = self.shared.notify("notifications/roots/list_changed", json!({}));
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Recent stderr of a stdio server, for error messages.
    pub fn diagnostics(&self) -> String {
        self.shared.transport.diagnostics()
    }

    /// Ends the connection (stdio: the shutdown ladder). Idempotent.
    pub fn close(&self) {
        self.shared.transport.close();
        self.shared.fail_all(Error::Closed { detail: format!("{} was shut down", self.shared.extension) });
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}
