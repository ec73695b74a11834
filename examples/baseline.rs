//! The benchmarks' floor: a do-nothing thread-per-connection HTTP/1.1 server on `std::net`
//! alone. Each connection gets a thread that reads a request head, skips its
//! `Content-Length` body, answers `200 ok`, and keeps the connection open for the next
//! request. It is what any HTTP server costs on this machine (accept, a thread, a read and a
//! write per request); `scripts/bench` measures gosling against it in the same run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";

fn serve(stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = String::new();
    loop {
        // The request line; EOF between requests ends the connection.
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0u64;
        let mut close = line.ends_with("HTTP/1.0\r\n");
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("connection") {
                    close = value.eq_ignore_ascii_case("close");
                }
            }
        }
        std::io::copy(&mut reader.by_ref().take(length), &mut std::io::sink())?;
        writer.write_all(ANSWER)?;
        if close {
            return Ok(());
        }
    }
}

fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("baseline listening on http://{}", listener.local_addr()?);
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || serve(stream));
    }
    Ok(())
}
