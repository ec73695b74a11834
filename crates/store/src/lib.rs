//! Everything that touches files: atomic JSON writes, the config store, sessions (and goose's
//! message types, which the sessions persist).
//! Invariant: only store/ writes files, and every write is tmp + fsync + rename (but the
//! search summaries, a cache checked against the files it summarizes: tmp + rename).
#![deny(unsafe_code)]
pub mod atomic;
pub mod audit;
pub mod config_store;
pub mod message;
pub mod search;
mod search_index;
pub mod secret_key;
pub mod sessions;
