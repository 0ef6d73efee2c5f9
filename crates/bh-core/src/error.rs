//! Errors of the loop. Model and tool failures are not errors (they are
//! messages); only what stops the loop from persisting is.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CoreError {
    /// The session file could not be read or appended to.
    #[error("session {file}: {source}")]
    Session {
        file: String,
        #[source]
        source: bh_session::SessionError,
    },
    /// A stored message could not be turned into model input.
    #[error("session {file}: entry {entry}: {message}")]
    History {
        file: String,
        entry: String,
        message: String,
    },
    /// A message could not be serialised.
    #[error("cannot serialise a message: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A blocking task (tool call, checkpoint) panicked or was cancelled.
    #[error("a {what} task failed: {message}")]
    Task { what: &'static str, message: String },
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;
