//! # Simple usage
//!
//! ## Creating the server
//!
//! The easiest way to create a server is to call `Server::http()`.
//!
//! The `http()` function returns an `IoResult<Server>` which will return an error
//! in the case where the server creation fails (for example if the listening port is already
//! occupied).
//!
//! ```no_run
//! let server = tiny_http::Server::http("0.0.0.0:0").unwrap();
//! ```
//!
//! A newly-created `Server` will immediately start listening for incoming connections and HTTP
//! requests.
//!
//! ## Receiving requests
//!
//! Calling `server.recv()` will block until the next request is available.
//! This function returns an `IoResult<Request>`, so you need to handle the possible errors.
//!
//! ```no_run
//! # let server = tiny_http::Server::http("0.0.0.0:0").unwrap();
//!
//! loop {
//!     // blocks until the next request is received
//!     let request = match server.recv() {
//!         Ok(rq) => rq,
//!         Err(e) => { println!("error: {}", e); break }
//!     };
//!
//!     // do something with the request
//!     // ...
//! }
//! ```
//!
//! In a real-case scenario, you will probably want to spawn multiple worker tasks and call
//! `server.recv()` on all of them. Like this:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use std::thread;
//! # let server = tiny_http::Server::http("0.0.0.0:0").unwrap();
//! let server = Arc::new(server);
//! let mut guards = Vec::with_capacity(4);
//!
//! for _ in (0 .. 4) {
//!     let server = server.clone();
//!
//!     let guard = thread::spawn(move || {
//!         loop {
//!             let rq = server.recv().unwrap();
//!
//!             // ...
//!         }
//!     });
//!
//!     guards.push(guard);
//! }
//! ```
//!
//! If you don't want to block, you can call `server.try_recv()` instead.
//!
//! ## Handling requests
//!
//! The `Request` object returned by `server.recv()` contains informations about the client's request.
//! The most useful methods are probably `request.method()` and `request.url()` which return
//! the requested method (`GET`, `POST`, etc.) and url.
//!
//! To handle a request, you need to create a `Response` object. See the docs of this object for
//! more infos. Here is an example of creating a `Response` from a file:
//!
//! ```no_run
//! # use std::fs::File;
//! # use std::path::Path;
//! let response = tiny_http::Response::from_file(File::open(&Path::new("image.png")).unwrap());
//! ```
//!
//! All that remains to do is call `request.respond()`:
//!
//! ```no_run
//! # use std::fs::File;
//! # use std::path::Path;
//! # let server = tiny_http::Server::http("0.0.0.0:0").unwrap();
//! # let request = server.recv().unwrap();
//! # let response = tiny_http::Response::from_file(File::open(&Path::new("image.png")).unwrap());
//! let _ = request.respond(response);
//! ```
#![allow(dead_code, unused_imports)] // gosling: upstream code as published (PATCHES.md)
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]
#![allow(clippy::match_like_matches_macro)]

#[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
use zeroize::Zeroizing;

use std::error::Error;
use std::io::Error as IoError;
use std::io::ErrorKind as IoErrorKind;
use std::io::Result as IoResult;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use client::ClientConnection;
use connection::Connection;
use util::MessagesQueue;

pub use common::{HTTPVersion, Header, HeaderField, Method, StaticHeader, StatusCode};
pub use util::refined_tcp_stream::{StreamWrapper, WrappedStream};
pub use connection::{ConfigListenAddr, ListenAddr, Listener};
pub use request::{ConnectionEnd, ReadWrite, Request};
pub use response::{Response, ResponseBox};
pub use test::TestRequest;

mod client;
mod common;
mod connection;
mod request;
mod response;
mod ssl;
mod test;
mod util;

/// The main class of this library.
///
/// Destroying this object will immediately close the listening socket and the reading
///  part of all the client's connections. Requests that have already been returned by
///  the `recv()` function will not close and the responses will be transferred to the client.
pub struct Server {
    // should be false as long as the server exists
    // when set to true, all the subtasks will close within a few hundreds ms
    close: Arc<AtomicBool>,

    // queue for messages received by child threads
    messages: Arc<MessagesQueue<Message>>,

    // result of TcpListener::local_addr()
    listening_addr: ListenAddr,
}

enum Message {
    Error(IoError),
    NewRequest(Request),
}

impl From<IoError> for Message {
    fn from(e: IoError) -> Message {
        Message::Error(e)
    }
}

impl From<Request> for Message {
    fn from(rq: Request) -> Message {
        Message::NewRequest(rq)
    }
}

// this trait is to make sure that Server implements Share and Send
#[doc(hidden)]
trait MustBeShareDummy: Sync + Send {}
#[doc(hidden)]
impl MustBeShareDummy for Server {}

pub struct IncomingRequests<'a> {
    server: &'a Server,
}

/// gosling patch: handles one request on the thread of the connection it arrived on (see
/// `Server::serve`). The request must be answered (or dropped) before it returns: the
/// connection's next request is read after that.
pub type RequestHandler = Arc<dyn Fn(Request) + Send + Sync>;

/// gosling patch: starts a connection's job on a thread (its own, or a kept one); the error
/// when none can start. See `ServeOptions::spawn`.
pub type Spawner = Arc<dyn Fn(Box<dyn FnOnce() + Send + 'static>) -> IoResult<()> + Send + Sync>;

/// gosling patch: how `Server::serve` treats its connections.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// Wraps each accepted TCP connection (gosling's TLS); see `from_listener_wrapped`.
    pub wrapper: Option<StreamWrapper>,
    /// Socket read and write timeouts of every connection.
    pub read_timeout: Option<Duration>,
    pub write_timeout: Option<Duration>,
    /// Open connections at most: past it, the connection idle the longest is closed to admit
    /// the new one, or the new one is closed when none is idle.
    pub max_connections: Option<usize>,
    /// Runs each connection's job (patch 22): the caller's threads, kept between connections,
    /// instead of a thread started for each (`None`: one started per connection, named
    /// `connection`).
    pub spawn: Option<Spawner>,
}

/// Represents the parameters required to create a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The addresses to try to listen to.
    pub addr: ConfigListenAddr,

    /// If `Some`, then the server will use SSL to encode the communications.
    pub ssl: Option<SslConfig>,
}

/// Configuration of the server for SSL.
#[derive(Debug, Clone)]
pub struct SslConfig {
    /// Contains the public certificate to send to clients.
    pub certificate: Vec<u8>,
    /// Contains the ultra-secret private key used to decode communications.
    pub private_key: Vec<u8>,
}

impl Server {
    /// Shortcut for a simple server on a specific address.
    #[inline]
    pub fn http<A>(addr: A) -> Result<Server, Box<dyn Error + Send + Sync + 'static>>
    where
        A: ToSocketAddrs,
    {
        Server::new(ServerConfig {
            addr: ConfigListenAddr::from_socket_addrs(addr)?,
            ssl: None,
        })
    }

    /// Shortcut for an HTTPS server on a specific address.
    #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
    #[inline]
    pub fn https<A>(
        addr: A,
        config: SslConfig,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>>
    where
        A: ToSocketAddrs,
    {
        Server::new(ServerConfig {
            addr: ConfigListenAddr::from_socket_addrs(addr)?,
            ssl: Some(config),
        })
    }

    #[cfg(unix)]
    #[inline]
    /// Shortcut for a UNIX socket server at a specific path
    pub fn http_unix(
        path: &std::path::Path,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        Server::new(ServerConfig {
            addr: ConfigListenAddr::unix_from_path(path),
            ssl: None,
        })
    }

    /// Builds a new server that listens on the specified address.
    pub fn new(config: ServerConfig) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        let listener = config.addr.bind()?;
        Self::from_listener(listener, config.ssl)
    }

    /// Builds a new server using the specified TCP listener.
    ///
    /// This is useful if you've constructed TcpListener using some less usual method
    /// such as from systemd. For other cases, you probably want the `new()` function.
    pub fn from_listener<L: Into<Listener>>(
        listener: L,
        ssl_config: Option<SslConfig>,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        Self::from_listener_impl(listener, ssl_config, None, None, None, None, None)
    }

    /// gosling patch: thread-per-connection serving. Each connection's thread reads a request,
    /// calls `handler` with it, and reads the next once the handler returns; nothing goes
    /// through a queue or to another thread, and `recv` never returns anything. A connection
    /// waiting for its next request is idle: at `max_connections`, the one idle the longest is
    /// closed to admit a new connection.
    pub fn serve<L: Into<Listener>>(
        listener: L,
        options: ServeOptions,
        handler: RequestHandler,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        let ServeOptions { wrapper, read_timeout, write_timeout, max_connections, spawn } = options;
        Self::from_listener_impl(listener, None, wrapper, read_timeout, write_timeout, max_connections, Some((handler, spawn)))
    }

    /// gosling patch: like `from_listener_with_timeouts`, but every accepted TCP connection
    /// is first handed to `wrapper` (gosling's TLS), and HTTP is spoken over the stream it
    /// returns. The wrapper runs on the accept thread, so it must not block (a TLS wrapper
    /// handshakes lazily, on the connection thread's first read, after the timeouts are set);
    /// an error from it drops that one connection. Requests on a wrapped connection are
    /// served one at a time, as on tiny_http's own HTTPS.
    pub fn from_listener_wrapped<L: Into<Listener>>(
        listener: L,
        wrapper: StreamWrapper,
        read_timeout: Option<std::time::Duration>,
        write_timeout: Option<std::time::Duration>,
        max_connections: Option<usize>,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        Self::from_listener_impl(listener, None, Some(wrapper), read_timeout, write_timeout, max_connections, None)
    }

    /// gosling patch: like `from_listener`, but every accepted connection gets these socket
    /// read and write timeouts, so an idle or slow client cannot hold a connection thread
    /// forever (a read timeout while waiting for headers answers 408 and closes). With
    /// `max_connections`, a connection accepted while that many are open is closed at once.
    pub fn from_listener_with_timeouts<L: Into<Listener>>(
        listener: L,
        ssl_config: Option<SslConfig>,
        read_timeout: Option<std::time::Duration>,
        write_timeout: Option<std::time::Duration>,
        max_connections: Option<usize>,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        Self::from_listener_impl(listener, ssl_config, None, read_timeout, write_timeout, max_connections, None)
    }

    fn from_listener_impl<L: Into<Listener>>(
        listener: L,
        ssl_config: Option<SslConfig>,
        wrapper: Option<StreamWrapper>,
        read_timeout: Option<std::time::Duration>,
        write_timeout: Option<std::time::Duration>,
        max_connections: Option<usize>,
        handler: Option<(RequestHandler, Option<Spawner>)>,
    ) -> Result<Server, Box<dyn Error + Send + Sync + 'static>> {
        let (handler, spawner) = match handler {
            Some((h, s)) => (Some(h), s),
            None => (None, None),
        };
        let listener = listener.into();
        // building the "close" variable
        let close_trigger = Arc::new(AtomicBool::new(false));

        // building the TcpListener
        let (server, local_addr) = {
            let local_addr = listener.local_addr()?;
            log::debug!("Server listening on {}", local_addr);
            (listener, local_addr)
        };

        // building the SSL capabilities
        #[cfg(all(feature = "ssl-openssl", feature = "ssl-rustls"))]
        compile_error!(
            "Features 'ssl-openssl' and 'ssl-rustls' must not be enabled at the same time"
        );
        #[cfg(not(any(feature = "ssl-openssl", feature = "ssl-rustls")))]
        type SslContext = ();
        #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
        type SslContext = crate::ssl::SslContextImpl;
        let ssl: Option<SslContext> = {
            match ssl_config {
                #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
                Some(config) => Some(SslContext::from_pem(
                    config.certificate,
                    Zeroizing::new(config.private_key),
                )?),
                #[cfg(not(any(feature = "ssl-openssl", feature = "ssl-rustls")))]
                Some(_) => return Err(
                    "Building a server with SSL requires enabling the `ssl` feature in tiny-http"
                        .into(),
                ),
                None => None,
            }
        };

        // creating a task where server.accept() is continuously called
        // and ClientConnection objects are pushed in the messages queue
        let messages = MessagesQueue::with_capacity(8);

        let inside_close_trigger = close_trigger.clone();
        let inside_messages = messages.clone();
        thread::spawn(move || {
            // gosling patch: a thread per connection, started when it is accepted (see PATCHES.md 15).
            let refusers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            // gosling patch: open connections, for `max_connections`.
            let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut refused = 0usize;
            let mut last_refusal_log: Option<std::time::Instant> = None;
            // gosling patch: with a handler, the open connections and whether each is idle.
            let registry = handler.as_ref().map(|_| util::registry::Registry::new());
            let mut closed_idle = 0usize;
            let mut last_idle_log: Option<std::time::Instant> = None;

            log::debug!("Running accept thread");
            while !inside_close_trigger.load(Relaxed) {
                let accepted = server.accept();
                // gosling patch: at the cap, the connection idle the longest makes room.
                let full = accepted.is_ok() && max_connections.is_some_and(|m| open.load(Relaxed) >= m);
                let admit = !full || registry.as_ref().is_some_and(|r| r.close_oldest_idle());
                if full && admit {
                    closed_idle += 1;
                    if last_idle_log.map_or(true, |t| t.elapsed() >= std::time::Duration::from_secs(1)) {
                        log::info!("{} connections are open (the limit); closed the {} idle the longest to admit new ones", open.load(Relaxed), closed_idle);
                        last_idle_log = Some(std::time::Instant::now());
                        closed_idle = 0;
                    }
                }
                let new_client = match accepted {
                    Ok((sock, _)) if !admit => {
                        // gosling patch: over the cap with none idle, the connection is closed
                        // at once with a 503 saying why (logged at most once a second: a flood
                        // must not turn into a flood of log lines).
                        refuse(sock, wrapper.as_ref(), &refusers);
                        refused += 1;
                        if last_refusal_log.map_or(true, |t| t.elapsed() >= std::time::Duration::from_secs(1)) {
                            log::warn!("{} connections are open (the limit), none idle; closed {} new ones", open.load(Relaxed), refused);
                            last_refusal_log = Some(std::time::Instant::now());
                            refused = 0;
                        }
                        continue;
                    }
                    Err(e) if !inside_close_trigger.load(Relaxed) => {
                        // gosling patch: an accept error (out of file descriptors, a connection
                        // reset before it was accepted) is transient; upstream stopped accepting
                        // for good on the first one.
                        log::warn!("accepting a connection failed: {}; retrying", e);
                        thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                    Ok((sock, _)) => {
                        // gosling patch: per-connection timeouts (see from_listener_with_timeouts).
                        if let Err(e) = sock.set_timeouts(read_timeout, write_timeout) {
                            log::debug!("could not set socket timeouts: {}", e);
                        }
                        // gosling patch: no Nagle delay; responses go out as written (see PATCHES.md).
                        if let Err(e) = sock.set_nodelay(true) {
                            log::debug!("could not set TCP_NODELAY: {}", e);
                        }
                        use util::RefinedTcpStream;
                        // gosling patch: a stream wrapper (see from_listener_wrapped).
                        let wrapped = match wrapper {
                            None => None,
                            Some(ref wrap) => match util::refined_tcp_stream::Wrapped::new(&sock, wrap) {
                                Ok(w) => Some(w),
                                Err(e) => {
                                    log::debug!("dropping a connection the stream wrapper refused: {}", e);
                                    continue;
                                }
                            },
                        };
                        // gosling patch: `try_new`, so running out of descriptors drops this one
                        // connection instead of panicking the accept thread.
                        let split = match (wrapped, &ssl) {
                            (Some(w), _) => RefinedTcpStream::try_new(w),
                            (None, None) => RefinedTcpStream::try_new(sock),
                            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
                            (None, Some(ssl)) => {
                                // trying to apply SSL over the connection
                                // if an error occurs, we just close the socket and resume listening
                                match ssl.accept(sock) {
                                    Ok(s) => RefinedTcpStream::try_new(s),
                                    Err(_) => continue,
                                }
                            }
                            #[cfg(not(any(feature = "ssl-openssl", feature = "ssl-rustls")))]
                            (None, Some(_)) => unreachable!(),
                        };
                        let (read_closable, write_closable) = match split {
                            Ok(pair) => pair,
                            Err(e) => {
                                log::warn!("dropping a new connection: {}", e);
                                continue;
                            }
                        };

                        let registered = registry.as_ref().map(|r| r.register(read_closable.handle()));
                        // gosling patch: a request head may take twice the read timeout.
                        Ok((
                            ClientConnection::new(write_closable, read_closable)
                                .with_head_deadline(read_timeout.map(|t| t * 2)),
                            registered,
                        ))
                    }
                    Err(e) => Err(e),
                };

                match new_client {
                    Ok((client, registered)) => {
                        let messages = inside_messages.clone();
                        let mut client = Some(client);
                        let mut registered = registered;
                        let handler = handler.clone();
                        // gosling patch: counted open until its task ends.
                        open.fetch_add(1, Relaxed);
                        let open = open.clone();
                        struct Closed(Arc<std::sync::atomic::AtomicUsize>);
                        impl Drop for Closed {
                            fn drop(&mut self) {
                                self.0.fetch_sub(1, Relaxed);
                            }
                        }
                        let closed = Closed(open);
                        let job = move || {
                            let _closed = closed;
                            // gosling patch: thread-per-connection (see `Server::serve`).
                            if let (Some(handler), Some(registered)) = (handler.as_ref(), registered.take()) {
                                let Some(mut client) = client.take() else { return };
                                // Idle from its registration (at accept) until a request arrives.
                                loop {
                                    let rq = match client.next() {
                                        Some(rq) => rq,
                                        None => break,
                                    };
                                    if !registered.busy() {
                                        break; // closed as idle while its head arrived
                                    }
                                    handler(rq);
                                    registered.idle();
                                }
                            } else if let Some(client) = client.take() {
                                // gosling patch: every connection (not only HTTPS) has one
                                // request in flight at a time: the next is read once the
                                // previous one is answered. Upstream read pipelined requests as
                                // fast as a client sent them and queued them all, so one client
                                // that never read its answers grew the queue without bound
                                // (measured: 86,000 requests and 99 MB in 3 s).
                                let (sender, receiver) = mpsc::channel();
                                for rq in client {
                                    messages.push(rq.with_notify_sender(sender.clone()).into());
                                    if receiver.recv().is_err() {
                                        break;
                                    }
                                }
                            }
                        };
                        // gosling patch 22: on the caller's (kept) threads when it gives them.
                        let spawned = match &spawner {
                            Some(spawn) => spawn(Box::new(job)),
                            None => thread::Builder::new().name("connection".into()).spawn(job).map(|_| ()),
                        };
                        // The closure (and with it the connection and its count) is dropped when
                        // no thread can be started: the client sees the connection closed.
                        if let Err(e) = spawned {
                            log::warn!("cannot start a thread for a new connection: {}; closed it", e);
                        }
                    }

                    Err(e) => {
                        log::error!("Error accepting new client: {}", e);
                        inside_messages.push(e.into());
                        break;
                    }
                }
            }
            log::debug!("Terminating accept thread");
        });

        // result
        Ok(Server {
            messages,
            close: close_trigger,
            listening_addr: local_addr,
        })
    }

    /// Returns an iterator for all the incoming requests.
    ///
    /// The iterator will return `None` if the server socket is shutdown.
    #[inline]
    pub fn incoming_requests(&self) -> IncomingRequests<'_> {
        IncomingRequests { server: self }
    }

    /// Returns the address the server is listening to.
    #[inline]
    pub fn server_addr(&self) -> ListenAddr {
        self.listening_addr.clone()
    }

    /// Returns the number of clients currently connected to the server.
    pub fn num_connections(&self) -> usize {
        unimplemented!()
        //self.requests_receiver.lock().len()
    }

    /// Blocks until an HTTP request has been submitted and returns it.
    pub fn recv(&self) -> IoResult<Request> {
        match self.messages.pop() {
            Some(Message::Error(err)) => Err(err),
            Some(Message::NewRequest(rq)) => Ok(rq),
            None => Err(IoError::new(IoErrorKind::Other, "thread unblocked")),
        }
    }

    /// Same as `recv()` but doesn't block longer than timeout
    pub fn recv_timeout(&self, timeout: Duration) -> IoResult<Option<Request>> {
        match self.messages.pop_timeout(timeout) {
            Some(Message::Error(err)) => Err(err),
            Some(Message::NewRequest(rq)) => Ok(Some(rq)),
            None => Ok(None),
        }
    }

    /// Same as `recv()` but doesn't block.
    pub fn try_recv(&self) -> IoResult<Option<Request>> {
        match self.messages.try_pop() {
            Some(Message::Error(err)) => Err(err),
            Some(Message::NewRequest(rq)) => Ok(Some(rq)),
            None => Ok(None),
        }
    }

    /// Unblock thread stuck in recv() or incoming_requests().
    /// If there are several such threads, only one is unblocked.
    /// This method allows graceful shutdown of server.
    pub fn unblock(&self) {
        self.messages.unblock();
    }
}

impl Iterator for IncomingRequests<'_> {
    type Item = Request;
    fn next(&mut self) -> Option<Request> {
        self.server.recv().ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close.store(true, Relaxed);
        // Connect briefly to ourselves to unblock the accept thread
        let maybe_stream = match &self.listening_addr {
            ListenAddr::IP(addr) => TcpStream::connect(addr).map(Connection::from),
            #[cfg(unix)]
            ListenAddr::Unix(addr) => {
                // TODO: use connect_addr when its stabilized.
                let path = addr.as_pathname().unwrap();
                std::os::unix::net::UnixStream::connect(path).map(Connection::from)
            }
        };
        if let Ok(stream) = maybe_stream {
            let _ = stream.shutdown(Shutdown::Both);
        }

        #[cfg(unix)]
        if let ListenAddr::Unix(addr) = &self.listening_addr {
            if let Some(path) = addr.as_pathname() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// gosling patch: the answer a connection over `max_connections` gets before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 78\r\n\r\n{\"message\":\"too many open connections; close idle ones or try again shortly\"}";

/// gosling patch: refusing connections over the cap never takes more than this many threads.
const MAX_REFUSERS: usize = 4;

/// gosling patch: closes a connection accepted over the cap, telling the client why. A plain
/// connection gets the 503 written from the accept thread (a fresh socket's send buffer takes it
/// at once; the write timeout bounds the rest); a wrapped one (TLS) needs its handshake first, on
/// one of at most `MAX_REFUSERS` short-lived threads with short timeouts, or is closed bare.
fn refuse(sock: Connection, wrapper: Option<&util::refined_tcp_stream::StreamWrapper>, refusers: &Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    let short = Some(std::time::Duration::from_millis(10));
    match wrapper {
        None => {
            let _ = sock.set_timeouts(short, short);
            let _ = (&sock).write_all(REFUSAL);
            let _ = sock.shutdown(std::net::Shutdown::Write);
        }
        Some(wrap) => {
            if refusers.fetch_add(1, Relaxed) >= MAX_REFUSERS {
                refusers.fetch_sub(1, Relaxed);
                return;
            }
            let wait = Some(std::time::Duration::from_secs(2));
            let _ = sock.set_timeouts(wait, wait);
            let wrapped = match util::refined_tcp_stream::Wrapped::new(&sock, wrap) {
                Ok(w) => w,
                Err(_) => {
                    refusers.fetch_sub(1, Relaxed);
                    return;
                }
            };
            let count = refusers.clone();
            let started = thread::Builder::new().name("refuse".into()).spawn(move || {
                wrapped.refuse(REFUSAL);
                drop(sock);
                count.fetch_sub(1, Relaxed);
            });
            if started.is_err() {
                refusers.fetch_sub(1, Relaxed);
            }
        }
    }
}
