//! How resolving a manifest entry, recording a receipt or publishing a
//! result ref can fail (the many-plans side of the executor); each names
//! the path, ref or remote at fault and keeps its source.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("manifest {path} cannot be read: {source}")]
    ManifestRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {path} line {line}: {detail}")]
    ManifestLine {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    #[error("index {index} names no plan: manifest {path} has {count} plan(s) (0..{count})")]
    IndexOutOfRange {
        path: PathBuf,
        index: usize,
        count: usize,
    },
    #[error("the output ref {name} {place} holds {commit}, which is not this plan's result")]
    RefTaken {
        name: String,
        /// `here` or `on <remote>`.
        place: String,
        commit: String,
    },
    #[error("remote {remote:?} is refused: a remote name or URL must not start with '-'")]
    RemoteName { remote: String },
    #[error("cannot publish {name} to {remote}: {source}")]
    Publish {
        remote: String,
        name: String,
        #[source]
        source: Box<bh_git::GitError>,
    },
    #[error("cannot {what} receipt {path}: {source}")]
    Receipt {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(Box<bh_git::GitError>),
}

impl From<bh_git::GitError> for BatchError {
    fn from(e: bh_git::GitError) -> Self {
        BatchError::Git(Box::new(e))
    }
}
