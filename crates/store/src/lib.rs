//! Everything that touches files: atomic JSON writes, the config store, sessions (and goose's
//! message types, which the sessions persist).
//! Invariant: only store/ writes files, and every write is tmp + fsync + rename.
#![deny(unsafe_code)]
pub mod atomic;
pub mod audit;
pub mod config_store;
pub mod message;
pub mod search;
pub mod secret_key;
pub mod sessions;
