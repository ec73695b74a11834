//! What a turn may do without asking: goose's permission modes, the per-tool levels the
//! person stored, the tools allowed or refused "always" in a session, and the confirmations
//! running turns wait for. The turn loop (`reply`), the host and sampling read them; this module
//! reads none of them.

use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_util::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// The config key holding goose's per-tool permission levels (`{tool: level}`), which every
/// turn honours (`reply::Turn::approved`).
pub const TOOL_PERMISSIONS: &str = "tool_permissions";

/// goose's permission modes; `auto` when neither the session nor the settings name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Auto,
    Approve,
    SmartApprove,
    Chat,
}

impl Mode {
    /// goose's GOOSE_MODE: the session's, else the setting, else auto.
    pub fn resolve(session_mode: Option<&str>, setting: &dyn Fn(&str) -> Option<String>) -> Mode {
        session_mode
            .and_then(Mode::parse)
            .or_else(|| setting("GOOSE_MODE").as_deref().and_then(Mode::parse))
            .unwrap_or_default()
    }

    const NAMES: [(Mode, &'static str); 4] =
        [(Mode::Auto, "auto"), (Mode::Approve, "approve"), (Mode::SmartApprove, "smart_approve"), (Mode::Chat, "chat")];

    pub fn parse(s: &str) -> Option<Mode> {
        Mode::NAMES.iter().find(|(_, name)| *name == s).map(|(m, _)| *m)
    }

    /// goose's name of the mode (`smart_approve`).
    pub fn name(self) -> &'static str {
        Mode::NAMES.iter().find(|(m, _)| *m == self).map_or("auto", |(_, name)| name)
    }
}

/// The person's answer to a tool confirmation: goose's actions (`/action_required/tool_response`
/// and `/confirm`), ACP's permission options, the web page's buttons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    AllowOnce,
    /// Allowed, and the tool runs without asking again in this session.
    AlwaysAllow,
    DenyOnce,
    /// Declined, and the tool is declined without asking again in this session.
    AlwaysDeny,
    Cancel,
}

impl Decision {
    const NAMES: [(Decision, &'static str); 5] = [
        (Decision::AllowOnce, "allow_once"),
        (Decision::AlwaysAllow, "always_allow"),
        (Decision::DenyOnce, "deny_once"),
        (Decision::AlwaysDeny, "always_deny"),
        (Decision::Cancel, "cancel"),
    ];

    /// goose's action name (`always_allow`), as the turn loop reads it.
    pub fn parse(s: &str) -> Option<Decision> {
        Decision::NAMES.iter().find(|(_, name)| *name == s).map(|(d, _)| *d)
    }

    pub fn as_str(self) -> &'static str {
        Decision::NAMES.iter().find(|(d, _)| *d == self).map_or("cancel", |(_, name)| name)
    }
}

/// Tool confirmations awaited by running turns, keyed by tool request id.
#[derive(Default)]
pub struct Confirmations {
    waiting: Mutex<HashMap<String, Sender<String>>>,
}

/// The session field listing the tools the person allowed "always" in it: kept with the
/// session, so the answer holds whichever front end (HTTP API, web page, ACP) or process asks
/// next.
pub const ALWAYS_ALLOWED: &str = "gosling_always_allowed";
/// The same for the tools the person refused "always" (ACP's `reject_always`, the decision
/// `always_deny`): declined without asking again in this session.
pub const ALWAYS_DENIED: &str = "gosling_always_denied";

/// A tool-name list kept in a session's metadata.
pub(crate) fn name_set(s: &gosling_store::sessions::Session, key: &str) -> std::collections::HashSet<String> {
    s.extra
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| Some(t.as_str()?.to_string()))
        .collect()
}

impl Confirmations {
    pub(crate) fn wait_for(&self, id: &str) -> Receiver<String> {
        let (tx, rx) = bounded(1);
        lock(&self.waiting).insert(id.to_string(), tx);
        rx
    }

    pub(crate) fn forget(&self, id: &str) {
        lock(&self.waiting).remove(id);
    }

    /// Delivers the user's decision; false when no turn waits for this id.
    pub fn answer(&self, id: &str, action: &str) -> bool {
        match lock(&self.waiting).remove(id) {
            Some(tx) => tx.try_send(action.to_string()).is_ok(),
            None => false,
        }
    }
}
