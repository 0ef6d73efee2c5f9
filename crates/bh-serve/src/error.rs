use std::path::PathBuf;

use bh_checkpoint::CheckpointError;

/// What can go wrong around the server: its socket, its peer, a client's
/// connection. Each variant names the path at fault.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "socket path {path} is too long for a Unix socket ({len} bytes, at most 107); use a shorter state directory"
    )]
    PathTooLong { path: PathBuf, len: usize },
    #[error("{context} {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is owned by uid {owner}, not by the current user (uid {me}); refusing to use it"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error("{path} is open to group or others (mode {mode:o}); refusing to use it")]
    Insecure { path: PathBuf, mode: u32 },
    #[error("{path} exists and is not a {expected}; refusing to use it")]
    WrongType {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("the server on {path} runs as uid {uid}, not as the current user (uid {me})")]
    PeerNotOwner { path: PathBuf, uid: u32, me: u32 },
    #[error("another checkpoint server already serves this project (lock {path} is held)")]
    AlreadyRunning { path: PathBuf },
    #[error("no checkpoint server listens on {path}")]
    NoServer { path: PathBuf },
    #[error("the checkpoint server on {path} closed the connection without answering")]
    Closed { path: PathBuf },
    #[error("the checkpoint server on {path} answered with invalid JSON: {source}")]
    BadResponse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

impl ServeError {
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        ServeError::Io {
            context,
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = ServeError> = std::result::Result<T, E>;
