//! What every front end (http, acp) shares: process config, the trust policy, the stores, the
//! live session runtimes and the plumbing of running turns. Built once at start.

use crate::agents::{Agents, Cancels};
use crate::bus::Buses;
use crate::elicit::Elicitations;
use crate::permissions::{Confirmations, Mode};
use crate::sampling::Sampling;
use gosling_config::Config;
use gosling_extensions::config::{ExtensionConfig, Unresolved};
use gosling_extensions::policy::{InstallSource, Policy};
use gosling_extensions::runtime::{Deps, SecretsTokens};
use gosling_store::audit::{AuditLimits, AuditLog};
use gosling_store::config_store::ConfigStore;
use gosling_store::sessions::SessionStore;
use std::sync::Arc;
use std::time::Duration;

/// Its state is the core's: the front ends reach the stores, runtimes and buses only through
/// the operations (`ops`, `config_ops`, `settings`).
pub struct Host {
    pub(crate) config: Config,
    /// Built once at start (fetching GOOSE_ALLOWLIST once).
    pub(crate) policy: Policy,
    pub(crate) store: Arc<ConfigStore>,
    pub(crate) sessions: Arc<SessionStore>,
    pub(crate) confirmations: Arc<Confirmations>,
    pub(crate) elicitations: Arc<Elicitations>,
    /// The event bus of each session that has a follower or a request.
    pub(crate) buses: Buses,
    /// What other processes append to followed sessions (`follow`).
    pub(crate) live: Arc<crate::follow::Live>,
    pub(crate) agents: Agents,
    /// The cancels of turns run outside the buses (ACP's prompts).
    pub(crate) cancels: Arc<Cancels>,
    pub(crate) runtime_deps: Arc<Deps>,
    /// The run of each running turn, for steering (`steer`).
    pub(crate) runs: Arc<crate::steer::Runs>,
}

impl Host {
    pub fn new(config: Config, store: ConfigStore, sessions: SessionStore, policy: Policy) -> Host {
        let store = Arc::new(store);
        let secret_store = store.clone();
        let elicitations = Arc::new(Elicitations::new(config.elicitation_timeout));
        let asker = elicitations.clone();
        let sessions = Arc::new(sessions);
        let setting_store = store.clone();
        let audit = AuditLog::new(
            &config.state_dir,
            AuditLimits { max_bytes: config.audit_max_bytes, keep: config.audit_keep },
        );
        let sampling = Sampling {
            sessions: sessions.clone(),
            setting: Arc::new(move |k| setting_in(&setting_store, k)),
            elicitations: elicitations.clone(),
            audit: audit.clone(),
            limits: Default::default(),
        };
        let runtime_deps = Arc::new(Deps {
            elicit: Some(Arc::new(move |session: &str, extension: &str, params: &serde_json::Value| {
                asker.ask(session, extension, params)
            })),
            sample: Some(Arc::new(move |session: &str, extension: &str, params: &serde_json::Value| {
                sampling.create_message(session, extension, params)
            })),
            state_dir: config.state_dir.clone(),
            // The secrets store only: never gosling's own environment (see runtime::resolve_env).
            secret: Box::new(move |key| secret_store.get_secret(key).ok().flatten()),
            self_exe: std::env::current_exe().unwrap_or_else(|_| "gosling".into()),
            audit,
            tokens: Some(Arc::new(SecretsTokens(store.clone()))),
            policy: Some(policy.clone()),
        });
        let live = crate::follow::Live::new(sessions.clone());
        Host {
            config,
            policy,
            store,
            sessions,
            confirmations: Arc::default(),
            elicitations,
            buses: Default::default(),
            live,
            agents: Agents::default(),
            cancels: Arc::default(),
            runtime_deps,
            runs: Arc::default(),
        }
    }

    /// The `permission` goose's ToolInfo shows when the user stored none: `ask_before` in
    /// approve mode, else null.
    pub fn tool_permission_default(&self, session_id: &str) -> Option<String> {
        let mode = self.sessions.get_meta(session_id).ok().flatten().and_then(|s| s.goose_mode);
        (self.mode_for(mode.as_deref()) == Mode::Approve).then(|| "ask_before".to_string())
    }

    /// A setting: the environment first, then the config store (plain, then secret).
    pub fn setting(&self, key: &str) -> Option<String> {
        setting_in(&self.store, key)
    }

    /// goose's GOOSE_MODE: the session's, else the setting, else auto.
    pub fn mode_for(&self, session_mode: Option<&str>) -> Mode {
        Mode::resolve(session_mode, &|k| self.setting(k))
    }

    /// The trust policy for installs and activations, enforced on every path that can add or
    /// activate an extension. Warnings (allowlist in warning mode) are logged.
    pub fn policy_check(
        &self,
        config: &ExtensionConfig,
        source: InstallSource,
    ) -> Result<(), gosling_extensions::Error> {
        for w in self.policy.check(config, source)? {
            log::warn!("{w}");
        }
        Ok(())
    }

    /// The names `config` reads that are not in the secrets store, and those it may never read.
    pub fn unresolved_secrets(&self, config: &ExtensionConfig) -> Unresolved {
        gosling_extensions::config::unresolved(config, &|k| (self.runtime_deps.secret)(k).is_some())
    }

    /// Starts the thread that stops idle sessions' extensions (`config.idle_stop`); it ends
    /// the first time it wakes after the host is dropped. It sleeps until the earliest session
    /// may be idle, so an idle server with sessions open does not wake for it before then.
    pub fn start_idle_reaper(self: &Arc<Host>) {
        let Some(idle) = self.config.idle_stop else { return };
        // By deadline, not by period: asleep until the earliest session may be idle. With no
        // extension running, it looks every quarter of `idle` (extensions started meanwhile
        // are stopped within 1.25 × `idle`, as before); never more often than every second.
        let look = (idle / 4).max(Duration::from_secs(1));
        let host = Arc::downgrade(self);
        let spawned = std::thread::Builder::new().name("idle-reaper".into()).spawn(move || {
            let mut next = std::time::Instant::now() + look;
            loop {
                std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
                let Some(host) = host.upgrade() else { return };
                let now = std::time::Instant::now();
                next = host.agents.stop_idle(idle).unwrap_or(now + look).max(now + Duration::from_secs(1));
            }
        });
        if let Err(e) = spawned {
            log::warn!("cannot start the idle reaper ({e}); idle extensions keep running");
        }
    }

    /// Stops everything that runs children; called once at shutdown.
    pub fn shutdown(&self) {
        self.agents.shutdown_all();
        if !crate::later::flush(Duration::from_secs(5)) {
            log::warn!("the last turns' token counts were not all saved within 5 s");
        }
    }
}

/// A setting: the environment first, then the config store (plain, then secret).
fn setting_in(store: &ConfigStore, key: &str) -> Option<String> {
    gosling_config::settings::user_setting(&gosling_config::ProcessEnv, key, || match store.get(key).ok().flatten() {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Null) | None => store.get_secret(key).ok().flatten(),
        Some(other) => Some(other.to_string()),
    })
}
