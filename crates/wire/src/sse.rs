//! Server-Sent Events: an incremental decoder (for MCP Streamable HTTP and LLM streams) and
//! the encoder for our own `/reply` frames.
//!
//! Pure: bytes in, events out. Follows the WHATWG event-stream parsing rules: lines end in
//! `\n`, `\r\n` or `\r`; `:` starts a comment; `data` lines join with `\n`; a blank line
//! dispatches; an event with no data is not dispatched. Chunks may split anywhere, including
//! between `\r` and `\n` and inside a UTF-8 sequence. A line longer than `max_line` is an error
//! rather than unbounded growth.

use crate::Error;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field; empty means the default type "message".
    pub event: String,
    pub data: String,
    /// The last `id:` seen on this stream so far (the spec's "last event ID buffer").
    pub id: Option<String>,
}

#[derive(Debug)]
pub struct Decoder {
    max_line: usize,
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a leading `\n` in the next chunk belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    /// The last valid `retry:` value in milliseconds.
    pub retry_ms: Option<u64>,
    /// No line has been processed yet: a UTF-8 byte order mark there is dropped.
    first_line: bool,
}

impl Decoder {
    pub fn new(max_line: usize) -> Decoder {
        Decoder {
            max_line,
            line: Vec::new(),
            after_cr: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            last_id: None,
            retry_ms: None,
            first_line: true,
        }
    }

    /// The id to send as `Last-Event-ID` when resuming.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Feeds a chunk; returns the events completed by it, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, Error> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest.first() == Some(&b'\n') {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_bytes(&rest[..pos])?;
            let was_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if was_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(ev) = self.process_line(&line) {
                out.push(ev);
            }
        }
        self.push_bytes(rest)?;
        Ok(out)
    }

    /// End of stream: an unterminated final event is dropped, as the spec says. The decoder
    /// may then read a reconnected stream (the last event id and `retry` carry over).
    pub fn finish(&mut self) {
        self.line.clear();
        self.after_cr = false;
        self.first_line = true;
        self.reset_event();
    }

    fn push_bytes(&mut self, b: &[u8]) -> Result<(), Error> {
        if self.line.len() + self.data.len() + b.len() > self.max_line {
            self.line.clear();
            self.reset_event();
            return Err(Error::LineTooLong { limit: self.max_line });
        }
        self.line.extend_from_slice(b);
        Ok(())
    }

    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }

    fn process_line(&mut self, line: &[u8]) -> Option<Event> {
        let line = if std::mem::take(&mut self.first_line) {
            line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
        } else {
            line
        };
        if line.is_empty() {
            if !self.has_data {
                self.reset_event();
                return None;
            }
            let ev = Event {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
                id: self.last_id.clone(),
            };
            self.has_data = false;
            return Some(ev);
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok()
            }
            _ => {}
        }
        None
    }
}

/// Encodes one `data:` frame. `data` must not contain newlines (compact JSON never does);
/// any that slip through become extra `data:` lines, which decoders join back with `\n`.
pub fn encode_data(data: &str) -> String {
    let mut s = String::with_capacity(data.len() + 8);
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Vec<Event> {
        let mut d = Decoder::new(1 << 20);
        d.feed(input).unwrap()
    }

    #[test]
    fn basic_fields() {
        let evs = all(b"event: message\nid: 7\ndata: {\"a\":1}\n\n: comment\ndata:x\ndata: y\n\n");
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0], Event { event: "message".into(), data: "{\"a\":1}".into(), id: Some("7".into()) });
        assert_eq!(evs[1].data, "x\ny");
        assert_eq!(evs[1].id.as_deref(), Some("7"), "last event id persists");
    }

    #[test]
    fn an_event_of_many_short_data_lines_is_bounded_in_total() {
        let mut d = Decoder::new(1000);
        let line = format!("data: {}\n", "x".repeat(90));
        let mut err = None;
        for _ in 0..20 {
            if let Err(e) = d.feed(line.as_bytes()) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(Error::LineTooLong { limit: 1000 }), "ten lines of 96 bytes fit, twenty do not");
        assert!(d.data.is_empty(), "nothing of the refused event is kept");
        // Events under the limit still pass, one after another.
        let ok = format!("data: {}\n\n", "y".repeat(900));
        assert_eq!(d.feed(ok.repeat(3).as_bytes()).unwrap().len(), 3);
    }

    #[test]
    fn crlf_and_cr_endings() {
        assert_eq!(
            all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n").iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn empty_data_is_dispatched_but_no_data_is_not() {
        let evs = all(b"data\n\nevent: x\n\nid: 3\n\ndata:\n\n");
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].data, "");
        assert_eq!(evs[1].id.as_deref(), Some("3"));
        assert_eq!(evs[1].event, "", "event type of a non-dispatched event is reset");
    }

    #[test]
    fn retry_is_recorded() {
        let mut d = Decoder::new(100);
        d.feed(b"retry: 1500\n\nretry: x\n\n").unwrap();
        assert_eq!(d.retry_ms, Some(1500));
    }

    #[test]
    fn any_split_gives_the_same_events() {
        let input = "id: 1\r\nevent: e\r\ndata: h\u{e9}llo\r\ndata: w\r\n\r\n:c\rdata: z\r\r".as_bytes();
        let whole = all(input);
        assert_eq!(whole.len(), 2);
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let mut d = Decoder::new(1 << 10);
                let mut evs = d.feed(&input[..i]).unwrap();
                evs.extend(d.feed(&input[i..j]).unwrap());
                evs.extend(d.feed(&input[j..]).unwrap());
                assert_eq!(evs, whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn unterminated_event_is_dropped_at_end() {
        let mut d = Decoder::new(100);
        assert!(d.feed(b"data: partial").unwrap().is_empty());
        d.finish();
        assert!(d.feed(b"\n\n").unwrap().is_empty());
    }

    #[test]
    fn leading_byte_order_mark_is_ignored() {
        let input = b"\xEF\xBB\xBFdata: a\n\ndata: \xEF\xBB\xBFb\n\n";
        for i in 0..=4 {
            let mut d = Decoder::new(100);
            let mut evs = d.feed(&input[..i]).unwrap();
            evs.extend(d.feed(&input[i..]).unwrap());
            assert_eq!(evs.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(), ["a", "\u{feff}b"], "split at {i}");
        }
    }

    #[test]
    fn long_line_is_an_error() {
        let mut d = Decoder::new(8);
        assert_eq!(d.feed(b"data: 0123456789"), Err(Error::LineTooLong { limit: 8 }));
    }

    #[test]
    fn encode_frames() {
        assert_eq!(encode_data("{\"type\":\"Ping\"}"), "data: {\"type\":\"Ping\"}\n\n");
        assert_eq!(all(encode_data("a\nb").as_bytes())[0].data, "a\nb");
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use gosling_util::XorShift;

    #[test]
    fn ten_thousand_streams_never_panic_and_any_chunking_agrees() {
        let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
        let seed = b"event: message\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: x\ndata: y\n\nretry: 1500\n\n\xEF\xBB\xBFdata: z\r\r";
        for _ in 0..10_000 {
            let mut b = seed.to_vec();
            for _ in 0..rng.below(5) {
                let at = rng.below(b.len());
                match rng.below(3) {
                    0 => b[at] = b"\r\n:data \xff"[rng.below(9)],
                    1 => {
                        b.remove(at);
                    }
                    _ => b.insert(at, rng.next_u64() as u8),
                }
            }
            let mut whole = Decoder::new(256);
            let want = whole.feed(&b);
            let mut d = Decoder::new(256);
            let mut got = Vec::new();
            let mut rest = &b[..];
            let mut failed = false;
            while !rest.is_empty() {
                let n = 1 + rng.below(rest.len().min(17));
                match d.feed(&rest[..n]) {
                    Ok(evs) => got.extend(evs),
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
                rest = &rest[n..];
            }
            if let (Ok(w), false) = (want, failed) {
                assert_eq!(got, w, "chunking changed the events of {:?}", String::from_utf8_lossy(&b));
            }
        }
    }
}
