//! A session imported from an export (goose's `session/import`): goose's exported JSON or
//! gosling's own (`Host::export_session`), which are the same document.
//!
//! The file is untrusted: its size is bounded, it is read into the session's types (anything
//! else is refused with where it fails), and only the conversation and its name are taken. What
//! would act on the person's behalf is left behind: the extension set in the file is never
//! started (an import brings a conversation, not the consent to run programs; the imported
//! session takes the extensions the config has switched on, as a new session does), nor its
//! mode (an `auto` would approve every tool call), its recipe, provider and model. Its working
//! dir is kept when it is an existing directory here, else the home directory is used.

use crate::error::Error;
use crate::extension_set;
use crate::host::Host;
use gosling_store::sessions::Session;

/// The largest export read (32 MiB: an export of thousands of messages; half of the largest
/// ACP message, so that the refusal is this one, with its words).
pub const MAX_IMPORT: usize = 32 << 20;

/// Where the import comes from (goose's `SessionImportSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportSource {
    /// Whatever the text is; gosling reads JSON only.
    Auto,
    Json,
    /// A Nostr share link: refused (gosling fetches no shared links).
    Nostr,
}

impl ImportSource {
    /// goose's names; `None` for any other.
    pub fn parse(s: &str) -> Option<ImportSource> {
        match s {
            "auto" => Some(ImportSource::Auto),
            "json" => Some(ImportSource::Json),
            "nostr" => Some(ImportSource::Nostr),
            _ => None,
        }
    }
}

/// The session an import created.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub session_id: String,
    pub message_count: u64,
    pub title: String,
    pub updated_at: String,
    /// The extensions the file named, not started (by name).
    pub left_out: Vec<String>,
}

impl Host {
    /// Imports an exported session as a new one (see the module's rules).
    pub fn import_session(&self, input: &str, source: ImportSource) -> Result<Imported, Error> {
        if source == ImportSource::Nostr {
            return Err(Error::BadImport(
                "gosling does not fetch shared links; export the session as JSON and import that text with source \"json\"".into(),
            ));
        }
        if input.len() > MAX_IMPORT {
            return Err(Error::BadImport(format!(
                "the export is {} bytes; the most gosling imports is {MAX_IMPORT} bytes",
                input.len()
            )));
        }
        let file: Session = serde_json::from_str(input).map_err(|e| {
            Error::BadImport(format!(
                "the text is not an exported session ({e}); paste the whole JSON of goose's or gosling's export"
            ))
        })?;
        let left_out: Vec<String> = extension_set::stored_extensions(&file)
            .iter()
            .map(|v| v.get("name").and_then(|n| n.as_str()).unwrap_or("(unnamed)").to_string())
            .collect();
        let messages = file.conversation.unwrap_or_default();
        let working_dir = match gosling_config::working_dir(&file.working_dir, &gosling_config::ProcessEnv) {
            Ok(d) => d,
            Err(_) => gosling_config::working_dir("~", &gosling_config::ProcessEnv)
                .map_err(|e| Error::BadImport(format!("the export's working dir is not here, and {e}")))?,
        };
        let name = crate::title::check_name(&file.name).unwrap_or_else(|_| "Imported chat".into());
        let set = self.enabled_extensions()?;
        let created = self.sessions.create(&working_dir.display().to_string(), Vec::new()).map_err(Error::Store)?;
        let id = created.id;
        self.sessions.replace_conversation(&id, &messages).map_err(Error::Store)?;
        let title = name.clone();
        let done = self.sessions.update_meta(&id, |s| {
            s.name = title;
            s.user_set_name = file.user_set_name;
            extension_set::store_set(s, &set);
        });
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.clone()))?;
        if !left_out.is_empty() {
            log::info!(
                "session {id} imported; its file's extensions are not started (add them to the session to run them): {}",
                left_out.join(", ")
            );
        }
        let s = self.session_meta(&id)?;
        Ok(Imported {
            session_id: id,
            message_count: s.message_count,
            title: s.name,
            updated_at: s.updated_at,
            left_out,
        })
    }
}
