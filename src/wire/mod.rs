//! Pure wire formats: JSON-RPC 2.0 messages and Server-Sent Events. No I/O here.
pub mod jsonrpc;
pub mod sse;
