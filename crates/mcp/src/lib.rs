//! The MCP client: one `Client` per running extension, over a stdio child or Streamable HTTP.
//! Its tools and tool results are Rust types (`gosling_wire::mcp_types`: `Tool`,
//! `CallToolResult`), read off the JSON once, after the size bound.
//! Invariant: mcp/ never imports http/ or agent/.
#![deny(unsafe_code)]
pub mod client;
pub mod error;
pub mod http_error;
pub mod oauth;
pub mod params;
pub mod schema;
pub mod stdio;
pub mod streamable_http;
pub mod tls_roots;
pub mod transport;

use client::{Client, ClientOptions};

/// Connects to a stdio MCP server: spawn, then initialize.
pub fn connect_stdio(spec: &stdio::StdioSpec, opts: ClientOptions) -> Result<Client, error::Error> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    let transport = stdio::StdioTransport::spawn(spec, &opts.extension, tx)?;
    Client::connect(transport, rx, opts)
}

/// Connects to a Streamable HTTP MCP server and initializes.
pub fn connect_http(spec: &streamable_http::HttpSpec, opts: ClientOptions) -> Result<Client, error::Error> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    let transport = streamable_http::HttpTransport::connect(spec, tx)?;
    Client::connect(transport, rx, opts)
}
