//! The streaming machinery both wire formats share: one request (`Call`) sent with retries and
//! read on a fetch thread (kept between calls), its SSE events handed to the format's handler,
//! text handed on to the caller (`Sink`), and a cut stream tried again while nothing reached
//! the caller.

use std::cell::Cell;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gosling_wire::sse;

use crate::error::Error;
use crate::retry;
use crate::settings::Settings;
use crate::types::{Completion, Delta};

/// One request of a completion, as a wire format's `attempt` sends it.
pub(crate) struct Call<'a> {
    pub agent: &'a ureq::Agent,
    pub settings: &'a Settings,
    pub headers: &'a [(&'static str, String)],
    pub body: &'a [u8],
    pub cancelled: &'a dyn Fn() -> bool,
}

impl Call<'_> {
    /// Sends the request and hands each event of the answer to `handle` (see `exchange`).
    pub fn exchange(
        &self,
        handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
        complete_without_marker: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let headers = self.headers.to_vec();
        exchange(
            self.agent,
            self.settings,
            headers,
            self.body.to_vec(),
            self.cancelled,
            handle,
            complete_without_marker,
        )
    }
}

/// Where an attempt's text goes: the caller's `on_delta`, and whether any reached it.
pub(crate) struct Sink<'a> {
    pub on_delta: &'a mut dyn FnMut(Delta) -> bool,
    /// Set once text reached `on_delta`: a cut after that is not retried.
    pub delivered: &'a Cell<bool>,
}

impl Sink<'_> {
    /// Appends streamed text to the completion and hands it to the caller; `Cancelled` when
    /// the caller stopped listening. Empty text is skipped.
    pub fn text(&mut self, out: &mut Completion, t: &str) -> Result<(), Error> {
        if t.is_empty() {
            return Ok(());
        }
        out.text.push_str(t);
        self.delivered.set(true);
        if (self.on_delta)(Delta::Text(t)) {
            Ok(())
        } else {
            Err(Error::Cancelled)
        }
    }
}

/// A blocking agent for one provider: per-read timeout = stall timeout (covers waiting for the
/// headers and silences inside the stream), HTTP errors returned as responses. One agent (one
/// pool of kept-alive connections, `TCP_NODELAY` on each) per pair of timeouts for the whole
/// process: a turn's provider is made for the turn, and a connection per turn would cost every
/// turn a TCP (and TLS) handshake with the model. ureq keeps at most 3 idle connections a host
/// for 15 s and checks one is still open before it reuses it; nothing wakes for them meanwhile.
pub(crate) fn agent_for(s: &Settings) -> ureq::Agent {
    type Agents = Vec<((Duration, Duration), ureq::Agent)>;
    static AGENTS: std::sync::OnceLock<std::sync::Mutex<Agents>> = std::sync::OnceLock::new();
    let key = (s.connect_timeout, s.stall_timeout);
    let mut agents = AGENTS.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, a)) = agents.iter().find(|(k, _)| *k == key) {
        return a.clone();
    }
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(s.connect_timeout))
        .timeout_per_read(Some(s.stall_timeout))
        // Only the stall timeout bounds a healthy stream; a cap of hours stops a trickle.
        .timeout_global(Some(Duration::from_secs(6 * 3600)))
        .max_redirects(0)
        .no_delay(true)
        .build();
    let agent = ureq::Agent::with_parts(config, ureq::unversioned::transport::DefaultConnector::new(), LiteralFirst);
    agents.push((key, agent.clone()));
    agent
}

/// ureq's resolver, without its thread for a host written as an address (`127.0.0.1`,
/// `[::1]`: a local model). ureq resolves the host on every request, on a thread of its own
/// whenever a deadline applies; a name is still resolved that way (a hung DNS server fails the
/// request at its deadline rather than hanging the turn).
#[derive(Debug)]
pub(crate) struct LiteralFirst;

impl ureq::unversioned::resolver::Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        if let Some(addr) = ip_literal(uri) {
            let mut addrs = self.empty();
            addrs.push(addr);
            return Ok(addrs);
        }
        ureq::unversioned::resolver::DefaultResolver::default().resolve(uri, config, timeout)
    }
}

/// The address of an http(s) URI whose host is an IP address; None for a name (or another
/// scheme without a port).
fn ip_literal(uri: &ureq::http::Uri) -> Option<std::net::SocketAddr> {
    let authority = uri.authority()?;
    let ip: std::net::IpAddr = authority.host().trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    let default_port = match uri.scheme_str()? {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some(std::net::SocketAddr::new(ip, authority.port_u16().unwrap_or(default_port)))
}

/// What a wire format's event handler tells `exchange`.
pub(crate) enum Flow {
    Continue,
    /// The stream's own end marker was seen (`[DONE]`, `message_stop`).
    Done,
}

/// Largest SSE line accepted (a single chunk of JSON).
const MAX_LINE: usize = 4 << 20;

/// How often the caller's `cancelled` is polled while the stream is silent.
const POLL: Duration = Duration::from_millis(100);

/// The fetch threads, kept between model calls (a thread started per call cost a `clone` and
/// its stack every turn); one ends after 5 minutes without a call.
static FETCHERS: gosling_util::Workers = gosling_util::Workers::new("llm-fetch", Duration::from_secs(300));

/// What the fetch thread hands to the caller's thread.
enum Msg {
    Bytes(Vec<u8>),
    End,
    Failed(Error),
}

/// Sets the flag when the caller's side stops listening, however it returns — unless the
/// answer came whole (`finished`): then the fetch thread reads on to the end of the body
/// (already there: no wait), which puts the connection back in the agent's pool.
struct Abandon(Arc<AtomicBool>, bool);

impl Abandon {
    fn finished(&mut self) {
        self.1 = true;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// One streamed exchange: POSTs `body` (with retries) and reads the answer on a fetch thread,
/// while this thread decodes SSE, hands each event to `handle` until it says `Done`, and polls
/// `cancelled` whenever the stream is silent. On return the fetch thread is told to stop; it
/// drops the connection at its next read (within the stall timeout at worst).
/// `complete_without_marker` is asked at EOF: true when what arrived is a whole answer even
/// without the end marker (some servers omit it).
fn exchange(
    agent: &ureq::Agent,
    s: &Settings,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    cancelled: &dyn Fn() -> bool,
    handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
    complete_without_marker: &dyn Fn() -> bool,
) -> Result<(), Error> {
    let (tx, rx) = crossbeam_channel::bounded::<Msg>(64);
    let abandoned = Arc::new(AtomicBool::new(false));
    let mut abandon = Abandon(abandoned.clone(), false);
    {
        let (agent, s, abandoned) = (agent.clone(), s.clone(), abandoned.clone());
        FETCHERS
            .run(move || fetch(&agent, &s, &headers, &body, &abandoned, &tx))
            .map_err(|e| Error::Protocol(format!("cannot start the stream reader thread: {e}")))?;
    }
    let mut dec = sse::Decoder::new(MAX_LINE);
    let mut total = 0usize;
    loop {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let bytes = match rx.recv_timeout(POLL) {
            Ok(Msg::Bytes(b)) => b,
            Ok(Msg::Failed(e)) => return Err(e),
            Ok(Msg::End) => break,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(Error::Protocol("the stream reader thread stopped unexpectedly".into()))
            }
        };
        total += bytes.len();
        log::trace!(target: "llm::wire", "{} bytes", bytes.len());
        let events = dec.feed(&bytes).map_err(|e| Error::Protocol(format!("{e} in the {} stream", s.provider)))?;
        for ev in &events {
            if let Flow::Done = handle(ev)? {
                abandon.finished();
                return Ok(());
            }
        }
    }
    // A final event without its blank line still counts, unless it was cut mid-JSON.
    let tail = dec.feed(b"\n\n").map_err(|e| Error::Protocol(e.to_string()))?;
    for ev in tail
        .iter()
        .filter(|ev| ev.data.trim() == "[DONE]" || serde_json::from_str::<serde_json::Value>(&ev.data).is_ok())
    {
        if let Flow::Done = handle(ev)? {
            return Ok(());
        }
    }
    if complete_without_marker() {
        return Ok(());
    }
    Err(Error::StreamCut { after_bytes: total, source: None })
}

/// Runs `attempt` again (up to `max_attempts` in all) when the stream was cut before any text
/// reached the caller — a tool-call-only answer or a cut before the first token — so nothing
/// the caller saw is repeated. A cut after text was delivered is returned as it is.
pub(crate) fn retry_cut_streams(
    s: &Settings,
    cancelled: &dyn Fn() -> bool,
    mut attempt: impl FnMut(&Cell<bool>) -> Result<Completion, Error>,
) -> Result<Completion, Error> {
    let mut n = 1;
    loop {
        let delivered = Cell::new(false);
        match attempt(&delivered) {
            Err(e @ Error::StreamCut { .. }) if !delivered.get() && n < s.max_attempts && !cancelled() => {
                log::warn!(
                    "llm: the {} stream was cut before any text ({e}); retrying (attempt {n} of {})",
                    s.provider,
                    s.max_attempts
                );
                std::thread::sleep(Duration::from_millis(250 * n as u64));
                n += 1;
            }
            r => return r,
        }
    }
}

/// The fetch thread: request, then raw body bytes into `tx` until EOF, an error, or the
/// caller's side going away (the body is then dropped, which closes the connection).
fn fetch(
    agent: &ureq::Agent,
    s: &Settings,
    headers: &[(&'static str, String)],
    body: &[u8],
    abandoned: &AtomicBool,
    tx: &crossbeam_channel::Sender<Msg>,
) {
    let resp = match retry::send(agent, s, headers, body, abandoned) {
        Ok(b) => b,
        Err(e) => {
            let _ = tx.send(Msg::Failed(e));
            return;
        }
    };
    let mut reader = resp.into_with_config().limit(s.max_response_bytes as u64).reader();
    let mut total = 0usize;
    // One read buffer, zeroed once: each read hands over a copy of what it got (a fresh
    // zero-filled 16 KiB buffer per read was about 7% of a turn's CPU in the profile).
    let mut buf = [0u8; 16 * 1024];
    loop {
        if abandoned.load(Ordering::SeqCst) {
            return;
        }
        let msg = match reader.read(&mut buf) {
            Ok(0) => Msg::End,
            Ok(n) => {
                total += n;
                Msg::Bytes(buf[..n].to_vec())
            }
            Err(e) => Msg::Failed(read_error(e, s, total)),
        };
        let last = !matches!(msg, Msg::Bytes(_));
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

fn read_error(e: std::io::Error, s: &Settings, total: usize) -> Error {
    match ureq::Error::from(e) {
        ureq::Error::Timeout(_) => Error::Stalled { after: s.stall_timeout },
        ureq::Error::BodyExceedsLimit(_) => Error::TooLarge { limit: s.max_response_bytes },
        ureq::Error::Io(io)
            if io.kind() == std::io::ErrorKind::TimedOut || io.kind() == std::io::ErrorKind::WouldBlock =>
        {
            Error::Stalled { after: s.stall_timeout }
        }
        other => Error::StreamCut { after_bytes: total, source: Some(Box::new(other)) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address is its own resolution (no thread, no lookup); a name, or a scheme whose port
    /// is not known here, goes to ureq's resolver.
    #[test]
    fn an_address_is_taken_as_it_is_and_a_name_is_resolved() {
        let at = |u: &str| ip_literal(&u.parse::<ureq::http::Uri>().unwrap());
        assert_eq!(at("http://127.0.0.1:8080/v1/chat"), Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(at("http://10.0.0.2"), Some("10.0.0.2:80".parse().unwrap()));
        assert_eq!(at("https://[::1]/v1"), Some("[::1]:443".parse().unwrap()));
        assert_eq!(at("https://[fe80::1]:8443"), Some("[fe80::1]:8443".parse().unwrap()));
        assert_eq!(at("http://localhost:11434"), None);
        assert_eq!(at("https://api.openai.com/v1"), None);
        assert_eq!(at("socks5://127.0.0.1"), None);
    }

    /// The retry of a cut stream is decided on the variant: a `StreamCut` before any text is
    /// tried again, one after text is not, and no other error is, whatever its words.
    #[test]
    fn only_a_stream_cut_before_any_text_is_retried() {
        let mut s = Settings::new("openai", "m", "http://h:1");
        s.max_attempts = 3;
        let cut = || Error::StreamCut { after_bytes: 10, source: None };
        let mut tries = 0;
        let r = retry_cut_streams(&s, &|| false, |_| {
            tries += 1;
            if tries < 3 {
                Err(cut())
            } else {
                Ok(Completion::default())
            }
        });
        assert!(r.is_ok() && tries == 3, "{r:?} after {tries}");
        tries = 0;
        let r = retry_cut_streams(&s, &|| false, |delivered| {
            tries += 1;
            delivered.set(true);
            Err(cut())
        });
        assert!(matches!(r, Err(Error::StreamCut { .. })) && tries == 1, "text was delivered: not retried");
        tries = 0;
        let r = retry_cut_streams(&s, &|| false, |_| {
            tries += 1;
            Err(Error::Protocol("stream ended before completion, in words only".into()))
        });
        assert!(matches!(r, Err(Error::Protocol(_))) && tries == 1, "words decide nothing");
        let e = Error::StreamCut { after_bytes: 3, source: Some(Box::new(ureq::Error::ConnectionFailed)) };
        assert!(std::error::Error::source(&e).is_some(), "the read error is the source");
        assert!(e.to_string().starts_with("llm: stream ended before completion (after 3 bytes): "), "{e}");
    }
}
