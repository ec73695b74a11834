//! `gosling agent`: resolve the secret, open the store, listen, serve until SIGTERM/SIGINT.

use crate::agent::host::Host;
use crate::config::{Config, SecretSource};
use crate::http::server::{Limits, Server};
use crate::http::state::App;
use crate::store::{atomic, config_store::ConfigStore};
use std::fmt;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// Why `gosling agent` could not start; each says what to change.
#[derive(Debug)]
pub enum Error {
    /// A command-line argument gosling does not know.
    UnknownArgument(String),
    /// A flag without the value it needs (`--port`, `--host`), and what that value is.
    MissingValue {
        flag: &'static str,
        expected: &'static str,
    },
    Config(crate::config::Error),
    /// Listening beyond this machine needs a secret key the person chose.
    NoSecret(IpAddr),
    /// The state or config dir, or a file in it (the store's error names it).
    Store(atomic::Error),
    Tls(crate::tls::TlsError),
    Policy(crate::extensions::policy::PolicyError),
    Listen {
        addr: SocketAddr,
        source: io::Error,
    },
    Serve(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownArgument(a) => write!(f, "agent: unknown argument {a:?}; see --help"),
            Error::MissingValue { flag, expected } => write!(f, "{flag} needs {expected}"),
            Error::Config(e) => write!(f, "{e}"),
            Error::NoSecret(host) => write!(
                f,
                "agent: refusing to listen on {host} (beyond this machine) without a secret key you chose; set GOOSE_SERVER__SECRET_KEY"
            ),
            Error::Store(e) => write!(f, "{e}"),
            Error::Tls(e) => write!(f, "{e}"),
            Error::Policy(e) => write!(f, "{e}"),
            Error::Listen { addr, source } => {
                write!(f, "agent: cannot listen on {addr}: {source}; pick another port with GOOSE_PORT or --port")
            }
            Error::Serve(e) => write!(f, "agent: cannot start the HTTP server: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Without `GOOSE_SERVER__SECRET_KEY`, the random secret kept in a 0600 file in the state dir
/// for clients on this machine (never a fixed default): made once, then reused.
fn resolve_secret(cfg: &mut Config) -> Result<(), Error> {
    if !cfg.secret.is_empty() {
        return Ok(());
    }
    let (secret, path) = crate::store::secret_key::load_or_create(&cfg.state_dir).map_err(Error::Store)?;
    cfg.secret = secret;
    cfg.secret_source = SecretSource::Generated(path);
    Ok(())
}

/// A line on stdout for the client that started us, flushed at once; a closed stdout is not
/// an error (the server serves on).
fn announce(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

pub fn run(mut cfg: Config) -> Result<(), Error> {
    if !cfg.host.is_loopback() && cfg.secret.is_empty() {
        return Err(Error::NoSecret(cfg.host));
    }
    // Other processes of this user (an extension, the developer builtin's shell) must not read
    // our environment or memory: the server key and provider keys live there.
    if let Err(e) = crate::sys::make_non_dumpable() {
        log::warn!("cannot make the server non-dumpable ({e}); same-user processes can read its environment");
    }
    // Descendants of extensions that escape their process group become ours, to be ended.
    if let Err(e) = crate::sys::become_subreaper() {
        log::warn!("cannot become a child subreaper ({e}); an extension's daemons may outlive it");
    }
    check_dirs(&cfg)?;
    resolve_secret(&mut cfg)?;
    let tls = if cfg.tls.enabled {
        Some(crate::tls::ServerTls::from_config(&cfg.tls, cfg.host).map_err(Error::Tls)?)
    } else {
        None
    };
    let store = ConfigStore::open(&cfg.config_dir).map_err(Error::Store)?;
    let bind = SocketAddr::new(cfg.host, cfg.port);
    let listener = TcpListener::bind(bind).map_err(|source| Error::Listen { addr: bind, source })?;
    // Every connection holds two descriptors; keep a quarter of them for files, children and
    // outgoing connections, so a flood of clients cannot starve the rest of the server.
    let fds = crate::sys::raise_fd_limit();
    let max_connections = cfg.max_connections.unwrap_or_else(|| (fds.saturating_sub(fds / 4) / 2).clamp(16, 4096));
    log::debug!("file descriptor limit {fds}; at most {max_connections} connections");
    let limits =
        Limits { max_requests: cfg.max_requests, max_body: cfg.max_body, io_timeout: cfg.io_timeout, max_connections };
    if let SecretSource::Generated(path) = &cfg.secret_source {
        eprintln!("gosling: GOOSE_SERVER__SECRET_KEY is not set; generated a secret key in {}", path.display());
    }
    let sessions = crate::store::sessions::SessionStore::open(&cfg.state_dir).map_err(Error::Store)?;
    let policy = crate::extensions::policy::Policy::from_env(&crate::config::ProcessEnv, &cfg.config_dir)
        .map_err(Error::Policy)?;
    let app = Arc::new(App::new(Arc::new(Host::new(cfg, store, sessions, policy))));
    crate::sys::install_shutdown_handler();
    // goosed's line, for clients that pin the certificate (Goose Desktop waits for it before
    // its first request); printed before the server accepts connections.
    if let Some(tls) = &tls {
        announce(&format!("GOOSED_CERT_FINGERPRINT={}", tls.fingerprint));
    }
    let handler_app = app.clone();
    let mut server = Server::start_with_tls(
        listener,
        limits,
        tls.as_ref(),
        Arc::new(move |req| crate::http::routes::handle(&handler_app, req)),
    )
    .map_err(Error::Serve)?;
    log::info!("gosling {} serving on {}://{}", env!("CARGO_PKG_VERSION"), server.scheme(), server.addr());
    announce(&format!("gosling listening on {}://{}", server.scheme(), server.addr()));
    // A person at a terminal gets a one-time link for the web page (never the key itself).
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) || std::env::var_os("GOSLING_PRINT_LOGIN_LINK").is_some() {
        if let Some(token) = app.login.peek() {
            eprintln!(
                "gosling: web page: {}://{}/#login={token} (works once, for 10 minutes)",
                server.scheme(),
                server.addr()
            );
        }
    }
    while !crate::sys::shutdown_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    log::info!("shutting down");
    server.stop();
    app.shutdown();
    // Whatever extensions left behind outside their process groups (now our children).
    let ended = crate::sys::end_orphans(|_| true);
    if ended > 0 {
        log::info!("ended {ended} leftover extension process(es)");
    }
    Ok(())
}

/// The state and config dirs must be ours alone, and the files gosling keeps there must not be
/// symbolic links (the opens refuse links too; this names the problem at start).
fn check_dirs(cfg: &Config) -> Result<(), Error> {
    use crate::store::atomic::{check_private_dir, refuse_symlinks};
    check_private_dir(&cfg.state_dir).map_err(Error::Store)?;
    check_private_dir(&cfg.config_dir).map_err(Error::Store)?;
    refuse_symlinks(&cfg.state_dir, &["audit.jsonl", "secret-key", "sessions"]).map_err(Error::Store)?;
    refuse_symlinks(
        &cfg.config_dir,
        &["config.json", "config.json.lock", "secrets.json", "secrets.json.lock", "allowlist.json"],
    )
    .map_err(Error::Store)
}
