//! MCP protocol revisions: the one list both sides of gosling use (the client in `mcp`, the
//! builtin servers in `builtins`), and how the client tells a server's era from its answer to
//! the modern probe (`server/discover`).
//!
//! Two eras: *legacy* revisions open a session with an `initialize` handshake (2024-11-05 to
//! 2025-11-25); *modern* ones (2026-07-28) have no handshake and carry the version, the client's
//! identity and its capabilities in every request's `_meta`.

use serde_json::{json, Value};

/// The legacy revision gosling's builtin servers answer when asked for one they do not know.
pub const PREFERRED: &str = "2025-06-18";

/// The legacy revision gosling's client asks for in `initialize` (the newest legacy one); it
/// accepts whichever known legacy revision the server answers with.
pub const LEGACY_ASK: &str = "2025-11-25";

/// The modern revision gosling's client speaks when a server offers it.
pub const MODERN: &str = "2026-07-28";

/// Every revision gosling can speak, oldest first; a peer offering one of these is accepted.
pub const KNOWN: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", MODERN];

/// The `_meta` keys of a modern request.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Error codes only a modern server sends: a header that disagrees with the body, a missing
/// client capability, a version it does not serve (with `data.supported`).
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// Whether `version` is one gosling can speak.
pub fn is_known(version: &str) -> bool {
    KNOWN.contains(&version)
}

/// Whether `version` is of the modern era (no handshake).
pub fn is_modern(version: &str) -> bool {
    version >= MODERN
}

/// The `_meta` every modern request carries.
pub fn request_meta(version: &str, client_info: &Value, capabilities: &Value, log_level: &str) -> Value {
    json!({
        META_VERSION: version,
        META_CLIENT_INFO: client_info,
        META_CAPABILITIES: capabilities,
        META_LOG_LEVEL: log_level,
    })
}

/// What the answer to `server/discover` says about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// A modern server that serves `version`; `retry` when the probe asked for another one and
    /// must be sent again with this version.
    Modern { version: String, retry: bool },
    /// A legacy server (or one that offers no modern revision gosling knows): `initialize`,
    /// asking for `version`.
    Legacy { version: String },
}

/// Why the era is what it is, for `gosling probe` and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub era: Era,
    pub why: String,
}

/// The newest revision of `offered` gosling knows, modern ones only or legacy ones only.
fn newest_known(offered: &[&str], modern: bool) -> Option<String> {
    offered.iter().filter(|v| is_known(v) && is_modern(v) == modern).max().map(|v| v.to_string())
}

fn versions(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// Why `server/discover` gave no result.
#[derive(Debug, Clone, Copy)]
pub enum Refusal<'a> {
    /// A JSON-RPC error: its code and `data`.
    Rpc(i64, Option<&'a Value>),
    /// No JSON-RPC answer at all (a timeout, an HTTP status without one), described.
    Other(&'a str),
}

/// The era of a server from its answer to a `server/discover` that asked for `MODERN`. Per
/// the 2026-07-28 versioning rules, a recognized modern error means a modern server (retry
/// with a version it supports); anything else means a legacy one.
pub fn judge_discover(answer: Result<&Value, Refusal<'_>>) -> Judgement {
    let legacy = |why: String| Judgement { era: Era::Legacy { version: LEGACY_ASK.to_string() }, why };
    match answer {
        Ok(result) if !result.get("supportedVersions").is_some_and(Value::is_array) => {
            legacy("legacy: server/discover answered without supportedVersions; initialize".to_string())
        }
        Ok(result) => {
            let offered = versions(result.get("supportedVersions"));
            let shown = offered.join(", ");
            if offered.contains(&MODERN) {
                Judgement {
                    era: Era::Modern { version: MODERN.to_string(), retry: false },
                    why: format!("server/discover offered {shown}"),
                }
            } else if let Some(v) = newest_known(&offered, true) {
                Judgement {
                    era: Era::Modern { version: v, retry: true },
                    why: format!("server/discover offered {shown}"),
                }
            } else {
                let version = newest_known(&offered, false).unwrap_or_else(|| LEGACY_ASK.to_string());
                Judgement {
                    era: Era::Legacy { version },
                    why: format!("server/discover offered only {shown}; initialize"),
                }
            }
        }
        Err(Refusal::Rpc(UNSUPPORTED_VERSION, data)) => {
            let offered = versions(data.and_then(|d| d.get("supported")));
            let shown = offered.join(", ");
            match newest_known(&offered, true) {
                Some(v) => Judgement {
                    era: Era::Modern { version: v, retry: true },
                    why: format!("server/discover: {MODERN} unsupported, the server offered {shown}"),
                },
                None => Judgement {
                    era: Era::Legacy {
                        version: newest_known(&offered, false).unwrap_or_else(|| LEGACY_ASK.to_string()),
                    },
                    why: format!("server/discover: the server offered only {shown}; initialize"),
                },
            }
        }
        Err(Refusal::Rpc(code @ (HEADER_MISMATCH | MISSING_CAPABILITY), _)) => Judgement {
            era: Era::Modern { version: MODERN.to_string(), retry: false },
            why: format!("server/discover answered the modern error {code}"),
        },
        Err(Refusal::Rpc(code, _)) => legacy(format!("legacy: server/discover answered {code}; initialize")),
        Err(Refusal::Other(what)) => legacy(format!("legacy: server/discover got {what}; initialize")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_revisions_are_known() {
        assert!(is_known(PREFERRED) && is_known(MODERN));
        assert!(!is_known("2099-01-01"));
        assert!(is_modern(MODERN) && !is_modern(PREFERRED) && !is_modern("2025-11-25"));
    }

    #[test]
    fn a_discover_result_offering_the_modern_revision_is_modern() {
        let r = json!({"supportedVersions": ["2026-07-28", "2025-11-25"], "capabilities": {}});
        let j = judge_discover(Ok(&r));
        assert_eq!(j.era, Era::Modern { version: MODERN.into(), retry: false });
        assert!(j.why.contains("2026-07-28, 2025-11-25"), "{}", j.why);
    }

    #[test]
    fn a_discover_result_offering_only_legacy_revisions_initializes_with_the_newest_known() {
        let r = json!({"supportedVersions": ["2025-03-26", "2025-11-25", "2030-01-01"]});
        assert_eq!(judge_discover(Ok(&r)).era, Era::Legacy { version: "2025-11-25".into() });
    }

    #[test]
    fn unsupported_version_is_a_modern_server_unless_it_offers_no_modern_revision() {
        let data = json!({"supported": ["2026-07-28"], "requested": "x"});
        let j = judge_discover(Err(Refusal::Rpc(UNSUPPORTED_VERSION, Some(&data))));
        assert_eq!(j.era, Era::Modern { version: MODERN.into(), retry: true });
        let data = json!({"supported": ["2025-06-18"]});
        let j = judge_discover(Err(Refusal::Rpc(UNSUPPORTED_VERSION, Some(&data))));
        assert_eq!(j.era, Era::Legacy { version: "2025-06-18".into() });
    }

    #[test]
    fn a_result_that_is_not_a_discover_result_is_a_legacy_server() {
        let r = json!({"protocolVersion": "2025-06-18", "capabilities": {}});
        assert_eq!(judge_discover(Ok(&r)).era, Era::Legacy { version: LEGACY_ASK.into() });
    }

    #[test]
    fn any_other_error_or_silence_is_a_legacy_server() {
        let j = judge_discover(Err(Refusal::Rpc(-32601, None)));
        assert_eq!(j.era, Era::Legacy { version: LEGACY_ASK.into() });
        assert!(j.why.contains("-32601"), "{}", j.why);
        let j = judge_discover(Err(Refusal::Other("HTTP 400")));
        assert_eq!(j.era, Era::Legacy { version: LEGACY_ASK.into() });
        assert!(j.why.contains("HTTP 400"), "{}", j.why);
        let j = judge_discover(Err(Refusal::Rpc(MISSING_CAPABILITY, None)));
        assert!(matches!(j.era, Era::Modern { .. }));
    }
}
