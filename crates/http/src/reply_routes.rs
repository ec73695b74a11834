//! `POST /reply` (the SSE turn stream), `/agent/update_provider` and tool confirmations.

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use crossbeam_channel::{bounded, Receiver, Sender};
use gosling_agent::elicit;
use gosling_agent::events::{ChannelSink, Event, Sink};
use gosling_agent::messages as msg;
use gosling_agent::ops::ModelChoice;
use gosling_agent::permissions::Decision;
use gosling_agent::reply::Turn;
use gosling_store::message::Message;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

type R = Result<Response, ApiError>;

/// goose's heartbeat interval, on both streams.
pub const PING_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Deserialize)]
struct ChatReq {
    session_id: String,
    user_message: Value,
    #[serde(default)]
    override_conversation: Option<Vec<Message>>,
}

/// Events queued between the turn and the socket; a slow client applies backpressure.
const EVENT_QUEUE: usize = 256;

/// A client's user message, completed with what goose's Message requires.
pub fn normalize_user_message(mut m: Value) -> Result<Message, ApiError> {
    let o = m.as_object_mut().ok_or_else(|| ApiError::new(422, "`user_message` must be a Message object"))?;
    if !o.get("content").is_some_and(Value::is_array) {
        return Err(ApiError::new(422, "`user_message.content` must be an array of MessageContent"));
    }
    o.entry("role").or_insert(json!("user"));
    o.entry("created").or_insert(json!(gosling_util::unix_secs()));
    if o.get("id").is_none_or(Value::is_null) {
        o.insert("id".into(), json!(msg::new_id()));
    }
    Message::from_value(m).map_err(|e| ApiError::new(422, format!("`user_message`: {e}")))
}

/// Delivers the elicitation answer a user message carries; None when it carries none.
pub fn answer_elicitation(app: &App, user_message: &Message) -> Option<bool> {
    let (id, answer) = elicit::response_in(user_message)?;
    let delivered = app.answer_elicitation(&id, answer);
    if !delivered {
        log::info!("elicitation answer for {id:?}: nothing is waiting for it (answered, timed out or the turn ended)");
    }
    Some(delivered)
}

pub fn reply(app: &Arc<App>, req: &Request) -> R {
    let r: ChatReq = req.json()?;
    let user_message = normalize_user_message(r.user_message)?;
    let app = app.clone();
    Ok(Response::sse(Box::new(move |w| {
        let (tx, rx) = bounded::<Event>(EVENT_QUEUE);
        let (cancel_tx, cancel_rx) = bounded::<()>(1);
        if answer_elicitation(&app, &user_message).is_some() {
            // An answer to a pending elicitation, not a new turn: the running turn goes on.
            let _ = tx.send(Event::Finish(msg::Tokens::default()));
            drop(tx);
            return pump(rx, cancel_tx, w);
        }
        match Turn::prepare(&app, &r.session_id, user_message, r.override_conversation) {
            Ok(turn) => {
                let sink: Arc<dyn Sink> = Arc::new(ChannelSink(tx));
                // On a kept turn thread; this one writes its events.
                app.host.start_turn(turn, sink, cancel_rx)?;
            }
            Err(e) => {
                let text = match e {
                    gosling_agent::Error::SessionNotFound(_) => format!("Failed to read session: {e}"),
                    _ => e.to_string(),
                };
                let _ = tx.send(Event::Error(text));
                drop(tx);
            }
        }
        pump(rx, cancel_tx, w)
    })))
}

/// Writes one turn's events to the client as `data:` frames, with a Ping after each quiet
/// interval. Returns when the turn is over or the client is gone (then `cancel` fires).
fn pump(events: Receiver<Event>, cancel: Sender<()>, w: &mut dyn Write) -> io::Result<()> {
    let ping = gosling_wire::sse::encode_data(&json!({"type": "Ping"}).to_string());
    loop {
        let frame = match events.recv_timeout(PING_INTERVAL) {
            Ok(ev) => gosling_wire::sse::encode_data(&ev.to_json().to_string()),
            // The server is stopping (its turns are being ended): the stream ends whole, saying
            // so, rather than being cut when the process exits.
            Err(crossbeam_channel::RecvTimeoutError::Timeout) if gosling_sys::shutdown_requested() => {
                let stopping = Event::Error("the server is shutting down; this reply was cut short".into());
                drop(cancel);
                return w.write_all(gosling_wire::sse::encode_data(&stopping.to_json().to_string()).as_bytes());
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => ping.clone(),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ok(()),
        };
        if let Err(e) = w.write_all(frame.as_bytes()) {
            log::info!("reply: client hung up ({e}); cancelling the turn");
            drop(cancel);
            return Err(e);
        }
    }
}

#[derive(Deserialize)]
struct UpdateProvider {
    session_id: String,
    provider: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    context_limit: Option<u64>,
}

pub fn update_provider(app: &App, req: &Request) -> R {
    let r: UpdateProvider = req.json()?;
    let model = r.model.filter(|m| !m.trim().is_empty()).or_else(|| app.setting("GOOSE_MODEL"));
    let choice = ModelChoice {
        provider: Some(r.provider.clone()),
        model: Some(model.unwrap_or_default()),
        context_limit: r.context_limit,
    };
    app.set_model(&r.session_id, choice).map_err(|e| match e {
        // goose's words for a provider it cannot make.
        gosling_agent::Error::UnknownProvider(p) => ApiError::bad_request(format!(
            "Failed to create {p} provider: unknown provider; use openai, ollama or anthropic"
        )),
        // goose answers 424 here (its agent cannot be created for an unknown session).
        gosling_agent::Error::SessionNotFound(id) => {
            ApiError::new(424, format!("session {id:?} not found; start it with /agent/start"))
        }
        e => e.into(),
    })?;
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Confirm {
    id: String,
    action: String,
    #[allow(dead_code)] // part of goose's request; the id alone finds the waiting turn
    session_id: String,
}

pub fn confirm_tool(app: &App, req: &Request) -> R {
    let c: Confirm = req.json()?;
    const ACTIONS: [&str; 5] = ["always_allow", "allow_once", "cancel", "deny_once", "always_deny"];
    if !ACTIONS.contains(&c.action.as_str()) {
        return Err(ApiError::new(422, format!("unknown action {:?}; use one of {}", c.action, ACTIONS.join(", "))));
    }
    // goose answers 200 either way (its documented statuses are 200/401/500); the `status`
    // field tells a UI whether the answer reached a waiting turn or came too late.
    // The same route answers an elicitation (as goose does): allow → accept, deny → decline.
    let decision = Decision::parse(&c.action).unwrap_or(Decision::Cancel);
    if app.confirm_tool(&c.id, decision) || app.answer_elicitation(&c.id, elicit::Answer::from_permission(&c.action)) {
        Ok(Response::json(200, &json!({ "status": "delivered" })))
    } else {
        log::info!("tool confirmation for {:?}: nothing is waiting for it (the turn ended or was cancelled)", c.id);
        Ok(Response::json(
            200,
            &json!({ "status": "unknown", "message": format!("no tool call {:?} is waiting for confirmation; the turn ended or was cancelled", c.id) }),
        ))
    }
}
