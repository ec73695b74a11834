//! Building a builtin by name, and serving it on this process's stdio.

use std::sync::Arc;

use crate::error::Error;
use crate::{developer, memory, server};

/// Builds the builtin called `name` from the process environment.
pub fn make(name: &str) -> Result<Arc<dyn server::Builtin>, Error> {
    match name {
        "developer" => Ok(Arc::new(developer::Developer::from_env()?)),
        "memory" => Ok(Arc::new(memory::Memory::from_env()?)),
        _ => Err(Error::Unknown { name: name.to_string() }),
    }
}

/// Serves the builtin `name` on this process's stdin/stdout until stdin reaches EOF.
/// SIGTERM/SIGINT cancel running calls (killing their shell commands) and exit.
pub fn serve(name: &str) -> Result<(), Error> {
    server::serve_stdio(name, make(name)?)
}
