//! `gosling acp`: the connection on stdin/stdout.

use crate::conn::Conn;
use crate::error::Error;
use crate::protocol::{MAX_LINE, PROTOCOL_VERSION};
use crate::transport::{self, LineReader};
use crate::{goose, session};
use gosling_agent::host::Host;
use std::io;
use std::sync::Arc;

/// Serves ACP on stdin/stdout over the core `main` built (`core::build`) until stdin ends.
pub fn run(app: Arc<Host>) -> Result<(), Error> {
    let conn = Arc::new(Conn::with_outbound(Box::new(transport::LineWriter::new(io::stdout()))));
    let agent = Arc::new(session::Agent::new(app.clone(), conn.clone(), goose::call));
    log::info!("gosling {} serving ACP v{PROTOCOL_VERSION} on stdio", env!("CARGO_PKG_VERSION"));
    let r = transport::serve(&agent, &conn, &mut LineReader::new(io::stdin().lock(), MAX_LINE));
    conn.close();
    agent.shutdown();
    r
}
