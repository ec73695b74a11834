//! The composition root: process config, the config store and everything request handlers
//! share. Built once in `run_agent`, borrowed by every handler thread.

use crate::config::Config;
use crate::extensions::config::ExtensionConfig;
use crate::http::error::ApiError;
use crate::http::proxy::GuestPages;
use crate::store::config_store::ConfigStore;

/// The ways an extension can be installed or activated; the trust policy sees which one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallPath {
    ConfigApi,
    AddExtension,
    DeepLink,
}

pub struct App {
    pub config: Config,
    pub store: ConfigStore,
    pub guests: GuestPages,
}

impl App {
    pub fn new(config: Config, store: ConfigStore) -> App {
        App { config, store, guests: GuestPages::default() }
    }

    pub fn secret(&self) -> &str {
        &self.config.secret
    }

    /// The trust policy for installs and activations.
    pub fn check_policy(&self, _config: &ExtensionConfig, _path: InstallPath) -> Result<(), ApiError> {
        // FIXME: enforce extensions::policy once it lands (issue 8); today every config passes.
        Ok(())
    }

    /// Stops everything that runs children; called once at shutdown.
    pub fn shutdown(&self) {}
}
