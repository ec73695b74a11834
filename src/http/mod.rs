//! The HTTP API goose clients speak: server, auth, routes, errors.
//! Invariant: only http/ turns errors into status codes.
pub mod auth;
pub mod config_routes;
pub mod error;
pub mod proxy;
pub mod routes;
pub mod server;
