//! Errors of the runtime: each names the directory, session file or worktree
//! at fault and keeps its source. The CLI maps them to exit codes.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A working directory that cannot be resolved.
    #[error("working directory {path}: {source}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("working directory {path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("working directory {path} is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
    /// Choosing this session needs Pi's agent dir, and the caller has none.
    #[error("Pi's agent dir is unknown (needed to {need})")]
    NoAgentDir { need: &'static str },
    /// The session was recorded in another directory than the one it is run
    /// in, and no explicit working directory says which root the tools get.
    #[error(
        "session {file} belongs to {recorded}, but this runs in {here}; \
         pass --cwd DIR to choose the directory the tools work in"
    )]
    CwdMismatch {
        file: PathBuf,
        recorded: PathBuf,
        here: PathBuf,
    },
    #[error("no session found matching {arg:?} (searched {searched})")]
    NoSuchSession { arg: String, searched: String },
    #[error("session id prefix {arg:?} matches {} sessions: {}", .matches.len(), shown(.matches))]
    AmbiguousSession { arg: String, matches: Vec<PathBuf> },
    #[error(transparent)]
    Session(Box<bh_session::SessionError>),
    #[error("cannot confine the tools to {path}: {source}")]
    Tools {
        path: PathBuf,
        #[source]
        source: Box<bh_tools::ToolboxError>,
    },
    #[error("cannot continue in {file}: {source}")]
    Agent {
        file: PathBuf,
        #[source]
        source: Box<bh_core::CoreError>,
    },
    #[error(transparent)]
    Worktree(Box<bh_worktree::WorktreeError>),
    /// A session's move between checkouts (enter, consume, discard).
    #[error(transparent)]
    Handoff(Box<bh_handoff::HandoffError>),
    #[error("a background task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

impl From<bh_session::SessionError> for RuntimeError {
    fn from(e: bh_session::SessionError) -> Self {
        RuntimeError::Session(Box::new(e))
    }
}

impl From<bh_worktree::WorktreeError> for RuntimeError {
    fn from(e: bh_worktree::WorktreeError) -> Self {
        RuntimeError::Worktree(Box::new(e))
    }
}

impl From<bh_handoff::HandoffError> for RuntimeError {
    fn from(e: bh_handoff::HandoffError) -> Self {
        RuntimeError::Handoff(Box::new(e))
    }
}
