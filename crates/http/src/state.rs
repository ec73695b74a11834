//! The state every request handler borrows: the agent layer's `Host` and what only HTTP has
//! (the MCP-UI guest pages, the web page's one-time login token, the guess limit).

use crate::auth::{LoginToken, Throttle};
use crate::error::ApiError;
use crate::proxy::GuestPages;
use gosling_agent::host::Host;
use gosling_extensions::config::ExtensionConfig;
use gosling_extensions::policy::InstallSource;
use std::sync::Arc;
use std::time::Duration;

pub struct App {
    pub host: Arc<Host>,
    pub guests: GuestPages,
    pub login: LoginToken,
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
