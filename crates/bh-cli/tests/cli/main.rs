//! bh-cli's integration tests, one binary (issue 26: one link instead of
//! 35), one module per command group, through the built `bh` on real
//! repositories in temp dirs. Run one group with `cargo test -p bh-cli
//! --test cli GROUP::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// Shared by several groups: the world of the batch tests, the real Pi's
// RPC driver.
#[path = "batch/env.rs"]
mod env;
#[path = "support/pi_rpc.rs"]
mod pi_rpc;

/// A hermetic world for the built `bh` (`bh_test_support::cli`: cleared
/// environment, its own HOME, XDG, state and agent dirs, no API keys).
fn world() -> bh_test_support::cli::World {
    bh_test_support::cli::World::new(env!("CARGO_BIN_EXE_bh"))
}

/// The same on a folder the test owns (a `TestRepo`'s root: HOME is its
/// `home`).
fn world_at(root: &std::path::Path) -> bh_test_support::cli::World {
    bh_test_support::cli::World::at(root, env!("CARGO_BIN_EXE_bh"))
}

mod agent;
mod agent_tty;
mod checkpoint;
mod checkpoint_gc_race;
mod checkpoint_serve;
mod checkpoint_views;
mod claude_code_real;
mod cli;
mod color;
mod deputy;
mod exec;
mod exec_batch;
mod exec_emit;
mod exec_input;
mod exec_slurm;
mod exec_trust;
mod exec_views;
mod harness;
mod pi_extension;
mod pi_extension_cmds;
mod pi_extension_tui;
mod progress_tty;
mod retry_pi;
mod rewind;
mod rewind_claude;
mod rewind_plan;
mod session;
mod session_pi;
mod session_report;
mod session_report_pi;
mod task;
mod task_promote;
mod task_sandbox;
mod task_views;
mod vocabulary;
mod worktree;
