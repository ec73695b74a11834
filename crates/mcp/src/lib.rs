//! The MCP client: one `Client` per running extension, over a stdio child or Streamable HTTP.
//! Its tools and tool results are Rust types (`gosling_wire::mcp_types`: `Tool`,
//! `CallToolResult`), read off the JSON once, after the size bound.
//! Invariant: mcp/ never imports http/ or agent/.
#![deny(unsafe_code)]
pub mod client;
mod connect;
pub mod error;
pub mod http_error;
pub mod oauth;
pub mod params;
pub mod schema;
pub mod stdio;
pub mod streamable_http;
pub mod tls_roots;
pub mod transport;

pub use connect::{connect_http, connect_stdio};
