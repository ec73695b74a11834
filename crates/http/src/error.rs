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

/// Every failure of the extensions layer: what the client can fix is a 4xx (a refusal of the
/// policy 403, a missing or changed approval 428 and 409, a server that needs someone to sign
/// in 424 with the URL to open, a tool the client runs itself 424), what is ours a 500.
impl From<gosling_extensions::Error> for ApiError {
    fn from(e: gosling_extensions::Error) -> ApiError {
        use gosling_extensions::Error as E;
        let status = match &e {
            E::Config { .. }
            | E::Link { .. }
            | E::Import { .. }
            | E::ImportJson(_)
            | E::PolicyConfig(_)
            | E::InvalidConfig(_) => 400,
            E::Refused(_) | E::NotStarted(_) => 403,
            E::ConsentNeeded { .. } => 428,
            E::ConsentChanged { .. } | E::ConsentMalformed { .. } => 409,
            E::UnknownTool(_) | E::UnknownExtension(_) => 404,
            // goose's 424: the tool belongs to the client.
            E::FrontendTool(_) => 424,
            // Its server needs someone to sign in (again): the message carries the URL to open.
            E::Start(error) if needs_sign_in(error) => 424,
            E::Mcp { error, .. } if needs_sign_in(error) => 424,
            // The extension is down for now; a retry later may work.
            E::Restarting { .. } => 503,
            E::Store(_) => {
                log::error!("{e}");
                500
            }
            E::PolicySetup { .. } | E::Start(_) | E::Mcp { .. } | E::Panicked | E::Thread(_) | E::Script(_) => 500,
        };
        ApiError::new(status, e.to_string())
    }
}

fn needs_sign_in(e: &gosling_mcp::error::Error) -> bool {
    matches!(
        e,
        gosling_mcp::error::Error::Http { failure: gosling_mcp::http_error::HttpFailure::SignInRequired { .. }, .. }
    )
}

/// Every failure of a session operation (`agent::ops`) or a turn: the client's mistakes 4xx,
/// what is ours 500.
impl From<gosling_agent::Error> for ApiError {
    fn from(e: gosling_agent::Error) -> ApiError {
        use gosling_agent::Error as E;
        match e {
            E::SessionNotFound(_) | E::NotConfigured(_) => ApiError::not_found(e.to_string()),
            // goose's "Agent not initialized".
            E::NoAgent(_) => ApiError::new(424, e.to_string()),
            // The provider settings are the client's to set.
            E::Model(_)
            | E::BadKey(_)
            | E::UnknownMode(_)
            | E::MissingSecrets { .. }
            | E::BadName(_)
            | E::BadPermission(_)
            | E::UnknownProvider(_)
            | E::NoModel
            | E::BadWorkingDir(_)
            | E::BadImport(_) => ApiError::bad_request(e.to_string()),
            E::Busy(_) | E::RequestActive => ApiError::bad_request(e.to_string()),
            // A steer for a run that has ended: the client sends a new message instead.
            E::Steer(_) => ApiError::new(409, e.to_string()),
            E::Refused(e) | E::Extensions(e) | E::NotStarted { error: e, .. } => ApiError::from(*e),
            E::SaveMessage(e) | E::Store(e) => ApiError::from(e),
            E::OutOfTurns(_) => ApiError::internal(e.to_string()),
        }
    }
}
