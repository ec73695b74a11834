//! Starting a client: the transport, then `initialize`.

use crate::client::{Client, ClientOptions};
use crate::{error, stdio, streamable_http};

/// Connects to a stdio MCP server: spawn, then initialize.
pub fn connect_stdio(spec: &stdio::StdioSpec, opts: ClientOptions) -> Result<Client, error::Error> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    let transport = stdio::StdioTransport::spawn(spec, &opts.extension, tx)?;
    Client::connect(transport, rx, opts)
}

/// Connects to a Streamable HTTP MCP server and initializes.
pub fn connect_http(spec: &streamable_http::HttpSpec, opts: ClientOptions) -> Result<Client, error::Error> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    let transport = streamable_http::HttpTransport::connect(spec, tx)?;
    Client::connect(transport, rx, opts)
}
