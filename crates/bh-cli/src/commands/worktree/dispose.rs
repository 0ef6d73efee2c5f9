//! `bh worktree dispose`: checkpoint every file, then remove the worktree
//! (refused for dirty or unmerged work unless `--force`).

use std::path::PathBuf;

use bh_worktree::{DisposeOptions, DisposeOutcome};

use super::repo_dir;
use crate::command_error::worktree_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The managed worktree's name.
    name: String,
    /// Dispose even with uncommitted or unmerged work (checkpointed first).
    #[arg(long)]
    force: bool,
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

/// `bh worktree dispose`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let opts = DisposeOptions {
        name: args.name,
        cwd: repo_dir(ctx, args.repo)?,
        force: args.force,
        state_dir: ctx.state_dir.clone(),
        max_file_size: bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
    };
    let out = bh_worktree::dispose(&ctx.git(), &opts).map_err(worktree_error)?;
    if ctx.json {
        return print_json(&serde_json::to_value(&out).map_err(CliError::internal)?);
    }
    print_disposed(&out)?;
    Ok(())
}

/// The human report of `dispose` (also `/worktree dispose` in `bh agent`).
pub(crate) fn print_disposed(out: &DisposeOutcome) -> std::io::Result<()> {
    outln!("disposed worktree {} ({})", out.name, out.path.display())?;
    outln!(
        "checkpoint {} (restore: bh checkpoint restore {} --project {} after re-adding the worktree there)",
        out.checkpoint.id,
        out.checkpoint.id,
        out.path.display()
    )?;
    outln!(
        "ignored files: {} copied to {}{}",
        out.ignored.files.len(),
        out.ignored.dir.display(),
        if out.ignored.skipped.is_empty() {
            String::new()
        } else {
            format!(
                " ({} skipped, see manifest.json)",
                out.ignored.skipped.len()
            )
        }
    )?;
    match (&out.branch, out.branch_deleted, &out.branch_kept) {
        (Some(b), true, _) => outln!("branch {b} deleted (merged)")?,
        (Some(b), false, Some(why)) => outln!("branch {b} kept ({why})")?,
        _ => {}
    }
    Ok(())
}
