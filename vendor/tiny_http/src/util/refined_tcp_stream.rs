use std::io::Result as IoResult;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};

use crate::connection::Connection;
#[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
use crate::ssl::SslStream;

/// gosling patch: turns an accepted TCP connection into the stream HTTP is spoken over
/// (see `Server::from_listener_wrapped`). Runs on the accept thread: must not block.
pub type StreamWrapper =
    Arc<dyn Fn(TcpStream) -> IoResult<Box<dyn WrappedStream>> + Send + Sync>;

/// gosling patch: a stream made by a [`StreamWrapper`], e.g. a TLS session over the socket.
pub trait WrappedStream: Read + Write + Send {
    /// Called once before the socket's write side is shut down (e.g. to send a TLS
    /// close_notify). Skipped if the stream is busy on another thread at that moment.
    fn close(&mut self) {}
}

/// gosling patch: a wrapped stream shared by a connection's read and write halves behind one
/// lock (so requests on it are served one at a time, see `Stream::secure`), plus the socket
/// underneath for shutdown and the peer address without taking that lock.
#[derive(Clone)]
pub(crate) struct Wrapped(Arc<(Mutex<Box<dyn WrappedStream>>, TcpStream)>);

impl Wrapped {
    pub(crate) fn new(sock: &Connection, wrap: &StreamWrapper) -> IoResult<Wrapped> {
        let tcp = match sock {
            Connection::Tcp(s) => s,
            #[cfg(unix)]
            Connection::Unix(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "stream wrappers take TCP connections only",
                ))
            }
        };
        let stream = wrap(tcp.try_clone()?)?;
        Ok(Wrapped(Arc::new((Mutex::new(stream), tcp.try_clone()?))))
    }

    /// gosling patch: writes `answer` (a whole HTTP response) over the wrapped stream — for TLS
    /// this runs the handshake first, under the socket's timeouts — then closes it.
    pub(crate) fn refuse(&self, answer: &[u8]) {
        let mut stream = self.lock();
        if stream.write_all(answer).and_then(|()| stream.flush()).is_ok() {
            stream.close();
        }
        let _ = self.0 .1.shutdown(Shutdown::Write);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Box<dyn WrappedStream>> {
        self.0 .0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl From<Wrapped> for Stream {
    fn from(w: Wrapped) -> Self {
        Stream::Wrapped(w)
    }
}

pub(crate) enum Stream {
    /// gosling patch: shared, not duplicated, between a connection's read and write halves
    /// (and the idle-connection registry): one descriptor per connection instead of two.
    Http(Arc<Connection>),
    /// gosling patch: see `Wrapped`.
    Wrapped(Wrapped),
    #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
    Https(SslStream),
}

impl Clone for Stream {
    fn clone(&self) -> Self {
        match self {
            Stream::Http(tcp_stream) => Stream::Http(tcp_stream.clone()),
            Stream::Wrapped(w) => Stream::Wrapped(w.clone()),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => Stream::Https(ssl_stream.clone()),
        }
    }
}

impl Stream {
    /// gosling patch: upstream duplicated the socket here, and its `clone` unwrapped a failure
    /// (out of file descriptors) on the accept thread, which then died. Both halves now share
    /// one socket, so this cannot fail.
    fn try_clone(&self) -> IoResult<Self> {
        Ok(self.clone())
    }

    /// gosling patch: closes both directions without taking the wrapped stream's lock, waking
    /// a thread blocked reading it (used to close an idle connection).
    pub(crate) fn shutdown_both(&self) {
        let _ = match self {
            Stream::Http(c) => c.shutdown(Shutdown::Both),
            Stream::Wrapped(w) => w.0 .1.shutdown(Shutdown::Both),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(_) => Ok(()),
        };
    }
}

impl From<Connection> for Stream {
    fn from(tcp_stream: Connection) -> Self {
        Stream::Http(Arc::new(tcp_stream))
    }
}

impl Stream {
    fn secure(&self) -> bool {
        match self {
            Stream::Http(_) => false,
            // Treated as tiny_http's own HTTPS: one lock for both halves, one request at a time.
            Stream::Wrapped(_) => true,
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(_) => true,
        }
    }

    fn peer_addr(&mut self) -> IoResult<Option<SocketAddr>> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.peer_addr(),
            Stream::Wrapped(w) => w.0 .1.peer_addr().map(Some),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.peer_addr(),
        }
    }

    fn shutdown(&mut self, how: Shutdown) -> IoResult<()> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.shutdown(how),
            Stream::Wrapped(w) => {
                if how != Shutdown::Read {
                    if let Ok(mut s) = w.0 .0.try_lock() {
                        s.close();
                    }
                }
                w.0 .1.shutdown(how)
            }
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        match self {
            Stream::Http(tcp_stream) => (&**tcp_stream).read(buf),
            Stream::Wrapped(w) => w.lock().read(buf),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        match self {
            Stream::Http(tcp_stream) => (&**tcp_stream).write(buf),
            Stream::Wrapped(w) => w.lock().write(buf),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.write(buf),
        }
    }

    fn flush(&mut self) -> IoResult<()> {
        match self {
            Stream::Http(tcp_stream) => (&**tcp_stream).flush(),
            Stream::Wrapped(w) => w.lock().flush(),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.flush(),
        }
    }
}

pub struct RefinedTcpStream {
    stream: Stream,
    close_read: bool,
    close_write: bool,
}

impl RefinedTcpStream {
    /// Splits a connection into its read and write halves. gosling patch: upstream's `new`
    /// panicked when the socket could not be duplicated; this reports it.
    pub(crate) fn try_new<S>(stream: S) -> IoResult<(RefinedTcpStream, RefinedTcpStream)>
    where
        S: Into<Stream>,
    {
        let stream: Stream = stream.into();
        let read = stream.try_clone()?;
        Ok((
            RefinedTcpStream { stream: read, close_read: true, close_write: false },
            RefinedTcpStream { stream, close_read: false, close_write: true },
        ))
    }

    /// Returns true if this struct wraps around a secure connection.
    #[inline]
    pub(crate) fn secure(&self) -> bool {
        self.stream.secure()
    }

    pub(crate) fn peer_addr(&mut self) -> IoResult<Option<SocketAddr>> {
        self.stream.peer_addr()
    }

    /// gosling patch: the TCP socket's descriptor (`Request::raw_fd`).
    pub(crate) fn raw_fd(&self) -> Option<i32> {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            match &self.stream {
                Stream::Http(c) => match &**c {
                    Connection::Tcp(s) => Some(s.as_raw_fd()),
                    Connection::Unix(_) => None,
                },
                Stream::Wrapped(w) => Some(w.0 .1.as_raw_fd()),
                #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
                Stream::Https(_) => None,
            }
        }
        #[cfg(not(unix))]
        None
    }

    /// gosling patch: another handle on the same connection, for `Stream::shutdown_both`.
    pub(crate) fn handle(&self) -> Stream {
        self.stream.clone()
    }
}

impl Drop for RefinedTcpStream {
    fn drop(&mut self) {
        if self.close_read {
            self.stream.shutdown(Shutdown::Read).ok();
        }

        if self.close_write {
            self.stream.shutdown(Shutdown::Write).ok();
        }
    }
}

impl Read for RefinedTcpStream {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        self.stream.read(buf)
    }
}

impl Write for RefinedTcpStream {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        self.stream.write(buf)
    }

    fn flush(&mut self) -> IoResult<()> {
        self.stream.flush()
    }
}
