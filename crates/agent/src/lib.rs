//! Session agents: the live runtime of each session, keyed by session id, the turn loop, its
//! events and the session event bus, and elicitations.
#![deny(unsafe_code)]

pub mod apps;
pub mod bus;
pub mod elicit;
pub mod events;
pub mod history;
pub mod host;
pub mod messages;
pub mod permissions;
pub mod prompts;
pub mod reply;
pub mod sampling;
pub mod settings;
pub mod steer;
pub mod title;
pub mod usage;

use gosling_extensions::config::ExtensionConfig;
use gosling_extensions::runtime::SessionRuntime;
use gosling_store::sessions::{Session, ENABLED_EXTENSIONS};
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

/// The extension set stored on a session (goose's `enabled_extensions`), as stored.
pub fn stored_extensions(s: &Session) -> Vec<Value> {
    let list = s.extension_data.get(ENABLED_EXTENSIONS).and_then(|d| d.get("extensions"));
    list.and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The configs of a session's extension set; one that does not parse is skipped.
pub fn session_extensions(s: &Session) -> Vec<ExtensionConfig> {
    stored_extensions(s).into_iter().filter_map(|v| ExtensionConfig::from_value(v).ok()).collect()
}

/// Stores `list` as the session's extension set.
pub fn store_extensions(s: &mut Session, list: Vec<Value>) {
    s.extension_data.insert(ENABLED_EXTENSIONS.into(), json!({ "extensions": list }));
}

/// After a live session's runtime gained or lost an extension, its stored extension set follows:
/// the entry with `name`'s key is replaced by `config`, or dropped when `config` is `None` — for
/// `/agent/add_extension`, `/agent/remove_extension` and ACP's session extension methods alike.
/// `Ok(None)` when there is no such session.
pub fn keep_session_extension(
    sessions: &gosling_store::sessions::SessionStore,
    id: &str,
    name: &str,
    config: Option<&ExtensionConfig>,
) -> Result<Option<()>, gosling_store::atomic::Error> {
    use gosling_extensions::config::runtime_key;
    let key = runtime_key(name);
    let value = config.map(|c| serde_json::to_value(c).expect("an extension config serializes"));
    sessions.update_meta(id, |s| {
        let mut list = stored_extensions(s);
        list.retain(|v| v.get("name").and_then(Value::as_str).map(runtime_key).as_deref() != Some(key.as_str()));
        list.extend(value);
        store_extensions(s, list);
    })
}

/// Deletes a session, whichever front end asks: its running turn cancelled, its extensions
/// stopped, its files removed. False when there was no such session.
pub fn delete_session(host: &host::Host, id: &str) -> Result<bool, gosling_store::atomic::Error> {
    if let Some(rt) = host.agents.remove(id) {
        rt.shutdown();
    }
    if let Some(bus) = host.buses.get(id) {
        bus.cancel("");
        host.buses.remove(id);
    }
    host.sessions.delete(id)
}

/// A turn's sink that also publishes every event to the session's bus under `request_id`, so
/// a follower of `/sessions/{id}/events` sees a turn another front end (ACP) runs.
pub fn also_on_bus(
    host: &host::Host,
    session_id: &str,
    request_id: &str,
    main: Arc<dyn events::Sink>,
) -> Arc<dyn events::Sink> {
    let bus = bus::BusSink { bus: host.buses.get_or_create(session_id), request_id: request_id.to_string() };
    Arc::new(bus::Also { main, bus })
}

/// The agent layer's one error: why a turn could not start or stopped short of a final
/// answer, or why a setting could not be changed (`settings`).
#[derive(Debug)]
pub enum Error {
    /// No such session.
    SessionNotFound(String),
    /// The session has no running agent (no `/agent/start` or `/agent/resume` yet).
    NoAgent(String),
    /// The model settings are incomplete or wrong (`llm` says what to set).
    Model(gosling_llm::Error),
    /// Reading or saving the session's messages failed.
    SaveMessage(gosling_store::atomic::Error),
    /// The turn used its `GOSLING_MAX_TURNS` model turns without reaching a final answer.
    OutOfTurns(usize),
    /// A turn already runs in this session (from any front end).
    Busy(String),
    /// The session's event bus already runs a request (goose's words: `bus::BUSY`).
    RequestActive,
    /// A setting's key is empty, too long, or `extensions`; the message says what to use.
    BadKey(&'static str),
    /// Reading or writing the settings failed.
    Store(gosling_store::atomic::Error),
    /// A message cannot be steered into a run (`steer`); the text says why and what to do.
    Steer(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::SessionNotFound(id) => write!(f, "Session {id} not found"),
            Error::NoAgent(id) => write!(
                f,
                "Agent not initialized: session {id:?} has no running agent; call /agent/resume with load_model_and_extensions: true"
            ),
            Error::Model(e) => write!(f, "{e}"),
            Error::SaveMessage(e) => write!(f, "Failed to save the message: {e}"),
            Error::RequestActive => f.write_str(bus::BUSY),
            Error::BadKey(why) => f.write_str(why),
            Error::Steer(why) => f.write_str(why),
            Error::Store(e) => write!(f, "{e}"),
            Error::Busy(id) => {
                write!(f, "session {id} is already answering a message; wait for it to finish, or cancel it")
            }
            Error::OutOfTurns(n) => {
                write!(f, "stopped after {n} model turns without a final answer (raise GOSLING_MAX_TURNS to allow more)")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Model(e) => Some(e),
            Error::SaveMessage(e) | Error::Store(e) => Some(e),
            Error::SessionNotFound(_)
            | Error::NoAgent(_)
            | Error::OutOfTurns(_)
            | Error::Busy(_)
            | Error::BadKey(_)
            | Error::Steer(_)
            | Error::RequestActive => None,
        }
    }
}

/// Runs a turn in the background as request `request_id` of the session's bus: its events are
/// published there, a failure to start is an Error event, and Finish always comes last
/// (after completion, cancel and error). `Err(Error::RequestActive)` when a request is already
/// active.
pub fn start_request(
    bus: &Arc<bus::Bus>,
    request_id: &str,
    turn: Result<reply::Turn, Error>,
    elicitations: Arc<elicit::Elicitations>,
) -> Result<(), Error> {
    let (cancel, done) = bus.begin(request_id).ok_or(Error::RequestActive)?;
    let sink: Arc<dyn events::Sink> = Arc::new(bus::BusSink { bus: bus.clone(), request_id: request_id.to_string() });
    let (b, rid) = (bus.clone(), request_id.to_string());
    let spawned = std::thread::Builder::new().name("session-turn".into()).spawn(move || {
        let outcome = match turn {
            Ok(turn) => turn.run(sink.clone(), cancel, &elicitations),
            Err(e) => {
                sink.emit(events::Event::Error(e.to_string()));
                reply::Outcome::Failed
            }
        };
        if outcome.failed() {
            sink.emit(events::Event::Finish(messages::Tokens::default()));
        }
        b.end(&rid);
        drop(done);
    });
    if let Err(e) = spawned {
        log::error!("session turn: cannot start a thread: {e}");
        bus.end(request_id);
        bus.publish(&events::Event::Error(format!("cannot start the turn: {e}")), request_id);
        bus.publish(&events::Event::Finish(messages::Tokens::default()), request_id);
    }
    Ok(())
}

#[derive(Default)]
pub struct Agents {
    runtimes: Mutex<HashMap<String, Arc<SessionRuntime>>>,
    /// Sessions with a turn running, whichever front end started it (`/reply`, the session
    /// API, ACP): one turn per session at a time, so two never write one conversation.
    running: Arc<Mutex<HashSet<String>>>,
}

/// Held by a running turn (see `Agents::begin_turn`); the session is free again on drop.
pub struct TurnGuard {
    running: Arc<Mutex<HashSet<String>>>,
    session: String,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.session);
    }
}

impl Agents {
    /// Marks a turn as running in `session`; `None` when one already runs there.
    pub fn begin_turn(&self, session: &str) -> Option<TurnGuard> {
        let fresh = lock(&self.running).insert(session.to_string());
        fresh.then(|| TurnGuard { running: self.running.clone(), session: session.to_string() })
    }

    pub fn get(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).get(id).cloned()
    }

    /// Every live session's runtime.
    pub fn all(&self) -> Vec<Arc<SessionRuntime>> {
        lock(&self.runtimes).values().cloned().collect()
    }

    /// Installs a runtime, returning the one it replaced (the caller shuts that down).
    pub fn insert(&self, rt: Arc<SessionRuntime>) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).insert(rt.session_id.clone(), rt)
    }

    pub fn remove(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        lock(&self.runtimes).remove(id)
    }

    /// Stops the extensions of every session unused for `idle` and with no turn running
    /// (`SessionRuntime::stop_if_idle`); their next use starts them again.
    pub fn stop_idle(&self, idle: std::time::Duration) {
        let all: Vec<_> = lock(&self.runtimes).values().cloned().collect();
        for rt in all {
            if lock(&self.running).contains(&rt.session_id) {
                continue;
            }
            rt.stop_if_idle(idle);
        }
    }

    /// Shuts every session's extensions down, in parallel.
    pub fn shutdown_all(&self) {
        let all: Vec<_> = lock(&self.runtimes).drain().map(|(_, rt)| rt).collect();
        let hs: Vec<_> = all.into_iter().map(|rt| std::thread::spawn(move || rt.shutdown())).collect();
        for h in hs {
            let _ = h.join(); // wait: shutdown is bounded by each extension's shutdown ladder
        }
    }
}
