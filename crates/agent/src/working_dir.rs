//! A session's working directory changed (goose's `session/working-dir/update`): checked,
//! kept on the session, and given to its running extensions for their next start.
//!
//! The running extensions are not restarted: a restart would end their calls under way and
//! lose what they hold. A process started before the change keeps the dir it started in; every
//! extension started after it (one added, a restart after a crash or an idle stop, the next
//! load of the session) starts in the new one.

use crate::error::Error;
use crate::host::Host;
use std::path::PathBuf;

impl Host {
    /// Moves session `id` to `dir`: absolute (or `~/…`), existing, a directory. The dir as kept.
    pub fn update_working_dir(&self, id: &str, dir: &str) -> Result<String, Error> {
        let checked = gosling_config::working_dir(dir, &gosling_config::ProcessEnv)
            .map_err(|e| Error::BadWorkingDir(e.to_string()))?;
        let kept = checked.display().to_string();
        let done = self.sessions.update_meta(id, |s| s.working_dir = kept.clone());
        done.map_err(Error::Store)?.ok_or_else(|| Error::SessionNotFound(id.into()))?;
        if let Some(rt) = self.agents.get(id) {
            rt.set_working_dir(PathBuf::from(&kept));
        }
        log::info!("session {id}: working dir {kept}");
        Ok(kept)
    }
}
