//! Extension configs (goose's shapes), their runtime, deep links, imports, consent and the trust
//! policy. Every fallible function here fails with the one `Error` (`error.rs`).
#![deny(unsafe_code)]
pub mod config;
pub mod consent;
pub mod deeplink;
pub mod egress;
pub mod error;
pub mod import;
pub mod policy;
pub mod runtime;
pub mod sandbox;

pub use error::Error;
