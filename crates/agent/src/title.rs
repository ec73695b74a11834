//! Session titles, once for every front end (`POST /reply`, `/sessions/{id}/reply`, ACP): a
//! session is named from its first message as soon as the turn starts (the first line, at most
//! `TITLE_CHARS` characters), then — after the first exchange, on a thread of its own, off the
//! turn's path — the configured model is asked for a short title in one small request with a
//! deadline. Whatever answers, a name the person set (`user_set_name`, `PUT
//! /sessions/{id}/name`, ACP's rename) is never overwritten, and the model's title replaces only
//! the first-message name it was asked to improve.
//!
//! `GOSLING_SESSION_TITLES=first_message` skips the model request (no extra model call per
//! session); the default, `model`, makes it.

use gosling_llm::{ChatMessage, ChatRequest, Delta, Part, Provider, Role};
use gosling_store::sessions::SessionStore;
use std::time::{Duration, Instant};

/// The most characters of a title, from the first message or the model.
pub const TITLE_CHARS: usize = 60;
/// The longest name a person may give a session (`PUT /sessions/{id}/name`).
pub const MAX_NAME_CHARS: usize = 200;
/// How long the model is given to answer with a title.
pub const MODEL_DEADLINE: Duration = Duration::from_secs(20);
/// The most characters of the first message and answer sent with the title request.
const EXCERPT_CHARS: usize = 2000;

const INSTRUCTION: &str = "Write a title of at most six words for the conversation below. \
Answer with the title only: no quotes, no punctuation at the end, no explanation.";

/// Whether the model is asked for titles (`GOSLING_SESSION_TITLES`, default `model`).
pub fn model_titles(setting: &dyn Fn(&str) -> Option<String>) -> bool {
    setting("GOSLING_SESSION_TITLES").is_none_or(|v| v.trim() != "first_message")
}

/// A title from free text: its first non-empty line, trimmed, at most `TITLE_CHARS`
/// characters (an ellipsis marks a cut); `None` for blank text.
pub fn from_text(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

/// The model's answer as a title: its first line without Markdown marks, a `Title:` label or
/// quotes; `None` when nothing is left.
pub fn from_model(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_start_matches(['#', '*', '-', ' ']).trim_end_matches('*');
    let line = ["Title:", "title:", "TITLE:"].iter().find_map(|p| line.strip_prefix(p)).unwrap_or(line).trim();
    let line = line.trim_start_matches(['"', '\'', '`', '“', '*', ' ']);
    let line = line.trim_end_matches(['"', '\'', '`', '”', '*', '.', '!', ':', ' ']);
    from_text(line)
}

/// Names session `sid` from its first message when the person has not named it and this is
/// its first message; the name and the session's `updated_at`, for front ends that announce
/// it (ACP's `session_info_update`).
pub fn name_from_first_message(sessions: &SessionStore, sid: &str, text: &str) -> Option<(String, String)> {
    let title = from_text(text)?;
    let t = title.clone();
    let named = sessions.update_meta(sid, |s| {
        let first = s.message_count <= 1 && !s.user_set_name;
        if first {
            s.name = t;
        }
        first.then(|| s.updated_at.clone())
    });
    match named {
        Ok(Some(Some(updated))) => Some((title, updated)),
        Ok(_) => None,
        Err(e) => {
            log::warn!("title: cannot name session {sid}: {e}");
            None
        }
    }
}

/// What the model is asked, after the first exchange: the first message and the answer, cut.
fn request(first: &str, answer: &str) -> ChatRequest {
    let cut = |s: &str| s.chars().take(EXCERPT_CHARS).collect::<String>();
    let body = format!("First message:\n{}\n\nAnswer:\n{}", cut(first), cut(answer));
    ChatRequest {
        system: INSTRUCTION.to_string(),
        messages: vec![ChatMessage { role: Role::User, parts: vec![Part::Text(body)] }],
        tools: Default::default(),
        max_tokens: Some(32),
    }
}

/// Asks `provider` for a title within `deadline`; `None` when it fails, is late or says nothing
/// usable.
pub fn ask_model(provider: &dyn Provider, first: &str, answer: &str, deadline: Duration) -> Option<String> {
    let start = Instant::now();
    let mut on_delta = |_: Delta| start.elapsed() < deadline;
    let late = gosling_llm::Cancel::new(move || start.elapsed() >= deadline);
    match provider.complete_cancellable(&request(first, answer), &mut on_delta, &late) {
        Ok(c) => from_model(&c.text).or_else(|| {
            log::info!("title: the model's answer holds no usable title; the first message names the session");
            None
        }),
        Err(e) => {
            log::info!("title: the model gave no title ({e}); the first message names the session");
            None
        }
    }
}

/// Replaces the first-message name `fallback` of session `sid` by the model's `title`, unless
/// the person named the session meanwhile (or it was renamed otherwise). True when replaced.
pub fn apply_model_title(sessions: &SessionStore, sid: &str, fallback: &str, title: &str) -> Option<String> {
    let r = sessions.update_meta(sid, |s| {
        let ours = !s.user_set_name && s.name == fallback;
        if ours {
            s.name = title.to_string();
        }
        ours.then(|| s.updated_at.clone())
    });
    r.ok().flatten().flatten()
}

/// Told a session's new title and its `updated_at` (see `spawn_model_title`).
pub type OnTitle = Box<dyn FnOnce(String, String) + Send>;

/// After a session's first exchange: asks the model for a title on a thread of its own (the
/// turn has ended; nothing waits for it).
pub fn spawn_model_title(
    provider: Box<dyn Provider>,
    sessions: std::sync::Arc<SessionStore>,
    sid: String,
    fallback: String,
    first: String,
    answer: String,
    on_title: Option<OnTitle>,
) {
    let spawned = std::thread::Builder::new().name("session-title".into()).spawn(move || {
        if let Some(title) = ask_model(provider.as_ref(), &first, &answer, MODEL_DEADLINE) {
            if let Some(updated) = apply_model_title(&sessions, &sid, &fallback, &title) {
                log::info!("title: session {sid} is now titled by the model");
                if let Some(tell) = on_title {
                    tell(title, updated);
                }
            }
        }
    });
    if let Err(e) = spawned {
        log::warn!("title: cannot start the title thread: {e}");
    }
}

/// Checks a name the person gives a session: trimmed, not empty, at most `MAX_NAME_CHARS`
/// characters, one line.
pub fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("name must not be empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("name is {} characters long; the most is {MAX_NAME_CHARS}", name.chars().count()));
    }
    if name.chars().any(char::is_control) {
        return Err("name must be one line of text without control characters".into());
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_from_text_and_from_the_model() {
        assert_eq!(from_text("\n  Fix the build  \nplease").as_deref(), Some("Fix the build"));
        assert_eq!(from_text(" \n "), None);
        let long = "x".repeat(80);
        assert_eq!(from_text(&long).unwrap().chars().count(), TITLE_CHARS + 1);
        assert_eq!(from_model("Title: \"Rust build fix\".\nmore").as_deref(), Some("Rust build fix"));
        assert_eq!(from_model("## **Markdown tour**").as_deref(), Some("Markdown tour"));
        assert_eq!(from_model("\"\""), None);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(check_name("  Trip plans ").unwrap(), "Trip plans");
        assert!(check_name("   ").unwrap_err().contains("empty"));
        assert!(check_name(&"n".repeat(201)).unwrap_err().contains("200"));
        assert!(check_name("a\nb").is_err());
    }
}
