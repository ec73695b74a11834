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
