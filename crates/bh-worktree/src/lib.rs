//! `bh-worktree`: managed linked worktrees of the user's repository — Git
//! and the file system only (moving a Pi session into one is `bh-handoff`'s).
//!
//! * [`create()`] adds a linked worktree (default `<main checkout>.worktrees/<name>`),
//!   symlinks the main checkout's git-ignored `.env*` files (not `.env.local`),
//!   runs the project's `post_create` commands (`.better-harness/worktree.toml`
//!   of the main checkout) in order, stopping at the first failure. Progress is
//!   a provisioning [`Receipt`] in `<common dir>/better-harness/worktrees/<name>.json`
//!   (written atomically: temp file + rename). Every lifecycle operation first
//!   takes an exclusive [`Claim`] (`mkdir` of `<name>.claim`), so a second
//!   caller gets [`WorktreeError::Busy`]; a failure rolls back what the call
//!   created (worktree, branch) and leaves a `failed` receipt.
//! * [`list()`] reports every registered worktree, managed or not, with branch,
//!   provisioning state, dirty and unpushed counts; [`containing()`] names the
//!   managed worktree holding a directory.
//! * [`dispose()`] checkpoints everything (non-ignored files through
//!   `bh-checkpoint`, ignored files copied into the state dir), refuses dirty or
//!   unmerged work unless forced, removes the worktree and deletes the branch
//!   only if it created it and the branch is merged. [`check_dispose()`] runs
//!   the same refusals without changing anything (to refuse before moving a
//!   live session out of the worktree).
//! * For the crates above (`bh-handoff`): the [`Project`] (main checkout,
//!   common dir, [`Project::claim_path`], [`Project::receipt_path`]), receipts
//!   read as bounded regular files ([`read_regular`], [`file_sha256`]) and
//!   [`same_path`].
//!
//! Library rules: never prints, never reads the environment; the caller passes
//! the state dir and the environment of post-create commands.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod claim;
mod create;
mod dispose;
mod error;
mod list;
mod project;
mod receipt;

pub use claim::Claim;
pub use create::{CreateOptions, CreateOutcome, CreateProgress, create, create_with_progress};
pub use dispose::{DisposeOptions, DisposeOutcome, IgnoredCapture, check_dispose, dispose};
pub use error::{Result, WorktreeError};
pub use list::{WorktreeInfo, containing, list, same_path, short_branch};
pub use project::{Config, Project, validate_name};
pub use receipt::{RECORD_CAP, Receipt, Stage, State, file_sha256, read_regular};
