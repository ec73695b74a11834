//! gosling's tests of its patches that no upstream test covers (PATCHES.md, "Tests").

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::io::{FromRawFd, IntoRawFd};

#[allow(dead_code)] // upstream's helpers, not all used here
mod support;

/// Patch 5: every accepted TCP connection has TCP_NODELAY on, so a response written in several
/// pieces does not wait for the client's delayed ACK. Read off the request's socket
/// (`Request::raw_fd`, patch 16).
#[test]
fn accepted_connections_have_tcp_nodelay() {
    let (server, mut client) = support::new_one_server_one_client();
    write!(client, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let rq = server.recv().unwrap();
    let fd = rq.raw_fd().expect("a TCP request has its socket's descriptor");
    // Borrowed, never closed here: the descriptor stays tiny_http's.
    let socket = unsafe { TcpStream::from_raw_fd(fd) };
    let nodelay = socket.nodelay();
    let _ = socket.into_raw_fd();
    assert!(nodelay.unwrap(), "TCP_NODELAY is off on the accepted connection");
}

/// Patch 21: a response's static headers are written after its own, once, before the length;
/// the response's own headers are kept as given (the caller's `Vec` reused), and a
/// `Content-Length` among them still sets the length instead of being written as a header.
#[test]
fn static_headers_are_written_with_the_response_and_own_headers_keep_their_rules() {
    use std::io::Read;
    const STATIC: &[tiny_http::StaticHeader] = &[tiny_http::StaticHeader::new("Content-Type", "text/plain; charset=utf-8")];
    let (server, mut client) = support::new_one_server_one_client();
    client.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(client, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let rq = server.recv().unwrap();
    let own = vec![
        tiny_http::Header::from_bytes(&b"X-Own"[..], &b"1"[..]).unwrap(),
        tiny_http::Header::from_bytes(&b"Content-Length"[..], &b"2"[..]).unwrap(),
    ];
    let response = tiny_http::Response::new(tiny_http::StatusCode(200), own, &b"ok"[..], None, None).with_static_headers(STATIC);
    rq.respond(response).unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let lines: Vec<&str> = head.split("\r\n").collect();
    assert_eq!(lines[0], "HTTP/1.1 200 OK", "{answer}");
    let own = lines.iter().position(|l| *l == "X-Own: 1").expect("the response's own header");
    let fixed = lines.iter().position(|l| *l == "Content-Type: text/plain; charset=utf-8").expect("the static header");
    let length = lines.iter().position(|l| *l == "Content-Length: 2").expect("the length, from the Content-Length given");
    assert!(own < fixed && fixed < length, "own headers, then static ones, then the length: {answer}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("Content-Length")).count(), 1, "{answer}");
    assert_eq!(body, "ok");
}

/// Patch 21: a static header the library writes itself, or a malformed one, is refused by
/// `StaticHeader::new` (at compile time when it builds a constant; here at run time).
#[test]
fn static_headers_the_library_writes_or_malformed_are_refused() {
    for (field, value) in [("content-length", "2"), ("Date", "x"), ("Connection", "close"), ("X A", "1"), ("X-A", "1\r\nX-B: 2"), ("", "1")] {
        let made = std::panic::catch_unwind(|| tiny_http::StaticHeader::new(field, value));
        assert!(made.is_err(), "{field:?}: {value:?} was accepted");
    }
    let _ = tiny_http::StaticHeader::new("X-Frame-Options", "DENY");
}

/// Patch 22: each connection's job runs where `ServeOptions::spawn` puts it (gosling's kept
/// threads), once per connection; without it, a thread is started per connection as before.
#[test]
fn each_connection_runs_on_the_spawner_given() {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let jobs = Arc::new(AtomicUsize::new(0));
    let counted = jobs.clone();
    let spawn: tiny_http::Spawner = Arc::new(move |job| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::thread::Builder::new().name("kept".into()).spawn(job).map(|_| ())
    });
    let handler: tiny_http::RequestHandler = Arc::new(|rq: tiny_http::Request| {
        let thread = std::thread::current().name().unwrap_or_default().to_string();
        let _ = rq.respond(tiny_http::Response::from_string(thread));
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let options = tiny_http::ServeOptions { spawn: Some(spawn), ..Default::default() };
    let server = tiny_http::Server::serve(listener, options, handler).unwrap();
    for n in 1..=2 {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert!(answer.ends_with("\r\n\r\nkept"), "served on the spawner's thread: {answer}");
        assert_eq!(jobs.load(Ordering::SeqCst), n, "one job per connection");
    }
    drop(server);
}
