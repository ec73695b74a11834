//! The one integration test binary: every test runs the real `gosling` binary.

mod support;

// Validates our bodies against goose's OpenAPI schemas; used by the route tests.
mod contract;

// Command line: --help, --version, unknown commands.
mod cli;

// HTTP foundation: auth, readiness, proxy pages, limits, panics, slow clients, start-up errors.
mod server;

// HTTPS (`--tls`): the fingerprint line, a pinning client, certificate files, errors.
mod tls;

// /config/extensions and the key/value config routes.
mod config_api;

// LLM providers against a scripted fake LLM and llmock.
mod fake_llm;
mod llm;
mod llmock;

// Streamable HTTP transport: real peers and misbehaving servers.
mod mcp_http;

// goose:// links: the table of links and outcomes, via the library and `install --check`.
mod deeplink;

// `gosling install` / `gosling import`: confirmation, persistence, secrets, allowlists.
mod install_cli;
mod web;

// Builtin extensions served over stdio: gosling mcp developer|memory.
mod builtins;

// Sessions and the extension runtime with real peers.
mod agent_api;

// /reply: the turn loop against a scripted fake LLM and llmock, with real MCP tools.
mod reply;

// Install flows over HTTP: deep links with secrets, allowlist on every path.
mod install_http;

// The official MCP conformance runner against `gosling probe URL`.
mod conformance;

// The MCP client over stdio: real servers, misbehaving fakes, probe.
mod mcp_stdio;

// 10,000 mutated request bodies across every route.
mod fuzz;

// No secret in the log, even at trace level.
mod secrets;

// The fault matrix index, and kill -9 during session writes.
mod faults;

// Issue 13: children never see the server's secrets (non-dumpable, allowlisted environment).
mod trust_children;

// Issue 13: bounded totals per extension, and no process left behind (setsid grandchildren).
mod trust_limits;

// Issue 13: private state/config dirs, no links followed, the developer builtin stays inside.
mod trust_files;
