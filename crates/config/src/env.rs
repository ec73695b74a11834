//! Where settings come from: the process environment (or a fixed map in tests) and the XDG
//! directories derived from it.

use std::path::PathBuf;

/// Process environment lookups go through this so tests of `from_env` need no real env.
pub trait Env {
    fn get(&self, key: &str) -> Option<String>;
}

pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.is_empty())
    }
}

/// The XDG base directory for `kind` ("CONFIG" or "STATE"), with the spec's fallbacks.
pub fn xdg_dir(env: &dyn Env, kind: &str) -> PathBuf {
    if let Some(d) = env.get(&format!("XDG_{kind}_HOME")).filter(|d| d.starts_with('/')) {
        return PathBuf::from(d);
    }
    let home = env.get("HOME").unwrap_or_else(|| "/".to_string());
    match kind {
        "CONFIG" => PathBuf::from(home).join(".config"),
        _ => PathBuf::from(home).join(".local").join("state"),
    }
}

pub fn config_dir(env: &dyn Env) -> PathBuf {
    env.get("GOSLING_CONFIG_DIR").map(PathBuf::from).unwrap_or_else(|| xdg_dir(env, "CONFIG").join("gosling"))
}

pub fn state_dir(env: &dyn Env) -> PathBuf {
    env.get("GOSLING_STATE_DIR").map(PathBuf::from).unwrap_or_else(|| xdg_dir(env, "STATE").join("gosling"))
}

/// A fixed environment for tests of code that reads settings.
#[cfg(test)]
pub(crate) struct MapEnv(pub std::collections::HashMap<&'static str, &'static str>);

#[cfg(test)]
impl Env for MapEnv {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).map(|s| s.to_string())
    }
}
