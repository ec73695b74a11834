//! MCP protocol revisions: the one list both sides of gosling use (the client in `mcp`, the
//! builtin servers in `builtins`).

/// The revision gosling's client asks for, and its servers answer when asked for one they do
/// not know.
pub const PREFERRED: &str = "2025-06-18";

/// Every revision gosling can speak, oldest first; a peer offering one of these is accepted.
pub const KNOWN: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether `version` is one gosling can speak.
pub fn is_known(version: &str) -> bool {
    KNOWN.contains(&version)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_preferred_revision_is_known() {
        assert!(super::is_known(super::PREFERRED));
        assert!(!super::is_known("2099-01-01"));
    }
}
