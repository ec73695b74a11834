//! The one integration test binary: every test runs the real `gosling` binary.

mod support;

// Command line: --help, --version, unknown commands.
mod cli;

// goose:// links: the table of links and outcomes, via the library and `install --check`.
mod deeplink;

// `gosling install` / `gosling import`: confirmation, persistence, secrets, allowlists.
mod install_cli;
