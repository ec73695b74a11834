//! A session's model and what it uses of it, for every front end: the provider and model
//! recorded on a session when it is created (as goose records them: a session keeps the model it
//! was started with until someone changes it), the tokens one turn used (ACP's
//! `PromptResponse.usage`), and the context meter (how much of the model's context window the
//! conversation fills, with the window from `llm::catalog`: goose's `usage_update` and ACP's).

use crate::host::Host;
use crate::messages::Tokens;
use crate::Error;
use gosling_store::sessions::{Session, SessionStore};
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The provider and model a session runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionModel {
    /// The canonical provider name (`openai`, `anthropic`, `ollama`).
    pub provider: String,
    pub model: String,
}

/// The tokens one turn used: every model call of it added up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnUsage {
    pub input: u64,
    pub output: u64,
}

impl TurnUsage {
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

impl From<&Tokens> for TurnUsage {
    /// A turn's tokens as its `Finish` event reports them (the `acc_*` counts are the turn's).
    fn from(t: &Tokens) -> TurnUsage {
        TurnUsage { input: t.acc_input.max(0) as u64, output: t.acc_output.max(0) as u64 }
    }
}

/// The context meter of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Meter {
    /// Tokens in the context at the last model call (its input and its answer).
    pub used: u64,
    /// The model's context window; 0 when gosling does not know the model (no guess).
    pub context_limit: u64,
    /// Every turn's tokens, added up over the session's life.
    pub accumulated_input: u64,
    pub accumulated_output: u64,
}

/// Reads one setting (`Host::setting`: the environment's non-credential keys, then the store).
pub type Setting<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The provider and model the settings name (`GOOSE_PROVIDER`, `GOOSE_MODEL`, else the
/// provider's default model); `None` while no provider gosling runs is set.
pub fn defaults(setting: Setting) -> Option<SessionModel> {
    let provider = gosling_llm::canonical_provider(&setting("GOOSE_PROVIDER")?)?;
    let model = setting("GOOSE_MODEL")
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .or_else(|| gosling_llm::catalog::find(provider).map(|p| p.default_model.to_string()))?;
    Some(SessionModel { provider: provider.to_string(), model })
}

/// The provider and model `s` runs with: its own, else the settings'.
pub fn of(setting: Setting, s: &Session) -> Option<SessionModel> {
    let model = s.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(Value::as_str);
    let provider = s.provider_name.as_deref().and_then(gosling_llm::canonical_provider);
    match (provider, model) {
        (Some(p), Some(m)) => Some(SessionModel { provider: p.to_string(), model: m.to_string() }),
        _ => {
            let d = defaults(setting)?;
            Some(SessionModel {
                provider: provider.map_or(d.provider, str::to_string),
                model: model.map_or(d.model, str::to_string),
            })
        }
    }
}

/// Gives a new session `s` the provider and model the settings name, where it has none of its
/// own yet. False when nothing changed (it has its own, or no provider is set: the session
/// takes the settings' when its first turn runs).
pub fn take_model(setting: Setting, s: &mut Session) -> bool {
    if s.provider_name.is_some() && s.model_config.is_some() {
        return false;
    }
    let Some(m) = of(setting, s) else { return false };
    s.provider_name.get_or_insert(m.provider);
    s.model_config.get_or_insert_with(|| json!({ "model_name": m.model }));
    true
}

/// Records on new session `s` the settings' provider and model (`take_model`), in the store
/// and in `s`.
pub fn record_model(host: &Host, s: &mut Session) -> Result<(), Error> {
    let setting = |k: &str| host.setting(k);
    let mut taken = Session::default();
    (taken.provider_name, taken.model_config) = (s.provider_name.clone(), s.model_config.clone());
    if !take_model(&setting, &mut taken) {
        return Ok(());
    }
    let (provider, model) = (taken.provider_name.clone(), taken.model_config.clone());
    host.sessions
        .update_meta(&s.id, |s| {
            s.provider_name = provider;
            s.model_config = model;
        })
        .map_err(Error::Store)?
        .ok_or_else(|| Error::SessionNotFound(s.id.clone()))?;
    (s.provider_name, s.model_config) = (taken.provider_name, taken.model_config);
    Ok(())
}

/// The context meter of session `s`; `last`: the tokens of the turn that just finished, when
/// the store may not hold them yet.
pub fn meter_of(setting: Setting, s: &Session, last: Option<&Tokens>) -> Meter {
    // A turn stopped before the model answered leaves the meter where it was.
    let used = match last.filter(|t| t.input + t.output > 0) {
        Some(t) => t.input + t.output,
        None => s.total_tokens.unwrap_or(0),
    };
    let acc = |stored: Option<i64>, turn: Option<i64>| stored.or(turn).unwrap_or(0).max(0) as u64;
    let context_limit =
        of(setting, s).and_then(|m| gosling_llm::catalog::context_limit(Some(&m.provider), &m.model)).unwrap_or(0);
    Meter {
        used: used.max(0) as u64,
        context_limit,
        accumulated_input: acc(s.accumulated_input_tokens, last.map(|t| t.acc_input)),
        accumulated_output: acc(s.accumulated_output_tokens, last.map(|t| t.acc_output)),
    }
}

/// Whether the person's images may be sent in session `id`: `Err` says why not (its provider
/// is not sent images, or it has none yet) and what to do.
pub fn images(host: &Host, id: &str) -> Result<(), String> {
    let s = host.sessions.get_meta(id).ok().flatten();
    let model = s.as_ref().and_then(|s| of(&|k| host.setting(k), s));
    match model {
        Some(m) if gosling_llm::catalog::takes_images(&m.provider) => Ok(()),
        Some(m) => Err(format!(
            "the session's provider {} is not sent images (its models may not read them); send text, or switch the session to openai or anthropic",
            m.provider
        )),
        None => Err("the session has no provider yet, so no image can be sent; set GOOSE_PROVIDER".into()),
    }
}

/// Session `id`'s context meter (`meter_of`): the store's counts, or what the writes still
/// queued (`record`) will make them — the meter of a turn that just ended waits for no disk.
pub fn meter(host: &Host, id: &str, last: Option<&Tokens>) -> Result<Meter, Error> {
    let mut s =
        host.sessions.get_meta(id).map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.to_string()))?;
    with_queued(&host.sessions, &mut s);
    Ok(meter_of(&|k| host.setting(k), &s, last))
}

/// Session `s` as read from the store, with the token counts of the writes still queued for
/// it (`record`): what this process's readers see the moment a turn has ended.
pub fn with_queued(sessions: &SessionStore, s: &mut Session) {
    if let Some(q) = lock(queued()).get(&(sessions.dir().to_path_buf(), s.id.clone())) {
        q.counts.put(s);
    }
}

/// A session's token counts as a turn found them when it began, with what the writes queued
/// then will add (`with_queued`): what `record` adds the turn's tokens to when no write is
/// queued by the time it ends, so recording reads no file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Base(Counts);

/// The `Base` of session `id` while a write of its counts is queued or under way; `None`: the
/// store's counts are the base (`Base::of` the session read after this was asked, so a write
/// that ends in between is in them).
pub fn queued_base(sessions: &SessionStore, id: &str) -> Option<Base> {
    lock(queued()).get(&(sessions.dir().to_path_buf(), id.to_string())).map(|q| Base(q.counts))
}

impl Base {
    pub fn of(s: &Session) -> Base {
        Base(Counts::of(s))
    }
}

/// A session's token counts (goose's fields of `Session`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counts {
    /// The last model call's (`input_tokens`, `output_tokens`); `None`: none recorded.
    last: Option<(i64, i64)>,
    acc_input: i64,
    acc_output: i64,
}

impl Counts {
    fn of(s: &Session) -> Counts {
        Counts {
            last: s.input_tokens.zip(s.output_tokens),
            acc_input: s.accumulated_input_tokens.unwrap_or(0),
            acc_output: s.accumulated_output_tokens.unwrap_or(0),
        }
    }

    /// These counts after turn `t` (one that stopped before the model answered keeps the
    /// last call's).
    fn after(self, t: &Tokens) -> Counts {
        Counts {
            last: if t.input + t.output > 0 { Some((t.input, t.output)) } else { self.last },
            acc_input: self.acc_input + t.acc_input,
            acc_output: self.acc_output + t.acc_output,
        }
    }

    fn put(&self, s: &mut Session) {
        if let Some((i, o)) = self.last {
            (s.input_tokens, s.output_tokens, s.total_tokens) = (Some(i), Some(o), Some(i + o));
        }
        s.accumulated_input_tokens = Some(self.acc_input);
        s.accumulated_output_tokens = Some(self.acc_output);
        s.accumulated_total_tokens = Some(self.acc_input + self.acc_output);
    }
}

/// How long a turn's token counts wait for those of the turns that end after it: the turns that
/// end within it are written as one (each write creates and fsyncs a file: most of what a turn
/// costs the machine when turns follow each other, BENCHMARKS.md). A deadline, not a period:
/// with no turn, nothing waits.
const GROUP_WAIT: Duration = Duration::from_millis(200);

/// Token counts of a session not yet on disk, per (state dir, session): the counts the session
/// will have once every recorded turn is written, what the turns since the last write began
/// add, and the writes queued or under way.
struct Queued {
    counts: Counts,
    /// The unwritten turns' tokens summed (the last model call's as `input`/`output`).
    unwritten: Tokens,
    /// A write is queued; it takes `unwritten` when it begins.
    queued: bool,
    /// Writes begun and not yet done.
    writing: usize,
}

type QueuedKey = (std::path::PathBuf, String);

fn queued() -> &'static Mutex<HashMap<QueuedKey, Queued>> {
    static QUEUED: OnceLock<Mutex<HashMap<QueuedKey, Queued>>> = OnceLock::new();
    QUEUED.get_or_init(Default::default)
}

/// `a` then `b`, as one turn: the tokens summed, the last model call's kept.
fn then(a: Tokens, b: &Tokens) -> Tokens {
    let called = b.input + b.output > 0;
    Tokens {
        input: if called { b.input } else { a.input },
        output: if called { b.output } else { a.output },
        acc_input: a.acc_input + b.acc_input,
        acc_output: a.acc_output + b.acc_output,
    }
}

/// Adds turn `t`'s tokens to session `id`'s counts: written to its metadata on the session
/// writer (`crate::later`) `GROUP_WAIT` after the turn, with the turns that ended meanwhile,
/// without keeping the session's lock through the fsyncs (`update_meta_optimistic`), so
/// neither the answer nor the next turn waits for the disk; `meter` and the session's readers
/// in this process see them at once (`with_queued`), from `base` when nothing was queued since
/// it was read. Each write adds its turns' tokens to what the metadata holds then, so turns of
/// other processes in the same session are summed too (on disk; this process's readers see
/// them once the write is done).
/// The write also makes the turn's answer durable (saved without its fsync,
/// `reply::Turn::save_deferred`: the store syncs the lines a metadata write records first). A
/// kill can lose the counts of the last turns, never a message; a power loss those counts and
/// an answer not yet synced (the person's messages are synced before the model is asked); a
/// shutdown writes them (`later::flush`).
pub fn record(sessions: &Arc<SessionStore>, id: &str, t: Tokens, base: Base) {
    let key = (sessions.dir().to_path_buf(), id.to_string());
    // With nothing queued or being written, the counts the turn began with are the base: a
    // write queued before it began is in them (`base`), and one done since wrote them.
    let schedule = {
        let mut q = lock(queued());
        match q.get_mut(&key) {
            Some(e) => {
                (e.counts, e.unwritten) = (e.counts.after(&t), then(e.unwritten, &t));
                !std::mem::replace(&mut e.queued, true)
            }
            None => {
                q.insert(key.clone(), Queued { counts: base.0.after(&t), unwritten: t, queued: true, writing: 0 });
                true
            }
        }
    };
    if !schedule {
        return;
    }
    let (sessions, id, due) = (sessions.clone(), id.to_string(), std::time::Instant::now() + GROUP_WAIT);
    crate::later::run(Box::new(move || {
        // The group's deadline (the turns that end before it join this write), then the write.
        std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        let unwritten = {
            let mut q = lock(queued());
            let Some(e) = q.get_mut(&key) else { return };
            (e.queued, e.writing) = (false, e.writing + 1);
            std::mem::take(&mut e.unwritten)
        };
        let r = sessions.update_meta_optimistic(&id, |s| Counts::of(s).after(&unwritten).put(s));
        if let Err(e) = r {
            log::warn!("usage: cannot save the token counts of session {id}: {e}");
        }
        let mut q = lock(queued());
        if let Some(e) = q.get_mut(&key) {
            e.writing -= 1;
            if e.writing == 0 && !e.queued {
                // On disk now (or failed: the store's counts are the truth again).
                q.remove(&key);
            }
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_new_session_takes_the_settings_model_and_keeps_it() {
        let mut s = Session::default();
        assert!(take_model(&settings(&[("GOOSE_PROVIDER", "OpenAI"), ("GOOSE_MODEL", "gpt-4o")]), &mut s));
        assert_eq!(s.provider_name.as_deref(), Some("openai"));
        assert_eq!(s.model_config, Some(json!({ "model_name": "gpt-4o" })));
        // Later settings change neither the session nor its window.
        let later = settings(&[("GOOSE_PROVIDER", "anthropic"), ("GOOSE_MODEL", "claude-haiku-4-5")]);
        assert!(!take_model(&later, &mut s));
        assert_eq!(of(&later, &s).unwrap().model, "gpt-4o");
        assert_eq!(meter_of(&later, &s, None), Meter { used: 0, context_limit: 128_000, ..Meter::default() });
        // A session with its own model only takes the provider.
        let mut own = Session { model_config: Some(json!({ "model_name": "o3" })), ..Session::default() };
        assert!(take_model(&later, &mut own));
        assert_eq!(
            (own.provider_name.as_deref(), meter_of(&later, &own, None).context_limit),
            (Some("anthropic"), 200_000)
        );
    }

    #[test]
    fn without_a_provider_nothing_is_taken_and_an_unknown_model_has_no_window() {
        let mut s = Session::default();
        assert!(!take_model(&settings(&[]), &mut s));
        assert!(!take_model(&settings(&[("GOOSE_PROVIDER", "nobody"), ("GOOSE_MODEL", "x")]), &mut s));
        assert_eq!((s.provider_name.as_deref(), s.model_config.as_ref()), (None, None));
        assert_eq!(meter_of(&settings(&[]), &s, None).context_limit, 0);
        // No model set: the provider's default.
        assert_eq!(defaults(&settings(&[("GOOSE_PROVIDER", "ollama")])).unwrap().model, "qwen3");
        let unknown = settings(&[("GOOSE_PROVIDER", "openai"), ("GOOSE_MODEL", "my-finetune")]);
        assert_eq!(meter_of(&unknown, &s, None).context_limit, 0);
    }

    #[test]
    fn queued_counts_add_each_turn_and_a_turn_without_a_call_keeps_the_last_calls() {
        let stored = Session {
            input_tokens: Some(5),
            output_tokens: Some(2),
            accumulated_input_tokens: Some(40),
            ..Session::default()
        };
        let one = Tokens { input: 100, output: 10, acc_input: 300, acc_output: 30 };
        let stopped = Tokens { acc_input: 7, ..Tokens::default() };
        let c = Counts::of(&stored).after(&one).after(&stopped);
        assert_eq!(c, Counts { last: Some((100, 10)), acc_input: 347, acc_output: 30 });
        let mut s = Session::default();
        c.put(&mut s);
        assert_eq!((s.input_tokens, s.output_tokens, s.total_tokens), (Some(100), Some(10), Some(110)));
        assert_eq!(
            (s.accumulated_input_tokens, s.accumulated_output_tokens, s.accumulated_total_tokens),
            (Some(347), Some(30), Some(377))
        );
        // Nothing recorded yet and a turn stopped before any call: the last call's stay unset.
        let mut s = Session::default();
        Counts::of(&Session::default()).after(&stopped).put(&mut s);
        assert_eq!((s.total_tokens, s.accumulated_total_tokens), (None, Some(7)));
    }

    #[test]
    fn a_turns_tokens_fill_the_meter_and_the_usage() {
        let s = Session { accumulated_input_tokens: Some(1000), total_tokens: Some(7), ..Session::default() };
        let none = settings(&[]);
        assert_eq!(meter_of(&none, &s, None).used, 7);
        let t = Tokens { input: 100, output: 10, acc_input: 300, acc_output: 30 };
        let m = meter_of(&none, &s, Some(&t));
        // The store's totals (the session's life) win over the turn's.
        assert_eq!((m.used, m.accumulated_input, m.accumulated_output), (110, 1000, 30));
        assert_eq!(TurnUsage::from(&t), TurnUsage { input: 300, output: 30 });
        assert_eq!(TurnUsage::from(&t).total(), 330);
        // A turn cancelled before the model answered: the meter stays.
        assert_eq!(meter_of(&none, &s, Some(&Tokens::default())).used, 7);
    }
}
