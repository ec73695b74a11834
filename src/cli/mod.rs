//! Command-line subcommands other than the server itself.
pub mod probe_http;
