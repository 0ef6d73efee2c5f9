//! `bh-handoff`: a Pi session carried between the checkouts of one
//! repository — into a managed worktree and back to the main checkout.
//!
//! * [`enter()`] forks a Pi session into the worktree's cwd (or extends the
//!   session's earlier file there, `resume`) and ends it in one visible
//!   orientation entry; a handoff record next to the target, sealed with the
//!   state directory's key, is consumed exactly once by [`consume()`]: a
//!   verdict (reads only), then one append under the record's lock, so
//!   concurrent opens append one verdict and a failure leaves the handoff
//!   pending. [`enter_main()`] carries a session back into the main checkout
//!   the same way; [`discard()`] deletes a prepared target (and its handoff)
//!   when the switch is cancelled or fails.
//!
//! The worktrees themselves (create, list, claims, receipts, dispose) are
//! `bh-worktree`'s; this crate holds each move's claim and reads the receipt
//! through that crate's public API, and is the only one of the two that
//! reads or writes Pi sessions.
//!
//! Library rules: never prints, never reads the environment; the caller passes
//! the state dir and Pi's agent dir.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod carry;
mod consume;
mod enter;
mod error;
mod handoff;
mod resume;

pub use consume::consume;
pub use enter::{
    Carry, ConsumeOutcome, EnterOptions, EnterOutcome, ORIENTATION_TYPE, VERIFICATION_TYPE, enter,
    enter_main,
};
pub use error::{HandoffError, Result};
pub use handoff::{Handoff, Resumed, discard, handoff_path};
