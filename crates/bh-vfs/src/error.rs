//! The virtual worktree's errors (a tool sees them as its error text; the
//! executor as the reason a run could not record its result).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    #[error("cannot read the base's objects: {0}")]
    Reader(String),
    #[error("the object {oid} ({what}) is missing from the repository")]
    Missing { oid: String, what: String },
    #[error("the object {oid} is a {kind}, not a {want}")]
    Kind {
        oid: String,
        kind: String,
        want: &'static str,
    },
    #[error("the tree {oid} is malformed")]
    BadTree { oid: String },
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io(
    what: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> VfsError {
    let path = path.to_path_buf();
    move |source| VfsError::Io { what, path, source }
}
