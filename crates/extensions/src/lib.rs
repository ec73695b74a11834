//! Extension configs (goose's shapes), and later their runtime, deep links and policy.
#![deny(unsafe_code)]
pub mod config;
pub mod consent;
pub mod deeplink;
pub mod import;
pub mod policy;
pub mod runtime;
