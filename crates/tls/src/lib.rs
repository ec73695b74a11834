//! HTTPS for `gosling agent --tls`, as goosed does it: a certificate (the PEM files named by
//! GOOSE_TLS_CERT_PATH / GOOSE_TLS_KEY_PATH, else a self-signed one made at start), its
//! SHA-256 fingerprint for the `GOOSED_CERT_FINGERPRINT=` line, and the per-connection rustls
//! wrapper handed to the vendored tiny_http.
//!
//! Owns: loading and checking the certificate and key, generating the self-signed pair
//! (ring: P-256 key, ECDSA signature; the DER is `cert.rs`), the rustls server config. It
//! does not bind or print anything (agent_cmd does), and it never logs key material.
#![deny(unsafe_code)]

pub mod cert;

use gosling_config::TlsConfig;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why HTTPS could not be set up. Each names the variable or file to fix.
#[derive(Debug)]
pub enum Error {
    /// Only one of GOOSE_TLS_CERT_PATH / GOOSE_TLS_KEY_PATH is set: set both, or neither for a
    /// self-signed certificate.
    HalfConfigured { set: &'static str, missing: &'static str },
    /// The file a variable names cannot be read.
    Read { var: &'static str, path: PathBuf, source: io::Error },
    /// The file was read but holds no usable PEM of the expected kind.
    BadPem { var: &'static str, path: PathBuf, problem: PemProblem },
    /// rustls refused the pair (unsupported key type, unparsable certificate, or a key that
    /// does not belong to the certificate).
    Rejected { cert: PathBuf, key: PathBuf, reason: String },
    /// Generating the self-signed certificate failed (the OS random source, or rustls
    /// refusing what we made: a bug).
    Generate(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::HalfConfigured { set, missing } => write!(
                f,
                "tls: {set} is set but {missing} is not; set both (PEM certificate chain and private key) or neither (a self-signed certificate is made at start)"
            ),
            Error::Read { var, path, source } => write!(f, "tls: cannot read {var} {}: {source}", path.display()),
            Error::BadPem { var, path, problem } => write!(f, "tls: {var} {}: {problem}", path.display()),
            Error::Rejected { cert, key, reason } => write!(
                f,
                "tls: the certificate in GOOSE_TLS_CERT_PATH {} and the key in GOOSE_TLS_KEY_PATH {} cannot be used: {reason}",
                cert.display(),
                key.display()
            ),
            Error::Generate(why) => write!(f, "tls: cannot make the self-signed certificate: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What is wrong with a PEM file's content (the file is named by `Error::BadPem`).
#[derive(Debug)]
pub enum PemProblem {
    /// Not UTF-8: most likely binary DER.
    NotText,
    /// rustls's PEM reader refused it (a block without its END line, bad base64, …).
    Syntax(pem::Error),
    NoCertificate,
    NoKey,
    EncryptedKey,
    ManyKeys,
}

impl fmt::Display for PemProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PemProblem::NotText => {
                f.write_str("not PEM text (binary DER is not supported; convert it with `openssl x509 -inform der`)")
            }
            PemProblem::Syntax(pem::Error::Base64Decode(e)) => write!(f, "a PEM block is not valid base64 ({e})"),
            PemProblem::Syntax(pem::Error::MissingSectionEnd { end_marker }) => {
                write!(f, "a PEM block has no `{}` line", String::from_utf8_lossy(end_marker))
            }
            PemProblem::Syntax(e) => write!(f, "not valid PEM: {e}"),
            PemProblem::NoCertificate => {
                f.write_str("no `-----BEGIN CERTIFICATE-----` block; give the PEM certificate chain, leaf first")
            }
            PemProblem::NoKey => f.write_str(
                "no private key block (`-----BEGIN PRIVATE KEY-----`, PKCS#8; convert others with `openssl pkcs8 -topk8 -nocrypt`)",
            ),
            PemProblem::EncryptedKey => f.write_str("the key is encrypted; decrypt it first (`openssl pkcs8 -topk8 -nocrypt`)"),
            PemProblem::ManyKeys => f.write_str("more than one private key; keep only the certificate's"),
        }
    }
}

const CERT_VAR: &str = "GOOSE_TLS_CERT_PATH";
const KEY_VAR: &str = "GOOSE_TLS_KEY_PATH";

/// A ready HTTPS setup: the rustls config and what clients pin.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    /// `AA:BB:…`, SHA-256 of the (leaf) certificate's DER.
    pub fingerprint: String,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

/// A self-signed certificate and its key.
pub struct SelfSigned {
    pub cert_der: Vec<u8>,
    /// PKCS#8 v1 of the P-256 key (as ring makes it).
    pub key_pkcs8: Vec<u8>,
}

impl SelfSigned {
    pub fn cert_pem(&self) -> String {
        cert::pem("CERTIFICATE", &self.cert_der)
    }
    pub fn key_pem(&self) -> String {
        cert::pem("PRIVATE KEY", &self.key_pkcs8)
    }

    /// A pair written by `cert_pem` and `key_pem` read back: one certificate and one PKCS#8
    /// key, or `None` when the text is anything else (the caller makes a new pair).
    pub fn from_pems(cert_pem: &[u8], key_pem: &[u8]) -> Option<SelfSigned> {
        let mut certs = CertificateDer::pem_slice_iter(cert_pem);
        let cert_der = match (certs.next(), certs.next()) {
            (Some(Ok(c)), None) => c.to_vec(),
            _ => return None,
        };
        let mut keys = PrivateKeyDer::pem_slice_iter(key_pem);
        match (keys.next(), keys.next()) {
            (Some(Ok(PrivateKeyDer::Pkcs8(k))), None) => {
                Some(SelfSigned { cert_der, key_pkcs8: k.secret_pkcs8_der().to_vec() })
            }
            _ => None,
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes an ECDSA P-256 certificate for `host` (unless unspecified, e.g. `0.0.0.0`), plus
/// `localhost` and `127.0.0.1`, valid from a day ago for a year, `CN=gosling`.
pub fn self_signed(host: IpAddr, now_unix: i64) -> Result<SelfSigned, Error> {
    use ring::rand::SecureRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING as ALG};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ALG, &rng).map_err(|_| Error::Generate("no randomness for the key".into()))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ALG, pkcs8.as_ref(), &rng)
        .map_err(|e| Error::Generate(format!("the new key does not load: {e}")))?;
    let mut serial = [0u8; 16];
    rng.fill(&mut serial).map_err(|_| Error::Generate("no randomness for the serial".into()))?;
    serial[0] = (serial[0] & 0x7f) | 0x40; // positive, and 16 bytes long
    let mut ips = vec![IpAddr::from([127, 0, 0, 1])];
    if !host.is_unspecified() && !ips.contains(&host) {
        ips.push(host);
    }
    const DAY: i64 = 86_400;
    let tbs = cert::tbs_certificate(&cert::CertParams {
        serial: &serial,
        common_name: "gosling",
        not_before: now_unix - DAY,
        not_after: now_unix + 365 * DAY,
        dns_names: &["localhost".to_string()],
        ips: &ips,
        public_key: pair.public_key().as_ref(),
    });
    let signature = pair.sign(&rng, &tbs).map_err(|_| Error::Generate("signing failed".into()))?;
    Ok(SelfSigned { cert_der: cert::certificate(&tbs, signature.as_ref()), key_pkcs8: pkcs8.as_ref().to_vec() })
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
}

impl ServerTls {
    /// From the process config: the files when both are named, else self-signed for `host`.
    pub fn from_config(cfg: &TlsConfig, host: IpAddr) -> Result<ServerTls, Error> {
        match (&cfg.cert_path, &cfg.key_path) {
            (Some(cert), Some(key)) => ServerTls::from_files(cert, key),
            (Some(_), None) => Err(Error::HalfConfigured { set: CERT_VAR, missing: KEY_VAR }),
            (None, Some(_)) => Err(Error::HalfConfigured { set: KEY_VAR, missing: CERT_VAR }),
            (None, None) => ServerTls::generate(host, gosling_util::unix_secs()),
        }
    }

    pub fn generate(host: IpAddr, now_unix: i64) -> Result<ServerTls, Error> {
        ServerTls::from_self_signed(&self_signed(host, now_unix)?)
    }

    /// Serves a self-signed pair made by `self_signed` (just now, or kept from an earlier start
    /// by the caller, which owns where it lives).
    pub fn from_self_signed(made: &SelfSigned) -> Result<ServerTls, Error> {
        let fingerprint = cert::fingerprint(&made.cert_der);
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pkcs8.clone()));
        let config = server_config(vec![CertificateDer::from(made.cert_der.clone())], key)
            .map_err(|e| Error::Generate(format!("rustls refused it: {e}")))?;
        Ok(ServerTls { config: Arc::new(config), fingerprint })
    }

    /// A PEM certificate chain (leaf first) and a PEM private key: PKCS#8 (`PRIVATE KEY`),
    /// SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`), unencrypted.
    pub fn from_files(cert_path: &Path, key_path: &Path) -> Result<ServerTls, Error> {
        let bad = |problem| Error::BadPem { var: CERT_VAR, path: cert_path.into(), problem };
        let chain = CertificateDer::pem_slice_iter(&read_pem(CERT_VAR, cert_path)?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(PemProblem::Syntax(e)))?;
        if chain.is_empty() {
            return Err(bad(PemProblem::NoCertificate));
        }
        let key = read_key(key_path)?;
        let fingerprint = cert::fingerprint(&chain[0]);
        let config = server_config(chain, key).map_err(|e| Error::Rejected {
            cert: cert_path.into(),
            key: key_path.into(),
            reason: e.to_string(),
        })?;
        Ok(ServerTls { config: Arc::new(config), fingerprint })
    }

    /// The tiny_http stream wrapper: a rustls server session over each accepted socket. No I/O
    /// here; the handshake happens on the connection thread's first read.
    pub fn stream_wrapper(&self) -> tiny_http::StreamWrapper {
        let config = self.config.clone();
        Arc::new(move |tcp: TcpStream| {
            let conn = rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
            Ok(Box::new(TlsStream(rustls::StreamOwned::new(conn, tcp))) as Box<dyn tiny_http::WrappedStream>)
        })
    }
}

/// The file's bytes, refused early when they are not text (so DER gets its own message).
fn read_pem(var: &'static str, path: &Path) -> Result<Vec<u8>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read { var, path: path.into(), source })?;
    if std::str::from_utf8(&bytes).is_err() {
        return Err(Error::BadPem { var, path: path.into(), problem: PemProblem::NotText });
    }
    Ok(bytes)
}

/// The one unencrypted private key (PKCS#8, SEC1 or PKCS#1) in the key file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let bad = |problem| Error::BadPem { var: KEY_VAR, path: path.into(), problem };
    let bytes = read_pem(KEY_VAR, path)?;
    // rustls's reader skips `ENCRYPTED PRIVATE KEY` blocks and cannot read RFC 1421 headers
    // (`Proc-Type: 4,ENCRYPTED`): name the real problem before it says "no key".
    if bytes.windows(b"ENCRYPTED".len()).any(|w| w == b"ENCRYPTED") {
        return Err(bad(PemProblem::EncryptedKey));
    }
    let mut keys = PrivateKeyDer::pem_slice_iter(&bytes);
    match (keys.next(), keys.next()) {
        (None, _) => Err(bad(PemProblem::NoKey)),
        (Some(Err(e)), _) | (Some(Ok(_)), Some(Err(e))) => Err(bad(PemProblem::Syntax(e))),
        (Some(Ok(_)), Some(Ok(_))) => Err(bad(PemProblem::ManyKeys)),
        (Some(Ok(key)), None) => Ok(key),
    }
}

/// One HTTPS connection as tiny_http sees it.
struct TlsStream(rustls::StreamOwned<rustls::ServerConnection, TcpStream>);

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a client and a server session against each other in memory until both are idle.
    fn handshake(
        client: &mut rustls::ClientConnection,
        server: &mut rustls::ServerConnection,
    ) -> Result<(), rustls::Error> {
        for _ in 0..20 {
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).unwrap();
            }
            if !buf.is_empty() {
                server.read_tls(&mut buf.as_slice()).unwrap();
                server.process_new_packets()?;
            }
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).unwrap();
            }
            if !buf.is_empty() {
                client.read_tls(&mut buf.as_slice()).unwrap();
                client.process_new_packets()?;
            }
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        panic!("handshake did not finish");
    }

    fn client_trusting(cert_der: &[u8]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(cert_der.to_vec())).unwrap();
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    #[test]
    fn self_signed_certificate_passes_webpki_validation() {
        // The generated DER goes through rustls-webpki's full path validation: structure,
        // signature, validity at the current time, SAN matching, extended key usage.
        let host = IpAddr::from([10, 1, 2, 3]);
        let made = self_signed(host, gosling_util::unix_secs()).unwrap();
        let tls = {
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pkcs8.clone()));
            Arc::new(server_config(vec![CertificateDer::from(made.cert_der.clone())], key).unwrap())
        };
        for name in ["localhost", "127.0.0.1", "10.1.2.3"] {
            let server_name = rustls::pki_types::ServerName::try_from(name).unwrap().to_owned();
            let mut client = rustls::ClientConnection::new(client_trusting(&made.cert_der), server_name).unwrap();
            let mut server = rustls::ServerConnection::new(tls.clone()).unwrap();
            handshake(&mut client, &mut server).unwrap_or_else(|e| panic!("{name}: {e}"));
            let presented = client.peer_certificates().unwrap();
            assert_eq!(cert::fingerprint(&presented[0]), cert::fingerprint(&made.cert_der));
        }
        // A name not in the certificate is refused.
        let other = rustls::pki_types::ServerName::try_from("example.com").unwrap().to_owned();
        let mut client = rustls::ClientConnection::new(client_trusting(&made.cert_der), other).unwrap();
        let mut server = rustls::ServerConnection::new(tls).unwrap();
        assert!(handshake(&mut client, &mut server).is_err());
    }

    #[test]
    fn expired_certificate_is_refused_by_webpki() {
        // Made two years ago: validity is really encoded and checked.
        let made = self_signed(IpAddr::from([127, 0, 0, 1]), gosling_util::unix_secs() - 2 * 365 * 86_400).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pkcs8.clone()));
        let tls = Arc::new(server_config(vec![CertificateDer::from(made.cert_der.clone())], key).unwrap());
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap().to_owned();
        let mut client = rustls::ClientConnection::new(client_trusting(&made.cert_der), name).unwrap();
        let mut server = rustls::ServerConnection::new(tls).unwrap();
        let err = handshake(&mut client, &mut server).unwrap_err();
        assert!(err.to_string().to_lowercase().contains("expired"), "{err}");
    }

    #[test]
    fn pem_key_formats() {
        let dir = std::env::temp_dir().join(format!("gosling-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let made = self_signed(IpAddr::from([127, 0, 0, 1]), gosling_util::unix_secs()).unwrap();
        let cert = dir.join("cert.pem");
        std::fs::write(&cert, made.cert_pem()).unwrap();
        // The SEC1 ECPrivateKey is the OCTET STRING that ends ring's PKCS#8 v1 document
        // (SEQUENCE { version, algorithm, privateKey OCTET STRING { ECPrivateKey } }).
        // For P-256 that ECPrivateKey is 0x6d bytes long.
        let p8 = &made.key_pkcs8;
        let sec1 = &p8[p8.len() - 0x6d..];
        assert_eq!(p8[p8.len() - 0x6d - 2..p8.len() - 0x6d], [0x04, 0x6d], "OCTET STRING header of the ECPrivateKey");
        for (label, der) in [("PRIVATE KEY", p8.as_slice()), ("EC PRIVATE KEY", sec1)] {
            let key = dir.join("key.pem");
            std::fs::write(&key, cert::pem(label, der)).unwrap();
            let tls = ServerTls::from_files(&cert, &key).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(tls.fingerprint, cert::fingerprint(&made.cert_der));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_rejected() {
        let a = self_signed(IpAddr::from([127, 0, 0, 1]), gosling_util::unix_secs()).unwrap();
        let b = self_signed(IpAddr::from([127, 0, 0, 1]), gosling_util::unix_secs()).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(b.key_pkcs8));
        assert!(server_config(vec![CertificateDer::from(a.cert_der)], key).is_err());
    }
}
