//! Errors of the session library. Each names the file, line or entry at fault.

use std::path::PathBuf;

use crate::problem::Problem;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: already exists, refusing to overwrite it")]
    Exists { path: PathBuf },
    #[error("{file}: no entry with id {id:?}")]
    EntryNotFound { file: String, id: String },
    #[error("{file}: not a Pi session: {problem}")]
    NotASession { file: String, problem: Problem },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{file}: line {line}: cannot encode entry: {source}")]
    Encode {
        file: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file}: cannot encode a new entry: {source}")]
    Serialize {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("invalid argument: {0}")]
    Argument(String),
}

impl SessionError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
