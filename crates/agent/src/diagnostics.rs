//! What gosling knows about a session, for a person reporting a problem (goose's
//! `diagnostics/get`): its version and platform, the provider and model, each extension of the
//! session with its state, and recent errors (extensions that failed to start or are
//! restarting, entries left out with why).
//!
//! Never a secret: the report holds names and states, not values (no config values, no
//! extension environments or arguments), and every text in it that came from elsewhere (a
//! start error, a restart's reason) has each stored secret's value and each extension
//! environment or header value replaced by `[secret]` before it leaves.

use crate::error::Error;
use crate::extension_set;
use crate::host::Host;
use gosling_extensions::config::{runtime_key, ExtensionStore, Kind};
use std::io::Read;

/// How much the report says (goose's `DiagnosticsReportLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Summary,
    /// With the session's summary (its id, dir, message count, type).
    Full,
}

impl Level {
    /// goose's names; `None` for any other.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "summary" => Some(Level::Summary),
            "full" => Some(Level::Full),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Summary => "summary",
            Level::Full => "full",
        }
    }
}

/// An extension's state in the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running,
    /// Its process ended; being started again (why).
    Restarting(String),
    /// Its last start failed (the error).
    Failed(String),
    /// Left out when the session opened (why, and how to have it back).
    NotStarted(&'static str),
    /// In the session's set, but the session has no running extensions (not opened since the
    /// server started, or stopped).
    Stopped,
}

impl State {
    /// The state's one word.
    pub fn word(&self) -> &'static str {
        match self {
            State::Running => "running",
            State::Restarting(_) => "restarting",
            State::Failed(_) => "failed",
            State::NotStarted(_) => "not_started",
            State::Stopped => "stopped",
        }
    }

    /// What went wrong, when something did.
    pub fn detail(&self) -> Option<&str> {
        match self {
            State::Restarting(d) | State::Failed(d) => Some(d),
            State::NotStarted(d) => Some(d),
            State::Running | State::Stopped => None,
        }
    }
}

/// One extension of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionState {
    pub name: String,
    pub state: State,
}

/// The session's summary (level `full`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub working_dir: String,
    pub message_count: u64,
    pub session_type: String,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub generated_at: String,
    pub level: Level,
    pub version: &'static str,
    pub os: &'static str,
    pub os_version: String,
    pub architecture: &'static str,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub extensions: Vec<ExtensionState>,
    pub session: Option<SessionSummary>,
    /// Recent errors, each one line naming its extension.
    pub errors: Vec<String>,
}

impl Host {
    /// The report on session `id` (see the module).
    pub fn diagnostics(&self, id: &str, level: Level) -> Result<Report, Error> {
        let s = self.session_meta(id)?;
        let set = extension_set::stored_set(&s);
        let (_, left_out) = extension_set::to_start(&set, &self.configured_entries()?);
        let rt = self.agents.get(id);
        let active = rt.as_ref().map(|r| r.active()).unwrap_or_default();
        let failures = rt.as_ref().map(|r| r.failures()).unwrap_or_default();
        let mut extensions = Vec::new();
        for e in &set {
            let name = e.config.name().to_string();
            let key = runtime_key(&name);
            let state = if let Some(a) = active.iter().find(|a| a.key == key) {
                a.restarting().map(State::Restarting).unwrap_or(State::Running)
            } else if let Some((_, why)) = left_out.iter().find(|(n, _)| runtime_key(n) == key) {
                State::NotStarted(crate::ops::not_started(why))
            } else if let Some((_, error)) = failures.iter().find(|(n, _)| runtime_key(n) == key) {
                State::Failed(error.clone())
            } else {
                State::Stopped
            };
            extensions.push(ExtensionState { name, state });
        }
        // Extensions running that the stored set does not hold (an editor's, added at load).
        for a in &active {
            if !extensions.iter().any(|e| runtime_key(&e.name) == a.key) {
                let state = a.restarting().map(State::Restarting).unwrap_or(State::Running);
                extensions.push(ExtensionState { name: a.config.name().to_string(), state });
            }
        }
        let secrets = self.secret_values(&set, &active);
        let scrub = |t: &str| scrub(t, &secrets);
        for e in &mut extensions {
            e.state = match &e.state {
                State::Restarting(d) => State::Restarting(scrub(d)),
                State::Failed(d) => State::Failed(scrub(d)),
                other => other.clone(),
            };
        }
        let errors = extensions
            .iter()
            .filter(|e| !matches!(e.state, State::Running | State::Stopped))
            .map(|e| format!("extension {} {}: {}", e.name, e.state.word(), e.state.detail().unwrap_or("")))
            .collect();
        let model = s.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(|m| m.as_str());
        Ok(Report {
            generated_at: gosling_util::now_rfc3339(),
            level,
            version: env!("CARGO_PKG_VERSION"),
            os: std::env::consts::OS,
            os_version: os_version(),
            architecture: std::env::consts::ARCH,
            provider: s.provider_name.clone().or_else(|| self.setting("GOOSE_PROVIDER")),
            model: model.map(str::to_string).or_else(|| self.setting("GOOSE_MODEL")),
            extensions,
            session: (level == Level::Full).then(|| SessionSummary {
                id: s.id.clone(),
                working_dir: s.working_dir.clone(),
                message_count: s.message_count,
                session_type: s.session_type.clone(),
            }),
            errors,
        })
    }

    fn configured_entries(&self) -> Result<Vec<gosling_extensions::config::ExtensionEntry>, Error> {
        Ok(self.store.extensions().map_err(|e| Error::Extensions(Box::new(e)))?.entries)
    }

    /// Every value a report must not show: the stored secrets and the extensions' environment
    /// values (the longest first, so that one holding another is replaced whole).
    fn secret_values(
        &self,
        set: &[extension_set::StoredExtension],
        active: &[std::sync::Arc<gosling_extensions::runtime::ActiveExtension>],
    ) -> Vec<String> {
        let mut values: Vec<String> = self
            .store
            .secret_names()
            .unwrap_or_default()
            .iter()
            .filter_map(|k| self.store.get_secret(k).ok().flatten())
            .collect();
        let configs = set.iter().map(|e| &e.config).chain(active.iter().map(|a| &a.config));
        for c in configs {
            match &c.kind {
                Kind::Stdio { envs, .. } => values.extend(envs.values().cloned()),
                // A header may carry a bearer token.
                Kind::StreamableHttp { headers, .. } => values.extend(headers.values().cloned()),
                _ => {}
            }
        }
        // A value of a few characters would blot out ordinary words.
        values.retain(|v| v.len() >= 4);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        values
    }
}

fn scrub(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_string(), |t, s| t.replace(s.as_str(), "[secret]"))
}

/// The kernel's release on Linux (as goose reports it); else empty.
fn os_version() -> String {
    let mut out = String::new();
    if let Ok(f) = std::fs::File::open("/proc/sys/kernel/osrelease") {
        let _ = f.take(256).read_to_string(&mut out);
    }
    out.trim().to_string()
}
