//! Errors of a session's move between checkouts; each names the session,
//! record or worktree at fault and keeps its source. The worktree side's
//! failures (a busy claim, an unknown or unready worktree, a bad name) are
//! `bh-worktree`'s own errors, wrapped.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error(transparent)]
    Worktree(#[from] bh_worktree::WorktreeError),
    #[error(transparent)]
    Session(#[from] bh_session::SessionError),
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{what} not found: {detail}")]
    Missing { what: String, detail: String },
    /// The kind (refused) is the error's class, not part of its text: the
    /// CLI and the Pi extension print the kind beside the message.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Key(Box<bh_fs::key::KeyError>),
    #[error("the prepared session {path} failed verification: {reason}")]
    Verification { path: PathBuf, reason: String },
}

impl HandoffError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        HandoffError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = HandoffError> = std::result::Result<T, E>;
