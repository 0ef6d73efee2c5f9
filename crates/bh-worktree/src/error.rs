//! Errors of the worktree library; each names the worktree, path or command at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
    #[error(transparent)]
    Checkpoint(#[from] bh_checkpoint::CheckpointError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("invalid worktree name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    #[error("{0}")]
    Usage(String),
    #[error("{path} is not inside a Git working tree")]
    NotARepository { path: PathBuf },
    #[error("worktree {name:?} is busy: {detail}")]
    Busy { name: String, detail: String },
    #[error("no worktree named {name:?}")]
    NotFound { name: String },
    #[error("{what} not found: {detail}")]
    Missing { what: String, detail: String },
    /// The kind (refused) is the error's class, not part of its text: the
    /// CLI and the Pi extension print the kind beside the message.
    #[error("{0}")]
    Refused(String),
    #[error("post-create command {index} ({command:?}) failed ({status}); log: {log}")]
    PostCreateFailed {
        index: usize,
        command: String,
        status: String,
        log: PathBuf,
    },
}

impl WorktreeError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        WorktreeError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = WorktreeError> = std::result::Result<T, E>;
