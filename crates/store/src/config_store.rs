//! The persisted configuration: `config.json` (extensions and plain settings) and
//! `secrets.json` (values of `is_secret` keys), both 0600 in the config dir.
//!
//! `config.json` mirrors goose's `config.yaml`: a top-level object whose `extensions` key maps
//! the normalized extension key to the flattened entry (`enabled` + config fields). Every
//! change is a locked read-modify-write of the file (see `atomic`), so concurrent writers in
//! this process or in another `gosling` (the `install` command) never lose an update. A store
//! may know what a missing `config.json` holds (`with_first_run`: `gosling agent`'s first
//! start), read from memory until `save_first_run` or the first change writes it into the file.
//!
//! Reads: each file is kept as last read (`Kept`), with what `stat` said of it and the file
//! held open (so its inode is not given to another file meanwhile); a read looks at the path
//! with one `stat` (not following a link) and reads the file again, under its lock, only when
//! it is not that file any more: replaced (every write here is a rename of a new file), grown,
//! shortened or written in place. So a turn, which reads its settings every time, costs one
//! `stat` of each file while nobody changes them, and a change made by another process is
//! seen by the next read.

use crate::atomic::{self, Error, Ident};
use gosling_util::lock;
use serde_json::{Map, Value};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct ConfigStore {
    config_path: PathBuf,
    secrets_path: PathBuf,
    /// What `config.json` holds while it does not exist (empty but in `with_first_run`).
    first_run: Map<String, Value>,
    config: Mutex<Option<Kept>>,
    secrets: Mutex<Option<Kept>>,
}

/// A JSON object file as last read: what `stat` said of it (`None`: there was no file), the
/// file held open, its document.
struct Kept {
    ident: Option<Ident>,
    _file: Option<File>,
    doc: Arc<Map<String, Value>>,
}

/// A JSON object file (`missing` when there is none): `kept` when the file at `path` is still the one it
/// was read from (one `stat`), else read again under its lock and kept.
fn read_kept(
    path: &Path,
    kept: &Mutex<Option<Kept>>,
    missing: &Map<String, Value>,
) -> Result<Arc<Map<String, Value>>, Error> {
    let now = Ident::at(path)?;
    if let Some(k) = &*lock(kept) {
        if k.ident == now {
            return Ok(k.doc.clone());
        }
    }
    let _guard = atomic::lock(path)?;
    let (file, ident, doc) = match atomic::read_kept(path)? {
        None => (None, None, missing.clone()),
        Some((file, ident, bytes)) => match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => (Some(file), Some(ident), m),
            Ok(_) => {
                let detail = "expected a JSON object at the top level".into();
                return Err(Error::Corrupt { path: path.to_path_buf(), detail });
            }
            Err(e) => return Err(Error::Corrupt { path: path.to_path_buf(), detail: e.to_string() }),
        },
    };
    let doc = Arc::new(doc);
    *lock(kept) = Some(Kept { ident, _file: file, doc: doc.clone() });
    Ok(doc)
}

const EXTENSIONS: &str = "extensions";

impl ConfigStore {
    /// Opens the store in `dir`, creating the directory (0700); an existing one must be ours
    /// and not group/world-writable, and its files not links. Both files must load: a corrupt
    /// file is an error naming it, and the file is left as it is.
    pub fn open(dir: &Path) -> Result<ConfigStore, Error> {
        // Ours alone (every command that opens the store: the server, install, import).
        atomic::check_private_dir(dir)?;
        atomic::refuse_symlinks(dir, &["config.json", "config.json.lock", "secrets.json", "secrets.json.lock"])?;
        let store = ConfigStore {
            config_path: dir.join("config.json"),
            secrets_path: dir.join("secrets.json"),
            first_run: Map::new(),
            config: Mutex::new(None),
            secrets: Mutex::new(None),
        };
        let config = store.config()?;
        if config.get(EXTENSIONS).is_some_and(|ext| !ext.is_object()) {
            return Err(Error::Corrupt {
                path: store.config_path.clone(),
                detail: "`extensions` must be an object".into(),
            });
        }
        store.secrets()?;
        Ok(store)
    }

    /// The store with `doc` as what a missing `config.json` holds: read from memory (no write
    /// on the start's path) until `save_first_run` or any change writes it with the change.
    /// A `config.json` that exists, written by the person or another process, is never
    /// replaced by it.
    pub fn with_first_run(mut self, doc: Map<String, Value>) -> ConfigStore {
        self.first_run = doc;
        // A missing file read before (by `open`) was kept with the empty document.
        *self.config.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        self
    }

    /// Writes the `with_first_run` document into a missing `config.json` (locked, atomic);
    /// whether it wrote it (not when the file exists or there is nothing to write).
    pub fn save_first_run(&self) -> Result<bool, Error> {
        if self.first_run.is_empty() {
            return Ok(false);
        }
        let _guard = atomic::lock(&self.config_path)?;
        if atomic::read_file(&self.config_path)?.is_some() {
            return Ok(false);
        }
        atomic::write_json(&self.config_path, &Value::Object(self.first_run.clone()))?;
        Ok(true)
    }

    fn update<R>(&self, f: impl FnOnce(&mut Map<String, Value>) -> R) -> Result<R, Error> {
        atomic::update_json_or(&self.config_path, &self.first_run, f)
    }

    /// `config.json` as it is now (read again only when it changed: `read_kept`), shared.
    pub fn config(&self) -> Result<Arc<Map<String, Value>>, Error> {
        read_kept(&self.config_path, &self.config, &self.first_run)
    }

    /// `secrets.json` as it is now (as `config`).
    fn secrets(&self) -> Result<Arc<Map<String, Value>>, Error> {
        read_kept(&self.secrets_path, &self.secrets, &Map::new())
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The stored extension entries as they are in the file, by key, in file order (the
    /// extensions layer gives them their shape: `extensions::config::ExtensionStore`).
    pub fn extension_values(&self) -> Result<Vec<(String, Value)>, Error> {
        Ok(match self.config()?.get(EXTENSIONS) {
            Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => Vec::new(),
        })
    }

    /// Creates or replaces the entry under `key`; returns whether it existed.
    pub fn upsert_extension_value(&self, key: &str, value: Value) -> Result<bool, Error> {
        self.update(|doc| {
            let map = doc.entry(EXTENSIONS).or_insert_with(|| Value::Object(Map::new()));
            if !map.is_object() {
                *map = Value::Object(Map::new());
            }
            map.as_object_mut().is_some_and(|m| m.insert(key.to_string(), value).is_some())
        })
    }

    /// Removes the entry with this key; returns whether it existed.
    pub fn remove_extension(&self, key: &str) -> Result<bool, Error> {
        self.update(|doc| {
            doc.get_mut(EXTENSIONS).and_then(Value::as_object_mut).is_some_and(|m| m.remove(key).is_some())
        })
    }

    /// All plain (non-secret) settings, extensions included, as goose's `GET /config` shows them.
    pub fn all(&self) -> Result<Map<String, Value>, Error> {
        self.config().map(Arc::unwrap_or_clone)
    }

    pub fn get(&self, key: &str) -> Result<Option<Value>, Error> {
        Ok(self.config()?.get(key).cloned())
    }

    pub fn set(&self, key: &str, value: Value) -> Result<(), Error> {
        self.update(|doc| {
            doc.insert(key.to_string(), value);
        })
    }

    /// Sets (`Some`) or removes (`None`) `entries` inside the object under `key` (made an
    /// object if it is none), in one locked read-modify-write: two writers of different entries
    /// both keep theirs.
    pub fn set_entries(&self, key: &str, entries: &[(String, Option<Value>)]) -> Result<(), Error> {
        self.update(|doc| {
            let slot = doc.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Some(m) = slot.as_object_mut() {
                for (k, v) in entries {
                    match v {
                        Some(v) => m.insert(k.clone(), v.clone()),
                        None => m.remove(k),
                    };
                }
            }
        })
    }

    pub fn remove(&self, key: &str) -> Result<bool, Error> {
        self.update(|doc| doc.remove(key).is_some())
    }

    pub fn get_secret(&self, key: &str) -> Result<Option<String>, Error> {
        Ok(self.secrets()?.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }))
    }

    pub fn set_secret(&self, key: &str, value: &str) -> Result<(), Error> {
        atomic::update_json(&self.secrets_path, |doc| {
            doc.insert(key.to_string(), Value::String(value.to_string()));
        })
    }

    pub fn remove_secret(&self, key: &str) -> Result<bool, Error> {
        atomic::update_json(&self.secrets_path, |doc| doc.remove(key).is_some())
    }

    /// Names of the stored secrets (never their values).
    pub fn secret_names(&self) -> Result<Vec<String>, Error> {
        Ok(self.secrets()?.keys().cloned().collect())
    }

    /// Stores (`Some`) or forgets (`None`) an OAuth token record (JSON) of the MCP client, kept
    /// in `secrets.json` under `key` (`oauth:<resource> <issuer>`; read with `get_secret`).
    /// Tokens are secrets: never logged, never in config.json.
    pub fn put_token(&self, key: &str, value: Option<&str>) -> Result<(), Error> {
        match value {
            Some(v) => self.set_secret(key, v),
            None => self.remove_secret(key).map(|_| ()),
        }
    }

    /// Keys of the stored token records that start with `prefix`.
    pub fn token_keys(&self, prefix: &str) -> Result<Vec<String>, Error> {
        Ok(self.secret_names()?.into_iter().filter(|k| k.starts_with(prefix)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(tag: &str) -> (ConfigStore, PathBuf) {
        let d = std::env::temp_dir().join(format!("gosling-cs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        (ConfigStore::open(&d).unwrap(), d)
    }

    #[test]
    fn secrets_are_separate() {
        let (s, d) = store("sec");
        s.set_secret("API_TOKEN", "hunter2").unwrap();
        assert_eq!(s.get_secret("API_TOKEN").unwrap().as_deref(), Some("hunter2"));
        assert!(!std::fs::read_to_string(d.join("config.json")).unwrap_or_default().contains("hunter2"));
        assert_eq!(s.secret_names().unwrap(), ["API_TOKEN"]);
    }

    /// The first-run document (`gosling agent`'s first start): read from memory while
    /// `config.json` is missing, saved whole by `save_first_run` or with the first change, and
    /// never written over a `config.json` that another process (or the person) saved first.
    #[test]
    fn the_first_run_document_is_read_from_memory_and_never_overwrites_a_saved_config() {
        let doc = |v: Value| v.as_object().unwrap().clone();
        let first = doc(serde_json::json!({"extensions": {"developer": {"enabled": true, "type": "builtin"}}}));
        let (plain, d) = store("first-run");
        let s = ConfigStore::open(&d).unwrap().with_first_run(first.clone());
        let keys = |s: &ConfigStore| s.extension_values().unwrap().into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(&s), ["developer"]);
        assert_eq!(s.all().unwrap(), first);
        assert!(!d.join("config.json").exists(), "reading writes nothing");
        // Another process (a store without the document) sees none of it until it is saved.
        assert!(keys(&plain).is_empty());
        assert!(s.save_first_run().unwrap());
        assert_eq!(atomic::read_object(&d.join("config.json")).unwrap(), first);
        assert_eq!(keys(&plain), ["developer"]);
        // Switched off by the person, then saved again (a second start's save): left as it is.
        let mut off = first["extensions"]["developer"].clone();
        off["enabled"] = Value::Bool(false);
        plain.upsert_extension_value("developer", off.clone()).unwrap();
        assert!(!s.save_first_run().unwrap());
        assert_eq!(s.extension_values().unwrap(), [("developer".to_string(), off)]);

        // Another process saved a config first: the document is not used, nor ever written.
        let (plain, d) = store("first-run-late");
        let s = ConfigStore::open(&d).unwrap().with_first_run(first.clone());
        plain.set("GOOSE_MODEL", Value::from("m")).unwrap();
        assert!(keys(&s).is_empty());
        assert!(!s.save_first_run().unwrap());
        assert_eq!(atomic::read_object(&d.join("config.json")).unwrap(), doc(serde_json::json!({"GOOSE_MODEL": "m"})));

        // The first change before any save writes the document with it.
        let (_, d) = store("first-run-change");
        let s = ConfigStore::open(&d).unwrap().with_first_run(first.clone());
        s.upsert_extension_value("memory", serde_json::json!({"enabled": true})).unwrap();
        assert_eq!(keys(&ConfigStore::open(&d).unwrap()), ["developer", "memory"]);
        assert!(!s.save_first_run().unwrap());
    }
}
