//! The builtins' names: a leaf, so the error's message and the server both read it.

/// The builtin extensions this binary can serve, in the order error messages list them.
pub const KNOWN: &[&str] = &["developer", "memory"];
