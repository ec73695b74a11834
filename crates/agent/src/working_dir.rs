//! A session's working directory changed (goosed's `/agent/update_working_dir`, goose's
//! `session/working-dir/update`): checked, kept on the session, and the session's extensions
//! moved there.
//!
//! The running extension processes start again in the new dir (their shell, their relative
//! paths and, when confined, the dir their confinement grants follow it) at the session's next
//! use of its extensions that finds no call under way: a call under way is never cut
//! (`SessionRuntime::move_to`). goosed restarted them at once; goose 1.52 keeps them and sends
//! the dir with each call instead, which a confined process could not reach.

use crate::error::Error;
use crate::host::Host;
use std::path::PathBuf;

impl Host {
    /// Moves session `id` to `dir`: absolute (or `~/…`), existing, a directory. The dir as kept.
    pub fn update_working_dir(&self, id: &str, dir: &str) -> Result<String, Error> {
        let checked = gosling_config::working_dir(dir, &gosling_config::ProcessEnv).map_err(Error::BadWorkingDir)?;
        let kept = checked.display().to_string();
        let done = self.sessions.update_meta(id, |s| s.working_dir = kept.clone());
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        if let Some(rt) = self.agents.get(id) {
            rt.move_to(PathBuf::from(&kept));
        }
        log::info!("session {id}: working dir {kept}");
        Ok(kept)
    }
}
