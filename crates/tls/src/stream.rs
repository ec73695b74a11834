//! One HTTPS connection as tiny_http sees it: a rustls server session over the accepted socket.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// One HTTPS connection as tiny_http sees it.
pub(crate) struct TlsStream(pub(crate) rustls::StreamOwned<rustls::ServerConnection, TcpStream>);

impl TlsStream {
    fn note(&self, e: &io::Error) {
        if self.0.conn.is_handshaking() {
            let peer = self.0.sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            log::debug!("tls: handshake with {peer} failed: {e}");
        }
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).inspect_err(|e| self.note(e))
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).inspect_err(|e| self.note(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl tiny_http::WrappedStream for TlsStream {
    /// Tells the client the response is complete (close_notify) before the socket closes;
    /// writes only what is pending, never waits to read.
    fn close(&mut self) {
        if self.0.conn.is_handshaking() {
            return;
        }
        self.0.conn.send_close_notify();
        while self.0.conn.wants_write() {
            if !matches!(self.0.conn.write_tls(&mut self.0.sock), Ok(n) if n > 0) {
                break;
            }
        }
    }
}
