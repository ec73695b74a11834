//! The streaming machinery both wire formats share: one request (`Call`) sent with retries and
//! read on the caller's own thread, its SSE events handed to the format's handler, text handed
//! on to the caller (`Sink`), and a cut stream tried again while nothing reached the caller.
//!
//! The caller's cancel is asked while the model is silent without a thread of its own: each
//! connection of the model's agent (`Polled`) waits for bytes in slices of `POLL` and asks the
//! cancel of the exchange its thread is in (`Watch`) between them.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::time::{Duration, Instant};

use gosling_wire::sse;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

use crate::error::Error;
use crate::retry;
use crate::settings::Settings;
use crate::types::{Cancel, Completion, Delta};

/// One request of a completion, as a wire format's `attempt` sends it.
pub(crate) struct Call<'a> {
    pub agent: &'a ureq::Agent,
    pub settings: &'a Settings,
    pub headers: &'a [(&'static str, String)],
    pub body: &'a [u8],
    pub cancelled: &'a Cancel,
}

impl Call<'_> {
    /// Sends the request and hands each event of the answer to `handle` (see `exchange`).
    pub fn exchange(
        &self,
        handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
        complete_without_marker: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        exchange(self, handle, complete_without_marker)
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
/// Each connection is `Polled` (the caller's cancel asked while it waits).
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
    let agent = ureq::Agent::with_parts(config, polled_connector(), gosling_util::LiteralFirst);
    agents.push((key, agent.clone()));
    agent
}

/// What a wire format's event handler tells `exchange`.
pub(crate) enum Flow {
    Continue,
    /// The stream's own end marker was seen (`[DONE]`, `message_stop`).
    Done,
}

/// Largest SSE line accepted (a single chunk of JSON).
const MAX_LINE: usize = 4 << 20;

/// How often the caller's cancel is asked while the stream is silent.
const POLL: Duration = Duration::from_millis(100);

thread_local! {
    /// The cancel of the exchange this thread is in, and how long one wait for bytes may be
    /// (`Watch`); asked by `Polled` between its waits.
    static WATCHED: RefCell<Option<(Cancel, Duration)>> = const { RefCell::new(None) };
}

/// This thread's exchange, for the connection's waits (`Polled`) while it lasts; what was
/// watched before comes back when it drops.
struct Watch(Option<(Cancel, Duration)>);

impl Watch {
    /// Waits are cut every `slice` to ask `cancel`.
    fn set(cancel: &Cancel, slice: Duration) -> Watch {
        Watch(WATCHED.with(|w| w.replace(Some((cancel.clone(), slice)))))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHED.with(|w| *w.borrow_mut() = self.0.take());
    }
}

/// The slice of this thread's exchange (`POLL` outside one), and whether its cancel says stop.
fn watched() -> (Duration, bool) {
    WATCHED.with(|w| w.borrow().as_ref().map_or((POLL, false), |(c, slice)| (*slice, c.is_set())))
}

/// ureq's connector chain for the model's agent (as its `DefaultConnector`: a CONNECT proxy
/// when one is configured, TCP, rustls), with each TCP connection `Polled` under its TLS.
fn polled_connector() -> impl Connector<()> {
    use ureq::unversioned::transport::{ConnectProxyConnector, RustlsConnector, TcpConnector};
    ().chain(ConnectProxyConnector::default())
        .chain(TcpConnector::default())
        .chain(PolledConnector)
        .chain(RustlsConnector::default())
}

/// Wraps the connection made so far in `Polled`.
#[derive(Debug)]
struct PolledConnector;

impl<In: Transport> Connector<In> for PolledConnector {
    type Out = Polled<In>;

    fn connect(&self, _: &ConnectionDetails, chained: Option<In>) -> Result<Option<Polled<In>>, ureq::Error> {
        Ok(chained.map(Polled))
    }
}

/// A connection to the model that waits for bytes (the TLS handshake's, the answer's headers,
/// its next chunk) in slices, asking the cancel of its thread's exchange (`Watch`) between
/// them: the call ends within a slice of a cancel, on the caller's own thread (no reader thread
/// per call). It sits under TLS, so a slice that passes without bytes is never seen above it:
/// the read goes on where it was, and its own deadline (the stall timeout) is kept whole.
#[derive(Debug)]
struct Polled<T>(T);

/// The error a cancelled wait ends with (`exchange` reports `Error::Cancelled`).
fn cancelled_wait() -> ureq::Error {
    ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::Interrupted, "the caller cancelled the model call"))
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
        _ => false,
    }
}

impl<T: Transport> Transport for Polled<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.0.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        use ureq::unversioned::transport::time::Duration as Wait;
        let whole = timeout.for_read();
        let started = Instant::now();
        loop {
            let left = match whole.after {
                Wait::Exact(d) => Some(d.saturating_sub(started.elapsed())),
                Wait::NotHappening => None,
            };
            let this = left.map_or(watched().0, |l| l.min(watched().0));
            if this.is_zero() {
                return Err(ureq::Error::Timeout(whole.reason));
            }
            let part = NextTimeout { after: Wait::Exact(this), reason: whole.reason, per_read: None, ..timeout };
            match self.0.await_input(part) {
                // A slice passed without bytes: the caller may have stopped meanwhile.
                Err(e) if is_timeout(&e) && left.is_none_or(|l| l > this) => {
                    if watched().1 {
                        return Err(cancelled_wait());
                    }
                }
                r => return r,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}

/// One streamed exchange on this thread: POSTs the body (with retries), decodes the answer's
/// SSE as it arrives and hands each event to `handle` until it says `Done`; the caller's cancel
/// is asked between chunks and, while the stream is silent, every `POLL` (`Polled`).
/// `complete_without_marker` is asked at EOF: true when what arrived is a whole answer even
/// without the end marker (some servers omit it).
fn exchange(
    call: &Call<'_>,
    handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
    complete_without_marker: &dyn Fn() -> bool,
) -> Result<(), Error> {
    let (s, cancelled) = (call.settings, call.cancelled);
    let _watch = Watch::set(cancelled, POLL);
    let stopped = |e: Error| if cancelled.is_set() { Error::Cancelled } else { e };
    let resp = retry::send(call.agent, s, call.headers, call.body, cancelled).map_err(stopped)?;
    let mut reader = resp.into_with_config().limit(s.max_response_bytes as u64).reader();
    let mut dec = sse::Decoder::new(MAX_LINE);
    let mut total = 0usize;
    // One read buffer, zeroed once per call.
    let mut buf = [0u8; 16 * 1024];
    loop {
        if cancelled.is_set() {
            return Err(Error::Cancelled);
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Err(stopped(read_error(e, s, total))),
        };
        total += n;
        log::trace!(target: "llm::wire", "{n} bytes");
        let events = dec.feed(&buf[..n]).map_err(|e| Error::Protocol(format!("{e} in the {} stream", s.provider)))?;
        for ev in &events {
            if let Flow::Done = handle(ev)? {
                finish(&mut reader);
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

/// After the stream's end marker: reads the rest of the body when it is already there (the
/// chunked body's end, usually in the same packet), which puts the connection back in the
/// agent's pool for the next call; a rest that is not there within a millisecond is not
/// waited for (the connection is closed instead): one wait of 1 ms, then the cancel stops it.
fn finish(reader: &mut impl Read) {
    let _quick = Watch::set(&Cancel::new(|| true), Duration::from_millis(1));
    let mut rest = [0u8; 1024];
    while let Ok(1..) = reader.read(&mut rest) {}
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
