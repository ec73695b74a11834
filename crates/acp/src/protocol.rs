//! ACP's numbers gosling answers with: the protocol version, its error codes, the longest
//! message read, and the invalid-params error every method uses.

use gosling_wire::jsonrpc::{self, ErrorObject};

/// The protocol version gosling speaks (ACP v1).
pub const PROTOCOL_VERSION: u64 = 1;
/// ACP's "authentication required" (the provider is not configured).
pub const AUTH_REQUIRED: i64 = -32000;
/// ACP's "resource not found" (an unknown session).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// The longest message read from the client, a stdio line or a WebSocket message (prompts
/// can embed whole files and images).
pub const MAX_LINE: usize = 64 << 20;

/// JSON-RPC's invalid params, with what to fix.
pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(jsonrpc::INVALID_PARAMS, message)
}
