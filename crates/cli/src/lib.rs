//! Command-line subcommands other than the server itself.
#![deny(unsafe_code)]
pub mod auth;
/// The conformance runner's client: test builds only.
#[cfg(feature = "test-hooks")]
pub mod conformance;
pub mod install;
pub mod manage;
pub mod open;
pub mod probe;
mod probe_main;

pub use open::Opener;
pub use probe_main::probe_main;
