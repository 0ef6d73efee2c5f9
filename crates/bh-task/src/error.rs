//! Why a task cannot start (preflight, freeze, setup).

/// Failures that prevent a task from starting (preflight, freeze, setup).
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{path} is not the top level of a Git worktree (it is inside {top})")]
    NotTopLevel { path: String, top: String },
    #[error("{path} is not a Git repository")]
    NotARepository { path: String },
    #[error(
        "the source checkout {path} is not clean: {detail}; --promote fast-forwards it, so its \
         tracked files must match HEAD: commit or stash them, or run without --promote (the \
         task starts from HEAD either way)"
    )]
    Dirty { path: String, detail: String },
    #[error("--promote needs the source to be on a branch; {path} has a detached HEAD")]
    Detached { path: String },
    #[error("refusing a nested task session: {why}")]
    Nested { why: String },
    #[error("artifact folder {path}: {why}")]
    Artifacts { path: String, why: String },
    #[error(transparent)]
    Scope(#[from] crate::TaskError),
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
    #[error(transparent)]
    Run(#[from] crate::contain::RunError),
    #[error(transparent)]
    Sandbox(#[from] bh_sandbox::SandboxError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// An error of an `fs_err` call: its message already names the path
    /// ("failed to create directory `…`: …"), so none is added.
    #[error(transparent)]
    Fs(std::io::Error),
}

/// Context for an I/O error that does not name its path (a `std` or
/// `bh_fs` call, a pipe); `fs_err` errors go in [`PreflightError::Fs`].
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> PreflightError {
    let context = context.into();
    move |source| PreflightError::Io { context, source }
}
