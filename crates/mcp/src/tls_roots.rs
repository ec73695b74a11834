//! The certificates a Streamable HTTP MCP server and its authorization server are verified
//! against: the platform's verifier, or with `SSL_CERT_FILE` that bundle plus the system's.
//! Its own module so that `streamable_http` and `oauth` both use it without importing each
//! other's internals.

/// Well-known system CA bundles, read when `SSL_CERT_FILE` adds to (rather than replaces) them.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
];

/// Why the `SSL_CERT_FILE` bundle cannot be used; says what to do.
#[derive(Debug)]
pub enum CaBundleError {
    Unreadable { path: std::path::PathBuf, error: std::io::Error },
    NoCertificate { path: std::path::PathBuf },
}

impl std::fmt::Display for CaBundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaBundleError::Unreadable { path, error } => write!(
                f,
                "cannot read SSL_CERT_FILE {}: {error}; point it at a PEM CA bundle or unset it",
                path.display()
            ),
            CaBundleError::NoCertificate { path } => write!(
                f,
                "SSL_CERT_FILE {} holds no PEM certificate; point it at a PEM CA bundle or unset it",
                path.display()
            ),
        }
    }
}

impl std::error::Error for CaBundleError {}

/// The platform verifier by default; with `SSL_CERT_FILE`, that bundle plus the system's.
pub fn root_certs() -> Result<ureq::tls::RootCerts, CaBundleError> {
    let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) else {
        return Ok(ureq::tls::RootCerts::PlatformVerifier);
    };
    let path = std::path::PathBuf::from(path);
    let pem = std::fs::read(&path).map_err(|error| CaBundleError::Unreadable { path: path.clone(), error })?;
    let mut certs = pem_certs(&pem);
    if certs.is_empty() {
        return Err(CaBundleError::NoCertificate { path });
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
