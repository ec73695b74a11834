//! The certificates a Streamable HTTP MCP server and its authorization server are verified
//! against: the platform's verifier, or with `SSL_CERT_FILE` that bundle plus the system's.
//! Its own module so that `streamable_http` and `oauth` both use it without importing each
//! other's internals.

use crate::error::Error;

/// Well-known system CA bundles, read when `SSL_CERT_FILE` adds to (rather than replaces) them.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
];

/// The platform verifier by default; with `SSL_CERT_FILE`, that bundle plus the system's.
pub fn root_certs() -> Result<ureq::tls::RootCerts, Error> {
    let Some(path) = gosling_config::settings::ssl_cert_file(&gosling_config::ProcessEnv) else {
        return Ok(ureq::tls::RootCerts::PlatformVerifier);
    };
    let pem = std::fs::read(&path)
        .map_err(|error| Error::CaBundleUnreadable { path: path.clone(), error: std::sync::Arc::new(error) })?;
    let mut certs = pem_certs(&pem);
    if certs.is_empty() {
        return Err(Error::CaBundleEmpty { path });
    }
    if let Some(sys) = SYSTEM_BUNDLES.iter().find_map(|bundle| std::fs::read(bundle).ok()) {
        certs.extend(pem_certs(&sys));
    }
    Ok(ureq::tls::RootCerts::new_with_certs(&certs))
}

fn pem_certs(pem: &[u8]) -> Vec<ureq::tls::Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}
