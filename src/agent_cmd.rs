//! `gosling agent` and `gosling serve`: resolve the secret, set up TLS, build the core
//! (`core::build`), listen, serve until SIGTERM/SIGINT. The two serve the same HTTP server;
//! `serve` takes `goose serve`'s command line (Goose Desktop 1.41+ starts it): the secret is
//! required, and its self-signed certificate is kept under the config dir and reused.

use crate::Error;
use gosling_config::{Config, SecretSource};
use gosling_http::server::{Limits, Server};
use gosling_http::state::App;
use gosling_store::atomic;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// The shortest `GOOSE_SERVER__SECRET_KEY` accepted: a key anyone could guess (one character,
/// a word) is no secret, however slowly guesses are allowed. Goose Desktop sends 64 hex digits;
/// the generated key is longer still.
pub const MIN_SECRET_CHARS: usize = 16;

/// Without `GOOSE_SERVER__SECRET_KEY`, the random secret kept in a 0600 file in the state dir
/// for clients on this machine (never a fixed default): made once, then reused.
/// Whether the key was generated now (else read from the file an earlier start made).
fn resolve_secret(cfg: &mut Config) -> Result<bool, Error> {
    if !cfg.secret.is_empty() {
        return Ok(false);
    }
    let (secret, path, created) = gosling_store::secret_key::load_or_create(&cfg.state_dir).map_err(Error::Store)?;
    cfg.secret = secret;
    cfg.secret_source = SecretSource::Generated(path);
    Ok(created)
}

/// A line on stdout for the client that started us, flushed at once; a closed stdout is not
/// an error (the server serves on).
fn announce(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// What `gosling serve` adds to `gosling agent` (goose serve's flags; the rest are mapped
/// onto the `Config` by the command line parser).
#[derive(Debug, Clone, Default)]
pub struct Serve {
    /// `--dangerously-unauthenticated`: start without `GOOSE_SERVER__SECRET_KEY`.
    pub unauthenticated: bool,
    /// `--platform X` (goose's: `desktop`, `cli`…), logged.
    pub platform: Option<String>,
    /// `--enable-scheduler`: gosling has no scheduler; accepted and logged.
    pub scheduler: bool,
}

/// Which front end the HTTP server is started as.
#[derive(Debug, Clone)]
pub enum Mode {
    /// `gosling agent` (goosed's command line).
    Agent,
    /// `gosling serve` (goose serve's).
    Serve(Serve),
}

/// Where `gosling serve --tls` keeps its self-signed certificate, under the config dir.
pub const KEPT_CERT: &str = "tls/server.pem";
pub const KEPT_KEY: &str = "tls/server.key";
/// A kept certificate older than this is replaced (it is valid for a year).
const KEPT_CERT_MAX_AGE: Duration = Duration::from_secs(300 * 86_400);

/// The self-signed pair `serve` made on an earlier start, or a new one written 0600 through
/// the store. A kept pair that does not load (corrupt, a key of another certificate, old) is
/// replaced, with a log line naming the files: it is gosling's own cache, and Desktop pins the
/// certificate afresh at each launch.
fn kept_tls(cfg: &Config) -> Result<gosling_tls::ServerTls, Error> {
    use gosling_tls::{SelfSigned, ServerTls};
    let dir = cfg.config_dir.join("tls");
    atomic::ensure_subdir(&dir).map_err(Error::Store)?;
    atomic::refuse_symlinks(&dir, &["server.pem", "server.key"]).map_err(Error::Store)?;
    let (cert_path, key_path) = (cfg.config_dir.join(KEPT_CERT), cfg.config_dir.join(KEPT_KEY));
    let cert = atomic::read_file(&cert_path).map_err(Error::Store)?;
    let key = atomic::read_file(&key_path).map_err(Error::Store)?;
    let age = std::fs::metadata(&cert_path).ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
    let why_new = match (&cert, &key) {
        (None, None) => None,
        (Some(c), Some(k)) => match SelfSigned::from_pems(c, k).map(|p| ServerTls::from_self_signed(&p)) {
            Some(Ok(tls)) if age.is_none_or(|a| a < KEPT_CERT_MAX_AGE) => return Ok(tls),
            Some(Ok(_)) => Some("it is more than 300 days old".to_string()),
            Some(Err(e)) => Some(format!("it does not load: {e}")),
            None => Some("they are not one PEM certificate and one PKCS#8 key".to_string()),
        },
        _ => Some("one of the two is missing".to_string()),
    };
    if let Some(why) = why_new {
        log::warn!(
            "the kept certificate {} and key {} are replaced by a new self-signed pair: {why}",
            cert_path.display(),
            key_path.display()
        );
    }
    let made = gosling_tls::self_signed(cfg.host, gosling_util::unix_secs()).map_err(Error::Tls)?;
    let tls = ServerTls::from_self_signed(&made).map_err(Error::Tls)?;
    atomic::write_atomic(&key_path, made.key_pem().as_bytes()).map_err(Error::Store)?;
    atomic::write_atomic(&cert_path, made.cert_pem().as_bytes()).map_err(Error::Store)?;
    log::info!("made a self-signed certificate, kept in {}", cert_path.display());
    Ok(tls)
}

/// `gosling agent`'s first start on a config dir without `config.json`: the builtins of
/// `GOSLING_FIRST_RUN_EXTENSIONS` (default `developer`, as goose Desktop has it; `none` for
/// none) enabled, so a new user's model has tools at once, and the page's Extensions dialog
/// switches them. The document a missing `config.json` holds (empty when it exists or none
/// are wanted): the core reads it from memory, and `save_first_run` writes it once the server
/// answers, off the start's path (`ConfigStore::with_first_run`); an existing config, saved by
/// the person or another process meanwhile, is never touched.
fn first_run_config(cfg: &Config) -> serde_json::Map<String, serde_json::Value> {
    let mut doc = serde_json::Map::new();
    if std::fs::symlink_metadata(cfg.config_dir.join("config.json")).is_ok() {
        return doc;
    }
    let wanted = gosling_config::settings::first_run_extensions(&gosling_config::ProcessEnv);
    let mut extensions = serde_json::Map::new();
    for name in wanted.split(',').map(str::trim).filter(|n| !n.is_empty() && *n != "none") {
        if !gosling_builtins::KNOWN.contains(&name) {
            log::warn!(
                "GOSLING_FIRST_RUN_EXTENSIONS: no builtin {name:?} (gosling has {}); left out",
                gosling_builtins::KNOWN.join(", ")
            );
            continue;
        }
        let mut display = name.to_string();
        display[..1].make_ascii_uppercase();
        let entry = serde_json::json!({
            "enabled": true, "type": "builtin", "name": name, "description": "", "display_name": display,
            "timeout": 300, "bundled": true, "available_tools": []
        });
        extensions.insert(name.to_string(), entry);
    }
    if !extensions.is_empty() {
        doc.insert("extensions".into(), serde_json::Value::Object(extensions));
    }
    doc
}

/// How long after the listening line the first-run config is saved.
const FIRST_RUN_SAVE_AFTER: Duration = Duration::from_millis(250);

/// Writes the first-run document into a still missing `config.json`, after the server
/// answers: until then (and if this fails) the core reads it from memory, and the first change
/// of the config writes it with the change.
fn save_first_run(cfg_dir: &std::path::Path, doc: serde_json::Map<String, serde_json::Value>) {
    let names: Vec<String> =
        doc.get("extensions").and_then(|e| e.as_object()).into_iter().flat_map(|e| e.keys().cloned()).collect();
    match gosling_store::config_store::ConfigStore::open(cfg_dir).and_then(|s| s.with_first_run(doc).save_first_run()) {
        Ok(true) => log::info!(
            "first start on {}: builtin extensions enabled for new sessions: {} (GOSLING_FIRST_RUN_EXTENSIONS=none for none)",
            cfg_dir.display(),
            names.join(", ")
        ),
        Ok(false) => log::info!("first start on {}: a config.json was saved meanwhile; left as it is", cfg_dir.display()),
        Err(e) => log::warn!(
            "cannot save the first start's extensions ({}) in the config: {e}; they are used from memory, and saved with the first change of the config",
            names.join(", ")
        ),
    }
}

pub fn run(mut cfg: Config, mode: Mode) -> Result<(), Error> {
    if let Mode::Serve(s) = &mode {
        if cfg.secret.is_empty() && !s.unauthenticated {
            return Err(Error::ServeNeedsSecret);
        }
        if let Some(unknown) = cfg.with_builtins.iter().find(|b| !gosling_builtins::KNOWN.contains(&b.as_str())) {
            return Err(Error::UnknownBuiltin(unknown.clone()));
        }
    }
    if !cfg.host.is_loopback() && cfg.secret.is_empty() {
        return Err(Error::NoSecret(cfg.host));
    }
    if !cfg.secret.is_empty() && cfg.secret.chars().count() < MIN_SECRET_CHARS {
        return Err(Error::ShortSecret { chars: cfg.secret.chars().count(), min: MIN_SECRET_CHARS });
    }
    let hardened = crate::core::harden();
    crate::core::check_dirs(&cfg)?;
    let generated = resolve_secret(&mut cfg)?;
    let first_run = if matches!(mode, Mode::Agent) { first_run_config(&cfg) } else { serde_json::Map::new() };
    let tls = match (&mode, cfg.tls.enabled, &cfg.tls.cert_path, &cfg.tls.key_path) {
        (_, false, _, _) => None,
        (Mode::Serve(_), true, None, None) => Some(kept_tls(&cfg)?),
        _ => Some(gosling_tls::ServerTls::from_config(&cfg.tls, cfg.host).map_err(Error::Tls)?),
    };
    if let Mode::Serve(s) = &mode {
        log::info!(
            "serve: platform {}, builtins for new sessions: {}",
            s.platform.as_deref().unwrap_or("unset"),
            if cfg.with_builtins.is_empty() { "none".to_string() } else { cfg.with_builtins.join(", ") }
        );
        if s.scheduler {
            log::info!("serve: --enable-scheduler: gosling has no scheduler; schedules/list answers an empty list");
        }
    }
    let bind = SocketAddr::new(cfg.host, cfg.port);
    let listener = TcpListener::bind(bind).map_err(|source| Error::Listen { addr: bind, source })?;
    // Every connection holds two descriptors; keep a quarter of them for files, children and
    // outgoing connections, so a flood of clients cannot starve the rest of the server.
    let fds = hardened.fd_limit;
    let max_connections = cfg.max_connections.unwrap_or_else(|| (fds.saturating_sub(fds / 4) / 2).clamp(16, 4096));
    log::debug!("file descriptor limit {fds}; at most {max_connections} connections");
    let limits =
        Limits { max_requests: cfg.max_requests, max_body: cfg.max_body, io_timeout: cfg.io_timeout, max_connections };
    if let SecretSource::Generated(path) = &cfg.secret_source {
        if generated {
            eprintln!("gosling: GOOSE_SERVER__SECRET_KEY is not set; generated a secret key in {}", path.display());
        } else {
            eprintln!("gosling: GOOSE_SERVER__SECRET_KEY is not set; using the secret key kept in {}", path.display());
        }
    }
    let (state_dir, config_dir) = (cfg.state_dir.clone(), cfg.config_dir.clone());
    let app = Arc::new(App::new(crate::core::build_with_first_run(cfg, first_run.clone())?));
    gosling_sys::install_shutdown_handler();
    // goosed's line, for clients that pin the certificate (Goose Desktop waits for it before
    // its first request); printed before the server accepts connections.
    if let Some(tls) = &tls {
        announce(&format!("GOOSED_CERT_FINGERPRINT={}", tls.fingerprint));
    }
    let (handler_app, gate_app) = (app.clone(), app.clone());
    let mut server = Server::start_with_tls(
        listener,
        limits,
        tls.as_ref(),
        Arc::new(move |req| gosling_http::routes::gate(&gate_app, req)),
        Arc::new(move |req| gosling_http::routes::handle(&handler_app, req)),
    )
    .map_err(Error::Serve)?;
    log::info!("gosling {} serving on {}://{}", env!("CARGO_PKG_VERSION"), server.scheme(), server.addr());
    // The one-time link for the web page (never the key itself) reaches the person however
    // gosling was started: kept in a 0600 file of this server's port in the state dir (other
    // servers on the same state dir keep theirs), whose path (not the link) goes
    // to stdout; a person at a terminal (or GOSLING_PRINT_LOGIN_LINK) also gets it on stderr.
    if let Some(token) = app.login.peek() {
        let link = format!("{}://{}/#login={token}", server.scheme(), server.addr());
        match gosling_store::secret_key::write_login_link(&state_dir, server.addr().port(), &link) {
            Ok(path) => {
                announce(&format!("gosling: web page sign-in link (works once, for 10 minutes) in {}", path.display()))
            }
            Err(e) => log::warn!("cannot keep the web page's sign-in link: {e}"),
        }
        if std::io::IsTerminal::is_terminal(&std::io::stderr())
            || gosling_config::settings::print_login_link(&gosling_config::ProcessEnv)
        {
            eprintln!("gosling: web page: {link} (works once, for 10 minutes)");
        }
    }
    announce(&format!("gosling listening on {}://{}", server.scheme(), server.addr()));
    // The first-run config is saved once the start has settled, so its fsyncs never compete
    // with the client's first requests (served from memory until then); stopped sooner, the
    // config dir is left as it was, and the next start is a first start again.
    if !first_run.is_empty() && !gosling_sys::wait_shutdown(Some(FIRST_RUN_SAVE_AFTER)) {
        save_first_run(&config_dir, first_run);
    }
    // Asleep until SIGTERM/SIGINT: the main thread has nothing else to do, and no timer.
    // wait: the signal is the only event the main thread waits for
    while !gosling_sys::wait_shutdown(None) {}
    log::info!("shutting down");
    server.stop();
    app.shutdown();
    // The streamed bodies end with their last chunk before the process exits under them.
    server.finish_streams(gosling_http::server::STREAMS_FINISH);
    end_orphans();
    Ok(())
}

/// Ends whatever extensions left behind outside their process groups (now our children, as
/// the subreaper); called once the sessions are shut down.
pub fn end_orphans() {
    let ended = gosling_sys::end_orphans(|_| true);
    if ended > 0 {
        log::info!("ended {ended} leftover extension process(es)");
    }
}
