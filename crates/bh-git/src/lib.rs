//! `bh-git`: the single way Better Harness runs Git.
//!
//! Every Git operation in the workspace goes through [`GitRunner`]: the `git`
//! CLI with a scrubbed environment (no inherited `GIT_*` variable survives),
//! `LC_ALL=C`, no terminal prompts, no replace objects, hooks and fsmonitor off.
//! Repositories the harness owns ([`Scope::Isolated`]) additionally ignore the
//! system and global configuration and system attributes. Output is parsed from
//! the `-z` forms as bytes ([`parse`]); paths stay bytes until shown to a person.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod index;
pub mod loose;
pub mod object;
pub mod ops;
pub mod parse;
mod runner;

pub use index::TempIndex;

pub use ops::{LogCommit, Worktree, WorktreeGuard};
pub use runner::{GitCommand, GitError, GitOutput, GitProcess, GitRunner, Repo, Scope};

/// The all-zero object id, used as "must not exist" in compare-and-swap ref updates.
pub const NULL_OID: &str = "0000000000000000000000000000000000000000";
