//! The HTTP API goose clients speak: server, auth, routes, errors.
//! Invariant: only http/ turns errors into status codes.
#![deny(unsafe_code)]
pub mod acp_routes;
pub mod agent_routes;
pub mod auth;
pub mod config_routes;
pub mod desktop_routes;
pub mod error;
pub mod install_routes;
pub mod proxy;
pub mod reply_routes;
pub mod routes;
pub mod server;
pub mod session_routes;
pub mod state;
pub mod web_routes;
pub mod websocket;
