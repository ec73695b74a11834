//! Sessions on disk: one JSON file per session under `<state dir>/sessions/`, in goose's
//! `Session` shape, rewritten atomically (under a lock) on every change, so a session survives
//! a crash or a restart of the server and can be resumed.

use crate::store::atomic::{self, Error};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// goose's `Session` (snake_case). `conversation` holds goose `Message` JSON objects.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Session {
    pub id: String,
    pub name: String,
    pub working_dir: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub extension_data: Map<String, Value>,
    #[serde(default)]
    pub message_count: u64,
    #[serde(default = "user")]
    pub session_type: String,
    #[serde(default)]
    pub user_set_name: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goose_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_input_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_output_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_total_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Value>,
    /// Fields goose clients may have set that we do not interpret, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn user() -> String {
    "user".into()
}

/// The `extension_data` key holding the session's extension set (goose's).
pub const ENABLED_EXTENSIONS: &str = "enabled_extensions.v0";

pub struct SessionStore {
    dir: PathBuf,
    /// Serializes id allocation within this process.
    create_lock: std::sync::Mutex<()>,
}

/// Session ids name files, so only `[A-Za-z0-9_-]` is accepted (no path tricks).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl SessionStore {
    pub fn open(state_dir: &Path) -> Result<SessionStore, Error> {
        let dir = state_dir.join("sessions");
        atomic::ensure_subdir(&dir)?;
        Ok(SessionStore { dir, create_lock: std::sync::Mutex::new(()) })
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Creates a session with goose's `YYYYMMDD_N` id.
    pub fn create(&self, working_dir: &str, extensions: Vec<Value>) -> Result<Session, Error> {
        let _g = self.create_lock.lock().unwrap_or_else(|e| e.into_inner());
        let now = crate::util::now_rfc3339();
        let day: String = now[..10].replace('-', "");
        let mut n = 1;
        while self.path(&format!("{day}_{n}")).exists() {
            n += 1;
        }
        let mut extension_data = Map::new();
        extension_data.insert(ENABLED_EXTENSIONS.into(), serde_json::json!({ "extensions": extensions }));
        let s = Session {
            id: format!("{day}_{n}"),
            name: "New Chat".into(),
            working_dir: working_dir.into(),
            created_at: now.clone(),
            updated_at: now,
            extension_data,
            message_count: 0,
            session_type: user(),
            user_set_name: false,
            goose_mode: None,
            conversation: Some(Vec::new()),
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            accumulated_input_tokens: None,
            accumulated_output_tokens: None,
            accumulated_total_tokens: None,
            provider_name: None,
            model_config: None,
            recipe: None,
            extra: Map::new(),
        };
        atomic::write_json(&self.path(&s.id), &serde_json::to_value(&s).expect("a Session always serializes"))?;
        Ok(s)
    }

    pub fn get(&self, id: &str) -> Result<Option<Session>, Error> {
        if !valid_id(id) {
            return Ok(None);
        }
        let path = self.path(id);
        match atomic::read_json(&path)? {
            None => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| Error::Corrupt { path, detail: e.to_string() }),
        }
    }

    /// Locked read-modify-write of one session; `None` when it does not exist.
    pub fn update<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Result<Option<R>, Error> {
        if !valid_id(id) {
            return Ok(None);
        }
        let path = self.path(id);
        let _guard = atomic::lock(&path)?;
        let Some(v) = atomic::read_json(&path)? else { return Ok(None) };
        let mut s: Session =
            serde_json::from_value(v).map_err(|e| Error::Corrupt { path: path.clone(), detail: e.to_string() })?;
        let r = f(&mut s);
        s.updated_at = crate::util::now_rfc3339();
        s.message_count = s.conversation.as_ref().map_or(0, |c| c.len() as u64);
        atomic::write_json(&path, &serde_json::to_value(&s).expect("a Session always serializes"))?;
        Ok(Some(r))
    }

    /// All sessions, newest first, without their conversations. Unreadable files are skipped
    /// with a warning (and left in place).
    pub fn list(&self) -> Result<Vec<Session>, Error> {
        let mut out = Vec::new();
        let rd = std::fs::read_dir(&self.dir).map_err(|e| atomic::io_err(&self.dir, e))?;
        for entry in rd.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json") else { continue };
            if !valid_id(id) {
                continue;
            }
            match self.get(id) {
                Ok(Some(mut s)) => {
                    s.conversation = None;
                    out.push(s);
                }
                Ok(None) => {}
                Err(e) => log::warn!("{e}"),
            }
        }
        out.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
        Ok(out)
    }

    pub fn delete(&self, id: &str) -> Result<bool, Error> {
        if !valid_id(id) {
            return Ok(false);
        }
        let path = self.path(id);
        let _guard = atomic::lock(&path)?;
        let removed = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(atomic::io_err(&path, e)),
        };
        let _ = std::fs::remove_file(format!("{}.lock", path.display()));
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_update_list_delete() {
        let d = std::env::temp_dir().join(format!("gosling-sessions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let st = SessionStore::open(&d).unwrap();
        let a = st.create("/w", vec![]).unwrap();
        let b = st.create("/w", vec![]).unwrap();
        assert_ne!(a.id, b.id);
        st.update(&a.id, |s| s.conversation.as_mut().unwrap().push(serde_json::json!({"role":"user"})))
            .unwrap()
            .unwrap();
        assert_eq!(st.get(&a.id).unwrap().unwrap().message_count, 1);
        assert_eq!(st.list().unwrap().len(), 2);
        assert!(st.list().unwrap().iter().all(|s| s.conversation.is_none()));
        assert!(st.get("../etc").unwrap().is_none());
        assert!(st.delete(&a.id).unwrap());
        assert!(!st.delete(&a.id).unwrap());
        assert!(st.update(&a.id, |_| ()).unwrap().is_none());
    }
}
