//! The MCP client: one `Client` per running extension, over a stdio child or Streamable HTTP.
//! Invariant: mcp/ never imports http/ or agent/.
pub mod error;
pub mod transport;
pub mod http_error;
pub mod streamable_http;
