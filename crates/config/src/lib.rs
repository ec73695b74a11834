//! Process configuration: where to listen, the shared secret, where files live, limits.
//!
//! Read once at start from goose's environment variables (so Desktop can launch us as it
//! launches goosed) and from our own `GOSLING_*` overrides. A plain struct: every field is
//! set explicitly by `Config::from_env`, there is no `Default`.
//!
//! The root declares the modules and re-exports their items at the crate's top level.
#![deny(unsafe_code)]

mod env;
mod error;
mod process;
pub mod settings;
mod working_dir;

pub use env::{config_dir, state_dir, xdg_dir, Env, ProcessEnv};
pub use error::Error;
pub use process::{Config, SecretSource, TlsConfig};
pub use working_dir::working_dir;
