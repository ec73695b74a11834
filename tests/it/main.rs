//! The one integration test binary: every test runs the real `gosling` binary.

mod support;

// Command line: --help, --version, unknown commands.
mod cli;

// Streamable HTTP transport: real peers and misbehaving servers.
mod mcp_http;

// The official MCP conformance runner against `gosling probe URL`.
mod conformance;
