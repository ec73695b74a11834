//! The HTTP front: tiny_http underneath, thread-per-connection.
//!
//! Each request is handled on the thread of the connection it arrived on (the vendored
//! tiny_http's `Server::serve`), with no queue and no other thread in between. At most
//! `max_requests` are handled at once, a slot taken only after the head passed the `Gate` (Host,
//! origin, key): past that a request waits up to `SLOT_WAIT` for a slot,
//! then gets 503 with `Retry-After`; a connection between requests holds no slot,
//! `GET /status` needs none, and a follower stream (`Response::follower`) gives its slot back
//! once its handler has answered. Each handler runs inside `catch_unwind` (a panic is a 500 and the
//! server lives on). Bodies are bounded (413) and sockets have read/write
//! timeouts (vendored tiny_http patch), so a slow or idle client cannot hold a thread forever.
//! Streaming bodies (SSE, a session read as it is sent) are written by us as HTTP/1.1 chunks,
//! flushed frame by frame; `Connection: close` is said exactly when the connection ends after
//! the body (`write_stream`), and a stopping server lets its streams end with their last chunk
//! before it exits (`Server::finish_streams`). An
//! upgraded connection (the WebSocket at `/acp`, `Body::Upgrade`) belongs to its handler after
//! the 101 and holds no request slot.
//! With `tls` (see `gosling_tls`) every connection is a rustls session; the rest is the same.

use crate::error::ApiError;
use gosling_util::lock;
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One request, read in full (body included) before the handler runs. Its head is borrowed
/// from the connection's request (tiny_http's), not copied: a request costs no allocation for
/// its method, path, query or headers (`GET /status`'s instructions, BENCHMARKS.md).
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: &'a str,
    headers: &'a [tiny_http::Header],
    pub body: Vec<u8>,
    /// The client's address (for per-peer limits); `None` when unknown.
    pub peer: Option<SocketAddr>,
}

impl<'a> Request<'a> {
    /// The head of `rq` with `body`.
    fn of(rq: &'a tiny_http::Request, body: Vec<u8>) -> Request<'a> {
        let (path, query) = rq.url().split_once('?').unwrap_or((rq.url(), ""));
        Request {
            method: rq.method().as_str(),
            path,
            query,
            headers: rq.headers(),
            body,
            peer: rq.remote_addr().copied(),
        }
    }

    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.iter().find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
    }

    /// A percent-decoded query parameter (first occurrence).
    pub fn query_param(&self, name: &str) -> Option<String> {
        gosling_wire::percent::form_pairs(self.query).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The body as JSON of type `T`, with goose's statuses: 415 without a JSON content type,
    /// 400 for bad JSON, 422 for JSON of the wrong shape. Messages say what to fix.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        let ct = self.header("content-type").unwrap_or("");
        if !ct.get(..16).is_some_and(|t| t.eq_ignore_ascii_case("application/json")) {
            return Err(ApiError::new(415, "send the body as JSON with `Content-Type: application/json`"));
        }
        // One pass into `T`; only a failure looks again, to tell bad JSON (400) from JSON of
        // the wrong shape (422) even when the shape error comes first.
        serde_json::from_slice(&self.body).map_err(|e| {
            match serde_json::from_slice::<serde::de::IgnoredAny>(&self.body) {
                Err(syntax) => ApiError::bad_request(format!("request body is not valid JSON: {syntax}")),
                Ok(_) => ApiError::new(422, format!("request body does not match the expected shape: {e}")),
            }
        })
    }
}

/// Writes a streaming body; returns when the stream is over or the client is gone.
pub type StreamFn = Box<dyn FnOnce(&mut dyn Write) -> io::Result<()> + Send>;

/// Takes a connection over after its `101 Switching Protocols`: the stream (both directions;
/// under TLS, plaintext) and the socket's descriptor underneath (to poll it and make it
/// non-blocking; never to close). Runs on the connection's thread until the protocol ends.
pub type UpgradeFn = Box<dyn FnOnce(Box<dyn tiny_http::ReadWrite + Send>, Option<i32>) + Send>;

pub enum Body {
    Empty,
    Bytes(Vec<u8>),
    Stream(StreamFn),
    /// A protocol upgrade (the WebSocket at `/acp`): the connection is the function's after
    /// the 101.
    Upgrade(UpgradeFn),
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// A stream that only relays what others do (a session's event stream): its request slot
    /// is given back once the handler has answered, so followers never use up the cap.
    pub follower: bool,
}

impl Response {
    pub fn json(status: u16, value: &Value) -> Response {
        Response::bytes(status, "application/json", value.to_string().into_bytes())
    }
    pub fn text(status: u16, content_type: &str, text: impl Into<String>) -> Response {
        Response::bytes(status, content_type, text.into().into_bytes())
    }
    pub fn bytes(status: u16, content_type: &str, bytes: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: Body::Bytes(bytes),
            follower: false,
        }
    }
    pub fn empty(status: u16) -> Response {
        Response { status, headers: Vec::new(), body: Body::Empty, follower: false }
    }
    pub fn error(e: &ApiError) -> Response {
        Response::json(e.status, &e.body())
    }
    /// An SSE response; `f` writes frames to a writer that flushes each write as a chunk.
    pub fn sse(f: StreamFn) -> Response {
        Response {
            status: 200,
            headers: vec![
                ("Content-Type".into(), "text/event-stream".into()),
                ("Cache-Control".into(), "no-cache".into()),
            ],
            body: Body::Stream(f),
            follower: false,
        }
    }
    /// `101 Switching Protocols` to `protocol` with `headers`; then `f` owns the connection.
    /// Like a follower, it gives its request slot back: a WebSocket open for hours is not a
    /// request in flight.
    pub fn upgrade(headers: Vec<(String, String)>, f: UpgradeFn) -> Response {
        Response { status: 101, headers, body: Body::Upgrade(f), follower: true }
    }
    /// Marks an SSE response as a follower (see `Response::follower`).
    pub fn follower(mut self) -> Response {
        self.follower = true;
        self
    }
    pub fn with_header(mut self, k: &str, v: &str) -> Response {
        self.headers.push((k.into(), v.into()));
        self
    }
}

impl From<Result<Response, ApiError>> for Response {
    fn from(r: Result<Response, ApiError>) -> Response {
        r.unwrap_or_else(|e| Response::error(&e))
    }
}

pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// The answer a request gets from its head alone (the `Request` has an empty body), before a
/// request slot is taken or its body read: a refusal (wrong Host, origin or key), or `None`
/// to go on. A refused request's unread body makes its connection the last.
pub type Gate = dyn Fn(&Request) -> Option<Response> + Send + Sync;

pub struct Limits {
    pub max_requests: usize,
    pub max_body: usize,
    pub io_timeout: Duration,
    /// Open connections at once; past it the connection idle the longest is closed.
    pub max_connections: usize,
}

/// A running server; `stop` closes the listener (connections already open finish their
/// current request).
pub struct Server {
    http: Option<tiny_http::Server>,
    addr: SocketAddr,
    tls: bool,
    streams: Arc<Streams>,
}

impl Server {
    /// Serves HTTP, or HTTPS when `tls` is given.
    pub fn start_with_tls(
        listener: TcpListener,
        limits: Limits,
        tls: Option<&gosling_tls::ServerTls>,
        gate: Arc<Gate>,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        let options = tiny_http::ServeOptions {
            wrapper: tls.map(|t| t.stream_wrapper()),
            read_timeout: Some(limits.io_timeout),
            write_timeout: Some(limits.io_timeout),
            max_connections: Some(limits.max_connections),
            spawn: Some(Arc::new(|job| CONNECTIONS.run(job))),
        };
        let slots = Slots::new(limits.max_requests);
        let open = Slots::new(OPEN_SLOTS);
        let streams = Arc::new(Streams::default());
        let in_flight = streams.clone();
        let serve: tiny_http::RequestHandler = Arc::new(move |rq| {
            // A panic outside the handler's own guard (writing the response) must not take
            // the connection's thread down with it unlogged.
            let pools = (&slots, &open, &*in_flight);
            if panic::catch_unwind(AssertUnwindSafe(|| serve_one(rq, &limits, pools, &*gate, &*handler))).is_err() {
                log::error!("http: serving a request panicked outside its handler");
            }
        });
        let http = tiny_http::Server::serve(listener, options, serve).map_err(io::Error::other)?;
        Ok(Server { http: Some(http), addr, tls: tls.is_some(), streams })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    pub fn stop(&mut self) {
        self.http.take();
    }

    /// Waits up to `within` for the streamed bodies in flight to end (a stopping server's
    /// event streams end at their next ping, with their last chunk; `POST /reply` streams say
    /// the server is stopping), so that the process does not exit under them: a stream cut by
    /// the exit reaches the client without its last chunk (Chromium:
    /// `ERR_INCOMPLETE_CHUNKED_ENCODING`). Returns how many are still open then (logged).
    pub fn finish_streams(&self, within: Duration) -> usize {
        let left = self.streams.wait_ended(within);
        if left > 0 {
            log::warn!(
                "http: {left} streamed response(s) still open {within:?} after shutdown began; \
                 they end with the process, before their last chunk"
            );
        }
        left
    }
}

/// How long a stopping server waits for its streamed bodies to end (`Server::finish_streams`):
/// several of the event streams' ping intervals, at which they look for the shutdown.
pub const STREAMS_FINISH: Duration = Duration::from_secs(3);

/// The streamed bodies being written (`Body::Stream`), so a stopping server can wait for them.
#[derive(Default)]
struct Streams {
    open: Mutex<usize>,
    ended: Condvar,
}

/// One streamed body in flight; dropped once its last chunk is written or it failed.
struct OpenStream<'a>(&'a Streams);

impl Streams {
    fn open(&self) -> OpenStream<'_> {
        *lock(&self.open) += 1;
        OpenStream(self)
    }

    /// Waits up to `within` for no stream to be open; how many still are.
    fn wait_ended(&self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        let mut open = lock(&self.open);
        while *open > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            open = self.ended.wait_timeout(open, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *open
    }
}

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        *lock(&self.0.open) -= 1;
        self.0.ended.notify_all();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long a request waits for a free slot before it is answered 503: long enough to ride
/// out a burst of keep-alive clients (each holds a slot only while its request runs), short
/// enough that a client facing a server full of long streams hears so quickly.
const SLOT_WAIT: Duration = Duration::from_secs(1);

/// The threads connections are served on (tiny_http patch 22), kept between connections: a
/// client that opens a connection per request (`/reply` from a script, Desktop's polls) cost a
/// thread's start and end each time. One ends a minute after its last connection closed.
static CONNECTIONS: gosling_util::Workers = gosling_util::Workers::new("connection", Duration::from_secs(60));

/// The request cap: at most `max` requests are handled at once. A request takes a slot once
/// its head has arrived and passed the `Gate` (so no client without the key holds one) and gives it back once its response is written, on the same thread
/// and before the connection's next request is read, so a connection between requests holds
/// none.
struct Slots {
    max: usize,
    used: AtomicUsize,
    waiting: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
}

struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(max: usize) -> Slots {
        Slots {
            max,
            used: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
        }
    }

    fn try_take(&self) -> bool {
        self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1)).is_ok()
    }

    /// A slot, waiting up to `wait` for one; `None` when the cap stays full that long.
    fn take(&self, wait: Duration) -> Option<Slot<'_>> {
        if self.try_take() {
            return Some(Slot(self));
        }
        let deadline = Instant::now() + wait;
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut guard = lock(&self.lock);
        let got = loop {
            if self.try_take() {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            guard = self.freed.wait_timeout(guard, left).unwrap_or_else(|e| e.into_inner()).0;
        };
        drop(guard);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        got.then(|| Slot(self))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let slots = self.0;
        slots.used.fetch_sub(1, Ordering::SeqCst);
        if slots.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = lock(&slots.lock);
            slots.freed.notify_one();
        }
    }
}

/// Requests with a body on the paths open without the key (`auth::EXEMPT`: `POST /auth/login`,
/// `POST /mcp-app-guest`, …) are read before anything proves the client holds a secret, so
/// they never take one of the `max_requests` slots: they share `OPEN_SLOTS` of their own,
/// wait for one at most `OPEN_SLOT_WAIT`, and their body must come within
/// `OPEN_BODY_GRACE` (then at `MIN_BODY_RATE`). Slow unauthenticated bodies can delay other
/// such requests (a login), never a client with the key.
const OPEN_SLOTS: usize = 4;
const OPEN_SLOT_WAIT: Duration = Duration::from_millis(500);
const OPEN_BODY_GRACE: Duration = Duration::from_secs(2);

/// Whether a request carries a body: a non-zero length or a transfer encoding.
fn has_body(rq: &tiny_http::Request) -> bool {
    rq.body_length().unwrap_or(0) > 0 || rq.headers().iter().any(|h| h.field.equiv("Transfer-Encoding"))
}

fn open_with_body(rq: &tiny_http::Request) -> bool {
    crate::auth::is_exempt(rq.url().split('?').next().unwrap_or("")) && has_body(rq)
}

/// `GET /status` without a body needs no slot, so health checks answer even when the cap is
/// full of long streams or slow uploads.
fn needs_no_slot(rq: &tiny_http::Request) -> bool {
    *rq.method() == tiny_http::Method::Get && rq.url().split('?').next() == Some("/status") && !has_body(rq)
}

/// `GET /status`'s answer: the route (routes.rs) and `serve_one`'s short path both give it.
pub const STATUS_TYPE: &str = "text/plain; charset=utf-8";
pub const STATUS_BODY: &str = "ok";

fn serve_one(
    rq: tiny_http::Request,
    limits: &Limits,
    pools: (&Slots, &Slots, &Streams),
    gate: &Gate,
    handler: &Handler,
) {
    let (slots, open, streams) = pools;
    let head = Request::of(&rq, Vec::new());
    if let Some(resp) = gate(&head) {
        log::debug!("http: {} {} answered from its head: {}", head.method, head.path, resp.status);
        let _ = respond(rq, resp, streams);
        return;
    }
    let mut grace = limits.io_timeout * 2;
    let status = needs_no_slot(&rq);
    // A health check that passed the gate (Host, origin, key) and asks for no CORS headers is
    // answered here, without the body reader, the handler's `Request`/`Response` and the route
    // lookup: the same bytes the route gives (issue 30: `/status` against the do-nothing floor).
    if status && head.header("origin").is_none() {
        const HEADERS: &[tiny_http::StaticHeader] = &[tiny_http::StaticHeader::new("Content-Type", STATUS_TYPE)];
        let answer = tiny_http::Response::new(
            tiny_http::StatusCode(200),
            Vec::new(),
            STATUS_BODY.as_bytes(),
            Some(STATUS_BODY.len()),
            None,
        )
        .with_static_headers(HEADERS);
        let _ = rq.respond(answer);
        return;
    }
    let slot = if status {
        None
    } else if open_with_body(&rq) {
        grace = grace.min(OPEN_BODY_GRACE);
        match open.take(OPEN_SLOT_WAIT) {
            Some(slot) => Some(slot),
            None => {
                log::warn!("http: {OPEN_SLOTS} bodies for routes open without the key in flight; answering 503");
                let e = ApiError::new(
                    503,
                    format!(
                        "server busy: {OPEN_SLOTS} requests without the key are sending their bodies; retry shortly"
                    ),
                );
                let _ = respond(rq, Response::error(&e).with_header("Retry-After", "1"), streams);
                return;
            }
        }
    } else {
        match slots.take(SLOT_WAIT) {
            Some(slot) => Some(slot),
            None => {
                let max = limits.max_requests;
                log::warn!("http: {max} requests in flight (GOSLING_MAX_REQUESTS); answering 503");
                let e = ApiError::new(503, format!("server busy: {max} requests in flight; retry shortly"));
                let _ = respond(rq, Response::error(&e).with_header("Retry-After", "1"), streams);
                return;
            }
        }
    };
    handle(rq, (limits.max_body, grace), handler, slot, streams);
}

/// The slowest a request body may arrive on average once its grace period is over. Per-read
/// socket timeouts alone let a client holding a request slot send one byte just under the
/// timeout, for as long as the body limit allows (days).
const MIN_BODY_RATE: u64 = 1024;

/// A body reader that fails once the body, after `grace`, arrives slower than `MIN_BODY_RATE`.
struct MinRate<R> {
    inner: R,
    started: Instant,
    grace: Duration,
    got: u64,
}

impl<R: Read> Read for MinRate<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let elapsed = self.started.elapsed();
        if let Some(over) = elapsed.checked_sub(self.grace) {
            if (self.got as f64) < MIN_BODY_RATE as f64 * over.as_secs_f64() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the body arrived at under {MIN_BODY_RATE} bytes/s after {:?}", self.grace),
                ));
            }
        }
        let n = self.inner.read(buf)?;
        self.got += n as u64;
        Ok(n)
    }
}

fn handle(
    mut rq: tiny_http::Request,
    (max_body, grace): (usize, Duration),
    handler: &Handler,
    slot: Option<Slot<'_>>,
    streams: &Streams,
) {
    let too_large = |rq| {
        let e = format!("request body is larger than the {max_body}-byte limit (GOSLING_MAX_BODY_BYTES)");
        let _ = respond(rq, Response::error(&ApiError::new(413, e)), streams);
    };
    if rq.body_length().is_some_and(|n| n > max_body) {
        return too_large(rq);
    }
    let mut body = Vec::new();
    // With `Connection: upgrade` tiny_http hands over the raw stream as the "body": what
    // follows the head belongs to the new protocol (a WebSocket's frames), never read here.
    let upgrade = rq
        .headers()
        .iter()
        .any(|h| h.field.equiv("Connection") && h.value.as_str().to_ascii_lowercase().contains("upgrade"));
    let mut reader = MinRate { inner: rq.as_reader(), started: Instant::now(), grace, got: 0 };
    let limit = if upgrade { 0 } else { max_body as u64 + 1 };
    match reader.by_ref().take(limit).read_to_end(&mut body) {
        Ok(_) if body.len() > max_body => return too_large(rq),
        Ok(_) => {}
        Err(e) => {
            log::debug!(
                "http: reading the body of {} {} failed: {e}",
                rq.method(),
                rq.url().split('?').next().unwrap_or("")
            );
            let e = ApiError::new(408, format!("could not read the request body: {e}"));
            let _ = respond(rq, Response::error(&e), streams);
            return;
        }
    }
    let req = Request::of(&rq, body);
    log::debug!("http: {} {}", req.method, req.path);
    let resp = match panic::catch_unwind(AssertUnwindSafe(|| handler(&req))) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::error!("http: handler for {} {} panicked: {what}", req.method, req.path);
            Response::error(&ApiError::internal("internal error: the request handler failed; see the server log"))
        }
    };
    if resp.follower {
        drop(slot);
    }
    // Named for the log only when it is written (the request is the response's after this).
    let what = log::log_enabled!(log::Level::Debug).then(|| format!("{} {}", req.method, req.path));
    drop(req);
    if let Err(e) = respond(rq, resp, streams) {
        log::debug!("http: writing the response to {} failed: {e}", what.unwrap_or_default());
    }
}

/// Whether a response is an event stream (`text/event-stream`).
fn is_event_stream(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.starts_with("text/event-stream"))
}

/// Whether the client said this request is its connection's last (`Connection: close`, or
/// HTTP/1.0 without keep-alive): tiny_http closes the connection after the answer then.
fn client_closes(rq: &tiny_http::Request) -> bool {
    let connection = rq.headers().iter().find(|h| h.field.equiv("Connection")).map(|h| h.value.as_str());
    let connection = connection.map(str::to_ascii_lowercase);
    match connection {
        Some(c) if c.contains("close") => true,
        Some(c) => *rq.http_version() == (1, 0) && !c.contains("keep-alive"),
        None => *rq.http_version() == (1, 0),
    }
}

/// Writes a streamed body as HTTP/1.1 chunks, and says `Connection: close` exactly when the
/// connection ends after it: an event stream (it ends when the server ends it: at shutdown,
/// or when its turn is over) and a client's last request. Any other streamed body is
/// delimited by its last chunk and the connection serves the client's next request. A body
/// that fails part-way (the writer fails, the client is gone, it panics) cannot be finished:
/// its connection is closed without the last chunk, so the client sees the body cut at once
/// (not at the next socket timeout, with a `408` where a chunk should be), and the log says
/// why.
fn write_stream(rq: tiny_http::Request, status: u16, headers: &[(String, String)], f: StreamFn) -> io::Result<()> {
    let end = rq.connection_end();
    let close = is_event_stream(headers) || client_closes(&rq);
    if close {
        end.after_this_response();
    }
    let what = format!("{} {}", rq.method(), rq.url().split('?').next().unwrap_or(""));
    let mut w = rq.into_writer();
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(if close {
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    } else {
        "Transfer-Encoding: chunked\r\n\r\n"
    });
    let body = w.write_all(head.as_bytes()).and_then(|()| w.flush()).and_then(|()| {
        let mut chunked = Chunked(&mut w);
        match panic::catch_unwind(AssertUnwindSafe(|| f(&mut chunked))) {
            Ok(r) => r,
            Err(_) => {
                log::error!("http: the code writing the streamed body of {what} panicked");
                Err(io::Error::other("the code writing it panicked"))
            }
        }
    });
    let ended = body.and_then(|()| w.write_all(b"0\r\n\r\n")).and_then(|()| w.flush());
    if let Err(e) = &ended {
        end.after_this_response();
        let gone = matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
        );
        if gone {
            log::debug!("http: the client of {what} left during its streamed body ({e})");
        } else {
            log::warn!("http: the streamed body of {what} stopped short ({e}); its connection is closed without the last chunk");
        }
    }
    ended
}

fn respond(rq: tiny_http::Request, resp: Response, streams: &Streams) -> io::Result<()> {
    let Response { status, headers, body, .. } = resp;
    match body {
        Body::Stream(f) => {
            let _open = streams.open();
            write_stream(rq, status, &headers, f)
        }
        // A body of known length goes with its Content-Length, never chunked (tiny_http chunks
        // bodies over 32 KiB: an 8 MB session list became 1,024 chunks for the client to undo).
        Body::Bytes(bytes) => rq.respond(with_headers(
            tiny_http::Response::from_data(bytes).with_status_code(status).with_chunked_threshold(usize::MAX),
            &headers,
        )),
        Body::Empty => rq.respond(with_headers(tiny_http::Response::empty(status), &headers)),
        Body::Upgrade(f) => {
            let fd = rq.raw_fd();
            let protocol = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("upgrade")).map(|(_, v)| v.clone());
            let headers: Vec<_> = headers.into_iter().filter(|(k, _)| !k.eq_ignore_ascii_case("upgrade")).collect();
            let stream = rq.upgrade(
                protocol.as_deref().unwrap_or("websocket"),
                with_headers(tiny_http::Response::empty(101), &headers),
            );
            if panic::catch_unwind(AssertUnwindSafe(|| f(stream, fd))).is_err() {
                log::error!("http: an upgraded connection's handler panicked");
            }
            Ok(())
        }
    }
}

fn with_headers<R: Read>(mut r: tiny_http::Response<R>, headers: &[(String, String)]) -> tiny_http::Response<R> {
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            r.add_header(h);
        }
    }
    r
}

/// Each `write` becomes one HTTP/1.1 chunk, flushed at once (SSE frames must not wait).
struct Chunked<'a>(&'a mut Box<dyn Write + Send + 'static>);

impl Write for Chunked<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        write!(self.0, "{:x}\r\n", buf.len())?;
        self.0.write_all(buf)?;
        self.0.write_all(b"\r\n")?;
        self.0.flush()?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cap_wait_and_are_given_back() {
        let slots = Slots::new(2);
        let a = slots.take(Duration::ZERO).unwrap();
        let b = slots.take(Duration::ZERO).unwrap();
        assert!(slots.take(Duration::from_millis(20)).is_none(), "full");
        assert_eq!(slots.used.load(Ordering::SeqCst), 2, "a refused take holds nothing");
        drop(a);
        let c = slots.take(Duration::ZERO).unwrap();
        // A waiter gets the slot as soon as one is given back.
        std::thread::scope(|s| {
            let waiter = s.spawn(|| slots.take(Duration::from_secs(10)).is_some());
            while slots.waiting.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            drop(b);
            assert!(waiter.join().unwrap());
        });
        drop(c);
        assert_eq!(slots.used.load(Ordering::SeqCst), 0);
    }
}
