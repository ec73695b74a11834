//! The certificate and key: loaded from the PEM files or generated (self-signed), checked by
//! rustls, with the fingerprint clients pin.

use gosling_config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::fmt;
use std::io;
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

use crate::cert;
use crate::error::{Error, PemProblem};
use crate::stream::TlsStream;

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
