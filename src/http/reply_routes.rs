//! `POST /reply` (the SSE turn stream), `/agent/update_provider` and tool confirmations.

use crate::agent::messages as msg;
use crate::agent::reply::{pump, Mode, Turn};
use crate::app::App;
use crate::http::error::ApiError;
use crate::http::server::{Request, Response};
use crossbeam_channel::bounded;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type R = Result<Response, ApiError>;

#[derive(Deserialize)]
struct ChatReq {
    session_id: String,
    user_message: Value,
    #[serde(default)]
    override_conversation: Option<Vec<Value>>,
}

/// Frames queued between the turn and the socket; a slow client applies backpressure.
const FRAME_QUEUE: usize = 256;

/// Completes a client's user message with what goose's Message requires.
fn normalize_user_message(mut m: Value) -> Result<Value, ApiError> {
    let o = m.as_object_mut().ok_or_else(|| ApiError::new(422, "`user_message` must be a Message object"))?;
    if !o.get("content").is_some_and(Value::is_array) {
        return Err(ApiError::new(422, "`user_message.content` must be an array of MessageContent"));
    }
    o.entry("role").or_insert(json!("user"));
    o.entry("created").or_insert(json!(crate::util::unix_secs()));
    o.entry("metadata").or_insert(msg::metadata());
    if o.get("id").is_none_or(Value::is_null) {
        o.insert("id".into(), json!(format!("msg_{}", crate::util::random_hex(8))));
    }
    Ok(m)
}

pub fn reply(app: &Arc<App>, req: &Request) -> R {
    let r: ChatReq = req.json()?;
    let user_message = normalize_user_message(r.user_message)?;
    let app = app.clone();
    Ok(Response::sse(Box::new(move |w| {
        let (tx, rx) = bounded::<String>(FRAME_QUEUE);
        let (cancel_tx, cancel_rx) = bounded::<()>(1);
        match prepare_turn(&app, &r.session_id, user_message, r.override_conversation) {
            Ok(turn) => {
                std::thread::Builder::new().name("reply-turn".into()).spawn(move || turn.run(tx, cancel_rx))?;
            }
            Err(e) => {
                let _ = tx.send(crate::wire::sse::encode_data(&msg::ev_error(&e).to_string()));
                drop(tx);
            }
        }
        pump(rx, cancel_tx, w)
    })))
}

fn prepare_turn(
    app: &App,
    session_id: &str,
    user_message: Value,
    override_conversation: Option<Vec<Value>>,
) -> Result<Turn, String> {
    let session = match app.sessions.get(session_id) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(format!("Failed to read session: session {session_id:?} not found")),
        Err(e) => return Err(format!("Failed to read session: {e}")),
    };
    let runtime = app.agents.get(session_id).ok_or_else(|| {
        format!("Failed to get session agent: session {session_id:?} has no running agent; call /agent/resume with load_model_and_extensions: true")
    })?;
    let model =
        session.model_config.as_ref().and_then(|m| m.get("model_name")).and_then(Value::as_str).map(str::to_string);
    let settings = crate::llm::Settings::resolve(
        &crate::config::ProcessEnv,
        &|k| app.setting(k),
        (session.provider_name.as_deref(), model.as_deref()),
    )
    .map_err(|e| e.to_string())?;
    let provider = crate::llm::from_settings(&settings).map_err(|e| e.to_string())?;
    let saved = match override_conversation {
        Some(mut conversation) => {
            conversation.push(user_message);
            app.sessions.replace_conversation(session_id, &conversation).map(|_| conversation)
        }
        None => {
            let mut conversation = session.conversation.clone().unwrap_or_default();
            app.sessions.append_message(session_id, &user_message).map(|_| {
                conversation.push(user_message);
                conversation
            })
        }
    };
    let conversation = saved.map_err(|e| format!("Failed to save the message: {e}"))?;
    Ok(Turn {
        session_id: session_id.to_string(),
        runtime,
        provider,
        sessions: app.sessions.clone(),
        confirmations: app.confirmations.clone(),
        mode: app.mode_for(session.goose_mode.as_deref()),
        max_turns: app.max_turns(),
        conversation,
    })
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
    let provider = crate::llm::canonical_provider(&r.provider).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Failed to create {} provider: unknown provider; use openai, ollama or anthropic",
            r.provider
        ))
    })?;
    let model = r
        .model
        .filter(|m| !m.trim().is_empty())
        .or_else(|| app.setting("GOOSE_MODEL"))
        .ok_or_else(|| ApiError::bad_request("No model specified"))?;
    let mut model_config = json!({ "model_name": model, "toolshim": false });
    if let Some(c) = r.context_limit {
        model_config["context_limit"] = json!(c);
    }
    let done = app.sessions.update_meta(&r.session_id, |s| {
        s.provider_name = Some(provider.to_string());
        s.model_config = Some(model_config);
    })?;
    if done.is_none() {
        // goose answers 424 here (its agent cannot be created for an unknown session).
        return Err(ApiError::new(424, format!("session {:?} not found; start it with /agent/start", r.session_id)));
    }
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
    if app.confirmations.answer(&c.id, &c.action) {
        Ok(Response::json(200, &json!({ "status": "delivered" })))
    } else {
        log::info!("tool confirmation for {:?}: nothing is waiting for it (the turn ended or was cancelled)", c.id);
        Ok(Response::json(
            200,
            &json!({ "status": "unknown", "message": format!("no tool call {:?} is waiting for confirmation; the turn ended or was cancelled", c.id) }),
        ))
    }
}

/// The default mode when neither the session nor the settings name one.
pub fn default_mode() -> Mode {
    Mode::Auto
}
