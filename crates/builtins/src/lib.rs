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
mod names;
pub mod server;
mod start;
pub mod text_editor;

pub use error::Error;
pub use names::KNOWN;
pub use server::{launch, ToolOutcome};
pub use start::{make, serve};
