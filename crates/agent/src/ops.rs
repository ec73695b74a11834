//! The session operations every front end calls (the HTTP routes, ACP over stdio and the
//! WebSocket, the web page through the HTTP API): start, open (resume, restart, load), add and
//! remove an extension, stop, close, delete, the mode, a tool confirmation. Each is written
//! once here, with typed inputs and the layer's `Error`; the front ends only translate their
//! wire formats to these and back.
//!
//! What a stored session starts follows `extension_set`'s rule: an entry taken from the config
//! starts only while the config holds it switched on; one added to the session alone starts
//! from its stored copy.

use crate::agents::CancelGuard;
use crate::bus::Bus;
use crate::elicit::Answer;
use crate::error::Error;
use crate::events::Sink;
use crate::extension_set::{self, NotStarted, Origin, StoredExtension};
use crate::host::Host;
use crate::permissions::{Decision, Mode};
use crate::reply::{Outcome, Turn};
use crossbeam_channel::Receiver;
use gosling_extensions::config::{ExtensionConfig, ExtensionEntry, ExtensionStore, Unresolved};
use gosling_extensions::policy::InstallSource;
use gosling_extensions::runtime::{LoadResult, SessionRuntime, ToolDelegate};
use gosling_store::sessions::{Listed, Listing, Session};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// Makes a session's tool delegate once its id is known (ACP: the editor's file system).
pub type DelegateFor = Box<dyn FnOnce(&str) -> Option<ToolDelegate> + Send>;

/// How a session's extensions start: in the background (the answer does not wait; a resume
/// takes their results), or before the answer, with their results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Background,
    Started,
}

/// How long a history search reads messages (newest sessions first) before it answers with
/// what it found: every front end's (ACP's `session/list`, goosed's `/sessions/search`).
pub const SEARCH_BUDGET: std::time::Duration = std::time::Duration::from_millis(80);

/// What a history search asks for (`Host::search_sessions`).
pub struct SessionQuery<'a> {
    pub types: Vec<&'a str>,
    pub working_dir: Option<&'a str>,
    pub query: Option<&'a str>,
    /// How long messages are read before the answer goes with what was found.
    pub budget: std::time::Duration,
}

/// What a history search found (`Host::search_sessions`): positions in the store's listing,
/// newest first; nothing is copied or parsed until a front end takes its page, and a listing
/// without a query is filtered only as far as the page taken (`iter`).
pub struct SessionsFound {
    listing: Listing,
    found: Kept,
    /// With a query: `Some(false)` when the budget ran out before the oldest sessions' messages
    /// were read.
    pub complete: Option<bool>,
}

enum Kept {
    /// The positions found by a search.
    Searched(Vec<usize>),
    /// Every session of these types (empty: all) in this working dir (if any), as iterated.
    Filter { types: Vec<String>, working_dir: Option<String> },
}

impl SessionsFound {
    /// The sessions found, newest first.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Listed<'_>> + '_> {
        match &self.found {
            Kept::Searched(at) => Box::new(at.iter().filter_map(|&i| self.listing.get(i))),
            Kept::Filter { types, working_dir } => Box::new(self.listing.iter().filter(move |s| {
                (types.is_empty() || types.iter().any(|t| t == s.session_type()))
                    && working_dir.as_deref().is_none_or(|c| s.working_dir() == c)
            })),
        }
    }

    /// The `size` sessions found from the `start`th on, and whether more follow.
    pub fn page(&self, start: usize, size: usize) -> (Vec<Listed<'_>>, bool) {
        let mut all = self.iter().skip(start);
        let page = all.by_ref().take(size).collect();
        (page, all.next().is_some())
    }
}

/// A new session (`/agent/start`, ACP `session/new`).
pub struct NewSession {
    /// Already checked by `config::working_dir`.
    pub working_dir: String,
    pub extensions: Vec<StoredExtension>,
    /// Where the extensions came from, for the trust policy's rules.
    pub source: InstallSource,
    pub recipe: Option<Value>,
    pub wait: Wait,
    pub delegate: Option<DelegateFor>,
}

/// A stored session opened again (`/agent/resume`, `/agent/restart`,
/// `/agent/update_working_dir`, ACP `session/load`).
#[derive(Default)]
pub struct OpenSession {
    /// A new working dir (already checked), kept on the session.
    pub working_dir: Option<String>,
    /// Extensions added to this session as it opens (an editor's `mcpServers`); one whose name
    /// the set already holds is left out.
    pub added: Vec<ExtensionConfig>,
    /// Start its extensions again even when they run (else a running session is only joined).
    pub restart: bool,
    pub delegate: Option<DelegateFor>,
    /// `Opened::session` without its conversation (the caller replays it with
    /// `Host::each_message`, in bounded memory).
    pub without_conversation: bool,
}

/// A session's provider and model (`Host::set_model`); `None` leaves one as it is.
#[derive(Debug, Default)]
pub struct ModelChoice {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub context_limit: Option<u64>,
}

/// A session started or opened.
pub struct Opened {
    /// With its conversation (unless `OpenSession::without_conversation`).
    pub session: Session,
    /// Each extension started (none for `Wait::Background`).
    pub results: Vec<LoadResult>,
    /// The stored entries not started, with why (`extension_set`'s rule).
    pub left_out: Vec<(String, NotStarted)>,
}

impl Host {
    /// The config's enabled extensions, as a new session takes them.
    pub fn enabled_extensions(&self) -> Result<Vec<StoredExtension>, Error> {
        Ok(self.configured()?.into_iter().filter(|e| e.enabled).map(|e| from_config(e.config)).collect())
    }

    /// `configs` chosen for a session now, each with its origin (`Origin::of`).
    pub fn chosen_extensions(&self, configs: Vec<ExtensionConfig>) -> Result<Vec<StoredExtension>, Error> {
        let configured = self.configured()?;
        Ok(configs.into_iter().map(|c| StoredExtension { origin: Origin::of(&c, &configured), config: c }).collect())
    }

    fn configured(&self) -> Result<Vec<ExtensionEntry>, Error> {
        Ok(self.store.extensions().map_err(|e| Error::Extensions(Box::new(e)))?.entries)
    }

    /// Starts a new session: every extension checked against the trust policy, the session
    /// stored with its extension set, its extensions started.
    pub fn start_session(&self, new: NewSession) -> Result<Opened, Error> {
        for e in &new.extensions {
            self.policy_check(&e.config, new.source).map_err(|e| Error::Refused(Box::new(e)))?;
        }
        let set = new.extensions;
        let session = self.sessions.create(&new.working_dir, Vec::new()).map_err(Error::Store)?;
        let recipe = new.recipe;
        let stored = self.sessions.update_meta(&session.id, |s| {
            extension_set::store_set(s, &set);
            if let Some(rc) = recipe {
                s.recipe = Some(rc);
            }
        });
        stored.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(session.id.clone()))?;
        let rt = self.runtime_for(&session.id, &new.working_dir, new.delegate);
        let configs: Vec<ExtensionConfig> = set.into_iter().map(|e| e.config).collect();
        let results = match new.wait {
            Wait::Background => {
                rt.load_in_background(configs);
                Vec::new()
            }
            Wait::Started => rt.load_all(configs),
        };
        self.install(rt);
        let session = self.session(&session.id)?;
        log::info!("session {} started in {}", session.id, session.working_dir);
        Ok(Opened { session, results, left_out: Vec::new() })
    }

    /// Opens a stored session: its extension set as the person left it, less what the config
    /// took back (`extension_set::to_start`), started — or joined when it runs and `restart` is
    /// not asked.
    pub fn open_session(&self, id: &str, open: OpenSession) -> Result<Opened, Error> {
        let without_conversation = open.without_conversation;
        let meta =
            self.sessions.get_meta(id).map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        let mut set = extension_set::stored_set(&meta);
        let known: Vec<String> = set.iter().map(|e| gosling_extensions::config::runtime_key(e.config.name())).collect();
        let added: Vec<StoredExtension> = open
            .added
            .into_iter()
            .filter(|c| !known.contains(&gosling_extensions::config::runtime_key(c.name())))
            .map(|config| StoredExtension { config, origin: Origin::Session })
            .collect();
        for e in &added {
            self.policy_check(&e.config, InstallSource::AddExtension).map_err(|e| Error::Refused(Box::new(e)))?;
        }
        let moved = open.working_dir.as_ref().filter(|d| **d != meta.working_dir).cloned();
        if !added.is_empty() || moved.is_some() {
            set.extend(added);
            let change = |s: &mut Session| {
                if let Some(d) = &moved {
                    s.working_dir = d.clone();
                }
                extension_set::store_set(s, &set);
            };
            self.sessions
                .update_meta(id, change)
                .map_err(Error::Store)?
                .ok_or_else(|| Error::SessionNotFound(id.into()))?;
        }
        let working_dir = moved.unwrap_or(meta.working_dir);
        let (results, left_out) = match (open.restart, self.agents.get(id)) {
            (false, Some(rt)) => (rt.take_results().unwrap_or_default(), Vec::new()),
            _ => {
                if let Some(old) = self.agents.remove(id) {
                    old.shutdown();
                }
                let (start, left_out) = extension_set::to_start(&set, &self.configured()?);
                for (name, why) in &left_out {
                    log::info!("session {id}: extension {name} not started: {}", not_started(why));
                }
                let rt = self.runtime_for(id, &working_dir, open.delegate);
                let results = rt.load_all(start);
                self.install(rt);
                (results, left_out)
            }
        };
        let session = if without_conversation { self.session_meta(id)? } else { self.session(id)? };
        Ok(Opened { session, results, left_out })
    }

    /// Adds an extension to a live session, whichever front end asks: the trust policy, its
    /// secrets stored, started in the session's runtime, kept in its extension set (with its
    /// origin).
    pub fn add_extension(&self, id: &str, config: ExtensionConfig) -> Result<(), Error> {
        self.policy_check(&config, InstallSource::AddExtension).map_err(|e| Error::Refused(Box::new(e)))?;
        let unresolved = self.unresolved_secrets(&config);
        if !unresolved.missing.is_empty() {
            // The refused ones are refused by the activation, with the rule's words.
            let unresolved = Unresolved { missing: unresolved.missing, refused: Vec::new() };
            return Err(Error::MissingSecrets { name: config.name().to_string(), unresolved });
        }
        let rt = self.agents.get(id).ok_or_else(|| Error::NoAgent(id.into()))?;
        rt.wait_loaded();
        let name = config.name().to_string();
        rt.add(config.clone()).map_err(|error| Error::NotStarted { name: name.clone(), error: Box::new(error) })?;
        let entry = self.chosen_extensions(vec![config])?.pop();
        self.change_set(id, &name, entry)
    }

    /// Removes an extension from a live session and from its stored set.
    pub fn remove_extension(&self, id: &str, name: &str) -> Result<(), Error> {
        let rt = self.agents.get(id).ok_or_else(|| Error::NoAgent(id.into()))?;
        rt.wait_loaded();
        rt.remove(name);
        self.change_set(id, name, None)
    }

    fn change_set(&self, id: &str, name: &str, entry: Option<StoredExtension>) -> Result<(), Error> {
        let done = self.sessions.update_meta(id, |s| extension_set::replace(s, name, entry));
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))
    }

    /// The session's stored extension set (the configs, as stored).
    pub fn session_extensions(&self, id: &str) -> Result<Vec<ExtensionConfig>, Error> {
        Ok(extension_set::session_extensions(&self.session_meta(id)?))
    }

    /// Stops a session's extensions; it stays stored. `NoAgent` when none run.
    pub fn stop_session(&self, id: &str) -> Result<(), Error> {
        let rt = self.agents.remove(id).ok_or_else(|| Error::NoAgent(id.into()))?;
        rt.shutdown();
        log::info!("session {id} stopped");
        Ok(())
    }

    /// Deletes a session: its running turn cancelled, its extensions stopped, its files removed.
    pub fn delete_session(&self, id: &str) -> Result<(), Error> {
        if let Some(rt) = self.agents.remove(id) {
            rt.shutdown();
        }
        if let Some(bus) = self.buses.get(id) {
            bus.cancel("");
            self.buses.remove(id);
        }
        match self.sessions.delete(id).map_err(Error::Store)? {
            true => Ok(()),
            false => Err(Error::SessionNotFound(id.into())),
        }
    }

    /// Sets the session's mode (goose's GOOSE_MODE for this session).
    pub fn set_mode(&self, id: &str, mode: &str) -> Result<Mode, Error> {
        let m = Mode::parse(mode).ok_or_else(|| Error::UnknownMode(mode.into()))?;
        let done = self.sessions.update_meta(id, |s| s.goose_mode = Some(m.name().to_string()));
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        log::info!("session {id}: mode {}", m.name());
        Ok(m)
    }

    /// The person's answer to a tool confirmation a running turn waits for (an "always" one is
    /// kept with the session by the turn); false when no turn waits for `request_id`.
    pub fn confirm_tool(&self, request_id: &str, decision: Decision) -> bool {
        self.confirmations.answer(request_id, decision.as_str())
    }

    /// Names the session: the person's name, kept from then on (`user_set_name`: no title from
    /// a message or the model replaces it). The name as kept (`title::check_name`).
    pub fn rename_session(&self, id: &str, name: &str) -> Result<String, Error> {
        let name = crate::title::check_name(name).map_err(Error::BadName)?;
        let kept = name.clone();
        let done = self.sessions.update_meta(id, |s| {
            s.name = kept;
            s.user_set_name = true;
        });
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        Ok(name)
    }

    /// The session with its conversation as one JSON document (goose's export).
    pub fn export_session(&self, id: &str) -> Result<String, Error> {
        let s = self.session(id)?;
        Ok(serde_json::to_string_pretty(&s).expect("a Session always serializes"))
    }

    /// The session's provider and model (a turn reads them from the session): a provider
    /// gosling has, a model named; what `choice` leaves out stays.
    pub fn set_model(&self, id: &str, choice: ModelChoice) -> Result<(), Error> {
        let provider = match &choice.provider {
            Some(p) => Some(gosling_llm::canonical_provider(p).ok_or_else(|| Error::UnknownProvider(p.clone()))?),
            None => None,
        };
        let model = match choice.model.as_deref().map(str::trim) {
            Some("") => return Err(Error::NoModel),
            Some(m) => {
                let mut config = serde_json::json!({ "model_name": m, "toolshim": false });
                if let Some(c) = choice.context_limit {
                    config["context_limit"] = serde_json::json!(c);
                }
                Some(config)
            }
            None => None,
        };
        let done = self.sessions.update_meta(id, |s| {
            if let Some(p) = provider {
                s.provider_name = Some(p.to_string());
            }
            if let Some(m) = model {
                s.model_config = Some(m);
            }
        });
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))
    }

    /// Keeps a value of a front end's own on the session (ACP's thinking effort): `key` is one
    /// of gosling's own session fields, never one of goose's.
    pub fn set_session_value(&self, id: &str, key: &str, value: Value) -> Result<(), Error> {
        let done = self.sessions.update_meta(id, |s| {
            s.extra.insert(key.to_string(), value);
        });
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))
    }

    /// Steers a message into session `session`'s running turn `expected` (`steer::Runs::steer`).
    pub fn steer(
        &self,
        session: &str,
        expected: &str,
        content: Vec<gosling_store::message::Content>,
    ) -> Result<crate::steer::Steered, Error> {
        self.runs.steer(session, expected, content)
    }

    /// The running extensions of a session; `NoAgent` when it has none (start or resume it).
    pub fn runtime(&self, id: &str) -> Result<Arc<SessionRuntime>, Error> {
        self.agents.get(id).ok_or_else(|| Error::NoAgent(id.into()))
    }

    /// Every session without its conversation, as the store orders them.
    pub fn list_sessions(&self) -> Result<Vec<Session>, Error> {
        self.sessions.list().map_err(Error::Store)
    }

    /// The sessions a history search asks for, newest first: of `types` (goose's session
    /// types; empty: all), in `working_dir` if given, and, with a `query`, those whose name or
    /// (read newest first within `budget`) whose messages hold it, ignoring case. Read from
    /// the store's index: nothing is parsed and no conversation file is read for a listing
    /// without a query; the caller takes the page it answers (`SessionsFound::page`), and a listing
    /// without a query looks at no more sessions than that page.
    pub fn search_sessions(&self, q: &SessionQuery<'_>) -> Result<SessionsFound, Error> {
        let listing = self.sessions.listed().map_err(Error::Store)?;
        // The first listing of this process reads the search filters kept on disk, in the
        // background, so its first search asks no file an earlier search summarized.
        gosling_store::search::prefetch_filters(&self.sessions);
        let wanted = |s: &Listed<'_>| {
            (q.types.is_empty() || q.types.contains(&s.session_type()))
                && q.working_dir.is_none_or(|c| s.working_dir() == c)
        };
        let query = q.query.map(str::to_lowercase).filter(|t| !t.trim().is_empty());
        let Some(query) = query else {
            let types = q.types.iter().map(|t| t.to_string()).collect();
            let found = Kept::Filter { types, working_dir: q.working_dir.map(str::to_string) };
            return Ok(SessionsFound { listing, found, complete: None });
        };
        let mut hit = vec![false; listing.len()];
        let mut others = Vec::new();
        let mut at = Vec::new();
        for (i, s) in listing.iter().enumerate().filter(|(_, s)| wanted(s)) {
            if s.name_lower().contains(query.as_str()) {
                hit[i] = true;
            } else {
                others.push(s);
                at.push(i);
            }
        }
        let found = gosling_store::search::sessions_saying(&self.sessions, &others, &query, q.budget);
        for n in found.hits {
            hit[at[n]] = true;
        }
        drop(others);
        let at = hit.iter().enumerate().filter(|(_, h)| **h).map(|(i, _)| i).collect();
        Ok(SessionsFound { listing, found: Kept::Searched(at), complete: Some(found.complete) })
    }

    /// Every session's listing entry as one JSON array, built without serializing (the store
    /// keeps each entry's JSON).
    pub fn list_sessions_json(&self) -> Result<Vec<u8>, Error> {
        gosling_store::search::prefetch_filters(&self.sessions);
        self.sessions.list_json().map_err(Error::Store)
    }

    /// The session without its conversation (no conversation read); its token counts with
    /// those still being written (`usage::with_queued`).
    pub fn session_meta(&self, id: &str) -> Result<Session, Error> {
        let mut s =
            self.sessions.get_meta(id).map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        crate::usage::with_queued(&self.sessions, &mut s);
        Ok(s)
    }

    /// Session `id`'s conversation one message at a time, in bounded memory, for a front end
    /// that replays it as it is read (`SessionStore::each_message`): `meta` gets the session
    /// without its conversation (read under the same lock), then `each` every message in order; `SessionNotFound` when there is no such session. The answer: the note of a
    /// damaged session (lines skipped; `DAMAGED_KEY`), else `None`.
    pub fn each_message(
        &self,
        id: &str,
        meta: impl FnOnce(Session),
        mut each: impl FnMut(gosling_store::message::Message),
    ) -> Result<Option<String>, Error> {
        let found = self.sessions.each_message(
            id,
            |mut s| {
                crate::usage::with_queued(&self.sessions, &mut s);
                meta(s);
                Ok::<(), gosling_store::atomic::Error>(())
            },
            |m| {
                each(m);
                Ok(())
            },
        );
        found.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))
    }

    /// The session with its conversation (token counts as `session_meta`).
    pub fn session(&self, id: &str) -> Result<Session, Error> {
        let mut s = self.sessions.get(id).map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        crate::usage::with_queued(&self.sessions, &mut s);
        Ok(s)
    }

    fn runtime_for(&self, id: &str, working_dir: &str, delegate: Option<DelegateFor>) -> Arc<SessionRuntime> {
        let rt = SessionRuntime::new(id, PathBuf::from(working_dir), self.runtime_deps.clone());
        if let Some(d) = delegate.and_then(|f| f(id)) {
            rt.set_delegate(Some(d));
        }
        rt
    }

    /// Installs a session's runtime, shutting down the one it replaces.
    fn install(&self, rt: Arc<SessionRuntime>) {
        if let Some(old) = self.agents.insert(rt) {
            old.shutdown();
        }
    }
}

/// Turns and the session's event bus: what the front ends run and follow.
impl Host {
    /// Runs a prepared turn (`reply::Turn::prepare`) to its end on this thread: its events go
    /// to `sink`, an extension's questions through the host's elicitations.
    pub fn run_turn(&self, turn: Turn, sink: Arc<dyn Sink>, cancel: Receiver<()>) -> Outcome {
        turn.run(sink, cancel, &self.elicitations)
    }

    /// Runs `turn` in the background as request `request_id` of the session's event bus
    /// (`request::start_request`); `RequestActive` when one runs there.
    pub fn start_request(&self, id: &str, request_id: &str, turn: Result<Turn, Error>) -> Result<(), Error> {
        crate::request::start_request(&self.buses.get_or_create(id), request_id, turn, self.elicitations.clone())
    }

    /// The session's event bus, for a follower (created when none is there yet).
    pub fn follow(&self, id: &str) -> Arc<Bus> {
        self.buses.get_or_create(id)
    }

    /// Cancels request `request_id` of the session, whichever front end runs it: an ACP prompt
    /// registered under that id, else the bus's active request (any, when `request_id` names
    /// none — goose's behaviour), else any registered turn of the session. `None` when the
    /// session has no event bus and nothing registered, else whether a turn was running.
    pub fn cancel_request(&self, id: &str, request_id: &str) -> Option<bool> {
        if self.cancels.has(id, request_id) {
            return Some(self.cancels.cancel(id, Some(request_id)) > 0);
        }
        let bus = self.buses.get(id);
        if bus.as_ref().is_some_and(|b| !b.active_ids().is_empty()) {
            return bus.map(|b| b.cancel(request_id));
        }
        let ran = self.cancels.cancel(id, None);
        (bus.is_some() || ran > 0).then_some(ran > 0)
    }

    /// Stops whatever turn runs in the session, whichever front end started it (ACP's
    /// `session/cancel`); false when none ran. Waits a little for a bus request to wind down.
    pub fn cancel_turn(&self, id: &str) -> bool {
        let ran = self.cancels.cancel(id, None);
        let bus = self.buses.get(id).filter(|b| !b.active_ids().is_empty());
        let cancelled = bus.and_then(|b| Some(b.cancel(&b.active_ids().into_iter().next()?)));
        cancelled.unwrap_or(false) || ran > 0
    }

    /// Registers how to stop a turn a front end runs outside the session's bus (an ACP
    /// prompt), under its request id, so that `cancel_request` and `cancel_turn` reach it from
    /// any front end; registered until the guard drops.
    pub fn on_cancel(&self, id: &str, request_id: &str, hook: Box<dyn Fn() + Send + Sync>) -> CancelGuard {
        self.cancels.register(id, request_id, hook)
    }

    /// A turn's sink that also publishes to the session's bus (`request::also_on_bus`), so
    /// followers see a turn another front end runs.
    pub fn also_on_bus(&self, id: &str, request_id: &str, main: Arc<dyn Sink>) -> Arc<dyn Sink> {
        crate::request::also_on_bus(self, id, request_id, main)
    }

    /// The person's answer to an extension's question; false when nothing waits for `id`.
    pub fn answer_elicitation(&self, id: &str, answer: Answer) -> bool {
        self.elicitations.answer(id, answer)
    }
}

fn from_config(config: ExtensionConfig) -> StoredExtension {
    StoredExtension { config, origin: Origin::Config }
}

/// Why a stored entry was left out, in words that say how to have it back.
pub fn not_started(why: &NotStarted) -> &'static str {
    match why {
        NotStarted::DeletedFromConfig => {
            "it came from the config, which no longer has it; install it again or add it to this session"
        }
        NotStarted::SwitchedOff => "it is switched off in the config; switch it on there or add it to this session",
    }
}
