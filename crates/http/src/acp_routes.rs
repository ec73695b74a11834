//! `/acp`: the Agent Client Protocol over a WebSocket, as `goose serve` offers it to goose
//! Desktop (1.35+). `routes::handle` has already checked the Host, the origin (the `/acp`
//! rules of `routes::origin_allowed`) and the token (`X-Secret-Key` or `?token=`, before any
//! upgrade); this checks the upgrade itself and hands the connection to `http::websocket`,
//! which runs one ACP connection (`acp::transport::serve_connection`) per socket.

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use crate::websocket;
use gosling_wire::websocket as ws;
use std::sync::Arc;

/// Response headers a browser page may read (Desktop reads the connection id).
const EXPOSED: &str = "Acp-Connection-Id, Acp-Session-Id";

/// `GET /acp`: a WebSocket upgrade; without one, 406 (Desktop's external-backend probe: "the
/// token is right, the Accept is not").
pub fn get(app: &Arc<App>, req: &Request) -> Result<Response, ApiError> {
    let header = |name: &str| req.header(name).map(str::to_string);
    if !ws::wants_upgrade(&header) {
        let sse = req.header("accept").is_some_and(|a| a.to_ascii_lowercase().contains("text/event-stream"));
        return Err(if sse {
            ApiError::new(
                501,
                "gosling serves ACP at /acp over a WebSocket only (no HTTP+SSE transport); connect with `Upgrade: websocket`",
            )
        } else {
            ApiError::new(
                406,
                "client must accept text/event-stream, or open a WebSocket (`Upgrade: websocket`) for ACP",
            )
        });
    }
    let accept = ws::check_upgrade(req.method, &header).map_err(|e| {
        let version = matches!(e, gosling_wire::Error::Version(_));
        (ApiError::bad_request(e.to_string()), version)
    });
    let accept = match accept {
        Ok(a) => a,
        Err((e, true)) => {
            return Ok(Response::error(&e).with_header("Sec-WebSocket-Version", ws::VERSION));
        }
        Err((e, false)) => return Err(e),
    };
    let id = connection_id();
    let peer = req.peer.map(|p| p.to_string()).unwrap_or_default();
    log::info!("websocket {id}: ACP connection from {peer}");
    let host = app.host.clone();
    // A client silent for the socket timeout is pinged, and closed when it stays silent as long
    // again; a client that reads nothing for twice that stalls its senders for good.
    let t = app.config().io_timeout;
    let limits = websocket::Limits { ping_idle: t, pong_wait: t, stall: t * 2, ..Default::default() };
    let headers = vec![
        ("Upgrade".to_string(), "websocket".to_string()),
        ("Sec-WebSocket-Accept".to_string(), accept),
        ("Acp-Connection-Id".to_string(), id.clone()),
        ("Access-Control-Expose-Headers".to_string(), EXPOSED.to_string()),
    ];
    Ok(Response::upgrade(
        headers,
        Box::new(move |stream, fd| {
            websocket::drive(stream, fd, &id, limits, move |inbox, sender| {
                gosling_acp::transport::serve_connection(host, Box::new(sender), inbox)
            })
        }),
    ))
}

/// A random id in the UUID v4 form goose uses for `Acp-Connection-Id`.
fn connection_id() -> String {
    let mut b = gosling_util::random_bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = gosling_util::hex(&b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}
