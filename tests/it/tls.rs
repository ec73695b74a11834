//! `agent --tls` / `GOOSE_TLS`: the fingerprint line, a client that pins exactly that
//! certificate (and fails on any other), certificate files, and start-up errors.
//!
//! The client here is our own: rustls with a verifier that accepts only the pinned SHA-256,
//! a std TcpStream, and hand-written HTTP/1.1 (ureq, behind `http()`, cannot pin).

use crate::support::{gosling, Server, ServerOpts, TempDir, SECRET};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

pub(crate) const PREFIX: &str = "GOOSED_CERT_FINGERPRINT=";

/// SHA-256 of the DER, `AA:BB:…` (computed here, not with the server's formatter).
pub(crate) fn sha256_colon_hex(der: &[u8]) -> String {
    gosling::util::sha256(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// Accepts exactly one certificate: the one whose SHA-256 is `pin`. Handshake signatures are
/// still verified, so the server must hold that certificate's key.
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if sha256_colon_hex(end_entity) == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

pub(crate) type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to `addr` that trusts only `pin`. The handshake runs here, so a wrong pin
/// is an `Err` before any HTTP is sent.
pub(crate) fn connect(addr: &str, pin: &str) -> Result<Tls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { pin: pin.to_string(), provider }))
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    tcp.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).map_err(|e| e.to_string())?;
    }
    Ok(tls)
}

pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Sends one request and reads one response (Content-Length or chunked), keeping the
/// connection open for the next.
fn exchange(tls: &mut BufReader<Tls>, method: &str, path: &str, secret: Option<&str>) -> Result<Reply, String> {
    exchange_json(tls, method, path, secret, None)
}

pub(crate) fn exchange_json(
    tls: &mut BufReader<Tls>,
    method: &str,
    path: &str,
    secret: Option<&str>,
    json: Option<&serde_json::Value>,
) -> Result<Reply, String> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    if let Some(s) = secret {
        head.push_str(&format!("X-Secret-Key: {s}\r\n"));
    }
    let body = json.map(|j| j.to_string()).unwrap_or_default();
    if json.is_some() {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    head.push_str(&body);
    let io = |e: std::io::Error| e.to_string();
    tls.get_mut().write_all(head.as_bytes()).map_err(io)?;
    tls.get_mut().flush().map_err(io)?;
    let mut line = String::new();
    tls.read_line(&mut line).map_err(io)?;
    let status =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(format!("bad status line {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        tls.read_line(&mut line).map_err(io)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').ok_or(format!("bad header {l:?}"))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(n) = get("content-length") {
        body.resize(n.parse::<usize>().map_err(|e| e.to_string())?, 0);
        tls.read_exact(&mut body).map_err(io)?;
    } else if get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            tls.read_line(&mut line).map_err(io)?;
            let n = usize::from_str_radix(line.trim(), 16).map_err(|e| e.to_string())?;
            let mut chunk = vec![0; n + 2];
            tls.read_exact(&mut chunk).map_err(io)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    Ok(Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

/// One request on a fresh pinned connection.
fn https(addr: &str, pin: &str, method: &str, path: &str, secret: Option<&str>) -> Result<Reply, String> {
    exchange(&mut BufReader::new(connect(addr, pin)?), method, path, secret)
}

pub(crate) fn fingerprint_line(server: &Server) -> String {
    let lines: Vec<&String> = server.early_stdout.iter().filter(|l| l.starts_with(PREFIX)).collect();
    assert_eq!(lines.len(), 1, "one fingerprint line before the listening line; stdout: {:?}", server.early_stdout);
    let fp = lines[0][PREFIX.len()..].to_string();
    let pairs: Vec<&str> = fp.split(':').collect();
    assert_eq!(pairs.len(), 32, "{fp}");
    assert!(
        pairs.iter().all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))),
        "upper-case hex pairs: {fp}"
    );
    fp
}

fn tls_server(args: &[&str], env: &[(&str, &str)]) -> Server {
    Server::start_with(ServerOpts {
        args: args.iter().map(|s| s.to_string()).collect(),
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..ServerOpts::default()
    })
}

/// Flips the last hex digit: a well-formed fingerprint of some other certificate.
fn other_pin(pin: &str) -> String {
    let mut p = pin.to_string();
    let last = if p.ends_with('0') { "1" } else { "0" };
    p.replace_range(p.len() - 1.., last);
    p
}

#[test]
fn tls_flag_serves_https_to_a_client_pinning_the_printed_fingerprint() {
    let server = tls_server(&["--tls"], &[]);
    assert!(server.tls, "the listening line says https://");
    let pin = fingerprint_line(&server);

    let status = https(&server.addr, &pin, "GET", "/status", None).unwrap();
    assert_eq!((status.status, status.body.as_str()), (200, "ok"));

    let config = https(&server.addr, &pin, "GET", "/config", Some(SECRET)).unwrap();
    assert_eq!(config.status, 200, "{}", config.body);
    let v: serde_json::Value = serde_json::from_str(&config.body).unwrap();
    assert!(v.get("config").is_some_and(|c| c.is_object()), "{v}");
    assert_eq!(https(&server.addr, &pin, "GET", "/config", None).unwrap().status, 401, "auth is unchanged over TLS");

    // Several requests on one connection (tiny_http serves a wrapped stream one at a time).
    let mut conn = BufReader::new(connect(&server.addr, &pin).unwrap());
    for _ in 0..3 {
        let r = exchange(&mut conn, "GET", "/config", Some(SECRET)).unwrap();
        assert_eq!(r.status, 200);
        assert!(r.headers.iter().any(|(k, _)| k == "content-length"));
    }

    // Any other certificate fingerprint: the handshake fails, nothing is exchanged.
    let err = https(&server.addr, &other_pin(&pin), "GET", "/status", None).err().expect("a wrong pin must fail");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(&server.addr).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    plain.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!String::from_utf8_lossy(&got).contains("HTTP/1.1 200"), "{got:?}");

    // The server still serves after the failed handshakes.
    assert_eq!(https(&server.addr, &pin, "GET", "/status", None).unwrap().status, 200);
}

#[test]
fn a_silent_client_does_not_block_other_handshakes() {
    let server = tls_server(&["--tls"], &[]);
    let pin = fingerprint_line(&server);
    // Connected, never says a word: its handshake must not hold the accept thread.
    let _silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(&server.addr).unwrap()).collect();
    let r = https(&server.addr, &pin, "GET", "/status", None).unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn a_connection_closes_cleanly_with_close_notify() {
    let server = tls_server(&[], &[("GOOSE_TLS", "yes")]);
    let pin = fingerprint_line(&server);
    let mut tls = connect(&server.addr, &pin).unwrap();
    tls.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut all = Vec::new();
    // rustls reports an EOF without close_notify as an error (a possible truncation).
    tls.read_to_end(&mut all).expect("the server ends the TLS session with close_notify");
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("ok"), "{text}");
}

/// A streamed answer (`GET /sessions/{id}`, chunked) to a client that asks for the close says
/// so and ends the TLS session with close_notify right after its last chunk, not at the
/// server's socket timeout.
#[test]
fn a_streamed_answer_asked_to_close_ends_with_close_notify() {
    let server = tls_server(&["--tls"], &[("GOSLING_IO_TIMEOUT_SECS", "120")]);
    let pin = fingerprint_line(&server);
    let mut conn = BufReader::new(connect(&server.addr, &pin).unwrap());
    let body = serde_json::json!({ "working_dir": std::env::temp_dir() });
    let started = exchange_json(&mut conn, "POST", "/agent/start", Some(SECRET), Some(&body)).unwrap();
    assert_eq!(started.status, 200, "{}", started.body);
    let id = serde_json::from_str::<serde_json::Value>(&started.body).unwrap()["id"].as_str().unwrap().to_string();
    let mut tls = conn.into_inner();
    tls.sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "GET /sessions/{id} HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).unwrap();
    let mut all = Vec::new();
    tls.read_to_end(&mut all).expect("the server ends the TLS session with close_notify after the last chunk");
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 200") && text.contains("Connection: close\r\n"), "{text}");
    assert!(text.contains(&id) && text.ends_with("\r\n0\r\n\r\n"), "{text}");
}

#[test]
fn certificate_and_key_files_are_served_and_pinned() {
    let dir = TempDir::new("tls-files");
    let made = gosling::tls::self_signed("127.0.0.1".parse().unwrap(), gosling::util::unix_secs()).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert_pem()).unwrap();
    std::fs::write(&key, made.key_pem()).unwrap();
    let server = tls_server(
        &[],
        &[
            ("GOOSE_TLS", "true"),
            ("GOOSE_TLS_CERT_PATH", cert.to_str().unwrap()),
            ("GOOSE_TLS_KEY_PATH", key.to_str().unwrap()),
        ],
    );
    let pin = fingerprint_line(&server);
    assert_eq!(pin, sha256_colon_hex(&made.cert_der), "the fingerprint is the file's certificate");
    assert_eq!(https(&server.addr, &pin, "GET", "/config", Some(SECRET)).unwrap().status, 200);
}

/// Starts with `env` and expects a start-up failure; returns stderr.
fn start_error(env: &[(&str, &str)]) -> String {
    let home = TempDir::new("tls-err");
    let out = gosling(&home)
        .args(["agent", "--port", "0"])
        .env("GOOSE_SERVER__SECRET_KEY", SECRET)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "must not start with {env:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "no listening line on failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_tls_configuration_is_a_start_up_error_naming_the_variable() {
    let dir = TempDir::new("tls-bad");
    let made = gosling::tls::self_signed("127.0.0.1".parse().unwrap(), gosling::util::unix_secs()).unwrap();
    let other = gosling::tls::self_signed("127.0.0.1".parse().unwrap(), gosling::util::unix_secs()).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let cert = write("cert.pem", &made.cert_pem());
    let key = write("key.pem", &made.key_pem());
    let other_key = write("other-key.pem", &other.key_pem());
    let garbage = write("garbage.pem", "this is not a certificate\n");
    let bad_b64 = write("bad.pem", "-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n");
    let encrypted =
        write("enc.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n");
    let missing = dir.join("missing.pem").to_str().unwrap().to_string();

    type Vars<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Vars<'_>, Vec<&str>)> = vec![
        (vec![("GOOSE_TLS_CERT_PATH", &cert)], vec!["GOOSE_TLS_CERT_PATH is set but GOOSE_TLS_KEY_PATH is not"]),
        (vec![("GOOSE_TLS_KEY_PATH", &key)], vec!["GOOSE_TLS_KEY_PATH is set but GOOSE_TLS_CERT_PATH is not"]),
        (
            vec![("GOOSE_TLS_CERT_PATH", &missing), ("GOOSE_TLS_KEY_PATH", &key)],
            vec!["cannot read GOOSE_TLS_CERT_PATH", "missing.pem"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &cert), ("GOOSE_TLS_KEY_PATH", &missing)],
            vec!["cannot read GOOSE_TLS_KEY_PATH", "missing.pem"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &garbage), ("GOOSE_TLS_KEY_PATH", &key)],
            vec!["GOOSE_TLS_CERT_PATH", "no `-----BEGIN CERTIFICATE-----` block"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &bad_b64), ("GOOSE_TLS_KEY_PATH", &key)],
            vec!["GOOSE_TLS_CERT_PATH", "not valid base64"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &cert), ("GOOSE_TLS_KEY_PATH", &cert)],
            vec!["GOOSE_TLS_KEY_PATH", "no private key block"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &cert), ("GOOSE_TLS_KEY_PATH", &encrypted)],
            vec!["GOOSE_TLS_KEY_PATH", "encrypted"],
        ),
        (
            vec![("GOOSE_TLS_CERT_PATH", &cert), ("GOOSE_TLS_KEY_PATH", &other_key)],
            vec!["cannot be used", "GOOSE_TLS_KEY_PATH"],
        ),
    ];
    for (vars, wanted) in cases {
        let mut env = vec![("GOOSE_TLS", "true")];
        env.extend(vars.iter().copied());
        let err = start_error(&env);
        for w in &wanted {
            assert!(err.contains(w), "{vars:?}: expected {w:?} in stderr:\n{err}");
        }
    }
    assert!(start_error(&[("GOOSE_TLS", "perhaps")]).contains("GOOSE_TLS=\"perhaps\""));
}

#[test]
fn https_is_the_default_and_goose_tls_false_or_no_tls_opt_out() {
    // As goosed 1.34: nothing set → HTTPS with the fingerprint line (Desktop sets no GOOSE_TLS).
    let server = Server::start_with(ServerOpts { default_tls: true, ..ServerOpts::default() });
    assert!(server.tls, "the listening line says https://");
    let pin = fingerprint_line(&server);
    assert_eq!(https(&server.addr, &pin, "GET", "/status", None).unwrap().status, 200);
    for (args, env) in [(vec![], vec![("GOOSE_TLS", "false")]), (vec!["--no-tls"], vec![])] {
        let server = tls_server(&args, &env);
        assert!(!server.tls, "{args:?} {env:?}");
        assert!(!server.early_stdout.iter().any(|l| l.contains(PREFIX)), "{env:?}: {:?}", server.early_stdout);
        assert_eq!(server.get("/status").status, 200);
    }
}

#[test]
fn a_streamed_reply_over_tls() {
    use crate::fake_llm::{oa_finish, oa_text, FakeLlm, Reply as LlmReply, OA_DONE};
    use serde_json::json;
    let llm = FakeLlm::start(vec![LlmReply::sse(&[
        oa_text("Hel"),
        oa_text("lo over "),
        oa_text("TLS"),
        oa_finish("stop"),
        OA_DONE.to_string(),
    ])]);
    // The server's socket timeout far beyond this client's (20 s): only its close ends the
    // read to the end below.
    let server = tls_server(
        &["--tls"],
        &[
            ("GOOSE_PROVIDER", "openai"),
            ("GOOSE_MODEL", "mock-model"),
            ("OPENAI_HOST", &llm.url()),
            ("GOSLING_IO_TIMEOUT_SECS", "120"),
        ],
    );
    let pin = fingerprint_line(&server);
    let mut conn = BufReader::new(connect(&server.addr, &pin).unwrap());
    conn.get_ref().sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let work = std::env::temp_dir();
    let started =
        exchange_json(&mut conn, "POST", "/agent/start", Some(SECRET), Some(&json!({"working_dir": work}))).unwrap();
    assert_eq!(started.status, 200, "{}", started.body);
    let id = serde_json::from_str::<serde_json::Value>(&started.body).unwrap()["id"].as_str().unwrap().to_string();
    let resumed = exchange_json(
        &mut conn,
        "POST",
        "/agent/resume",
        Some(SECRET),
        Some(&json!({"session_id": id, "load_model_and_extensions": true})),
    )
    .unwrap();
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let message = json!({"role": "user", "created": 1735725600, "content": [{"type": "text", "text": "hi"}], "metadata": {"userVisible": true, "agentVisible": true}});
    let reply = exchange_json(
        &mut conn,
        "POST",
        "/reply",
        Some(SECRET),
        Some(&json!({"session_id": id, "user_message": message})),
    )
    .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.headers.iter().any(|(k, v)| k == "content-type" && v == "text/event-stream"));
    let events: Vec<serde_json::Value> = reply
        .body
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "Message")
        .flat_map(|e| e["message"]["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, "Hello over TLS");
    assert_eq!(events.last().unwrap()["type"], "Finish", "{events:?}");
    // The event stream said `Connection: close` (the session's streamed answer of
    // /agent/resume above did not, and its connection was reused) and keeps its word: the
    // TLS session ends with close_notify right after the last chunk (rustls reports an EOF
    // without it as an error), not at the server's socket timeout.
    assert!(reply.headers.iter().any(|(k, v)| k == "connection" && v == "close"), "{:?}", reply.headers);
    assert!(resumed.headers.iter().all(|(k, _)| k != "connection"), "{:?}", resumed.headers);
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).expect("the server closes the TLS session after the last chunk, with close_notify");
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[test]
fn a_burst_of_tls_connections_is_answered_and_one_over_the_cap_is_told_why() {
    let server = tls_server(&["--tls"], &[("GOSLING_MAX_CONNECTIONS", "16")]);
    let pin = fingerprint_line(&server);
    // 16 at once on a fresh server, each handshaking and asking, all kept open: every one answered.
    let started = std::time::Instant::now();
    let mut held: Vec<BufReader<Tls>> = (0..16).map(|_| BufReader::new(connect(&server.addr, &pin).unwrap())).collect();
    for (i, c) in held.iter_mut().enumerate() {
        assert_eq!(exchange(c, "GET", "/status", None).unwrap().status, 200, "connection {i}");
    }
    // A connection left waiting for a thread would wait for another to go idle: the server's
    // 30 s idle timeout.
    crate::support::assert_well_under(started.elapsed(), Duration::from_secs(30), "16 TLS connections answered");
    // Idle connections make room for new ones, so make all 16 busy: each follows the event
    // stream of a session (a request that is never done), known to be followed once the
    // stream's first ping arrives. The 17th is then refused, and told why.
    let body = serde_json::json!({ "working_dir": std::env::temp_dir() });
    let started = exchange_json(&mut held[0], "POST", "/agent/start", Some(SECRET), Some(&body)).unwrap();
    assert_eq!(started.status, 200, "{}", started.body);
    let id = serde_json::from_str::<serde_json::Value>(&started.body).unwrap()["id"].as_str().unwrap().to_string();
    for c in &mut held {
        let head = format!("GET /sessions/{id}/events HTTP/1.1\r\nHost: localhost\r\nX-Secret-Key: {SECRET}\r\n\r\n");
        c.get_mut().write_all(head.as_bytes()).unwrap();
        c.get_mut().flush().unwrap();
        let mut line = String::new();
        while !line.starts_with(": ping") {
            line.clear();
            assert!(c.read_line(&mut line).unwrap() > 0, "the event stream ended");
        }
    }
    let mut extra = BufReader::new(connect(&server.addr, &pin).unwrap());
    let mut answer = String::new();
    let _ = extra.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    assert!(answer.contains("too many open connections"), "{answer:?}");
}
