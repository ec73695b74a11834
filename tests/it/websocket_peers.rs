//! The WebSocket at `/acp` through two independent client libraries, pinned in scripts/peers:
//! Node's `ws` and Python's `websockets` (`tests/websocket/`), over plain TCP and TLS. Each
//! checks the token (query and header), the origin rules, ACP over text frames (a 1 MiB
//! message each way, a fragmented one, a binary frame ignored), ping/pong and the close
//! handshake, as that library implements RFC 6455.

use crate::require_peers;
use crate::support::{manifest_dir, Peers, Server, ServerOpts, SECRET};
use serde_json::Value;
use std::process::Command;

fn run(peers: &Peers, s: &Server, node: bool) -> Value {
    let pin = s.tls.then(|| crate::tls::fingerprint_line(s));
    let base = format!("{}://{}", if s.tls { "wss" } else { "ws" }, s.addr);
    let mut cmd = if node {
        let mut c = Command::new(peers.node());
        c.arg(manifest_dir().join("tests/websocket/node_client.mjs")).env("WS_DIR", peers.get("NODE_WS_DIR"));
        c
    } else {
        let mut c = Command::new(peers.python());
        c.arg(manifest_dir().join("tests/websocket/py_client.py"));
        c
    };
    cmd.arg(&base).arg(SECRET).args(pin);
    let out = cmd.output().expect("run the client");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "client failed: {stdout}\n{stderr}\nserver: {}", s.stderr());
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Runs the client (Node's when `node`) against a plain and a TLS server; checks what both
/// clients report, then `more` for what only this one does. `more` gets the report and the
/// server.
fn over_plain_and_tls(peers: &Peers, node: bool, more: impl Fn(&Value, &Server)) {
    for tls in [false, true] {
        let s = Server::start_with(ServerOpts {
            args: vec![if tls { "--tls" } else { "--no-tls" }.into()],
            ..ServerOpts::default()
        });
        let v = run(peers, &s, node);
        check(&v, tls);
        more(&v, &s);
    }
}

fn check(v: &Value, tls: bool) {
    assert_eq!(v["wrongToken"], 401, "{v}");
    assert_eq!(v["noToken"], 401, "{v}");
    assert_eq!(v["headerToken"], 101, "{v}");
    assert_eq!(v["foreignOrigin"], 403, "{v}");
    let s = &v["session"];
    assert_eq!(s["connectionId"].as_str().map(str::len), Some(36), "{v}");
    assert_eq!(s["protocolVersion"], 1, "{v}");
    assert_eq!(s["unknownCode"], -32601, "{v}");
    assert_eq!(s["bigCode"], -32601, "{v}");
    assert!(s["bigAnswerBytes"].as_u64().unwrap() > 1 << 20, "{v}");
    assert_eq!(s["closeCode"], 1000, "{v}");
    if tls {
        assert_eq!(s["pinned"], true, "the certificate is the one printed: {v}");
    }
}

#[test]
fn node_ws_client() {
    let peers = require_peers!();
    over_plain_and_tls(peers, true, |v, s| {
        assert_eq!(v["devOrigin"], 101, "{v}");
        assert_eq!(v["session"]["afterBinary"], 1, "{v}");
        assert_eq!(v["session"]["pong"], "are you there", "{v}");
        assert_eq!(v["session"]["binaryFrames"], 0, "{v}");
        assert!(s.stderr().contains("ignored a binary message of 3 bytes"), "{}", s.stderr());
    });
}

#[test]
fn python_websockets_client() {
    let peers = require_peers!();
    over_plain_and_tls(peers, false, |v, _| {
        assert_eq!(v["nullOrigin"], 101, "{v}");
        assert_eq!(v["session"]["fragmented"], 1, "{v}");
        assert!(v["session"]["pongSeconds"].as_f64().is_some(), "{v}");
    });
}
