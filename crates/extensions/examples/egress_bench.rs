//! `scripts/bench egress`: the egress proxy's cost against a direct connection, in one run, on
//! loopback: download and upload throughput through a `CONNECT` tunnel to an approved host
//! (`127.0.0.1:PORT`) against the same transfer straight to it, and the time to a first answer
//! (connect, `CONNECT`, one byte each way) against a direct connect and one byte each way.
//!
//!     egress_bench MEBIBYTES ROUNDS  →  one JSON line of figures

use gosling_extensions::egress::{serve, Audit, EgressPolicy};
use gosling_store::audit::{AuditLimits, AuditLog};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// An origin on loopback: each connection sends one byte (`d`: then `size` bytes) or reads
/// until the end (`u`) and answers one byte.
fn origin(size: usize) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        // wait: the bench's origin serves until the process ends
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut op = [0u8; 1];
                if s.read_exact(&mut op).is_err() {
                    return;
                }
                match op[0] {
                    b'd' => {
                        let chunk = vec![7u8; 256 * 1024];
                        let mut left = size;
                        while left > 0 {
                            let n = left.min(chunk.len());
                            if s.write_all(&chunk[..n]).is_err() {
                                return;
                            }
                            left -= n;
                        }
                    }
                    b'u' => {
                        let mut buf = vec![0u8; 256 * 1024];
                        let mut got = 0;
                        while got < size {
                            match s.read(&mut buf) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got += n,
                            }
                        }
                        let _ = s.write_all(b"k");
                    }
                    _ => {
                        let _ = s.write_all(b"p");
                    }
                }
            });
        }
    });
    port
}

/// A connection to the origin, direct or through the proxy's tunnel.
fn open(origin: u16, proxy: Option<u16>) -> TcpStream {
    match proxy {
        None => TcpStream::connect(("127.0.0.1", origin)).unwrap(),
        Some(p) => {
            let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
            write!(s, "CONNECT 127.0.0.1:{origin} HTTP/1.1\r\nHost: 127.0.0.1:{origin}\r\n\r\n").unwrap();
            let mut head = [0u8; 39];
            s.read_exact(&mut head).unwrap();
            assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
            s
        }
    }
}

/// Seconds for one transfer of `size` bytes: `d` download, `u` upload, `p` one byte each way.
fn once(op: u8, size: usize, origin_port: u16, proxy: Option<u16>) -> f64 {
    let t = Instant::now();
    let mut s = open(origin_port, proxy);
    s.write_all(&[op]).unwrap();
    match op {
        b'd' => {
            let mut buf = vec![0u8; 256 * 1024];
            let mut got = 0;
            while got < size {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the download ended after {got} bytes");
                got += n;
            }
        }
        b'u' => {
            let chunk = vec![7u8; 256 * 1024];
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len());
                s.write_all(&chunk[..n]).unwrap();
                left -= n;
            }
            let mut k = [0u8; 1];
            s.read_exact(&mut k).unwrap();
        }
        _ => {
            let mut k = [0u8; 1];
            s.read_exact(&mut k).unwrap();
        }
    }
    t.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(7);
    let size = mib << 20;
    let origin_port = origin(size);
    let state = std::env::temp_dir().join(format!("gosling-egress-bench-{}", std::process::id()));
    gosling_store::atomic::ensure_dir(&state).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let policy = EgressPolicy::from_strings(&[format!("127.0.0.1:{origin_port}")]).unwrap();
    let log = AuditLog::new(&state, AuditLimits { max_bytes: 1 << 30, keep: 0 });
    let handle = serve(listener, policy, Audit { log, extension: "bench".into() }).unwrap();
    // Interleaved, so both paths see the same machine.
    let (mut dd, mut dp, mut ud, mut up, mut pd, mut pp) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        dd.push(once(b'd', size, origin_port, None));
        dp.push(once(b'd', size, origin_port, Some(proxy_port)));
        ud.push(once(b'u', size, origin_port, None));
        up.push(once(b'u', size, origin_port, Some(proxy_port)));
    }
    for _ in 0..200 {
        pd.push(once(b'p', 1, origin_port, None));
        pp.push(once(b'p', 1, origin_port, Some(proxy_port)));
    }
    drop(handle);
    let _ = std::fs::remove_dir_all(&state);
    let mbs = |secs: f64| mib as f64 * 1.048_576 / secs;
    println!(
        "{{\"mib\":{mib},\"rounds\":{rounds},\"down_direct\":{:.0},\"down_proxy\":{:.0},\"up_direct\":{:.0},\"up_proxy\":{:.0},\"first_direct_ms\":{:.3},\"first_proxy_ms\":{:.3}}}",
        mbs(median(dd)),
        mbs(median(dp)),
        mbs(median(ud)),
        mbs(median(up)),
        median(pd) * 1000.0,
        median(pp) * 1000.0
    );
}
