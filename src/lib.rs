//! gosling: goose's MCP-scope agent server API, synchronous, in one small binary.
//!
//! The layers are the workspace's crates (see ARCHITECTURE.md for the map); this crate is the
//! composition root: [`core`] builds the agent core for every mode, [`agent_cmd`] runs the HTTP
//! server modes. The layers are re-exported under their short names for the integration tests.
#![deny(unsafe_code)]

pub mod agent_cmd;
pub mod core;
mod error;

pub use error::Error;

pub use gosling_acp as acp;
pub use gosling_agent as agent;
pub use gosling_builtins as builtins;
pub use gosling_cli as cli;
pub use gosling_config as config;
pub use gosling_extensions as extensions;
pub use gosling_http as http;
pub use gosling_llm as llm;
pub use gosling_mcp as mcp;
pub use gosling_store as store;
pub use gosling_sys as sys;
pub use gosling_tls as tls;
pub use gosling_util as util;
pub use gosling_web as web;
pub use gosling_wire as wire;
