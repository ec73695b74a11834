//! MCP elicitation reaching the person: an extension's `elicitation/create` becomes goose's
//! actionRequired `elicitation` message on whatever watches the session's running turn (the
//! session event stream or a `/reply` stream); the answer (a user message carrying an
//! `elicitationResponse`, or the tool-confirmation route) goes back to the extension as an MCP
//! ElicitResult. Nobody watching, no answer within the deadline, or the turn ending first:
//! the extension gets `cancel`.

use crate::events::{Event, Sink};
use crate::messages::{self as msg, Tokens};
use crossbeam_channel::{bounded, Sender};
use gosling_store::message::{Action, ActionRequired, Content, Message, Role};
use gosling_util::lock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The person's answer, as MCP's three actions.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Accept(Value),
    Decline,
    Cancel,
}

impl Answer {
    /// An `elicitationResponse`'s `user_data`: the form's content (accept), or null
    /// (decline). `{"action": "decline" | "cancel"}` alone is also understood.
    pub fn from_user_data(user_data: &Value) -> Answer {
        match user_data {
            Value::Null => Answer::Decline,
            Value::Object(o) if o.len() == 1 && o.get("action").is_some() => {
                match o.get("action").and_then(Value::as_str) {
                    Some("cancel") => Answer::Cancel,
                    Some("accept") => Answer::Accept(json!({})),
                    _ => Answer::Decline,
                }
            }
            other => Answer::Accept(other.clone()),
        }
    }

    /// A tool-confirmation action: allow → accept (no content), deny → decline, cancel.
    pub fn from_permission(action: &str) -> Answer {
        match action {
            "allow_once" | "always_allow" => Answer::Accept(json!({})),
            "deny_once" | "always_deny" => Answer::Decline,
            _ => Answer::Cancel,
        }
    }

    /// MCP's ElicitResult.
    pub fn result(&self) -> Value {
        match self {
            Answer::Accept(content) => json!({ "action": "accept", "content": content }),
            Answer::Decline => json!({ "action": "decline" }),
            Answer::Cancel => json!({ "action": "cancel" }),
        }
    }
}

/// The elicitationResponse in a user message, if it carries one: `(id, answer)`.
pub fn response_in(user_message: &Message) -> Option<(String, Answer)> {
    user_message.content.iter().find_map(|c| match c {
        Content::ActionRequired(ActionRequired { data: Action::ElicitationResponse { id, user_data }, .. }) => {
            Some((id.clone(), Answer::from_user_data(user_data)))
        }
        _ => None,
    })
}

struct Waiting {
    session: String,
    answer: Sender<Answer>,
}

/// The sink of the turn running in a session, and that turn's number.
type Watcher = (Arc<dyn Sink>, u64);

/// Open elicitations and, per session, the sink of the turn that runs there.
pub struct Elicitations {
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Per session, the sink of the running turn and that turn's number (see `turn`).
    watchers: Mutex<HashMap<String, Watcher>>,
    turns: std::sync::atomic::AtomicU64,
    timeout: Duration,
}

impl Elicitations {
    pub fn new(timeout: Duration) -> Elicitations {
        Elicitations { waiting: Mutex::default(), watchers: Mutex::default(), turns: Default::default(), timeout }
    }

    /// The number of the turn running in `session` (each `watch` starts a new one), or `None`
    /// when no turn runs there: what per-turn limits count against.
    pub fn turn(&self, session: &str) -> Option<u64> {
        lock(&self.watchers).get(session).map(|(_, n)| *n)
    }

    /// How long `ask` waits for the person.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// From now on, elicitations of `session` go to `sink` (the turn that runs there).
    pub fn watch(&self, session: &str, sink: Arc<dyn Sink>) {
        let n = self.turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        lock(&self.watchers).insert(session.to_string(), (sink, n));
    }

    /// The turn watched through `sink` ended: its open elicitations are cancelled.
    pub fn unwatch(&self, session: &str, sink: &Arc<dyn Sink>) {
        let mut w = lock(&self.watchers);
        if w.get(session).is_some_and(|(s, _)| Arc::ptr_eq(s, sink)) {
            w.remove(session);
        }
        drop(w);
        // Dropping the senders wakes the waiters, which answer `cancel`.
        lock(&self.waiting).retain(|_, x| x.session != session);
    }

    /// Asks the person (blocking, with the deadline); returns the MCP ElicitResult.
    pub fn ask(&self, session: &str, extension: &str, params: &Value) -> Value {
        let sink = lock(&self.watchers).get(session).map(|(s, _)| s.clone());
        let Some(sink) = sink else {
            log::info!("elicitation from {extension} in session {session}: no turn is running there to ask; cancelled");
            return Answer::Cancel.result();
        };
        let id = format!("elicit_{}", gosling_util::random_hex(8));
        let (tx, rx) = bounded(1);
        lock(&self.waiting).insert(id.clone(), Waiting { session: session.to_string(), answer: tx });
        let message = params.get("message").and_then(Value::as_str).unwrap_or("").to_string();
        let schema = params.get("requestedSchema").cloned().unwrap_or_else(|| json!({"type": "object"}));
        let data = Action::Elicitation { id: id.clone(), message, requested_schema: schema };
        let content = Content::ActionRequired(ActionRequired { data, extra: Default::default() });
        let m = Message::new(msg::new_id(), Role::Assistant, vec![content]);
        if !sink.emit(Event::Message { message: m, tokens: Tokens::default() }) {
            self.forget(&id);
            return Answer::Cancel.result();
        }
        log::info!("elicitation {id} from {extension} in session {session}: waiting for the person");
        let answer = rx.recv_timeout(self.timeout);
        self.forget(&id);
        match answer {
            Ok(a) => a.result(),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                log::info!("elicitation {id}: no answer within {:?}; cancelled", self.timeout);
                Answer::Cancel.result()
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Answer::Cancel.result(),
        }
    }

    fn forget(&self, id: &str) {
        lock(&self.waiting).remove(id);
    }

    /// Delivers the person's answer; false when no elicitation `id` waits.
    pub fn answer(&self, id: &str, answer: Answer) -> bool {
        match lock(&self.waiting).remove(id) {
            Some(w) => w.answer.try_send(answer).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ChannelSink;

    #[test]
    fn answers_map_to_mcp_actions() {
        assert_eq!(
            Answer::from_user_data(&json!({"name": "A"})).result(),
            json!({"action":"accept","content":{"name":"A"}})
        );
        assert_eq!(Answer::from_user_data(&Value::Null), Answer::Decline);
        assert_eq!(Answer::from_user_data(&json!({"action": "cancel"})), Answer::Cancel);
        assert_eq!(Answer::from_permission("allow_once"), Answer::Accept(json!({})));
        assert_eq!(Answer::from_permission("deny_once"), Answer::Decline);
        assert_eq!(Answer::from_permission("cancel"), Answer::Cancel);
        let m = json!({"role":"user","created":1,"content":[{"type":"actionRequired","data":{"actionType":"elicitationResponse","id":"e1","user_data":{"x":1}}}]});
        let m = Message::from_value(m).unwrap();
        assert_eq!(response_in(&m), Some(("e1".to_string(), Answer::Accept(json!({"x":1})))));
        assert_eq!(response_in(&Message::new("m", Role::User, vec![Content::text("hi")])), None);
    }

    #[test]
    fn ask_waits_for_the_answer_and_cancels_without_one() {
        let el = Arc::new(Elicitations::new(Duration::from_millis(300)));
        assert_eq!(el.ask("s", "ext", &json!({}))["action"], "cancel", "nobody watches");
        let (tx, rx) = bounded(8);
        let sink: Arc<dyn Sink> = Arc::new(ChannelSink(tx));
        el.watch("s", sink.clone());
        let e = el.clone();
        let h = std::thread::spawn(move || {
            e.ask("s", "ext", &json!({"message": "name?", "requestedSchema": {"type": "object"}}))
        });
        let Ok(Event::Message { message, .. }) = rx.recv_timeout(Duration::from_secs(5)) else { panic!() };
        let message = message.to_value();
        let data = &message["content"][0]["data"];
        assert_eq!((data["actionType"].as_str(), data["message"].as_str()), (Some("elicitation"), Some("name?")));
        assert!(el.answer(data["id"].as_str().unwrap(), Answer::Accept(json!({"name": "B"}))));
        assert_eq!(h.join().unwrap(), json!({"action":"accept","content":{"name":"B"}}));
        // No answer: cancelled at the deadline; the id is forgotten.
        let e = el.clone();
        let h = std::thread::spawn(move || e.ask("s", "ext", &json!({})));
        let Ok(Event::Message { message, .. }) = rx.recv_timeout(Duration::from_secs(5)) else { panic!() };
        let message = message.to_value();
        assert_eq!(h.join().unwrap()["action"], "cancel");
        assert!(!el.answer(message["content"][0]["data"]["id"].as_str().unwrap(), Answer::Decline));
        el.unwatch("s", &sink);
        assert_eq!(el.ask("s", "ext", &json!({}))["action"], "cancel");
    }
}
