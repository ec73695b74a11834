//! The composition root: process config, the config store and everything request handlers
//! share. Built once in `run_agent`, borrowed by every handler thread.

use crate::agent::Agents;
use crate::config::Config;
use crate::extensions::config::ExtensionConfig;
use crate::extensions::policy::{InstallSource, Policy, PolicyError};
use crate::extensions::runtime::Deps;
use crate::http::error::ApiError;
use crate::http::proxy::GuestPages;
use crate::store::config_store::ConfigStore;
use crate::store::sessions::SessionStore;
use std::sync::Arc;

/// Policy refusals are the client's to fix (403); a broken policy setup is ours (500).
pub fn policy_error(e: PolicyError) -> ApiError {
    match e {
        PolicyError::CommandNotAllowed { .. }
        | PolicyError::InlineCode { .. }
        | PolicyError::ShellMetacharacter { .. }
        | PolicyError::NotAPackage { .. }
        | PolicyError::ContainerReach { .. }
        | PolicyError::EnvRefused { .. }
        | PolicyError::ReservedSecret { .. }
        | PolicyError::NotAllowlisted { .. }
        | PolicyError::AllowlistUnavailable { .. } => ApiError::new(403, e.to_string()),
        PolicyError::InvalidConfig(_) => ApiError::bad_request(e.to_string()),
        PolicyError::Setup { .. } => ApiError::internal(e.to_string()),
    }
}

/// The ways an extension can be installed or activated; the trust policy sees which one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallPath {
    ConfigApi,
    AddExtension,
    DeepLink,
}

pub struct App {
    pub config: Config,
    /// Built once at start (fetching GOOSE_ALLOWLIST once).
    pub policy: Policy,
    pub store: Arc<ConfigStore>,
    pub sessions: Arc<SessionStore>,
    pub confirmations: Arc<crate::agent::reply::Confirmations>,
    pub elicitations: Arc<crate::agent::elicit::Elicitations>,
    /// The event bus of each session that has a follower or a request.
    pub buses: crate::agent::bus::Buses,
    pub agents: Agents,
    pub runtime_deps: Arc<Deps>,
    pub guests: GuestPages,
    pub login: crate::http::auth::LoginToken,
    /// Failed key and login-token guesses per peer.
    pub throttle: crate::http::auth::Throttle,
}

impl App {
    pub fn new(config: Config, store: ConfigStore, sessions: SessionStore, policy: Policy) -> App {
        let store = Arc::new(store);
        let secret_store = store.clone();
        let elicitations = Arc::new(crate::agent::elicit::Elicitations::new(
            std::env::var("GOSLING_ELICITATION_TIMEOUT_SECS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(crate::agent::elicit::DEFAULT_TIMEOUT, std::time::Duration::from_secs),
        ));
        let asker = elicitations.clone();
        let runtime_deps = Arc::new(Deps {
            elicit: Some(Arc::new(move |session: &str, extension: &str, params: &serde_json::Value| {
                asker.ask(session, extension, params)
            })),
            state_dir: config.state_dir.clone(),
            // The secrets store only: never gosling's own environment (see runtime::resolve_env).
            secret: Box::new(move |key| secret_store.get_secret(key).ok().flatten()),
            self_exe: std::env::current_exe().unwrap_or_else(|_| "gosling".into()),
            audit: crate::store::audit::AuditLog::new(&config.state_dir),
            tokens: Some(Arc::new(crate::extensions::runtime::SecretsTokens(store.clone()))),
        });
        App {
            config,
            policy,
            store,
            sessions: Arc::new(sessions),
            confirmations: Arc::default(),
            elicitations,
            buses: Default::default(),
            agents: Agents::default(),
            runtime_deps,
            guests: GuestPages::default(),
            login: crate::http::auth::LoginToken::new(std::time::Duration::from_secs(600)),
            throttle: crate::http::auth::Throttle::new(),
        }
    }

    /// The `permission` goose's ToolInfo shows when the user stored none: `ask_before` in
    /// approve mode, else null.
    pub fn tool_permission_default(&self, session_id: &str) -> Option<String> {
        let mode = self.sessions.get_meta(session_id).ok().flatten().and_then(|s| s.goose_mode);
        (self.mode_for(mode.as_deref()) == crate::agent::reply::Mode::Approve).then(|| "ask_before".to_string())
    }

    /// A setting: the environment first, then the config store (plain, then secret).
    pub fn setting(&self, key: &str) -> Option<String> {
        if let Ok(v) = std::env::var(key) {
            if !v.is_empty() {
                return Some(v);
            }
        }
        match self.store.get(key).ok().flatten() {
            Some(serde_json::Value::String(s)) => Some(s),
            Some(serde_json::Value::Null) | None => self.store.get_secret(key).ok().flatten(),
            Some(other) => Some(other.to_string()),
        }
    }

    /// goose's GOOSE_MODE: the session's, else the setting, else auto.
    pub fn mode_for(&self, session_mode: Option<&str>) -> crate::agent::reply::Mode {
        crate::agent::reply::Mode::resolve(session_mode, &|k| self.setting(k))
    }

    pub fn secret(&self) -> &str {
        &self.config.secret
    }

    /// The trust policy for installs and activations, enforced on every path that can add or
    /// activate an extension. Warnings (allowlist in warning mode) are logged.
    pub fn check_policy(&self, config: &ExtensionConfig, path: InstallPath) -> Result<(), ApiError> {
        let source = match path {
            InstallPath::ConfigApi => InstallSource::ConfigApi,
            InstallPath::AddExtension => InstallSource::AddExtension,
            InstallPath::DeepLink => InstallSource::DeepLink,
        };
        match self.policy.check(config, source) {
            Ok(warnings) => {
                for w in warnings {
                    log::warn!("{w}");
                }
                Ok(())
            }
            Err(e) => Err(policy_error(e)),
        }
    }

    /// The names `config` reads that are not in the secrets store, and those it may never read.
    pub fn unresolved_secrets(&self, config: &ExtensionConfig) -> crate::extensions::config::Unresolved {
        crate::extensions::config::unresolved(config, &|k| (self.runtime_deps.secret)(k).is_some())
    }

    /// Stops everything that runs children; called once at shutdown.
    pub fn shutdown(&self) {
        self.agents.shutdown_all();
    }
}
