//! MCP Apps for every front end: the `ui://` resources (`text/html;profile=mcp-app`) that the
//! extensions of live sessions offer (Desktop's Apps page, goose's `apps/list`), each with its
//! HTML read once through `resources/read`. gosling keeps no app library of its own: an app is
//! listed while an extension of a live session offers it.

use crate::host::Host;
use gosling_wire::mcp_types::{Resource, ResourceContents};

/// One app: the extension that offers it, its MCP resource, and its HTML (`None` when reading
/// it failed: the app is still listed, and opening it reads it again).
pub struct App {
    pub extension: String,
    pub resource: Resource,
    pub html: Option<String>,
}

/// The apps of session `session`'s extensions, or of every live session's (each app once,
/// by extension and URI) when `None`. A session without a live runtime offers none.
pub fn list(host: &Host, session: Option<&str>) -> Vec<App> {
    let runtimes = match session {
        Some(id) => host.agents.get(id).into_iter().collect(),
        None => host.agents.all(),
    };
    let mut seen = std::collections::HashSet::new();
    let mut apps = Vec::new();
    for rt in runtimes {
        for (extension, resource) in rt.ui_resources() {
            if !seen.insert((extension.clone(), resource.uri.clone())) {
                continue;
            }
            let html = match rt.read_resource(&extension, &resource.uri) {
                Ok(r) => r.contents.into_iter().find_map(|c| match c {
                    ResourceContents::Text(t) => Some(t.text),
                    _ => None,
                }),
                Err(e) => {
                    log::warn!("apps: reading {} of {extension} failed: {e}", resource.uri);
                    None
                }
            };
            apps.push(App { extension, resource, html });
        }
    }
    apps
}
