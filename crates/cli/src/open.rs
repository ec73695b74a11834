//! What the commands work on, opened in one place and the way the servers' core opens it: the
//! config dir as every mode resolves it (`config::config_dir`), its store (`ConfigStore::open`:
//! a private dir, no links, files that parse) and the trust policy (`Policy::new`: the
//! operator's allowlist). The composition root (`main.rs`) makes one `Opener` and hands it to
//! the command it runs.

use gosling_config::{config_dir, Env};
use gosling_extensions::policy::Policy;
use gosling_store::atomic;
use gosling_store::config_store::ConfigStore;
use std::path::{Path, PathBuf};

pub struct Opener<'a> {
    env: &'a dyn Env,
    dir: PathBuf,
}

impl<'a> Opener<'a> {
    pub fn new(env: &'a dyn Env) -> Opener<'a> {
        Opener { env, dir: config_dir(env) }
    }

    /// The environment the command was started with (flags such as `--secrets-from-env` read it).
    pub fn env(&self) -> &'a dyn Env {
        self.env
    }

    pub fn config_dir(&self) -> &Path {
        &self.dir
    }

    /// The config store, created if missing.
    pub fn store(&self) -> Result<ConfigStore, atomic::Error> {
        ConfigStore::open(&self.dir)
    }

    /// The config store only if `file` (`config.json`, `secrets.json`) already exists in the
    /// config dir: for what must not create files (`install --check`, `import --dry-run`).
    pub fn existing_store(&self, file: &str) -> Option<Result<ConfigStore, atomic::Error>> {
        self.dir.join(file).exists().then(|| self.store())
    }

    pub fn policy(&self) -> Result<Policy, gosling_extensions::Error> {
        Policy::new(gosling_config::settings::trust_policy(self.env), &self.dir)
    }
}
