//! goose 1.34's session event API, what Goose Desktop chats through:
//! `POST /sessions/{id}/reply` (starts a turn in the background, answers `{request_id}` at
//! once), `GET /sessions/{id}/events` (the session's long-lived SSE stream, with replay from
//! `Last-Event-ID`) and `POST /sessions/{id}/cancel`. The turn loop is the one `POST /reply`
//! runs; here its events go through the session's bus (`agent::bus`).

use crate::error::ApiError;
use crate::reply_routes::{answer_elicitation, normalize_user_message, PING_INTERVAL};
use crate::server::{Request, Response};
use crate::state::App;
use gosling_agent::bus::{Next, BUSY};
use gosling_agent::reply::Turn;
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

type R = Result<Response, ApiError>;

/// goose's frame for a follower whose `Last-Event-ID` (or lag) is beyond the replay buffer.
const TOO_FAR_BEHIND: &str = "Client too far behind — reload conversation";

/// A UUID in its text form (any version; Desktop sends v7): 8-4-4-4-12 hex digits.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn session_exists(app: &App, id: &str) -> Result<bool, ApiError> {
    match app.session_meta(id) {
        Ok(_) => Ok(true),
        Err(gosling_agent::Error::SessionNotFound(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
struct ReplyReq {
    request_id: String,
    user_message: Value,
    #[serde(default)]
    override_conversation: Option<Vec<gosling_store::message::Message>>,
}

pub fn reply(app: &App, id: &str, req: &Request) -> R {
    let r: ReplyReq = req.json()?;
    if !is_uuid(&r.request_id) {
        return Err(ApiError::bad_request("request_id must be a valid UUID"));
    }
    if !session_exists(app, id)? {
        return Err(ApiError::not_found(format!("Session {id} not found")));
    }
    let accepted = Response::json(200, &json!({ "request_id": r.request_id }));
    let user_message = normalize_user_message(r.user_message)?;
    if answer_elicitation(app, &user_message).is_some() {
        // The answer to a pending elicitation: the running request goes on.
        return Ok(accepted);
    }
    if !app.follow(id).active_ids().is_empty() {
        return Err(ApiError::bad_request(BUSY));
    }
    let turn = match Turn::prepare(app, id, user_message, r.override_conversation) {
        Err(gosling_agent::Error::SessionNotFound(_)) => {
            return Err(ApiError::not_found(format!("Session {id} not found")))
        }
        Err(e @ gosling_agent::Error::NoAgent(_)) => return Err(ApiError::new(424, e.to_string())),
        // A /reply (or an editor over ACP) is answering in this session: goose's busy answer.
        Err(gosling_agent::Error::Busy(_)) => return Err(ApiError::bad_request(BUSY)),
        // Anything else (model settings, a store failure) is told on the stream, as goose does.
        other => other,
    };
    // The turn's run, which `POST /sessions/{id}/steer` names (gosling's header; goose's
    // clients read the body only).
    let run = turn.as_ref().ok().map(|t| t.run_id().to_string());
    app.start_request(id, &r.request_id, turn).map_err(|e| ApiError::bad_request(e.to_string()))?;
    log::info!("session {id}: request {} started", r.request_id);
    Ok(match run {
        Some(run) => accepted.with_header("X-Gosling-Run-Id", &run),
        None => accepted,
    })
}

pub fn events(app: &Arc<App>, id: &str, req: &Request) -> R {
    if !session_exists(app, id)? {
        return Ok(Response::empty(404));
    }
    let last_event_id = req.header("last-event-id").and_then(|v| v.trim().parse::<u64>().ok());
    // The bus carries this process's turns and, while `following` lives, what other
    // processes append to the session (`agent::follow`).
    let (bus, following) = match app.follow_live(id) {
        Err(gosling_agent::Error::SessionNotFound(_)) => return Ok(Response::empty(404)),
        other => other?,
    };
    let id = id.to_string();
    // A follower does no work of its own: it needs no request slot while it streams.
    Ok(Response::sse(Box::new(move |w: &mut dyn Write| {
        let _following = &following;
        let active = bus.active_ids();
        if !active.is_empty() {
            let frame = json!({ "type": "ActiveRequests", "request_ids": active });
            w.write_all(format!("data: {frame}\n\n").as_bytes())?;
        }
        let mut cursor = bus.cursor(last_event_id);
        let mut pings = 0u64;
        let mut next_ping = Instant::now();
        loop {
            if gosling_sys::shutdown_requested() {
                return Ok(());
            }
            if Instant::now() >= next_ping {
                w.write_all(format!(": ping {pings}\n\n").as_bytes())?;
                pings += 1;
                next_ping = Instant::now() + PING_INTERVAL;
            }
            match bus.next_after(cursor, next_ping) {
                Next::Event(seq, text) => {
                    w.write_all(format!("id: {seq}\ndata: {text}\n\n").as_bytes())?;
                    cursor = seq;
                }
                Next::TooFarBehind => {
                    log::info!("session {id}: an event follower is too far behind; closing its stream");
                    let frame = json!({ "type": "Error", "error": TOO_FAR_BEHIND });
                    w.write_all(format!("id: 0\ndata: {frame}\n\n").as_bytes())?;
                    return Ok(());
                }
                Next::Idle => {}
            }
        }
    }))
    .follower())
}

#[derive(Deserialize)]
struct CancelReq {
    request_id: String,
}

pub fn cancel(app: &App, id: &str, req: &Request) -> R {
    let r: CancelReq = req.json()?;
    let running = app
        .cancel_request(id, &r.request_id)
        .ok_or_else(|| ApiError::not_found(format!("Session {id} has no event stream; nothing to cancel")))?;
    if running {
        log::info!("session {id}: request {} cancelled", r.request_id);
    }
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
struct NameReq {
    name: String,
}

/// goose's `PUT /sessions/{id}/name` (`{"name": …}`): the person names the session; the name
/// is kept from then on (`user_set_name`: no title from a message or the model replaces it).
/// 400 for an empty or over-long name (`agent::title::check_name` says which).
pub fn rename(app: &App, id: &str, req: &Request) -> R {
    let r: NameReq = req.json()?;
    app.rename_session(id, &r.name)?;
    Ok(Response::empty(200))
}

/// A JSON object body holding no keys but `keys` (422 naming the one that is not).
fn object_of(req: &Request, keys: &[&str]) -> Result<serde_json::Map<String, Value>, ApiError> {
    let Value::Object(m) = req.json::<Value>()? else {
        return Err(ApiError::new(422, format!("send a JSON object with {}", keys.join(", "))));
    };
    if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(ApiError::new(422, format!("unknown field `{k}`; this request takes {}", keys.join(", "))));
    }
    Ok(m)
}

/// Field `key` as a message's `created` time (unix seconds); `None` when absent.
fn created(m: &serde_json::Map<String, Value>, key: &str, what: &str) -> Result<Option<i64>, ApiError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            ApiError::new(422, format!("`{key}` must be a whole number: the `created` time (unix seconds) of {what}"))
        }),
    }
}

/// `POST /sessions/{id}/fork` (`{"before": created?}`): a new session in the same working dir
/// with the conversation up to that message (`agent::history::fork`, as ACP's `session/fork`);
/// answers the new session without its conversation.
pub fn fork(app: &App, id: &str, req: &Request) -> R {
    let m = object_of(req, &["before"])?;
    let before = created(&m, "before", "the first message left out (omit it to copy them all)")?;
    let dir = app.session_meta(id)?.working_dir;
    let new = gosling_agent::history::fork(app, id, before, &dir)?;
    let v = serde_json::to_value(&new).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Response::json(200, &json!({ "session": v })))
}

/// `POST /sessions/{id}/truncate` (`{"from": created}`): "edit and resend" — the conversation
/// from that message on is dropped (`agent::history::truncate`, as ACP's
/// `_goose/unstable/session/conversation/truncate`); refused while a turn runs there.
pub fn truncate(app: &App, id: &str, req: &Request) -> R {
    let m = object_of(req, &["from"])?;
    let what = "the first message to drop";
    let from = created(&m, "from", what)?
        .ok_or_else(|| ApiError::new(422, format!("missing `from`: the `created` time (unix seconds) of {what}")))?;
    let kept = gosling_agent::history::truncate(app, id, from)?;
    Ok(Response::json(200, &json!({ "kept": kept })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SteerReq {
    /// The run the client was told (`X-Gosling-Run-Id` of `POST /sessions/{id}/reply`).
    run_id: String,
    text: String,
}

/// `POST /sessions/{id}/steer` (`{"run_id", "text"}`): a message for the running turn, which
/// adds it before its next model call (`Host::steer`, as ACP's steer); 409 when that run has
/// ended (send it as a new message then).
pub fn steer(app: &App, id: &str, req: &Request) -> R {
    let r: SteerReq = req.json()?;
    if r.text.trim().is_empty() {
        return Err(ApiError::bad_request("`text` is empty: say what to tell the running agent"));
    }
    let content = vec![gosling_store::message::Content::text(r.text)];
    let steered = app.steer(id, &r.run_id, content)?;
    Ok(Response::json(200, &json!({ "run_id": steered.run_id, "message_id": steered.message_id })))
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids() {
        assert!(super::is_uuid("0196b3f2-7c1a-7d2e-9f00-0123456789ab"));
        assert!(!super::is_uuid("not-a-uuid"));
        assert!(!super::is_uuid("0196b3f2-7c1a-7d2e-9f00-0123456789ag"));
        assert!(!super::is_uuid("0196b3f27c1a-7d2e-9f00-0123456789ab"));
    }
}
