//! Sessions on disk, so a session survives a crash or a restart and can be resumed, shared by
//! every gosling process on the same state dir (Desktop starts one server per window).
//!
//! Each session is two files under `<state dir>/sessions/`:
//! - `<id>.meta.json`: goose's `Session` without its conversation (everything `GET /sessions`
//!   lists), plus where the conversation file ended when it was written. Replaced atomically
//!   (temp + fsync + rename) on every metadata change.
//! - `<id>.jsonl`: the conversation, one goose `Message` per line. A new message is one
//!   `O_APPEND` write and an fsync, so appending costs the same however long the conversation
//!   is; a rewrite (goose's `override_conversation`) replaces the file atomically. The file
//!   appears with the first message. The model's answers are appended without their fsync
//!   (`append_message_deferred`) and made durable by the next append's fsync or before any
//!   metadata write records them: the metadata never counts a line a power loss can take.
//!
//! Several processes: every change to a session holds an exclusive `flock` on `<id>.lock`
//! (reads a shared one), and derives the session from its files under it — the metadata
//! file, then the conversation lines past where it records the end. What this process derived
//! or wrote last is used again (`Seen`) only when two `stat`s under the lock show the files are
//! still what it came from: the metadata file the same inode (held open, so no other file's),
//! size and times (every write of it is a new file), the conversation file the same inode and
//! no shorter — the lines any process appended since are counted from where the view ends. So
//! a turn reads its metadata file once, not four times, and appends from several processes
//! keep one order and the counts stay right. One exception keeps the lock short where a reader
//! waits (the next turn): the
//! metadata written after a turn (`update_meta_optimistic`) is derived without the lock and
//! its temp file written and fsynced, then put in place under the lock only if the metadata
//! is still the file it was derived from (its inode), else derived again; the lock is held
//! for that check and the rename. Appends rewrite the metadata only every
//! `APPENDS_PER_META_WRITE` messages; the lines past its recorded end are counted when it is
//! read (and after a crash: a torn last line, never acknowledged, is cut off under the lock
//! with a warning). Ids are given out
//! under a `flock` on `sessions/.lock`. A delete removes `<id>.lock` while holding it; a
//! process that was waiting for it finds its lock file unlinked and starts over.
//!
//! Listing: an in-memory index of every session's listing JSON, so `GET /sessions` opens no
//! session file. It is loaded by a background thread when the store opens (the server
//! answers at once; listing waits for it, with a deadline). Every change is then noted as its
//! id on a line of `sessions/.changes` (one `O_APPEND` write to the file kept open, no fsync:
//! it is only a hint); before listing, a process reads the lines added since it last looked
//! (one `stat` when there are none) and re-reads those sessions (one it holds a `Seen` view
//! of, often its own change, from two `stat`s while the view holds). The file is replaced by an empty one past
//! `CHANGES_MAX_BYTES`; a process that sees a new file re-reads the whole directory.
//!
//! Reading a conversation again (a turn reads its session's before every model request)
//! parses only the lines appended since the last read: the last few conversations read stay
//! parsed (`Conversations`, their files held open), used only while the file is the same inode
//! and still holds the same last line at the same offset (one `pread`); anything else reads it
//! whole. `get_shared` hands out the
//! parsed conversation itself (an `Arc`, copied on the next append only while a holder keeps
//! it), so a turn does not deep-copy its conversation.
//!
//! Sessions written by earlier versions (`<id>.json`, the conversation inside) are read in
//! place and migrated on their first change. A file that cannot be read is reported with its
//! name and left untouched, never replaced or silently dropped.
//!
//! Not here: goose's message format (message.rs: this file stores its `Message`s as their
//! JSON lines) or what a message means (agent/messages.rs).

use crate::atomic::{self, Error, Ident};
use crate::message::Message;
use gosling_util::lock;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// goose's `Session` (snake_case).
// Not `Clone`: the store moves a session from its files to its caller and back, and a derived
// clone (with the conversation's) cost 14 KB of the binary. Its `Deserialize` is written out
// below (`SessionVisitor`), not derived: a derived one with `extra` flattened buffered every
// field first and came with a second deserializer (~30 KB of the binary, BENCHMARKS.md).
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Session {
    pub id: String,
    pub name: String,
    pub working_dir: String,
    pub created_at: String,
    pub updated_at: String,
    pub extension_data: Map<String, Value>,
    pub message_count: u64,
    /// `user` when the JSON has none.
    pub session_type: String,
    pub user_set_name: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goose_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Vec<Message>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulated_total_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_config: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe: Option<Value>,
    /// Fields goose clients may have set that we do not interpret, kept as they came (each
    /// key once: the last one read wins).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for Session {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Session, D::Error> {
        d.deserialize_map(SessionVisitor { count_conversation: false }).map(|(s, _)| s)
    }
}

/// A `Session` read from a JSON object field by field: what the derive did, with the unknown
/// keys into `extra` as they come (the required five missing, or a known key twice, is the
/// derive's error). `count_conversation`: the conversation's messages are counted (the second
/// value) and skipped without being kept, `conversation` left `None`.
struct SessionVisitor {
    count_conversation: bool,
}

/// The keys `SessionVisitor` reads into their fields, by bit in its `seen` mask.
const SESSION_FIELDS: [&str; 20] = [
    "id",
    "name",
    "working_dir",
    "created_at",
    "updated_at",
    "extension_data",
    "message_count",
    "session_type",
    "user_set_name",
    "goose_mode",
    "conversation",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "accumulated_total_tokens",
    "provider_name",
    "model_config",
    "recipe",
];

impl<'de> serde::de::Visitor<'de> for SessionVisitor {
    type Value = (Session, Option<u64>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a session (a JSON object)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut s = Session::default();
        let mut counted = None;
        let mut seen = 0u32;
        while let Some(key) = map.next_key::<String>()? {
            let Some(bit) = SESSION_FIELDS.iter().position(|f| *f == key) else {
                let value = map.next_value()?;
                s.extra.insert(key, value);
                continue;
            };
            if seen & (1 << bit) != 0 {
                return Err(A::Error::duplicate_field(SESSION_FIELDS[bit]));
            }
            seen |= 1 << bit;
            match bit {
                0 => s.id = map.next_value()?,
                1 => s.name = map.next_value()?,
                2 => s.working_dir = map.next_value()?,
                3 => s.created_at = map.next_value()?,
                4 => s.updated_at = map.next_value()?,
                5 => s.extension_data = map.next_value()?,
                6 => s.message_count = map.next_value()?,
                7 => s.session_type = map.next_value()?,
                8 => s.user_set_name = map.next_value()?,
                9 => s.goose_mode = map.next_value()?,
                10 if self.count_conversation => {
                    counted = map.next_value::<Option<Vec<IgnoredAny>>>()?.map(|c| c.len() as u64)
                }
                10 => s.conversation = map.next_value()?,
                11 => s.input_tokens = map.next_value()?,
                12 => s.output_tokens = map.next_value()?,
                13 => s.total_tokens = map.next_value()?,
                14 => s.accumulated_input_tokens = map.next_value()?,
                15 => s.accumulated_output_tokens = map.next_value()?,
                16 => s.accumulated_total_tokens = map.next_value()?,
                17 => s.provider_name = map.next_value()?,
                18 => s.model_config = map.next_value()?,
                _ => s.recipe = map.next_value()?,
            }
        }
        if let Some(bit) = (0..5).find(|b| seen & (1 << b) == 0) {
            return Err(A::Error::missing_field(SESSION_FIELDS[bit]));
        }
        if seen & (1 << 7) == 0 {
            s.session_type = user();
        }
        Ok((s, counted))
    }
}

fn user() -> String {
    "user".into()
}

/// The `extension_data` key holding the session's extension set (goose's).
pub const ENABLED_EXTENSIONS: &str = "enabled_extensions.v0";

/// The key a damaged session's listing carries: why its files do not read whole (the store's
/// error, which names the file and what to do). Set only when the session is read; never
/// written to its files.
pub const DAMAGED_KEY: &str = "gosling_damaged";

/// The key of the metadata file recording where the conversation file ended; never on the wire.
const FILE_KEY: &str = "gosling_conversation_file";

/// Appends between two metadata writes, at most: bounds the lines a reader counts past the
/// recorded end, at one metadata write per this many messages.
const APPENDS_PER_META_WRITE: u64 = 64;

/// Tries of `update_meta_optimistic` before it takes the lock for the whole write (each one
/// lost to another writer of the same session's metadata).
const OPTIMISTIC_TRIES: usize = 3;

/// How one try of `update_meta_optimistic` went.
enum Tried<R> {
    /// Written (`None`: the session does not exist).
    Done(Option<R>),
    /// Another writer replaced the metadata after it was read: nothing was written.
    Replaced,
    /// The session needs what only the locked way does (a migration, a damaged session).
    NeedsLock,
}

/// Past this size `.changes` is replaced by an empty file (every process then re-reads the
/// directory once): about 200,000 changes.
const CHANGES_MAX_BYTES: u64 = 4 << 20;

/// How long a listing waits for the index the store loads when it opens.
const LOAD_WAIT: Duration = Duration::from_secs(60);

/// Past this many sessions changed by other processes at once, the index's order is sorted
/// again rather than kept entry by entry (each move shifts the order's array).
const REORDER_AFTER: usize = 64;

/// A temp file older than this is a write a crash interrupted (a write takes milliseconds);
/// a younger one may be another process's write in progress.
const STALE_TEMP: Duration = Duration::from_secs(600);

/// Where the conversation file ended when the metadata was last made consistent with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct FilePos {
    /// Length in bytes; always just after a line's `\n`.
    bytes: u64,
    /// The file's inode (0: no file yet). A rewrite makes a new file, so a different inode
    /// means the metadata describes a file that was replaced (all its lines are counted).
    ino: u64,
}

/// One session as its files hold it now.
struct Derived {
    /// Without its conversation; `message_count` counts the whole lines of the file.
    session: Session,
    /// Just after the last whole line.
    file: FilePos,
    /// Whole lines past the end the metadata file records.
    unrecorded: u64,
    /// Bytes of an incomplete last line (a write a crash cut short, when no writer holds
    /// the lock).
    torn: u64,
    /// Still in the one-file layout (`<id>.json`), read in place until its first change.
    legacy: bool,
}

/// A session as this process last derived it under its lock, or last wrote it
/// (`Inner::derive_locked`): used again, without reading its metadata file, while that file is
/// still the one it came from (one `stat`: the same inode — held open here, so never another
/// file's —, size and times) and the conversation file the same inode, no shorter; the lines
/// any process appended since are counted from where this ends. Anything else (a metadata
/// write by another process, a rewrite, a deletion) derives the session from its files again.
struct Seen {
    id: String,
    _meta: File,
    ident: Ident,
    /// The session without its conversation, as derived (`message_count` counting `file`).
    listing: Arc<Meta>,
    /// Just after the last whole line counted.
    file: FilePos,
    /// Of those lines, the ones past the end the metadata file records.
    unrecorded: u64,
}

/// How many sessions' `Seen` views are kept (a turn's session, and a few more).
const SEEN_SESSIONS: usize = 8;

/// A change `with_session`'s caller made: the session now, where its conversation file ends
/// and how many of its lines the metadata does not record, and the metadata file when it was
/// written (`None`: unchanged).
struct Change {
    session: Session,
    file: FilePos,
    unrecorded: u64,
    meta: Option<(File, Ident)>,
}

/// One session's listing in the index. The session is kept only as its listing JSON (a
/// tenth of the memory of a parsed `Session`), parsed again when a caller wants the struct,
/// and as the few fields a listing or a search reads (`Listed`), so neither parses anything.
/// A `Meta` is never changed: every change to the session (this process's, or one noted in
/// `.changes` by another) puts a new one in the index, so what a search learnt of the session
/// while this one was indexed (`search`) holds as long as it is.
struct Meta {
    id: Box<str>,
    updated_at: Box<str>,
    created_at: Box<str>,
    name: Box<str>,
    /// `name` lower-cased, as a search compares it.
    name_lower: Box<str>,
    session_type: Box<str>,
    working_dir: Box<str>,
    message_count: u64,
    provider: Option<Box<str>>,
    /// The model config's `model_name`.
    model: Option<Box<str>>,
    user_set_name: bool,
    has_recipe: bool,
    /// The session without its conversation as listed on the wire (compact JSON), so listing
    /// only copies bytes.
    json: Box<str>,
    /// The search summary's filter, checked against the conversation file after this entry
    /// was indexed (`search`): a search asks it without looking at the file.
    search: OnceLock<Arc<crate::search_index::Filter>>,
}

impl Meta {
    /// The listing of `session`, which has no conversation (`None`).
    fn new(session: &Session) -> Meta {
        let json = serde_json::to_string(session).unwrap_or_else(|_| "{}".into()).into_boxed_str();
        let model = session.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(Value::as_str);
        Meta {
            id: session.id.as_str().into(),
            updated_at: session.updated_at.as_str().into(),
            created_at: session.created_at.as_str().into(),
            name: session.name.as_str().into(),
            name_lower: session.name.to_lowercase().into_boxed_str(),
            session_type: session.session_type.as_str().into(),
            working_dir: session.working_dir.as_str().into(),
            message_count: session.message_count,
            provider: session.provider_name.as_deref().map(Into::into),
            model: model.map(Into::into),
            user_set_name: session.user_set_name,
            has_recipe: session.recipe.is_some(),
            json,
            search: OnceLock::new(),
        }
    }

    /// The session, without its conversation.
    fn session(&self) -> Result<Session, Error> {
        // The JSON is our own serialization of a Session; failing to read it back is a bug.
        // Read as bytes, as the metadata files are: one copy of the deserializer of a Session
        // rather than two.
        serde_json::from_slice(self.json.as_bytes())
            .map_err(|e| corrupt(Path::new(&*self.id), format!("the indexed metadata does not parse ({e})")))
    }

    /// Newest first: `updated_at`, then the id, both descending (ids are unique, so no two
    /// entries are equal).
    fn newest_first(a: &Meta, b: &Meta) -> std::cmp::Ordering {
        b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id))
    }
}

/// Every session's listing, newest first, as the index held it when asked
/// (`SessionStore::listed`): shared, not copied, with the index (which copies its order only
/// when it changes while a `Listing` is held).
pub struct Listing(Arc<Vec<Arc<Meta>>>);

impl Listing {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The `i`th session, newest first.
    pub fn get(&self, i: usize) -> Option<Listed<'_>> {
        self.0.get(i).map(|m| Listed(m))
    }
    pub fn iter(&self) -> impl Iterator<Item = Listed<'_>> {
        self.0.iter().map(|m| Listed(m))
    }
}

/// One session as listed, read without parsing it: what a search filters on and what a
/// listing shows (ACP's `SessionInfo`), and the session (parsed) for a caller that wants it.
#[derive(Clone, Copy)]
pub struct Listed<'a>(&'a Meta);

impl<'a> Listed<'a> {
    pub fn id(&self) -> &'a str {
        &self.0.id
    }
    pub fn name(&self) -> &'a str {
        &self.0.name
    }
    /// The name lower-cased (`str::to_lowercase`).
    pub fn name_lower(&self) -> &'a str {
        &self.0.name_lower
    }
    pub fn session_type(&self) -> &'a str {
        &self.0.session_type
    }
    pub fn working_dir(&self) -> &'a str {
        &self.0.working_dir
    }
    pub fn created_at(&self) -> &'a str {
        &self.0.created_at
    }
    pub fn updated_at(&self) -> &'a str {
        &self.0.updated_at
    }
    pub fn message_count(&self) -> u64 {
        self.0.message_count
    }
    pub fn provider(&self) -> Option<&'a str> {
        self.0.provider.as_deref()
    }
    /// The model config's `model_name`, when it is a string.
    pub fn model(&self) -> Option<&'a str> {
        self.0.model.as_deref()
    }
    pub fn user_set_name(&self) -> bool {
        self.0.user_set_name
    }
    pub fn has_recipe(&self) -> bool {
        self.0.has_recipe
    }
    /// goose's `Session` without its conversation, as JSON (what `GET /sessions` lists).
    pub fn json(&self) -> &'a str {
        &self.0.json
    }
    /// The session, without its conversation.
    pub fn session(&self) -> Result<Session, Error> {
        self.0.session()
    }
    /// What a search learnt of this entry's conversation file (`search_index`).
    pub(crate) fn search_slot(&self) -> &'a OnceLock<Arc<crate::search_index::Filter>> {
        &self.0.search
    }
}

/// The index: every session's listing by id, and (once a listing asked for it) the same
/// newest first, kept in order as entries change rather than sorted again for each listing.
#[derive(Default)]
struct Index {
    by_id: HashMap<String, Arc<Meta>>,
    order: Option<Arc<Vec<Arc<Meta>>>>,
}

impl Index {
    fn of(by_id: HashMap<String, Arc<Meta>>) -> Index {
        Index { by_id, order: None }
    }

    fn get(&self, id: &str) -> Option<&Arc<Meta>> {
        self.by_id.get(id)
    }

    fn contains_key(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    fn insert(&mut self, id: String, m: Arc<Meta>) {
        let old = self.by_id.insert(id, m.clone());
        if let Some(order) = &mut self.order {
            // Copied only when a listing still holds it.
            let order = Arc::make_mut(order);
            if let Some(old) = old {
                Self::take_out(order, &old);
            }
            let at = order.binary_search_by(|x| Meta::newest_first(x, &m)).unwrap_or_else(|i| i);
            order.insert(at, m);
        }
    }

    fn remove(&mut self, id: &str) {
        if let (Some(old), Some(order)) = (self.by_id.remove(id), &mut self.order) {
            Self::take_out(Arc::make_mut(order), &old);
        }
    }

    fn take_out(order: &mut Vec<Arc<Meta>>, old: &Arc<Meta>) {
        match order.binary_search_by(|x| Meta::newest_first(x, old)) {
            Ok(i) => {
                order.remove(i);
            }
            // Never: the order holds every indexed entry.
            Err(_) => order.retain(|x| !Arc::ptr_eq(x, old)),
        }
    }

    /// Every entry, newest first.
    fn sorted(&mut self) -> Arc<Vec<Arc<Meta>>> {
        let by_id = &self.by_id;
        self.order
            .get_or_insert_with(|| {
                let mut all: Vec<Arc<Meta>> = by_id.values().cloned().collect();
                all.sort_by(|a, b| Meta::newest_first(a, b));
                Arc::new(all)
            })
            .clone()
    }
}

/// Whether the index has been loaded.
enum Load {
    Loading,
    Ready,
    Failed(String),
}

/// How far this process has read `.changes`.
#[derive(Clone, Copy, Default, PartialEq)]
struct Cursor {
    ino: u64,
    offset: u64,
}

struct Inner {
    dir: PathBuf,
    index: Mutex<Index>,
    load: Mutex<Load>,
    loaded: Condvar,
    /// Held while reading `.changes`, so one thread applies each line.
    cursor: Mutex<Cursor>,
    /// Sessions whose new lines this process reads (`tail_start`): how many readers, and
    /// where the lines this process appended since start (file inode, offset), so a reader
    /// skips them.
    own: Mutex<HashMap<String, Own>>,
    /// The conversations read last, parsed (`Conversations`).
    conversations: Mutex<Conversations>,
    /// Sessions whose conversation file this process appended to without its fdatasync yet
    /// (`append_message_deferred`): the file's inode and where the unsynced lines end.
    unsynced: Mutex<HashMap<String, FilePos>>,
    /// The sessions as last derived or written (`Seen`), most recent last.
    seen: Mutex<Vec<Seen>>,
    /// Conversation files appended to lately, kept open to append to: (session, inode, file).
    /// Used only under the session's lock for the inode its `stat` there found in place.
    appenders: Mutex<Vec<(String, u64, File)>>,
    /// `.changes`, kept open to append to (`note`) and to read (`refresh`), with its inode.
    changes: Mutex<Option<(File, u64)>>,
}

/// How many conversations are kept parsed, and the longest file kept (bytes): a turn reads
/// its session's conversation before every model request, and re-parsing the whole file each
/// time made a turn's cost grow with the conversation.
const CACHED_CONVERSATIONS: usize = 4;
const CACHED_CONVERSATION_MAX_BYTES: u64 = 4 << 20;

/// Conversations as last read, most recent last. An entry is used only for the file it was
/// read from (same inode) while that file still holds the same last line at the same offset
/// (re-read and compared): then only the lines appended since are read and parsed. Anything
/// else — a rewrite, a shorter file, another last line — reads the whole file again.
#[derive(Default)]
struct Conversations(Vec<Parsed>);

struct Parsed {
    id: String,
    /// The file read, kept open: its inode is never another file's while this is kept.
    file: File,
    ino: u64,
    /// The file's length when read (just after its last whole line).
    bytes: u64,
    /// The file's last line, `\n` included, as read.
    last_line: Vec<u8>,
    /// Shared with the callers of `get_shared` (a turn): extended in place when nobody else
    /// holds it, copied first when someone does.
    messages: Arc<Vec<Message>>,
    /// The conversation's lineage (`Lineage`): new when the file was read whole, kept while
    /// lines are only appended to it.
    lineage: Lineage,
}

/// Names one conversation's history while it only grows: `get_shared` gives the same lineage
/// for as long as what it gave before is still the start of the conversation (the same file,
/// lines only appended since), and a new one whenever the file was read whole (another file in
/// its place, a rewrite, the first read). A caller that derived something from the first `n`
/// messages may keep it while the lineage is the same. A conversation the store does not keep
/// parsed (too long, empty, the one-file layout, damaged) has none that lasts (`lasts`): the
/// next read cannot give it again, so nothing derived from it is worth keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage(u64);

impl Lineage {
    fn new() -> Lineage {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Lineage(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// The lineage of a conversation that is not kept parsed: never given again.
    const NONE: Lineage = Lineage(0);

    /// Whether a later read can give this lineage again.
    pub fn lasts(self) -> bool {
        self != Lineage::NONE
    }
}

impl Conversations {
    fn take(&mut self, id: &str) -> Option<Parsed> {
        let i = self.0.iter().position(|p| p.id == id)?;
        Some(self.0.remove(i))
    }

    fn keep(&mut self, p: Parsed) {
        self.0.retain(|q| q.id != p.id);
        if p.bytes > CACHED_CONVERSATION_MAX_BYTES {
            return;
        }
        if self.0.len() >= CACHED_CONVERSATIONS {
            self.0.remove(0);
        }
        self.0.push(p);
    }
}

/// The last `\n`-terminated line of `bytes` (which end in one).
fn last_line(bytes: &[u8]) -> &[u8] {
    let body = &bytes[..bytes.len().saturating_sub(1)];
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    &bytes[start..]
}

#[derive(Default)]
struct Own {
    readers: usize,
    /// This process's appended lines not yet read past: (inode, start) → end.
    lines: BTreeMap<(u64, u64), u64>,
}

/// Where a reader of a conversation file's new lines is (`tail_start`, `tail_read`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TailPos {
    /// The file read (0: none yet).
    ino: u64,
    /// Just after the last whole line read.
    bytes: u64,
    /// The session had messages in a file of the one-file layout: a conversation file that
    /// appears is its migration, not new lines.
    legacy: bool,
}

/// What `tail_read` found past a `TailPos`.
#[derive(Debug, Default)]
pub struct Tail {
    /// Whole lines other processes appended, in file order (this process's own are skipped).
    pub messages: Vec<Message>,
    /// Where the next read starts.
    pub pos: TailPos,
    /// The conversation was rewritten (truncated, forked over, migrated): nothing of it is
    /// reported; the reader starts again at its end.
    pub rewritten: bool,
    /// More lines than one read takes (`TAIL_MAX`) wait: read again.
    pub more: bool,
}

/// Bytes one `tail_read` takes at most (a bounded read; the rest is read by the next).
const TAIL_MAX: u64 = 16 << 20;

pub struct SessionStore {
    inner: Arc<Inner>,
}

/// A conversation as the store's cache holds it (`SessionStore::get_shared`).
pub type SharedConversation = Arc<Vec<Message>>;

/// A session's `flock`, released when dropped (the descriptor closes).
struct SessionLock {
    _file: File,
    path: PathBuf,
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
/// `first_line` (1-based) in errors: as `Message`s, or as `IgnoredAny` to check and count them
/// without keeping them. A last line without its `\n` is left out and its length returned.
fn parse_lines<T: DeserializeOwned>(path: &Path, bytes: &[u8], first_line: u64) -> Result<(Vec<T>, usize), Error> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
        let line = &bytes[start..start + n];
        let v = serde_json::from_slice(line).map_err(|e| {
            corrupt(path, format!("line {} is not a goose message ({e})", first_line + out.len() as u64))
        })?;
        out.push(v);
        start += n + 1;
    }
    Ok((out, bytes.len() - start))
}

/// The whole lines of conversation file `path` between bytes `from` and `to` (counted and
/// checked, not kept; numbered from `first_line` in errors), and the length of an incomplete
/// last one. Read with one `read` sized from the `stat` that gave `to`.
fn count_lines(path: &Path, from: u64, to: u64, first_line: u64) -> Result<(u64, u64), Error> {
    let mut f = atomic::open_read(path).map_err(|e| atomic::io_err(path, e))?;
    let mut tail = Vec::with_capacity((to - from).min(TAIL_MAX) as usize);
    f.seek(SeekFrom::Start(from))
        .and_then(|_| f.take(to - from).read_to_end(&mut tail))
        .map_err(|e| atomic::io_err(path, e))?;
    let (lines, torn) = parse_lines::<IgnoredAny>(path, &tail, first_line)?;
    Ok((lines.len() as u64, torn as u64))
}

/// Messages as conversation-file lines, each ending in `\n`.
fn encode_lines(path: &Path, messages: &[Message]) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    for m in messages {
        serde_json::to_writer(&mut bytes, m).map_err(|e| corrupt(path, e.to_string()))?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Appends `bytes` to the conversation file `f`, `len` bytes long, and fsyncs it when `sync`
/// (without: `SessionStore::append_message_deferred`); a failed write is cut back off, never
/// leaving half a line for the next append to follow.
fn append_line(path: &Path, f: &mut File, len: u64, bytes: &[u8], sync: bool) -> Result<(), Error> {
    f.write_all(bytes).and_then(|_| if sync { f.sync_data() } else { Ok(()) }).map_err(|e| {
        let _ = f.set_len(len);
        atomic::io_err(path, e)
    })
}

/// The metadata file of `session`, its conversation file ending at `file`.
fn meta_bytes(path: &Path, session: &Session, file: FilePos) -> Result<Vec<u8>, Error> {
    let mut doc = match serde_json::to_value(session) {
        Ok(Value::Object(m)) => m,
        _ => return Err(corrupt(path, "the session did not serialize to an object")),
    };
    doc.remove("conversation");
    doc.insert(FILE_KEY.into(), serde_json::json!(file));
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc)).map_err(|e| corrupt(path, e.to_string()))?;
    bytes.push(b'\n');
    Ok(bytes)
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
    /// Opens (creating) `<state dir>/sessions` and starts loading the index in the
    /// background; the store answers at once (a listing waits for the load). A session whose
    /// files cannot be read is left out of the index with a warning naming the file (asking
    /// for it by id reports the error).
    pub fn open(state_dir: &Path) -> Result<SessionStore, Error> {
        let dir = state_dir.join("sessions");
        atomic::ensure_subdir(&dir)?;
        atomic::refuse_symlinks(&dir, &[".lock", ".changes"])?;
        // An unreadable directory is refused now, not in the background.
        std::fs::read_dir(&dir).map_err(|e| atomic::io_err(&dir, e))?;
        let inner = Arc::new(Inner {
            dir,
            index: Mutex::new(Index::default()),
            load: Mutex::new(Load::Loading),
            loaded: Condvar::new(),
            cursor: Mutex::new(Cursor::default()),
            own: Mutex::new(HashMap::new()),
            conversations: Mutex::new(Conversations::default()),
            unsynced: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
            changes: Mutex::new(None),
            appenders: Mutex::new(Vec::new()),
        });
        let loader = inner.clone();
        let spawned = std::thread::Builder::new().name("sessions-index".into()).spawn(move || loader.load_all());
        if let Err(e) = spawned {
            log::warn!("store: cannot start the thread that loads the session index ({e}); loading it now");
            inner.load_all();
        }
        Ok(SessionStore { inner })
    }

    /// Creates a session with goose's `YYYYMMDD_N` id.
    pub fn create(&self, working_dir: &str, extensions: Vec<Value>) -> Result<Session, Error> {
        let st = &self.inner;
        let now = gosling_util::now_rfc3339();
        let day: String = now[..10].replace('-', "");
        let extensions = serde_json::json!({ "extensions": extensions });
        let mut s = Session {
            name: "New Chat".into(),
            working_dir: working_dir.into(),
            created_at: now.clone(),
            updated_at: now,
            extension_data: Map::from_iter([(ENABLED_EXTENSIONS.to_string(), extensions)]),
            session_type: user(),
            ..Session::default()
        };
        {
            // Other processes give out ids from the same files.
            let ids = st.dir.join(".lock");
            let file = atomic::open_lock_file(&ids)?;
            atomic::lock_file(&file, &ids, true)?;
            let taken = |id: &str| {
                lock(&st.index).contains_key(id)
                    || [st.meta_path(id), st.messages_path(id), st.legacy_path(id)]
                        .iter()
                        .any(|p| std::fs::symlink_metadata(p).is_ok())
            };
            let mut n = 1;
            while taken(&format!("{day}_{n}")) {
                n += 1;
            }
            s.id = format!("{day}_{n}");
            st.write_meta(&s, FilePos::default())?;
        }
        st.note(&s.id);
        lock(&st.index).insert(s.id.clone(), Arc::new(Meta::new(&s)));
        Ok(Session { conversation: Some(Vec::new()), ..s })
    }

    /// The session with its conversation (read from its file, under a shared lock).
    /// A session whose files do not read whole (a corrupt line, a truncated metadata file) is
    /// returned as far as it reads — its good messages, marked with `DAMAGED_KEY` — and its
    /// files are left untouched.
    pub fn get(&self, id: &str) -> Result<Option<Session>, Error> {
        Ok(self.get_shared(id)?.map(|(s, c, _)| Session { conversation: Some(Arc::unwrap_or_clone(c)), ..s }))
    }

    /// As `get`, with the conversation apart (`conversation` is `None` in the session) and
    /// shared with the store's cache rather than copied: a turn reads its session once, and
    /// a deep copy of a long conversation cost more than reading the lines appended since.
    /// The same reading as `get` (the shared lock, the damaged case alike).
    pub fn get_shared(&self, id: &str) -> Result<Option<(Session, SharedConversation, Lineage)>, Error> {
        let st = &self.inner;
        let whole = st.with_session(id, false, |d| {
            let (conversation, lineage) = st.read_conversation_lineage(&d)?;
            Ok((None, (d.session, conversation, lineage)))
        });
        match whole {
            Err(e @ Error::Corrupt { .. }) => {
                let mut s = st.read_damaged(id, &e, true).ok_or(e)?;
                // Listed as damaged from now on too (the listing had it as its metadata says).
                let conversation = s.conversation.take();
                lock(&st.index).insert(id.to_string(), Arc::new(Meta::new(&s)));
                Ok(Some((s, Arc::new(conversation.unwrap_or_default()), Lineage::NONE)))
            }
            other => other,
        }
    }

    /// Session `id`'s conversation one message at a time, in bounded memory (one line held):
    /// the file is opened under the session's shared lock, so up to its last whole line then,
    /// and read line by line after the lock is released (an append goes after those bytes, a
    /// rewrite makes a new file; neither changes what the open file holds). `each` gets every
    /// message in order, after `meta` got the session without its conversation (read from its
    /// files under the same lock, as `get` reads it); their error stops the read. A line that
    /// is not a message is skipped,
    /// as `get` skips it, and the session is then marked damaged as `get` marks it (read whole
    /// once more, for the note): the answer is that note (`DAMAGED_KEY`'s value). The one-file
    /// layout is read whole (`get`), then given out. `None` when the session does not exist.
    pub fn each_message<E: From<Error>>(
        &self,
        id: &str,
        meta: impl FnOnce(Session) -> Result<(), E>,
        mut each: impl FnMut(Message) -> Result<(), E>,
    ) -> Result<Option<Option<String>>, E> {
        let st = &self.inner;
        let path = st.messages_path(id);
        let opened = st.with_session(id, false, |d| {
            if d.legacy {
                return Ok((None, None));
            }
            if d.file.bytes == 0 {
                return Ok((None, Some((d.session, None))));
            }
            let f = atomic::open_read(&path).map_err(|e| atomic::io_err(&path, e))?;
            Ok((None, Some((d.session, Some((f, d.file.bytes))))))
        });
        let damaged = |s: &Session| s.extra.get(DAMAGED_KEY).and_then(Value::as_str).map(str::to_string);
        let opened = match opened {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(None),
            // Damaged metadata: as `get` reads it.
            Err(Error::Corrupt { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let Some((session, file)) = opened else {
            let Some(mut s) = self.get(id)? else { return Ok(None) };
            let conversation = s.conversation.take().unwrap_or_default();
            let note = damaged(&s);
            meta(s)?;
            for m in conversation {
                each(m)?;
            }
            return Ok(Some(note));
        };
        meta(session)?;
        let Some((f, written)) = file else { return Ok(Some(None)) };
        let mut skipped = false;
        let mut r = io::BufReader::with_capacity(64 << 10, f.take(written));
        let mut line = Vec::new();
        for n in 1u64.. {
            line.clear();
            io::BufRead::read_until(&mut r, b'\n', &mut line).map_err(|e| atomic::io_err(&path, e))?; // wait: a regular file
            if line.last() != Some(&b'\n') {
                if !line.is_empty() {
                    let detail = format!("it ends in the middle of line {n}, before the {written} bytes written");
                    return Err(corrupt(&path, detail).into());
                }
                break;
            }
            match serde_json::from_slice::<Message>(&line) {
                Ok(m) => each(m)?,
                Err(_) => skipped = true,
            }
        }
        if !skipped {
            return Ok(Some(None));
        }
        // Marked (and logged) as `get` does it.
        Ok(Some(self.get(id)?.as_ref().and_then(damaged)))
    }

    /// The session without its conversation (`conversation` is `None`): from the index once
    /// it is loaded (after reading what other processes changed), else from its metadata file.
    pub fn get_meta(&self, id: &str) -> Result<Option<Session>, Error> {
        let st = &self.inner;
        if !valid_id(id) {
            return Ok(None);
        }
        if st.is_loaded() {
            st.refresh()?;
            if let Some(m) = lock(&st.index).get(id).cloned() {
                return m.session().map(Some);
            }
        }
        // Not indexed: a file repaired by hand, or damaged since.
        match st.derive(id, false) {
            Err(e @ Error::Corrupt { .. }) => st.read_damaged(id, &e, false).map(Some).ok_or(e),
            other => Ok(other?.map(|d| d.session)),
        }
    }

    /// Appends one message to the conversation: one write and one fsync of its file,
    /// whatever the conversation's length. `false` when the session does not exist. The
    /// fsync also makes durable what `append_message_deferred` left unsynced before it.
    pub fn append_message(&self, id: &str, message: &Message) -> Result<bool, Error> {
        self.append(id, message, true)
    }

    /// `append_message` without the fdatasync: the line is written (every reader, of any
    /// process, sees it at once, and it survives this process's crash) but a power loss may
    /// lose it until it is made durable — by the next `append_message` of the session (its
    /// fdatasync covers the whole file), by any metadata write recording it (each makes the
    /// lines it records durable first, so the metadata never counts lines a power loss can
    /// take), or by `sync_conversation`. For the turn's answer, so the reply is sent without
    /// waiting for the disk while the next turn (whose message is appended with its fsync
    /// before the model is asked) still finds it durable. The first line of a file, and a line
    /// due to be recorded in the metadata, are synced at once.
    pub fn append_message_deferred(&self, id: &str, message: &Message) -> Result<bool, Error> {
        self.append(id, message, false)
    }

    /// Makes durable what `append_message_deferred` left unsynced in session `id` (nothing to
    /// do, no system call, when nothing is); a file replaced or removed since needs nothing.
    pub fn sync_conversation(&self, id: &str) -> Result<(), Error> {
        let Some(pending) = lock(&self.inner.unsynced).get(id).copied() else { return Ok(()) };
        self.inner.sync_lines(id, pending)
    }

    /// Whether session `id` has lines this process appended without their fdatasync yet.
    pub fn has_unsynced(&self, id: &str) -> bool {
        lock(&self.inner.unsynced).contains_key(id)
    }

    fn append(&self, id: &str, message: &Message, sync: bool) -> Result<bool, Error> {
        let st = &self.inner;
        let done = st.with_session(id, true, |d| {
            let path = st.messages_path(id);
            let line = encode_lines(&path, std::slice::from_ref(message))?;
            let created = d.file.ino == 0;
            let written = d.file.bytes;
            // The file kept open from the last append when the `stat` under this lock found the
            // same inode in place (its length with it), else opened and looked at.
            let (mut f, ino) = match st.take_appender(id, d.file.ino) {
                Some(f) => (f, d.file.ino),
                None => {
                    let f = atomic::open_append(&path).map_err(|e| atomic::io_err(&path, e))?;
                    let stat = f.metadata().map_err(|e| atomic::io_err(&path, e))?;
                    let held = stat.len();
                    if held != written || (!created && stat.ino() != d.file.ino) {
                        let detail = format!("it holds {held} bytes where {written} were written; a program other than gosling changed it while it was locked");
                        return Err(corrupt(&path, detail));
                    }
                    (f, stat.ino())
                }
            };
            let record = created || d.unrecorded + 1 >= APPENDS_PER_META_WRITE;
            // Noted before it is written: a watcher woken by the write finds it its own.
            st.note_own(id, ino, [(written, written + line.len() as u64)]);
            let file = FilePos { bytes: written + line.len() as u64, ino };
            let durable = sync || record;
            let appended = append_line(&path, &mut f, written, &line, durable).map(|()| match durable {
                true => st.synced(id, file),
                false => st.unsynced(id, file),
            });
            if let Err(e) = appended {
                st.unnote_own(id, ino, written);
                return Err(e);
            }
            st.keep_appender(id, ino, f);
            if created {
                sync_dir(&st.dir)?;
            }
            let mut s = d.session;
            s.message_count += 1;
            s.updated_at = gosling_util::now_rfc3339();
            let (meta, unrecorded) = match record {
                true => (Some(st.write_meta(&s, file)?), 0),
                false => (None, d.unrecorded + 1),
            };
            Ok((Some(Change { session: s, file, unrecorded, meta }), ()))
        })?;
        Ok(done.is_some())
    }

    /// Replaces the whole conversation (goose's `override_conversation`): the file is
    /// rewritten atomically. `false` when the session does not exist.
    pub fn replace_conversation(&self, id: &str, conversation: &[Message]) -> Result<bool, Error> {
        let st = &self.inner;
        let done = st.with_session(id, true, |d| {
            let file = st.write_messages(&st.messages_path(id), conversation)?;
            st.synced(id, file);
            let mut s = d.session;
            s.message_count = conversation.len() as u64;
            Ok((Some(st.save(s, file)?), ()))
        })?;
        Ok(done.is_some())
    }

    /// Changes a session's metadata: `f` sees it without its conversation (`None`, and left
    /// so: use `append_message` or `replace_conversation` for messages). Costs one small
    /// atomic write, whatever the conversation's length. `None` when it does not exist.
    pub fn update_meta<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Result<Option<R>, Error> {
        let (mut f, mut r) = (Some(f), None);
        let done = self.update_meta_once(id, &mut |s: &mut Session| {
            if let Some(f) = f.take() {
                r = Some(f(s));
            }
        })?;
        Ok(done.and(r))
    }

    /// `update_meta`'s work, written once rather than for each caller's closure (the static
    /// binary's size).
    fn update_meta_once(&self, id: &str, f: &mut dyn FnMut(&mut Session)) -> Result<Option<()>, Error> {
        let st = &self.inner;
        st.with_session(id, true, |d| {
            st.durable_before_recorded(id, &d)?;
            let (file, mut s) = (d.file, d.session);
            let (before_id, count) = (s.id.clone(), s.message_count);
            f(&mut s);
            if s.conversation.is_some() {
                log::error!("store: update_meta of session {id} set a conversation, which is ignored; use append_message or replace_conversation");
            }
            s.id = before_id;
            s.message_count = count;
            s.conversation = None;
            Ok((Some(st.save(s, file)?), ()))
        })
    }

    /// `update_meta` that keeps the session's lock for a rename, not for two fsyncs: the new
    /// metadata is derived without the lock, written to its temp file and fsynced; then, under
    /// the lock, it replaces the metadata only if that is still the file it was derived from
    /// (same inode: every rewrite of it is a new file), and the directory is fsynced after the
    /// lock is released. When another writer replaced the metadata meanwhile, `f` runs again
    /// on what that writer left — so `f` must be a function of the session it is given (adding
    /// to a count is; setting what was read earlier is not). A session that needs repairs
    /// (the one-file layout, one found damaged) takes `update_meta`'s way. For the metadata
    /// written after a turn (its token counts), so the next turn's read and append of the
    /// conversation do not wait for the disk.
    pub fn update_meta_optimistic<R>(
        &self,
        id: &str,
        mut f: impl FnMut(&mut Session) -> R,
    ) -> Result<Option<R>, Error> {
        let st = &self.inner;
        if !valid_id(id) {
            return Ok(None);
        }
        for _ in 0..OPTIMISTIC_TRIES {
            match st.meta_off_lock(id, &mut f)? {
                Tried::Done(r) => return Ok(r),
                Tried::Replaced => continue,
                Tried::NeedsLock => break,
            }
        }
        self.update_meta(id, f)
    }

    /// Locked read-modify-write of one session with its conversation; `None` when it does not
    /// exist. Reads the whole conversation: prefer `update_meta` and `append_message`. Messages
    /// added at the end are appended; any other change to the conversation rewrites it.
    pub fn update<R>(&self, id: &str, f: impl FnOnce(&mut Session) -> R) -> Result<Option<R>, Error> {
        let st = &self.inner;
        st.with_session(id, true, |d| {
            let before = st.read_conversation(&d)?;
            let before_id = d.session.id.clone();
            let mut s = d.session;
            s.conversation = Some(Vec::clone(&before));
            let r = f(&mut s);
            let after = s.conversation.take().unwrap_or_default();
            let path = st.messages_path(id);
            let file = if after.len() >= before.len() && after[..before.len()] == before[..] {
                if after.len() == before.len() {
                    d.file
                } else {
                    let bytes = encode_lines(&path, &after[before.len()..])?;
                    let mut f = atomic::open_append(&path).map_err(|e| atomic::io_err(&path, e))?;
                    append_line(&path, &mut f, d.file.bytes, &bytes, true)?;
                    let stat = f.metadata().map_err(|e| atomic::io_err(&path, e))?;
                    st.synced(id, FilePos { bytes: d.file.bytes + bytes.len() as u64, ino: stat.ino() });
                    let starts = std::iter::once(0)
                        .chain(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1));
                    let starts: Vec<u64> = starts.filter(|s| *s < bytes.len() as u64).collect();
                    let ends = starts.iter().skip(1).copied().chain([bytes.len() as u64]);
                    let at = d.file.bytes;
                    st.note_own(id, stat.ino(), starts.iter().zip(ends).map(|(s, e)| (at + s, at + e)));
                    if d.file.ino == 0 {
                        sync_dir(&st.dir)?;
                    }
                    FilePos { bytes: d.file.bytes + bytes.len() as u64, ino: stat.ino() }
                }
            } else {
                st.write_messages(&path, &after)?
            };
            s.id = before_id;
            s.message_count = after.len() as u64;
            Ok((Some(st.save(s, file)?), r))
        })
    }

    /// The directory holding the session files (what a watcher of their changes watches).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Starts reading the lines other processes append to session `id`'s conversation: where
    /// its file ends now. From now until `tail_stop`, this process's own appends to it are
    /// noted so `tail_read` skips them. `None` when the session does not exist.
    pub fn tail_start(&self, id: &str) -> Result<Option<TailPos>, Error> {
        let st = &self.inner;
        // Counted before the end is read: an append after that read is noted.
        lock(&st.own).entry(id.to_string()).or_default().readers += 1;
        let pos = st.tail_end(id);
        if !matches!(pos, Ok(Some(_))) {
            self.tail_stop(id);
        }
        pos
    }

    /// One reader of session `id` less (`tail_start`).
    pub fn tail_stop(&self, id: &str) {
        let mut own = lock(&self.inner.own);
        if let Some(o) = own.get_mut(id) {
            o.readers = o.readers.saturating_sub(1);
            if o.readers == 0 {
                own.remove(id);
            }
        }
    }

    /// The whole lines appended to session `id`'s conversation past `pos` by other processes
    /// (read under the session's shared lock, so no append is half-done; at most `TAIL_MAX`
    /// bytes; when all that is past `pos` is this process's own appends, passed over without
    /// the lock: `own_alone`). `None` when the session is gone.
    pub fn tail_read(&self, id: &str, pos: TailPos) -> Result<Option<Tail>, Error> {
        let st = &self.inner;
        if let Some(own) = st.own_alone(id, pos) {
            return Ok(Some(own));
        }
        let Some(_guard) = st.lock_session(id, false)? else { return Ok(None) };
        let path = st.messages_path(id);
        let stat = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let rewritten = pos.ino != 0;
                return Ok(Some(Tail {
                    pos: TailPos { legacy: false, ..TailPos::default() },
                    rewritten,
                    ..Tail::default()
                }));
            }
            Err(e) => return Err(atomic::io_err(&path, e)),
        };
        if !stat.is_file() {
            return Err(Error::Symlink { path });
        }
        let at_end = |rewritten| {
            st.forget_own(id, stat.ino(), stat.len());
            Ok(Some(Tail {
                pos: TailPos { ino: stat.ino(), bytes: stat.len(), legacy: false },
                rewritten,
                ..Tail::default()
            }))
        };
        let from = if pos.ino == stat.ino() && pos.bytes <= stat.len() {
            pos.bytes
        } else if pos.ino == 0 && !pos.legacy {
            // The file appeared with the first message: all of it is new.
            0
        } else {
            // Replaced or shortened: a rewrite, not an append.
            return at_end(true);
        };
        let want = (stat.len() - from).min(TAIL_MAX);
        let mut bytes = Vec::with_capacity(want as usize);
        let mut f = atomic::open_read(&path).map_err(|e| atomic::io_err(&path, e))?;
        f.seek(SeekFrom::Start(from))
            .and_then(|_| f.take(want).read_to_end(&mut bytes))
            .map_err(|e| atomic::io_err(&path, e))?;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if whole == 0 && want == TAIL_MAX {
            log::warn!("store: {}: a line longer than {TAIL_MAX} bytes is not followed live", path.display());
            return at_end(false);
        }
        let mut messages = Vec::new();
        let mut start = 0;
        {
            let mut own = lock(&st.own);
            let mine = own.get_mut(id);
            let mut mine = mine.map(|o| &mut o.lines);
            while start < whole {
                let end = start + bytes[start..whole].iter().position(|b| *b == b'\n').unwrap_or(whole - start);
                let offset = from + start as u64;
                let skip = mine.as_mut().is_some_and(|l| l.remove(&(stat.ino(), offset)).is_some());
                if !skip {
                    match serde_json::from_slice(&bytes[start..end]) {
                        Ok(m) => messages.push(m),
                        // Damaged (reading the session says so, and what to do): not followed.
                        Err(e) => log::warn!(
                            "store: {}: the line at byte {offset} is not a goose message ({e}); followers skip it",
                            path.display()
                        ),
                    }
                }
                start = end + 1;
            }
        }
        let next = from + whole as u64;
        st.forget_own(id, stat.ino(), next);
        let pos = TailPos { ino: stat.ino(), bytes: next, legacy: false };
        Ok(Some(Tail { messages, pos, rewritten: false, more: next < stat.len() && whole > 0 && want == TAIL_MAX }))
    }

    /// The files that may hold session `id`'s conversation (its message lines, then the
    /// earlier one-file layout), for `search`.
    pub(crate) fn conversation_files(&self, id: &str) -> [PathBuf; 2] {
        [self.inner.messages_path(id), self.inner.legacy_path(id)]
    }

    /// The same store (the same cache and index), for a thread of its own.
    pub(crate) fn handle(&self) -> SessionStore {
        SessionStore { inner: self.inner.clone() }
    }

    /// The file of session `id`'s message lines (whether it exists or not).
    pub(crate) fn conversation_file(&self, id: &str) -> PathBuf {
        self.inner.messages_path(id)
    }

    /// All sessions, newest first, without their conversations: parsed from the index (a few
    /// µs each), no session file is read. Sessions whose files could not be read are not
    /// listed (a warning named each file).
    pub fn list(&self) -> Result<Vec<Session>, Error> {
        self.inner.sorted()?.iter().map(|m| m.session()).collect()
    }

    /// `list()` without parsing or copying: each session's listing fields, newest first
    /// (`Listed::session` parses the ones a caller keeps).
    pub fn listed(&self) -> Result<Listing, Error> {
        Ok(Listing(self.inner.sorted()?))
    }

    /// `list()` as a JSON array (goose's Session objects), built from each session's cached
    /// JSON without serializing anything.
    pub fn list_json(&self) -> Result<Vec<u8>, Error> {
        let all = self.inner.sorted()?;
        let mut out = Vec::with_capacity(2 + all.iter().map(|m| m.json.len() + 1).sum::<usize>());
        out.push(b'[');
        for (i, m) in all.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(m.json.as_bytes());
        }
        out.push(b']');
        Ok(out)
    }

    /// Deletes a session's files; `false` when it does not exist. A session whose files
    /// cannot be read is deleted too (that is how a user gets rid of one).
    pub fn delete(&self, id: &str) -> Result<bool, Error> {
        let st = &self.inner;
        let Some(guard) = st.lock_session(id, true)? else { return Ok(false) };
        // The metadata first: once it is gone the session is, whatever a crash leaves.
        let mut any = remove_if_present(&st.meta_path(id))?;
        any |= remove_if_present(&st.messages_path(id))?;
        any |= remove_if_present(&st.legacy_path(id))?;
        crate::search_index::forget(&st.messages_path(id));
        let _ = remove_if_present(&PathBuf::from(format!("{}.lock", st.legacy_path(id).display())));
        // Unlinked while held: a process waiting for it sees that and starts over.
        remove_if_present(&guard.path)?;
        sync_dir(&st.dir)?;
        drop(guard);
        lock(&st.conversations).take(id);
        lock(&st.unsynced).remove(id);
        st.take_seen(id);
        st.take_appender(id, u64::MAX);
        lock(&st.index).remove(id);
        st.note(id);
        Ok(any)
    }
}

impl Inner {
    /// Where session `id`'s conversation file ends now (under its shared lock, so after the
    /// last whole append), whatever its lines hold: following a damaged session is no error.
    fn tail_end(&self, id: &str) -> Result<Option<TailPos>, Error> {
        let Some(_guard) = self.lock_session(id, false)? else { return Ok(None) };
        let legacy = std::fs::symlink_metadata(self.legacy_path(id)).is_ok();
        let path = self.messages_path(id);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some(TailPos { ino: m.ino(), bytes: m.len(), legacy })),
            Ok(_) => Err(Error::Symlink { path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Some(TailPos { legacy, ..TailPos::default() })),
            Err(e) => Err(atomic::io_err(&path, e)),
        }
    }

    /// Notes lines this process appended to session `id`'s file `ino` at `starts`, when a
    /// reader follows it (`tail_start`).
    fn note_own(&self, id: &str, ino: u64, lines: impl IntoIterator<Item = (u64, u64)>) {
        if let Some(o) = lock(&self.own).get_mut(id) {
            o.lines.extend(lines.into_iter().map(|(start, end)| ((ino, start), end)));
        }
    }

    /// `tail_read` past `pos` when the file holds nothing past it but this process's own
    /// appends (a watcher is told of those too): known from the notes and one `stat`, with no
    /// lock taken and nothing read. `None`: the file must be read.
    fn own_alone(&self, id: &str, pos: TailPos) -> Option<Tail> {
        let stat = std::fs::symlink_metadata(self.messages_path(id)).ok().filter(|m| m.is_file())?;
        if pos.ino == 0 || stat.ino() != pos.ino || stat.len() < pos.bytes {
            return None;
        }
        let mut at = pos.bytes;
        {
            let own = lock(&self.own);
            let lines = &own.get(id)?.lines;
            while at < stat.len() {
                at = *lines.get(&(pos.ino, at))?;
            }
        }
        if at != stat.len() {
            return None;
        }
        self.forget_own(id, pos.ino, at);
        Some(Tail { pos: TailPos { ino: pos.ino, bytes: at, legacy: false }, ..Tail::default() })
    }

    /// Drops the note of an own line that was not written after all.
    fn unnote_own(&self, id: &str, ino: u64, start: u64) {
        if let Some(o) = lock(&self.own).get_mut(id) {
            o.lines.remove(&(ino, start));
        }
    }

    /// Drops the notes of own lines a reader is past (or of a file replaced since).
    fn forget_own(&self, id: &str, ino: u64, upto: u64) {
        if let Some(o) = lock(&self.own).get_mut(id) {
            o.lines.retain(|&(i, s), _| i == ino && s >= upto);
        }
    }

    /// Notes that session `id`'s conversation file is durable up to `file` (an fdatasync
    /// covers every line written before it).
    fn synced(&self, id: &str, file: FilePos) {
        let mut u = lock(&self.unsynced);
        if u.get(id).is_some_and(|p| p.ino != file.ino || p.bytes <= file.bytes) {
            u.remove(id);
        }
    }

    /// Notes that session `id`'s conversation file holds unsynced lines up to `file`.
    fn unsynced(&self, id: &str, file: FilePos) {
        lock(&self.unsynced).insert(id.to_string(), file);
    }

    /// Fdatasyncs session `id`'s conversation file when it is still file `upto.ino` (a file
    /// replaced since was written whole and synced; one removed needs nothing).
    fn sync_lines(&self, id: &str, upto: FilePos) -> Result<(), Error> {
        let path = self.messages_path(id);
        let f = match atomic::open_read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.synced(id, FilePos { ino: 0, bytes: u64::MAX });
                return Ok(());
            }
            Err(e) => return Err(atomic::io_err(&path, e)),
        };
        let ino = f.metadata().map_err(|e| atomic::io_err(&path, e))?.ino();
        if ino == upto.ino {
            f.sync_data().map_err(|e| atomic::io_err(&path, e))?;
        }
        self.synced(id, upto);
        Ok(())
    }

    /// Before a metadata write records lines past the end recorded so far: makes them
    /// durable (another process, or this one, may have appended them without their
    /// fdatasync), so a power loss never leaves metadata counting lines the file lost.
    fn durable_before_recorded(&self, id: &str, d: &Derived) -> Result<(), Error> {
        if d.unrecorded > 0 && d.file.ino != 0 && !d.legacy {
            self.sync_lines(id, d.file)?;
        }
        Ok(())
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
    fn lock_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.lock"))
    }
    fn changes_path(&self) -> PathBuf {
        self.dir.join(".changes")
    }

    fn exists(&self, id: &str) -> bool {
        [self.meta_path(id), self.legacy_path(id)].iter().any(|p| std::fs::symlink_metadata(p).is_ok())
    }

    /// The session's lock, exclusive or shared; `None` when the session does not exist.
    fn lock_session(&self, id: &str, exclusive: bool) -> Result<Option<SessionLock>, Error> {
        if !valid_id(id) || !self.exists(id) {
            return Ok(None);
        }
        self.lock_existing(id, exclusive, true)
    }

    /// `lock_session` of a session known to exist a moment ago; `check`: whether to look
    /// again once it is locked (a caller that looks at its files under the lock anyway need
    /// not: `with_session`).
    fn lock_existing(&self, id: &str, exclusive: bool, check: bool) -> Result<Option<SessionLock>, Error> {
        let path = self.lock_path(id);
        let deadline = Instant::now() + atomic::LOCK_WAIT;
        loop {
            let file = atomic::open_lock_file(&path)?;
            atomic::lock_file(&file, &path, exclusive)?;
            // A delete unlinks the lock file while holding it: this one is stale, take the new.
            let linked = file.metadata().map_err(|e| atomic::io_err(&path, e))?.nlink() > 0;
            if linked {
                if check && !self.exists(id) {
                    // Deleted while we waited (or never there): leave no lock file behind.
                    if exclusive {
                        let _ = remove_if_present(&path);
                    }
                    return Ok(None);
                }
                return Ok(Some(SessionLock { _file: file, path }));
            }
            if Instant::now() > deadline {
                return Err(atomic::io_err(
                    &path,
                    io::Error::other("it keeps being replaced; is another program deleting sessions in a loop?"),
                ));
            }
        }
    }

    /// Runs `f` on the session as its files hold it, under its lock (exclusive to change it:
    /// a torn last line is cut first and a session of the one-file layout migrated). The
    /// session `f` returns replaces the indexed one, and the change is noted for other
    /// processes. `None` when the session does not exist.
    fn with_session<R>(
        &self,
        id: &str,
        exclusive: bool,
        f: impl FnOnce(Derived) -> Result<(Option<Change>, R), Error>,
    ) -> Result<Option<R>, Error> {
        let Some((guard, d, seen)) = self.begin(id, exclusive)? else { return Ok(None) };
        // What `f` changes is seen as `f` says (it failed: derived again next time).
        let (change, r) = f(d)?;
        self.changed(id, guard, change, seen);
        Ok(Some(r))
    }

    /// `with_session` up to its caller's work (not generic, so written once): the lock, the
    /// session derived under it, repaired when exclusive.
    #[inline(never)]
    fn begin(&self, id: &str, exclusive: bool) -> Result<Option<(SessionLock, Derived, Option<Seen>)>, Error> {
        // A session seen a moment ago is locked without looking first: its files are looked at
        // under the lock (`derive_locked`), which finds it gone if it is.
        let known = valid_id(id) && lock(&self.seen).iter().any(|s| s.id == id);
        let guard = match known {
            true => self.lock_existing(id, exclusive, false)?,
            false => self.lock_session(id, exclusive)?,
        };
        let Some(guard) = guard else { return Ok(None) };
        let Some((mut d, seen)) = self.derive_locked(id)? else {
            if exclusive {
                // Deleted meanwhile: leave no lock file behind (as `lock_session` does).
                let _ = remove_if_present(&guard.path);
            }
            return Ok(None);
        };
        if exclusive {
            if self.marked_damaged(id) {
                // Found damaged when it was read: nothing is written to it until it reads whole
                // again (fixed by hand), so its files stay as they are.
                self.read_conversation(&d)?;
            }
            if d.legacy {
                d = self.migrate(id)?;
            }
            if d.torn > 0 {
                self.cut_torn(&d)?;
                d.torn = 0;
            }
        }
        Ok(Some((guard, d, seen)))
    }

    /// After `with_session`'s caller: its change indexed, noted and kept as the view (the lock
    /// released first), else the view as derived kept.
    #[inline(never)]
    fn changed(&self, id: &str, guard: SessionLock, change: Option<Change>, mut seen: Option<Seen>) {
        if let Some(c) = change {
            let listing = Arc::new(Meta::new(&c.session));
            let meta = c.meta.or_else(|| seen.take().map(|s| (s._meta, s.ident)));
            if let Some((file, ident)) = meta {
                let (id, unrecorded) = (id.to_string(), c.unrecorded);
                seen = Some(Seen { id, _meta: file, ident, listing: listing.clone(), file: c.file, unrecorded });
            }
            drop(guard);
            lock(&self.index).insert(id.to_string(), listing);
            self.note(id);
        }
        if let Some(s) = seen {
            self.keep_seen(s);
        }
    }

    /// Session `id`'s `Seen` view, taken out (a caller puts back what it then knows).
    fn take_seen(&self, id: &str) -> Option<Seen> {
        let mut seen = lock(&self.seen);
        let i = seen.iter().position(|s| s.id == id)?;
        Some(seen.remove(i))
    }

    /// The file kept open to append to session `id`'s conversation when it is inode `ino`
    /// (any other is closed: the file was replaced).
    fn take_appender(&self, id: &str, ino: u64) -> Option<File> {
        let mut kept = lock(&self.appenders);
        let i = kept.iter().position(|(k, _, _)| k == id)?;
        let (_, held, f) = kept.remove(i);
        (held == ino && ino != 0).then_some(f)
    }

    fn keep_appender(&self, id: &str, ino: u64, f: File) {
        let mut kept = lock(&self.appenders);
        kept.retain(|(k, _, _)| k != id);
        if kept.len() >= SEEN_SESSIONS {
            kept.remove(0);
        }
        kept.push((id.to_string(), ino, f));
    }

    fn keep_seen(&self, s: Seen) {
        let mut seen = lock(&self.seen);
        seen.retain(|q| q.id != s.id);
        if seen.len() >= SEEN_SESSIONS {
            seen.remove(0);
        }
        seen.push(s);
    }

    /// `derive` under the session's lock, with the view it makes (`Seen`; none for the
    /// one-file layout or an incomplete last line): the view kept from the last time when its
    /// files are still the ones it came from (two `stat`s and, when lines were appended since,
    /// the read of those), else read from the files.
    fn derive_locked(&self, id: &str) -> Result<Option<(Derived, Option<Seen>)>, Error> {
        let meta_path = self.meta_path(id);
        if let Some((d, seen)) = self.view_now(id)? {
            let seen = (d.torn == 0).then_some(seen);
            return Ok(Some((d, seen)));
        }
        if let Some(d) = self.derive_legacy(id)? {
            return Ok(Some((d, None)));
        }
        let Some((file, ident, bytes)) = atomic::read_kept(&meta_path)? else { return Ok(None) };
        let d = self.derive_meta(id, &meta_path, &bytes, true)?;
        let seen = (d.torn == 0).then(|| Seen {
            id: id.to_string(),
            _meta: file,
            ident,
            listing: Arc::new(Meta::new(&d.session)),
            file: d.file,
            unrecorded: d.unrecorded,
        });
        Ok(Some((d, seen)))
    }

    /// Session `id`'s `Seen` view (taken out) brought up to date, with the session it gives,
    /// when it still holds: the metadata file the one it came from (one `stat`), the lines
    /// appended since counted (`count_seen`). `None`: none, or it no longer holds.
    fn view_now(&self, id: &str) -> Result<Option<(Derived, Seen)>, Error> {
        let Some(seen) = self.take_seen(id) else { return Ok(None) };
        if Ident::at(&self.meta_path(id))? != Some(seen.ident) {
            return Ok(None);
        }
        let Some(d) = self.count_seen(&seen)? else { return Ok(None) };
        let listing = if d.file == seen.file { seen.listing } else { Arc::new(Meta::new(&d.session)) };
        let (file, unrecorded) = (d.file, d.unrecorded);
        Ok(Some((d, Seen { listing, file, unrecorded, ..seen })))
    }

    /// The session of `seen` with the lines appended to its conversation file since (by any
    /// process) counted; `None` when that file is not the one `seen` counted (replaced,
    /// shortened, removed, created): derived from the files again.
    fn count_seen(&self, seen: &Seen) -> Result<Option<Derived>, Error> {
        let path = self.messages_path(&seen.id);
        let stat = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound && seen.file.ino == 0 => {
                let (session, unrecorded) = (seen.listing.session()?, seen.unrecorded);
                return Ok(Some(Derived { session, file: seen.file, unrecorded, torn: 0, legacy: false }));
            }
            _ => return Ok(None),
        };
        let now = FilePos { bytes: stat.len(), ino: stat.ino() };
        if now.ino != seen.file.ino || now.bytes < seen.file.bytes {
            return Ok(None);
        }
        let mut session = seen.listing.session()?;
        if now == seen.file {
            return Ok(Some(Derived { session, file: now, unrecorded: seen.unrecorded, torn: 0, legacy: false }));
        }
        let (lines, torn) = count_lines(&path, seen.file.bytes, now.bytes, session.message_count + 1)?;
        session.message_count += lines;
        let mtime = gosling_util::rfc3339(stat.mtime());
        if mtime > session.updated_at {
            session.updated_at = mtime;
        }
        let file = FilePos { bytes: now.bytes - torn, ino: now.ino };
        Ok(Some(Derived { session, file, unrecorded: seen.unrecorded + lines, torn, legacy: false }))
    }

    /// One try of `update_meta_optimistic`.
    fn meta_off_lock<R>(&self, id: &str, f: &mut impl FnMut(&mut Session) -> R) -> Result<Tried<R>, Error> {
        if self.marked_damaged(id) || std::fs::symlink_metadata(self.legacy_path(id)).is_ok() {
            return Ok(Tried::NeedsLock);
        }
        let meta_path = self.meta_path(id);
        // The view this process holds, while the metadata is still the file it came from (its
        // file kept open meanwhile, so its inode is no other's), else the file read; either is
        // kept open until the check, so its inode cannot be given to another file meanwhile.
        let (d, ino, _read, _view) = match self.view_now(id)? {
            Some((d, v)) => (d, v.ident.ino(), None, Some(v)),
            None => {
                let mut read = match atomic::open_read(&meta_path) {
                    Ok(file) => file,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Tried::NeedsLock),
                    Err(e) => return Err(atomic::io_err(&meta_path, e)),
                };
                let stat = read.metadata().map_err(|e| atomic::io_err(&meta_path, e))?;
                if !stat.is_file() {
                    return Err(corrupt(&meta_path, "it is not a regular file"));
                }
                let mut bytes = Vec::with_capacity(stat.len() as usize + 1);
                (&mut read).take(stat.len() + 1).read_to_end(&mut bytes).map_err(|e| atomic::io_err(&meta_path, e))?;
                // Unlocked, a last line without its newline is most likely an append in
                // progress: the metadata records the conversation up to the whole lines (the
                // rest is counted when it is read again, like any line past the recorded end).
                (self.derive_meta(id, &meta_path, &bytes, false)?, stat.ino(), Some(read), None)
            }
        };
        self.durable_before_recorded(id, &d)?;
        let (file, mut s) = (d.file, d.session);
        let (before_id, count) = (s.id.clone(), s.message_count);
        let r = f(&mut s);
        if s.conversation.is_some() {
            log::error!("store: update_meta_optimistic of session {id} set a conversation, which is ignored; use append_message or replace_conversation");
        }
        s.id = before_id;
        s.message_count = count;
        s.conversation = None;
        s.updated_at = gosling_util::now_rfc3339();
        let mut temp = atomic::write_temp(&meta_path, &meta_bytes(&meta_path, &s, file)?)?;
        let Some(guard) = self.lock_session(id, true)? else { return Ok(Tried::Done(None)) };
        let now = match std::fs::symlink_metadata(&meta_path) {
            Ok(m) => Some(m.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(atomic::io_err(&meta_path, e)),
        };
        if now != Some(ino) {
            return Ok(Tried::Replaced);
        }
        temp.rename()?;
        drop(guard);
        let written = temp.into_file();
        let ident = written.metadata().map(|m| Ident::of(&m)).map_err(|e| atomic::io_err(&meta_path, e))?;
        atomic::sync_parent(&meta_path)?;
        let listing = Arc::new(Meta::new(&s));
        lock(&self.index).insert(id.to_string(), listing.clone());
        // What it wrote is what the next look at the session starts from (`Seen`): it records
        // the conversation up to `file`; lines appended since are counted from there.
        let id = id.to_string();
        self.keep_seen(Seen { id: id.clone(), _meta: written, ident, listing, file, unrecorded: 0 });
        self.note(&id);
        Ok(Tried::Done(Some(r)))
    }

    /// Reads one session from its files: the one-file layout if that file exists (it is
    /// removed only once the two new files are durable, so a migration a crash interrupted is
    /// redone), else the metadata with the lines past its recorded end counted. `locked`: the
    /// caller holds the session's lock, so what does not add up is worth a warning.
    fn derive(&self, id: &str, locked: bool) -> Result<Option<Derived>, Error> {
        match self.derive_legacy(id)? {
            Some(d) => Ok(Some(d)),
            None => self.derive_current(id, locked),
        }
    }

    /// `derive` of a session known not to be in the one-file layout.
    fn derive_current(&self, id: &str, locked: bool) -> Result<Option<Derived>, Error> {
        let meta_path = self.meta_path(id);
        let Some(bytes) = atomic::read_file(&meta_path)? else { return Ok(None) };
        self.derive_meta(id, &meta_path, &bytes, locked).map(Some)
    }

    /// `derive_current` of the metadata file's `bytes`.
    fn derive_meta(&self, id: &str, meta_path: &Path, bytes: &[u8], locked: bool) -> Result<Derived, Error> {
        // The file is a Session (without conversation) plus FILE_KEY, which lands in `extra`.
        let mut session: Session = serde_json::from_slice(bytes).map_err(|e| corrupt(meta_path, e.to_string()))?;
        let recorded: Option<FilePos> = session
            .extra
            .remove(FILE_KEY)
            .map(|v| serde_json::from_value(v).map_err(|e| corrupt(meta_path, format!("{FILE_KEY}: {e}"))))
            .transpose()?;
        session.conversation = None;
        let session = of_id(meta_path, session, id)?;
        self.count(session, recorded, locked)
    }

    fn derive_legacy(&self, id: &str) -> Result<Option<Derived>, Error> {
        let legacy = self.legacy_path(id);
        let Some(bytes) = atomic::read_file(&legacy)? else { return Ok(None) };
        // The file with its messages counted but not kept (skipped without allocating).
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let (session, counted) =
            serde::Deserializer::deserialize_map(&mut de, SessionVisitor { count_conversation: true })
                .and_then(|read| de.end().map(|()| read))
                .map_err(|e| corrupt(&legacy, e.to_string()))?;
        let mut session = of_id(&legacy, session, id)?;
        session.message_count = counted.unwrap_or(0);
        Ok(Some(Derived { session, file: FilePos::default(), unrecorded: 0, torn: 0, legacy: true }))
    }

    /// Makes the metadata agree with the conversation file: counts the whole lines past the
    /// recorded end, or all of them when the file was replaced.
    fn count(&self, mut session: Session, recorded: Option<FilePos>, locked: bool) -> Result<Derived, Error> {
        let path = self.messages_path(&session.id);
        let done = |session, file, unrecorded, torn| Ok(Derived { session, file, unrecorded, torn, legacy: false });
        let stat = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let n = session.message_count;
                if !recorded.map_or(n == 0, |r| r.bytes == 0) {
                    return Err(corrupt(&path, format!("it is missing, but the metadata records {n} messages")));
                }
                return done(session, FilePos::default(), 0, 0);
            }
            Err(e) => return Err(atomic::io_err(&path, e)),
        };
        if stat.file_type().is_symlink() {
            return Err(Error::Symlink { path });
        }
        if !stat.is_file() {
            return Err(corrupt(&path, "not a regular file"));
        }
        let now = FilePos { bytes: stat.len(), ino: stat.ino() };
        if recorded == Some(now) {
            return done(session, now, 0, 0);
        }
        let (from, first_line) = match recorded {
            Some(r) if r.ino == now.ino && r.bytes <= now.bytes => (r.bytes, session.message_count + 1),
            Some(r) if r.ino == now.ino => {
                let detail =
                    format!("it holds {} bytes, but {} were written; another program shortened it", now.bytes, r.bytes);
                return Err(corrupt(&path, detail));
            }
            _ => (0, 1),
        };
        let (lines, torn) = count_lines(&path, from, now.bytes, first_line)?;
        if from == 0 {
            if locked {
                log::warn!("store: {} does not match its metadata (a rewrite was interrupted, or it was changed by hand); recounted {lines} messages", path.display());
            }
            session.message_count = lines;
        } else {
            session.message_count += lines;
        }
        let mtime = gosling_util::rfc3339(stat.mtime());
        if mtime > session.updated_at {
            session.updated_at = mtime;
        }
        let file = FilePos { bytes: now.bytes - torn, ino: now.ino };
        // A replaced file's metadata records nothing of it: the next append writes the metadata.
        done(session, file, if from == 0 { APPENDS_PER_META_WRITE } else { lines }, torn)
    }

    /// Cuts an incomplete last line (the caller holds the session's lock, so no append is in
    /// progress: a crash cut it short) and records the file's end.
    fn cut_torn(&self, d: &Derived) -> Result<(), Error> {
        let path = self.messages_path(&d.session.id);
        log::warn!("store: {}: its last line is incomplete ({} bytes, written when a server stopped mid-write and never acknowledged); cut off", path.display(), d.torn);
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| atomic::io_err(&path, e))?;
        f.set_len(d.file.bytes).and_then(|_| f.sync_all()).map_err(|e| atomic::io_err(&path, e))?;
        self.write_meta(&d.session, d.file).map(|_| ())
    }

    /// Moves a session of the one-file layout to its two files, then removes the old file
    /// and makes that durable, before anything is added to the new files.
    fn migrate(&self, id: &str) -> Result<Derived, Error> {
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
        self.derive(id, true)?.ok_or_else(|| corrupt(&self.meta_path(id), "missing after the migration"))
    }

    /// Replaces a conversation file atomically; where it ends.
    fn write_messages(&self, path: &Path, conversation: &[Message]) -> Result<FilePos, Error> {
        if let Some(id) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".jsonl")) {
            lock(&self.conversations).take(id);
        }
        atomic::write_atomic(path, &encode_lines(path, conversation)?)?;
        let stat = std::fs::symlink_metadata(path).map_err(|e| atomic::io_err(path, e))?;
        Ok(FilePos { bytes: stat.len(), ino: stat.ino() })
    }

    /// Replaces the metadata file of `session` (atomically, durably): the file written, still
    /// open, and what `stat` says of it in place.
    fn write_meta(&self, session: &Session, file: FilePos) -> Result<(File, Ident), Error> {
        let path = self.meta_path(&session.id);
        let mut temp = atomic::write_temp(&path, &meta_bytes(&path, session, file)?)?;
        temp.rename()?;
        let written = temp.into_file();
        let ident = written.metadata().map(|m| Ident::of(&m)).map_err(|e| atomic::io_err(&path, e))?;
        atomic::sync_parent(&path)?;
        Ok((written, ident))
    }

    /// Writes the metadata of `s`, changed now, its conversation file ending at `file`.
    fn save(&self, mut s: Session, file: FilePos) -> Result<Change, Error> {
        s.updated_at = gosling_util::now_rfc3339();
        let meta = Some(self.write_meta(&s, file)?);
        Ok(Change { session: s, file, unrecorded: 0, meta })
    }

    /// The conversation as its file holds it, up to its last whole line.
    fn read_conversation(&self, d: &Derived) -> Result<Arc<Vec<Message>>, Error> {
        self.read_conversation_lineage(d).map(|(messages, _)| messages)
    }

    /// `read_conversation`, and its lineage (`Lineage`).
    fn read_conversation_lineage(&self, d: &Derived) -> Result<(Arc<Vec<Message>>, Lineage), Error> {
        let id = &d.session.id;
        if d.legacy {
            let path = self.legacy_path(id);
            let bytes =
                atomic::read_file(&path)?.ok_or_else(|| corrupt(&path, "it vanished while the session was locked"))?;
            return Ok((Arc::new(parse_legacy(&path, id, &bytes)?.conversation.unwrap_or_default()), Lineage::NONE));
        }
        if d.file.bytes == 0 {
            return Ok((Arc::new(Vec::new()), Lineage::NONE));
        }
        let path = self.messages_path(id);
        if d.torn > 0 {
            log::warn!("store: {}: an incomplete last line ({} bytes) is ignored", path.display(), d.torn);
        }
        let cached = lock(&self.conversations).take(id);
        let written = d.file.bytes;
        if let Some(mut p) = cached.filter(|p| p.ino == d.file.ino && p.bytes <= written) {
            // The lines appended since, read from the start of the last line already parsed
            // (one `pread` of the file kept open, whose inode is no other file's meanwhile).
            let from = p.bytes - p.last_line.len() as u64;
            let mut tail = vec![0; (written - from) as usize];
            let read = std::os::unix::fs::FileExt::read_exact_at(&p.file, &mut tail, from);
            if read.is_ok() && tail.starts_with(&p.last_line) {
                let new = &tail[p.last_line.len()..];
                let (more, _) = parse_lines::<Message>(&path, new, p.messages.len() as u64 + 1)?;
                if !more.is_empty() {
                    // Copied first only when a caller still holds this one.
                    Arc::make_mut(&mut p.messages).extend(more);
                }
                if !new.is_empty() {
                    p.last_line = last_line(new).to_vec();
                }
                p.bytes = written;
                let (messages, lineage) = (p.messages.clone(), p.lineage);
                lock(&self.conversations).keep(p);
                return Ok((messages, lineage));
            }
        }
        let f = atomic::open_read(&path).map_err(|e| atomic::io_err(&path, e))?;
        let mut bytes = Vec::with_capacity(written as usize);
        (&f).take(written).read_to_end(&mut bytes).map_err(|e| atomic::io_err(&path, e))?;
        let held = bytes.len() as u64;
        if held < written {
            let detail = format!("it holds {held} bytes, but {written} were written; another program shortened it");
            return Err(corrupt(&path, detail));
        }
        let messages = Arc::new(parse_lines::<Message>(&path, &bytes, 1)?.0);
        let kept = written <= CACHED_CONVERSATION_MAX_BYTES;
        let lineage = if kept { Lineage::new() } else { Lineage::NONE };
        if kept {
            let p = Parsed {
                id: id.clone(),
                file: f,
                ino: d.file.ino,
                bytes: written,
                last_line: last_line(&bytes).to_vec(),
                messages: messages.clone(),
                lineage,
            };
            lock(&self.conversations).keep(p);
        }
        Ok((messages, lineage))
    }

    /// Notes a change to session `id` for the other processes' indexes. A failure only delays
    /// what they list, so it is logged, not returned.
    fn note(&self, id: &str) {
        let path = self.changes_path();
        let line = format!("{id}\n");
        // Appended to the file kept open; when that was replaced (unlinked: `nlink` 0), the line
        // is written again to the new one (a reader that saw the old one go reads everything).
        let r = (|| {
            let mut kept = lock(&self.changes);
            for _ in 0..2 {
                let (f, ino) = match kept.as_mut() {
                    Some(k) => k,
                    None => {
                        let f = OpenOptions::new()
                            .read(true)
                            .append(true)
                            .create(true)
                            .mode(0o600)
                            .custom_flags(libc::O_NOFOLLOW)
                            .open(&path)?;
                        kept.insert((f, 0))
                    }
                };
                f.write_all(line.as_bytes())?;
                let m = f.metadata()?;
                *ino = m.ino();
                if m.nlink() > 0 {
                    return Ok(m);
                }
                *kept = None;
            }
            Err(io::Error::other("it keeps being replaced"))
        })();
        match r {
            Ok(m) if m.len() > CHANGES_MAX_BYTES => {
                // One process replaces it (the others find it small again under the lock).
                let r = atomic::lock(&path).and_then(|_guard| {
                    let big = std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > CHANGES_MAX_BYTES);
                    if big {
                        atomic::write_atomic(&path, b"")?;
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    log::warn!("{e}; other gosling processes re-read changed sessions from it");
                }
            }
            Ok(_) => {}
            Err(e) => log::error!(
                "{}; other gosling processes on this state dir will list session {id} as it was",
                atomic::io_err(&path, e)
            ),
        }
    }

    /// `.changes` as it is now: its inode and length (0, 0 when it does not exist).
    fn changes_now(&self) -> Result<Cursor, Error> {
        let path = self.changes_path();
        match std::fs::symlink_metadata(&path) {
            Ok(m) => Ok(Cursor { ino: m.ino(), offset: m.len() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Cursor::default()),
            Err(e) => Err(atomic::io_err(&path, e)),
        }
    }

    /// Loads every session's listing (on the loader thread), then lets listings through.
    fn load_all(&self) {
        let r = self.changes_now().and_then(|c| {
            let loaded = self.scan()?;
            *lock(&self.cursor) = c;
            *lock(&self.index) = Index::of(loaded);
            Ok(())
        });
        *lock(&self.load) = match r {
            Ok(()) => Load::Ready,
            Err(e) => {
                log::error!("{e}; sessions cannot be listed");
                Load::Failed(e.to_string())
            }
        };
        self.loaded.notify_all();
    }

    /// Reads every session in the directory: their listings. Removes temp files a crash left,
    /// and cuts a torn last line where no writer holds the session.
    fn scan(&self) -> Result<HashMap<String, Arc<Meta>>, Error> {
        let rd = std::fs::read_dir(&self.dir).map_err(|e| atomic::io_err(&self.dir, e))?;
        let started = Instant::now();
        // id → whether a file of the one-file layout holds it.
        let mut ids = std::collections::BTreeMap::new();
        let mut messages_files = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| atomic::io_err(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(".tmp.") {
                let old = entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
                if old.is_some_and(|age| age > STALE_TEMP) {
                    // A temp file of a write that a crash interrupted; the target is intact.
                    let _ = std::fs::remove_file(entry.path());
                }
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
            let derived = if legacy { self.derive(&id, false) } else { self.derive_current(&id, false) };
            match derived {
                Ok(Some(mut d)) => {
                    if d.torn > 0 {
                        d = self.repair(&id).unwrap_or(d);
                    }
                    loaded.insert(id, Arc::new(Meta::new(&d.session)));
                }
                Ok(None) => {}
                Err(e) => match self.read_damaged(&id, &e, false) {
                    Some(s) => {
                        log::warn!("{e}; the session is listed as damaged, its good messages readable");
                        loaded.insert(id, Arc::new(Meta::new(&s)));
                    }
                    None => log::warn!("{e}; the session is left out of the list"),
                },
            }
        }
        for id in messages_files {
            if !self.exists(&id) {
                log::warn!(
                    "store: {} has no metadata file (a deletion was interrupted?); it is not listed — remove it, or move it away to keep it",
                    self.messages_path(&id).display()
                );
            }
        }
        log::info!("store: {} sessions indexed in {:?}", loaded.len(), started.elapsed());
        Ok(loaded)
    }

    /// A session with an incomplete last line, seen without its lock: under the lock, cut the
    /// line if it is still there (a crash left it), else it was a write in progress.
    fn repair(&self, id: &str) -> Option<Derived> {
        let r = self.lock_session(id, true).and_then(|guard| {
            let Some(_guard) = guard else { return Ok(None) };
            let Some(mut d) = self.derive(id, true)? else { return Ok(None) };
            if d.torn > 0 && !d.legacy {
                self.cut_torn(&d)?;
                d.torn = 0;
            }
            Ok(Some(d))
        });
        r.unwrap_or_else(|e| {
            log::warn!("{e}; session {id} is listed as far as its whole lines go");
            None
        })
    }

    /// Whether the index lists session `id` as damaged (`read_damaged`).
    fn marked_damaged(&self, id: &str) -> bool {
        lock(&self.index).get(id).is_some_and(|m| m.json.contains(&format!("\"{DAMAGED_KEY}\":")))
    }

    /// A session whose files do not read whole, as far as they read, marked with
    /// `DAMAGED_KEY` (`why`): the metadata if it parses (else a stand-in named after the id,
    /// dated by the files), the conversation's lines that are goose messages (with
    /// `messages`; counted either way). Reads only; nothing is written, locked or cut. `None`
    /// when `why` is not about these files' contents (a link, an unsafe dir: not followed) or
    /// the session has no file at all.
    fn read_damaged(&self, id: &str, why: &Error, messages: bool) -> Option<Session> {
        if !matches!(why, Error::Corrupt { .. }) || !valid_id(id) {
            return None;
        }
        let (meta_path, lines_path) = (self.meta_path(id), self.messages_path(id));
        let legacy = self.legacy_path(id);
        let meta = atomic::read_file(&meta_path).ok().flatten();
        let old = atomic::read_file(&legacy).ok().flatten();
        let lines = atomic::read_file(&lines_path).ok().flatten();
        if meta.is_none() && old.is_none() && lines.is_none() {
            return None;
        }
        let parsed = meta.as_deref().or(old.as_deref()).and_then(|b| serde_json::from_slice::<Session>(b).ok());
        let mtime = [&meta_path, &legacy, &lines_path]
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .map(|m| m.mtime())
            .max()
            .unwrap_or(0);
        let dated = gosling_util::rfc3339(mtime);
        let mut session = parsed.unwrap_or_else(|| Session {
            name: format!("Damaged session {id}"),
            created_at: dated.clone(),
            updated_at: dated.clone(),
            session_type: user(),
            ..Session::default()
        });
        session.id = id.to_string();
        session.extra.remove(FILE_KEY);
        let mut conversation = session.conversation.take().unwrap_or_default();
        let mut skipped = 0usize;
        if let Some(bytes) = &lines {
            // Whole lines only; a line that is no goose message is skipped, not dropped.
            let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in bytes[..whole].split(|&b| b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
                match serde_json::from_slice::<Message>(line) {
                    Ok(m) => conversation.push(m),
                    Err(_) => skipped += 1,
                }
            }
        }
        session.message_count = conversation.len() as u64;
        if dated > session.updated_at {
            session.updated_at = dated;
        }
        let mut note = why.to_string();
        if skipped > 0 {
            let s = if skipped == 1 { "" } else { "s" };
            note.push_str(&format!(" ({skipped} unreadable line{s} not shown)"));
        }
        session.extra.insert(DAMAGED_KEY.into(), Value::String(note));
        session.conversation = messages.then_some(conversation);
        Some(session)
    }

    fn is_loaded(&self) -> bool {
        matches!(*lock(&self.load), Load::Ready)
    }

    /// Waits (at most `LOAD_WAIT`) for the index the store started loading when it opened.
    fn wait_loaded(&self) -> Result<(), Error> {
        let guard = lock(&self.load);
        let (guard, _) = self
            .loaded
            .wait_timeout_while(guard, LOAD_WAIT, |l| matches!(l, Load::Loading))
            .unwrap_or_else(|e| e.into_inner());
        match &*guard {
            Load::Ready => Ok(()),
            Load::Failed(why) => Err(atomic::io_err(
                &self.dir,
                io::Error::other(format!("the session index could not be loaded: {why}")),
            )),
            Load::Loading => Err(atomic::io_err(
                &self.dir,
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the session index is still loading after {} s; try again", LOAD_WAIT.as_secs()),
                ),
            )),
        }
    }

    /// Applies what other processes changed since this one last looked: the ids added to
    /// `.changes` (re-read each), or the whole directory when `.changes` was replaced.
    fn refresh(&self) -> Result<(), Error> {
        let mut cursor = lock(&self.cursor);
        let now = self.changes_now()?;
        if now == *cursor {
            return Ok(());
        }
        if now.ino != cursor.ino || now.offset < cursor.offset {
            let loaded = self.scan()?;
            *lock(&self.index) = Index::of(loaded);
            *cursor = now;
            return Ok(());
        }
        let path = self.changes_path();
        let mut bytes = Vec::with_capacity(now.offset.saturating_sub(cursor.offset).min(CHANGES_MAX_BYTES) as usize);
        // The file this process appends to, when it is still the one in place (one `pread`).
        let kept = lock(&self.changes);
        let read = match kept.as_ref().filter(|(_, ino)| *ino == now.ino) {
            Some((f, _)) => {
                bytes.resize((now.offset - cursor.offset) as usize, 0);
                std::os::unix::fs::FileExt::read_exact_at(f, &mut bytes, cursor.offset)
            }
            None => atomic::open_read(&path).and_then(|mut f| {
                f.seek(SeekFrom::Start(cursor.offset))?;
                f.take(now.offset - cursor.offset).read_to_end(&mut bytes).map(|_| ())
            }),
        };
        drop(kept);
        if let Err(e) = read {
            return Err(atomic::io_err(&path, e));
        }
        // Only whole lines: a note being written is read next time.
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let ids: BTreeSet<&str> = bytes[..whole]
            .split(|&b| b == b'\n')
            .filter_map(|l| std::str::from_utf8(l).ok())
            .filter(|id| valid_id(id))
            .collect();
        if ids.len() > REORDER_AFTER {
            // Sorted once at the next listing rather than moved entry by entry.
            lock(&self.index).order = None;
        }
        for id in ids {
            // A session this process has a view of (most often its own change, noted here):
            // two `stat`s when the view still holds, rather than its files read again.
            if self.refresh_seen(id)? {
                continue;
            }
            match self.derive(id, false) {
                Ok(Some(d)) => {
                    lock(&self.index).insert(id.to_string(), Arc::new(Meta::new(&d.session)));
                }
                Ok(None) => {
                    lock(&self.index).remove(id);
                }
                Err(e) => match self.read_damaged(id, &e, false) {
                    Some(s) => {
                        log::warn!("{e}; the session is listed as damaged, its good messages readable");
                        lock(&self.index).insert(id.to_string(), Arc::new(Meta::new(&s)));
                    }
                    None => {
                        log::warn!("{e}; the session is left out of the list");
                        lock(&self.index).remove(id);
                    }
                },
            }
        }
        cursor.offset += whole as u64;
        Ok(())
    }

    /// Refreshes session `id`'s index entry from its `Seen` view when that still holds (its
    /// metadata file unchanged; lines appended since are counted): `false` when there is none
    /// or it does not hold (the caller derives the session from its files). Without the lock, an
    /// incomplete last line is an append in progress: counted once it is whole.
    fn refresh_seen(&self, id: &str) -> Result<bool, Error> {
        let Some((_, seen)) = self.view_now(id)? else { return Ok(false) };
        let current = lock(&self.index).get(id).is_some_and(|m| Arc::ptr_eq(m, &seen.listing));
        if !current {
            lock(&self.index).insert(id.to_string(), seen.listing.clone());
        }
        self.keep_seen(seen);
        Ok(true)
    }

    /// Every indexed session, newest first (by `updated_at`, then id), after applying what
    /// other processes changed: the index's own order, not a copy.
    fn sorted(&self) -> Result<Arc<Vec<Arc<Meta>>>, Error> {
        self.wait_loaded()?;
        self.refresh()?;
        Ok(lock(&self.index).sorted())
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

    fn message(i: usize) -> Message {
        let v = json!({"id": format!("m{i}"), "role": "user", "created": i, "content": [{"type": "text", "text": format!("hello {i}")}], "metadata": {}});
        Message::from_value(v).unwrap()
    }

    #[test]
    fn the_index_keeps_its_order_as_entries_change() {
        let meta = |id: usize, t: usize| {
            let s = Session {
                id: format!("20261129_{id}"),
                updated_at: format!("2026-11-29T00:00:{:02}Z", t % 7),
                ..Session::default()
            };
            Arc::new(Meta::new(&s))
        };
        let ids = |order: &[Arc<Meta>]| order.iter().map(|m| m.id.to_string()).collect::<Vec<_>>();
        let mut index = Index::default();
        for i in 0..40 {
            index.insert(format!("20261129_{i}"), meta(i, i));
        }
        let held = index.sorted();
        // Changed, added and removed while a listing holds the order: it is copied, not changed.
        for step in 0..200usize {
            let i = step * 7 % 50;
            if step % 5 == 4 {
                index.remove(&format!("20261129_{i}"));
            } else {
                index.insert(format!("20261129_{i}"), meta(i, step));
            }
            let kept = index.sorted();
            let mut fresh: Vec<Arc<Meta>> = index.by_id.values().cloned().collect();
            fresh.sort_by(|a, b| Meta::newest_first(a, b));
            assert_eq!(ids(&kept), ids(&fresh), "after step {step}");
        }
        assert_eq!(held.len(), 40, "a listing taken before is left as it was");
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
        let listed: Vec<Value> = serde_json::from_slice(&st.list_json().unwrap()).unwrap();
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
        // Listed and readable, marked with why.
        let listed = st.list().unwrap();
        assert_eq!(listed.len(), 1);
        let e = listed[0].extra[DAMAGED_KEY].as_str().unwrap();
        assert!(e.contains(&format!("{id}.meta.json")) && e.contains("left untouched"), "{e}");
        let s = st.get(&id).unwrap().unwrap();
        assert!(s.extra.contains_key(DAMAGED_KEY) && s.conversation == Some(vec![]));
        assert!(st.delete(&id).unwrap());
        assert!(st.get(&id).unwrap().is_none());
    }

    #[test]
    fn a_tail_reads_what_others_append_once_and_skips_its_own() {
        let d = tmpdir("tail");
        // Two stores on one directory: two processes.
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        let id = a.create("/w", vec![]).unwrap().id;
        assert!(b.tail_start("20000101_9").unwrap().is_none(), "no such session");
        let pos = b.tail_start(&id).unwrap().unwrap();
        a.append_message(&id, &message(0)).unwrap();
        a.append_message(&id, &message(1)).unwrap();
        b.append_message(&id, &message(2)).unwrap();
        a.update(&id, |s| s.conversation.get_or_insert_with(Vec::new).extend([message(3), message(4)])).unwrap();
        b.update(&id, |s| s.conversation.get_or_insert_with(Vec::new).extend([message(5), message(6)])).unwrap();
        let t = b.tail_read(&id, pos).unwrap().unwrap();
        assert_eq!(t.messages, [0, 1, 3, 4].map(message), "the others' lines, in order; b's own skipped");
        assert!(!t.rewritten && !t.more);
        let again = b.tail_read(&id, t.pos).unwrap().unwrap();
        assert!(again.messages.is_empty() && again.pos == t.pos, "each line once");
        assert!(lock(&b.inner.own)[&id].lines.is_empty(), "own notes are dropped once read past");
        // Only its own appends past the position (the watcher wakes for those too): read past
        // with no lock taken, even while another process holds the session's lock.
        b.append_message(&id, &message(7)).unwrap();
        b.update(&id, |s| s.conversation.get_or_insert_with(Vec::new).push(message(8))).unwrap();
        let lock_path = d.join("sessions").join(format!("{id}.lock"));
        let held = atomic::open_lock_file(&lock_path).unwrap();
        atomic::lock_file(&held, &lock_path, true).unwrap();
        let own = b.tail_read(&id, t.pos).unwrap().unwrap();
        assert!(own.messages.is_empty() && own.pos.bytes > t.pos.bytes && !own.rewritten);
        drop(held);
        let t = b.tail_read(&id, own.pos).unwrap().unwrap();
        assert!(t.messages.is_empty() && t.pos == own.pos);
        // A rewrite is reported, not streamed; reading goes on from its end.
        a.replace_conversation(&id, &[message(9)]).unwrap();
        let t = b.tail_read(&id, t.pos).unwrap().unwrap();
        assert!(t.rewritten && t.messages.is_empty());
        a.append_message(&id, &message(10)).unwrap();
        let t = b.tail_read(&id, t.pos).unwrap().unwrap();
        assert_eq!(t.messages, [message(10)]);
        // Not followed any more: own appends are not noted.
        b.tail_stop(&id);
        b.append_message(&id, &message(11)).unwrap();
        assert!(lock(&b.inner.own).is_empty());
        // A line that is not a message (damaged by hand) is skipped; the session is still followed.
        let file = d.join("sessions").join(format!("{id}.jsonl"));
        std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(b"not JSON\n").unwrap();
        assert!(b.tail_start(&id).unwrap().is_some(), "a damaged session can be followed");
        b.tail_stop(&id);
        let t = b.tail_read(&id, t.pos).unwrap().unwrap();
        assert_eq!(t.messages, [message(11)], "the bad line skipped");
        a.delete(&id).unwrap();
        assert!(b.tail_read(&id, t.pos).unwrap().is_none(), "a deleted session is gone");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_deferred_append_is_made_durable_before_anything_records_or_follows_it() {
        let d = tmpdir("deferred");
        let st = SessionStore::open(&d).unwrap();
        let s = st.create("/w", vec![]).unwrap();
        // The first line of a file is synced at once (its directory entry too).
        st.append_message_deferred(&s.id, &message(0)).unwrap();
        assert!(!st.has_unsynced(&s.id));
        // Later ones are written, readable at once, and left unsynced...
        st.append_message_deferred(&s.id, &message(1)).unwrap();
        assert!(st.has_unsynced(&s.id));
        assert_eq!(st.get(&s.id).unwrap().unwrap().conversation.unwrap(), vec![message(0), message(1)]);
        // ...until the next message's fsync covers them,
        st.append_message(&s.id, &message(2)).unwrap();
        assert!(!st.has_unsynced(&s.id));
        // or a metadata write that records them (the optimistic one too): the metadata never
        // counts lines a power loss can take,
        st.append_message_deferred(&s.id, &message(3)).unwrap();
        st.update_meta(&s.id, |s| s.name = "named".into()).unwrap();
        assert!(!st.has_unsynced(&s.id));
        st.append_message_deferred(&s.id, &message(4)).unwrap();
        st.update_meta_optimistic(&s.id, |s| s.total_tokens = Some(7)).unwrap();
        assert!(!st.has_unsynced(&s.id));
        // or `sync_conversation`, or a rewrite of the file.
        st.append_message_deferred(&s.id, &message(5)).unwrap();
        st.sync_conversation(&s.id).unwrap();
        assert!(!st.has_unsynced(&s.id));
        st.append_message_deferred(&s.id, &message(6)).unwrap();
        st.replace_conversation(&s.id, &[message(0)]).unwrap();
        assert!(!st.has_unsynced(&s.id));
        // A line due to be recorded in the metadata is synced with it.
        for i in 1..=APPENDS_PER_META_WRITE {
            st.append_message_deferred(&s.id, &message(i as usize)).unwrap();
        }
        assert!(!st.has_unsynced(&s.id), "the 64th append since the last metadata write records it");
        let again = SessionStore::open(&d).unwrap().get(&s.id).unwrap().unwrap();
        assert_eq!(again.message_count, APPENDS_PER_META_WRITE + 1);
        assert_eq!(again.name, "named");
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

    /// The temp files left in the sessions dir (none, once every write is done).
    fn temps(d: &Path) -> Vec<String> {
        let names = std::fs::read_dir(d.join("sessions")).unwrap().map(|e| e.unwrap().file_name());
        names.map(|n| n.to_string_lossy().into_owned()).filter(|n| n.contains(".tmp.")).collect()
    }

    #[test]
    fn an_optimistic_metadata_write_runs_again_on_what_another_writer_left() {
        let d = tmpdir("optimistic");
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        let id = a.create("/w", vec![]).unwrap().id;
        a.append_message(&id, &message(0)).unwrap();
        // Between a's read and its rename, b appends (no metadata write): a's write stands,
        // and the line b appended is still counted.
        let mut runs = 0;
        let add = |s: &mut Session| s.accumulated_input_tokens = Some(s.accumulated_input_tokens.unwrap_or(0) + 1);
        let r = a.update_meta_optimistic(&id, |s| {
            runs += 1;
            if runs == 1 {
                b.append_message(&id, &message(1)).unwrap();
            }
            add(s);
            runs
        });
        assert_eq!(r.unwrap(), Some(1));
        // Between a's read and its rename, b replaces the metadata: a's first write is dropped
        // and its change is made again on b's.
        runs = 0;
        let r = a.update_meta_optimistic(&id, |s| {
            runs += 1;
            if runs == 1 {
                b.update_meta(&id, |s| s.accumulated_input_tokens = Some(10)).unwrap().unwrap();
            }
            add(s);
            runs
        });
        assert_eq!(r.unwrap(), Some(2));
        for st in [&a, &b, &SessionStore::open(&d).unwrap()] {
            let s = st.get(&id).unwrap().unwrap();
            assert_eq!((s.accumulated_input_tokens, s.message_count), (Some(11), 2));
            assert_eq!(s.conversation.unwrap(), vec![message(0), message(1)]);
        }
        assert_eq!(temps(&d), Vec::<String>::new());
        // A session that does not exist (or an id that cannot be one) is not written.
        assert_eq!(a.update_meta_optimistic("20250101_9", add).unwrap(), None);
        assert_eq!(a.update_meta_optimistic("../x", add).unwrap(), None);
        assert_eq!(temps(&d), Vec::<String>::new());
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
    fn a_conversation_read_again_sees_what_any_store_appended_or_rewrote() {
        let d = tmpdir("cached");
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        let id = a.create("/w", vec![]).unwrap().id;
        let conversation = |st: &SessionStore| st.get(&id).unwrap().unwrap().conversation.unwrap();
        a.append_message(&id, &message(0)).unwrap();
        assert_eq!(conversation(&a), vec![message(0)]);
        // Appended here and by another store (another process): only the new lines are read.
        a.append_message(&id, &message(1)).unwrap();
        b.append_message(&id, &message(2)).unwrap();
        assert_eq!(conversation(&a), (0..3).map(message).collect::<Vec<_>>());
        assert_eq!(conversation(&a), (0..3).map(message).collect::<Vec<_>>(), "nothing new: the same");
        // Rewritten by the other store, to the same length and the same last line.
        b.replace_conversation(&id, &[message(1), message(0), message(2)]).unwrap();
        assert_eq!(conversation(&a), vec![message(1), message(0), message(2)]);
        // Rewritten here, shorter.
        a.replace_conversation(&id, &[message(4)]).unwrap();
        assert_eq!(conversation(&a), vec![message(4)]);
        // Its last line changed in place by another program (same file, same length).
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, String::from_utf8(bytes).unwrap().replace("hello 4", "hello 5")).unwrap();
        let mut m = message(4);
        m.content = message(5).content;
        assert_eq!(conversation(&a), vec![m]);
        // Deleted and created again under the same id.
        assert!(a.delete(&id).unwrap());
        assert!(a.get(&id).unwrap().is_none());
    }

    /// `get_shared` hands out the cached conversation itself while nothing changed, and a
    /// conversation a caller holds is never changed under it: what is appended after (here or
    /// by another store) goes to a new one. Its lineage stays while messages are only appended
    /// (here or by another store), and is new once the conversation was rewritten.
    #[test]
    fn a_shared_conversation_is_the_cached_one_and_never_changes_under_its_holder() {
        let d = tmpdir("shared");
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        let id = a.create("/w", vec![]).unwrap().id;
        a.append_message(&id, &message(0)).unwrap();
        let (s, held, lineage) = a.get_shared(&id).unwrap().unwrap();
        assert_eq!((s.conversation, s.message_count), (None, 1), "the conversation comes apart from the session");
        assert_eq!(*held, vec![message(0)]);
        assert!(lineage.lasts(), "a conversation kept parsed has a lineage that lasts");
        let (_, again, same) = a.get_shared(&id).unwrap().unwrap();
        assert!(Arc::ptr_eq(&held, &again), "nothing new: the same conversation, not a copy");
        assert_eq!(same, lineage);
        drop(again);
        a.append_message(&id, &message(1)).unwrap();
        b.append_message(&id, &message(2)).unwrap();
        let (_, now, grown) = a.get_shared(&id).unwrap().unwrap();
        assert_eq!(*now, (0..3).map(message).collect::<Vec<_>>());
        assert_eq!(*held, vec![message(0)], "the held conversation stays as it was read");
        assert_eq!(grown, lineage, "only appended to: what was read is still its start");
        assert_eq!(a.get(&id).unwrap().unwrap().conversation.unwrap(), *now, "get reads the same");
        assert!(a.get_shared("nope").unwrap().is_none());
        // Rewritten (here, or by another store): a new lineage, even for the same length.
        let edited = [message(0), message(9), message(2)];
        b.replace_conversation(&id, &edited).unwrap();
        let (_, rewritten, other) = a.get_shared(&id).unwrap().unwrap();
        assert_eq!(*rewritten, edited);
        assert_ne!(other, lineage, "a rewrite starts a new lineage");
        a.replace_conversation(&id, &edited[..2]).unwrap();
        let (_, cut, third) = a.get_shared(&id).unwrap().unwrap();
        assert_eq!(*cut, edited[..2]);
        assert!(third != other && third != lineage, "each rewrite starts its own");
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
        let before = std::fs::read(&path).unwrap();
        let st = SessionStore::open(&d).unwrap();
        let s = st.get(&id).unwrap().unwrap();
        let e = s.extra[DAMAGED_KEY].as_str().unwrap();
        assert!(e.contains(&format!("{id}.jsonl")) && e.contains("line 2") && e.contains("1 unreadable line"), "{e}");
        // The good message is readable.
        assert_eq!(s.conversation.unwrap(), vec![message(0)]);
        // Nothing was changed on disk.
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_conversation_written_by_goose_is_rewritten_without_losing_a_field() {
        let d = tmpdir("goose-lines");
        let st = SessionStore::open(&d).unwrap();
        let id = st.create("/w", vec![]).unwrap().id;
        // What goose (or a later goose) may have written: fields and blocks gosling does not know.
        let lines = [
            json!({"id": "g1", "role": "user", "created": 1, "content": [{"type": "text", "text": "hi",
                "annotations": {"audience": ["user"]}}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}],
                "metadata": {"userVisible": true, "agentVisible": true}}),
            json!({"id": null, "role": "assistant", "created": 2, "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "toolRequest", "id": "t1", "toolCall": {"status": "success",
                    "value": {"name": "x__y", "arguments": {"a": 1}, "_meta": {"m": 1}}}, "metadata": {"k": 2}},
                {"type": "toolConfirmationRequest", "id": "t1", "toolName": "x__y", "arguments": {}},
                {"type": "someFutureBlock", "payload": [1, 2]}],
                "metadata": {"userVisible": true, "agentVisible": false, "futureFlag": "on"}, "futureField": 3}),
        ];
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
        let conversation = st.get(&id).unwrap().unwrap().conversation.unwrap();
        // A rewrite (goose's override_conversation) writes what it read.
        st.replace_conversation(&id, &conversation).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let mut expected = lines.to_vec();
        // `id: null` is goose's "no id": it comes back absent.
        expected[1].as_object_mut().unwrap().remove("id");
        assert_eq!(back, expected);
    }

    #[test]
    fn a_line_that_is_json_but_no_goose_message_is_an_error_and_nothing_is_rewritten() {
        let d = tmpdir("not-a-message");
        let st = SessionStore::open(&d).unwrap();
        let id = st.create("/w", vec![]).unwrap().id;
        st.append_message(&id, &message(0)).unwrap();
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        // Another program appends a line of its own (the metadata is not told: it is counted).
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"role\":\"system\",\"created\":1,\"content\":[]}\n").unwrap();
        drop(f);
        let before = std::fs::read(&path).unwrap();
        // The line is JSON, so the listing counts it; reading the session finds it is no message.
        assert!(!st.list().unwrap()[0].extra.contains_key(DAMAGED_KEY));
        let s = st.get(&id).unwrap().unwrap();
        let e = s.extra[DAMAGED_KEY].as_str().unwrap();
        assert!(e.contains(&format!("{id}.jsonl")) && e.contains("line 2 is not a goose message"), "{e}");
        assert_eq!(s.conversation.unwrap(), vec![message(0)]);
        // Listed as damaged from then on.
        let listed = st.list().unwrap();
        assert!(listed[0].extra.contains_key(DAMAGED_KEY), "{:?}", listed[0]);
        assert!(e.contains("`role`") && e.contains("left untouched"), "{e}");
        // A change that would rewrite the conversation fails too, and so does an append or a
        // metadata change of the session found damaged; the files are as they were.
        assert!(st.update(&id, |s| s.conversation = Some(vec![message(5)])).is_err());
        let e = st.append_message(&id, &message(6)).unwrap_err().to_string();
        assert!(e.contains("line 2 is not a goose message"), "{e}");
        assert!(st.update_meta(&id, |s| s.name = "x".into()).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // Fixed by hand (the stray line removed): written to again, and no longer marked.
        let good = before.iter().position(|&b| b == b'\n').unwrap() + 1;
        std::fs::write(&path, &before[..good]).unwrap();
        assert!(st.append_message(&id, &message(7)).unwrap());
        assert!(!st.list().unwrap()[0].extra.contains_key(DAMAGED_KEY));
        assert_eq!(st.get(&id).unwrap().unwrap().conversation.unwrap(), vec![message(0), message(7)]);
    }

    /// `Session`'s written-out `Deserialize` reads as the derive did: unknown keys kept (and
    /// written back), the defaults, the derive's errors for a missing or repeated field, and
    /// the legacy reader's count of a conversation it does not keep.
    #[test]
    fn a_session_reads_its_fields_and_keeps_the_unknown_keys() {
        let full = json!({
            "id": "a", "name": "N", "working_dir": "/w", "created_at": "c", "updated_at": "u",
            "extension_data": {"k": 1}, "message_count": 7, "session_type": "sub", "user_set_name": true,
            "goose_mode": "auto", "input_tokens": 1, "output_tokens": 2, "total_tokens": 3,
            "accumulated_input_tokens": 4, "accumulated_output_tokens": 5, "accumulated_total_tokens": 6,
            "provider_name": "p", "model_config": {"m": true}, "recipe": {"r": []},
            "archived_at": null, "future": {"nested": [1, "two"]}, "conversation": [message(0)]
        });
        let s: Session = serde_json::from_value(full.clone()).unwrap();
        assert_eq!((s.message_count, s.session_type.as_str(), s.accumulated_total_tokens), (7, "sub", Some(6)));
        assert_eq!(s.conversation, Some(vec![message(0)]));
        assert_eq!(s.extra.keys().collect::<Vec<_>>(), ["archived_at", "future"]);
        assert_eq!(serde_json::to_value(&s).unwrap(), full);
        // From bytes as the store reads its files, the same.
        assert_eq!(serde_json::from_slice::<Session>(&serde_json::to_vec(&full).unwrap()).unwrap(), s);
        // Only the five required: the defaults.
        let min = json!({"id": "a", "name": "", "working_dir": "/w", "created_at": "c", "updated_at": "u"});
        let s: Session = serde_json::from_value(min).unwrap();
        assert_eq!((s.session_type.as_str(), s.message_count, s.user_set_name), ("user", 0, false));
        assert!(s.extension_data.is_empty() && s.extra.is_empty() && s.conversation.is_none());
        // The derive's errors, which an import shows (`missing field`).
        let e = serde_json::from_str::<Session>(r#"{"id": "a", "name": "", "created_at": "c", "updated_at": "u"}"#);
        assert!(e.unwrap_err().to_string().contains("missing field `working_dir`"));
        let e = serde_json::from_str::<Session>(r#"{"id": "a", "id": "b"}"#).unwrap_err().to_string();
        assert!(e.contains("duplicate field `id`"), "{e}");
        let e = serde_json::from_str::<Session>(r#"{"id": "a", "message_count": null}"#).unwrap_err().to_string();
        assert!(e.contains("invalid type: null"), "{e}");
        assert!(serde_json::from_str::<Session>("[]").unwrap_err().to_string().contains("a session (a JSON object)"));
        // The legacy reader counts the messages and keeps none; trailing bytes are an error.
        let bytes = serde_json::to_vec(&full).unwrap();
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let (s, counted) =
            serde::Deserializer::deserialize_map(&mut de, SessionVisitor { count_conversation: true }).unwrap();
        assert_eq!((s.conversation, counted, s.extra.len()), (None, Some(1), 2));
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
    fn two_stores_appending_to_one_session_lose_nothing_and_keep_one_count() {
        let d = tmpdir("two-writers");
        let (a, b) = (Arc::new(SessionStore::open(&d).unwrap()), Arc::new(SessionStore::open(&d).unwrap()));
        let id = a.create("/w", vec![]).unwrap().id;
        // Two threads on each store (each store opens its own lock files, as a process does).
        let writers: Vec<_> = [&a, &a, &b, &b]
            .into_iter()
            .enumerate()
            .map(|(w, st)| {
                let (st, id) = (st.clone(), id.clone());
                std::thread::spawn(move || {
                    for i in 0..150 {
                        let m = Message::new(format!("w{w}-{i}"), crate::message::Role::User, Vec::new());
                        assert!(st.append_message(&id, &m).unwrap());
                    }
                })
            })
            .collect();
        for t in writers {
            t.join().unwrap();
        }
        let conversation = b.get(&id).unwrap().unwrap().conversation.unwrap();
        assert_eq!(conversation.len(), 600);
        for w in 0..4 {
            let mine: Vec<&str> = conversation
                .iter()
                .filter_map(|m| m.id.as_deref())
                .filter(|i| i.starts_with(&format!("w{w}-")))
                .collect();
            let expected: Vec<String> = (0..150).map(|i| format!("w{w}-{i}")).collect();
            assert_eq!(mine, expected, "writer {w}'s messages, each once and in its order");
        }
        for st in [&a, &b] {
            assert_eq!(st.get_meta(&id).unwrap().unwrap().message_count, 600);
            assert_eq!(st.list().unwrap()[0].message_count, 600);
        }
        drop((a, b));
        assert_eq!(SessionStore::open(&d).unwrap().list().unwrap()[0].message_count, 600);
    }

    #[test]
    fn another_stores_creations_changes_and_deletions_are_listed() {
        let d = tmpdir("two-listers");
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        assert!(b.list().unwrap().is_empty());
        let one = a.create("/w", vec![]).unwrap().id;
        let two = b.create("/w", vec![]).unwrap().id;
        assert_ne!(one, two, "ids given out by two stores never collide");
        let ids = |st: &SessionStore| {
            let mut v: Vec<String> = st.list().unwrap().into_iter().map(|s| s.id).collect();
            v.sort();
            v
        };
        assert_eq!(ids(&a), ids(&b));
        assert_eq!(ids(&b).len(), 2);
        for i in 0..3 {
            a.append_message(&one, &message(i)).unwrap();
        }
        a.update_meta(&one, |s| s.name = "Renamed".into()).unwrap().unwrap();
        let seen = b.get_meta(&one).unwrap().unwrap();
        assert_eq!((seen.name.as_str(), seen.message_count), ("Renamed", 3));
        assert!(a.delete(&two).unwrap());
        assert_eq!(ids(&b), vec![one.clone()]);
        assert!(b.get(&two).unwrap().is_none() && b.get_meta(&two).unwrap().is_none());
        assert!(!d.join("sessions").join(format!("{two}.lock")).exists(), "a deleted session leaves no lock file");
    }

    #[test]
    fn a_torn_last_line_is_cut_by_whichever_store_writes_next() {
        let d = tmpdir("torn-two");
        let (a, b) = (SessionStore::open(&d).unwrap(), SessionStore::open(&d).unwrap());
        let id = a.create("/w", vec![]).unwrap().id;
        a.append_message(&id, &message(0)).unwrap();
        b.append_message(&id, &message(1)).unwrap();
        let path = d.join("sessions").join(format!("{id}.jsonl"));
        OpenOptions::new().append(true).open(&path).unwrap().write_all(br#"{"id":"m2","role":"us"#).unwrap();
        // Read without a writer in progress: the torn line is not a message.
        assert_eq!(a.get(&id).unwrap().unwrap().conversation.unwrap(), vec![message(0), message(1)]);
        b.append_message(&id, &message(3)).unwrap();
        a.append_message(&id, &message(4)).unwrap();
        for st in [&a, &b] {
            let s = st.get(&id).unwrap().unwrap();
            assert_eq!(s.conversation.unwrap(), vec![message(0), message(1), message(3), message(4)]);
            assert_eq!(st.get_meta(&id).unwrap().unwrap().message_count, 4);
        }
        assert!(std::fs::read_to_string(&path).unwrap().lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));
    }
}
