//! Everything that touches files: atomic JSON writes, the config store, sessions.
//! Invariant: only store/ writes files, and every write is tmp + fsync + rename.
#![deny(unsafe_code)]
pub mod atomic;
pub mod audit;
pub mod config_store;
pub mod secret_key;
pub mod sessions;
