//! Every `bh` command, one module per group (as jj-cli's `commands/`):
//! each turns its clap arguments into a request (names resolved, files
//! read, checks done), calls the library, and prints. Library logic does not
//! live here.

pub(crate) mod agent;
pub(crate) mod checkpoint;
pub(crate) mod demo;
pub(crate) mod exec;
pub(crate) mod rewind;
pub(crate) mod session;
pub(crate) mod task;
pub(crate) mod worktree;
