//! `bh-runtime`: an agent working in one directory.
//!
//! Between the front doors (`bh agent`, the executor) and the engines:
//!
//! * [`open_session`]: which session, as Pi chooses it (`--session` path or
//!   id prefix, `--continue`, `--fork`, the per-cwd folder); a resumed
//!   session recorded in another directory is refused unless the caller
//!   names the working directory; opening a session with a pending worktree
//!   handoff consumes it (verified and recorded once).
//! * [`Runtime::open`]: one assembly of the tools confined to a directory,
//!   its checkpoint store (one policy when it cannot be opened: checkpoints
//!   off, a warning), and [`Runtime::agent`]: the agent on a session writer
//!   with a provider, system prompt and limits.
//! * [`Live`]: a running agent that moves between the main checkout and
//!   managed worktrees as one transaction (nothing changes unless the move
//!   commits).
//! * Rewinding ([`resolve_entry`], [`conversation_leaf`], [`files_checkpoint`],
//!   [`move_leaf`]): the entry a person names, where the conversation
//!   continues, and the checkpoint holding the files as they were there.
//!
//! Library rules: never prints, never reads the environment or `$HOME`.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod relocate;
mod rewind;
mod runtime;
mod session;

pub use error::{Result, RuntimeError};
pub use relocate::{Disposed, Live, Moved, RelocateError};
pub use rewind::{
    RewindError, conversation_leaf, files_checkpoint, files_spans, move_leaf, resolve_entry,
};
pub use runtime::{DEFAULT_SYSTEM_PROMPT, Runtime, RuntimeOptions, SystemPrompt};
pub use session::{
    OpenedSession, SessionChoice, SessionRequest, canonical_dir, dir_str, find_session,
    open_session,
};

/// The engines' types a front door needs, so it can depend on the runtime alone.
pub use bh_core::{Agent, CoreError, Event, LimitKind, Limits, RunOutcome, RunStop};
pub use bh_llm::Provider;
pub use bh_tools::{BashEnv, Profile};
pub use tokio_util::sync::CancellationToken;
