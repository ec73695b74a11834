//! Session agents: the session operations every front end calls (`ops`), the live runtime of
//! each session, keyed by session id, the turn loop, its events and the session event bus, and
//! elicitations. The root only declares the modules and re-exports.
#![deny(unsafe_code)]

pub mod agents;
pub mod apps;
pub mod bus;
pub mod config_ops;
pub mod diagnostics;
pub mod elicit;
pub mod error;
pub mod events;
pub mod extension_set;
pub mod follow;
pub mod history;
pub mod host;
pub mod import;
pub mod later;
pub mod messages;
pub mod ops;
pub mod permissions;
pub mod prompts;
pub mod reply;
pub mod request;
pub mod sampling;
pub mod settings;
pub mod steer;
pub mod title;
pub mod usage;
pub mod working_dir;

pub use agents::{Agents, TurnGuard};
pub use error::Error;
pub use extension_set::{session_extensions, stored_extensions};
pub use request::{also_on_bus, start_request};
