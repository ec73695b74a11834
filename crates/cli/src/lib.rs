//! Command-line subcommands other than the server itself.
#![deny(unsafe_code)]
pub mod auth;
/// The conformance runner's client: test builds only.
#[cfg(feature = "test-hooks")]
pub mod conformance;
pub mod install;
pub mod probe;
