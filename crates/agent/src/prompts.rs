//! The prompts gosling sends the model, as the Prompts settings of goose's Desktop show and
//! edit them (goose's `config/prompts/{list,get,save,reset}`): each with its default text and
//! the person's own version, kept in the settings under `prompts.<name>`. A turn's system prompt
//! is the person's version when there is one (`system`), else the default.

use crate::host::Host;
use crate::{settings, Error};
use serde_json::Value;

/// A prompt gosling sends, with its default text.
#[derive(Debug)]
pub struct Template {
    pub name: &'static str,
    pub description: &'static str,
    pub default: &'static str,
}

/// The system prompt of every turn (the extensions' instructions follow it).
pub const SYSTEM: Template = Template {
    name: "system.md",
    description:
        "The system prompt of every turn: who the agent is and how it works (each extension's instructions follow it)",
    default: "You are a general-purpose AI agent called goose, running in gosling. \
You can use the tools of the extensions listed below. Call tools when they help; answer plainly when done.",
};

/// Every prompt a person may edit.
pub const TEMPLATES: [&Template; 1] = [&SYSTEM];

/// The most bytes of a person's version of a prompt.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// A prompt as the settings page shows it.
#[derive(Debug, PartialEq)]
pub struct Prompt {
    pub name: &'static str,
    pub description: &'static str,
    pub default_content: &'static str,
    /// What is sent: the person's version, else the default.
    pub content: String,
    pub customized: bool,
}

const UNKNOWN: &str = "unknown prompt name; gosling's only editable prompt is system.md";
const EMPTY: &str =
    "a prompt's `content` must be non-empty text of at most 64 KiB; to go back to the default, reset it";

fn template(name: &str) -> Result<&'static Template, Error> {
    TEMPLATES.iter().copied().find(|t| t.name == name).ok_or(Error::BadKey(UNKNOWN))
}

fn key(t: &Template) -> String {
    format!("prompts.{}", t.name)
}

/// The prompt `t` from the person's version `own` (as stored; a non-string is ignored).
fn prompt(t: &'static Template, own: Option<Value>) -> Prompt {
    let own = own.and_then(|v| v.as_str().map(str::to_string)).filter(|s| !s.trim().is_empty());
    Prompt {
        name: t.name,
        description: t.description,
        default_content: t.default,
        customized: own.is_some(),
        content: own.unwrap_or_else(|| t.default.to_string()),
    }
}

/// The text of `t` that is sent, from a settings reader (the turn's).
pub fn text(setting: &dyn Fn(&str) -> Option<String>, t: &'static Template) -> String {
    prompt(t, setting(&key(t)).map(Value::String)).content
}

fn stored(host: &Host, t: &Template) -> Result<Option<Value>, Error> {
    settings::read(host, &key(t), false).map_err(Error::Store)
}

/// Every editable prompt.
pub fn list(host: &Host) -> Result<Vec<Prompt>, Error> {
    TEMPLATES.iter().map(|t| Ok(prompt(t, stored(host, t)?))).collect()
}

/// The prompt named `name`.
pub fn get(host: &Host, name: &str) -> Result<Prompt, Error> {
    let t = template(name)?;
    Ok(prompt(t, stored(host, t)?))
}

/// Checks a person's version of a prompt: its template and the text.
pub fn check(name: &str, content: &str) -> Result<&'static Template, Error> {
    let t = template(name)?;
    if content.trim().is_empty() || content.len() > MAX_PROMPT_BYTES {
        return Err(Error::BadKey(EMPTY));
    }
    Ok(t)
}

/// Saves the person's version of prompt `name`; the next turn sends it.
pub fn save(host: &Host, name: &str, content: &str) -> Result<Prompt, Error> {
    let t = check(name, content)?;
    settings::upsert(host, &key(t), Value::String(content.to_string()), false)?;
    get(host, name)
}

/// Drops the person's version of prompt `name`: the default is sent again.
pub fn reset(host: &Host, name: &str) -> Result<Prompt, Error> {
    let t = template(name)?;
    settings::remove(host, &key(t), false)?;
    get(host, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persons_version_wins_and_blank_is_the_default() {
        let none = |_: &str| None;
        assert_eq!(text(&none, &SYSTEM), SYSTEM.default);
        let own = |k: &str| (k == "prompts.system.md").then(|| "Be brief.".to_string());
        assert_eq!(text(&own, &SYSTEM), "Be brief.");
        let blank = |_: &str| Some("  \n".to_string());
        assert_eq!(text(&blank, &SYSTEM), SYSTEM.default);
        let p = prompt(&SYSTEM, Some(Value::String("x".into())));
        assert!(p.customized && p.content == "x" && p.default_content == SYSTEM.default);
        assert!(!prompt(&SYSTEM, Some(serde_json::json!(3))).customized);
    }

    #[test]
    fn names_and_texts_are_checked() {
        assert!(check("system.md", "Be brief.").is_ok());
        for (name, content) in [("compaction.md", "x"), ("../system.md", "x"), ("system.md", " "), ("system.md", "")] {
            let e = check(name, content).unwrap_err().to_string();
            assert!(e.contains("system.md") || e.contains("non-empty"), "{name}: {e}");
        }
        assert!(check("system.md", &"x".repeat(MAX_PROMPT_BYTES + 1)).unwrap_err().to_string().contains("64 KiB"));
    }
}
