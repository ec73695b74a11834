//! Command-line subcommands other than the server itself.
#![deny(unsafe_code)]
pub mod auth;
pub mod install;
pub mod probe;
pub mod probe_http;
