//! The one integration test binary: every test runs the real `gosling` binary.

// The suite drives the fault routes and the conformance client, which only a build with the
// `test-hooks` feature has (release builds leave them out).
#[cfg(not(feature = "test-hooks"))]
compile_error!("the integration tests need the test-hooks feature: run scripts/test (cargo test --workspace --features gosling/test-hooks)");

mod support;

// Validates our bodies against goose's OpenAPI schemas; used by the route tests.
mod contract;

// Command line: --help, --version, unknown commands.
mod cli;

// HTTP foundation: auth, readiness, proxy pages, limits, panics, slow clients, start-up errors.
mod server;

// The HTTP trust boundary: Host check, origins, guessing secrets, request framing.
mod trust_http;

// The WebSocket at /acp: handshake, token, origins, ACP over frames, violations, limits.
mod websocket;
mod websocket_peers;

// HTTPS (the default; `--no-tls` / GOOSE_TLS=false opt out): the fingerprint line, a pinning
// client, certificate files, errors.
mod tls;

// `gosling serve` started as Goose Desktop 1.41+ starts `goose serve`: flags, the secret, the
// fingerprint before /status, the kept certificate.
mod desktop_windows;
mod serve;

// The same Desktop 1.5x ACP sequence to goose serve 1.52 itself and to gosling serve, shapes
// compared; intended differences and open gaps in tests/contract/goose-differences.json.
mod goose_diff;

// Fork and truncate (edit a sent message) over ACP: the conversation cut at a message.
mod history;

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

// `allow_host` links: the approved hosts of a confined extension (issue 36).
mod egress;

// Issue 29, everyday use: session titles, stopped answers, settings in force.
mod everyday;

// Builtin extensions served over stdio: gosling mcp developer|memory.
mod builtins;

// Sessions and the extension runtime with real peers.
mod agent_api;

// Every activation re-checks the trust policy in force (issue 27 finding 7).
mod activation_policy;

// /reply: the turn loop against a scripted fake LLM and llmock, with real MCP tools.
mod reply;

// Issue 40 item 1: a conversation's turns start no thread (kept turn and fetch threads).
mod turn_threads;

// Goose Desktop 1.34's flows over pinned HTTPS: start, open, send (with confirmation), cancel,
// extensions, deep links; the session event stream's replay and followers; elicitation.
mod desktop;

// Install flows over HTTP: deep links with secrets, allowlist on every path.
mod install_http;

// The trust boundary: secrets resolve only from the store and never to gosling's own
// (a recording remote server proves it); launcher, container and environment rules.
mod trust_policy;
// Issue 27: positive grammars for every launcher and interpreter, judged by marker files.
mod trust_grammar;
mod trust_secrets;
// Issue 27: consent bound to a digest of the launch; secrets mapped per extension.
mod trust_consent;
// Issue 36: red team round 4 — jbang subcommands, test runners, python modules, loopback
// guesses, short keys, and the positive environment rule.
mod trust_redteam;

// The official MCP conformance runner against `gosling probe URL`.
mod conformance;

// The MCP client over stdio: real servers, misbehaving fakes, probe.
mod mcp_stdio;
// MCP 2026-07-28 and the fall-back to the legacy revisions (issue 17).
mod mcp2026;

// 10,000 mutated request bodies across every route.
mod fuzz;

// No secret in the log, even at trace level.
mod secrets;

// The fault matrix index, and kill -9 during session writes.
mod faults;

// Sign-in (OAuth) to a protected Streamable HTTP server: over the API, `gosling auth`, probe.
mod oauth;
// The person's side of a sign-in, shared by the OAuth tests.
mod sign_in;
// Sign-in against the Python SDK's own authorization server (issue 28).
mod oauth_sdk;

// `gosling probe`: lists a server lacks, environment for stdio servers, --read, --prompt.
mod probe;

// Client features servers rely on: logging/setLevel, task-only tools, outputSchema checks.
mod client_features;

// The session store: the one-file layout read and migrated, torn and corrupt lines, one owner.
mod sessions_store;

// `gosling acp` driven by the ACP TypeScript SDK's client and acpx, with llmock as the model.
mod acp;

// Issue 37: one session operation, the same outcome and error on every front end (HTTP, ACP).
mod front_ends;

// Issue 37 item 2: a turn run by one process reaches the followers in another, live.
mod live;

// Goose Desktop 1.41+'s ACP sequence, every answer checked against goose's and ACP's schemas.
mod desktop_acp;

// Issue 13: children never see the server's secrets (non-dumpable, allowlisted environment).
mod trust_children;
// Issue 36: stdio extensions confined by the kernel.
mod sandbox;
// Issue 27 finding 12: daemons that double-fork and clear their environment end with their
// extension (each extension runs under a reaper of its own).
mod trust_daemons;

// Issue 27: slow bodies on the routes open without the key never hold the key holders' slots.
mod trust_slots;

// Issue 27 finding 11: OAuth requests only where the MCP server's own origin allows; tokens
// only to the server and issuer they were issued for.
mod oauth_ssrf;

// Issue 13: bounded totals per extension, and no process left behind (setsid grandchildren).
mod trust_limits;

// Issue 13: private state/config dirs, no links followed, the developer builtin stays inside.
mod trust_files;

// Issue 40: idle means idle — no thread of gosling wakes with sessions and extensions open.
mod idle;

// ARCHITECTURE.md invariants read off the source: import direction, who writes files, and
// that every wait has a deadline.
mod layers;
mod waits;
