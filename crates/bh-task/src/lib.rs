//! `bh-task`: the boundary of a task session — the scope a caller grants,
//! the paths no scope can grant, and validation of everything a worker did
//! between the trusted base and its candidate commit.
//!
//! This crate is the policy core of `bh task run` (issue 6); the command,
//! worktree lifecycle, process containment and promotion build on it.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod contain;
mod error;
mod hints;
pub mod list;
mod options;
mod outcome;
mod patch;
mod policy;
mod promote;
mod report;
pub mod run;
mod scope;
pub mod second_line;
pub mod taskrepo;
mod validate;

pub use policy::{HARNESS_POLICY_DIR, LOCK_FILES, protected_reason};
pub use scope::{FrozenScope, ScopeSpec, Verdict};
pub use validate::{Violation, validate_candidate, validate_uncommitted, validate_worktree};

/// Errors that stop a task before or during validation (not violations:
/// those are data, see [`Violation`]).
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("--module {path}: not a file or directory tracked at the base commit {base}")]
    ModuleNotTracked { path: String, base: String },
    #[error("--allow-path {path}: not a file tracked at the base commit {base}")]
    AllowPathNotTracked { path: String, base: String },
    #[error("--allow-new-path {path}: already exists at the base commit {base}")]
    AllowNewPathExists { path: String, base: String },
    #[error(
        "{flag} {path}: must be a relative path inside the repository without `.`, `..` or `.git` components"
    )]
    BadPath { flag: &'static str, path: String },
    #[error("at least one --module is required")]
    NoModule,
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
}
