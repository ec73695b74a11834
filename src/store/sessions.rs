//! Sessions on disk, so a session survives a crash or a restart and can be resumed.
//!
//! Each session is two files under `<state dir>/sessions/`:
//! - `<id>.meta.json`: goose's `Session` without its conversation (everything `GET /sessions`
//!   lists), plus where the conversation file ended when it was written. Replaced atomically
//!   (temp + fsync + rename) on every metadata change.
//! - `<id>.jsonl`: the conversation, one goose `Message` per line. A new message is one
//!   `O_APPEND` write and an fsync, so appending costs the same however long the conversation
//!   is; a rewrite (goose's `override_conversation`) replaces the file atomically. The file
//!   appears with the first message.
//!
//! An in-memory index of every session's metadata (as its listing JSON) is loaded once when
//! the store opens, so listing never opens a file. Appends rewrite the metadata file only every
//! `APPENDS_PER_META_WRITE` messages: after a crash, opening the store finds the conversation
//! longer than its metadata records and counts only the lines past the recorded end (a torn
//! last line, never acknowledged, is cut off with a warning). Only one server may own a state
//! directory: the store holds an exclusive lock on `sessions/.lock` while open.
//!
//! Sessions written by earlier versions (`<id>.json`, the conversation inside) are read in
//! place and migrated on their first change. A file that cannot be read is reported with its
//! name and left untouched, never replaced or silently dropped.
//!
//! Not here: what a message means (agent/messages.rs); locking across processes beyond the
//! owner lock.

use crate::store::atomic::{self, Error};
use crate::util::lock;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// goose's `Session` (snake_case). `conversation` holds goose `Message` JSON objects.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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

/// The key of the metadata file recording where the conversation file ended; never on the wire.
const FILE_KEY: &str = "gosling_conversation_file";

/// Appends between two metadata writes, at most: bounds what opening the store must recount
/// after a crash, at one metadata write per this many messages.
const APPENDS_PER_META_WRITE: u32 = 64;

/// Where the conversation file ended when the metadata was last made consistent with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct FilePos {
    /// Length in bytes; always just after a line's `\n`.
    bytes: u64,
    /// The file's inode (0: no file yet). A rewrite makes a new file, so a different inode
    /// after a crash means the metadata describes a file that was replaced.
    ino: u64,
}

/// One session's indexed metadata. Replaced whole (behind an `Arc`) on every change. The
/// session itself is kept only as its listing JSON (a tenth of the memory of a parsed
/// `Session`), parsed again when a caller wants the struct.
struct Meta {
    id: Box<str>,
    updated_at: Box<str>,
    /// The session without its conversation as listed on the wire (compact JSON), so listing
    /// only copies bytes.
    json: Box<str>,
    file: FilePos,
    /// Appends since the metadata file was last written.
    unsaved: u32,
    /// Still in the one-file layout (`<id>.json`), read in place until its first change.
    legacy: bool,
}

impl Meta {
    fn new(mut session: Session, file: FilePos, unsaved: u32) -> Meta {
        session.conversation = None;
        let json = serde_json::to_string(&session).unwrap_or_else(|_| "{}".into()).into_boxed_str();
        Meta { id: session.id.into(), updated_at: session.updated_at.into(), json, file, unsaved, legacy: false }
    }

    /// The session, without its conversation.
    fn session(&self) -> Result<Session, Error> {
        // The JSON is our own serialization of a Session; failing to read it back is a bug.
        serde_json::from_str(&self.json)
            .map_err(|e| corrupt(Path::new(&*self.id), format!("the indexed metadata does not parse ({e})")))
    }
}

#[derive(Clone)]
struct Slot {
    meta: Arc<Meta>,
    /// Held for every file operation on the session, so they never interleave.
    write: Arc<Mutex<()>>,
}

pub struct SessionStore {
    dir: PathBuf,
    index: Mutex<HashMap<String, Slot>>,
    /// Serializes id allocation and loading a session missing from the index.
    create_lock: Mutex<()>,
    /// The exclusive owner lock on `sessions/.lock`, held while the store is open.
    _owner: File,
}

/// Whether an operation changes the session's files (a session of the one-file layout is
/// migrated first).
#[derive(Clone, Copy, PartialEq)]
enum Change {
    Read,
    Write,
}

/// Session ids name files, so only `[A-Za-z0-9_-]` is accepted (no path tricks).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn corrupt(path: &Path, detail: impl Into<String>) -> Error {
    Error::Corrupt { path: path.to_path_buf(), detail: detail.into() }
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| atomic::io_err(dir, e))
}

fn remove_if_present(path: &Path) -> Result<bool, Error> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(atomic::io_err(path, e)),
    }
}

/// The messages of a conversation file's bytes, one per `\n`-terminated line, numbered from
/// `first_line` (1-based) in errors: as `Value`s, or as `IgnoredAny` to check and count them
/// without keeping them. A last line without its `\n` was torn by a crash before it was
/// acknowledged: it is left out and its length returned.
fn parse_lines<T: DeserializeOwned>(path: &Path, bytes: &[u8], first_line: u64) -> Result<(Vec<T>, usize), Error> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
        let line = &bytes[start..start + n];
        let v = serde_json::from_slice(line).map_err(|e| {
            corrupt(path, format!("line {} is not a JSON message ({e})", first_line + out.len() as u64))
        })?;
        out.push(v);
        start += n + 1;
    }
    Ok((out, bytes.len() - start))
}

/// Messages as conversation-file lines, each ending in `\n`.
fn encode_lines(path: &Path, messages: &[Value]) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    for m in messages {
        serde_json::to_writer(&mut bytes, m).map_err(|e| corrupt(path, e.to_string()))?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Appends `bytes` to the conversation file `f`, `len` bytes long, and fsyncs it; a failed
/// write is cut back off, never leaving half a line for the next append to follow.
fn append_synced(path: &Path, f: &mut File, len: u64, bytes: &[u8]) -> Result<(), Error> {
    f.write_all(bytes).and_then(|_| f.sync_data()).map_err(|e| {
        let _ = f.set_len(len);
        atomic::io_err(path, e)
    })
}

/// A session file of the one-file layout, conversation inside.
fn parse_legacy(path: &Path, id: &str, bytes: &[u8]) -> Result<Session, Error> {
    of_id(path, serde_json::from_slice(bytes).map_err(|e| corrupt(path, e.to_string()))?, id)
}

/// `session` as read from `path`, the file of session `id`: one holding another is refused.
fn of_id(path: &Path, session: Session, id: &str) -> Result<Session, Error> {
    if session.id != id {
        return Err(corrupt(path, format!("it holds session {:?}, not {id:?}", session.id)));
    }
    Ok(session)
}

impl SessionStore {
    /// Opens (creating) `<state dir>/sessions`, takes the owner lock and loads the index,
    /// recounting conversations a crash left ahead of their metadata. A session whose files cannot be read is left out
    /// of the index with a warning naming the file (asking for it by id reports the error).
    pub fn open(state_dir: &Path) -> Result<SessionStore, Error> {
        let dir = state_dir.join("sessions");
        atomic::ensure_subdir(&dir)?;
        let owner_path = dir.join(".lock");
        let owner = atomic::open_lock_file(&owner_path)?;
        owner.try_lock().map_err(|e| {
            let why = match e {
                std::fs::TryLockError::WouldBlock => io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "another gosling server uses these sessions; stop it, or give this one its own GOSLING_STATE_DIR",
                ),
                std::fs::TryLockError::Error(e) => e,
            };
            atomic::io_err(&owner_path, why)
        })?;
        let store = SessionStore { dir, index: Mutex::new(HashMap::new()), create_lock: Mutex::new(()), _owner: owner };
        store.load_all()?;
        Ok(store)
    }

    fn meta_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.meta.json"))
    }
    fn messages_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }
    /// The earlier layout: one file with the conversation inside.
    fn legacy_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn load_all(&self) -> Result<(), Error> {
        let rd = std::fs::read_dir(&self.dir).map_err(|e| atomic::io_err(&self.dir, e))?;
        let started = std::time::Instant::now();
        // id → whether a file of the one-file layout holds it.
        let mut ids = std::collections::BTreeMap::new();
        let mut messages_files = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| atomic::io_err(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(".tmp.") {
                // A temp file of a write that a crash interrupted; the target is intact.
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            if let Some(id) = name.strip_suffix(".meta.json").filter(|id| valid_id(id)) {
                ids.entry(id.to_string()).or_insert(false);
            } else if let Some(id) = name.strip_suffix(".json").filter(|id| valid_id(id)) {
                ids.insert(id.to_string(), true);
            } else if let Some(id) = name.strip_suffix(".jsonl").filter(|id| valid_id(id)) {
                messages_files.push(id.to_string());
            }
        }
        let mut loaded = HashMap::with_capacity(ids.len());
        for (id, legacy) in ids {
            let meta = if legacy { self.load_legacy(&id) } else { self.load_current(&id) };
            match meta {
                Ok(Some(meta)) => {
                    loaded.insert(id, Slot { meta: Arc::new(meta), write: Arc::default() });
                }
                Ok(None) => {}
                Err(e) => log::warn!("{e}; the session is left out of the list"),
            }
        }
        for id in messages_files {
            if !self.meta_path(&id).exists() && !self.legacy_path(&id).exists() {
                log::warn!(
                    "store: {} has no metadata file (a deletion was interrupted?); it is not listed — remove it, or move it away to keep it",
                    self.messages_path(&id).display()
                );
            }
        }
        log::info!("store: {} sessions indexed in {:?}", loaded.len(), started.elapsed());
        *lock(&self.index) = loaded;
        Ok(())
    }

    /// Reads one session's metadata from disk, recounting its conversation after a crash.
    /// A file of the one-file layout is the session as long as it exists (it is removed only
    /// once the two new files are durable), so a migration a crash interrupted is redone.
    fn load_one(&self, id: &str) -> Result<Option<Meta>, Error> {
        match self.load_legacy(id)? {
            Some(meta) => Ok(Some(meta)),
            None => self.load_current(id),
        }
    }

    fn load_legacy(&self, id: &str) -> Result<Option<Meta>, Error> {
        let legacy = self.legacy_path(id);
        let Some(bytes) = atomic::read_file(&legacy)? else { return Ok(None) };
        /// The file with its messages counted but not kept (skipped without allocating).
        #[derive(Deserialize)]
        struct Counted {
            #[serde(default)]
            conversation: Option<Vec<IgnoredAny>>,
            #[serde(flatten)]
            session: Session,
        }
        let c: Counted = serde_json::from_slice(&bytes).map_err(|e| corrupt(&legacy, e.to_string()))?;
        let mut session = of_id(&legacy, c.session, id)?;
        session.message_count = c.conversation.map_or(0, |c| c.len() as u64);
        Ok(Some(Meta { legacy: true, ..Meta::new(session, FilePos::default(), 0) }))
    }

    fn load_current(&self, id: &str) -> Result<Option<Meta>, Error> {
        let meta_path = self.meta_path(id);
        let Some(bytes) = atomic::read_file(&meta_path)? else { return Ok(None) };
        // The file is a Session (without conversation) plus FILE_KEY, which lands in `extra`.
        let mut session: Session = serde_json::from_slice(&bytes).map_err(|e| corrupt(&meta_path, e.to_string()))?;
        let recorded: Option<FilePos> = session
            .extra
            .remove(FILE_KEY)
            .map(|v| serde_json::from_value(v).map_err(|e| corrupt(&meta_path, format!("{FILE_KEY}: {e}"))))
            .transpose()?;
        session.conversation = None;
        self.reconcile(of_id(&meta_path, session, id)?, recorded).map(Some)
    }

    /// Makes the metadata agree with the conversation file after a crash: counts the lines
    /// past the recorded end, or all of them when the file was replaced.
    fn reconcile(&self, mut session: Session, recorded: Option<FilePos>) -> Result<Meta, Error> {
        let path = self.messages_path(&session.id);
        let stat = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let n = session.message_count;
                if !recorded.map_or(n == 0, |r| r.bytes == 0) {
                    return Err(corrupt(&path, format!("it is missing, but the metadata records {n} messages")));
                }
                return Ok(Meta::new(session, FilePos::default(), 0));
            }
            Err(e) => return Err(atomic::io_err(&path, e)),
        };
        if !stat.is_file() {
            return Err(corrupt(&path, "not a regular file"));
        }
        let now = FilePos { bytes: stat.len(), ino: stat.ino() };
        if recorded == Some(now) {
            return Ok(Meta::new(session, now, 0));
        }
        let (from, first_line) = match recorded {
            Some(r) if r.ino == now.ino && r.bytes < now.bytes => (r.bytes, session.message_count + 1),
            _ => (0, 1),
        };
        let mut f = atomic::open_read(&path).map_err(|e| atomic::io_err(&path, e))?;
        let mut tail = Vec::new();
        f.seek(SeekFrom::Start(from)).and_then(|_| f.read_to_end(&mut tail)).map_err(|e| atomic::io_err(&path, e))?;
        let (lines, torn) = parse_lines::<IgnoredAny>(&path, &tail, first_line)?;
        let lines = lines.len() as u64;
        let shown = path.display();
        if from == 0 {
            log::warn!("store: {shown} does not match its metadata (a rewrite was interrupted, or it was changed by hand); recounted {lines} messages");
            session.message_count = lines;
        } else {
            log::info!("store: {shown}: {lines} message(s) appended after its metadata was last written; counted");
            session.message_count += lines;
        }
        let good = now.bytes - torn as u64;
        if torn > 0 {
            log::warn!("store: {shown}: its last line is incomplete ({torn} bytes, written when the server stopped mid-write and never acknowledged); cut off");
            let f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| atomic::io_err(&path, e))?;
            f.set_len(good).and_then(|_| f.sync_all()).map_err(|e| atomic::io_err(&path, e))?;
        }
        let mtime = crate::util::rfc3339(stat.mtime());
        if mtime > session.updated_at {
            session.updated_at = mtime;
        }
        let file = FilePos { bytes: good, ino: now.ino };
        self.write_meta(&session, file)?;
        Ok(Meta::new(session, file, 0))
    }

    /// Moves a session of the one-file layout to its two files, then removes the old file
    /// and makes that durable, before anything is added to the new files.
    fn migrate(&self, id: &str) -> Result<Meta, Error> {
        let legacy = self.legacy_path(id);
        if let Some(bytes) = atomic::read_file(&legacy)? {
            let mut session = parse_legacy(&legacy, id, &bytes)?;
            let conversation = session.conversation.take().unwrap_or_default();
            session.message_count = conversation.len() as u64;
            let path = self.messages_path(id);
            let file = if conversation.is_empty() {
                remove_if_present(&path)?;
                FilePos::default()
            } else {
                self.write_messages(&path, &conversation)?
            };
            self.write_meta(&session, file)?;
            remove_if_present(&legacy)?;
            let _ = remove_if_present(&PathBuf::from(format!("{}.lock", legacy.display())));
            log::info!(
                "store: migrated {} ({} messages) to {id}.meta.json + {id}.jsonl",
                legacy.display(),
                conversation.len()
            );
        }
        sync_dir(&self.dir)?;
        self.load_one(id)?.ok_or_else(|| corrupt(&self.meta_path(id), "missing after the migration"))
    }

    /// Replaces a conversation file atomically; where it ends.
    fn write_messages(&self, path: &Path, conversation: &[Value]) -> Result<FilePos, Error> {
        atomic::write_atomic(path, &encode_lines(path, conversation)?)?;
        let stat = std::fs::symlink_metadata(path).map_err(|e| atomic::io_err(path, e))?;
        Ok(FilePos { bytes: stat.len(), ino: stat.ino() })
    }

    fn write_meta(&self, session: &Session, file: FilePos) -> Result<(), Error> {
        let path = self.meta_path(&session.id);
        let mut doc = match serde_json::to_value(session) {
            Ok(Value::Object(m)) => m,
            _ => return Err(corrupt(&path, "the session did not serialize to an object")),
        };
        doc.remove("conversation");
        doc.insert(FILE_KEY.into(), serde_json::json!(file));
        let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc)).map_err(|e| corrupt(&path, e.to_string()))?;
        bytes.push(b'\n');
        atomic::write_atomic(&path, &bytes)
    }

    /// Writes the metadata of `s`, changed now, its conversation file ending at `file`; the
    /// entry that replaces the indexed one.
    fn save(&self, mut s: Session, file: FilePos) -> Result<Meta, Error> {
        s.updated_at = crate::util::now_rfc3339();
        self.write_meta(&s, file)?;
        Ok(Meta::new(s, file, 0))
    }

    /// Creates a session with goose's `YYYYMMDD_N` id.
    pub fn create(&self, working_dir: &str, extensions: Vec<Value>) -> Result<Session, Error> {
        let _g = lock(&self.create_lock);
        let now = crate::util::now_rfc3339();
        let day: String = now[..10].replace('-', "");
        let taken = |id: &str| {
            lock(&self.index).contains_key(id)
                || [self.meta_path(id), self.messages_path(id), self.legacy_path(id)]
                    .iter()
                    .any(|p| std::fs::symlink_metadata(p).is_ok())
        };
        let mut n = 1;
        while taken(&format!("{day}_{n}")) {
            n += 1;
        }
        let extensions = serde_json::json!({ "extensions": extensions });
        let s = Session {
            id: format!("{day}_{n}"),
            name: "New Chat".into(),
            working_dir: working_dir.into(),
            created_at: now.clone(),
            updated_at: now,
            extension_data: Map::from_iter([(ENABLED_EXTENSIONS.to_string(), extensions)]),
            session_type: user(),
            ..Session::default()
        };
        self.write_meta(&s, FilePos::default())?;
        let meta = Meta::new(s.clone(), FilePos::default(), 0);
        lock(&self.index).insert(s.id.clone(), Slot { meta: Arc::new(meta), write: Arc::default() });
        Ok(Session { conversation: Some(Vec::new()), ..s })
    }

    /// The session's indexed metadata and its write lock, loading it from disk when it is not
    /// indexed (a file repaired by hand; or the error that kept it out of the index).
    fn slot(&self, id: &str) -> Result<Option<Slot>, Error> {
        if !valid_id(id) {
            return Ok(None);
        }
        if let Some(s) = lock(&self.index).get(id) {
            return Ok(Some(s.clone()));
        }
        let _g = lock(&self.create_lock);
        if let Some(s) = lock(&self.index).get(id) {
            return Ok(Some(s.clone()));
        }
        let Some(meta) = self.load_one(id)? else { return Ok(None) };
        let slot = Slot { meta: Arc::new(meta), write: Arc::default() };
        lock(&self.index).insert(id.to_string(), slot.clone());
        Ok(Some(slot))
    }

    /// Runs `f` on the session's current metadata under its write lock; the `Meta` it returns
    /// replaces the indexed one. `None` when the session does not exist (or was deleted
    /// meanwhile).
    fn with_session<R>(
        &self,
        id: &str,
        change: Change,
        f: impl FnOnce(&Meta) -> Result<(Option<Meta>, R), Error>,
    ) -> Result<Option<R>, Error> {
        let Some(Slot { write, .. }) = self.slot(id)? else { return Ok(None) };
        let _w = lock(&write);
        let mut current = match lock(&self.index).get(id) {
            Some(s) if Arc::ptr_eq(&s.write, &write) => s.meta.clone(),
            _ => return Ok(None),
        };
        if current.legacy && change == Change::Write {
            current = Arc::new(self.migrate(id)?);
            if let Some(s) = lock(&self.index).get_mut(id) {
                s.meta = current.clone();
            }
        }
        let (new, r) = f(&current)?;
        if let (Some(new), Some(s)) = (new, lock(&self.index).get_mut(id)) {
            s.meta = Arc::new(new);
        }
        Ok(Some(r))
    }

    /// The conversation as its file holds it, up to where the metadata says it ends.
    fn read_conversation(&self, meta: &Meta) -> Result<Vec<Value>, Error> {
        if meta.legacy {
            let path = self.legacy_path(&meta.id);
            let bytes =
                atomic::read_file(&path)?.ok_or_else(|| corrupt(&path, "it vanished while the session was open"))?;
            return Ok(parse_legacy(&path, &meta.id, &bytes)?.conversation.unwrap_or_default());
        }
        if meta.file.bytes == 0 {
            return Ok(Vec::new());
        }
        let path = self.messages_path(&meta.id);
        let mut bytes = Vec::with_capacity(meta.file.bytes as usize);
        let f = atomic::open_read(&path).map_err(|e| atomic::io_err(&path, e))?;
        f.take(meta.file.bytes).read_to_end(&mut bytes).map_err(|e| atomic::io_err(&path, e))?;
        let (held, written) = (bytes.len() as u64, meta.file.bytes);
        if held < written {
            let detail = format!("it holds {held} bytes, but {written} were written; another program shortened it");
            return Err(corrupt(&path, detail));
        }
        let (messages, torn) = parse_lines(&path, &bytes, 1)?;
        if torn > 0 {
            log::warn!("store: {}: an incomplete last line ({torn} bytes) is ignored", path.display());
        }
        Ok(messages)
    }

    /// The session with its conversation (read from its file).
    pub fn get(&self, id: &str) -> Result<Option<Session>, Error> {
        self.with_session(id, Change::Read, |meta| {
            let mut s = meta.session()?;
            s.conversation = Some(self.read_conversation(meta)?);
            Ok((None, s))
        })
    }

    /// The session without its conversation (`conversation` is `None`), from the index: no
    /// file is read.
    pub fn get_meta(&self, id: &str) -> Result<Option<Session>, Error> {
        self.slot(id)?.map(|s| s.meta.session()).transpose()
    }

    /// Appends one message to the conversation: one write and one fsync of its file,
    /// whatever the conversation's length. `false` when the session does not exist.
    pub fn append_message(&self, id: &str, message: &Value) -> Result<bool, Error> {
        let done = self.with_session(id, Change::Write, |meta| {
            let path = self.messages_path(id);
            let line = encode_lines(&path, std::slice::from_ref(message))?;
            let mut f = atomic::open_append(&path).map_err(|e| atomic::io_err(&path, e))?;
            let stat = f.metadata().map_err(|e| atomic::io_err(&path, e))?;
            let created = meta.file.ino == 0;
            let (held, written) = (stat.len(), meta.file.bytes);
            if held != written || (!created && stat.ino() != meta.file.ino) {
                let detail = format!("it holds {held} bytes where {written} were written; another program changed it (restart gosling to recount it)");
                return Err(corrupt(&path, detail));
            }
            append_synced(&path, &mut f, written, &line)?;
            if created {
                sync_dir(&self.dir)?;
            }
            let mut s = meta.session()?;
            s.message_count += 1;
            s.updated_at = crate::util::now_rfc3339();
            let file = FilePos { bytes: meta.file.bytes + line.len() as u64, ino: stat.ino() };
            let mut unsaved = meta.unsaved + 1;
            if created || unsaved >= APPENDS_PER_META_WRITE {
                self.write_meta(&s, file)?;
                unsaved = 0;
            }
            Ok((Some(Meta::new(s, file, unsaved)), ()))
        })?;
        Ok(done.is_some())
    }

    /// Replaces the whole conversation (goose's `override_conversation`): the file is
    /// rewritten atomically. `false` when the session does not exist.
    pub fn replace_conversation(&self, id: &str, conversation: &[Value]) -> Result<bool, Error> {
        let done = self.with_session(id, Change::Write, |meta| {
            let file = self.write_messages(&self.messages_path(id), conversation)?;
            let mut s = meta.session()?;
            s.message_count = conversation.len() as u64;
            Ok((Some(self.save(s, file)?), ()))
        })?;
        Ok(done.is_some())
    }

    /// Changes a session's metadata: `f` sees it without its conversation (`None`, and left
    /// so: use `append_message` or `replace_conversation` for messages). Costs one small
    /// atomic write, whatever the conversation's length. `None` when it does not exist.
    pub fn update_meta<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Result<Option<R>, Error> {
        self.with_session(id, Change::Write, |meta| {
            let before = meta.session()?;
            let mut s = before.clone();
            let r = f(&mut s);
            if s.conversation.is_some() {
                log::error!("store: update_meta of session {id} set a conversation, which is ignored; use append_message or replace_conversation");
            }
            s.id = before.id;
            s.message_count = before.message_count;
            s.conversation = None;
            Ok((Some(self.save(s, meta.file)?), r))
        })
    }

    /// Locked read-modify-write of one session with its conversation; `None` when it does not
    /// exist. Reads the whole conversation: prefer `update_meta` and `append_message`. Messages
    /// added at the end are appended; any other change to the conversation rewrites it.
    pub fn update<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Result<Option<R>, Error> {
        self.with_session(id, Change::Write, |meta| {
            let before = self.read_conversation(meta)?;
            let mut s = meta.session()?;
            s.conversation = Some(before.clone());
            let r = f(&mut s);
            let after = s.conversation.take().unwrap_or_default();
            let path = self.messages_path(id);
            let file = if after.len() >= before.len() && after[..before.len()] == before[..] {
                if after.len() == before.len() {
                    meta.file
                } else {
                    let bytes = encode_lines(&path, &after[before.len()..])?;
                    let mut f = atomic::open_append(&path).map_err(|e| atomic::io_err(&path, e))?;
                    append_synced(&path, &mut f, meta.file.bytes, &bytes)?;
                    let stat = f.metadata().map_err(|e| atomic::io_err(&path, e))?;
                    FilePos { bytes: meta.file.bytes + bytes.len() as u64, ino: stat.ino() }
                }
            } else {
                self.write_messages(&path, &after)?
            };
            s.id = meta.id.to_string();
            s.message_count = after.len() as u64;
            Ok((Some(self.save(s, file)?), r))
        })
    }

    /// Every indexed session, newest first (by `updated_at`, then id).
    fn sorted(&self) -> Vec<Arc<Meta>> {
        let mut all: Vec<Arc<Meta>> = lock(&self.index).values().map(|s| s.meta.clone()).collect();
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
        all
    }

    /// All sessions, newest first, without their conversations: parsed from the index (a few
    /// µs each), no file is read. Sessions whose files could not be read at start are not
    /// listed (a warning named each file then).
    pub fn list(&self) -> Result<Vec<Session>, Error> {
        self.sorted().iter().map(|m| m.session()).collect()
    }

    /// `list()` as a JSON array (goose's Session objects), built from each session's cached
    /// JSON without serializing anything.
    pub fn list_json(&self) -> Vec<u8> {
        let all = self.sorted();
        let mut out = Vec::with_capacity(2 + all.iter().map(|m| m.json.len() + 1).sum::<usize>());
        out.push(b'[');
        for (i, m) in all.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(m.json.as_bytes());
        }
        out.push(b']');
        out
    }

    /// Deletes a session's files; `false` when it does not exist. A session whose files
    /// cannot be read is deleted too (that is how a user gets rid of one).
    pub fn delete(&self, id: &str) -> Result<bool, Error> {
        let remove_all = || -> Result<bool, Error> {
            // The metadata first: once it is gone the session is, whatever a crash leaves.
            let mut any = remove_if_present(&self.meta_path(id))?;
            any |= remove_if_present(&self.messages_path(id))?;
            any |= remove_if_present(&self.legacy_path(id))?;
            sync_dir(&self.dir)?;
            Ok(any)
        };
        let done = match self.with_session(id, Change::Read, |_| {
            remove_all()?;
            lock(&self.index).remove(id);
            Ok((None, ()))
        }) {
            Err(Error::Corrupt { path, detail }) => {
                log::warn!("store: deleting session {id}, unreadable ({}: {detail})", path.display());
                let _g = lock(&self.create_lock);
                remove_all()?.then_some(())
            }
            other => other?,
        };
        Ok(done.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosling-sessions-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn message(i: usize) -> Value {
        json!({"id": format!("m{i}"), "role": "user", "created": i, "content": [{"type": "text", "text": format!("hello {i}")}], "metadata": {}})
    }

    #[test]
    fn create_update_list_delete() {
        let d = tmpdir("crud");
        let st = SessionStore::open(&d).unwrap();
        let a = st.create("/w", vec![]).unwrap();
        let b = st.create("/w", vec![]).unwrap();
        assert_ne!(a.id, b.id);
        assert_eq!(a.conversation, Some(vec![]));
        assert!(st.append_message(&a.id, &message(0)).unwrap());
        assert_eq!(st.get(&a.id).unwrap().unwrap().message_count, 1);
        assert_eq!(st.get_meta(&a.id).unwrap().unwrap().message_count, 1);
        st.update_meta(&a.id, |s| s.working_dir = "/x".into()).unwrap().unwrap();
        assert_eq!(st.get(&a.id).unwrap().unwrap().working_dir, "/x");
        assert_eq!(st.list().unwrap().len(), 2);
        assert!(st.list().unwrap().iter().all(|s| s.conversation.is_none()));
        let listed: Vec<Value> = serde_json::from_slice(&st.list_json()).unwrap();
        assert_eq!(listed, st.list().unwrap().iter().map(|s| serde_json::to_value(s).unwrap()).collect::<Vec<_>>());
        assert!(st.get("../etc").unwrap().is_none());
        assert!(st.delete(&a.id).unwrap());
        assert!(!st.delete(&a.id).unwrap());
        assert!(st.update(&a.id, |_| ()).unwrap().is_none());
        assert!(!st.append_message(&a.id, &message(1)).unwrap());
        assert!(!d.join("sessions").join(format!("{}.jsonl", a.id)).exists());
    }

    #[test]
    fn an_unreadable_session_can_still_be_deleted() {
        let d = tmpdir("delete-corrupt");
        let st = SessionStore::open(&d).unwrap();
        let id = st.create("/w", vec![]).unwrap().id;
        drop(st);
        std::fs::write(d.join("sessions").join(format!("{id}.meta.json")), b"{not json").unwrap();
        let st = SessionStore::open(&d).unwrap();
        assert!(st.list().unwrap().is_empty());
        let e = st.get(&id).unwrap_err().to_string();
        assert!(e.contains(&format!("{id}.meta.json")) && e.contains("left untouched"), "{e}");
        assert!(st.delete(&id).unwrap());
        assert!(st.get(&id).unwrap().is_none());
    }

    #[test]
    fn appends_survive_a_reopen_without_a_metadata_write() {
        let d = tmpdir("reopen");
        let id = {
            let st = SessionStore::open(&d).unwrap();
            let s = st.create("/w", vec![]).unwrap();
            for i in 0..10 {
                st.append_message(&s.id, &message(i)).unwrap();
            }
            s.id
        };
        // Only the first append wrote the metadata; the other nine are recounted.
        let st = SessionStore::open(&d).unwrap();
        let s = st.get(&id).unwrap().unwrap();
        assert_eq!(s.message_count, 10);
        assert_eq!(s.conversation.unwrap(), (0..10).map(message).collect::<Vec<_>>());
        assert_eq!(st.list().unwrap()[0].message_count, 10);
    }

    #[test]
    fn update_appends_or_rewrites_and_replace_rewrites() {
        let d = tmpdir("rewrite");
        let st = SessionStore::open(&d).unwrap();
        let id = st.create("/w", vec![]).unwrap().id;
        st.update(&id, |s| s.conversation.get_or_insert_with(Vec::new).push(message(0))).unwrap();
        st.update(&id, |s| s.conversation.get_or_insert_with(Vec::new).push(message(1))).unwrap();
        assert_eq!(st.get(&id).unwrap().unwrap().conversation.unwrap(), vec![message(0), message(1)]);
        st.update(&id, |s| s.conversation = Some(vec![message(2)])).unwrap();
        assert_eq!(st.get(&id).unwrap().unwrap().conversation.unwrap(), vec![message(2)]);
        st.replace_conversation(&id, &[message(3), message(4)]).unwrap();
        st.append_message(&id, &message(5)).unwrap();
        drop(st);
        let st = SessionStore::open(&d).unwrap();
        let s = st.get(&id).unwrap().unwrap();
        assert_eq!(s.conversation.unwrap(), vec![message(3), message(4), message(5)]);
        assert_eq!(s.message_count, 3);
    }

    #[test]
    fn a_torn_last_line_is_cut_and_appending_goes_on() {
        let d = tmpdir("torn");
        let id = {
            let st = SessionStore::open(&d).unwrap();
            let id = st.create("/w", vec![]).unwrap().id;
            st.append_message(&id, &message(0)).unwrap();
            st.append_message(&id, &message(1)).unwrap();
            id
        };
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"id":"m2","role":"us"#).unwrap();
        drop(f);
        let st = SessionStore::open(&d).unwrap();
        assert_eq!(st.get_meta(&id).unwrap().unwrap().message_count, 2);
        st.append_message(&id, &message(3)).unwrap();
        let s = st.get(&id).unwrap().unwrap();
        assert_eq!(s.conversation.unwrap(), vec![message(0), message(1), message(3)]);
    }

    #[test]
    fn a_corrupt_line_is_an_error_naming_the_file_and_line() {
        let d = tmpdir("corrupt");
        let id = {
            let st = SessionStore::open(&d).unwrap();
            let id = st.create("/w", vec![]).unwrap().id;
            st.replace_conversation(&id, &[message(0), message(1)]).unwrap();
            id
        };
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        // Same file, same length, line 2 garbled: the metadata still matches, reading fails.
        let second = std::fs::read(&path).unwrap().iter().position(|&b| b == b'\n').unwrap() as u64 + 1;
        let mut f = OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(second)).unwrap();
        f.write_all(b"{not json").unwrap();
        drop(f);
        let e = SessionStore::open(&d).unwrap().get(&id).unwrap_err().to_string();
        assert!(e.contains(&format!("{id}.jsonl")) && e.contains("line 2"), "{e}");
        // Nothing was changed on disk.
        assert!(std::fs::read_to_string(&path).unwrap().contains("{not json"));
    }

    fn write_legacy(dir: &Path) -> Value {
        let legacy = json!({
            "id": "20250101_1", "name": "Old", "working_dir": "/w", "created_at": "2025-01-01T10:00:00Z",
            "updated_at": "2025-01-01T10:05:00Z", "extension_data": {}, "message_count": 2, "session_type": "user",
            "user_set_name": true, "conversation": [message(0), message(1)], "provider_name": "openai", "archived_at": null
        });
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("20250101_1.json"), serde_json::to_vec_pretty(&legacy).unwrap()).unwrap();
        std::fs::write(dir.join("20250101_1.json.lock"), b"").unwrap();
        legacy
    }

    #[test]
    fn the_one_file_layout_is_read_in_place_then_migrated_on_its_first_change() {
        let d = tmpdir("legacy");
        let dir = d.join("sessions");
        let legacy = write_legacy(&dir);
        let st = SessionStore::open(&d).unwrap();
        assert_eq!(serde_json::to_value(st.get("20250101_1").unwrap().unwrap()).unwrap(), legacy);
        assert_eq!(st.list().unwrap()[0].message_count, 2);
        assert!(dir.join("20250101_1.json").exists(), "reading does not migrate");
        // An id is never reused while its files exist.
        assert_ne!(st.create("/w", vec![]).unwrap().id, "20250101_1");
        st.append_message("20250101_1", &message(2)).unwrap();
        assert!(!dir.join("20250101_1.json").exists() && !dir.join("20250101_1.json.lock").exists());
        assert!(dir.join("20250101_1.meta.json").exists() && dir.join("20250101_1.jsonl").exists());
        drop(st);
        let st = SessionStore::open(&d).unwrap();
        let s = st.get("20250101_1").unwrap().unwrap();
        assert_eq!(s.conversation.unwrap(), vec![message(0), message(1), message(2)]);
        assert_eq!((s.name.as_str(), s.message_count, s.extra.get("archived_at")), ("Old", 3, Some(&Value::Null)));
    }

    #[test]
    fn an_interrupted_migration_is_redone_from_the_old_file() {
        let d = tmpdir("legacy-crash");
        let dir = d.join("sessions");
        write_legacy(&dir);
        // What a crash midway may leave beside the old file.
        std::fs::write(dir.join("20250101_1.jsonl"), b"{\"half\":").unwrap();
        std::fs::write(dir.join("20250101_1.meta.json"), b"").unwrap();
        let st = SessionStore::open(&d).unwrap();
        st.update_meta("20250101_1", |s| s.name = "Renamed".into()).unwrap().unwrap();
        drop(st);
        let st = SessionStore::open(&d).unwrap();
        let s = st.get("20250101_1").unwrap().unwrap();
        assert_eq!((s.name.as_str(), s.conversation.unwrap()), ("Renamed", vec![message(0), message(1)]));
    }

    #[test]
    fn a_second_store_on_the_same_directory_is_refused() {
        let d = tmpdir("owner");
        let _st = SessionStore::open(&d).unwrap();
        let e = SessionStore::open(&d).err().unwrap().to_string();
        assert!(e.contains("another gosling server") && e.contains(".lock"), "{e}");
    }
}
