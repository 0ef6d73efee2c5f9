use std::path::PathBuf;

use bh_git::GitError;
use bh_protocol::prefix::PrefixFault;

/// Everything that can go wrong with a checkpoint store. Each variant names the
/// path, checkpoint or argument at fault.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(
        "checkpoint store folder {path} is owned by uid {owner}, not by the current user (uid {me}); refusing to use it"
    )]
    StoreNotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "checkpoint store folder {path} is open to group or others (mode {mode:o}); refusing to use it (fix with: chmod go-w {path}, or chmod 700 for the store itself)"
    )]
    StoreInsecure { path: PathBuf, mode: u32 },
    #[error(
        "checkpoint store path {path} is a symbolic link; refusing to follow it (a store is reached through real folders only)"
    )]
    StoreSymlink { path: PathBuf },
    #[error(
        "checkpoint store {store} and project {project} overlap (one contains the other): a store cannot live inside the project it protects"
    )]
    Overlap { store: PathBuf, project: PathBuf },
    #[error("checkpoint store {store} belongs to project {recorded}, not {project}")]
    StoreMismatch {
        store: PathBuf,
        recorded: String,
        project: PathBuf,
    },
    #[error("project directory {path} cannot be used: {reason}")]
    BadProject { path: PathBuf, reason: String },
    /// A checkpoint id that names no single checkpoint (the one prefix
    /// rule of `bh_protocol::prefix`).
    #[error("{0}; `latest` names the newest, `bh checkpoint list` shows them")]
    Id(#[from] bh_protocol::prefix::PrefixError),
    /// A checkpoint a session or the call journal names for a call, which the
    /// store no longer has: refused rather than answered with another.
    #[error(
        "the checkpoint {checkpoint} taken before {call} is gone (pruned?, or another project's)"
    )]
    CallCheckpointGone { checkpoint: String, call: String },
    #[error("path {path} is outside the project {project}")]
    PathOutside { path: String, project: PathBuf },
    #[error("path {path} is not in checkpoint {id}")]
    PathNotInCheckpoint { path: String, id: String },
    #[error(
        "restoring {path} would replace the directory {path} and files in it that no checkpoint holds ({examples}); move them away first"
    )]
    DirectoryConflict { path: String, examples: String },
    /// Session paths someone else changed since the session's last call.
    #[error(
        "rewind refused: {count} path(s) changed by someone else since the session's last change: {paths}; nothing was changed (take them anyway with --force PATH, or --force for all)"
    )]
    RewindConflict { count: usize, paths: String },
    #[error("cannot move {name} back: {detail}")]
    RefMove { name: String, detail: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint store {store} is damaged: {detail}")]
    Corrupt { store: PathBuf, detail: String },
}

impl CheckpointError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CheckpointError::Io {
            context: context.into(),
            source,
        }
    }

    /// The broad class of this error, for exit codes.
    pub fn class(&self) -> ErrorClass {
        use CheckpointError::*;
        match self {
            StoreNotOwned { .. }
            | StoreInsecure { .. }
            | StoreSymlink { .. }
            | Overlap { .. }
            | StoreMismatch { .. }
            | BadProject { .. }
            | PathOutside { .. }
            | DirectoryConflict { .. }
            | RewindConflict { .. }
            | RefMove { .. } => ErrorClass::Refused,
            Id(e) => match e.fault() {
                PrefixFault::NotHex | PrefixFault::TooShort => ErrorClass::Usage,
                PrefixFault::NotFound => ErrorClass::NotFound,
                PrefixFault::Ambiguous => ErrorClass::Ambiguous,
            },
            CallCheckpointGone { .. } | PathNotInCheckpoint { .. } => ErrorClass::NotFound,
            InvalidArgument(_) => ErrorClass::Usage,
            Git(_) | Io { .. } | Corrupt { .. } => ErrorClass::Internal,
        }
    }
}

/// Broad error classes the CLI maps to exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Refused,
    NotFound,
    /// An id prefix that names several checkpoints (the message lists them).
    Ambiguous,
    Usage,
    Internal,
}

impl ErrorClass {
    /// The name the CLI's `--json`, the checkpoint server and the Python
    /// package give this class (the CLI's error kinds).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Refused => "refused",
            ErrorClass::NotFound => "not_found",
            ErrorClass::Ambiguous => "ambiguous",
            ErrorClass::Usage => "usage",
            ErrorClass::Internal => "internal",
        }
    }
}

pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;
