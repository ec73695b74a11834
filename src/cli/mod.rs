//! Command-line subcommands other than the server itself.
pub mod install;
