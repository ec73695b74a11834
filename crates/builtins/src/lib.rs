//! Builtin extensions: MCP servers served by this same binary over stdio
//! (`gosling mcp developer`, `gosling mcp memory`).
//!
//! The runtime starts them like any stdio extension (cmd = the current executable, args =
//! `["mcp", NAME]`), so builtin and external servers share one client code path (seed 001
//! §10). This module owns the server loop and the tools; it knows nothing about HTTP,
//! sessions or the extension registry.
#![deny(unsafe_code)]

pub mod developer;
pub mod error;
pub mod memory;
pub mod server;
pub mod text_editor;

pub use error::Error;
pub use server::{launch, ToolOutcome, KNOWN};

use std::sync::Arc;

/// Builds the builtin called `name` from the process environment.
pub fn make(name: &str) -> Result<Arc<dyn server::Builtin>, Error> {
    match name {
        "developer" => Ok(Arc::new(developer::Developer::from_env()?)),
        "memory" => Ok(Arc::new(memory::Memory::from_env()?)),
        _ => Err(Error::Unknown { name: name.to_string() }),
    }
}

/// Serves the builtin `name` on this process's stdin/stdout until stdin reaches EOF.
/// SIGTERM/SIGINT cancel running calls (killing their shell commands) and exit.
pub fn serve(name: &str) -> Result<(), Error> {
    server::serve_stdio(name, make(name)?)
}
