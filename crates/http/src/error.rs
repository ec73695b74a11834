//! `ApiError`: a status and a message, sent as goose's `{"message": "..."}` body.
//! Invariant: only http/ turns errors into status codes; every mapping is a deliberate match.

use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, message)
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, message)
    }
    pub fn body(&self) -> serde_json::Value {
        json!({ "message": self.message })
    }
}

impl From<gosling_store::atomic::Error> for ApiError {
    fn from(e: gosling_store::atomic::Error) -> ApiError {
        // A store failure is ours (disk, permissions), not the client's.
        log::error!("{e}");
        ApiError::internal(e.to_string())
    }
}

impl From<gosling_extensions::config::ConfigError> for ApiError {
    fn from(e: gosling_extensions::config::ConfigError) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}
