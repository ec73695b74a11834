//! The tls layer's one error type, and what is wrong with a PEM file.

use rustls::pki_types::pem;
use std::fmt;
use std::io;
use std::path::PathBuf;

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
