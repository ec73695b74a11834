//! Steering a running turn, for every front end (goose's `session/steer`: Desktop sends what the
//! person types while the agent works). Each turn is a run with an id, which front ends announce
//! (ACP's `_meta.goose.activeRunId`); a message steered into the run is queued, and the turn's
//! loop adds it to the conversation before its next model call: after the tool results it
//! waits for, or — when the model has just given its final answer — for one more answer. A run
//! takes messages until its turn closes it; nothing queued is lost (a run that ends with
//! messages it did not take saves them in the conversation, for the next turn).

use crate::Error;
use gosling_store::message::{Content, Message, Role};
use gosling_util::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most messages queued in one run (a client that floods a run is refused).
pub const MAX_QUEUED: usize = 32;

/// The active run of each session with a turn running.
#[derive(Default)]
pub struct Runs {
    active: Mutex<HashMap<String, Active>>,
}

struct Active {
    id: String,
    queue: Vec<Message>,
}

/// A message steered into a run.
#[derive(Debug, PartialEq)]
pub struct Steered {
    pub run_id: String,
    pub message_id: String,
}

/// A turn's run, held by the turn: closed when dropped.
pub struct Run {
    runs: Arc<Runs>,
    session: String,
    id: String,
}

impl Runs {
    /// Starts the run of a new turn in `session` (one turn runs per session at a time).
    pub fn begin(self: &Arc<Self>, session: &str) -> Run {
        let id = format!("run_{}", gosling_util::random_hex(16));
        lock(&self.active).insert(session.to_string(), Active { id: id.clone(), queue: Vec::new() });
        Run { runs: self.clone(), session: session.to_string(), id }
    }

    /// The id of `session`'s active run.
    pub fn active(&self, session: &str) -> Option<String> {
        lock(&self.active).get(session).map(|a| a.id.clone())
    }

    /// Queues a user message with `content` for `session`'s run `expected` (the id the front
    /// end was told: a steer meant for a run that has ended is refused, not sent to the next).
    pub fn steer(&self, session: &str, expected: &str, content: Vec<Content>) -> Result<Steered, Error> {
        if content.is_empty() {
            return Err(Error::Steer("the steered message is empty; send at least one text block".into()));
        }
        let mut active = lock(&self.active);
        let run = active.get_mut(session).ok_or_else(|| {
            Error::Steer(format!("no active run to steer in session {session}: send the message as a new prompt"))
        })?;
        if run.id != expected {
            return Err(Error::Steer(format!(
                "run {expected:?} is not the active run of session {session} (it is {:?}): steer the active run, or send a new prompt",
                run.id
            )));
        }
        if run.queue.len() >= MAX_QUEUED {
            return Err(Error::Steer(format!(
                "run {expected} already has {MAX_QUEUED} steered messages waiting; wait for the agent to take them"
            )));
        }
        let message = Message::new(crate::messages::new_id(), Role::User, content);
        let message_id = message.id.clone().unwrap_or_default();
        run.queue.push(message);
        Ok(Steered { run_id: run.id.clone(), message_id })
    }
}

impl Run {
    pub fn id(&self) -> &str {
        &self.id
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Active>) -> R) -> R {
        f(&mut lock(&self.runs.active))
    }

    /// The messages steered in since the last take, in order.
    pub fn take(&self) -> Vec<Message> {
        self.with(|m| match m.get_mut(&self.session).filter(|a| a.id == self.id) {
            Some(a) => std::mem::take(&mut a.queue),
            None => Vec::new(),
        })
    }

    /// When the turn would end: the messages steered in meanwhile (the turn goes on), or, when
    /// there are none, the run is closed at once — no steer slips in between.
    pub fn take_or_close(&self) -> Vec<Message> {
        let taken = self.take();
        if taken.is_empty() {
            self.close();
        }
        taken
    }

    /// Closes the run; answers what it had not taken.
    pub fn close(&self) -> Vec<Message> {
        self.with(|m| match m.get(&self.session) {
            Some(a) if a.id == self.id => m.remove(&self.session).map(|a| a.queue).unwrap_or_default(),
            _ => Vec::new(),
        })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let left = self.close();
        if !left.is_empty() {
            log::warn!(
                "steer: run {} of session {} ended with {} steered messages untaken",
                self.id,
                self.session,
                left.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Vec<Content> {
        vec![Content::text(t)]
    }

    #[test]
    fn a_steer_reaches_the_active_run_only() {
        let runs = Arc::new(Runs::default());
        assert!(runs.steer("s", "run_x", text("hi")).unwrap_err().to_string().contains("no active run"));
        let run = runs.begin("s");
        assert_eq!(runs.active("s").as_deref(), Some(run.id()));
        let e = runs.steer("s", "run_old", text("hi")).unwrap_err().to_string();
        assert!(e.contains("not the active run"), "{e}");
        assert!(runs.steer("s", run.id(), vec![]).unwrap_err().to_string().contains("empty"));
        let a = runs.steer("s", run.id(), text("one")).unwrap();
        let b = runs.steer("s", run.id(), text("two")).unwrap();
        assert_eq!(a.run_id, run.id());
        let taken = run.take();
        assert_eq!(taken.iter().map(Message::text).collect::<Vec<_>>(), ["one", "two"]);
        assert_eq!(taken[1].id.as_deref(), Some(b.message_id.as_str()));
        assert!(run.take().is_empty());
    }

    #[test]
    fn a_run_closes_when_nothing_waits_and_drops_its_place() {
        let runs = Arc::new(Runs::default());
        let run = runs.begin("s");
        runs.steer("s", run.id(), text("late")).unwrap();
        // Something waits: the turn goes on, the run stays open.
        assert_eq!(run.take_or_close().len(), 1);
        assert!(runs.active("s").is_some());
        assert!(run.take_or_close().is_empty());
        assert_eq!(runs.active("s"), None);
        assert!(runs.steer("s", run.id(), text("too late")).is_err());
        // A later turn's run is not closed by an earlier run's guard.
        let next = runs.begin("s");
        drop(run);
        assert_eq!(runs.active("s").as_deref(), Some(next.id()));
        for i in 0..MAX_QUEUED {
            runs.steer("s", next.id(), text(&i.to_string())).unwrap();
        }
        assert!(runs.steer("s", next.id(), text("one more")).unwrap_err().to_string().contains("waiting"));
        assert_eq!(next.close().len(), MAX_QUEUED);
        drop(next);
        assert_eq!(runs.active("s"), None);
    }
}
