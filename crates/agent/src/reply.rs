//! The agent turn loop: model → tool calls → MCP → model, streamed as typed `Event`s.
//!
//! One loop, two ways to watch it: `POST /reply` reads one turn's events from a bounded
//! channel, the session event stream reads them from the session's bus (`bus.rs`). The loop
//! runs on its own thread and emits into a `Sink`. Its cancel signal is a channel: a message
//! or a disconnect (the `/reply` client gone, `POST /sessions/{id}/cancel`) stops it — the
//! provider stream is dropped at its next chunk or silence poll, and in-flight tool calls are
//! cancelled with `notifications/cancelled`. Every message is saved to the session as it is
//! produced, so a crash loses at most the message being streamed; what the turn produces after
//! the person's message (answers, tool requests, tool results) is saved without waiting for
//! the disk (`Turn::save_deferred`), so a power loss can also lose that of the last ~200 ms,
//! never the person's message.

use crate::elicit::Elicitations;
use crate::events::{Event, Sink};
use crate::messages::{self as msg, Tokens, ToolCallError};
use crossbeam_channel::{bounded, select, Receiver};
use gosling_extensions::runtime::SessionRuntime;
use gosling_llm::{self as llm, ChatRequest, Delta, Provider, ToolSpec};
use gosling_mcp::client::CallContext;
use gosling_store::message::{Content, Message, NotificationKind, Role, SystemNotification};
use gosling_store::sessions::SessionStore;
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a tool call waits for the person's confirmation before it is declined.
const CONFIRM_WAIT: Duration = Duration::from_secs(30 * 60);

/// How long the model's request for tools may stay without its fdatasync while its calls run:
/// longer calls have it synced then, while they run (a long call's side effects should not
/// outlive the record of the request that made them); calls that end sooner leave it, and
/// their results, to the fdatasync after the turn (`Turn::save_deferred`). The same window as
/// the turn's answer (`usage::GROUP_WAIT`): a power loss can lose what the turn produced in
/// the last ~200 ms, never the person's message.
const SETTLE_AFTER: Duration = Duration::from_millis(200);

use crate::permissions::name_set;
pub use crate::permissions::{Confirmations, Mode, ALWAYS_ALLOWED, ALWAYS_DENIED};

pub struct Turn {
    pub session_id: String,
    pub runtime: Arc<SessionRuntime>,
    pub provider: Box<dyn Provider>,
    pub sessions: Arc<SessionStore>,
    pub confirmations: Arc<Confirmations>,
    pub mode: Mode,
    /// goose's per-tool permission levels (`always_allow`, `ask_before`, `never_allow`),
    /// stored under `permissions::TOOL_PERMISSIONS`.
    pub permissions: HashMap<String, String>,
    /// Tools allowed "always" in this session (`ALWAYS_ALLOWED`).
    always: Mutex<std::collections::HashSet<String>>,
    /// Tools refused "always" in this session (`ALWAYS_DENIED`).
    never: Mutex<std::collections::HashSet<String>>,
    pub max_turns: usize,
    /// The conversation before this turn, shared with the store's cache (not copied).
    earlier: Arc<Vec<Message>>,
    /// `earlier`'s lineage in the store: while it stays the same, a conversion of its first
    /// messages kept from an earlier turn is still theirs (`messages::take_converted`).
    lineage: gosling_store::sessions::Lineage,
    /// This turn's messages after `earlier`: the new user message, then what the turn adds.
    pub conversation: Vec<Message>,
    /// Keeps other turns out of this session while this one lives.
    _running: crate::agents::TurnGuard,
    /// The name this turn gave the session from its first message, and the session's
    /// `updated_at` then (for front ends that announce titles: ACP).
    pub titled: Option<(String, String)>,
    /// For a session's first exchange: the provider asked for a better title once the turn has
    /// answered, the first-message name and the first message (`agent::title`).
    model_title: Option<(Box<dyn Provider>, String, String)>,
    /// Told the model's title and the session's `updated_at` when it replaces the first-message
    /// name (for front ends that announce titles: ACP's `session_info_update`).
    pub on_model_title: Option<crate::title::OnTitle>,
    /// The system prompt (`agent::prompts`: the person's version, else the default).
    system: String,
    /// This turn's run: what front ends steer into (`agent::steer`).
    run: crate::steer::Run,
    /// The model's last answer stopped at its output limit (`length`, `max_tokens`).
    output_limit: bool,
    /// The session's token counts when the turn began (`usage::record` adds the turn's).
    counts: crate::usage::Base,
    /// Since when the turn has lines written without their fdatasync (`save_deferred`).
    unsynced_since: Mutex<Option<std::time::Instant>>,
}

/// The turn's cancel signal is the HTTP side dropping (or sending on) its sender.
fn is_cancelled(cancel: &Receiver<()>) -> bool {
    !matches!(cancel.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))
}

/// Emits the turn's events; false once nobody watches.
struct Out {
    sink: Arc<dyn Sink>,
    tokens: Tokens,
}

impl Out {
    fn message(&self, m: Message) -> bool {
        self.sink.emit(Event::Message { message: m, tokens: self.tokens })
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Finished (also after a cancel); `Finish` was emitted.
    Finished,
    /// Finished, the model's final answer cut at its output limit; `Finish` was emitted.
    OutputLimit,
    /// Failed; `Error` was emitted (no `Finish`).
    Failed,
    /// Stopped after `GOSLING_MAX_TURNS` model turns without a final answer; `Error` was
    /// emitted (no `Finish`).
    OutOfTurns,
}

impl Outcome {
    /// Whether the turn ended without `Finish` (the caller emits one).
    pub fn failed(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::OutOfTurns)
    }
}

/// Model turns per request before giving up (GOSLING_MAX_TURNS, default 25).
pub fn max_turns(setting: &dyn Fn(&str) -> Option<String>) -> usize {
    setting("GOSLING_MAX_TURNS").and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(25)
}

/// The stored per-tool permission levels (a malformed entry is ignored).
fn tool_permissions(settings: &TurnSettings) -> HashMap<String, String> {
    match settings.config.get(crate::permissions::TOOL_PERMISSIONS) {
        Some(Value::Object(m)) => m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
        _ => HashMap::new(),
    }
}

/// The settings a turn reads, taken once when it is prepared: `config.json` once (shared with
/// the store, which reads it again only when it changed: one `stat` while it does not), the
/// names in `secrets.json` once (and a secret's value only for a name that is there), where
/// each of the turn's fifteen-odd settings used to read both files under their locks.
/// Resolved as `Host::setting` resolves them: the environment's non-empty value, else the
/// stored plain value, else the stored secret.
struct TurnSettings<'a> {
    host: &'a crate::host::Host,
    config: Arc<serde_json::Map<String, Value>>,
    secret_names: std::cell::OnceCell<std::collections::HashSet<String>>,
}

impl<'a> TurnSettings<'a> {
    fn take(host: &'a crate::host::Host) -> TurnSettings<'a> {
        let config = host.store.config().unwrap_or_else(|e| {
            log::warn!("reply: cannot read the stored settings ({e}); the turn uses the environment's");
            Default::default()
        });
        TurnSettings { host, config, secret_names: std::cell::OnceCell::new() }
    }

    /// The environment first, then the stored value, then a stored secret (`Host::setting`'s
    /// order, by `config::settings::user_setting`).
    fn get(&self, key: &str) -> Option<String> {
        gosling_config::settings::user_setting(&gosling_config::ProcessEnv, key, || self.stored(key))
    }

    fn stored(&self, key: &str) -> Option<String> {
        match self.config.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => {
                let names = self
                    .secret_names
                    .get_or_init(|| self.host.store.secret_names().unwrap_or_default().into_iter().collect());
                if names.contains(key) {
                    self.host.store.get_secret(key).ok().flatten()
                } else {
                    None
                }
            }
            Some(other) => Some(other.to_string()),
        }
    }
}

/// A turn's error as the conversation keeps it: a notification the person sees and the model
/// does not (`agentVisible: false`), marked `goslingError`.
fn error_note(error: &str) -> Message {
    let note =
        SystemNotification { kind: NotificationKind::InlineMessage, msg: error.to_string(), extra: Default::default() };
    let mut m = Message::new(msg::new_id(), Role::Assistant, vec![Content::SystemNotification(note)]);
    m.metadata.agent_visible = false;
    m.metadata.error = true;
    m
}

impl Turn {
    /// The turn for a new user message: the session, its running agent, the model settings;
    /// the message is saved before the turn starts.
    pub fn prepare(
        host: &crate::host::Host,
        session_id: &str,
        user_message: Message,
        override_conversation: Option<Vec<Message>>,
    ) -> Result<Turn, crate::error::Error> {
        use crate::error::Error;
        let snapshot = TurnSettings::take(host);
        let setting = |k: &str| snapshot.get(k);
        // Asked before the session is read: a write of its counts that ends in between is in
        // what is read.
        let queued = crate::usage::queued_base(&host.sessions, session_id);
        let (session, stored, lineage) = host
            .sessions
            .get_shared(session_id)
            .map_err(Error::SaveMessage)?
            .ok_or_else(|| Error::SessionNotFound(session_id.to_string()))?;
        let runtime = host.agents.get(session_id).ok_or_else(|| Error::NoAgent(session_id.to_string()))?;
        let running = host.agents.begin_turn(session_id).ok_or_else(|| Error::Busy(session_id.to_string()))?;
        let model =
            session.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(Value::as_str).map(str::to_string);
        let resolved = llm::Settings::resolve(
            &gosling_config::ProcessEnv,
            &setting,
            (session.provider_name.as_deref(), model.as_deref()),
        )
        .and_then(|settings| llm::from_settings(&settings).map(|provider| (settings, provider)));
        let (always, never) = (name_set(&session, ALWAYS_ALLOWED), name_set(&session, ALWAYS_DENIED));
        let counts = queued.unwrap_or_else(|| crate::usage::Base::of(&session));
        // A new message is appended; an override rewrites the stored conversation.
        let first_text = user_message.text();
        let (earlier, conversation) = match override_conversation {
            Some(mut conversation) => {
                conversation.push(user_message);
                host.sessions.replace_conversation(session_id, &conversation).map_err(Error::SaveMessage)?;
                (Arc::new(Vec::new()), conversation)
            }
            None => {
                host.sessions.append_message(session_id, &user_message).map_err(Error::SaveMessage)?;
                (stored, vec![user_message])
            }
        };
        // No usable model: the message and why it got no answer stay in the conversation, as
        // the person saw them live.
        let (settings, provider) = match resolved {
            Ok(m) => m,
            Err(e) => {
                let r = host.sessions.append_message(session_id, &error_note(&e.to_string()));
                if let Err(s) = r {
                    log::error!("reply: cannot save the error of session {session_id}: {s}");
                }
                return Err(Error::Model(e));
            }
        };
        // The first message names the session at once; the model may improve on it later.
        // Later turns skip the look (it is a locked metadata write, two fsyncs, before the
        // model is asked).
        let first = earlier.iter().chain(&conversation).filter(|m| m.role == Role::User).count() <= 1;
        let titled =
            if first { crate::title::name_from_first_message(&host.sessions, session_id, &first_text) } else { None };
        let model_title = match &titled {
            Some((name, _)) if crate::title::model_titles(&setting) => {
                llm::from_settings(&settings).ok().map(|p| (p, name.clone(), first_text.clone()))
            }
            _ => None,
        };
        Ok(Turn {
            titled,
            model_title,
            on_model_title: None,
            session_id: session_id.to_string(),
            runtime,
            provider,
            sessions: host.sessions.clone(),
            confirmations: host.confirmations.clone(),
            mode: Mode::resolve(session.goose_mode.as_deref(), &setting),
            permissions: tool_permissions(&snapshot),
            always: Mutex::new(always),
            never: Mutex::new(never),
            max_turns: max_turns(&setting),
            earlier,
            lineage,
            conversation,
            _running: running,
            system: crate::prompts::text(&setting, &crate::prompts::SYSTEM),
            run: host.runs.begin(session_id),
            output_limit: false,
            counts,
            unsynced_since: Mutex::new(None),
        })
    }

    fn save(&self, m: &Message) {
        let r = self.sessions.append_message(&self.session_id, m);
        if let Err(e) = r {
            log::error!("reply: cannot save a message of session {}: {e}", self.session_id);
        }
    }

    /// Saves what the turn produced after the person's message — the model's answers, its
    /// requests for tools and their results — without waiting for its fdatasync
    /// (`SessionStore::append_message_deferred`): it is written before anyone hears of it (and
    /// before the model is asked again), and durable before the next turn asks the model — by
    /// the fsync of the next turn's message, or within `usage::GROUP_WAIT` after the turn, when
    /// its token counts are recorded in the metadata (which makes the lines it records durable
    /// first) — and a request for tools at once when its calls run past `SETTLE_AFTER` or the
    /// person is asked to allow one (`settle`). A power loss in between can lose that part of
    /// the turn (a request whose result was lost is answered as interrupted
    /// when the conversation goes to the model: `messages::pair_tool_traffic`); a crash of gosling cannot.
    fn save_deferred(&self, m: &Message) {
        lock(&self.unsynced_since).get_or_insert_with(std::time::Instant::now);
        let r = self.sessions.append_message_deferred(&self.session_id, m);
        if let Err(e) = r {
            log::error!("reply: cannot save a message of session {}: {e}", self.session_id);
        }
    }

    /// Makes durable what `save_deferred` left unsynced (nothing to do when nothing is): the
    /// model's request for tools, when its calls run longer than `SETTLE_AFTER` (the fdatasync
    /// then overlaps them; sooner, the one after the turn covers it with their results), before
    /// the person is asked to allow one, and before the model is asked again when what the turn
    /// left unsynced is older than `SETTLE_AFTER` (a turn of many quick steps).
    fn settle(&self) {
        *lock(&self.unsynced_since) = None;
        if let Err(e) = self.sessions.sync_conversation(&self.session_id) {
            log::error!("reply: cannot sync the conversation of session {}: {e}", self.session_id);
        }
    }

    /// An answer that stopped short (Stop, a dropped client, a model error mid-stream) is saved
    /// as far as it got, marked `goslingStopped` in its metadata, in its place in the
    /// conversation; watchers get the same mark on the message's id (its text reached them
    /// already). Nothing is saved when no text came.
    fn save_stopped(&mut self, reply_id: &str, partial: &str, out: &Out) {
        if partial.is_empty() {
            return;
        }
        let mut m = Message::new(reply_id, Role::Assistant, vec![Content::text(partial)]);
        m.metadata.stopped = true;
        self.save(&m);
        self.conversation.push(m);
        let mut mark = Message::new(reply_id, Role::Assistant, Vec::new());
        mark.metadata.stopped = true;
        out.message(mark);
    }

    /// A turn that failed keeps its error in the conversation, as shown live: a notification
    /// the person sees and the model does not (`agentVisible: false`), marked `goslingError`.
    fn save_error(&self, error: &str) {
        self.save(&error_note(error));
    }

    /// The id of this turn's run (ACP announces it as `activeRunId`; `session/steer` names it).
    pub fn run_id(&self) -> &str {
        self.run.id()
    }

    /// Adds the messages steered into the run to the conversation (saved, and streamed like
    /// every message); false when the client is gone.
    fn add_steered(&mut self, steered: Vec<Message>, out: &Out) -> bool {
        for m in steered {
            self.save(&m);
            if !out.message(m.clone()) {
                return false;
            }
            self.conversation.push(m);
        }
        true
    }

    fn system_prompt(&self) -> String {
        let mut s = self.system.clone();
        for (ext, instructions) in self.runtime.instructions() {
            s.push_str(&format!("\n\n## {ext}\n{instructions}"));
        }
        s
    }

    /// The tools offered to the model: made once from the session's list and kept while that
    /// list is the same (`SessionRuntime::tools_shared`), so a turn copies no schema.
    fn tool_specs(&self) -> Arc<Vec<ToolSpec>> {
        if self.mode == Mode::Chat {
            return Arc::default();
        }
        let listed = self.runtime.tools_shared();
        SPECS.get_or_insert_with(&listed, |listed| {
            let specs = listed.iter().map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.tool.description.clone().unwrap_or_default(),
                input_schema: gosling_extensions::runtime::input_schema(&t.tool),
            });
            Arc::new(specs.collect())
        })
    }

    /// Runs the loop; every failure ends as an Error event, a panic in the loop too (it is
    /// caught here, so a watcher always learns that the turn is over). Elicitations of the
    /// session's extensions go to the same sink while it runs.
    pub fn run(self, sink: Arc<dyn Sink>, cancel: Receiver<()>, elicitations: &Elicitations) -> Outcome {
        let (session_id, sessions) = (self.session_id.clone(), self.sessions.clone());
        let s = sink.clone();
        let run = std::panic::AssertUnwindSafe(move || self.run_unguarded(s, cancel, elicitations));
        std::panic::catch_unwind(run).unwrap_or_else(|p| {
            let what = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            log::error!("reply: the turn of session {session_id} panicked: {}", what.unwrap_or_default());
            // Its token counts are not recorded: what it saved deferred is synced here.
            if let Err(e) = sessions.sync_conversation(&session_id) {
                log::error!("reply: cannot sync the conversation of session {session_id}: {e}");
            }
            elicitations.unwatch(&session_id, &sink);
            sink.emit(Event::Error("internal error: the turn failed; see the server log".into()));
            Outcome::Failed
        })
    }

    fn run_unguarded(mut self, sink: Arc<dyn Sink>, cancel: Receiver<()>, elicitations: &Elicitations) -> Outcome {
        elicitations.watch(&self.session_id, sink.clone());
        let mut out = Out { sink: sink.clone(), tokens: Tokens::default() };
        let result = self.run_inner(&mut out, &cancel);
        // Steered messages the turn did not take (it was cancelled or failed) stay in the
        // conversation for the next turn.
        for m in self.run.close() {
            self.save(&m);
        }
        match &result {
            Err(e) => self.save_error(&e.to_string()),
            Ok(()) => self.ask_for_title(),
        }
        elicitations.unwatch(&self.session_id, &sink);
        self.record_tokens(&out.tokens);
        let session_id = self.session_id.clone();
        let output_limit = self.output_limit;
        // The session is free (and its tokens saved) before anyone learns the turn is over: a
        // client may send its next message as soon as it sees Finish.
        drop(self);
        match result {
            Ok(()) => {
                out.sink.emit(Event::Finish(out.tokens));
                if output_limit {
                    Outcome::OutputLimit
                } else {
                    Outcome::Finished
                }
            }
            Err(e) => {
                log::warn!("reply: session {session_id}: {e}");
                out.sink.emit(Event::Error(e.to_string()));
                match e {
                    super::Error::OutOfTurns(_) => Outcome::OutOfTurns,
                    _ => Outcome::Failed,
                }
            }
        }
    }

    /// After the first exchange: the model is asked for a title in the background, from the
    /// first message and the answer (not after a Stop: there is no whole answer).
    fn ask_for_title(&mut self) {
        let Some((provider, fallback, first)) = self.model_title.take() else { return };
        let last = self.conversation.last().or(self.earlier.last()).filter(|m| m.role == Role::Assistant);
        let stopped = last.is_some_and(|m| m.metadata.stopped);
        let answer = last.map(Message::text).unwrap_or_default();
        if stopped || answer.trim().is_empty() {
            return;
        }
        crate::title::spawn_model_title(
            provider,
            self.sessions.clone(),
            self.session_id.clone(),
            fallback,
            first,
            answer,
            self.on_model_title.take(),
        );
    }

    /// The turn's token counts go to the session's metadata on the writer thread, after the
    /// turn has answered (`usage::record`).
    fn record_tokens(&self, t: &Tokens) {
        crate::usage::record(&self.sessions, &self.session_id, *t, self.counts);
    }

    fn run_inner(&mut self, out: &mut Out, cancel: &Receiver<()>) -> Result<(), super::Error> {
        // One request for the whole reply: the conversation converted once, and each model
        // call adds only the messages since the last (the conversation only grows here, and
        // `to_llm` converts message by message). The earlier conversation's conversion is the
        // one the session's last turn kept, while its messages are still the conversation's
        // start (the same lineage), plus the messages stored since.
        let (mut messages, covered) = msg::take_converted(&self.session_id, self.lineage, self.earlier.len());
        // A kept conversion was kept only when pairing changed nothing in it: it pairs already.
        let paired = messages.len();
        messages.extend(msg::to_llm(&self.earlier[covered..]));
        let earlier = messages.len();
        let mut request =
            ChatRequest { system: self.system_prompt(), messages, tools: self.tool_specs(), max_tokens: None };
        let mut kept_whole = true;
        let result = self.steps(&mut request, (earlier, paired), &mut kept_whole, out, cancel);
        // Kept for the next turn, unless making calls and results pair changed it.
        if kept_whole {
            request.messages.truncate(earlier);
            msg::keep_converted(&self.session_id, self.lineage, self.earlier.len(), request.messages);
        }
        result
    }

    /// The turn's steps: a model call, the tools it asks for, again, until it answers. `request`
    /// begins with the earlier conversation's `earlier` messages, of which the first `paired`
    /// are known to pair; `kept_whole` is cleared when the earlier ones were changed
    /// (`msg::pair_tool_traffic`).
    fn steps(
        &mut self,
        request: &mut ChatRequest,
        (earlier, mut paired): (usize, usize),
        kept_whole: &mut bool,
        out: &mut Out,
        cancel: &Receiver<()>,
    ) -> Result<(), super::Error> {
        let mut converted = 0;
        // `paired`: the model's messages checked so far for calls and results that pair
        // (`msg::pair_tool_traffic`): the earlier conversation once, then what each step adds.
        // Tool results kept by this reply so far (see `bound_results`).
        let mut results_bytes = 0usize;
        for _ in 0..self.max_turns {
            // What was steered in while the tools ran.
            let steered = self.run.take();
            if !self.add_steered(steered, out) {
                return Ok(());
            }
            request.messages.extend(msg::to_llm(&self.conversation[converted..]));
            converted = self.conversation.len();
            if msg::pair_tool_traffic(&mut request.messages, paired).is_some_and(|at| at < earlier) {
                *kept_whole = false;
            }
            paired = request.messages.len();
            if lock(&self.unsynced_since).is_some_and(|t| t.elapsed() >= SETTLE_AFTER) {
                self.settle();
            }
            let reply_id = msg::new_id();
            let mut client_gone = false;
            // The text streamed so far: saved as far as it got when the answer stops short.
            let mut partial = String::new();
            let completion = {
                let mut on_delta = |d: Delta| -> bool {
                    if client_gone || is_cancelled(cancel) {
                        client_gone = true;
                        return false;
                    }
                    match d {
                        Delta::Text(t) => {
                            partial.push_str(t);
                            if !out.message(Message::new(&reply_id, Role::Assistant, vec![Content::text(t)])) {
                                client_gone = true;
                                return false;
                            }
                        }
                    }
                    true
                };
                // The cancel check also runs while the model is silent (waiting for the
                // first byte, between chunks, during a retry wait).
                let stop = cancel.clone();
                self.provider.complete_cancellable(
                    request,
                    &mut on_delta,
                    &llm::Cancel::new(move || is_cancelled(&stop)),
                )
            };
            let completion = match completion {
                Ok(c) if !client_gone => c,
                Ok(_) | Err(llm::Error::Cancelled) => {
                    self.save_stopped(&reply_id, &partial, out);
                    return Ok(());
                }
                Err(e) => {
                    self.save_stopped(&reply_id, &partial, out);
                    return Err(super::Error::Model(e));
                }
            };
            if let Some(u) = &completion.usage {
                out.tokens.input = u.input_tokens as i64;
                out.tokens.output = u.output_tokens as i64;
                out.tokens.acc_input += u.input_tokens as i64;
                out.tokens.acc_output += u.output_tokens as i64;
            }
            // The assistant message as stored: all its text, then its tool requests.
            let mut content = Vec::new();
            if !completion.text.is_empty() {
                content.push(Content::text(completion.text.as_str()));
            }
            let mut frontend = Vec::new();
            for call in &completion.tool_calls {
                let is_frontend = self.runtime.is_frontend_tool(&call.name);
                let c = match (&call.arguments, is_frontend) {
                    (Ok(args), true) => {
                        frontend.push(call.id.clone());
                        msg::frontend_tool_request(&call.id, &call.name, args)
                    }
                    _ => msg::tool_request(&call.id, &call.name, &call.arguments),
                };
                // Stream each request (the text was streamed already).
                if !out.message(Message::new(&reply_id, Role::Assistant, vec![c.clone()])) {
                    return Ok(());
                }
                content.push(c);
            }
            let assistant = Message::new(reply_id, Role::Assistant, content);
            self.save_deferred(&assistant);
            self.conversation.push(assistant);
            if !frontend.is_empty() {
                // The client must run a frontend tool and send its result in the next /reply.
                return Ok(());
            }
            if completion.tool_calls.is_empty() {
                self.output_limit = matches!(completion.stop_reason.as_deref(), Some("length" | "max_tokens"));
                // Done, unless a message was steered in meanwhile: the model answers it too.
                let steered = self.run.take_or_close();
                if steered.is_empty() || !self.add_steered(steered, out) {
                    return Ok(());
                }
                continue;
            }
            let responses = bound_results(self.run_tools(&completion.tool_calls, out, cancel), &mut results_bytes);
            if is_cancelled(cancel) {
                return Ok(());
            }
            // Written before the model is asked again, synced with the turn's answer (one
            // fdatasync after the turn, or the next message's): see `save_deferred`.
            let m = Message::new(msg::new_id(), Role::User, responses);
            self.save_deferred(&m);
            if !out.message(m.clone()) {
                return Ok(());
            }
            self.conversation.push(m);
        }
        Err(super::Error::OutOfTurns(self.max_turns))
    }

    /// Asks the user in approve modes; true when the call may run.
    fn approved(&self, call: &llm::ToolCallOut, out: &Out, cancel: &Receiver<()>) -> Result<bool, ()> {
        // The person's standing choices first: per tool (goose's tool permissions), then
        // "always" answered earlier in this session.
        let needs = match (self.permissions.get(&call.name).map(String::as_str), self.mode) {
            (Some("never_allow"), _) => {
                log::info!("reply: {} is set to never_allow; declined", call.name);
                return Ok(false);
            }
            (Some("always_allow"), _) => false,
            (Some("ask_before"), Mode::Auto | Mode::Approve | Mode::SmartApprove) => true,
            (_, Mode::Auto | Mode::Chat) => false,
            (_, Mode::Approve) => true,
            (_, Mode::SmartApprove) => !self.read_only(&call.name),
        };
        if !needs || lock(&self.always).contains(&call.name) {
            return Ok(true);
        }
        if lock(&self.never).contains(&call.name) {
            log::info!("reply: {} was refused \"always\" in this session; declined", call.name);
            return Ok(false);
        }
        let args = call.arguments.clone().unwrap_or_else(|_| json!({}));
        self.settle();
        let rx = self.confirmations.wait_for(&call.id);
        let m = Message::new(msg::new_id(), Role::Assistant, vec![msg::tool_confirmation(&call.id, &call.name, &args)]);
        if !out.message(m) {
            self.confirmations.forget(&call.id);
            return Err(());
        }
        let decision = select! {
            recv(rx) -> a => a.unwrap_or_default(),
            recv(cancel) -> _ => { self.confirmations.forget(&call.id); return Err(()); },
            default(CONFIRM_WAIT) => {
                self.confirmations.forget(&call.id);
                log::info!("reply: no confirmation for {} within {CONFIRM_WAIT:?}; declined", call.name);
                "deny_once".to_string()
            }
        };
        match decision.as_str() {
            "always_allow" => self.keep(&self.always, ALWAYS_ALLOWED, &call.name),
            "always_deny" => self.keep(&self.never, ALWAYS_DENIED, &call.name),
            _ => {}
        }
        Ok(matches!(decision.as_str(), "allow_once" | "always_allow"))
    }

    /// Adds `tool` to one of the session's standing answers and keeps the list with the session.
    fn keep(&self, set: &Mutex<std::collections::HashSet<String>>, key: &str, tool: &str) {
        if !lock(set).insert(tool.to_string()) {
            return;
        }
        let list: Vec<String> = lock(set).iter().cloned().collect();
        let r = self.sessions.update_meta(&self.session_id, |s| {
            s.extra.insert(key.into(), json!(list));
        });
        if let Err(e) = r {
            log::warn!("reply: cannot keep the standing answer for {tool} in session {}: {e}", self.session_id);
        }
    }

    fn read_only(&self, prefixed: &str) -> bool {
        self.runtime.tools_shared().iter().find(|t| t.name == prefixed).is_some_and(|t| t.tool.read_only())
    }

    /// Runs the calls (in parallel), forwarding progress as Notification events.
    fn run_tools(&self, calls: &[llm::ToolCallOut], out: &Out, cancel: &Receiver<()>) -> Vec<Content> {
        let mut slots: Vec<Option<Content>> = calls.iter().map(|_| None).collect();
        let mut running = Vec::new();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        // Cancel fan-out: each call gets its own receiver, closed when the turn is cancelled.
        let mut cancel_senders = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let args = match &call.arguments {
                Ok(a) => a.clone(),
                Err(bad) => {
                    slots[i] = Some(msg::tool_error(&call.id, &ToolCallError::invalid_params(bad.to_string())));
                    continue;
                }
            };
            match self.approved(call, out, cancel) {
                Ok(true) => {}
                Ok(false) => {
                    slots[i] = Some(msg::tool_response(&call.id, Err("the user declined to run this tool".into())));
                    continue;
                }
                Err(()) => return Vec::new(),
            }
            let (ctx_cancel_tx, ctx_cancel_rx) = bounded::<()>(1);
            cancel_senders.push(ctx_cancel_tx);
            let (ptx, prx) = bounded::<Value>(64);
            let rt = self.runtime.clone();
            let name = call.name.clone();
            let args = if args.is_object() { Some(args) } else { None };
            let (k, done) = (running.len(), done_tx.clone());
            let spawned = spawn_call(k, done, move || {
                let ctx = CallContext { progress: Some(ptx), cancel: Some(ctx_cancel_rx) };
                rt.call_tool(&name, args, &ctx)
            });
            if let Err(e) = spawned {
                let why = ToolCallError::internal(format!("cannot start a thread for the tool call: {e}"));
                slots[i] = Some(msg::tool_error(&call.id, &why));
                continue;
            }
            running.push((i, call.id.clone(), Some(prx)));
        }
        drop(done_tx);
        // Asleep until a call sends progress, a call ends or the turn is cancelled: the answer
        // is picked up the moment it comes, with no polling period. The request for these
        // tools (saved deferred) is made durable after the turn with their results — or, when
        // the calls are still running `SETTLE_AFTER` from now, then (`settle`).
        let mut settle_at = Some(std::time::Instant::now() + SETTLE_AFTER);
        let mut results: Vec<Option<Called>> = running.iter().map(|_| None).collect();
        let mut left = running.len();
        let mut cancel_open = true;
        while left > 0 {
            let mut sel = crossbeam_channel::Select::new();
            let mut progress = Vec::new();
            for (k, (_, _, prx)) in running.iter().enumerate() {
                if let Some(prx) = prx {
                    progress.push((sel.recv(prx), k));
                }
            }
            let done_op = sel.recv(&done_rx);
            let cancel_op = if cancel_open { Some(sel.recv(cancel)) } else { None };
            let op = match settle_at {
                Some(at) => match sel.select_deadline(at) {
                    Ok(op) => op,
                    Err(_) => {
                        self.settle();
                        settle_at = None;
                        continue;
                    }
                },
                // wait: every call ends: each MCP request has its own timeout, and a cancel ends it sooner
                None => sel.select(),
            };
            let index = op.index();
            if index == done_op {
                match op.recv(&done_rx) {
                    Ok((k, r)) => {
                        // What progress the call sent before it ended goes out first.
                        if let Some(prx) = running[k].2.take() {
                            while let Ok(p) = prx.try_recv() {
                                emit_progress(out, &running[k].1, p);
                            }
                        }
                        results[k] = Some(r);
                        left -= 1;
                    }
                    // Every call thread is gone (each sends its outcome, a panic included).
                    Err(_) => break,
                }
            } else if Some(index) == cancel_op {
                // A message or a disconnect: either way the turn is cancelled. Dropping the
                // senders disconnects each call's cancel receiver.
                let _ = op.recv(cancel);
                cancel_senders.clear();
                cancel_open = false;
            } else if let Some(&(_, k)) = progress.iter().find(|(o, _)| *o == index) {
                let prx = running[k].2.as_ref().expect("selected only while open");
                match op.recv(prx) {
                    Ok(p) => emit_progress(out, &running[k].1, p),
                    Err(_) => running[k].2 = None,
                }
            }
        }
        for ((i, id, _), r) in running.into_iter().zip(results) {
            slots[i] = Some(call_outcome(&id, r));
        }
        slots.into_iter().flatten().collect()
    }
}

/// What a tool call's thread computes.
type CallResult = Result<gosling_wire::mcp_types::CallToolResult, gosling_extensions::Error>;

/// How a tool call's thread ended.
enum Called {
    Done(Box<CallResult>),
    Panicked,
}

/// The model's view of each session's current tool list (`Turn::tool_specs`), made once per
/// list and kept while the list lives (each runtime keeps its current one): room for more
/// sessions than turn at once.
static SPECS: gosling_util::PerArc<Vec<gosling_extensions::runtime::SessionTool>, Arc<Vec<ToolSpec>>> =
    gosling_util::PerArc::new(64);

/// The threads tool calls run on, kept between calls (a thread started per call cost a
/// `clone`, a stack mapped and unmapped and the thread's set-up on every tool turn); one ends
/// after a minute without a call.
static CALLS: gosling_util::Workers = gosling_util::Workers::new("tool-call", Duration::from_secs(60));

/// Runs one tool call on a kept thread named `tool-call`, which sends `(k, how it ended)` on
/// `done` — a panic in the call included, as `Called::Panicked`, so the turn never waits for a
/// call that is gone.
fn spawn_call(
    k: usize,
    done: crossbeam_channel::Sender<(usize, Called)>,
    call: impl FnOnce() -> CallResult + Send + 'static,
) -> std::io::Result<()> {
    CALLS.run(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
        let _ = done.send((k, r.map_or(Called::Panicked, |r| Called::Done(Box::new(r)))));
    })
}

/// The tool response a call's outcome makes: its result, its error, or the panic named.
fn call_outcome(id: &str, r: Option<Called>) -> Content {
    match r {
        Some(Called::Done(r)) => match *r {
            Ok(r) => msg::tool_response(id, Ok(r)),
            Err(e) => msg::tool_error(id, &ToolCallError::internal(e.to_string())),
        },
        Some(Called::Panicked) => msg::tool_error(id, &ToolCallError::internal("the tool call panicked in gosling")),
        None => msg::tool_error(id, &ToolCallError::internal("the tool call ended without an answer")),
    }
}

/// A call's progress notification as the turn's `Notification` event.
fn emit_progress(out: &Out, id: &str, p: Value) {
    let method = p.get("method").and_then(Value::as_str).unwrap_or("notifications/progress").to_string();
    let params = p.get("params").cloned().unwrap_or(p.clone());
    out.sink.emit(Event::Notification { request_id: id.to_string(), method, params });
}

/// The most tool-result JSON one reply keeps (every turn's together). Each result is already
/// bounded by the MCP client (8 MiB); this bounds their sum, so whatever extensions send, a reply
/// holds at most this much of it (and the model request built from it a copy).
pub const MAX_REPLY_RESULT_BYTES: usize = 16 << 20;

/// Keeps tool responses while their total stays within `MAX_REPLY_RESULT_BYTES`; a response
/// past it is replaced by an error the model reads (so it can ask for less).
fn bound_results(responses: Vec<Content>, used: &mut usize) -> Vec<Content> {
    responses
        .into_iter()
        .map(|r| {
            let len = serde_json::to_vec(&r).map_or(usize::MAX, |b| b.len());
            if used.saturating_add(len) <= MAX_REPLY_RESULT_BYTES {
                *used += len;
                return r;
            }
            let id = match &r {
                Content::ToolResponse(t) => t.id.as_str(),
                _ => "",
            };
            msg::tool_response(
                id,
                Err(format!(
                    "the tool's result ({len} bytes) was dropped: this reply's tool results would exceed {} MiB, \
                     the most gosling keeps for one reply; ask for less (a narrower query, a range, a summary)",
                    MAX_REPLY_RESULT_BYTES >> 20
                )),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_wire::mcp_types::CallToolResult;

    #[test]
    fn a_panicking_tool_call_is_reported_as_a_panic_on_a_named_thread() {
        let (tx, rx) = crossbeam_channel::unbounded();
        spawn_call(3, tx, || {
            assert_eq!(std::thread::current().name(), Some("tool-call"));
            panic!("a bug in the call's code")
        })
        .unwrap();
        let (k, how) = rx.recv_timeout(Duration::from_secs(10)).expect("the call's thread reports its end");
        assert_eq!(k, 3);
        assert!(matches!(how, Called::Panicked));
        // The panic was caught on the call's thread, which is kept for the next call.
        let (tx2, rx2) = crossbeam_channel::unbounded();
        spawn_call(4, tx2, || Ok(CallToolResult::text("after", false))).unwrap();
        let (k, next) = rx2.recv_timeout(Duration::from_secs(10)).expect("the next call runs");
        assert_eq!(k, 4);
        assert!(matches!(&next, Called::Done(r) if r.is_ok()));
        let reported = serde_json::to_string(&call_outcome("call-1", Some(how))).unwrap();
        assert!(reported.contains("panicked in gosling") && reported.contains("-32603"), "{reported}");
        assert!(reported.contains("call-1"), "{reported}");
    }

    #[test]
    fn tool_results_of_one_reply_are_bounded_in_total() {
        let big = |id: &str| msg::tool_response(id, Ok(CallToolResult::text("x".repeat(6 << 20), false)));
        let result = |c: &Content| match c {
            Content::ToolResponse(r) => (r.id.clone(), r.result.clone().map(|_| ())),
            other => panic!("{other:?}"),
        };
        let mut used = 0;
        let kept: Vec<_> = bound_results(vec![big("a"), big("b"), big("c")], &mut used).iter().map(result).collect();
        assert_eq!(kept[0], ("a".to_string(), Ok(())));
        assert_eq!(kept[1], ("b".to_string(), Ok(())));
        let (id, dropped) = &kept[2];
        assert!(id == "c" && dropped.as_ref().unwrap_err().contains("16 MiB"), "{kept:?}");
        assert!(used <= MAX_REPLY_RESULT_BYTES);
        // The budget spans the reply's turns.
        assert!(result(&bound_results(vec![big("d")], &mut used)[0]).1.is_err());
    }
}
