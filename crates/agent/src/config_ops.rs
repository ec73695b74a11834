//! The config operations every front end calls: the extensions kept in the config and the
//! values Desktop and the web page keep there. The rules a saved extension goes through (the
//! trust policy, a foreign approval dropped, secrets not stored → saved switched off) are
//! written once here, for `/config/extensions` and ACP's `_goose/unstable/config/extensions/*`.
//! The process config and the trust policy are read-only here (`config`, `policy`).

use crate::error::Error;
use crate::host::Host;
use gosling_config::Config;
use gosling_extensions::config::{ExtensionConfig, ExtensionEntry, ExtensionStore, Extensions, Unresolved};
use gosling_extensions::policy::{InstallSource, Policy};
use gosling_mcp::oauth::TokenStore;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What saving an extension in the config did.
#[derive(Debug)]
pub struct Saved {
    /// It replaced an entry with the same key.
    pub existed: bool,
    /// Saved switched on (asked for, and every secret it reads is stored).
    pub enabled: bool,
    /// The secrets it reads that are not stored (then it is saved switched off).
    pub unresolved: Unresolved,
}

impl Host {
    /// The process config, as started.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The trust policy built at start (its allowlist file is read again when it changes).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The extensions in the config, and why any entry could not be read.
    pub fn config_extensions(&self) -> Result<Extensions, Error> {
        self.store.extensions().map_err(|e| Error::Extensions(Box::new(e)))
    }

    /// The config's entry under `key` (`name_to_key`), if any.
    pub fn config_extension(&self, key: &str) -> Result<Option<ExtensionEntry>, Error> {
        self.store.extension(key).map_err(|e| Error::Extensions(Box::new(e)))
    }

    /// Saves the person's own extension in the config (through an authenticated front end,
    /// after its own confirmation): a record of an approval from elsewhere is dropped, the trust
    /// policy's rules for the config API apply, and one whose secrets are not all stored is
    /// saved switched off, so that no session tries to start it.
    pub fn save_config_extension(&self, mut config: ExtensionConfig, enabled: bool) -> Result<Saved, Error> {
        gosling_extensions::consent::strip(&mut config);
        self.policy_check(&config, InstallSource::ConfigApi).map_err(|e| Error::Refused(Box::new(e)))?;
        let unresolved = self.unresolved_secrets(&config);
        let enabled = enabled && unresolved.is_empty();
        let name = config.name().to_string();
        let existed = self.keep_config_extension(&ExtensionEntry { enabled, config })?;
        log::info!("extension {name} {} (enabled: {enabled})", if existed { "updated" } else { "added" });
        Ok(Saved { existed, enabled, unresolved })
    }

    /// Switches a configured extension on or off; on only when every secret it reads is stored.
    pub fn enable_config_extension(&self, key: &str, enabled: bool) -> Result<(), Error> {
        let mut entry = self.config_extension(key)?.ok_or_else(|| Error::NotConfigured(key.to_string()))?;
        if enabled {
            let unresolved = self.unresolved_secrets(&entry.config);
            if !unresolved.is_empty() {
                return Err(Error::MissingSecrets { name: entry.config.name().to_string(), unresolved });
            }
        }
        entry.enabled = enabled;
        self.keep_config_extension(&entry)?;
        Ok(())
    }

    /// Keeps an entry its caller already checked (an install from a link: `extensions::deeplink`
    /// and `consent`); true when it replaced one.
    pub fn keep_config_extension(&self, entry: &ExtensionEntry) -> Result<bool, Error> {
        self.store.upsert_extension(entry).map_err(|e| Error::Extensions(Box::new(e)))
    }

    /// Removes a configured extension; false when there was none under `key`. Sessions that
    /// took it from the config do not start it again (`extension_set`).
    pub fn remove_config_extension(&self, key: &str) -> Result<bool, Error> {
        let removed = self.store.remove_extension(key).map_err(Error::Store)?;
        if removed {
            log::info!("extension {key} removed");
        }
        Ok(removed)
    }

    /// Every plain value in the config (not the secrets).
    pub fn config_values(&self) -> Result<Map<String, Value>, Error> {
        self.store.all().map_err(Error::Store)
    }

    /// One plain value of the config; `None` when unset or unreadable.
    pub fn config_value(&self, key: &str) -> Option<Value> {
        self.store.get(key).ok().flatten()
    }

    /// Sets one plain value of the config.
    pub fn set_config_value(&self, key: &str, value: Value) -> Result<(), Error> {
        self.store.set(key, value).map_err(Error::Store)
    }

    /// Whether the secrets store holds `name` (never gosling's own environment).
    pub fn secret_stored(&self, name: &str) -> bool {
        (self.runtime_deps.secret)(name).is_some()
    }

    /// The OAuth tokens' store (the secrets store), for signing an extension out.
    pub fn sign_in_tokens(&self) -> Arc<dyn TokenStore> {
        Arc::new(gosling_extensions::runtime::SecretsTokens(self.store.clone()))
    }
}
