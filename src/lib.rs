//! gosling: goose's MCP-scope agent server API, synchronous, in one small binary.
//!
//! Modules in reading order: pure formats first, then storage, the MCP client, extensions,
//! the HTTP front. See ARCHITECTURE.md for the map.
#![deny(unsafe_code)]

pub mod config;
pub mod sys;
pub mod wire;
pub mod store;
pub mod mcp;
pub mod extensions;
pub mod util;
pub mod tls;
pub mod http;
pub mod web;
pub mod agent;
pub mod app;
pub mod agent_cmd;
pub mod llm;
pub mod cli;
pub mod builtins;
