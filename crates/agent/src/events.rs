//! What a running turn tells whoever watches it: typed events, and the `Sink` they go to.
//!
//! The turn loop knows nothing about SSE or HTTP. `POST /reply` watches one turn through a
//! bounded channel (`ChannelSink`); the session event stream watches every turn of a session
//! through its `bus::Bus`. http/ turns the events into frames.

use crate::messages::Tokens;
use crossbeam_channel::Sender;
use gosling_store::message::Message;
use serde_json::{json, Value};

/// One event of a turn, as goose's `MessageEvent` names them.
#[derive(Debug, Clone)]
pub enum Event {
    /// A goose Message (a streamed text chunk, a tool request, a tool response, an
    /// actionRequired confirmation or elicitation).
    Message { message: Message, tokens: Tokens },
    /// An MCP notification (progress, log message) of the tool call `request_id`.
    Notification { request_id: String, method: String, params: Value },
    /// The turn failed; the text says what to fix.
    Error(String),
    /// The turn is over (also after a cancel).
    Finish(Tokens),
}

impl Event {
    /// goose's MessageEvent JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Event::Message { message, tokens } => {
                json!({ "type": "Message", "message": message.to_value(), "token_state": tokens.state() })
            }
            Event::Notification { request_id, method, params } => json!({
                "type": "Notification", "request_id": request_id, "message": { "method": method, "params": params }
            }),
            Event::Error(e) => json!({ "type": "Error", "error": e }),
            Event::Finish(t) => json!({ "type": "Finish", "reason": "stop", "token_state": t.state() }),
        }
    }
}

/// Where a turn's events go.
pub trait Sink: Send + Sync {
    /// Delivers one event; false once nobody watches any more (the turn then stops).
    fn emit(&self, ev: Event) -> bool;
}

/// A bounded channel to one watcher (`POST /reply`): a slow reader applies backpressure, a
/// reader that is gone (receiver dropped) makes `emit` false.
pub struct ChannelSink(pub Sender<Event>);

impl Sink for ChannelSink {
    fn emit(&self, ev: Event) -> bool {
        self.0.send(ev).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_goose_shapes() {
        let t = Tokens { input: 1, output: 2, acc_input: 3, acc_output: 4 };
        let f = Event::Finish(t).to_json();
        assert_eq!((f["type"].as_str(), f["reason"].as_str()), (Some("Finish"), Some("stop")));
        assert_eq!(f["token_state"]["accumulatedTotalTokens"], 7);
        let n = Event::Notification { request_id: "t1".into(), method: "m".into(), params: json!({"p": 1}) }.to_json();
        assert_eq!(n["message"]["params"]["p"], 1);
        assert_eq!(Event::Error("x".into()).to_json(), json!({"type": "Error", "error": "x"}));
        let (tx, rx) = crossbeam_channel::bounded(1);
        let sink = ChannelSink(tx);
        assert!(sink.emit(Event::Error("a".into())));
        drop(rx);
        assert!(!sink.emit(Event::Error("b".into())), "a gone reader is reported");
    }
}
