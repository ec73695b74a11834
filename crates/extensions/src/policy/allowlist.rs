//! The administrator's allowlists: the local file (`GOSLING_ALLOWLIST_FILE`, else
//! `<config dir>/allowlist.json`) and goose's remote `GOOSE_ALLOWLIST` (fetched once, bounded),
//! and how an entry matches: a whole command line (`argv_matches`), a URL prefix ending at a
//! boundary (`url_has_prefix`).

use crate::error::{Error, Unavailable};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest allowlist (remote YAML or local JSON) read, in bytes.
pub const MAX_ALLOWLIST_BYTES: u64 = 1 << 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub(super) struct LocalList {
    pub path: PathBuf,
    pub commands: Option<Vec<String>>,
    pub urls: Option<Vec<String>>,
}

/// Reads the local allowlist file: `(list, allowed_commands)`.
pub(super) fn read_local(path: &Path) -> Result<(LocalList, Vec<String>), Error> {
    let origin = || path.display().to_string();
    let setup = |detail: String| Error::PolicySetup { origin: origin(), detail };
    let meta = std::fs::metadata(path).map_err(|e| {
        setup(format!("cannot read the allowlist file: {e}; create it or unset GOSLING_ALLOWLIST_FILE"))
    })?;
    if meta.len() > MAX_ALLOWLIST_BYTES {
        return Err(setup(format!("is larger than {MAX_ALLOWLIST_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| setup(format!("cannot read the allowlist file: {e}")))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| setup(format!("is not valid JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| setup(r#"must be a JSON object like {"commands": [...], "urls": [...]}"#.into()))?;
    let list = |key: &str| -> Result<Option<Vec<String>>, Error> {
        match obj.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| setup(format!("`{key}` must be a list of non-empty strings")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(setup(format!("`{key}` must be a list of strings"))),
        }
    };
    for k in obj.keys() {
        if !matches!(k.as_str(), "commands" | "urls" | "allowed_commands") {
            return Err(setup(format!("unknown key `{k}`; the file takes `commands`, `urls` and `allowed_commands`")));
        }
    }
    let extra = list("allowed_commands")?.unwrap_or_default();
    for c in &extra {
        if c.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            return Err(setup(format!("allowed_commands: {c:?} is not a command name (no spaces)")));
        }
    }
    let local = LocalList { path: path.to_path_buf(), commands: list("commands")?, urls: list("urls")? };
    Ok((local, extra))
}

/// GETs the allowlist, bounded in time and size.
pub(super) fn fetch(url: &str) -> Result<String, Unavailable> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(Unavailable::NotHttp);
    }
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(FETCH_TIMEOUT))
        .max_redirects(5)
        .build()
        .new_agent();
    let mut resp = agent.get(url).call().map_err(|e| Unavailable::Fetch(e.to_string()))?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(Unavailable::Status(status));
    }
    let body = resp.body_mut().with_config().limit(MAX_ALLOWLIST_BYTES).read_to_string();
    body.map_err(|e| Unavailable::Fetch(e.to_string()))
}

/// Whether the command line `argv` is approved by the allowlist `entry`: the entry's words
/// (split on spaces) must equal argv word for word; a last word `*` stands for any further
/// arguments (zero or more), which rule 2 has checked like any others. Never a string prefix:
/// `uvx mcp-server-fetch` does not approve `uvx mcp-server-fetch-x` nor extra arguments.
pub fn argv_matches(argv: &[&str], entry: &str) -> bool {
    let words: Vec<&str> = entry.split_whitespace().collect();
    match words.split_last() {
        Some((&"*", head)) => argv.len() >= head.len() && argv[..head.len()] == *head,
        Some(_) => argv == words.as_slice(),
        None => false,
    }
}

/// `url` without `user:password@` and without its query and fragment.
pub(super) fn redact_url(url: &str) -> String {
    let (base, rest) = url.split_once(['?', '#']).map_or((url, false), |(b, _)| (b, true));
    let start = base.find("://").map_or(0, |i| i + 3);
    let auth_end = base[start..].find('/').map_or(base.len(), |i| start + i);
    let host = base[start..auth_end].rsplit('@').next().unwrap_or("");
    let creds = if base[start..auth_end].contains('@') { "…@" } else { "" };
    format!("{}{creds}{host}{}{}", &base[..start], &base[auth_end..], if rest { "?…" } else { "" })
}

/// Lower-cases the scheme and authority of a URL (paths stay case-sensitive).
fn normalize_origin(u: &str) -> String {
    let start = u.find("://").map_or(0, |i| i + 3);
    let end = u[start..].find(['/', '?', '#']).map_or(u.len(), |i| start + i);
    format!("{}{}", u[..end].to_ascii_lowercase(), &u[end..])
}

/// `uri` starts with `prefix`, and the prefix ends at a boundary (`/`, `?`, `#` or the end).
pub(super) fn url_has_prefix(uri: &str, prefix: &str) -> bool {
    let (u, p) = (normalize_origin(uri), normalize_origin(prefix));
    if p.is_empty() || !u.starts_with(&p) {
        return false;
    }
    p.ends_with(['/', '?', '#']) || matches!(u[p.len()..].chars().next(), None | Some('/' | '?' | '#'))
}
