//! `bh-worktree`: managed linked worktrees of the user's repository.
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
//!   provisioning state, dirty and unpushed counts.
//! * [`enter()`] forks a Pi session into the worktree's cwd and ends it in one
//!   visible orientation entry; a handoff record next to the target is
//!   consumed exactly once by [`consume()`]: a verdict (reads only), then one
//!   append under the record's lock, so concurrent opens append one verdict
//!   and a failure leaves the handoff pending. [`enter_main()`] carries a session
//!   back into the main checkout the same way; [`discard()`] deletes a prepared
//!   target (and its handoff) when the switch is cancelled or fails.
//! * [`dispose()`] checkpoints everything (non-ignored files through
//!   `bh-checkpoint`, ignored files copied into the state dir), refuses dirty or
//!   unmerged work unless forced, removes the worktree and deletes the branch
//!   only if it created it and the branch is merged. [`check_dispose()`] runs
//!   the same refusals without changing anything (to refuse before moving a
//!   live session out of the worktree).
//!
//! Library rules: never prints, never reads the environment; the caller passes
//! the state dir, Pi's agent dir and the environment of post-create commands.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod carry;
mod claim;
mod consume;
mod create;
mod dispose;
mod enter;
mod error;
mod handoff;
mod list;
mod project;
mod receipt;
mod resume;

pub use claim::Claim;
pub use consume::consume;
pub use create::{CreateOptions, CreateOutcome, CreateProgress, create, create_with_progress};
pub use dispose::{DisposeOptions, DisposeOutcome, IgnoredCapture, check_dispose, dispose};
pub use enter::{
    Carry, ConsumeOutcome, EnterOptions, EnterOutcome, ORIENTATION_TYPE, VERIFICATION_TYPE, enter,
    enter_main,
};
pub use error::{Result, WorktreeError};
pub use handoff::{Handoff, Resumed, discard, handoff_path};
pub use list::{WorktreeInfo, containing, list};
pub use project::{Config, Project, validate_name};
pub use receipt::{Receipt, Stage, State};
