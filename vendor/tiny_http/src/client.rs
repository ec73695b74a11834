use std::io::Error as IoError;
use std::io::Result as IoResult;
use std::io::{BufRead, BufReader, BufWriter, ErrorKind};

use std::net::SocketAddr;

use crate::common::{HTTPVersion, Method};
use crate::util::RefinedTcpStream;
use crate::util::{SequentialReader, SequentialReaderBuilder, SequentialWriterBuilder};
use crate::Request;

/// A ClientConnection is an object that will store a socket to a client
/// and return Request objects.
pub struct ClientConnection {
    // address of the client
    remote_addr: IoResult<Option<SocketAddr>>,

    // sequence of Readers to the stream, so that the data is not read in
    //  the wrong order
    source: SequentialReaderBuilder<BufReader<RefinedTcpStream>>,

    // sequence of Writers to the stream, to avoid writing response #2 before
    //  response #1
    sink: SequentialWriterBuilder<BufWriter<RefinedTcpStream>>,

    // Reader to read the next header from
    next_header_source: SequentialReader<BufReader<RefinedTcpStream>>,

    // set to true if we know that the previous request is the last one
    no_more_requests: bool,

    // true if the connection goes through SSL
    secure: bool,

    // gosling patch: how long a request head may take from its first byte (slow-loris bound).
    head_deadline: Option<std::time::Duration>,

    // gosling patch: the socket's descriptor, handed to each request (`Request::raw_fd`).
    raw_fd: Option<i32>,

    // gosling patch: set through a request's `Request::connection_end`: no request is read
    // after it, and the connection closes.
    end_after: std::sync::Arc<std::sync::atomic::AtomicBool>,

    // gosling patch: the buffer each head line is read into, kept from one request to the next
    // (PATCHES.md 21).
    line: Vec<u8>,
}

/// Error that can happen when reading a request.
#[derive(Debug)]
enum ReadError {
    /// gosling patch: the request line and headers together exceed `MAX_HEAD_BYTES`.
    HeadTooLarge,
    WrongRequestLine,
    WrongHeader(HTTPVersion),
    /// the client sent an unrecognized `Expect` header
    ExpectationFailed(HTTPVersion),
    ReadIoError(IoError),
    /// gosling patch: a request whose framing is ambiguous (see `request::framing`).
    BadFraming(String),
}

/// gosling patch: a JSON `{"message": ...}` body, the shape of every other error answer.
fn json_message(message: &str) -> String {
    let mut out = String::from("{\"message\":\"");
    for c in message.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push_str("\"}");
    out
}

/// gosling patch: the most bytes a request line plus its headers may take. Upstream read them
/// without any bound, so one connection sending a header line that never ends grew the
/// server's memory without limit.
const MAX_HEAD_BYTES: usize = 64 * 1024;

impl ClientConnection {
    /// Creates a new `ClientConnection` that takes ownership of the `TcpStream`.
    pub fn new(
        write_socket: RefinedTcpStream,
        mut read_socket: RefinedTcpStream,
    ) -> ClientConnection {
        let remote_addr = read_socket.peer_addr();
        let secure = read_socket.secure();
        let raw_fd = read_socket.raw_fd();

        let mut source = SequentialReaderBuilder::new(BufReader::with_capacity(1024, read_socket));
        let first_header = source.next().unwrap();

        ClientConnection {
            source,
            sink: SequentialWriterBuilder::new(BufWriter::with_capacity(1024, write_socket)),
            remote_addr,
            next_header_source: first_header,
            no_more_requests: false,
            secure,
            head_deadline: None,
            raw_fd,
            end_after: Default::default(),
            line: Vec::new(),
        }
    }

    /// gosling patch: a request whose line and headers take longer than `d` from their first
    /// byte gets 408 and the connection is closed. The per-read socket timeout alone lets a
    /// client that sends one byte just under it hold the connection for days.
    pub fn with_head_deadline(mut self, d: Option<std::time::Duration>) -> ClientConnection {
        self.head_deadline = d;
        self
    }

    /// true if the connection is HTTPS
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// Reads the next line from self.next_header_source into `line` (cleared first), without
    /// its `CRLF`. The next read will start at the first byte of the new line.
    /// gosling patch: `budget` is what is left of `MAX_HEAD_BYTES` for the whole head, and
    /// `first_byte` when the head began (for `with_head_deadline`). The line is taken from the
    /// buffered reader a buffer at a time and into one reused `Vec` (PATCHES.md 18); upstream
    /// read it a byte at a time into a new `Vec` grown byte by byte.
    fn read_next_line(
        &mut self,
        line: &mut Vec<u8>,
        budget: &mut usize,
        first_byte: &mut Option<std::time::Instant>,
    ) -> Result<(), ReadError> {
        line.clear();
        loop {
            let available = match self.next_header_source.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::ReadIoError(e)),
            };
            if available.is_empty() {
                return Err(ReadError::ReadIoError(IoError::new(ErrorKind::ConnectionAborted, "Unexpected EOF")));
            }
            let started = *first_byte.get_or_insert_with(std::time::Instant::now);
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if take > *budget {
                return Err(ReadError::HeadTooLarge);
            }
            *budget -= take;
            line.extend_from_slice(&available[..take]);
            self.next_header_source.consume(take);

            // A bare LF does not end a line (as upstream); CRLF does.
            let done = newline.is_some() && line.ends_with(b"\r\n");
            if done {
                line.truncate(line.len() - 2);
            }
            // The clock is read before every further read of the head (a slow client's every
            // byte) and at its end, not per byte nor per line taken from the buffer.
            if (!done || line.is_empty()) && self.head_deadline.is_some_and(|d| started.elapsed() > d) {
                return Err(ReadError::ReadIoError(IoError::new(ErrorKind::TimedOut, "request head too slow")));
            }
            if done {
                if !line.is_ascii() {
                    return Err(ReadError::ReadIoError(IoError::new(ErrorKind::InvalidInput, "Header is not in ASCII")));
                }
                return Ok(());
            }
        }
    }

    /// Reads a request from the stream.
    /// Blocks until the header has been read.
    fn read(&mut self) -> Result<Request, ReadError> {
        let (method, path, version, headers) = {
            let mut budget = MAX_HEAD_BYTES;
            let mut first_byte = None;
            let mut line = std::mem::take(&mut self.line);
            // reading the request line
            let (method, path, version) = {
                self.read_next_line(&mut line, &mut budget, &mut first_byte)?;
                parse_request_line(ascii_str(&line).trim())?
            };

            // getting all headers
            let headers = {
                let mut headers = Vec::with_capacity(16);
                loop {
                    self.read_next_line(&mut line, &mut budget, &mut first_byte)?;

                    if line.is_empty() {
                        break;
                    };
                    headers.push(match parse_header(&line) {
                        Some(h) => h,
                        _ => return Err(ReadError::WrongHeader(version)),
                    });
                }

                headers
            };
            // A line buffer grown by a long header is not kept (the connection stays small).
            if line.capacity() <= 4096 {
                self.line = line;
            }

            (method, path, version, headers)
        };

        // building the writer for the request
        let writer = self.sink.next().unwrap();

        // follow-up for next potential request
        let mut data_source = self.source.next().unwrap();
        std::mem::swap(&mut self.next_header_source, &mut data_source);

        // building the next reader
        let request = crate::request::new_request(
            self.secure,
            method,
            path,
            version.clone(),
            headers,
            *self.remote_addr.as_ref().unwrap(),
            data_source,
            writer,
        )
        .map_err(|e| {
            use crate::request;
            match e {
                request::RequestCreationError::CreationIoError(e) => ReadError::ReadIoError(e),
                request::RequestCreationError::ExpectationFailed => {
                    ReadError::ExpectationFailed(version)
                }
                request::RequestCreationError::BadFraming(m) => ReadError::BadFraming(m),
            }
        })?
        .with_raw_fd(self.raw_fd)
        .with_connection_end(crate::request::ConnectionEnd::for_connection(self.end_after.clone()));

        // return the request
        Ok(request)
    }
}

impl Iterator for ClientConnection {
    type Item = Request;

    /// Blocks until the next Request is available.
    /// Returns None when no new Requests will come from the client.
    fn next(&mut self) -> Option<Request> {
        use crate::{Response, StatusCode};

        // the client sent a "connection: close" header in this previous request
        //  or is using HTTP 1.0, meaning that no new request will come
        if self.no_more_requests {
            return None;
        }
        // gosling patch: or the server made the previous request the last (`connection_end`).
        if self.end_after.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }

        loop {
            let rq = match self.read() {
                Err(ReadError::HeadTooLarge) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(431));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // the rest of the head is unread: close
                }

                Err(ReadError::BadFraming(message)) => {
                    // gosling patch: 400 with the reason, and close: where this request's
                    // body ends (and so where a next request would start) is unknown.
                    let writer = self.sink.next().unwrap();
                    let response = Response::from_string(json_message(&message))
                        .with_status_code(StatusCode(400))
                        .with_header(crate::Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..]).unwrap())
                        .with_header(crate::Header::from_bytes(&b"Connection"[..], &b"close"[..]).unwrap());
                    response.raw_print(writer, HTTPVersion(1, 1), &[], false, None).ok();
                    return None;
                }

                Err(ReadError::WrongRequestLine) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::WrongHeader(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response.raw_print(writer, ver, &[], false, None).ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::ReadIoError(ref err)) if err.kind() == ErrorKind::TimedOut => {
                    // request timeout
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(408));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // closing the connection
                }

                Err(ReadError::ExpectationFailed(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(417));
                    response.raw_print(writer, ver, &[], true, None).ok();
                    return None; // TODO: should be recoverable, but needs handling in case of body
                }

                Err(ReadError::ReadIoError(_)) => return None,

                Ok(rq) => rq,
            };

            // checking HTTP version
            if *rq.http_version() > (1, 1) {
                let writer = self.sink.next().unwrap();
                let response = Response::from_string(
                    "This server only supports HTTP versions 1.0 and 1.1".to_owned(),
                )
                .with_status_code(StatusCode(505));
                response
                    .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                    .ok();
                continue;
            }

            // updating the status of the connection
            let connection_header = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Connection"))
                .map(|h| h.value.as_str());

            let lowercase = connection_header.map(|h| h.to_ascii_lowercase());

            match lowercase {
                Some(ref val) if val.contains("close") => self.no_more_requests = true,
                Some(ref val) if val.contains("upgrade") => self.no_more_requests = true,
                Some(ref val)
                    if !val.contains("keep-alive") && *rq.http_version() == HTTPVersion(1, 0) =>
                {
                    self.no_more_requests = true
                }
                None if *rq.http_version() == HTTPVersion(1, 0) => self.no_more_requests = true,
                _ => (),
            };

            // gosling patch: a body that may be left partly unread (chunked, or larger than
            // EqualReader drains) makes this request the connection's last, so its leftover
            // bytes are never parsed as a next request.
            let chunked = rq.headers().iter().any(|h| h.field.equiv("Transfer-Encoding"));
            if chunked || rq.body_length().is_some_and(|n| n > crate::util::DRAIN_LIMIT) {
                self.no_more_requests = true;
            }

            // returning the request
            return Some(rq);
        }
    }
}

/// gosling patch: a header line (checked ASCII) as `Header::from_str` took it, trimmed: the
/// field up to the first `:` (no whitespace in it), the value after it trimmed; on the bytes,
/// without `str` splitting and Unicode trimming (PATCHES.md 18).
fn parse_header(line: &[u8]) -> Option<crate::Header> {
    // char::is_whitespace on ASCII: TAB, LF, VT, FF, CR, space.
    fn ws(b: &u8) -> bool {
        matches!(b, b'\t'..=b'\r' | b' ')
    }
    fn trim(mut s: &[u8]) -> &[u8] {
        while let [first, rest @ ..] = s {
            if !ws(first) {
                break;
            }
            s = rest;
        }
        while let [rest @ .., last] = s {
            if !ws(last) {
                break;
            }
            s = rest;
        }
        s
    }
    let line = trim(line);
    let colon = line.iter().position(|&b| b == b':')?;
    let (field, value) = (&line[..colon], trim(&line[colon + 1..]));
    if field.iter().any(ws) {
        return None;
    }
    crate::Header::from_bytes(field, value).ok()
}

/// A line `read_next_line` checked to be ASCII, as `&str`.
fn ascii_str(line: &[u8]) -> &str {
    std::str::from_utf8(line).unwrap_or("")
}

/// Parses a "HTTP/1.1" string.
fn parse_http_version(version: &str) -> Result<HTTPVersion, ReadError> {
    let (major, minor) = match version {
        "HTTP/0.9" => (0, 9),
        "HTTP/1.0" => (1, 0),
        "HTTP/1.1" => (1, 1),
        "HTTP/2.0" => (2, 0),
        "HTTP/3.0" => (3, 0),
        _ => return Err(ReadError::WrongRequestLine),
    };

    Ok(HTTPVersion(major, minor))
}

/// Parses the request line of the request.
/// eg. GET / HTTP/1.1
fn parse_request_line(line: &str) -> Result<(Method, String, HTTPVersion), ReadError> {
    let mut parts = line.split(' ');

    let method = parts.next().and_then(|w| w.parse().ok());
    let path = parts.next().map(ToOwned::to_owned);
    let version = parts.next().and_then(|w| parse_http_version(w).ok());

    method
        .and_then(|method| Some((method, path?, version?)))
        .ok_or(ReadError::WrongRequestLine)
}

#[cfg(test)]
mod test {
    #[test]
    fn header_lines_parse_as_header_from_str_did() {
        use std::str::FromStr;
        let lines = [
            "Host: localhost", "host:localhost:8080", "  X-A :  b c  ", "X-A\t: b", "Empty:", ": no name",
            "No colon", "X\x0bY: v", "A: \x0bv\x0b", "A: b:c", "A:\t\tb\t",
        ];
        for l in lines {
            let ours = super::parse_header(l.as_bytes()).map(|h| (h.field.to_string(), h.value.to_string()));
            let upstream = crate::Header::from_str(l.trim()).ok().map(|h| (h.field.to_string(), h.value.to_string()));
            assert_eq!(ours, upstream, "{l:?}");
        }
    }

    #[test]
    fn test_parse_request_line() {
        let (method, path, ver) = super::parse_request_line("GET /hello HTTP/1.1").unwrap();

        assert!(method == crate::Method::Get);
        assert!(path == "/hello");
        assert!(ver == crate::common::HTTPVersion(1, 1));

        assert!(super::parse_request_line("GET /hello").is_err());
        assert!(super::parse_request_line("qsd qsd qsd").is_err());
    }
}
