//! The transports of an ACP connection. One connection code (`Conn` writing, [`serve`]
//! reading and dispatching, `session::Agent` answering) runs over either:
//!
//! - stdio (`gosling acp`): one JSON-RPC message per line, [`LineWriter`] and [`LineReader`];
//! - a WebSocket (`/acp` on `gosling agent`): one message per text frame; the HTTP side
//!   (`http::websocket`) implements [`Outbound`] and hands messages in through a channel
//!   ([`Inbox`] for `Receiver<Inbound>`), and [`serve_connection`] runs the connection.
//!
//! A transport bounds what it reads: a message over its limit is skipped without being held
//! (only its first bytes are kept, for the request id) and reported as [`Inbound::TooLong`],
//! which the reader loop answers with a JSON-RPC error.

use crate::conn::Conn;
use crate::error::Error;
use crate::{goose, session};
use crossbeam_channel::Receiver;
use gosling_agent::host::Host;
use gosling_util::lock;
use gosling_wire::jsonrpc::{self, ErrorObject, Id, Message};
use serde_json::Value;
use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

/// How much of an over-limit message is kept to find its id.
pub const PEEK: usize = 4096;

pub use crate::conn::Outbound;

/// stdio's outbound: one line per message, flushed.
pub struct LineWriter<W>(Mutex<W>);

impl<W: Write + Send> LineWriter<W> {
    pub fn new(w: W) -> LineWriter<W> {
        LineWriter(Mutex::new(w))
    }
}

impl<W: Write + Send> Outbound for LineWriter<W> {
    fn send(&self, message: String) -> bool {
        let mut out = lock(&self.0);
        let ok = out.write_all(message.as_bytes()).and_then(|_| out.write_all(b"\n")).and_then(|_| out.flush());
        if let Err(e) = &ok {
            log::warn!("acp: cannot write to the client: {e}");
        }
        ok.is_ok()
    }
}

/// One thing a transport read.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// One message's bytes (not yet parsed).
    Message(Vec<u8>),
    /// A message over `limit` bytes was skipped; `id` when its first bytes named one.
    TooLong { id: Option<Id>, limit: u64 },
}

/// Where a connection's messages come from.
pub trait Inbox {
    /// The next message; `Ok(None)` when the peer closed the connection.
    fn next(&mut self) -> io::Result<Option<Inbound>>;
}

/// The WebSocket side: its reader thread sends what it decoded; the end of the channel is
/// the end of the connection.
impl Inbox for Receiver<Inbound> {
    fn next(&mut self) -> io::Result<Option<Inbound>> {
        Ok(self.recv().ok()) // wait: the WebSocket's reader thread
    }
}

/// stdio's inbox: newline-delimited messages of at most `max` bytes each (the newline not
/// counted). A longer line is read through to its end but never held: only its first
/// [`PEEK`] bytes are kept.
pub struct LineReader<R> {
    input: R,
    max: usize,
    line: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(input: R, max: usize) -> LineReader<R> {
        LineReader { input, max, line: Vec::new() }
    }
}

impl<R: BufRead> Inbox for LineReader<R> {
    fn next(&mut self) -> io::Result<Option<Inbound>> {
        self.line.clear();
        let mut over: Option<Vec<u8>> = None;
        let mut any = false;
        loop {
            let avail = match self.input.fill_buf() {
                Ok(b) => b, // wait: the editor's stdin
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                if !any {
                    return Ok(None);
                }
                break; // a last line without its newline
            }
            any = true;
            let (chunk, used, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            match &mut over {
                Some(prefix) => {
                    let keep = PEEK.saturating_sub(prefix.len()).min(chunk.len());
                    prefix.extend_from_slice(&chunk[..keep]);
                }
                None if self.line.len() + chunk.len() > self.max => {
                    let mut prefix = std::mem::take(&mut self.line);
                    prefix.truncate(PEEK);
                    let keep = PEEK.saturating_sub(prefix.len()).min(chunk.len());
                    prefix.extend_from_slice(&chunk[..keep]);
                    prefix.shrink_to_fit();
                    over = Some(prefix);
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.input.consume(used);
            if done {
                break;
            }
        }
        Ok(Some(match over {
            Some(prefix) => Inbound::TooLong { id: jsonrpc::peek_id(&prefix), limit: self.max as u64 },
            None => Inbound::Message(std::mem::take(&mut self.line)),
        }))
    }
}

/// Runs one ACP connection over a transport until its inbox ends: its own `initialize`, client
/// capabilities and pending requests; the sessions it opens live on in `host` (a later
/// connection reopens them with `session/load`). When the peer goes, the prompts this
/// connection started are cancelled (as `session/cancel` would) and requests waiting on it
/// fail; the host and its extensions stay up for the next connection.
pub fn serve_connection(host: Arc<Host>, outbound: Box<dyn Outbound>, mut inbox: impl Inbox) {
    let conn = Arc::new(Conn::with_outbound(outbound));
    let agent = Arc::new(session::Agent::new(host, conn.clone(), goose::call));
    if let Err(e) = serve(&agent, &conn, &mut inbox) {
        log::info!("acp: connection ended: {e}");
    }
    conn.close();
    agent.end_connection();
}

/// Reads messages until the transport ends; every bad message gets an error answer and the
/// loop goes on. The same loop serves stdio and each WebSocket (`transport.rs`).
pub(crate) fn serve(agent: &Arc<session::Agent>, conn: &Arc<Conn>, input: &mut dyn Inbox) -> Result<(), Error> {
    loop {
        // wait: the editor's stdin or the WebSocket's reader; ends when the client goes
        let line = match input.next().map_err(Error::Io)? {
            None => {
                log::info!("acp: the client closed the connection; stopping");
                return Ok(());
            }
            Some(Inbound::TooLong { id, limit }) => {
                log::warn!("acp: skipped a message longer than {limit} bytes (id {id:?})");
                let e = ErrorObject::new(
                    jsonrpc::INVALID_REQUEST,
                    format!("message longer than {limit} bytes; send smaller prompts"),
                );
                conn.send(&Message::Error { id, error: e });
                continue;
            }
            Some(Inbound::Message(m)) => m,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        log::trace!("acp recv: {}", String::from_utf8_lossy(&line));
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            log::warn!("acp: refused a JSON-RPC batch");
            let e = ErrorObject::new(
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC batches are not supported; send one message per line (stdio) or per WebSocket text frame",
            );
            conn.send(&Message::Error { id: None, error: e });
            continue;
        }
        match Message::parse(&line) {
            Ok(m) => conn.receive(m, agent),
            Err(e) => {
                log::warn!("acp: {e}");
                let (code, id) = match &e {
                    gosling_wire::Error::NotJson(_) => (jsonrpc::PARSE_ERROR, None),
                    _ => (jsonrpc::INVALID_REQUEST, id_of(&line)),
                };
                conn.send(&Message::Error { id, error: ErrorObject::new(code, e.to_string()) });
            }
        }
    }
}

/// The id of a message that is JSON but not valid JSON-RPC, when it has a usable one.
fn id_of(line: &[u8]) -> Option<Id> {
    let v: Value = serde_json::from_slice(line).ok()?;
    Id::from_value(v.get("id")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], max: usize) -> Vec<Inbound> {
        let mut r = LineReader::new(io::BufReader::with_capacity(7, input), max);
        let mut out = Vec::new();
        while let Some(m) = r.next().unwrap() {
            out.push(m);
        }
        out
    }

    #[test]
    fn lines_are_split_and_bounded() {
        let got = read_all(b"{\"a\":1}\n\n{\"b\":2}", 64);
        assert_eq!(
            got,
            [
                Inbound::Message(b"{\"a\":1}".to_vec()),
                Inbound::Message(Vec::new()),
                Inbound::Message(b"{\"b\":2}".to_vec())
            ]
        );
        // Exactly the limit is fine; one more byte is too long, and the next line is read.
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"p\":\"{}\"}}", "a".repeat(30));
        let max = line.len();
        let input = format!("{line}\n{line}b\nnext\n");
        let got = read_all(input.as_bytes(), max);
        assert_eq!(got[0], Inbound::Message(line.clone().into_bytes()));
        assert_eq!(got[1], Inbound::TooLong { id: Some(Id::Str("x".into())), limit: max as u64 });
        assert_eq!(got[2], Inbound::Message(b"next".to_vec()));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn an_endless_line_is_not_held() {
        // 200 MiB without a newline through a 64 KiB limit: the reader's buffer stays small.
        struct Endless(u64);
        impl io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Ok(0);
                }
                let n = (buf.len() as u64).min(self.0) as usize;
                buf[..n].fill(b'x');
                self.0 -= n as u64;
                Ok(n)
            }
        }
        let mut r = LineReader::new(io::BufReader::new(Endless(200 << 20)), 64 << 10);
        assert_eq!(r.next().unwrap(), Some(Inbound::TooLong { id: None, limit: 64 << 10 }));
        assert!(r.line.capacity() <= 64 << 10, "held {}", r.line.capacity());
        assert_eq!(r.next().unwrap(), None);
    }
}
