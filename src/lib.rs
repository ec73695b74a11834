//! gosling: goose's MCP-scope agent server API, synchronous, in one small binary.
//!
//! Modules in reading order: pure formats first, then storage, the MCP client, extensions,
//! the HTTP front. See ARCHITECTURE.md for the map.
#![deny(unsafe_code)]

pub mod acp;
pub mod agent;
pub mod agent_cmd;
pub mod builtins;
pub mod cli;
pub mod config;
pub mod core;
pub mod extensions;
pub mod http;
pub mod llm;
pub mod mcp;
pub mod store;
pub mod sys;
pub mod tls;
pub mod util;
pub mod web;
pub mod wire;
