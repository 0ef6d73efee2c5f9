//! `bh checkpoint …`: snapshot, list, diff, restore and prune a project's
//! working tree in a private shadow repository. One file per subcommand
//! (its arguments and its run); this one holds the group, the project
//! argument they share, and the store they open.

use std::path::{Path, PathBuf};

use bh_checkpoint::{Store, StoreOptions};
use clap::{Args, Subcommand};
use serde_json::json;

mod diff;
mod hook;
mod list;
mod prune;
mod restore;
pub(crate) mod rewind;
mod serve;
mod show;
mod snapshot;
mod view;

use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;
use crate::units::parse_size;

#[derive(Args, Debug, Clone)]
pub struct ProjectArg {
    /// The project (default: the enclosing Git repository's top level, else the
    /// current directory). Relative PATH arguments resolve against the current
    /// directory when it is inside the project, else against the project's top
    /// (as git does with --work-tree).
    #[arg(long, visible_alias = "repo", value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Files larger than this are not captured.
    #[arg(long, value_name = "SIZE", default_value = "50MiB", value_parser = parse_size)]
    pub(crate) max_file_size: u64,
}

#[derive(Subcommand, Debug)]
pub enum CheckpointCmd {
    /// Snapshot the project's working tree now.
    Snapshot(snapshot::Args),
    /// List checkpoints, newest first.
    #[command(visible_alias = "ls")]
    List(list::Args),
    /// Restore files from a checkpoint (all files when no path is given), or
    /// with --session FILE --entry ID to how they were at a session entry.
    Restore(restore::Args),
    /// Show one checkpoint: what it records and what changed since the
    /// checkpoint before it (a diffstat, or the patch).
    Show(show::Args),
    /// Show what changed between a checkpoint and the working tree, or
    /// between two checkpoints (`diff A B`); paths limit it (after `--` when
    /// one could be read as a checkpoint id).
    Diff(diff::Args),
    /// Drop old checkpoints, then repack the store.
    Prune(prune::Args),
    /// Serve the project's live checkpoint store (JSON lines, see
    /// crates/bh-serve/PROTOCOL.md): on stdin/stdout for a parent that spawns
    /// it, or with --socket on the project's private Unix socket.
    Serve(serve::Args),
    /// Integrations that snapshot before an agent's mutating tool calls.
    Hook(hook::Args),
}

pub fn run(cmd: CheckpointCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        CheckpointCmd::Snapshot(args) => snapshot::run(ctx, args),
        CheckpointCmd::List(args) => list::run(ctx, args),
        CheckpointCmd::Restore(args) => restore::run(ctx, args),
        CheckpointCmd::Show(args) => show::run(ctx, args),
        CheckpointCmd::Diff(args) => diff::run(ctx, args),
        CheckpointCmd::Prune(args) => prune::run(ctx, args),
        CheckpointCmd::Serve(args) => serve::run(ctx, args),
        CheckpointCmd::Hook(args) => hook::command(ctx, args),
    }
}

/// `checkpoint list` where no store exists yet: nothing to list, nothing made.
pub(super) fn no_store(ctx: &Ctx) -> Result<(), CliError> {
    // The project a snapshot here would protect (the repository's top, not the cwd).
    let dir = Store::project_of(&ctx.git(), &ctx.cwd).map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(&json!({
            "project": dir.to_string_lossy(),
            "store": null,
            "store_size": 0,
            "checkpoints": [],
        }));
    }
    outln!(
        "0 checkpoints of {} (no checkpoint store yet: the first snapshot makes one)",
        dir.display()
    )?;
    Ok(())
}

/// `--project DIR` names the project exactly; without it the project is the
/// repository enclosing `dir` (the current directory, or the hook's `cwd`),
/// else that directory.
pub(crate) fn open(ctx: &Ctx, arg: &ProjectArg, dir: Option<&Path>) -> Result<Store, CliError> {
    let runner = ctx.git();
    let options = StoreOptions {
        state_dir: ctx.state_dir.clone(),
        max_file_size: arg.max_file_size,
    };
    match &arg.project {
        Some(p) => Store::open(&runner, &ctx.dir_arg(Some(p), "--project")?, &options),
        None => Store::open_in(&runner, dir.unwrap_or(&ctx.cwd), &options),
    }
    .map_err(checkpoint_error)
}

/// What relative PATH arguments resolve against: the current directory when
/// it is inside the project, else (`--project DIR` given from outside) the
/// project's top — git's rule for a work tree the cwd is not in.
pub(crate) fn path_base(ctx: &Ctx, store: &Store) -> PathBuf {
    let cwd = fs_err::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    if cwd.starts_with(store.project()) {
        ctx.cwd.clone()
    } else {
        store.project().to_path_buf()
    }
}

pub(crate) fn rel_paths(
    ctx: &Ctx,
    store: &Store,
    paths: &[PathBuf],
) -> Result<Vec<Vec<u8>>, CliError> {
    let base = path_base(ctx, store);
    let mut out = Vec::new();
    for p in paths {
        let rel =
            bh_checkpoint::project_relative(store.project(), &base, p).map_err(checkpoint_error)?;
        if rel.is_empty() {
            // The project itself: the whole tree, same as no path.
            return Ok(Vec::new());
        }
        out.push(rel);
    }
    Ok(out)
}
