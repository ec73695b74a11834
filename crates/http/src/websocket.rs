//! The WebSocket driver: one upgraded connection's I/O, full duplex over plain TCP and TLS
//! alike, on one thread and without holding any lock across a blocking call.
//!
//! After the 101 the connection's thread (`drive`) owns the stream. It makes the socket
//! non-blocking and waits in `poll(2)` on the socket and on a wake-up pipe: readable → read
//! until the socket would block, decode (`wire::websocket::Decoder`), answer pings, hand text
//! messages to the ACP reader loop through a bounded channel; writable or woken → write queued
//! frames until the socket would block. The TLS stream's one mutex (vendored tiny_http, patch 4)
//! is thus only ever held for a read or write that cannot block.
//!
//! Senders (`Sender`, the ACP connection's `Outbound`, called from any thread) write a frame
//! themselves when nothing is queued or being written (non-blocking, under the socket side's
//! lock; what the socket does not take, the driver finishes), else push whole frames onto a
//! queue bounded in bytes and wake the driver. A full queue blocks its sender —
//! back-pressure from a slow client reaches whoever produces (a `session/load` replay of
//! 10,000 messages waits for the socket, never piles up in memory) — as long as the client
//! keeps reading; if nothing could be written for `stall`, the sender gives up and the
//! connection is closed with 1008 and the reason. No message is dropped silently.
//!
//! Also: an idle connection is pinged and closed (1008) if nothing comes back in time; a
//! client's close is echoed and the TCP connection closed by us (RFC 6455 §7.1.1); a
//! protocol violation is answered with its close code (1002, 1007); a text message over the
//! limit gets a JSON-RPC error for its id when its first bytes name one, else 1009.

use crossbeam_channel::{Sender as ChanSender, TrySendError};
use gosling_acp::transport::{Inbound, Outbound};
use gosling_sys::{poll_fds, set_nonblocking, shutdown_write, Ready};
use gosling_util::lock;
use gosling_wire::websocket::{self as ws, code, Event, Opcode};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One connection's limits and clocks.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest message taken from the client (bytes).
    pub max_message: usize,
    /// Bytes of outgoing frames queued before senders wait.
    pub queue_bytes: usize,
    /// How long senders wait on a full queue without the socket taking a byte before the
    /// connection is given up (1008).
    pub stall: Duration,
    /// Silence from the client after which it is pinged.
    pub ping_idle: Duration,
    /// How long a ping may go unanswered (by anything) before the connection is closed (1008).
    pub pong_wait: Duration,
    /// How long after our close frame we wait for the client's before dropping the socket.
    pub close_wait: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_message: gosling_acp::MAX_LINE,
            queue_bytes: 4 << 20,
            stall: Duration::from_secs(60),
            ping_idle: Duration::from_secs(30),
            pong_wait: Duration::from_secs(30),
            close_wait: Duration::from_secs(5),
        }
    }
}

/// Messages decoded but not yet taken by the ACP reader loop; past it the driver stops
/// reading the socket (TCP flow control reaches the client).
const INBOX: usize = 64;
/// Bytes read from the socket per turn of the loop before writing gets its turn.
const READ_TURN: usize = 256 << 10;
/// How long the client must be quiet, after a violation, before the socket is dropped.
const LINGER: Duration = Duration::from_millis(250);
/// Pongs queued beyond this many bytes replace each other (RFC 6455 §5.5.3 allows answering
/// only the latest ping).
const CONTROL_BYTES: usize = 64 << 10;

/// A whole frame waiting to be written: its head and its payload.
struct Frame {
    head: [u8; 10],
    head_len: usize,
    body: Vec<u8>,
}

impl Frame {
    fn new(opcode: Opcode, body: Vec<u8>) -> Frame {
        let (head, head_len) = ws::header(opcode, true, body.len());
        Frame { head, head_len, body }
    }
    fn len(&self) -> usize {
        self.head_len + self.body.len()
    }
    /// The bytes from `pos` on.
    fn rest(&self, pos: usize) -> &[u8] {
        if pos < self.head_len {
            &self.head[pos..self.head_len]
        } else {
            &self.body[pos - self.head_len..]
        }
    }
}

/// The outgoing queue, shared by the senders and the driver.
struct Queue {
    frames: VecDeque<Frame>,
    bytes: usize,
    /// Set when the connection is being closed from a sender's side (it gave up): the code
    /// and reason the driver sends.
    give_up: Option<(u16, String)>,
    /// No more data frames are taken: a close is under way or the driver has ended.
    shut: bool,
}

/// The socket side: the stream (non-blocking), the frame being written and how much of it is
/// out. Locked only around reads and writes that cannot block, by the driver and by a sender
/// taking the fast path. Lock order: `io`, then `queue`.
struct Io {
    stream: Box<dyn tiny_http::ReadWrite + Send>,
    writing: Option<(Frame, usize)>,
    /// A flush returned WouldBlock (TLS records, the 1 KiB write buffer).
    flush_due: bool,
    /// When output was last written.
    wrote: Instant,
}

impl Io {
    /// Writes the current frame until it is out or the socket would block, then flushes.
    /// `Ok(true)` when nothing is left to write or flush.
    fn write_current(&mut self) -> io::Result<bool> {
        while let Some((frame, pos)) = &mut self.writing {
            match self.stream.write(frame.rest(*pos)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    *pos += n;
                    self.flush_due = true;
                    self.wrote = Instant::now();
                    if *pos == frame.len() {
                        self.writing = None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.flush()
    }

    fn flush(&mut self) -> io::Result<bool> {
        if self.flush_due {
            match self.stream.flush() {
                Ok(()) => self.flush_due = false,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(!self.flush_due)
    }
}

struct Shared {
    io: Mutex<Io>,
    queue: Mutex<Queue>,
    /// Signalled when the driver takes frames off the queue or ends.
    room: Condvar,
    wake_tx: io::PipeWriter,
    limits: Limits,
    id: String,
}

impl Shared {
    fn wake(&self) {
        // A full pipe means the driver is already due to wake: nothing to do.
        let _ = (&self.wake_tx).write(&[1]);
    }
}

/// The sending half: one text frame per message. `Outbound` for the ACP connection.
#[derive(Clone)]
pub struct Sender(Arc<Shared>);

impl Outbound for Sender {
    fn send(&self, message: String) -> bool {
        let s = &self.0;
        let frame = Frame::new(Opcode::Text, message.into_bytes());
        let len = frame.len();
        // The fast path: nothing queued and nothing being written, so this frame is next; write
        // it now, on this thread, without blocking (no hand-off to the driver). What the socket
        // does not take, the driver finishes.
        if let Ok(mut io) = s.io.try_lock() {
            let q = lock(&s.queue);
            if q.shut {
                return false;
            }
            if q.frames.is_empty() && io.writing.is_none() {
                drop(q);
                io.writing = Some((frame, 0));
                let done = io.write_current();
                drop(io);
                if let Err(e) = &done {
                    log::debug!("websocket {}: writing failed: {e}", s.id);
                }
                if !matches!(done, Ok(true)) {
                    s.wake();
                }
                return true;
            }
        }
        let mut q = lock(&s.queue);
        let started = Instant::now();
        loop {
            if q.shut {
                return false;
            }
            if q.bytes == 0 || q.bytes + len <= s.limits.queue_bytes {
                break;
            }
            // The driver gives a client that reads nothing up after `stall`; this is the
            // sender's own safety net should the driver be gone quiet.
            if started.elapsed() >= s.limits.stall + s.limits.close_wait {
                let why = format!(
                    "the client read nothing for {} s with {} bytes waiting to be sent",
                    s.limits.stall.as_secs(),
                    q.bytes
                );
                log::warn!("websocket {}: {why}; closing", s.id);
                q.give_up.get_or_insert((code::POLICY, why));
                q.shut = true;
                drop(q);
                s.wake();
                return false;
            }
            let left =
                (s.limits.stall + s.limits.close_wait).saturating_sub(started.elapsed()).max(Duration::from_millis(1));
            q = s.room.wait_timeout(q, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let was_empty = q.frames.is_empty();
        q.bytes += len;
        q.frames.push_back(frame);
        drop(q);
        if was_empty {
            s.wake();
        }
        true
    }
}

/// Where a connection stands in the close handshake.
#[derive(PartialEq, Debug)]
enum Closing {
    Open,
    /// Our close frame is queued or sent, at this time; waiting for the client's.
    Sent(Instant),
    /// The client's close came in (at this time) and ours, the echo, is queued: end once it
    /// is written, or after the close wait if the client does not take it.
    Echoing(Instant),
}

/// Serves one upgraded connection: spawns the consumer (`serve(inbox, sender)`, the ACP
/// connection) on its own thread and drives the socket on this one until the connection ends.
/// `fd` is the socket under `stream` (plaintext or TLS).
pub fn drive(
    stream: Box<dyn tiny_http::ReadWrite + Send>,
    fd: Option<RawFd>,
    id: &str,
    limits: Limits,
    serve: impl FnOnce(crossbeam_channel::Receiver<Inbound>, Sender) + Send + 'static,
) {
    let Some(fd) = fd else {
        log::error!("websocket {id}: the connection has no socket descriptor; closing");
        return;
    };
    let (wake_rx, wake_tx) = match io::pipe() {
        Ok(p) => p,
        Err(e) => {
            log::error!("websocket {id}: cannot make a wake-up pipe ({e}); closing");
            return;
        }
    };
    for r in [set_nonblocking(&fd), set_nonblocking(&wake_rx), set_nonblocking(&wake_tx)] {
        if let Err(e) = r {
            log::error!("websocket {id}: cannot make the socket non-blocking ({e}); closing");
            return;
        }
    }
    let shared = Arc::new(Shared {
        io: Mutex::new(Io { stream, writing: None, flush_due: false, wrote: Instant::now() }),
        queue: Mutex::new(Queue { frames: VecDeque::new(), bytes: 0, give_up: None, shut: false }),
        room: Condvar::new(),
        wake_tx,
        limits,
        id: id.to_string(),
    });
    let (in_tx, in_rx) = crossbeam_channel::bounded(INBOX);
    let sender = Sender(shared.clone());
    let spawned = std::thread::Builder::new().name("acp-ws".into()).spawn(move || serve(in_rx, sender));
    let mut d = Driver::new(fd, wake_rx, shared.clone(), in_tx);
    if let Err(e) = spawned {
        log::error!("websocket {id}: cannot start its thread ({e}); closing");
        d.close(code::INTERNAL, "the server cannot start a thread for this connection");
    }
    d.run();
    drop(d); // ends the ACP connection's inbox, closes the stream
    let mut q = lock(&shared.queue);
    q.shut = true;
    q.frames.clear();
    q.bytes = 0;
    drop(q);
    shared.room.notify_all();
    log::info!("websocket {id}: closed");
}

struct Driver {
    fd: RawFd,
    wake_rx: io::PipeReader,
    shared: Arc<Shared>,
    /// To the ACP reader loop; `None` once the client can send nothing more that counts.
    inbox: Option<ChanSender<Inbound>>,
    /// Messages decoded while the inbox was full.
    held: VecDeque<Inbound>,
    decoder: ws::Decoder,
    /// The decoder failed (a violation): what still arrives is read and dropped.
    discarding: bool,
    /// A binary message was logged at warn already (later ones at debug).
    binary_seen: bool,
    /// Control frames to send before the next data frame.
    control: VecDeque<Frame>,
    control_bytes: usize,
    closing: Closing,
    /// The client's close frame came in.
    close_seen: bool,
    /// Our write side is shut (after our close frame): the client sees the end.
    wr_shut: bool,
    /// When output became pending after none was (`Io::wrote` says when it last moved).
    pending_since: Instant,
    /// When our write side was shut.
    wr_shut_at: Option<Instant>,
    /// When the client last sent anything; and when our ping went out, if one is unanswered.
    heard: Instant,
    pinged: Option<Instant>,
    /// More may be buffered (in rustls or the read buffer) although poll says nothing.
    read_more: bool,
    eof: bool,
    buf: Vec<u8>,
}

impl Driver {
    fn new(fd: RawFd, wake_rx: io::PipeReader, shared: Arc<Shared>, inbox: ChanSender<Inbound>) -> Driver {
        let max = shared.limits.max_message;
        Driver {
            fd,
            wake_rx,
            shared,
            inbox: Some(inbox),
            held: VecDeque::new(),
            decoder: ws::Decoder::new(max),
            discarding: false,
            binary_seen: false,
            control: VecDeque::new(),
            control_bytes: 0,
            closing: Closing::Open,
            close_seen: false,
            wr_shut: false,
            pending_since: Instant::now(),
            wr_shut_at: None,
            heard: Instant::now(),
            pinged: None,
            read_more: true,
            eof: false,
            buf: vec![0; 64 << 10],
        }
    }

    fn id(&self) -> &str {
        &self.shared.id
    }

    /// Starts the close handshake from our side with `code` and `reason` (once).
    fn close(&mut self, code: u16, reason: &str) {
        if self.closing != Closing::Open {
            return;
        }
        if code != code::NORMAL && code != code::GOING_AWAY {
            log::warn!("websocket {}: closing with {code}: {reason}", self.id());
        }
        self.closing = Closing::Sent(Instant::now());
        self.inbox = None;
        self.shut_queue();
        self.control.push_back(Frame::new(Opcode::Close, ws::close_payload(code, reason)));
    }

    /// Senders get `false` from now on; frames still queued are not sent (a close is under
    /// way: the code and reason say why).
    fn shut_queue(&mut self) {
        let mut q = lock(&self.shared.queue);
        q.shut = true;
        if !q.frames.is_empty() {
            log::info!(
                "websocket {}: {} queued message(s) not sent: the connection is closing",
                self.shared.id,
                q.frames.len()
            );
        }
        q.frames.clear();
        q.bytes = 0;
        drop(q);
        self.shared.room.notify_all();
    }

    fn run(&mut self) {
        loop {
            self.drain_wake();
            // A sender gave up on a client that does not read.
            let give_up = lock(&self.shared.queue).give_up.take();
            if let Some((c, why)) = give_up {
                self.close(c, &why);
            }
            self.deliver_held();
            if self.can_read() {
                if let Err(e) = self.read() {
                    log::debug!("websocket {}: reading failed: {e}", self.id());
                    return;
                }
            }
            if let Err(e) = self.write() {
                log::debug!("websocket {}: writing failed: {e}", self.id());
                return;
            }
            if matches!(self.closing, Closing::Sent(_)) && self.all_out() && !self.wr_shut {
                // Our close frame is out: FIN after it, then read until the client's close or
                // its end, so nothing unread is left to turn our close into a reset.
                if let Err(e) = shutdown_write(self.fd) {
                    log::debug!("websocket {}: shutting down the write side: {e}", self.id());
                }
                self.wr_shut = true;
                self.wr_shut_at = Some(Instant::now());
            }
            if self.finished() {
                return;
            }
            let now = Instant::now();
            let mut next = now + Duration::from_secs(3600);
            // A client that takes none of what is pending for `stall` is given up.
            let pending = !self.all_out() || self.queued();
            if !pending {
                self.pending_since = now;
            } else if self.closing == Closing::Open {
                let (wrote, left) = {
                    let io = lock(&self.shared.io);
                    (io.wrote, io.writing.as_ref().map_or(0, |(f, pos)| f.len() - pos))
                };
                let due = wrote.max(self.pending_since) + self.shared.limits.stall;
                if now >= due {
                    let waiting = lock(&self.shared.queue).bytes;
                    let why = format!(
                        "the client read nothing for {} s with {} bytes waiting to be sent",
                        self.shared.limits.stall.as_secs(),
                        waiting + left
                    );
                    self.close(code::POLICY, &why);
                    continue;
                }
                next = next.min(due);
            }
            // Silence is the client's only while we read and our output is going out.
            if pending || !self.held.is_empty() {
                self.heard = now;
                self.pinged = None;
            }
            if let (true, Some(at)) = (self.discarding, self.wr_shut_at) {
                next = next.min(at.max(self.heard) + LINGER);
            }
            match self.closing {
                Closing::Sent(at) | Closing::Echoing(at) => next = next.min(at + self.shared.limits.close_wait),
                Closing::Open => match self.pinged {
                    Some(at) => {
                        let due = at + self.shared.limits.pong_wait;
                        if now >= due {
                            let secs = self.shared.limits.pong_wait.as_secs();
                            self.close(code::POLICY, &format!("no answer to a ping within {secs} s"));
                            continue;
                        }
                        next = next.min(due);
                    }
                    None => {
                        let due = self.heard + self.shared.limits.ping_idle;
                        if now >= due {
                            self.pinged = Some(now);
                            self.push_control(Frame::new(Opcode::Ping, b"gosling".to_vec()));
                            continue;
                        }
                        next = next.min(due);
                    }
                },
            }
            if let Closing::Sent(at) | Closing::Echoing(at) = self.closing {
                if now >= at + self.shared.limits.close_wait {
                    log::debug!("websocket {}: the close handshake did not finish in time", self.id());
                    return;
                }
            }
            let mut wait = next.saturating_duration_since(now);
            if self.read_more && self.can_read() {
                wait = Duration::ZERO;
            } else if !self.held.is_empty() {
                wait = wait.min(Duration::from_millis(5)); // the reader loop is busy: look again soon
            }
            let want_write = !self.all_out() || self.queued();
            let read_fd = if self.can_read() { self.fd } else { -1 };
            let write_fd = if want_write { self.fd } else { -1 };
            // wait: bounded by the next ping, pong or close deadline
            poll_fds(
                [(read_fd, Ready::Read), (write_fd, Ready::Write), (self.wake_rx.as_raw_fd(), Ready::Read)],
                Some(wait),
            );
        }
    }

    fn queued(&self) -> bool {
        !lock(&self.shared.queue).frames.is_empty()
    }

    fn all_out(&self) -> bool {
        let io = lock(&self.shared.io);
        io.writing.is_none() && !io.flush_due && self.control.is_empty()
    }

    /// Done: our close is out and the client's came in (or it hung up), or the client's close
    /// was echoed, or the client is gone.
    fn finished(&self) -> bool {
        match self.closing {
            Closing::Echoing(_) => self.all_out(),
            // After a violation the client's close cannot be told from the rest: what it
            // still sends is drained until it has been quiet a moment (no reset over our close).
            Closing::Sent(_) if self.discarding => {
                self.eof || self.wr_shut_at.is_some_and(|at| at.max(self.heard).elapsed() >= LINGER)
            }
            Closing::Sent(_) => self.wr_shut && (self.close_seen || self.eof),
            Closing::Open => self.eof,
        }
    }

    fn can_read(&self) -> bool {
        !self.eof && !self.close_seen && self.held.is_empty() && !matches!(self.closing, Closing::Echoing(_))
    }

    fn drain_wake(&mut self) {
        let mut b = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut b), Ok(n) if n > 0) {}
    }

    /// Hands held messages to the reader loop as it makes room.
    fn deliver_held(&mut self) {
        while let Some(m) = self.held.pop_front() {
            let Some(tx) = &self.inbox else {
                self.held.clear();
                return;
            };
            match tx.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Full(m)) => {
                    self.held.push_front(m);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => {
                    // The ACP connection ended on its own (it failed): say so rather than
                    // take messages nobody will answer.
                    self.held.clear();
                    self.close(code::INTERNAL, "the server's ACP connection ended; reconnect");
                    return;
                }
            }
        }
    }

    fn read(&mut self) -> io::Result<()> {
        let mut got = 0;
        self.read_more = false;
        while self.can_read() {
            if got >= READ_TURN {
                self.read_more = true;
                return Ok(());
            }
            let r = lock(&self.shared.io).stream.read(&mut self.buf);
            let n = match r {
                Ok(0) => {
                    self.eof = true;
                    if self.closing == Closing::Open {
                        log::debug!("websocket {}: the client hung up without a close frame", self.id());
                    }
                    return Ok(());
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            got += n;
            self.heard = Instant::now();
            self.pinged = None;
            if self.discarding {
                continue;
            }
            let mut events = Vec::new();
            let fed = self.decoder.feed(&self.buf[..n], &mut events);
            for ev in events {
                // A ping's pong goes out before the answer to any message after it (a client
                // may time its pings against our replies), unless the socket is full.
                if matches!(ev, Event::Text(_)) && !self.control.is_empty() {
                    self.write()?;
                }
                self.event(ev);
            }
            if let Err(v) = fed {
                self.discarding = true;
                self.close(v.code, &v.reason);
            }
        }
        Ok(())
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Text(t) => self.hand_on(Inbound::Message(t.into_bytes())),
            Event::Binary(n) => {
                let level = if self.binary_seen { log::Level::Debug } else { log::Level::Warn };
                self.binary_seen = true;
                log::log!(
                    level,
                    "websocket {}: ignored a binary message of {n} bytes (ACP speaks text frames)",
                    self.id()
                );
            }
            Event::Ping(p) => {
                if self.closing == Closing::Open {
                    self.push_control(Frame::new(Opcode::Pong, p));
                }
            }
            Event::Pong(_) => {}
            Event::Close(c, reason) => {
                log::debug!("websocket {}: the client closed with {c:?} {reason:?}", self.id());
                self.inbox = None;
                match self.closing {
                    Closing::Open => {
                        self.closing = Closing::Echoing(Instant::now());
                        self.shut_queue();
                        let payload = c.map(|c| ws::close_payload(c, "")).unwrap_or_default();
                        self.control.push_back(Frame::new(Opcode::Close, payload));
                    }
                    // Our close was answered: the handshake is complete.
                    Closing::Sent(_) => self.close_seen = true,
                    Closing::Echoing(_) => {}
                }
            }
            Event::TooBig { prefix, len } => {
                let limit = self.shared.limits.max_message;
                match gosling_wire::jsonrpc::peek_id(&prefix) {
                    Some(id) => {
                        log::warn!("websocket {}: a message of at least {len} bytes is over the {limit}-byte limit; answering its id {id}", self.id());
                        self.hand_on(Inbound::TooLong { id: Some(id), limit: limit as u64 });
                    }
                    None => {
                        // The rest of the message is not read: the client's close may be in it.
                        self.discarding = true;
                        self.close(
                            code::TOO_BIG,
                            &format!("a message of at least {len} bytes is over the {limit}-byte limit, and names no id to answer"),
                        )
                    }
                }
            }
        }
    }

    fn hand_on(&mut self, m: Inbound) {
        if self.inbox.is_none() {
            return;
        }
        self.held.push_back(m);
        self.deliver_held();
    }

    fn push_control(&mut self, f: Frame) {
        let is_pong = f.head[0] & 0x0F == Opcode::Pong.bits();
        if is_pong && self.control_bytes > CONTROL_BYTES {
            if let Some(last) = self.control.iter_mut().rev().find(|f| f.head[0] & 0x0F == Opcode::Pong.bits()) {
                *last = f;
                return;
            }
        }
        self.control_bytes += f.len();
        self.control.push_back(f);
    }

    /// The next frame to write: control frames first, then data from the queue.
    fn next_frame(&mut self) -> Option<Frame> {
        if let Some(f) = self.control.pop_front() {
            self.control_bytes = self.control_bytes.saturating_sub(f.len());
            return Some(f);
        }
        if self.closing != Closing::Open {
            return None;
        }
        let mut q = lock(&self.shared.queue);
        let f = q.frames.pop_front()?;
        q.bytes -= f.len();
        drop(q);
        self.shared.room.notify_one();
        Some(f)
    }

    /// Writes what is pending — the frame in progress, control frames, queued frames, in that
    /// order — until the socket would block.
    fn write(&mut self) -> io::Result<()> {
        let shared = self.shared.clone();
        let mut io = lock(&shared.io);
        loop {
            if io.writing.is_none() {
                match self.next_frame() {
                    Some(f) => io.writing = Some((f, 0)),
                    None => break,
                }
            }
            io.write_current()?;
            if io.writing.is_some() {
                return Ok(()); // the socket is full
            }
        }
        io.flush().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rest_walks_head_then_body() {
        let f = Frame::new(Opcode::Text, b"hello".to_vec());
        assert_eq!(f.len(), 7);
        assert_eq!(f.rest(0), &[0x81, 0x05]);
        assert_eq!(f.rest(1), &[0x05]);
        assert_eq!(f.rest(2), b"hello");
        assert_eq!(f.rest(4), b"llo");
    }
}
