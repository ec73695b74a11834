//! The composition root's one builder: the agent core (config, stores, trust policy, `Host`)
//! for every mode (`agent`, `serve`, `acp`), and the process hardening every server mode gets.
//!
//! Owns: which stores are opened in which order, the checks on the state and config dirs, and
//! the process-wide hardening (non-dumpable, child subreaper, descriptor limit). It does not
//! bind, print or serve: the front ends do (`agent_cmd`, `acp`). Imported by `main.rs` and
//! `agent_cmd.rs` only.

use crate::Error;
use gosling_agent::host::Host;
use gosling_config::{Config, ProcessEnv};
use gosling_extensions::policy::Policy;
use gosling_store::config_store::ConfigStore;
use gosling_store::sessions::SessionStore;
use std::sync::Arc;

/// What the hardening left in force.
#[derive(Debug, Clone, Copy)]
pub struct Hardened {
    /// The soft descriptor limit after raising it to the hard one.
    pub fd_limit: usize,
}

/// The process hardening of every server mode (`agent`, `serve`, `acp`): no other process of
/// this user reads our environment or memory (the server key and provider keys live there),
/// descendants of extensions that leave their process group become ours to end, and the
/// descriptor limit is raised (children get the original back). Failures are logged: the
/// server still runs, with the weaker guarantee named.
pub fn harden() -> Hardened {
    if let Err(e) = gosling_sys::make_non_dumpable() {
        log::warn!("cannot make the server non-dumpable ({e}); same-user processes can read its environment");
    }
    if let Err(e) = gosling_sys::become_subreaper() {
        log::warn!("cannot become a child subreaper ({e}); an extension's daemons may outlive it");
    }
    // One probe for the start: what it logs and whether stdio extensions can be confined.
    let kernel = gosling_sys::probe();
    if gosling_config::settings::unconfined(&ProcessEnv) {
        log::warn!(
            "sandbox: GOSLING_UNCONFINED is set: stdio extensions run UNCONFINED, with every right of this user ({})",
            kernel.describe()
        );
    } else if let Some(missing) = gosling_extensions::runtime::kernel_missing_in(kernel) {
        log::warn!("sandbox: this kernel lacks {missing}: stdio extensions are not started unless opted out (\"sandbox\": {{\"unconfined\": true}}, or GOSLING_UNCONFINED=1)");
    } else {
        log::info!("sandbox: stdio extensions run confined ({})", kernel.describe());
        if gosling_sys::euid() == 0 {
            // The kernel never holds root to RLIMIT_NPROC: a pids cgroup does, where one can be made.
            match gosling_extensions::runtime::root_process_limit() {
                Ok(dir) => log::info!(
                    "sandbox: running as root: each extension's process limit is a pids cgroup under {}",
                    dir.display()
                ),
                Err(why) => log::warn!(
                    "sandbox: running as root, an extension's process limit (sandbox.processes) does NOT hold: the kernel exempts root from RLIMIT_NPROC and {why}; run gosling as an unprivileged user, or where it may make pids cgroups"
                ),
            }
        }
    }
    Hardened { fd_limit: gosling_sys::raise_fd_limit() }
}

/// The state and config dirs must be ours alone, and the files gosling keeps there must not be
/// symbolic links (the opens refuse links too; this names the problem at start).
pub fn check_dirs(cfg: &Config) -> Result<(), Error> {
    use gosling_store::atomic::{check_private_dir, refuse_symlinks};
    check_private_dir(&cfg.state_dir).map_err(Error::Store)?;
    check_private_dir(&cfg.config_dir).map_err(Error::Store)?;
    refuse_symlinks(&cfg.state_dir, &["audit.jsonl", "secret-key", "sessions"]).map_err(Error::Store)?;
    refuse_symlinks(
        &cfg.config_dir,
        &["config.json", "config.json.lock", "secrets.json", "secrets.json.lock", "allowlist.json", "tls"],
    )
    .map_err(Error::Store)
}

/// The core every front end runs on: the dirs checked, the config store, the session store,
/// the trust policy (fetching GOOSE_ALLOWLIST once) and the `Host` over them.
pub fn build(cfg: Config) -> Result<Arc<Host>, Error> {
    build_with_first_run(cfg, serde_json::Map::new())
}

/// `build` with what a missing `config.json` holds (`ConfigStore::with_first_run`:
/// `gosling agent`'s first start, saved once it serves).
pub fn build_with_first_run(
    cfg: Config,
    first_run: serde_json::Map<String, serde_json::Value>,
) -> Result<Arc<Host>, Error> {
    check_dirs(&cfg)?;
    // The private temp dirs of confined extensions whose gosling is gone (killed, crashed).
    gosling_extensions::runtime::sweep_stale_tmp(&cfg.state_dir);
    let store = ConfigStore::open(&cfg.config_dir).map_err(Error::Store)?.with_first_run(first_run);
    let sessions = SessionStore::open(&cfg.state_dir).map_err(Error::Store)?;
    let policy =
        Policy::new(gosling_config::settings::trust_policy(&ProcessEnv), &cfg.config_dir).map_err(Error::Policy)?;
    let host = Arc::new(Host::new(cfg, store, sessions, policy));
    host.start_idle_reaper();
    Ok(host)
}
