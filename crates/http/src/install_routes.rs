//! `POST /extensions/install`: the deep-link install flow for UIs (gosling's own route; goose
//! does this in Desktop). Parse and check the link against the policy, persist the config,
//! and say which secrets are missing and how to provide them before it can be activated.
//!
//! Consent (`extensions::consent`): a dry run answers the summary and its `digest`; the real
//! install carries the digest the person approved (`"approve": "sha256:…"`) and is refused
//! with 409 when the link's launch differs from it (or 428 when none is given and the
//! operator's allowlist does not name the launch exactly). The saved entry records the approval.

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use gosling_extensions::consent;
use gosling_extensions::deeplink;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct InstallReq {
    link: String,
    /// Validate and describe only; nothing is saved.
    #[serde(default)]
    dry_run: bool,
    /// The summary's `digest` the person approved; required to save unless allowlisted.
    #[serde(default)]
    approve: Option<String>,
    /// Where the link came from, recorded with the approval: `link` (the default) or `import`
    /// (the page's pasted `mcpServers` snippet, each server turned into its link, as `gosling
    /// import` does). A record only: the same checks apply either way.
    #[serde(default)]
    origin: Option<String>,
}

pub fn install(app: &App, req: &Request) -> Result<Response, ApiError> {
    let r: InstallReq = req.json()?;
    let origin = match r.origin.as_deref() {
        None | Some("link") => consent::Origin::Link,
        Some("import") => consent::Origin::Import,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`origin` {:?} is not one of link or import; leave it out for a link",
                gosling_util::printable(&other.chars().take(64).collect::<String>())
            )))
        }
    };
    let present = |name: &str| app.secret_stored(name);
    let plan = deeplink::plan_install(&r.link, app.policy(), &present)?;
    for w in &plan.warnings {
        log::warn!("install: {w}");
    }
    let mut entry = plan.entry();
    let key = entry.config.key();
    deeplink::check_not_replacing(app.config_extension(&key)?.as_ref(), &entry.config)
        .map_err(|e| ApiError::new(409, e.to_string()))?;
    let how = plan
        .missing_secrets
        .iter()
        .map(|k| format!("POST /config/upsert {{\"key\":\"{k}\",\"value\":\"...\",\"is_secret\":true}}"))
        .collect::<Vec<_>>();
    let next = if entry.enabled {
        "start a session, or add it to one with /agent/add_extension"
    } else if !plan.refused_secrets.is_empty() {
        "it reads gosling's own secrets and cannot be enabled; install a link that gives the extension its own secret under another name"
    } else {
        "set the missing secrets, then enable it with POST /config/extensions and activate it with /agent/add_extension"
    };
    if !r.dry_run {
        // 428 when nothing approved it, 409 when the approval is for another launch.
        consent::check_approval(&entry.config, r.approve.as_deref(), app.policy())?;
        consent::stamp(&mut entry.config, origin);
        let existed = app.keep_config_extension(&entry)?;
        log::info!(
            "install: extension {key} {} (enabled: {})",
            if existed { "updated" } else { "saved" },
            entry.enabled
        );
    }
    Ok(Response::json(
        200,
        &json!({
            "name": entry.config.name(),
            "key": key,
            "saved": !r.dry_run,
            "enabled": entry.enabled,
            "config": entry.config,
            "missing_secrets": plan.missing_secrets,
            "how_to_provide": how,
            "refused_secrets": plan.refused_secrets,
            "next": next,
            "warnings": plan.warnings,
            "digest": plan.summary["digest"],
            "summary": plan.summary,
        }),
    ))
}
