//! HTTPS for `gosling agent --tls`, as goosed does it: a certificate (the PEM files named by
//! GOOSE_TLS_CERT_PATH / GOOSE_TLS_KEY_PATH, else a self-signed one made at start), its
//! SHA-256 fingerprint for the `GOOSED_CERT_FINGERPRINT=` line, and the per-connection rustls
//! wrapper handed to the vendored tiny_http.
//!
//! Owns: loading and checking the certificate and key, generating the self-signed pair
//! (ring: P-256 key, ECDSA signature; the DER is `cert.rs`), the rustls server config. It
//! does not bind or print anything (agent_cmd does), and it never logs key material.
//!
//! The root declares the modules and re-exports their items at the crate's top level.
#![deny(unsafe_code)]

pub mod cert;
mod error;
mod server;
mod stream;

pub use error::{Error, PemProblem};
pub use server::{self_signed, SelfSigned, ServerTls};
