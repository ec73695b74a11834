//! The state every request handler borrows: the agent layer's `Host` and what only HTTP has
//! (the MCP-UI guest pages, the web page's one-time login token, the guess limit).

use crate::auth::{LoginSessions, LoginToken, Throttle};
use crate::error::ApiError;
use crate::proxy::GuestPages;
use gosling_agent::host::Host;
use gosling_extensions::config::ExtensionConfig;
use gosling_extensions::policy::InstallSource;
use std::sync::Arc;
use std::time::Duration;

/// How long a sign-in of the web page lasts (then the page asks again).
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(7 * 86_400);

pub struct App {
    pub host: Arc<Host>,
    pub guests: GuestPages,
    pub login: LoginToken,
    /// The web page's sign-ins (cookies), in memory: a restart signs every page out.
    pub signed_in: LoginSessions,
    /// Failed key and login-token guesses per peer.
    pub throttle: Throttle,
}

impl std::ops::Deref for App {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

impl App {
    pub fn new(host: Arc<Host>) -> App {
        App {
            host,
            guests: GuestPages::default(),
            login: LoginToken::new(Duration::from_secs(600)),
            signed_in: LoginSessions::new(LOGIN_LIFETIME),
            throttle: Throttle::new(),
        }
    }

    pub fn secret(&self) -> &str {
        &self.host.config().secret
    }

    /// `Host::policy_check` with its refusal as the API error a client sees.
    pub fn check_policy(&self, config: &ExtensionConfig, source: InstallSource) -> Result<(), ApiError> {
        Ok(self.host.policy_check(config, source)?)
    }
}
