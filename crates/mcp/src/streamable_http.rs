//! The Streamable HTTP transport over blocking ureq: every client message is a POST; answers
//! come back as one JSON body or as an SSE stream; for a legacy (2025) session an optional GET
//! stream carries the server's own requests and notifications.
//!
//! A message whose `_meta` names a modern revision (2026-07-28) is one self-contained exchange:
//! no session, `MCP-Protocol-Version` from the message, and the `Mcp-Method` / `Mcp-Name`
//! routing headers; its long-lived `subscriptions/listen` answer is read like any SSE answer.
//!
//! Owns: the session (`Mcp-Session-Id`, `MCP-Protocol-Version`), the transparent re-initialize
//! after a 404 for an expired session, resumption of a dropped stream with `Last-Event-ID`,
//! dropping of replayed/duplicate messages, TLS roots and proxy settings, header substitution,
//! and the fail-fast error for `type: sse`. Does not own ids, methods or timeouts of requests:
//! that is the client's job (mcp/client.rs); this module only moves whole messages.
//!
//! Threads: `send` blocks until the answer's headers (bounded by the extension timeout); an SSE
//! answer is then read on its own thread, the GET stream on another. Every read is bounded in
//! time and size. Header values are never logged.

use crate::error::Error;
use crate::http_error::{snippet, HttpFailure};
use crate::transport::{Inbound, Transport};
use crossbeam_channel::Sender;
use gosling_wire::jsonrpc::{ErrorObject, Id, Message};
use gosling_wire::sse;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where and how to reach one Streamable HTTP server.
#[derive(Debug, Clone)]
pub struct HttpSpec {
    pub uri: String,
    /// Extra headers, variables already substituted (see `substitute_headers`). Never logged.
    pub headers: Vec<(String, String)>,
    /// The extension's timeout: bounds connecting and every answer.
    pub timeout: Duration,
    /// The extension's name, for error messages.
    pub extension: String,
    /// OAuth for a server that needs sign-in (mcp/oauth/): its token goes in the
    /// `Authorization` header (unless `headers` set one), and a 401/403 goes to it.
    pub auth: Option<Arc<crate::oauth::Authorizer>>,
}

const ACCEPT_POST: &str = "application/json, text/event-stream";
/// Largest JSON answer, and longest SSE line (one message), we accept.
const MAX_MESSAGE: usize = 16 << 20;
/// How much of an error body we read for the message.
const MAX_ERROR_BODY: u64 = 16 << 10;
/// Reconnects of a dropped POST stream (resumption) before its request is failed.
const RESUME_ATTEMPTS: u32 = 5;
/// Reconnect delay when the server sent no `retry:`.
const DEFAULT_RETRY: Duration = Duration::from_millis(1000);
/// Longest accepted `retry:` (a hostile value must not park a request forever).
const MAX_RETRY: Duration = Duration::from_secs(30);
/// A silent GET stream is dropped and reopened after this long (bounds the reader thread).
const GET_IDLE: Duration = Duration::from_secs(120);
/// Reopens of the GET stream in a row that brought nothing, before we stop trying.
const GET_ATTEMPTS: u32 = 5;
/// The least silence tolerated on a `subscriptions/listen` stream before it counts as dead
/// (servers ping every 15 s or so; sse-starlette's default).
const LISTEN_IDLE: Duration = Duration::from_secs(60);
/// How many SSE event ids we remember to drop replays.
const SEEN_EVENTS: usize = 4096;
/// How long `close` waits for the DELETE.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);

/// The client side of one Streamable HTTP connection.
pub struct HttpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    spec: HttpSpec,
    agent: ureq::Agent,
    inbound: Sender<Inbound>,
    state: Mutex<State>,
    /// Held while re-initializing, so concurrent 404s initialize once.
    reinit: Mutex<()>,
    closed: AtomicBool,
    /// Bumped when a GET stream loop should stop (re-initialize, close).
    get_generation: AtomicU64,
}

#[derive(Default)]
struct State {
    session: Option<String>,
    protocol: Option<String>,
    /// The client's `initialize` request and `notifications/initialized`, replayed when the
    /// server forgot the session.
    init_request: Option<Message>,
    initialized: Option<Message>,
    /// Requests we sent whose response has not arrived: a response for anything else is a
    /// duplicate (replayed on resumption) and is dropped.
    pending: HashSet<Id>,
    seen: VecDeque<u64>,
    seen_set: HashSet<u64>,
    /// Each tool's `x-mcp-header` arguments (`Transport::set_param_headers`).
    param_headers: HashMap<String, crate::params::HeaderMap>,
}

impl HttpTransport {
    /// Builds the HTTP agent (TLS roots, proxy, timeouts). No network I/O happens here: the
    /// client's `initialize` is the first request.
    pub fn connect(spec: &HttpSpec, inbound: Sender<Inbound>) -> Result<Arc<HttpTransport>, Error> {
        let uri: ureq::http::Uri = spec
            .uri
            .parse()
            .map_err(|e: ureq::http::uri::InvalidUri| http_err(spec, HttpFailure::BadUri(e.to_string())))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(http_err(spec, HttpFailure::BadUri("expected http://host[:port]/path or https://…".into())));
        }
        let agent = build_agent(spec)?;
        let inner = Inner {
            spec: spec.clone(),
            agent,
            inbound,
            state: Mutex::new(State::default()),
            reinit: Mutex::new(()),
            closed: AtomicBool::new(false),
            get_generation: AtomicU64::new(0),
        };
        Ok(Arc::new(HttpTransport { inner: Arc::new(inner) }))
    }

    /// The session id the server issued, if any (for tests and diagnostics).
    pub fn session_id(&self) -> Option<String> {
        self.inner.state().session.clone()
    }
}

impl Transport for HttpTransport {
    fn set_param_headers(&self, tools: HashMap<String, crate::params::HeaderMap>) {
        self.inner.state().param_headers = tools;
    }

    fn send(&self, msg: &Message) -> Result<(), Error> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed {
                detail: format!("extension `{}`: the HTTP transport was closed", inner.spec.extension),
            });
        }
        {
            let mut st = inner.state();
            match msg {
                Message::Request { id, method, .. } => {
                    if method == "initialize" {
                        st.init_request = Some(msg.clone());
                        st.session = None;
                        st.protocol = None;
                    }
                    st.pending.insert(id.clone());
                }
                Message::Notification { method, params } => {
                    if method == "notifications/initialized" {
                        st.initialized = Some(msg.clone());
                    } else if method == "notifications/cancelled" {
                        if let Some(id) = params.as_ref().and_then(|p| p.get("requestId")).and_then(Id::from_value) {
                            st.pending.remove(&id);
                        }
                    }
                }
                _ => {}
            }
        }
        let result = inner.send_with_reinit(msg);
        if let (Err(_), Message::Request { id, .. }) = (&result, msg) {
            inner.state().pending.remove(id);
        }
        if result.is_ok() && msg.method() == Some("notifications/initialized") {
            inner.start_get_stream(true);
        }
        result
    }

    fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        inner.get_generation.fetch_add(1, Ordering::SeqCst);
        if let (Some(session), protocol) = inner.session() {
            let req = inner.agent.delete(&inner.spec.uri).config().timeout_global(Some(DELETE_TIMEOUT)).build();
            match inner.add_headers(req, "DELETE", Some(&session), protocol.as_deref()).call() {
                Ok(resp) => log::debug!("mcp: {}: DELETE session -> {}", inner.spec.extension, resp.status().as_u16()),
                Err(e) => log::debug!("mcp: {}: DELETE session failed: {e}", inner.spec.extension),
            }
        }
        let _ = inner.inbound.send(Inbound::Closed(Error::Closed {
            detail: format!("extension `{}` was closed", inner.spec.extension),
        }));
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        // Stops the GET loop at its next wake-up; the client calls `close` for the DELETE.
        self.inner.get_generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a POST's answer turned out to be.
enum Answer {
    /// 2xx and handled (messages delivered, or a stream reader started).
    Done,
    /// 404 while we sent a session id: the session expired.
    SessionGone,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session id and protocol version to send.
    fn session(&self) -> (Option<String>, Option<String>) {
        let st = self.state();
        (st.session.clone(), st.protocol.clone())
    }

    fn fail(&self, failure: HttpFailure) -> Error {
        http_err(&self.spec, failure)
    }

    fn add_headers<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        htm: &str,
        session: Option<&str>,
        protocol: Option<&str>,
    ) -> ureq::RequestBuilder<B> {
        for (k, v) in &self.spec.headers {
            if k.eq_ignore_ascii_case("mcp-session-id") || k.eq_ignore_ascii_case("mcp-protocol-version") {
                continue;
            }
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s);
        }
        if let Some(p) = protocol {
            req = req.header("MCP-Protocol-Version", p);
        }
        if let Some(auth) = self.authorizer() {
            for (k, v) in auth.request_headers(htm, &self.spec.uri) {
                req = req.header(k, v);
            }
        }
        req
    }

    /// The longest silence on a held-open stream before it counts as dead.
    fn listen_idle(&self) -> Duration {
        (self.spec.timeout + Duration::from_secs(10)).max(LISTEN_IDLE)
    }

    /// The OAuth authorizer, unless the config sets `Authorization` itself.
    fn authorizer(&self) -> Option<&Arc<crate::oauth::Authorizer>> {
        let own = self.spec.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        self.spec.auth.as_ref().filter(|_| !own)
    }

    /// The OAuth access token to send, if any.
    fn oauth_token(&self) -> Option<String> {
        self.authorizer()?.access_token()
    }

    fn post(
        &self,
        body: &str,
        session: Option<&str>,
        protocol: Option<&str>,
        routing: &[(String, String)],
        held_open: bool,
    ) -> Result<ureq::http::Response<ureq::Body>, Error> {
        let mut req = self.agent.post(&self.spec.uri);
        if held_open {
            // A subscriptions/listen answer stream lasts as long as the server keeps it: no
            // bound on the whole body, only on the silence between two reads (the server's
            // keep-alive pings reset it).
            req = req.config().timeout_recv_body(None).timeout_per_read(Some(self.listen_idle())).build();
        }
        let mut req = req.header("Accept", ACCEPT_POST).header("Content-Type", "application/json");
        for (k, v) in routing {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = self.add_headers(req, "POST", session, protocol);
        let resp = req.send(body.as_bytes()).map_err(|e| self.fail(HttpFailure::from_ureq(&e, self.spec.timeout)))?;
        if let (Some(auth), Some(nonce)) = (self.authorizer(), header(&resp, "dpop-nonce")) {
            auth.resource_nonce(&nonce);
        }
        Ok(resp)
    }

    fn send_with_reinit(self: &Arc<Self>, msg: &Message) -> Result<(), Error> {
        let body = msg.encode();
        let is_init = msg.method() == Some("initialize");
        let mut attempt = 0;
        let mut auth_round = 0;
        // A modern (2026-07-28) message names its revision in `_meta`: it goes without a
        // session, with that revision and the routing headers the spec requires.
        let modern = modern_version(msg);
        let mut routing = if modern.is_some() { routing_headers(msg) } else { Vec::new() };
        if modern.is_some() && msg.method() == Some("tools/call") {
            let p = params(msg);
            let name = p.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or_default();
            if let Some(map) = self.state().param_headers.get(name) {
                let args = p.and_then(|p| p.get("arguments")).unwrap_or(&Value::Null);
                routing.extend(crate::params::headers(map, args));
            }
        }
        loop {
            let (session, protocol) = match &modern {
                Some(v) => (None, Some(v.clone())),
                None => self.session(),
            };
            log::debug!("mcp: {}: POST {}", self.spec.extension, describe_msg(msg));
            let sent_token = self.oauth_token();
            let protocol = if is_init { None } else { protocol.as_deref() };
            let held_open = msg.method() == Some("subscriptions/listen");
            let resp = self.post(&body, session.as_deref(), protocol, &routing, held_open)?;
            match self.handle_answer(msg, resp, session.is_some()) {
                Ok(Answer::Done) => return Ok(()),
                Ok(Answer::SessionGone) if attempt == 0 && !is_init => {
                    attempt += 1;
                    log::info!("mcp: {}: the server forgot session (404); initializing again", self.spec.extension);
                    self.reinitialize(session.as_deref())?;
                }
                Ok(Answer::SessionGone) => return Err(self.fail(HttpFailure::NotFound)),
                Err(e) => {
                    // OAuth: sign in, refresh or step up, then send the message again (bounded).
                    let (Some(auth), Error::Http { failure: HttpFailure::Unauthorized { status, challenge }, .. }) =
                        (self.authorizer(), &e)
                    else {
                        return Err(e);
                    };
                    auth.on_challenge(*status, challenge.as_deref(), sent_token.as_deref(), auth_round)
                        .map_err(|f| self.fail(f))?;
                    auth_round += 1;
                }
            }
        }
    }

    /// Handles the answer to a POST of `msg`.
    fn handle_answer(
        self: &Arc<Self>,
        msg: &Message,
        resp: ureq::http::Response<ureq::Body>,
        had_session: bool,
    ) -> Result<Answer, Error> {
        let status = resp.status().as_u16();
        let content_type = header(&resp, "content-type").unwrap_or_default().to_ascii_lowercase();
        log::debug!("mcp: {}: -> {status} {content_type}", self.spec.extension);
        if !(200..300).contains(&status) {
            if status == 404 && had_session {
                return Ok(Answer::SessionGone);
            }
            let (failure, body) = failed(resp);
            // A JSON-RPC error for our request (e.g. 400 with invalid params) is an answer.
            if let (Message::Request { id, .. }, Ok(Message::Error { id: Some(eid), error })) =
                (msg, Message::parse(&body))
            {
                if &eid == id {
                    self.deliver(Message::Error { id: Some(eid), error });
                    return Ok(Answer::Done);
                }
            }
            return Err(self.fail(failure));
        }
        let Message::Request { id, method, .. } = msg else {
            // Notifications and responses: any 2xx is success; a body (one peer sends one) is ignored.
            let _ = resp.into_body().into_with_config().limit(MAX_ERROR_BODY).read_to_vec();
            return Ok(Answer::Done);
        };
        if method == "initialize" {
            let session = header(&resp, "mcp-session-id");
            log::debug!(
                "mcp: {}: session {}",
                self.spec.extension,
                if session.is_some() { "issued" } else { "none (stateless)" }
            );
            self.state().session = session;
        }
        if content_type.starts_with("text/event-stream") {
            let reader = resp.into_body().into_reader();
            let me = Arc::clone(self);
            let id = id.clone();
            std::thread::Builder::new()
                .name(format!("mcp-http-post-{}", self.spec.extension))
                .spawn(move || me.read_post_stream(reader, id))
                .map_err(|e| Error::Other(format!("cannot start a reader thread: {e}")))?;
            return Ok(Answer::Done);
        }
        let body = resp
            .into_body()
            .into_with_config()
            .limit(MAX_MESSAGE as u64)
            .read_to_vec()
            .map_err(|e| self.fail(HttpFailure::from_ureq(&e, self.spec.timeout)))?;
        if content_type.starts_with("application/json") {
            if let Some(msgs) = parse_messages(&body) {
                for m in msgs {
                    // An error without id in the answer to our one request is about that request.
                    let m = match m {
                        Message::Error { id: None, error } => Message::Error { id: Some(id.clone()), error },
                        other => other,
                    };
                    self.deliver(m);
                }
                return Ok(Answer::Done);
            }
        }
        if body.is_empty() && method != "initialize" && content_type.is_empty() {
            // Accepted without an answer: the response may still come on the GET stream.
            log::debug!("mcp: {}: {method} accepted with an empty answer", self.spec.extension);
            return Ok(Answer::Done);
        }
        Err(self.fail(HttpFailure::NotMcp { status, content_type, snippet: snippet(&body[..body.len().min(4096)]) }))
    }

    /// Hands one server message to the client, dropping duplicate responses.
    fn deliver(&self, msg: Message) {
        if let Some(id) = response_id(&msg) {
            let mut st = self.state();
            if !st.pending.remove(id) {
                log::debug!(
                    "mcp: {}: dropping a response for {id}, which is not pending (duplicate or late)",
                    self.spec.extension
                );
                return;
            }
            if let (Message::Response { result, .. }, Some(Message::Request { id: init_id, .. })) =
                (&msg, &st.init_request)
            {
                if init_id == id {
                    st.protocol = result.get("protocolVersion").and_then(Value::as_str).map(str::to_string);
                }
            }
        }
        log::debug!("mcp: {}: <- {}", self.spec.extension, describe_msg(&msg));
        let _ = self.inbound.send(Inbound::Message(msg));
    }

    /// True the first time an SSE event (by id and data) is seen; replays give false.
    fn first_sighting(&self, ev: &sse::Event) -> bool {
        let Some(id) = &ev.id else { return true };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        ev.data.hash(&mut h);
        let key = h.finish();
        let mut st = self.state();
        if !st.seen_set.insert(key) {
            return false;
        }
        st.seen.push_back(key);
        if st.seen.len() > SEEN_EVENTS {
            if let Some(old) = st.seen.pop_front() {
                st.seen_set.remove(&old);
            }
        }
        true
    }

    /// Delivers one SSE event; returns the id of a response it carried.
    fn on_event(&self, ev: &sse::Event) -> Option<Id> {
        if !(ev.event.is_empty() || ev.event == "message") || ev.data.trim().is_empty() {
            return None; // priming events (`data:` empty) and other event types
        }
        if !self.first_sighting(ev) {
            log::debug!("mcp: {}: dropping a replayed event", self.spec.extension);
            return None;
        }
        match Message::parse(ev.data.as_bytes()) {
            Ok(m) => {
                let rid = response_id(&m).cloned();
                self.deliver(m);
                rid
            }
            Err(e) => {
                log::warn!("mcp: {}: ignoring an SSE event that is not JSON-RPC: {e}", self.spec.extension);
                None
            }
        }
    }

    /// Reads one SSE stream until it ends, `until` is answered, or the transport is closed.
    /// Returns whether `until` was answered on it.
    fn pump(&self, reader: &mut dyn Read, dec: &mut sse::Decoder, until: Option<&Id>, delivered: &mut bool) -> bool {
        let mut buf = vec![0u8; 16 << 10];
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return false;
            }
            let n = match reader.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => n,
                Err(e) => {
                    log::debug!("mcp: {}: stream read ended: {e}", self.spec.extension);
                    return false;
                }
            };
            let events = match dec.feed(&buf[..n]) {
                Ok(evs) => evs,
                Err(e) => {
                    log::warn!("mcp: {}: {e}; dropping the stream", self.spec.extension);
                    // The request this stream answers fails now, saying why, rather than
                    // being resumed into the same oversized event.
                    if let Some(id) = until.filter(|id| self.is_pending(id)) {
                        let error = ErrorObject::new(
                            -32000,
                            format!(
                                "extension `{}` sent an event over {} MiB, the most gosling holds for one message; it was refused",
                                self.spec.extension,
                                MAX_MESSAGE >> 20
                            ),
                        );
                        self.deliver(Message::Error { id: Some(id.clone()), error });
                        return true;
                    }
                    return false;
                }
            };
            for ev in events {
                if !ev.data.trim().is_empty() {
                    *delivered = true;
                }
                if let Some(rid) = self.on_event(&ev) {
                    if Some(&rid) == until {
                        return true;
                    }
                }
            }
        }
    }

    fn is_pending(&self, id: &Id) -> bool {
        self.state().pending.contains(id)
    }

    fn retry_delay(dec: &sse::Decoder) -> Duration {
        dec.retry_ms.map(Duration::from_millis).unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)
    }

    /// The answer stream of one POSTed request; resumes with `Last-Event-ID` if it drops early.
    fn read_post_stream(self: Arc<Self>, mut reader: ureq::BodyReader<'static>, id: Id) {
        let mut dec = sse::Decoder::new(MAX_MESSAGE);
        let mut delivered = false;
        if self.pump(&mut reader, &mut dec, Some(&id), &mut delivered) {
            return;
        }
        drop(reader);
        let mut attempts = 0;
        while !self.closed.load(Ordering::SeqCst) && self.is_pending(&id) {
            let Some(last) = dec.last_event_id().map(str::to_string) else {
                break; // the server gave no event ids: nothing to resume from
            };
            if attempts >= RESUME_ATTEMPTS {
                break;
            }
            attempts += 1;
            let delay = Self::retry_delay(&dec);
            log::debug!(
                "mcp: {}: stream for {id} dropped; resuming in {delay:?} (attempt {attempts})",
                self.spec.extension
            );
            std::thread::sleep(delay);
            let Some(mut r) = self.open_get(Some(&last), Some(self.spec.timeout + Duration::from_secs(10)), None)
            else {
                continue;
            };
            dec.finish();
            if self.pump(&mut r, &mut dec, Some(&id), &mut delivered) {
                return;
            }
        }
        if !self.closed.load(Ordering::SeqCst) && self.is_pending(&id) {
            let error = ErrorObject::new(
                -32000,
                format!("extension `{}`: the server ended the answer stream for request {id} without answering and it could not be resumed", self.spec.extension),
            );
            self.deliver(Message::Error { id: Some(id), error });
        }
    }

    /// Opens a GET stream. `None` when the server has no stream for us (any non-200) or the
    /// request failed. `idle` bounds each read, `total` the whole body.
    fn open_get(
        &self,
        last_event_id: Option<&str>,
        total: Option<Duration>,
        idle: Option<Duration>,
    ) -> Option<ureq::BodyReader<'static>> {
        let (session, protocol) = self.session();
        let mut req = self
            .agent
            .get(&self.spec.uri)
            .config()
            .timeout_recv_body(total)
            .timeout_per_read(idle)
            .build()
            .header("Accept", "text/event-stream");
        req = self.add_headers(req, "GET", session.as_deref(), protocol.as_deref());
        if let Some(l) = last_event_id {
            req = req.header("Last-Event-ID", l);
        }
        let resp = req.call().inspect_err(|e| log::debug!("mcp: {}: GET failed: {e}", self.spec.extension)).ok()?;
        let status = resp.status().as_u16();
        let ct = header(&resp, "content-type").unwrap_or_default();
        if status == 200 && ct.to_ascii_lowercase().starts_with("text/event-stream") {
            Some(resp.into_body().into_reader())
        } else {
            log::debug!("mcp: {}: GET -> {status}: no server stream", self.spec.extension);
            None
        }
    }

    /// Starts the server-to-client GET stream on a thread. With `wait`, returns once the
    /// first GET has its answer (so the server sees it before our next request).
    fn start_get_stream(self: &Arc<Self>, wait: bool) {
        let generation = self.get_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("mcp-http-get-{}", self.spec.extension))
            .spawn(move || me.get_loop(generation, tx));
        if wait && spawned.is_ok() {
            let _ = rx.recv_timeout(self.spec.timeout.min(Duration::from_secs(10)));
        }
    }

    fn get_loop(self: Arc<Self>, generation: u64, first: Sender<()>) {
        let mut first = Some(first);
        let mut dec = sse::Decoder::new(MAX_MESSAGE);
        let mut idle_rounds = 0;
        let current =
            |me: &Inner| !me.closed.load(Ordering::SeqCst) && me.get_generation.load(Ordering::SeqCst) == generation;
        while current(&self) && idle_rounds < GET_ATTEMPTS {
            let last = dec.last_event_id().map(str::to_string);
            let opened = self.open_get(last.as_deref(), None, Some(GET_IDLE));
            if let Some(tx) = first.take() {
                let _ = tx.send(());
            }
            let Some(mut reader) = opened else { break };
            let mut delivered = false;
            let started = Instant::now();
            self.pump(&mut reader, &mut dec, None, &mut delivered);
            dec.finish();
            if delivered || started.elapsed() > GET_IDLE {
                idle_rounds = 0;
            } else {
                idle_rounds += 1;
            }
            if current(&self) {
                std::thread::sleep(Self::retry_delay(&dec));
            }
        }
        log::debug!("mcp: {}: GET stream loop ended", self.spec.extension);
    }

    /// Replays the client's initialize + initialized after the server forgot our session.
    fn reinitialize(self: &Arc<Self>, stale: Option<&str>) -> Result<(), Error> {
        let _guard = self.reinit.lock().unwrap_or_else(|p| p.into_inner());
        let (init, initialized) = {
            let mut st = self.state();
            if st.session.as_deref() != stale {
                return Ok(()); // another thread already did it
            }
            st.session = None;
            (st.init_request.clone(), st.initialized.clone())
        };
        let Some(init @ Message::Request { id: init_id, .. }) = &init else {
            return Err(self.fail(HttpFailure::NotFound));
        };
        let resp = self.post(&init.encode(), None, None, &[], false)?;
        let status = resp.status().as_u16();
        let ct = header(&resp, "content-type").unwrap_or_default().to_ascii_lowercase();
        if !(200..300).contains(&status) {
            return Err(self.fail(failed(resp).0));
        }
        let session = header(&resp, "mcp-session-id");
        // Read the answer ourselves and swallow it: the client already has one.
        let mut answer: Option<Message> = None;
        if ct.starts_with("text/event-stream") {
            let mut reader = resp.into_body().into_reader();
            let mut dec = sse::Decoder::new(MAX_MESSAGE);
            let mut buf = vec![0u8; 16 << 10];
            while answer.is_none() {
                let n = match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                for ev in dec.feed(&buf[..n]).unwrap_or_default() {
                    if let Ok(m) = Message::parse(ev.data.as_bytes()) {
                        if response_id(&m) == Some(init_id) {
                            answer = Some(m);
                        }
                    }
                }
            }
        } else {
            let body = resp.into_body().into_with_config().limit(MAX_MESSAGE as u64).read_to_vec().unwrap_or_default();
            answer = parse_messages(&body)
                .and_then(|ms| ms.into_iter().find(|m| matches!(m, Message::Response { id, .. } if id == init_id)));
        }
        match answer {
            Some(Message::Response { result, .. }) => {
                let mut st = self.state();
                st.session = session;
                if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                    st.protocol = Some(v.to_string());
                }
            }
            Some(Message::Error { error, .. }) => return Err(Error::Rpc(error)),
            _ => {
                return Err(self.fail(HttpFailure::NotMcp {
                    status,
                    content_type: ct,
                    snippet: "no answer to the repeated initialize".into(),
                }))
            }
        }
        if let Some(n) = &initialized {
            let (session, protocol) = self.session();
            let resp = self.post(&n.encode(), session.as_deref(), protocol.as_deref(), &[], false)?;
            let _ = resp.into_body().into_with_config().limit(MAX_ERROR_BODY).read_to_vec();
        }
        self.start_get_stream(false);
        Ok(())
    }
}

/// The revision a modern message names in its `_meta`; `None` for a legacy one.
fn modern_version(msg: &Message) -> Option<String> {
    let v = params(msg)?.get("_meta")?.get(gosling_wire::mcp_version::META_VERSION)?.as_str()?;
    gosling_wire::mcp_version::is_modern(v).then(|| v.to_string())
}

/// The params of a request or notification.
fn params(msg: &Message) -> Option<&Value> {
    match msg {
        Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
        _ => None,
    }
}

/// `Mcp-Method` and, for the methods that name a tool, prompt or resource, `Mcp-Name`.
fn routing_headers(msg: &Message) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(method) = msg.method() {
        out.push(("Mcp-Method".to_string(), method.to_string()));
        let name = match method {
            "tools/call" | "prompts/get" => params(msg).and_then(|p| p.get("name")),
            "resources/read" => params(msg).and_then(|p| p.get("uri")),
            _ => None,
        };
        // Header values must be visible ASCII; anything else is left to the body.
        if let Some(n) = name.and_then(Value::as_str).filter(|n| n.bytes().all(|b| (0x20..0x7f).contains(&b))) {
            out.push(("Mcp-Name".to_string(), n.to_string()));
        }
    }
    out
}

fn http_err(spec: &HttpSpec, failure: HttpFailure) -> Error {
    Error::Http { extension: spec.extension.clone(), url: spec.uri.clone(), failure }
}

fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// A non-2xx answer: what failed, and the (bounded) start of its body.
fn failed(resp: ureq::http::Response<ureq::Body>) -> (HttpFailure, Vec<u8>) {
    let (status, challenge, location) =
        (resp.status().as_u16(), header(&resp, "www-authenticate"), header(&resp, "location"));
    let body = resp.into_body().into_with_config().limit(MAX_ERROR_BODY).read_to_vec().unwrap_or_default();
    (HttpFailure::from_status(status, challenge, location, &body), body)
}

/// The id of a response, or of an error that names its request.
fn response_id(m: &Message) -> Option<&Id> {
    match m {
        Message::Response { id, .. } | Message::Error { id: Some(id), .. } => Some(id),
        _ => None,
    }
}

/// One message or (tolerated, though not in 2025-06-18) a batch array.
fn parse_messages(body: &[u8]) -> Option<Vec<Message>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    match v {
        Value::Array(items) => items.into_iter().map(|i| Message::from_value(i).ok()).collect(),
        other => Message::from_value(other).ok().map(|m| vec![m]),
    }
}

/// Method and id for the debug log; never params (they may carry secrets).
fn describe_msg(m: &Message) -> String {
    match m {
        Message::Request { id, method, .. } => format!("request {method} id={id}"),
        Message::Notification { method, .. } => format!("notification {method}"),
        Message::Response { id, .. } => format!("response id={id}"),
        Message::Error { id, error } => {
            format!("error id={} code={}", id.as_ref().map(|i| i.to_string()).unwrap_or_default(), error.code)
        }
    }
}

fn build_agent(spec: &HttpSpec) -> Result<ureq::Agent, Error> {
    let t = spec.timeout;
    let short = t.min(Duration::from_secs(30));
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(
            crate::tls_roots::root_certs().map_err(|e| Error::Other(format!("extension `{}`: {e}", spec.extension)))?,
        )
        .build();
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .timeout_resolve(Some(short))
        .timeout_connect(Some(short))
        .timeout_send_request(Some(t))
        .timeout_send_body(Some(t))
        .timeout_recv_response(Some(t))
        .timeout_recv_body(Some(t + Duration::from_secs(10)))
        .max_response_header_size(64 << 10)
        .proxy(ureq::Proxy::try_from_env())
        .user_agent(format!("gosling/{}", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build();
    Ok(ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        gosling_util::LiteralFirst,
    ))
}

/// Substitutes `${VAR}` (spaces allowed inside the braces) and `$VAR` in header values from
/// `vars` (the merged envs + env_keys). An unknown variable is an error naming it and the
/// header; names and values must be valid HTTP. Values are never logged.
pub fn substitute_headers(
    headers: &BTreeMap<String, String>,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(Error::Other(format!("invalid header name {name:?} in the extension's headers")));
        }
        let v = gosling_wire::template::substitute(value, &|n| vars.get(n).cloned())
            .map_err(|var| Error::HeaderVariable { header: name.clone(), var: var.0 })?;
        if v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(Error::Other(format!("invalid header value for `{name}`: control characters are not allowed")));
        }
        out.push((name.clone(), v));
    }
    Ok(out)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [("TOKEN", "abc"), ("A_1", "x")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn substitute(value: &str, v: &BTreeMap<String, String>) -> Result<String, String> {
        gosling_wire::template::substitute(value, &|n| v.get(n).cloned()).map_err(|u| u.0)
    }

    #[test]
    fn substitution_forms() {
        let v = vars();
        assert_eq!(substitute("Bearer ${TOKEN}", &v).unwrap(), "Bearer abc");
        assert_eq!(substitute("Bearer ${ TOKEN }", &v).unwrap(), "Bearer abc");
        assert_eq!(substitute("$TOKEN-$A_1.", &v).unwrap(), "abc-x.");
        assert_eq!(substitute("cost $5 and $ and ${", &v).unwrap(), "cost $5 and $ and ${");
        assert_eq!(substitute("${TOKEN}${A_1}", &v).unwrap(), "abcx");
        assert_eq!(substitute("${MISSING}", &v), Err("MISSING".to_string()));
        assert_eq!(substitute("x $NOPE y", &v), Err("NOPE".to_string()));
    }

    #[test]
    fn unresolved_variable_names_header_and_variable_but_not_values() {
        let mut h = BTreeMap::new();
        h.insert("Authorization".to_string(), "Bearer ${API_TOKEN}".to_string());
        h.insert("X-Other".to_string(), "secret-value-$TOKEN".to_string());
        let e = substitute_headers(&h, &vars()).unwrap_err().to_string();
        assert!(e.contains("Authorization") && e.contains("API_TOKEN") && e.contains("env_keys"), "{e}");
        assert!(!e.contains("secret-value"), "{e}");
        h.remove("Authorization");
        assert_eq!(
            substitute_headers(&h, &vars()).unwrap(),
            vec![("X-Other".to_string(), "secret-value-abc".to_string())]
        );
    }

    #[test]
    fn invalid_headers_are_rejected() {
        let mut h = BTreeMap::new();
        h.insert("Bad Name".to_string(), "v".to_string());
        assert!(substitute_headers(&h, &vars()).is_err());
        let mut h = BTreeMap::new();
        h.insert("X".to_string(), "a\r\nInjected: 1".to_string());
        assert!(substitute_headers(&h, &vars()).is_err());
    }

    #[test]
    fn sse_error_says_how_to_migrate() {
        let e = Error::SseUnsupported { extension: "old".into() }.to_string();
        assert!(
            e.contains("`old`") && e.contains("SSE is unsupported, migrate to streamable_http") && e.contains("uri"),
            "{e}"
        );
    }

    #[test]
    fn batches_and_single_messages_parse() {
        assert_eq!(parse_messages(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap().len(), 1);
        assert_eq!(
            parse_messages(br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"x"}]"#).unwrap().len(),
            2
        );
        assert!(parse_messages(b"<html>").is_none());
        assert!(parse_messages(br#"{"jsonrpc":"2.0","result":{}}"#).is_none());
    }
}
