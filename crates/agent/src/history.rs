//! A session's history rewritten, whichever front end asks: `truncate` (Desktop's "edit a sent
//! message": the conversation from that message on is dropped, then the edited text is sent as
//! a new prompt) and `fork` (a new session with the conversation up to a message). Messages are
//! named by their time (`created`, unix seconds), as goose's clients name them
//! (`truncateFrom`, `conversationBefore`).

use crate::host::Host;
use crate::Error;
use gosling_store::message::Message;
use gosling_store::sessions::Session;

/// Where the conversation is cut: at its first message created at or after `from`.
fn cut(conversation: &[Message], from: i64) -> usize {
    conversation.iter().position(|m| m.created >= from).unwrap_or(conversation.len())
}

/// Drops the messages of session `id` from the first one created at or after `from` (unix
/// seconds) on. Refused while a turn runs in the session (from any front end): it would append
/// to what is being cut. The number of messages kept.
pub fn truncate(host: &Host, id: &str, from: i64) -> Result<usize, Error> {
    if host.sessions.get_meta(id).map_err(Error::Store)?.is_none() {
        return Err(Error::SessionNotFound(id.to_string()));
    }
    let _turn = host.agents.begin_turn(id).ok_or_else(|| Error::Busy(id.to_string()))?;
    let kept = host
        .sessions
        .update(id, |s| {
            let c = s.conversation.get_or_insert_with(Vec::new);
            c.truncate(cut(c, from));
            c.len()
        })
        .map_err(Error::SaveMessage)?;
    kept.ok_or_else(|| Error::SessionNotFound(id.to_string()))
}

/// A new session in `working_dir` with session `id`'s name, extensions, mode, provider and
/// model, and its conversation up to (not including) the first message created at or after
/// `before` (all of it when `None`). The new session, without its conversation.
pub fn fork(host: &Host, id: &str, before: Option<i64>, working_dir: &str) -> Result<Session, Error> {
    let source = host.sessions.get(id).map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.to_string()))?;
    let conversation = source.conversation.as_deref().unwrap_or_default();
    let kept = &conversation[..before.map_or(conversation.len(), |b| cut(conversation, b))];
    let new = host.sessions.create(working_dir, crate::stored_extensions(&source)).map_err(Error::Store)?;
    let copied = |s: &mut Session| {
        s.name = source.name.clone();
        s.user_set_name = source.user_set_name;
        s.session_type = source.session_type.clone();
        s.goose_mode = source.goose_mode.clone();
        s.provider_name = source.provider_name.clone();
        s.model_config = source.model_config.clone();
        // Where each extension came from goes with the set, so the fork starts what the source
        // would (`extension_set`'s rule).
        if let Some(origins) = source.extra.get(crate::extension_set::ORIGINS) {
            s.extra.insert(crate::extension_set::ORIGINS.to_string(), origins.clone());
        }
    };
    host.sessions.update_meta(&new.id, copied).map_err(Error::Store)?;
    host.sessions.replace_conversation(&new.id, kept).map_err(Error::SaveMessage)?;
    log::info!("session {id} forked as {} with {} of its {} messages", new.id, kept.len(), conversation.len());
    host.sessions.get_meta(&new.id).map_err(Error::Store)?.ok_or(Error::SessionNotFound(new.id))
}
