//! Pure wire formats: JSON-RPC 2.0 messages, MCP data types (`mcp_types`: tools, tool results,
//! resources, prompts and their content; `fields`: the field-by-field JSON object codec it and
//! `store::message` share), Server-Sent Events, MCP protocol revisions, percent-decoding, the `${VAR}`
//! grammar, the WebSocket codec (RFC 6455) and the one JSON-RPC peer (`peer.rs`: ids, pending
//! calls, cancellation, sending through a trait). No I/O here.
#![deny(unsafe_code)]
mod error;
pub mod fields;
pub mod jsonrpc;
pub mod mcp_types;
pub mod mcp_version;
pub mod peer;
pub mod percent;
pub mod sse;
pub mod template;
pub mod websocket;

pub use error::Error;
