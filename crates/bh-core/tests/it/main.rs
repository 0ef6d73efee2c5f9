//! End-to-end tests of the loop: a scripted (or mock-HTTP) model edits a real
//! Git repository through the confined tools; the session file, checkpoints,
//! limits and cancellation are checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cancel;
mod events;
mod harness;
mod limits;
mod mock;
mod retry;
mod run;
mod support;
mod truncated;
