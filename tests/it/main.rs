//! The one integration test binary: every test runs the real `gosling` binary.

mod support;

// Command line: --help, --version, unknown commands.
mod cli;

// Builtin extensions served over stdio: gosling mcp developer|memory.
mod builtins;
