//! gosling patch: HTTP/1.1 chunked transfer coding (RFC 9112 §7.1), in place of the
//! `chunked_transfer` crate. The decoder is bounded: a size line or trailer line longer than
//! `MAX_LINE`, trailers beyond `MAX_TRAILERS`, a size that overflows or is not hex, or a chunk
//! not followed by CRLF is an `InvalidData` error, never an unbounded buffer.

use std::io::{self, Read, Write};

/// The longest chunk-size line (with extensions) or trailer line accepted.
const MAX_LINE: usize = 4096;
/// The most bytes of trailer fields accepted after the last chunk.
const MAX_TRAILERS: usize = 16 * 1024;
/// The size of the chunks the encoder writes (it buffers up to this much).
const CHUNK: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After the last chunk: trailer lines up to an empty one.
    Done,
}

/// Decodes a chunked body from `source`, reading nothing past its end.
pub struct Decoder<R> {
    source: R,
    state: State,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed chunked body: {}", what))
}

impl<R: Read> Decoder<R> {
    pub fn new(source: R) -> Decoder<R> {
        Decoder { source, state: State::Size }
    }

    fn byte(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        loop {
            return match self.source.read(&mut b) {
                Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the chunked body ended early")),
                Ok(_) => Ok(b[0]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
        }
    }

    /// One CRLF-terminated line, without the CRLF; at most `max` bytes.
    fn line(&mut self, max: usize) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let b = self.byte()?;
            if b == b'\r' {
                return if self.byte()? == b'\n' { Ok(line) } else { Err(invalid("CR without LF")) };
            }
            if line.len() == max {
                return Err(invalid("line too long"));
            }
            line.push(b);
        }
    }

    fn read_size(&mut self) -> io::Result<u64> {
        let line = self.line(MAX_LINE)?;
        let digits = line.split(|&b| b == b';').next().unwrap_or(&[]);
        let digits = trim(digits);
        if digits.is_empty() || digits.len() > 16 {
            return Err(invalid("bad chunk size"));
        }
        let mut size: u64 = 0;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(|| invalid("chunk size is not hex"))?;
            size = size.checked_mul(16).and_then(|s| s.checked_add(v as u64)).ok_or_else(|| invalid("chunk size overflows"))?;
        }
        Ok(size)
    }

    fn skip_trailers(&mut self) -> io::Result<()> {
        let mut total = 0;
        loop {
            let line = self.line(MAX_LINE)?;
            if line.is_empty() {
                return Ok(());
            }
            total += line.len() + 2;
            if total > MAX_TRAILERS {
                return Err(invalid("trailers too long"));
            }
        }
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Size => {
                    let size = self.read_size()?;
                    if size == 0 {
                        self.skip_trailers()?;
                        self.state = State::Done;
                    } else {
                        self.state = State::Data(size);
                    }
                }
                State::Data(left) => {
                    let want = (buf.len() as u64).min(left) as usize;
                    let n = self.source.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the chunked body ended early"));
                    }
                    let left = left - n as u64;
                    if left == 0 {
                        if self.byte()? != b'\r' || self.byte()? != b'\n' {
                            return Err(invalid("chunk data not followed by CRLF"));
                        }
                        self.state = State::Size;
                    } else {
                        self.state = State::Data(left);
                    }
                    return Ok(n);
                }
            }
        }
    }
}

/// Encodes what is written into chunks of up to `CHUNK` bytes; `finish` (or drop, ignoring
/// errors) writes what is buffered and the last chunk.
pub struct Encoder<W: Write> {
    sink: W,
    buf: Vec<u8>,
    finished: bool,
}

impl<W: Write> Encoder<W> {
    pub fn new(sink: W) -> Encoder<W> {
        Encoder { sink, buf: Vec::with_capacity(CHUNK), finished: false }
    }

    fn send_chunk(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        write!(self.sink, "{:x}\r\n", self.buf.len())?;
        self.sink.write_all(&self.buf)?;
        self.sink.write_all(b"\r\n")?;
        self.buf.clear();
        Ok(())
    }

    /// Writes the buffered data and the terminating zero-size chunk.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        self.send_chunk()?;
        self.sink.write_all(b"0\r\n\r\n")
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send_chunk()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_chunk()?;
        self.sink.flush()
    }
}

impl<W: Write> Drop for Encoder<W> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Decoder::new(input).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn decodes_chunks_extensions_and_trailers() {
        assert_eq!(decode(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").unwrap(), b"hello world");
        assert_eq!(decode(b"3;name=value\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n").unwrap(), b"abc");
        assert_eq!(decode(b"A \r\n0123456789\r\n0\r\n\r\n").unwrap(), b"0123456789");
        assert_eq!(decode(b"0\r\n\r\n").unwrap(), b"");
    }

    #[test]
    fn reads_nothing_past_the_end() {
        let input = b"2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        let mut source = &input[..];
        let mut out = Vec::new();
        Decoder::new(&mut source).read_to_end(&mut out).unwrap();
        assert_eq!(out, b"hi");
        assert_eq!(source, b"GET / HTTP/1.1\r\n");
    }

    #[test]
    fn refuses_malformed_and_unbounded_input() {
        for bad in [
            &b"zz\r\nhello\r\n0\r\n\r\n"[..],
            b"\r\n",
            b"5\r\nhelloXX0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"10000000000000000\r\n",
            b"fffffffffffffffff\r\n",
            b"-5\r\nhello\r\n0\r\n\r\n",
        ] {
            let e = decode(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{:?}: {}", String::from_utf8_lossy(bad), e);
        }
        let long_line = [b'1'; MAX_LINE + 10];
        assert_eq!(decode(&long_line).unwrap_err().kind(), io::ErrorKind::InvalidData);
        let mut trailers = b"0\r\n".to_vec();
        for _ in 0..1000 {
            trailers.extend_from_slice(b"X-Trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert_eq!(decode(&trailers).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert_eq!(decode(b"5\r\nhel").unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn encodes_and_round_trips() {
        let mut out = Vec::new();
        {
            let mut e = Encoder::new(&mut out);
            e.write_all(b"hello").unwrap();
            e.flush().unwrap();
            e.write_all(b" world").unwrap();
            e.finish().unwrap();
        }
        assert_eq!(out, b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
        let big: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        {
            let mut e = Encoder::new(&mut out);
            e.write_all(&big).unwrap();
        }
        assert!(out.starts_with(b"2000\r\n"));
        assert_eq!(decode(&out).unwrap(), big);
    }
}
