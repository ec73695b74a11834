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
