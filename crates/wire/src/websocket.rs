//! RFC 6455 WebSocket, server side, as a pure codec: the opening handshake's checks and
//! `Sec-WebSocket-Accept`, an incremental frame decoder and the frame encoder. No I/O: the
//! driver (`http::websocket`) owns the socket and feeds bytes in as they arrive.
//!
//! The decoder takes any split of the input (one byte at a time or a megabyte at once) and
//! enforces what a server must of client frames: every frame masked, no RSV bits (no extension
//! is ever negotiated), no reserved opcodes, control frames of at most 125 bytes and never
//! fragmented (but allowed between the fragments of a message), continuation frames only
//! inside a fragmented message, text that is UTF-8 (checked as the fragments arrive, so a bad
//! sequence fails at once), close frames with a valid code and a UTF-8 reason. Each violation
//! is a [`Violation`] carrying the close code to answer with (1002, 1007). A text message over
//! the size limit is never held whole: its first [`PEEK`] bytes are kept (for the JSON-RPC id),
//! the rest is skipped, and it is reported as [`Event::TooBig`]. Binary messages are counted
//! and dropped (ACP has none).

use crate::Error;

/// The GUID of RFC 6455 §1.3, appended to the client's key.
pub const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The only protocol version (RFC 6455 §4.1, `Sec-WebSocket-Version`).
pub const VERSION: &str = "13";
/// How much of an over-limit text message is kept, for its JSON-RPC id.
pub const PEEK: usize = 4096;
/// The largest control-frame payload (RFC 6455 §5.5).
pub const MAX_CONTROL: usize = 125;

/// Close codes (RFC 6455 §7.4.1).
pub mod code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const PROTOCOL: u16 = 1002;
    pub const UNSUPPORTED: u16 = 1003;
    pub const NO_STATUS: u16 = 1005;
    pub const INVALID_DATA: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
    pub const INTERNAL: u16 = 1011;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Opcode> {
        Some(match b {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }
    pub fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }
    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

// ---------------------------------------------------------------------------------------------
// The opening handshake

// Why an upgrade request is refused: `Error::NotGet` … `Error::Key` (answered 400 with the
// message).

/// Whether `value` (a comma-separated header list) holds `token`, case-insensitively.
pub fn has_token(value: &str, token: &str) -> bool {
    value.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// True when the request asks for a WebSocket at all (`Upgrade: websocket`): such a request
/// gets [`check_upgrade`]'s verdict, others are ordinary HTTP.
pub fn wants_upgrade(header: &dyn Fn(&str) -> Option<String>) -> bool {
    header("upgrade").is_some_and(|u| has_token(&u, "websocket"))
}

/// Checks an upgrade request (RFC 6455 §4.2.1) and returns the `Sec-WebSocket-Accept` value.
/// `header` looks a header up by lower-case name.
pub fn check_upgrade(method: &str, header: &dyn Fn(&str) -> Option<String>) -> Result<String, Error> {
    if method != "GET" {
        return Err(Error::NotGet);
    }
    if !wants_upgrade(header) {
        return Err(Error::NoUpgrade);
    }
    if !header("connection").is_some_and(|c| has_token(&c, "upgrade")) {
        return Err(Error::NoConnectionUpgrade);
    }
    match header("sec-websocket-version") {
        Some(v) if v.trim() == VERSION => {}
        other => return Err(Error::Version(other)),
    }
    let key = header("sec-websocket-key").ok_or(Error::Key(None))?;
    let key = key.trim();
    let decoded = gosling_util::base64_decode(key).filter(|k| k.len() == 16 && key.len() == 24 && key.ends_with("=="));
    if decoded.is_none() {
        return Err(Error::Key(Some(key.chars().take(64).collect())));
    }
    Ok(accept_key(key))
}

/// `Sec-WebSocket-Accept`: base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2). SHA-1 is what the RFC
/// fixes here; it proves nothing beyond "this server read the handshake".
pub fn accept_key(key: &str) -> String {
    let mut input = Vec::with_capacity(key.len() + GUID.len());
    input.extend_from_slice(key.as_bytes());
    input.extend_from_slice(GUID.as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
    gosling_util::base64_encode(digest.as_ref(), false)
}

// ---------------------------------------------------------------------------------------------
// The encoder (server frames: never masked)

/// The header of an unmasked frame with `len` payload bytes: the buffer and how much of it.
pub fn header(opcode: Opcode, fin: bool, len: usize) -> ([u8; 10], usize) {
    let mut h = [0u8; 10];
    h[0] = opcode.bits() | if fin { 0x80 } else { 0 };
    let n = if len < 126 {
        h[1] = len as u8;
        2
    } else if len <= 0xFFFF {
        h[1] = 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        h[1] = 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (h, n)
}

/// One whole unmasked frame.
pub fn encode(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
    let (h, n) = header(opcode, true, payload.len());
    let mut out = Vec::with_capacity(n + payload.len());
    out.extend_from_slice(&h[..n]);
    out.extend_from_slice(payload);
    out
}

/// A close frame's payload: the code, then the reason cut to fit 125 bytes at a char boundary.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_CONTROL - 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(&reason.as_bytes()[..end]);
    p
}

/// A masked (client) frame, for tests and benchmarks that play the client.
pub fn client_frame(fin: bool, opcode: Opcode, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let (h, n) = header(opcode, fin, payload.len());
    let mut out = Vec::with_capacity(n + 4 + payload.len());
    out.extend_from_slice(&h[..n]);
    out[1] |= 0x80;
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask, 0);
    out
}

/// XORs `data` with `mask`, `data[0]` being payload byte `offset` (RFC 6455 §5.3). Eight
/// bytes at a time.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let mut m = [0u8; 8];
    for (i, b) in m.iter_mut().enumerate() {
        *b = mask[(offset + i) % 4];
    }
    let word = u64::from_ne_bytes(m);
    let mut chunks = data.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= m[i];
    }
}

// ---------------------------------------------------------------------------------------------
// The decoder

/// What a client sent, one whole message or control frame at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A complete text message (valid UTF-8).
    Text(String),
    /// A complete binary message, dropped: its length.
    Binary(u64),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The client's close frame: its code (none if the frame was empty) and reason.
    Close(Option<u16>, String),
    /// A text message over the limit, skipped: its first bytes (at most [`PEEK`]) and how
    /// long it was known to be when they were reported (at least the limit + 1).
    TooBig {
        prefix: Vec<u8>,
        len: u64,
    },
}

/// A client frame that breaks RFC 6455: close the connection with `code` and `reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub code: u16,
    pub reason: String,
}

fn protocol(reason: impl Into<String>) -> Violation {
    Violation { code: code::PROTOCOL, reason: reason.into() }
}

/// Close codes a peer may send (RFC 6455 §7.4; 1012–1014 from the IANA registry).
pub fn close_code_allowed(c: u16) -> bool {
    matches!(c, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

struct Frame {
    fin: bool,
    opcode: Opcode,
    mask: [u8; 4],
    /// Payload bytes still to come.
    left: u64,
    /// Payload bytes already seen (the mask's phase).
    seen: u64,
}

/// The data message being assembled.
#[derive(Default)]
struct Msg {
    /// `Some` between a message's first frame and its last.
    opcode: Option<Opcode>,
    buf: Vec<u8>,
    /// Length so far, kept or not.
    len: u64,
    /// How much of `buf` is known to be valid UTF-8.
    checked: usize,
    /// Over the limit: only the prefix is kept; `reported` once `TooBig` went out.
    over: bool,
    reported: bool,
}

/// The incremental frame decoder of one connection.
pub struct Decoder {
    max_message: usize,
    head: [u8; 14],
    head_len: usize,
    frame: Option<Frame>,
    control: Vec<u8>,
    msg: Msg,
    failed: bool,
}

impl Decoder {
    /// A decoder for messages of at most `max_message` bytes.
    pub fn new(max_message: usize) -> Decoder {
        Decoder {
            max_message,
            head: [0; 14],
            head_len: 0,
            frame: None,
            control: Vec::new(),
            msg: Msg::default(),
            failed: false,
        }
    }

    /// True between the frames of a fragmented message, or inside a frame.
    pub fn mid_message(&self) -> bool {
        self.msg.opcode.is_some() || self.frame.is_some() || self.head_len > 0
    }

    /// Decodes `data`, appending whole messages and control frames to `out` in order. After a
    /// violation the decoder refuses everything.
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<Event>) -> Result<(), Violation> {
        if self.failed {
            return Err(protocol("the connection already failed"));
        }
        let r = (|| {
            while !data.is_empty() {
                if self.frame.is_none() {
                    data = self.read_head(data)?;
                    if self.frame.is_none() {
                        continue; // the head is still incomplete (then `data` is empty)
                    }
                    self.frame_started(out)?;
                    continue;
                }
                data = self.read_payload(data, out)?;
            }
            // A frame with an empty payload ends as soon as its head is complete.
            if self.frame.as_ref().is_some_and(|f| f.left == 0) {
                self.frame_ended(out)?;
            }
            Ok(())
        })();
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Collects the frame head; once complete, checks it and starts the frame.
    fn read_head<'a>(&mut self, mut data: &'a [u8]) -> Result<&'a [u8], Violation> {
        while self.head_len < 2 && !data.is_empty() {
            self.head[self.head_len] = data[0];
            self.head_len += 1;
            data = &data[1..];
        }
        if self.head_len < 2 {
            return Ok(data);
        }
        let (b0, b1) = (self.head[0], self.head[1]);
        if b0 & 0x70 != 0 {
            return Err(protocol("RSV bits set, but no extension was negotiated"));
        }
        let opcode =
            Opcode::from_bits(b0 & 0x0F).ok_or_else(|| protocol(format!("reserved opcode {:#x}", b0 & 0x0F)))?;
        let fin = b0 & 0x80 != 0;
        if b1 & 0x80 == 0 {
            return Err(protocol("a client frame must be masked (RFC 6455 §5.1)"));
        }
        let len7 = b1 & 0x7F;
        if opcode.is_control() {
            if !fin {
                return Err(protocol("a control frame must not be fragmented"));
            }
            if len7 as usize > MAX_CONTROL {
                return Err(protocol("a control frame's payload must be at most 125 bytes"));
            }
        } else {
            match (opcode, self.msg.opcode) {
                (Opcode::Continuation, None) => {
                    return Err(protocol("a continuation frame outside a fragmented message"))
                }
                (Opcode::Text | Opcode::Binary, Some(_)) => {
                    return Err(protocol("a new message started inside a fragmented message"))
                }
                _ => {}
            }
        }
        let need =
            2 + match len7 {
                126 => 2,
                127 => 8,
                _ => 0,
            } + 4;
        let take = (need - self.head_len).min(data.len());
        self.head[self.head_len..self.head_len + take].copy_from_slice(&data[..take]);
        self.head_len += take;
        data = &data[take..];
        if self.head_len < need {
            return Ok(data);
        }
        let len = match len7 {
            126 => u16::from_be_bytes([self.head[2], self.head[3]]) as u64,
            127 => {
                let l = u64::from_be_bytes(self.head[2..10].try_into().unwrap_or([0; 8]));
                if l >> 63 != 0 {
                    return Err(protocol("a 64-bit payload length with its most significant bit set"));
                }
                l
            }
            n => n as u64,
        };
        let mask = [self.head[need - 4], self.head[need - 3], self.head[need - 2], self.head[need - 1]];
        self.head_len = 0;
        self.frame = Some(Frame { fin, opcode, mask, left: len, seen: 0 });
        Ok(data)
    }

    /// A data frame's head is in: account for its length against the limit.
    fn frame_started(&mut self, out: &mut Vec<Event>) -> Result<(), Violation> {
        let Some(f) = &self.frame else { return Ok(()) };
        if f.opcode.is_control() {
            self.control.clear();
            return Ok(());
        }
        if f.opcode != Opcode::Continuation {
            self.msg = Msg { opcode: Some(f.opcode), ..Msg::default() };
        }
        let total = self.msg.len.saturating_add(f.left);
        if self.msg.opcode == Some(Opcode::Text) && !self.msg.over && total > self.max_message as u64 {
            self.msg.over = true;
            self.msg.buf.truncate(PEEK);
            self.msg.buf.shrink_to(PEEK);
            if self.msg.buf.len() >= PEEK {
                self.report_too_big(total, out);
            }
        }
        Ok(())
    }

    fn report_too_big(&mut self, len: u64, out: &mut Vec<Event>) {
        if !self.msg.reported {
            self.msg.reported = true;
            out.push(Event::TooBig {
                prefix: std::mem::take(&mut self.msg.buf),
                len: len.max(self.max_message as u64 + 1),
            });
        }
    }

    fn read_payload<'a>(&mut self, data: &'a [u8], out: &mut Vec<Event>) -> Result<&'a [u8], Violation> {
        let Some(f) = self.frame.as_mut() else { return Ok(data) };
        let n = (f.left.min(data.len() as u64)) as usize;
        let (chunk, rest) = data.split_at(n);
        let (mask, phase) = (f.mask, (f.seen % 4) as usize);
        f.left -= n as u64;
        f.seen += n as u64;
        let (opcode, left) = (f.opcode, f.left);
        if opcode.is_control() {
            let start = self.control.len();
            self.control.extend_from_slice(chunk);
            apply_mask(&mut self.control[start..], mask, phase);
        } else {
            self.msg.len += n as u64;
            match self.msg.opcode {
                Some(Opcode::Text) if !self.msg.over => {
                    let start = self.msg.buf.len();
                    self.msg.buf.extend_from_slice(chunk);
                    apply_mask(&mut self.msg.buf[start..], mask, phase);
                    self.check_utf8(false)?;
                }
                Some(Opcode::Text) if !self.msg.reported => {
                    let keep = (PEEK - self.msg.buf.len()).min(chunk.len());
                    let start = self.msg.buf.len();
                    self.msg.buf.extend_from_slice(&chunk[..keep]);
                    apply_mask(&mut self.msg.buf[start..], mask, phase);
                    if self.msg.buf.len() >= PEEK {
                        self.report_too_big(self.msg.len.saturating_add(left), out);
                    }
                }
                _ => {} // skipped: binary, or the rest of an over-limit text message
            }
        }
        if self.frame.as_ref().is_some_and(|f| f.left == 0) {
            self.frame_ended(out)?;
        }
        Ok(rest)
    }

    /// Checks the new part of a text message; `last` when the message is complete.
    fn check_utf8(&mut self, last: bool) -> Result<(), Violation> {
        let buf = &self.msg.buf[self.msg.checked..];
        match std::str::from_utf8(buf) {
            Ok(_) => self.msg.checked = self.msg.buf.len(),
            Err(e) => {
                if e.error_len().is_some() || last {
                    return Err(Violation {
                        code: code::INVALID_DATA,
                        reason: "a text message is not valid UTF-8".into(),
                    });
                }
                // An incomplete sequence at the end: the next fragment may finish it.
                self.msg.checked += e.valid_up_to();
            }
        }
        Ok(())
    }

    fn frame_ended(&mut self, out: &mut Vec<Event>) -> Result<(), Violation> {
        let Some(f) = self.frame.take() else { return Ok(()) };
        match f.opcode {
            Opcode::Ping => out.push(Event::Ping(std::mem::take(&mut self.control))),
            Opcode::Pong => out.push(Event::Pong(std::mem::take(&mut self.control))),
            Opcode::Close => out.push(close_event(&self.control)?),
            _ if !f.fin => {}
            _ => {
                let msg = std::mem::take(&mut self.msg);
                match msg.opcode {
                    Some(Opcode::Text) if msg.over => {
                        if !msg.reported {
                            out.push(Event::TooBig { prefix: msg.buf, len: msg.len.max(self.max_message as u64 + 1) });
                        }
                    }
                    Some(Opcode::Text) => {
                        self.msg = msg;
                        self.check_utf8(true)?;
                        let buf = std::mem::take(&mut self.msg).buf;
                        let text = String::from_utf8(buf).map_err(|_| Violation {
                            code: code::INVALID_DATA,
                            reason: "a text message is not valid UTF-8".into(),
                        })?;
                        out.push(Event::Text(text));
                    }
                    _ => out.push(Event::Binary(msg.len)),
                }
            }
        }
        Ok(())
    }
}

fn close_event(p: &[u8]) -> Result<Event, Violation> {
    match p.len() {
        0 => Ok(Event::Close(None, String::new())),
        1 => Err(protocol("a close frame with a one-byte payload")),
        _ => {
            let c = u16::from_be_bytes([p[0], p[1]]);
            if !close_code_allowed(c) {
                return Err(protocol(format!("close code {c} is not one a peer may send")));
            }
            let reason = std::str::from_utf8(&p[2..]).map_err(|_| Violation {
                code: code::INVALID_DATA,
                reason: "a close reason is not valid UTF-8".into(),
            })?;
            Ok(Event::Close(Some(c), reason.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

    fn decode_all(max: usize, bytes: &[u8]) -> Result<Vec<Event>, Violation> {
        let mut d = Decoder::new(max);
        let mut out = Vec::new();
        d.feed(bytes, &mut out)?;
        Ok(out)
    }

    /// Every split of `bytes` into two parts, and one byte at a time, decodes the same.
    fn decode_split(max: usize, bytes: &[u8]) -> Result<Vec<Event>, Violation> {
        let whole = decode_all(max, bytes);
        for cut in 0..=bytes.len() {
            let mut d = Decoder::new(max);
            let mut out = Vec::new();
            let r = d.feed(&bytes[..cut], &mut out).and_then(|()| d.feed(&bytes[cut..], &mut out));
            assert_eq!(r.map(|()| out), whole, "split at {cut}");
        }
        let mut d = Decoder::new(max);
        let mut out = Vec::new();
        let r = bytes.iter().try_for_each(|b| d.feed(std::slice::from_ref(b), &mut out));
        assert_eq!(r.map(|()| out), whole, "byte by byte");
        whole
    }

    #[test]
    fn rfc6455_1_3_handshake_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        let h = |name: &str| -> Option<String> {
            match name {
                "upgrade" => Some("websocket".into()),
                "connection" => Some("keep-alive, Upgrade".into()),
                "sec-websocket-version" => Some("13".into()),
                "sec-websocket-key" => Some("dGhlIHNhbXBsZSBub25jZQ==".into()),
                _ => None,
            }
        };
        assert_eq!(check_upgrade("GET", &h).unwrap(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(check_upgrade("POST", &h), Err(Error::NotGet));
        let without = |skip: &'static str, value: Option<&'static str>| {
            move |name: &str| if name == skip { value.map(String::from) } else { h(name) }
        };
        assert_eq!(
            check_upgrade("GET", &without("sec-websocket-version", Some("8"))),
            Err(Error::Version(Some("8".into())))
        );
        assert_eq!(check_upgrade("GET", &without("sec-websocket-version", None)), Err(Error::Version(None)));
        assert_eq!(check_upgrade("GET", &without("sec-websocket-key", None)), Err(Error::Key(None)));
        assert!(matches!(
            check_upgrade("GET", &without("sec-websocket-key", Some("c2hvcnQ="))),
            Err(Error::Key(Some(_)))
        ));
        assert_eq!(check_upgrade("GET", &without("connection", Some("keep-alive"))), Err(Error::NoConnectionUpgrade));
        assert_eq!(check_upgrade("GET", &without("upgrade", Some("h2c"))), Err(Error::NoUpgrade));
        assert!(check_upgrade("GET", &without("upgrade", Some("WebSocket"))).is_ok(), "case-insensitive");
    }

    #[test]
    fn rfc6455_5_7_examples_encode_byte_exact() {
        // A single-frame unmasked text message.
        assert_eq!(encode(Opcode::Text, b"Hello"), [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        // An unmasked Ping request.
        assert_eq!(encode(Opcode::Ping, b"Hello"), [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        // 256 bytes of binary data in a single unmasked frame.
        let big = encode(Opcode::Binary, &[0u8; 256]);
        assert_eq!(big[..4], [0x82, 0x7E, 0x01, 0x00]);
        assert_eq!(big.len(), 4 + 256);
        // 64 KiB of binary data in a single unmasked frame.
        let huge = encode(Opcode::Binary, &vec![0u8; 65536]);
        assert_eq!(huge[..10], [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]);
        assert_eq!(huge.len(), 10 + 65536);
        // The masked examples, as a client encodes them.
        let masked_hello = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        assert_eq!(client_frame(true, Opcode::Text, b"Hello", MASK), masked_hello);
        let masked_pong = [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        assert_eq!(client_frame(true, Opcode::Pong, b"Hello", MASK), masked_pong);
    }

    #[test]
    fn rfc6455_5_7_examples_decode_under_any_split() {
        let masked_hello = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        assert_eq!(decode_split(1 << 20, &masked_hello).unwrap(), [Event::Text("Hello".into())]);
        let masked_pong = [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        assert_eq!(decode_split(1 << 20, &masked_pong).unwrap(), [Event::Pong(b"Hello".to_vec())]);
        // The fragmented "Hel" + "lo" (masked, as a client must), a ping between the fragments.
        let mut b = client_frame(false, Opcode::Text, b"Hel", MASK);
        b.extend(client_frame(true, Opcode::Ping, b"p", [1, 2, 3, 4]));
        b.extend(client_frame(true, Opcode::Continuation, b"lo", [9, 8, 7, 6]));
        assert_eq!(decode_split(1 << 20, &b).unwrap(), [Event::Ping(b"p".to_vec()), Event::Text("Hello".into())]);
        // 16- and 64-bit lengths.
        let text: String = "é".repeat(40_000); // 80,000 bytes: a 64-bit length
        let f = client_frame(true, Opcode::Text, text.as_bytes(), MASK);
        assert_eq!(f[1], 0x80 | 127);
        assert_eq!(decode_all(1 << 20, &f).unwrap(), [Event::Text(text)]);
        let f = client_frame(true, Opcode::Binary, &[7u8; 300], MASK);
        assert_eq!(f[1], 0x80 | 126);
        assert_eq!(decode_split(1 << 20, &f).unwrap(), [Event::Binary(300)]);
        // Empty frames.
        let mut b = client_frame(true, Opcode::Text, b"", MASK);
        b.extend(client_frame(true, Opcode::Ping, b"", MASK));
        b.extend(client_frame(true, Opcode::Close, b"", MASK));
        assert_eq!(
            decode_split(16, &b).unwrap(),
            [Event::Text(String::new()), Event::Ping(Vec::new()), Event::Close(None, String::new())]
        );
    }

    #[test]
    fn utf8_split_across_fragments_is_fine_but_bad_utf8_fails_fast() {
        let s = "añb€c😀".as_bytes();
        for cut in 1..s.len() {
            let mut b = client_frame(false, Opcode::Text, &s[..cut], MASK);
            b.extend(client_frame(true, Opcode::Continuation, &s[cut..], MASK));
            assert_eq!(decode_all(64, &b).unwrap(), [Event::Text("añb€c😀".into())], "cut {cut}");
        }
        // An invalid byte fails on its fragment, before the message ends.
        let b = client_frame(false, Opcode::Text, b"ok \xff", MASK);
        assert_eq!(decode_all(64, &b).unwrap_err().code, code::INVALID_DATA);
        // A sequence left incomplete at the end of the message fails.
        let b = client_frame(true, Opcode::Text, b"ok \xe2\x82", MASK);
        assert_eq!(decode_all(64, &b).unwrap_err().code, code::INVALID_DATA);
        // Surrogates and overlong forms are not UTF-8.
        for bad in [&b"\xed\xa0\x80"[..], b"\xc0\xaf", b"\xf4\x90\x80\x80"] {
            assert_eq!(
                decode_all(64, &client_frame(true, Opcode::Text, bad, MASK)).unwrap_err().code,
                code::INVALID_DATA
            );
        }
    }

    #[test]
    fn violations_carry_their_close_codes() {
        let cases: Vec<(&str, Vec<u8>, u16)> = vec![
            ("unmasked", encode(Opcode::Text, b"hi"), code::PROTOCOL),
            (
                "rsv1",
                {
                    let mut f = client_frame(true, Opcode::Text, b"hi", MASK);
                    f[0] |= 0x40;
                    f
                },
                code::PROTOCOL,
            ),
            (
                "rsv3",
                {
                    let mut f = client_frame(true, Opcode::Text, b"hi", MASK);
                    f[0] |= 0x10;
                    f
                },
                code::PROTOCOL,
            ),
            (
                "opcode 3",
                {
                    let mut f = client_frame(true, Opcode::Text, b"hi", MASK);
                    f[0] = 0x83;
                    f
                },
                code::PROTOCOL,
            ),
            (
                "opcode 0xB",
                {
                    let mut f = client_frame(true, Opcode::Ping, b"", MASK);
                    f[0] = 0x8B;
                    f
                },
                code::PROTOCOL,
            ),
            ("fragmented ping", client_frame(false, Opcode::Ping, b"x", MASK), code::PROTOCOL),
            ("126-byte ping", client_frame(true, Opcode::Ping, &[0; 126], MASK), code::PROTOCOL),
            ("lone continuation", client_frame(true, Opcode::Continuation, b"x", MASK), code::PROTOCOL),
            (
                "text inside text",
                {
                    let mut f = client_frame(false, Opcode::Text, b"a", MASK);
                    f.extend(client_frame(true, Opcode::Text, b"b", MASK));
                    f
                },
                code::PROTOCOL,
            ),
            ("one-byte close", client_frame(true, Opcode::Close, &[3], MASK), code::PROTOCOL),
            ("close 1005", client_frame(true, Opcode::Close, &close_payload(1005, ""), MASK), code::PROTOCOL),
            ("close 999", client_frame(true, Opcode::Close, &close_payload(999, ""), MASK), code::PROTOCOL),
            ("close 2000", client_frame(true, Opcode::Close, &close_payload(2000, ""), MASK), code::PROTOCOL),
            ("close reason", client_frame(true, Opcode::Close, &[0x03, 0xe8, 0xff], MASK), code::INVALID_DATA),
            (
                "msb length",
                {
                    let mut f = vec![0x81, 0xFF];
                    f.extend(u64::MAX.to_be_bytes());
                    f.extend(MASK);
                    f
                },
                code::PROTOCOL,
            ),
        ];
        for (name, bytes, want) in cases {
            let got = decode_split(1 << 20, &bytes).expect_err(name);
            assert_eq!(got.code, want, "{name}: {}", got.reason);
            // And a poisoned decoder stays failed.
            let mut d = Decoder::new(1 << 20);
            let mut out = Vec::new();
            assert!(d.feed(&bytes, &mut out).is_err());
            assert!(d.feed(&client_frame(true, Opcode::Text, b"ok", MASK), &mut out).is_err(), "{name}");
        }
        for c in [1000, 1001, 1003, 1007, 1011, 3000, 4999] {
            let f = client_frame(true, Opcode::Close, &close_payload(c, "bye"), MASK);
            assert_eq!(decode_all(16, &f).unwrap(), [Event::Close(Some(c), "bye".into())]);
        }
    }

    #[test]
    fn over_the_limit_keeps_only_a_prefix() {
        let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":\"{}\"}}", "a".repeat(10_000));
        // One frame over the limit.
        let f = client_frame(true, Opcode::Text, body.as_bytes(), MASK);
        let ev = decode_split(1000, &f).unwrap();
        match &ev[..] {
            [Event::TooBig { prefix, len }] => {
                assert_eq!(prefix.len(), PEEK);
                assert_eq!(&prefix[..], &body.as_bytes()[..PEEK]);
                assert_eq!(*len, body.len() as u64);
            }
            other => panic!("{other:?}"),
        }
        // Fragments that grow over it; the next message decodes normally.
        let mut b = Vec::new();
        for part in body.as_bytes().chunks(900).enumerate() {
            let (i, chunk) = part;
            let op = if i == 0 { Opcode::Text } else { Opcode::Continuation };
            b.extend(client_frame((i + 1) * 900 >= body.len(), op, chunk, MASK));
        }
        b.extend(client_frame(true, Opcode::Text, b"after", MASK));
        let ev = decode_all(1000, &b).unwrap();
        assert!(matches!(&ev[0], Event::TooBig { prefix, .. } if prefix.len() == PEEK), "{:?}", &ev[0]);
        assert_eq!(ev[1], Event::Text("after".into()));
        assert_eq!(ev.len(), 2);
        // A small over-limit message: the whole of it is the prefix.
        let ev = decode_all(4, &client_frame(true, Opcode::Text, b"hello", MASK)).unwrap();
        assert_eq!(ev, [Event::TooBig { prefix: b"hello".to_vec(), len: 5 }]);
        // A declared 2^40-byte frame is reported once the prefix is in, long before its end.
        let mut f = vec![0x81, 0xFF];
        f.extend((1u64 << 40).to_be_bytes());
        f.extend(MASK);
        let mut payload = body.as_bytes()[..PEEK].to_vec();
        apply_mask(&mut payload, MASK, 0);
        f.extend(payload);
        let ev = decode_all(1 << 20, &f).unwrap();
        assert!(matches!(&ev[..], [Event::TooBig { len, .. }] if *len == 1 << 40), "{ev:?}");
        // Binary messages are counted, never kept.
        assert_eq!(
            decode_all(4, &client_frame(true, Opcode::Binary, &[1; 5000], MASK)).unwrap(),
            [Event::Binary(5000)]
        );
    }

    #[test]
    fn close_reason_is_cut_at_a_char_boundary() {
        let p = close_payload(1009, &"é".repeat(100));
        assert!(p.len() <= MAX_CONTROL);
        assert!(std::str::from_utf8(&p[2..]).is_ok());
        assert_eq!(u16::from_be_bytes([p[0], p[1]]), 1009);
    }

    #[test]
    fn masking_matches_the_bytewise_definition_at_every_phase() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for phase in 0..4 {
            let mut fast = data.clone();
            apply_mask(&mut fast, MASK, phase);
            let slow: Vec<u8> = data.iter().enumerate().map(|(i, b)| b ^ MASK[(i + phase) % 4]).collect();
            assert_eq!(fast, slow, "phase {phase}");
        }
    }
}
