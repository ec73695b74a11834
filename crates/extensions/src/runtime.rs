//! The extension runtime of one session: activation of each config type, the tool surface
//! with goose's `<key>__<tool>` naming, dispatch, resources, health and restarts.
//!
//! Builtins and external servers are the same thing here (seed §10): an MCP `Client` over a
//! stdio child or Streamable HTTP. Builtins are this binary run as `gosling mcp NAME`;
//! `inline_python` is a stdio child running the configured code. `frontend` extensions have
//! declared tools but no server: their calls are handed back to the client. A stdio child that
//! dies is restarted with backoff; meanwhile its tools stay listed and calls fail fast.
//! Invariant: a child process never outlives its `ActiveExtension` (close on remove and drop).

use crate::config::{runtime_key, secret_names, ExtensionConfig, Kind, Unresolved};
use crate::error::{Blocked, Error, Invalid};
use crate::policy::InstallSource;
use gosling_mcp::client::{CallContext, Client, ClientOptions};
use gosling_mcp::oauth::{Authorizer, Grant, Settings as OAuthSettings, SignIn, TokenStore};
use gosling_mcp::stdio::StdioSpec;
use gosling_mcp::streamable_http::HttpSpec;
use gosling_util::lock;
use gosling_wire::mcp_types::{CallToolResult, ReadResourceResult, Resource, Tool};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// A stdio child's confinement (`None`: opted out), the variables it adds and what it holds.
type Confined = (Option<gosling_sys::Confinement>, Vec<(String, String)>, Held);

/// What a stdio extension's start holds besides its process, released when the extension
/// ends (removed, stopped when idle, the session or the server shut down, restarted after a
/// crash): its egress proxy, its private temp dir, its pids cgroup. Dropped after the client
/// was closed, that is after the shutdown ladder reaped its processes.
#[derive(Default)]
struct Held {
    /// The egress proxy serving the proxy port of its network namespace (dropping it ends
    /// every pipe).
    egress: Option<crate::egress::Handle>,
    /// Held for its `Drop` (the dir removed).
    #[allow(dead_code)]
    tmp: Option<PrivateTmp>,
    /// Held for its `Drop` (the cgroup removed).
    #[allow(dead_code)]
    pids: Option<gosling_sys::PidsCgroup>,
}

/// A confined extension's private temp dir, `<state>/tmp/<owner>.<n>-<session>-<key>`
/// (`owner`: `sys::owner_tag`, the gosling process that made it), removed with everything in
/// it when dropped, never following a link the extension planted there.
struct PrivateTmp {
    /// `<state>/tmp`: gosling's own, where the extension may not write.
    parent: PathBuf,
    name: String,
}

impl PrivateTmp {
    fn path(&self) -> PathBuf {
        self.parent.join(&self.name)
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let removed = std::fs::File::open(&self.parent)
            .and_then(|dir| gosling_sys::remove_tree_at(&dir, std::ffi::OsStr::new(&self.name)));
        if let Err(e) = removed {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::warn!(
                    "cannot remove the temp dir {} ({e}); the next start of gosling does",
                    self.path().display()
                );
            }
        }
    }
}

/// Removes the private temp dirs under `<state>/tmp` whose gosling process is gone (SIGKILL, a
/// crash, a power cut). Several gosling processes may share a state dir: a dir is judged by
/// the owner tag in its name (`sys::owner_alive`: the pid, its start time and its PID
/// namespace), so a dir of a gosling that runs, or whose PID namespace is not ours, stays, and
/// so do entries that carry no tag. Links in them are removed as links. Once per start.
pub fn sweep_stale_tmp(state_dir: &Path) {
    let parent = state_dir.join("tmp");
    let Ok(dir) = std::fs::File::open(&parent) else { return };
    let Ok(rd) = std::fs::read_dir(&parent) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(tag) = name.to_str().and_then(tmp_owner) else { continue };
        if gosling_sys::owner_alive(tag) == Some(false) {
            match gosling_sys::remove_tree_at(&dir, &name) {
                Ok(()) => log::info!("removed the temp dir {} of a gosling that is gone", e.path().display()),
                Err(err) => log::warn!("cannot remove the stale temp dir {} ({err})", e.path().display()),
            }
        }
    }
}

/// The owner tag of a private temp dir's name (`<ns>.<pid>.<start>.<n>-…`), if it has one.
fn tmp_owner(name: &str) -> Option<&str> {
    let (owner, _) = name.split_once('-')?;
    let (tag, n) = owner.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(n) && tag.split('.').count() == 3 && tag.split('.').all(digits)).then_some(tag)
}

/// How long a sign-in started over the API waits for the browser's redirect.
const SIGN_IN_WAIT: Duration = Duration::from_secs(600);

/// Finds a secret by name in the secrets store. Never gosling's own environment.
pub type SecretLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What activation needs from outside the runtime.
pub struct Deps {
    pub state_dir: PathBuf,
    /// Resolves an `env_keys` secret or header variable: the secrets store only.
    pub secret: SecretLookup,
    /// How to start a builtin: this binary, with `mcp NAME`.
    pub self_exe: PathBuf,
    pub audit: gosling_store::audit::AuditLog,
    /// Asks the person for what an extension's `elicitation/create` wants: `(session,
    /// extension, params)` → MCP ElicitResult. With it, the client declares elicitation.
    pub elicit: Option<Elicitor>,
    /// Answers an extension's `sampling/createMessage` with the session's model: `(session,
    /// extension, params)` → MCP CreateMessageResult. With it, the client declares sampling.
    pub sample: Option<Sampler>,
    /// Where OAuth tokens of Streamable HTTP extensions live (the secrets store); `None`:
    /// a server that asks for sign-in fails with its 401.
    pub tokens: Option<Arc<dyn TokenStore>>,
    /// The trust policy in force, checked at every activation (start, resume, restart, a new
    /// working dir, ACP `session/new`/`load`): a stored extension the allowlist no longer
    /// admits does not start. `None`: no policy (nothing outside the runtime's own checks).
    pub policy: Option<crate::policy::Policy>,
}

/// The secrets store (`secrets.json`, 0600) as the MCP client's OAuth token store.
pub struct SecretsTokens(pub Arc<gosling_store::config_store::ConfigStore>);

impl TokenStore for SecretsTokens {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get_secret(key).unwrap_or_else(|e| {
            log::warn!("{e}");
            None
        })
    }
    fn put(&self, key: &str, value: Option<&str>) {
        if let Err(e) = self.0.put_token(key, value) {
            log::error!("cannot store an OAuth token: {e}");
        }
    }
    fn keys(&self, prefix: &str) -> Vec<String> {
        self.0.token_keys(prefix).unwrap_or_default()
    }
}

/// Sign-in settings for a Streamable HTTP extension from its `oauth` object; the client
/// secret is looked up by name with `secret`.
pub fn oauth_settings(
    config: &ExtensionConfig,
    secret: &dyn Fn(&str) -> Option<String>,
    store: Arc<dyn TokenStore>,
    sign_in: SignIn,
) -> Result<OAuthSettings, Error> {
    let o = config.oauth().map_err(Error::invalid_config)?;
    let client_secret = o.client_secret_key.as_ref().map(|k| secret(k).ok_or_else(|| {
        if crate::config::is_reserved_secret(k) {
            return Error::NotStarted(Blocked::OwnSecret { name: k.clone(), field: "oauth.client_secret_key" });
        }
        Error::InvalidConfig(Invalid::Message(format!(
            "the OAuth client secret {k:?} (oauth.client_secret_key) is not set; store it with POST /config/upsert {{\"key\":\"{k}\",\"value\":\"...\",\"is_secret\":true}}"
        )))
    }));
    Ok(OAuthSettings {
        client_id: o.client_id,
        client_secret: client_secret.transpose()?,
        scopes: o.scopes,
        client_metadata_url: o.client_metadata_url,
        client_name: "gosling".into(),
        sign_in,
        store,
    })
}

/// The authorizer of a Streamable HTTP extension: `oauth_settings`, and the grant its
/// `oauth.grant` names (a person's sign-in by default) with the key or tokens it needs. Its
/// stored secrets are looked up with `secret` now; a workload token file is read at each grant.
pub fn oauth_authorizer(
    config: &ExtensionConfig,
    uri: &str,
    timeout: Duration,
    secret: &dyn Fn(&str) -> Option<String>,
    store: Arc<dyn TokenStore>,
    sign_in: SignIn,
) -> Result<Authorizer, Error> {
    let o = config.oauth().map_err(Error::invalid_config)?;
    let settings = oauth_settings(config, secret, store, sign_in)?;
    let needed = |k: &str, field: &'static str| -> Result<String, Error> {
        secret(k).ok_or_else(|| {
            if crate::config::is_reserved_secret(k) {
                return Error::NotStarted(Blocked::OwnSecret { name: k.to_string(), field });
            }
            Error::InvalidConfig(Invalid::Message(format!(
                "the OAuth secret {k:?} ({field}) is not set; store it with POST /config/upsert {{\"key\":\"{k}\",\"value\":\"...\",\"is_secret\":true}}"
            )))
        })
    };
    let mut auth = Authorizer::new(uri, config.name(), timeout, settings);
    if let Some(k) = &o.client_assertion_key {
        let pem = needed(k, "oauth.client_assertion_key")?;
        let key = gosling_mcp::oauth::SigningKey::from_pem(&pem).map_err(|e| {
            Error::InvalidConfig(Invalid::Message(format!(
                "the private key in the stored secret {k:?} (oauth.client_assertion_key) is not usable: {e}"
            )))
        })?;
        auth = auth.with_client_key(key);
    }
    let grant = match (o.grant.as_deref(), &o.token_file, &o.idp) {
        (Some("client_credentials"), ..) => Grant::ClientCredentials,
        (Some("jwt_bearer"), Some(file), _) => {
            let file = PathBuf::from(file);
            Grant::JwtBearer { assertion: Arc::new(move || read_token_file(&file)) }
        }
        (Some("enterprise_managed"), _, Some(idp)) => {
            let id_token = needed(&idp.id_token_key, "oauth.idp.id_token_key")?;
            Grant::EnterpriseManaged {
                idp_token_endpoint: idp.token_endpoint.clone(),
                idp_client_id: idp.client_id.clone(),
                idp_client_secret: idp
                    .client_secret_key
                    .as_ref()
                    .map(|k| needed(k, "oauth.idp.client_secret_key"))
                    .transpose()?,
                id_token: Arc::new(move || Ok(id_token.clone())),
            }
        }
        _ => Grant::AuthorizationCode,
    };
    Ok(auth.with_grant(grant))
}

/// A workload identity token: the file's text, trimmed; not followed if it is a link, bounded.
fn read_token_file(path: &Path) -> Result<String, String> {
    let bytes = gosling_store::atomic::read_file(path)
        .map_err(|e| format!("{e} (oauth.token_file; a symbolic link is not followed: name the file it points to)"))?
        .ok_or_else(|| format!("{} does not exist (oauth.token_file)", path.display()))?;
    if bytes.len() > 64 << 10 {
        return Err(format!("{} is larger than 64 KiB; is it the workload token? (oauth.token_file)", path.display()));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is not text (oauth.token_file)", path.display()))?;
    let token = text.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{} holds no JWT (oauth.token_file)", path.display()));
    }
    Ok(token.to_string())
}

/// See `Deps::elicit`.
pub type Elicitor = Arc<dyn Fn(&str, &str, &Value) -> Value + Send + Sync>;

/// See `Deps::sample`.
pub type Sampler = Arc<dyn Fn(&str, &str, &Value) -> Result<Value, gosling_wire::jsonrpc::ErrorObject> + Send + Sync>;

/// Answers some tool calls of a session in-process instead of the extension: `gosling acp`
/// routes the developer builtin's file edits through the editor. Given the extension's config,
/// the unprefixed tool name and the arguments, it returns an MCP CallToolResult, or `None` to
/// let the extension answer as usual.
pub type ToolDelegate = Arc<dyn Fn(&ExtensionConfig, &str, Option<&Value>) -> Option<CallToolResult> + Send + Sync>;

/// goose's `ExtensionLoadResult`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadResult {
    pub name: String,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

enum Backend {
    Mcp(Arc<Client>),
    /// Restart in progress after the child died; the message explains why.
    Restarting(String),
    Frontend,
}

/// One extension active in a session.
pub struct ActiveExtension {
    pub key: String,
    pub config: ExtensionConfig,
    backend: RwLock<Backend>,
    /// Last good tool list, so tools stay listed while the extension restarts: the client's
    /// own (`Client::list_tools_shared`), the same `Arc` until the server's list changes.
    tools: RwLock<Arc<Vec<Tool>>>,
    /// Set once the extension is removed: no more restarts.
    removed: std::sync::atomic::AtomicBool,
    /// What its start holds (proxy, temp dir, cgroup): released when it is closed.
    held: Mutex<Held>,
}

impl ActiveExtension {
    fn client(&self) -> Result<Arc<Client>, Error> {
        match &*self.backend.read().unwrap_or_else(|e| e.into_inner()) {
            Backend::Mcp(c) => Ok(c.clone()),
            Backend::Restarting(d) => Err(Error::Restarting { extension: self.key.clone(), detail: d.clone() }),
            Backend::Frontend => Err(Error::FrontendTool(self.key.clone())),
        }
    }

    fn close(&self) {
        self.removed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Backend::Mcp(c) = &*self.backend.read().unwrap_or_else(|e| e.into_inner()) {
            c.close();
        }
        // After the ladder reaped its processes: the proxy, the temp dir, the cgroup.
        drop(std::mem::take(&mut *lock(&self.held)));
    }

    /// Why the extension is restarting, while it is (its process ended); `None` while it runs.
    pub fn restarting(&self) -> Option<String> {
        match &*self.backend.read().unwrap_or_else(|e| e.into_inner()) {
            Backend::Restarting(why) => Some(why.clone()),
            Backend::Mcp(_) | Backend::Frontend => None,
        }
    }

    fn restartable(&self) -> bool {
        matches!(self.config.kind, Kind::Stdio { .. } | Kind::Builtin { .. } | Kind::InlinePython { .. })
    }

    pub fn instructions(&self) -> Option<String> {
        match &self.config.kind {
            Kind::Frontend { instructions, .. } => instructions.clone(),
            _ => self.client().ok().and_then(|c| c.instructions().map(str::to_string)),
        }
    }

    /// Takes the server's list again when it changed (`tools/list_changed`); the same list, not
    /// a copy, while it did not.
    fn refresh_tools(&self) -> Result<(), Error> {
        if let Backend::Mcp(c) = &*self.backend.read().unwrap_or_else(|e| e.into_inner()) {
            if c.capabilities().get("tools").is_some() {
                let tools = c
                    .list_tools_shared()
                    .map_err(|error| Error::Mcp { extension: self.key.clone(), error: Box::new(error) })?;
                let mut kept = self.tools.write().unwrap_or_else(|e| e.into_inner());
                if !Arc::ptr_eq(&kept, &tools) {
                    *kept = tools;
                }
            }
        }
        Ok(())
    }
}

impl Drop for ActiveExtension {
    fn drop(&mut self) {
        self.close();
    }
}

/// A tool as the session exposes it.
#[derive(Debug, Clone)]
pub struct SessionTool {
    /// `<extension key>__<tool name>`.
    pub name: String,
    pub extension: String,
    /// The MCP tool, unprefixed.
    pub tool: Tool,
}

/// The extensions of one session.
pub struct SessionRuntime {
    pub session_id: String,
    working_dir: RwLock<PathBuf>,
    extensions: RwLock<BTreeMap<String, Arc<ActiveExtension>>>,
    deps: Arc<Deps>,
    /// Background load started by `/agent/start`, collected by the first one who needs it.
    pending: Mutex<Option<thread::JoinHandle<Vec<LoadResult>>>>,
    last_results: Mutex<Option<Vec<LoadResult>>>,
    /// The extensions whose last start failed, with the error (kept for reports).
    failed: Mutex<BTreeMap<String, String>>,
    delegate: RwLock<Option<ToolDelegate>>,
    /// When the session last used its extensions (see `touch`).
    last_used: Mutex<Instant>,
    /// Calls under way: an idle stop waits for none.
    in_use: std::sync::atomic::AtomicUsize,
    /// The configs `stop_if_idle` stopped, started again at the next use.
    idle_stopped: Mutex<Option<Vec<ExtensionConfig>>>,
    /// The last list `tools_shared` made, and what it made it from.
    listed: Mutex<Option<Listed>>,
    /// The working dir moved (`move_to`) since the running processes started: they start
    /// again in the new one at the next use that finds no call under way.
    moved: std::sync::atomic::AtomicBool,
}

/// A session's tool list as `SessionRuntime::tools_shared` made it, with what it was made
/// from: each active extension and its tool list, held weakly (a removed extension is not
/// kept alive, and an address is not reused while a `Weak` holds it, so `ptr_eq` on the same
/// pointers means the very same extensions and lists).
struct Listed {
    from: Vec<(std::sync::Weak<ActiveExtension>, std::sync::Weak<Vec<Tool>>)>,
    tools: Arc<Vec<SessionTool>>,
}

/// Held while a call uses the extensions: the runtime is not idle meanwhile.
struct InUse<'a>(&'a SessionRuntime);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.0.in_use.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        *lock(&self.0.last_used) = Instant::now();
    }
}

/// Closes `extensions` in parallel (each down its shutdown ladder) and waits for them all.
fn close_all(extensions: Vec<Arc<ActiveExtension>>) {
    let hs: Vec<_> = extensions.into_iter().map(|e| thread::spawn(move || e.close())).collect();
    for h in hs {
        let _ = h.join(); // wait: close runs the shutdown ladder, which ends in SIGKILL
    }
}

/// goose's own builtins that Goose Desktop registers (its bundled-extension sync) but gosling
/// does not have: stored like any extension, reported as unavailable when activated.
const GOOSE_ONLY_BUILTINS: [&str; 3] = ["computercontroller", "autovisualiser", "tutorial"];

const RESTART_BACKOFF: [u64; 5] = [250, 1000, 2000, 5000, 10000];

impl SessionRuntime {
    pub fn new(session_id: &str, working_dir: PathBuf, deps: Arc<Deps>) -> Arc<SessionRuntime> {
        Arc::new(SessionRuntime {
            session_id: session_id.to_string(),
            working_dir: RwLock::new(working_dir),
            extensions: RwLock::new(BTreeMap::new()),
            deps,
            pending: Mutex::new(None),
            last_results: Mutex::new(None),
            failed: Mutex::new(BTreeMap::new()),
            delegate: RwLock::new(None),
            last_used: Mutex::new(Instant::now()),
            listed: Mutex::new(None),
            in_use: std::sync::atomic::AtomicUsize::new(0),
            idle_stopped: Mutex::new(None),
            moved: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Marks the extensions used now and, when `stop_if_idle` stopped them or the working dir
    /// moved (`move_to`), starts them again (each start bounded by its extension's timeout).
    /// Every use goes through here.
    fn touch(self: &Arc<Self>) -> InUse<'_> {
        use std::sync::atomic::Ordering::SeqCst;
        self.in_use.fetch_add(1, SeqCst);
        let guard = InUse(self);
        let mut stopped = lock(&self.idle_stopped);
        *lock(&self.last_used) = Instant::now();
        // Only this use under way (others wait on the lock above): no call of theirs is cut.
        if self.in_use.load(SeqCst) == 1 && self.moved.swap(false, SeqCst) {
            let processes: Vec<_> = {
                let mut all = self.extensions.write().unwrap_or_else(|e| e.into_inner());
                let keys: Vec<String> = all.iter().filter(|(_, e)| e.restartable()).map(|(k, _)| k.clone()).collect();
                keys.into_iter().filter_map(|k| all.remove(&k)).collect()
            };
            if !processes.is_empty() {
                log::info!(
                    "session {}: working dir moved to {}; starting its {} extension process(es) there",
                    self.session_id,
                    self.working_dir().display(),
                    processes.len()
                );
                let mut again: Vec<ExtensionConfig> = processes.iter().map(|e| e.config.clone()).collect();
                close_all(processes);
                again.extend(stopped.take().unwrap_or_default());
                *stopped = Some(again);
            }
        }
        if let Some(configs) = stopped.take() {
            log::info!("session {}: used again; starting its {} extension(s)", self.session_id, configs.len());
            let results = self.load_all(configs);
            *lock(&self.last_results) = Some(results);
        }
        guard
    }

    /// Stops every extension (their processes end) when none was used for `idle` and no call
    /// is under way; the next use starts them again. True when it stopped something.
    pub fn stop_if_idle(&self, idle: Duration) -> bool {
        let mut stopped = lock(&self.idle_stopped);
        if stopped.is_some()
            || lock(&self.pending).is_some()
            || self.in_use.load(std::sync::atomic::Ordering::SeqCst) > 0
            || lock(&self.last_used).elapsed() < idle
        {
            return false;
        }
        let all: Vec<_> =
            std::mem::take(&mut *self.extensions.write().unwrap_or_else(|e| e.into_inner())).into_values().collect();
        if all.is_empty() {
            return false;
        }
        *stopped = Some(all.iter().map(|e| e.config.clone()).collect());
        log::info!(
            "session {}: idle for {}s; stopping its {} extension(s)",
            self.session_id,
            idle.as_secs(),
            all.len()
        );
        close_all(all);
        true
    }

    /// When `stop_if_idle(idle)` may next stop something, were the extensions not used before
    /// then; `None` when there is nothing to stop (none running, or stopped already). A call
    /// under way moves it on when it ends.
    pub fn idle_at(&self, idle: Duration) -> Option<Instant> {
        if lock(&self.idle_stopped).is_some() || self.extensions.read().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return None;
        }
        let busy = lock(&self.pending).is_some() || self.in_use.load(std::sync::atomic::Ordering::SeqCst) > 0;
        Some(if busy { Instant::now() + idle } else { *lock(&self.last_used) + idle })
    }

    /// Installs the session's tool delegate (see `ToolDelegate`).
    pub fn set_delegate(&self, delegate: Option<ToolDelegate>) {
        *self.delegate.write().unwrap_or_else(|e| e.into_inner()) = delegate;
    }

    pub fn working_dir(&self) -> PathBuf {
        self.working_dir.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Moves the session to `dir`: every extension started from now on starts there, and the
    /// running processes (stdio, builtin, inline Python) start again there at the session's
    /// next use of its extensions that finds no call under way (`touch`) — a call under way is
    /// never cut. Remote and frontend extensions have no working dir and keep running.
    pub fn move_to(&self, dir: PathBuf) {
        let mut wd = self.working_dir.write().unwrap_or_else(|e| e.into_inner());
        if *wd != dir {
            *wd = dir;
            self.moved.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The extensions whose last start failed (by name), with the error.
    pub fn failures(&self) -> BTreeMap<String, String> {
        lock(&self.failed).clone()
    }

    /// Starts loading `configs` in the background (goose's `/agent/start`).
    pub fn load_in_background(self: &Arc<Self>, configs: Vec<ExtensionConfig>) {
        let me = self.clone();
        let (tx, rx) = crossbeam_channel::bounded(1);
        let spawned = thread::Builder::new().name("ext-load".into()).spawn(move || {
            let configs = rx.recv().unwrap_or_default(); // wait: sent right after the spawn, or dropped
            me.load_all(configs)
        });
        match spawned {
            Ok(h) => {
                let _ = tx.send(configs);
                *lock(&self.pending) = Some(h);
            }
            // No thread to spare (a resource shortage): load here, before answering.
            Err(e) => {
                log::warn!("cannot start a loader thread ({e}); loading the extensions before answering");
                let results = self.load_all(configs);
                *lock(&self.last_results) = Some(results);
            }
        }
    }

    /// Waits for a background load, if any; returns its results once (then `None`).
    pub fn wait_loaded(&self) -> Option<Vec<LoadResult>> {
        let h = lock(&self.pending).take()?;
        let r = h.join().unwrap_or_default(); // wait: each activation is bounded by its timeout
        *lock(&self.last_results) = Some(r.clone());
        Some(r)
    }

    /// Results of the last load (for a resume after `/agent/start`).
    pub fn take_results(&self) -> Option<Vec<LoadResult>> {
        self.wait_loaded().or_else(|| lock(&self.last_results).take())
    }

    /// Activates all configs in parallel; a failure of one does not affect the others.
    pub fn load_all(self: &Arc<Self>, configs: Vec<ExtensionConfig>) -> Vec<LoadResult> {
        let handles: Vec<_> = configs
            .into_iter()
            .map(|c| {
                let me = self.clone();
                let name = c.name().to_string();
                (name, thread::Builder::new().name("ext-start".into()).spawn(move || me.add(c)))
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, h)| {
                let r = match h {
                    // wait: an activation is bounded by the extension's timeout
                    Ok(h) => h.join().unwrap_or_else(|_| Err(Error::Panicked)),
                    Err(e) => Err(Error::Thread(e)),
                };
                match r {
                    Ok(()) => {
                        lock(&self.failed).remove(&name);
                        LoadResult { name, success: true, error: None }
                    }
                    Err(e) => {
                        log::warn!("session {}: extension {name} failed to start: {e}", self.session_id);
                        lock(&self.failed).insert(name.clone(), e.to_string());
                        LoadResult { name, success: false, error: Some(e.to_string()) }
                    }
                }
            })
            .collect()
    }

    /// Activates one extension; already active (same key) is a silent success.
    pub fn add(self: &Arc<Self>, config: ExtensionConfig) -> Result<(), Error> {
        let key = runtime_key(config.name());
        if self.extensions.read().unwrap_or_else(|e| e.into_inner()).contains_key(&key) {
            return Ok(());
        }
        // Every activation re-checks the policy in force now, not the one at install time.
        if let Some(policy) = &self.deps.policy {
            let warnings = policy.check(&config, InstallSource::AddExtension).map_err(Error::not_started)?;
            warnings.iter().for_each(|w| log::warn!("session {}: {w}", self.session_id));
        }
        // A config from elsewhere (link, import, recipe) runs only as the person approved it.
        crate::consent::check_activation(&config, self.deps.policy.as_ref()).map_err(Error::not_started)?;
        let t = Instant::now();
        let (backend, tools, held) = match &config.kind {
            Kind::Frontend { tools, .. } => (Backend::Frontend, Arc::new(frontend_tools(&key, tools)), Held::default()),
            _ => {
                let (client, held) = self.connect(&config)?;
                let client = Arc::new(client);
                let tools = if client.capabilities().get("tools").is_some() {
                    client.list_tools_shared().map_err(Error::Start)?
                } else {
                    Arc::default()
                };
                (Backend::Mcp(client), tools, held)
            }
        };
        let ext = Arc::new(ActiveExtension {
            key: key.clone(),
            config,
            backend: RwLock::new(backend),
            tools: RwLock::new(tools),
            removed: std::sync::atomic::AtomicBool::new(false),
            held: Mutex::new(held),
        });
        let mut map = self.extensions.write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&key) {
            // Lost a race with a parallel add of the same key: keep the first.
            drop(map);
            ext.close();
            return Ok(());
        }
        map.insert(key.clone(), ext);
        log::info!("session {}: extension {key} active in {:?}", self.session_id, t.elapsed());
        Ok(())
    }

    fn client_options(&self, config: &ExtensionConfig) -> ClientOptions {
        ClientOptions {
            extension: config.name().to_string(),
            timeout: Duration::from_secs(config.timeout_secs()),
            roots: Some(vec![self.working_dir()]),
            elicitation: self.deps.elicit.clone().map(|ask| {
                let (session, extension) = (self.session_id.clone(), config.name().to_string());
                Arc::new(move |params: &Value| ask(&session, &extension, params))
                    as gosling_mcp::client::ElicitationHandler
            }),
            sampling: self.deps.sample.clone().map(|sample| {
                let (session, extension) = (self.session_id.clone(), config.name().to_string());
                Arc::new(move |params: &Value| sample(&session, &extension, params))
                    as gosling_mcp::client::SamplingHandler
            }),
            client_name: "gosling".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            // Checked by `validate` when the config came in; a bad one left in a hand-edited
            // file is reported there too, and gosling chooses meanwhile.
            protocol_version: config.protocol_version().unwrap_or_else(|e| {
                log::warn!("extension {}: {e}", config.name());
                None
            }),
        }
    }

    /// The extension's variables: `envs` as written, plus every name it reads from the secrets
    /// store (`config::secret_names`: `env_keys`, header variables) resolved there and only
    /// there. A refused name (code-loading families, gosling's own secrets) or a missing secret
    /// stops activation with the reason; gosling's process environment is never consulted.
    fn resolve_env(&self, config: &ExtensionConfig) -> Result<BTreeMap<String, String>, Error> {
        crate::policy::check_env(config).map_err(Error::invalid_config)?;
        crate::policy::check_own_secrets(config).map_err(Error::invalid_config)?;
        let mut out = config.vars().map(|v| v.envs.clone()).unwrap_or_default();
        let mut missing = Vec::new();
        // The OAuth client secret is read by `oauth_settings`, never put in the environment.
        let oauth_key = config.oauth().ok().and_then(|o| o.client_secret_key);
        let mut unmapped = Vec::new();
        for k in secret_names(config).into_iter().filter(|k| oauth_key.as_ref() != Some(k)) {
            // Only the secrets the person mapped to this extension (its consent record).
            if !crate::consent::may_read(config, &k) {
                unmapped.push(k);
                continue;
            }
            match (self.deps.secret)(&k) {
                Some(v) => {
                    out.insert(k, v);
                }
                None => missing.push(k),
            }
        }
        if !unmapped.is_empty() {
            return Err(Error::NotStarted(Blocked::Unmapped { name: config.name().to_string(), secrets: unmapped }));
        }
        if !missing.is_empty() {
            return Err(Error::InvalidConfig(Invalid::Message(Unresolved { missing, refused: Vec::new() }.explain())));
        }
        Ok(out)
    }

    /// Starts the extension's server: its client, and what its start holds (`Held`).
    fn connect(&self, config: &ExtensionConfig) -> Result<(Client, Held), Error> {
        let opts = self.client_options(config);
        let cwd = Some(self.working_dir()).filter(|d| d.is_dir());
        let name = &config.name;
        let mut held = Held::default();
        let spec = match &config.kind {
            Kind::Sse { .. } => {
                return Err(Error::Start(gosling_mcp::error::Error::SseUnsupported { extension: name.clone() }))
            }
            Kind::Platform { .. } => {
                return Err(Error::InvalidConfig(Invalid::Message(format!(
                    "platform extension {name} is part of goose itself and is not available in gosling"
                ))))
            }
            Kind::Frontend { .. } => {
                return Err(Error::InvalidConfig(Invalid::Message(
                    "Invalid extension type: Frontend extensions cannot be added as server extensions".into(),
                )))
            }
            Kind::Stdio { cmd, args, .. } => {
                // The grammar again (a stored config may predate it), container mounts resolved
                // inside the working dir, and launchers started where no project config steers them.
                let work = self.working_dir();
                let args = crate::policy::check_launch(cmd, args, &work).map_err(Error::invalid_config)?;
                let home = gosling_config::settings::home(&gosling_config::ProcessEnv);
                let mut env = self.resolve_env(config)?;
                // The extension's own values (its `envs`, its secrets) never reach a log line
                // or an error through what it prints.
                let redact = env.values().cloned().collect();
                if cwd.is_some() {
                    // The working dir, even for a launcher started in the home dir.
                    env.insert("GOOSE_WORKING_DIR".into(), work.display().to_string());
                }
                if container_for(config).is_none() {
                    // The program is looked up in the child, after it changed into its dir:
                    // only absolute PATH entries, so the working dir cannot supply it.
                    if let Some(path) = gosling_config::settings::path(&gosling_config::ProcessEnv) {
                        let (kept, dropped) = crate::policy::absolute_path(path.as_ref());
                        if !dropped.is_empty() {
                            log::warn!(
                                "extension {name}: PATH entries {dropped:?} are not absolute; the extension's programs are looked up without them"
                            );
                        }
                        env.insert("PATH".into(), kept.to_string_lossy().into_owned());
                    }
                }
                let container = container_for(config);
                let program = if cmd.contains('/') {
                    PathBuf::from(cmd)
                } else {
                    find_in_path(cmd).unwrap_or_else(|| PathBuf::from(cmd))
                };
                let engine = crate::policy::program_family(cmd) == "container";
                let (confinement, extra, confined_held) = if container.is_some() || engine {
                    // The engine's own isolation (the container-isolation rule); its client
                    // needs the daemon's socket and does nothing itself.
                    (None, Vec::new(), Held::default())
                } else if self.is_own_builtin(cmd, &program) {
                    // `gosling mcp NAME` (a link's or an import's builtin): gosling's own code,
                    // unconfined like the builtins (the memory server keeps its notes in
                    // gosling's state dir). Only this very binary, not a program named so.
                    (None, Vec::new(), Held::default())
                } else {
                    self.confine(config, &program, &args, cwd.as_deref())?
                };
                env.extend(extra);
                held = confined_held;
                StdioSpec {
                    cmd: cmd.clone(),
                    args,
                    env: env.into_iter().collect(),
                    cwd: cwd.map(|_| crate::policy::launch_dir(cmd, &work, home.as_deref())),
                    container,
                    confinement,
                    redact,
                    ..Default::default()
                }
            }
            Kind::Builtin { .. } => {
                let builtin = runtime_key(name);
                if GOOSE_ONLY_BUILTINS.contains(&builtin.as_str()) {
                    return Err(Error::InvalidConfig(Invalid::Message(format!(
                        "builtin extension {name} is part of goose and not available in gosling (its builtins are {}); disable it, or add an MCP server that does the same",
                        gosling_builtins::KNOWN.join(", ")
                    ))));
                }
                let launch = gosling_builtins::launch(&builtin, &self.deps.self_exe, &self.deps.state_dir)
                    .map_err(|e| Error::InvalidConfig(Invalid::Builtin(e)))?;
                StdioSpec {
                    cmd: launch.program.display().to_string(),
                    args: launch.args,
                    env: launch.env,
                    cwd,
                    ..Default::default()
                }
            }
            Kind::InlinePython { code, dependencies } => {
                let mut spec = inline_python_spec(
                    &self.deps.state_dir,
                    name,
                    code,
                    dependencies.as_deref().unwrap_or(&[]),
                    cwd.clone(),
                )?;
                let (confinement, extra, confined_held) =
                    self.confine(config, Path::new(&spec.cmd), &spec.args, cwd.as_deref())?;
                spec.env.extend(extra);
                spec.confinement = confinement;
                held = confined_held;
                spec
            }
            Kind::StreamableHttp { uri, headers, .. } => {
                let env = self.resolve_env(config)?;
                let headers = gosling_mcp::streamable_http::substitute_headers(headers, &env)
                    .map_err(|e| Error::InvalidConfig(Invalid::Headers(e)))?;
                // Sign-in over the API: the URL goes into the error, the loopback listener
                // waits in the background for the browser.
                let auth = self.deps.tokens.as_ref().map(|store| {
                    let sign_in = SignIn::Background { wait: SIGN_IN_WAIT };
                    // The client secret too comes only from the secrets mapped to this extension.
                    let mapped = |k: &str| crate::consent::may_read(config, k).then(|| (self.deps.secret)(k)).flatten();
                    let auth = oauth_authorizer(config, uri, opts.timeout, &mapped, store.clone(), sign_in)?;
                    Ok::<_, Error>(Arc::new(auth))
                });
                let spec = HttpSpec {
                    uri: uri.clone(),
                    headers,
                    timeout: opts.timeout,
                    extension: config.name().to_string(),
                    auth: auth.transpose()?,
                };
                return gosling_mcp::connect_http(&spec, opts).map(|c| (c, held)).map_err(Error::Start);
            }
        };
        // The proxy serves from the child's first moment, not from the end of its start: a
        // launcher fetches its package before it answers `initialize` (npx, uvx on a first run).
        let (proxy_tx, proxy_rx) = crossbeam_channel::bounded(1);
        let proxied =
            spec.confinement.as_ref().is_some_and(|c| matches!(c.network, gosling_sys::Network::Proxy { .. }));
        let egress = if proxied { Some(self.serve_egress(config, proxy_rx, opts.timeout)?) } else { None };
        let spec = StdioSpec { proxy_to: Some(proxy_tx), ..spec };
        let client = gosling_mcp::connect_stdio(&spec, opts);
        // The spawn sent the listener, or never will: its sender goes with the spec.
        drop(spec);
        if let Some(egress) = egress {
            // The thread serves the listener it got, or gives up on none, at once (`serve_egress`).
            // wait: ends at once, the sender being gone
            let served = egress.join().unwrap_or_else(|_| Err(std::io::Error::other("the egress thread panicked")));
            match served {
                Ok(Some(handle)) => held.egress = Some(handle),
                // Without its proxy the extension could reach none of its approved hosts: a
                // failure here fails the start (the client is closed when dropped).
                Err(e) => return Err(Error::Thread(e)),
                Ok(None) => {}
            }
        }
        let client = client.map_err(Error::Start)?;
        Ok((client, held))
    }

    /// The egress of a confined extension with approved hosts: gosling's proxy
    /// (`egress::serve`) on the listener its network namespace holds, for the hosts of its
    /// `sandbox` (its launcher's registry among them), each connection in the audit log. A
    /// thread takes the listener as the spawn sends it (within the start's `timeout`, or until
    /// the sender is gone) and serves it at once; it ends with the proxy's handle, held with the
    /// extension (`Held`): dropping it ends every pipe.
    fn serve_egress(
        &self,
        config: &ExtensionConfig,
        listener: crossbeam_channel::Receiver<std::net::TcpListener>,
        timeout: Duration,
    ) -> Result<std::thread::JoinHandle<std::io::Result<Option<crate::egress::Handle>>>, Error> {
        let mut policy = crate::egress::EgressPolicy::from_strings(&config.sandbox()?.hosts)?;
        policy.nets = crate::egress::operator_nets(
            gosling_config::settings::egress_nets(&gosling_config::ProcessEnv).as_deref(),
        )?;
        let key = runtime_key(config.name());
        let audit = crate::egress::Audit { log: self.deps.audit.clone(), extension: key };
        std::thread::Builder::new()
            .name("egress-start".into())
            .spawn(move || match listener.recv_timeout(timeout) {
                Ok(l) => crate::egress::serve(l, policy, audit).map(Some),
                Err(_) => Ok(None),
            })
            .map_err(Error::Thread)
    }

    /// True when a stdio config runs this very gosling binary (`gosling mcp NAME`), by its
    /// resolved file, not by its name.
    fn is_own_builtin(&self, cmd: &str, program: &Path) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).ok();
        crate::policy::program_family(cmd) == "gosling"
            && canon(program).is_some_and(|p| Some(p) == canon(&self.deps.self_exe))
    }

    /// The kernel confinement of a stdio child running `program` with `args` (and the
    /// variables it adds: `TMPDIR`, the proxy's), from the config's `sandbox` object, the
    /// working dir, a private temp dir and gosling's own dirs (never granted). `None` when the
    /// operator opted out (`sandbox.unconfined`, `GOSLING_UNCONFINED=1`); refused (and
    /// audited) when the kernel cannot confine and nobody opted out.
    fn confine(
        &self,
        config: &ExtensionConfig,
        program: &Path,
        args: &[String],
        work: Option<&Path>,
    ) -> Result<Confined, Error> {
        // The whole text, field included (goose's activation text shows only a message).
        let field_error = |e: Error| Error::InvalidConfig(Invalid::Message(e.to_string()));
        let sb = config.sandbox().map_err(field_error)?;
        let everyone = gosling_config::settings::unconfined(&gosling_config::ProcessEnv);
        let summary = json!(sb.summary(everyone));
        let audit = |status: &str| {
            self.deps.audit.record(&gosling_store::audit::Entry {
                session: &self.session_id,
                extension: config.name(),
                tool: "sandbox",
                arguments: &summary,
                status,
                duration: Duration::ZERO,
            })
        };
        if sb.unconfined || everyone {
            log::warn!("extension {}: starts UNCONFINED (the operator opted out)", config.name());
            audit("unconfined");
            return Ok((None, Vec::new(), Held::default()));
        }
        if let Some(missing) = kernel_missing() {
            audit("refused_unconfinable");
            return Err(Error::NotStarted(Blocked::Unconfinable { name: config.name().to_string(), missing }));
        }
        // A dir of its own for each start (a restart's new one never meets the old one's
        // removal), named for this gosling process so a later one knows when it is stale.
        static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let short = |s: String| s.chars().take(48).collect::<String>();
        let tmp = PrivateTmp {
            parent: self.deps.state_dir.join("tmp"),
            name: format!(
                "{}.{}-{}-{}",
                gosling_sys::owner_tag(),
                STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                short(crate::config::name_to_key(&self.session_id)),
                short(runtime_key(config.name()))
            ),
        };
        gosling_store::atomic::ensure_subdir(&tmp.parent).map_err(Error::Store)?;
        gosling_store::atomic::ensure_subdir(&tmp.path()).map_err(Error::Store)?;
        let home = gosling_config::settings::home(&gosling_config::ProcessEnv);
        let own = crate::sandbox::own_dirs(&self.deps.state_dir);
        let caches = crate::sandbox::caches(&gosling_config::ProcessEnv);
        for cache in crate::sandbox::launcher_caches(&program.display().to_string(), &caches) {
            // Its first fetch goes there; a path that does not exist yet cannot be granted.
            if std::fs::symlink_metadata(&cache).is_err() {
                if let Err(e) = gosling_store::atomic::ensure_dir(&cache) {
                    log::warn!(
                        "extension {}: cannot make its launcher's cache ({e}); its first fetch will fail",
                        config.name()
                    );
                }
            }
        }
        let mut c = crate::sandbox::confinement(&sb, program, args, work, &tmp.path(), home.as_deref(), &caches, &own)
            .map_err(field_error)?;
        // Root is never held to RLIMIT_NPROC: its process limit is a pids cgroup.
        let pids = if gosling_sys::euid() == 0 {
            match root_process_limit()
                .and_then(|_| gosling_sys::PidsCgroup::create(sb.processes).map_err(|e| e.to_string()))
            {
                Ok(cg) => Some(cg),
                Err(why) => {
                    log::warn!("extension {}: its process limit does not hold as root ({why})", config.name());
                    None
                }
            }
        } else {
            None
        };
        c.pids_cgroup = pids.as_ref().map(gosling_sys::PidsCgroup::procs);
        let env = confined_env(&tmp.path(), c.network);
        audit("confined");
        Ok((Some(c), env, Held { egress: None, tmp: Some(tmp), pids }))
    }

    /// Deactivates by name (normalized); false when it was not active.
    pub fn remove(&self, name: &str) -> bool {
        let key = runtime_key(name);
        if let Some(stopped) = lock(&self.idle_stopped).as_mut() {
            stopped.retain(|c| runtime_key(c.name()) != key);
        }
        let Some(ext) = self.extensions.write().unwrap_or_else(|e| e.into_inner()).remove(&key) else { return false };
        ext.close();
        log::info!("session {}: extension {key} removed", self.session_id);
        true
    }

    pub fn active(&self) -> Vec<Arc<ActiveExtension>> {
        self.extensions.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    fn get(&self, key: &str) -> Option<Arc<ActiveExtension>> {
        self.extensions.read().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// All tools, sorted by prefixed name, as `tools(None)` lists them — the same `Arc` while
    /// no extension came, went or changed its list since the last call, so a turn copies
    /// nothing to offer the model its tools (and can tell an unchanged list by `Arc::ptr_eq`).
    pub fn tools_shared(self: &Arc<Self>) -> Arc<Vec<SessionTool>> {
        self.wait_loaded();
        let _used = self.touch();
        let active = self.active();
        let mut from = Vec::with_capacity(active.len());
        for ext in &active {
            if let Err(e) = ext.refresh_tools() {
                log::warn!("session {}: listing tools of {} failed: {e}", self.session_id, ext.key);
                self.notice_failure(ext);
            }
            let tools = ext.tools.read().unwrap_or_else(|e| e.into_inner()).clone();
            from.push((Arc::downgrade(ext), tools));
        }
        let mut listed = lock(&self.listed);
        if let Some(l) = listed.as_ref() {
            let same = l.from.len() == from.len()
                && l.from.iter().zip(&from).all(|((e, t), (ext, now))| e.ptr_eq(ext) && t.as_ptr() == Arc::as_ptr(now));
            if same {
                return l.tools.clone();
            }
        }
        let mut out = Vec::new();
        for ((_, tools), ext) in from.iter().zip(&active) {
            let allowed = &ext.config.available_tools;
            for tool in tools.iter().filter(|t| allowed.is_empty() || allowed.contains(&t.name)) {
                out.push(SessionTool {
                    name: format!("{}__{}", ext.key, tool.name),
                    extension: ext.key.clone(),
                    tool: tool.clone(),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        let tools = Arc::new(out);
        let from = from.into_iter().map(|(e, t)| (e, Arc::downgrade(&t))).collect();
        *listed = Some(Listed { from, tools: tools.clone() });
        tools
    }

    /// All tools, sorted by prefixed name; `extension` filters by extension key.
    pub fn tools(self: &Arc<Self>, extension: Option<&str>) -> Vec<SessionTool> {
        let all = self.tools_shared();
        match extension.map(runtime_key) {
            None => all.as_ref().clone(),
            Some(key) => all.iter().filter(|t| t.extension == key).cloned().collect(),
        }
    }

    /// Finds the extension for a prefixed tool name: the active key that prefixes it.
    fn resolve_tool(&self, prefixed: &str) -> Result<(Arc<ActiveExtension>, String), Error> {
        let mut best: Option<(Arc<ActiveExtension>, String)> = None;
        for ext in self.active() {
            if let Some(rest) = prefixed.strip_prefix(ext.key.as_str()).and_then(|r| r.strip_prefix("__")) {
                if best.as_ref().is_none_or(|(b, _)| ext.key.len() > b.key.len()) {
                    best = Some((ext.clone(), rest.to_string()));
                }
            }
        }
        let (ext, tool) = best.ok_or_else(|| Error::UnknownTool(prefixed.to_string()))?;
        let allowed = &ext.config.available_tools;
        if !allowed.is_empty() && !allowed.contains(&tool) {
            return Err(Error::UnknownTool(prefixed.to_string()));
        }
        Ok((ext, tool))
    }

    /// True when `prefixed` names a tool of a `frontend` extension.
    pub fn is_frontend_tool(&self, prefixed: &str) -> bool {
        self.resolve_tool(prefixed).is_ok_and(|(e, _)| matches!(e.config.kind, Kind::Frontend { .. }))
    }

    /// Calls a tool by prefixed name and audits the call. An MCP `isError` result is a
    /// success here (the caller passes it through).
    pub fn call_tool(
        self: &Arc<Self>,
        prefixed: &str,
        arguments: Option<Value>,
        ctx: &CallContext,
    ) -> Result<CallToolResult, Error> {
        self.wait_loaded();
        let _used = self.touch();
        let t = Instant::now();
        let (ext, tool) = self.resolve_tool(prefixed)?;
        let delegate = self.delegate.read().unwrap_or_else(|e| e.into_inner()).clone();
        let result = match delegate.and_then(|d| d(&ext.config, &tool, arguments.as_ref())) {
            Some(v) => Ok(v),
            None => ext.client().and_then(|c| {
                c.call_tool(&tool, arguments.clone(), ctx)
                    .map_err(|error| Error::Mcp { extension: ext.key.clone(), error: Box::new(error) })
            }),
        };
        if let Err(Error::Mcp { .. }) = &result {
            self.notice_failure(&ext);
        }
        let status = match &result {
            Ok(r) if r.is_error() => "tool_error",
            Ok(_) => "ok",
            Err(_) => "error",
        };
        self.deps.audit.record(&gosling_store::audit::Entry {
            session: &self.session_id,
            extension: &ext.key,
            tool: &tool,
            arguments: arguments.as_ref().unwrap_or(&Value::Null),
            status,
            duration: t.elapsed(),
        });
        result
    }

    /// The `ui://` resources (MCP Apps) of every active extension that offers resources, as
    /// `(extension key, MCP Resource)`. An extension whose listing fails is left out (logged).
    pub fn ui_resources(self: &Arc<Self>) -> Vec<(String, Resource)> {
        self.wait_loaded();
        let _used = self.touch();
        let mut out = Vec::new();
        for ext in self.active() {
            let Ok(client) = ext.client() else { continue };
            if client.capabilities().get("resources").is_none() {
                continue;
            }
            match client.list_resources() {
                Ok(list) => {
                    out.extend(list.into_iter().filter(|r| r.uri.starts_with("ui://")).map(|r| (ext.key.clone(), r)))
                }
                Err(e) => log::warn!("session {}: listing resources of {} failed: {e}", self.session_id, ext.key),
            }
        }
        out
    }

    /// `resources/read` on one extension (goose's ReadResourceResponse is made from it at the
    /// HTTP edge).
    pub fn read_resource(self: &Arc<Self>, extension: &str, uri: &str) -> Result<ReadResourceResult, Error> {
        self.wait_loaded();
        let _used = self.touch();
        let key = runtime_key(extension);
        let ext = self.get(&key).ok_or_else(|| Error::UnknownExtension(extension.to_string()))?;
        let client = ext.client()?;
        client.read_resource(uri).map_err(|error| Error::Mcp { extension: key, error: Box::new(error) })
    }

    /// After a failed call: if the child is gone, swap in `Restarting` and restart it with
    /// backoff in the background.
    fn notice_failure(self: &Arc<Self>, ext: &Arc<ActiveExtension>) {
        if !ext.restartable() || ext.removed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let detail = {
            let mut b = ext.backend.write().unwrap_or_else(|e| e.into_inner());
            let Backend::Mcp(c) = &*b else { return };
            if !c.is_closed() {
                return;
            }
            let detail = format!("last error: the process exited; stderr: {}", c.diagnostics());
            c.close();
            *b = Backend::Restarting(detail.clone());
            // Its processes are reaped: what the dead start held goes (a restart gets its own).
            drop(std::mem::take(&mut *lock(&ext.held)));
            detail
        };
        log::warn!("session {}: extension {} died; restarting ({detail})", self.session_id, ext.key);
        let (me, ext) = (self.clone(), ext.clone());
        let _ = thread::Builder::new().name("ext-restart".into()).spawn(move || {
            for (attempt, ms) in RESTART_BACKOFF.iter().cycle().enumerate() {
                thread::sleep(Duration::from_millis(*ms));
                if ext.removed.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                match me.connect(&ext.config) {
                    Ok((c, held)) => {
                        let c = Arc::new(c);
                        if ext.removed.load(std::sync::atomic::Ordering::SeqCst) {
                            c.close();
                            return;
                        }
                        *lock(&ext.held) = held;
                        *ext.backend.write().unwrap_or_else(|e| e.into_inner()) = Backend::Mcp(c);
                        let _ = ext.refresh_tools();
                        log::info!(
                            "session {}: extension {} restarted (attempt {})",
                            me.session_id,
                            ext.key,
                            attempt + 1
                        );
                        return;
                    }
                    Err(e) => {
                        log::warn!(
                            "session {}: restarting {} failed (attempt {}): {e}",
                            me.session_id,
                            ext.key,
                            attempt + 1
                        );
                        *ext.backend.write().unwrap_or_else(|e| e.into_inner()) = Backend::Restarting(e.to_string());
                    }
                }
            }
        });
    }

    /// Each active extension's instructions, for the system prompt.
    pub fn instructions(self: &Arc<Self>) -> Vec<(String, String)> {
        let _used = self.touch();
        self.active().iter().filter_map(|e| e.instructions().map(|i| (e.key.clone(), i))).collect()
    }

    /// Stops every extension (children go down the shutdown ladder), in parallel.
    pub fn shutdown(&self) {
        let _ = self.wait_loaded();
        lock(&self.idle_stopped).take();
        let all: Vec<_> =
            std::mem::take(&mut *self.extensions.write().unwrap_or_else(|e| e.into_inner())).into_values().collect();
        close_all(all);
    }
}

impl Drop for SessionRuntime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What this kernel lacks for confinement (`sys::probe`); a test build can pretend it lacks
/// everything (`GOSLING_TEST_KERNEL_LACKS_CONFINEMENT`).
pub fn kernel_missing() -> Option<String> {
    kernel_missing_in(gosling_sys::probe())
}

/// `kernel_missing` of a probe already made (the start's one probe, `core::harden`).
pub fn kernel_missing_in(kernel: gosling_sys::Probe) -> Option<String> {
    #[cfg(feature = "test-hooks")]
    if gosling_config::settings::test_kernel_lacks_confinement(&gosling_config::ProcessEnv) {
        let none = gosling_sys::Probe { landlock_abi: 0, user_namespaces: false };
        return none.missing();
    }
    kernel.missing()
}

/// The variables a confined child gets: its `TMPDIR`, and with approved hosts the proxy in
/// every form the usual clients read — `HTTP(S)_PROXY` in both cases (curl, Python, Go,
/// uv, pip), `NODE_USE_ENV_PROXY=1` (Node's own `fetch` and, from Node 24, `http`/`https`
/// honour those only with it: Node 22.21+ and 24.5+), and npm's `proxy`/`https-proxy` settings
/// as variables (npm and npx take them over a `.npmrc`'s, for their first-run fetch); an empty
/// `NO_PROXY` so that nothing goes around it (around it there is no network).
fn confined_env(tmp: &Path, network: gosling_sys::Network) -> Vec<(String, String)> {
    let mut env = vec![("TMPDIR".to_string(), tmp.display().to_string())];
    if let gosling_sys::Network::Proxy { port } = network {
        let url = format!("http://127.0.0.1:{port}");
        for k in
            ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"]
        {
            env.push((k.to_string(), url.clone()));
        }
        env.push(("NODE_USE_ENV_PROXY".to_string(), "1".to_string()));
        env.push(("NO_PROXY".to_string(), String::new()));
        env.push(("no_proxy".to_string(), String::new()));
    }
    env
}

/// Whether a root gosling holds each confined extension to its process limit: the pids cgroup
/// dir the limits are made under (`sys::pids_cgroup_base`), or why there is none. A test build
/// can pretend there is none (`GOSLING_TEST_NO_PIDS_CGROUP`).
pub fn root_process_limit() -> Result<PathBuf, String> {
    #[cfg(feature = "test-hooks")]
    if gosling_config::settings::test_no_pids_cgroup(&gosling_config::ProcessEnv) {
        return Err("the test build pretends there is no pids cgroup (GOSLING_TEST_NO_PIDS_CGROUP)".into());
    }
    gosling_sys::pids_cgroup_base()
}

/// Container mode (seed §8.1): `GOSLING_CONTAINER` names a running container that stdio
/// extensions run in, through the container tool's exec.
fn container_for(_config: &ExtensionConfig) -> Option<String> {
    gosling_config::settings::container(&gosling_config::ProcessEnv)
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    gosling_config::settings::find_in_path(&gosling_config::ProcessEnv, program)
}

/// The stdio command for an inline_python extension: `uvx --with mcp [--with dep]… python FILE`
/// when uvx is installed, else the configured Python (`GOSLING_PYTHON`, else `python3`) —
/// which must already have the `mcp` package and any dependencies.
fn inline_python_spec(
    state_dir: &Path,
    name: &str,
    code: &str,
    deps: &[String],
    cwd: Option<PathBuf>,
) -> Result<StdioSpec, Error> {
    let file = state_dir.join("inline_python").join(format!("{}.py", runtime_key(name)));
    gosling_store::atomic::write_atomic(&file, code.as_bytes()).map_err(Error::Script)?;
    let file = file.display().to_string();
    // Programs by their absolute path (found on absolute PATH entries only): the child starts
    // in the working dir, where a relative PATH entry would find that dir's own `uvx`.
    if let Some(uvx) = find_in_path("uvx") {
        let mut args = vec!["--with".to_string(), "mcp".to_string()];
        for d in deps {
            args.push("--with".into());
            args.push(d.clone());
        }
        args.push("python".into());
        args.push(file);
        return Ok(StdioSpec { cmd: uvx.display().to_string(), args, cwd, ..Default::default() });
    }
    let python = gosling_config::settings::python(&gosling_config::ProcessEnv);
    if python.contains('/') && !Path::new(&python).is_file() || !python.contains('/') && find_in_path(&python).is_none()
    {
        return Err(Error::InvalidConfig(Invalid::Message(format!(
            "inline_python extension {name} needs uvx (to install its dependencies) or a Python with the `mcp` package; neither uvx nor {python} was found on PATH (set GOSLING_PYTHON)"
        ))));
    }
    if !deps.is_empty() {
        log::warn!("inline_python {name}: uvx not found; running with {python}, which must already have {deps:?}");
    }
    let python =
        if python.contains('/') { python } else { find_in_path(&python).map_or(python, |p| p.display().to_string()) };
    Ok(StdioSpec { cmd: python, args: vec![file], cwd, ..Default::default() })
}

/// The tool's `inputSchema`, `{"type": "object"}` when it has none.
pub fn input_schema(t: &Tool) -> Value {
    match &t.input_schema {
        Value::Null => json!({"type": "object"}),
        s => s.clone(),
    }
}

/// A frontend extension's tools from its config (MCP Tool JSON); an item without a string
/// `name` is left out (logged), as a server's would be.
fn frontend_tools(key: &str, tools: &[Value]) -> Vec<Tool> {
    tools
        .iter()
        .filter_map(|v| {
            Tool::from_value(v.clone())
                .map_err(|v| log::warn!("frontend extension {key}: not listing {v} (a tool has a string name)"))
                .ok()
        })
        .collect()
}

/// goose's ToolInfo for `GET /agent/tools`.
pub fn tool_info(t: &SessionTool, permission: Option<&str>) -> Value {
    let schema = input_schema(&t.tool);
    let mut params: Vec<String> =
        schema.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default();
    params.sort();
    json!({
        "name": t.name,
        "description": t.tool.description.as_deref().unwrap_or(""),
        "parameters": params,
        "permission": permission,
        "input_schema": schema,
    })
}

#[cfg(test)]
mod token_file_tests {
    use super::read_token_file;

    #[test]
    fn workload_token_files_are_read_plainly_or_refused_with_the_setting() {
        let d = std::env::temp_dir().join(format!("gosling-token-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("token");
        std::fs::write(&f, "eyJ.a.b\n").unwrap();
        assert_eq!(read_token_file(&f).unwrap(), "eyJ.a.b");
        let link = d.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let e = read_token_file(&link).unwrap_err();
        assert!(e.contains("symbolic link") && e.contains("oauth.token_file"), "{e}");
        let e = read_token_file(&d.join("missing")).unwrap_err();
        assert!(e.contains("does not exist") && e.contains("oauth.token_file"), "{e}");
        for (name, bytes) in [("empty", b"  \n".to_vec()), ("binary", vec![0xff, 0xfe]), ("spaced", b"a b".to_vec())] {
            let p = d.join(name);
            std::fs::write(&p, bytes).unwrap();
            let e = read_token_file(&p).unwrap_err();
            assert!(e.contains("oauth.token_file"), "{name}: {e}");
        }
        let big = d.join("big");
        std::fs::write(&big, vec![b'a'; 65 << 10]).unwrap();
        assert!(read_token_file(&big).unwrap_err().contains("64 KiB"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
