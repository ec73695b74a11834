//! A session's extension set as stored with it (goose's `enabled_extensions`), with where each
//! entry came from, and the rule that decides what a stored session starts.
//!
//! Where an entry came from (`Origin`, kept beside goose's list in the session's
//! `gosling_extension_origins`, so goose's own shape is untouched):
//! - `Config`: taken from the config, where it was switched on — the enabled extensions a new
//!   session starts with, or one added to a session while the config holds it switched on. The
//!   config is its consent: on resume it starts only while the config still holds it switched
//!   on, and as the config has it now.
//! - `Session`: added to this one session — an editor's `mcpServers`, goose's
//!   `_meta.enabledExtensions` or `/agent/add_extension` naming one the config lacks or holds
//!   switched off, a recipe's extensions, `extension_overrides`, `--with-builtin`. The person
//!   chose it for this session: on resume its stored copy starts (the trust policy and any
//!   consent stamp checked again at activation, as for every start).
//!
//! An entry stored before origins were kept counts as `Config`: what the config no longer
//! holds switched on does not start again from an old session (the person adds it again).
//! This module does not start anything; `ops` does.

use gosling_extensions::config::{runtime_key, ExtensionConfig, ExtensionEntry};
use gosling_store::sessions::{Session, ENABLED_EXTENSIONS};
use serde_json::{json, Map, Value};

/// The session field keeping each stored extension's origin, by runtime key.
pub const ORIGINS: &str = "gosling_extension_origins";

/// Where a session's extension came from (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Config,
    Session,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Config => "config",
            Origin::Session => "session",
        }
    }

    /// The origin of `config` added to a session now: `Config` when the config holds an
    /// extension of the same name switched on, else `Session`.
    pub fn of(config: &ExtensionConfig, configured: &[ExtensionEntry]) -> Origin {
        let key = runtime_key(config.name());
        match configured.iter().any(|e| e.enabled && runtime_key(e.config.name()) == key) {
            true => Origin::Config,
            false => Origin::Session,
        }
    }
}

/// One entry of a session's stored extension set.
#[derive(Debug, Clone)]
pub struct StoredExtension {
    pub config: ExtensionConfig,
    pub origin: Origin,
}

/// The extension set stored on a session (goose's `enabled_extensions`), as stored.
pub fn stored_extensions(s: &Session) -> Vec<Value> {
    let list = s.extension_data.get(ENABLED_EXTENSIONS).and_then(|d| d.get("extensions"));
    list.and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The configs of a session's extension set; one that does not parse is skipped.
pub fn session_extensions(s: &Session) -> Vec<ExtensionConfig> {
    stored_extensions(s).into_iter().filter_map(|v| ExtensionConfig::from_value(v).ok()).collect()
}

/// The session's extension set with each entry's origin (`Config` when none is kept).
pub fn stored_set(s: &Session) -> Vec<StoredExtension> {
    let origins = s.extra.get(ORIGINS).and_then(Value::as_object);
    session_extensions(s)
        .into_iter()
        .map(|config| {
            let kept = origins.and_then(|o| o.get(&runtime_key(config.name()))).and_then(Value::as_str);
            let origin = if kept == Some(Origin::Session.as_str()) { Origin::Session } else { Origin::Config };
            StoredExtension { config, origin }
        })
        .collect()
}

/// Stores `list` as the session's extension set, with the origins.
pub fn store_set(s: &mut Session, list: &[StoredExtension]) {
    let values: Vec<Value> =
        list.iter().map(|e| serde_json::to_value(&e.config).expect("an extension config serializes")).collect();
    let origins: Map<String, Value> =
        list.iter().map(|e| (runtime_key(e.config.name()), json!(e.origin.as_str()))).collect();
    s.extension_data.insert(ENABLED_EXTENSIONS.into(), json!({ "extensions": values }));
    s.extra.insert(ORIGINS.into(), Value::Object(origins));
}

/// Replaces the entry with `name`'s key by `entry`, or drops it when `entry` is `None`.
pub fn replace(s: &mut Session, name: &str, entry: Option<StoredExtension>) {
    let key = runtime_key(name);
    let mut list = stored_set(s);
    list.retain(|e| runtime_key(e.config.name()) != key);
    list.extend(entry);
    store_set(s, &list);
}

/// Why a stored entry is not started (reported with the start's results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStarted {
    /// It came from the config, and the config no longer holds it.
    DeletedFromConfig,
    /// It came from the config, and the config holds it switched off.
    SwitchedOff,
}

/// What a stored session starts (the module's rule): the configs to start, and the entries
/// left out with why.
pub fn to_start(
    set: &[StoredExtension],
    configured: &[ExtensionEntry],
) -> (Vec<ExtensionConfig>, Vec<(String, NotStarted)>) {
    let (mut start, mut left) = (Vec::new(), Vec::new());
    for e in set {
        match e.origin {
            Origin::Session => start.push(e.config.clone()),
            Origin::Config => {
                let key = runtime_key(e.config.name());
                match configured.iter().find(|c| runtime_key(c.config.name()) == key) {
                    Some(c) if c.enabled => start.push(c.config.clone()),
                    Some(_) => left.push((e.config.name().to_string(), NotStarted::SwitchedOff)),
                    None => left.push((e.config.name().to_string(), NotStarted::DeletedFromConfig)),
                }
            }
        }
    }
    (start, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, cmd: &str) -> ExtensionConfig {
        ExtensionConfig::from_value(json!({ "type": "stdio", "name": name, "description": "", "cmd": cmd, "args": [] }))
            .unwrap()
    }

    fn entry(name: &str, cmd: &str, enabled: bool) -> ExtensionEntry {
        ExtensionEntry { enabled, config: config(name, cmd) }
    }

    fn names(list: &[ExtensionConfig]) -> Vec<&str> {
        list.iter().map(|c| c.name()).collect()
    }

    #[test]
    fn a_config_entry_starts_as_the_config_has_it_and_only_while_switched_on() {
        let set = [
            StoredExtension { config: config("kept", "old"), origin: Origin::Config },
            StoredExtension { config: config("off", "x"), origin: Origin::Config },
            StoredExtension { config: config("gone", "x"), origin: Origin::Config },
            StoredExtension { config: config("mine", "y"), origin: Origin::Session },
        ];
        let configured = [entry("kept", "new", true), entry("off", "x", false)];
        let (start, left) = to_start(&set, &configured);
        assert_eq!(names(&start), ["kept", "mine"]);
        assert_eq!(serde_json::to_value(&start[0]).unwrap()["cmd"], "new", "the config's launch now");
        assert_eq!(
            left,
            [("off".to_string(), NotStarted::SwitchedOff), ("gone".to_string(), NotStarted::DeletedFromConfig)]
        );
    }

    #[test]
    fn origins_round_trip_and_an_entry_without_one_counts_as_the_configs() {
        let mut s: Session = serde_json::from_value(json!({
            "id": "1", "name": "", "working_dir": "/", "created_at": "", "updated_at": "",
            "extension_data": {}, "message_count": 0, "session_type": "user", "user_set_name": false
        }))
        .unwrap();
        store_set(
            &mut s,
            &[
                StoredExtension { config: config("A b", "x"), origin: Origin::Session },
                StoredExtension { config: config("c", "x"), origin: Origin::Config },
            ],
        );
        replace(&mut s, "d", Some(StoredExtension { config: config("d", "x"), origin: Origin::Session }));
        s.extra.get_mut(ORIGINS).unwrap().as_object_mut().unwrap().remove("d");
        let got: Vec<_> = stored_set(&s).into_iter().map(|e| (e.config.name().to_string(), e.origin)).collect();
        assert_eq!(got, [("A b".into(), Origin::Session), ("c".into(), Origin::Config), ("d".into(), Origin::Config)]);
        replace(&mut s, "a B", None);
        assert_eq!(names(&session_extensions(&s)), ["c", "d"]);
    }

    #[test]
    fn an_addition_is_the_configs_only_when_the_config_holds_it_switched_on() {
        let configured = [entry("on", "x", true), entry("off", "x", false)];
        assert_eq!(Origin::of(&config("On", "y"), &configured), Origin::Config);
        assert_eq!(Origin::of(&config("off", "x"), &configured), Origin::Session);
        assert_eq!(Origin::of(&config("other", "x"), &configured), Origin::Session);
    }
}
