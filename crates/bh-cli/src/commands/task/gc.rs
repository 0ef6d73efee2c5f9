//! `bh task gc`: remove the worktrees task sessions kept.

use std::path::PathBuf;

use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `TaskCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args { repo } = args;
    let dir = ctx.dir_arg(repo.as_deref(), "--repo")?;
    let git = ctx.git().repo(&dir, bh_git::Scope::User);
    let mut removed = Vec::new();
    for wt in git.worktrees().map_err(CliError::internal)? {
        if wt
            .locked
            .as_deref()
            .is_some_and(|r| r.starts_with("bh task "))
        {
            let _ = git.worktree_unlock(&wt.path);
            git.worktree_remove(&wt.path, true)
                .map_err(CliError::internal)?;
            removed.push(wt.path);
        }
    }
    if ctx.json {
        return print_json(&json!({ "removed": removed }));
    }
    for p in &removed {
        outln!("removed {}", p.display())?;
    }
    outln!("{} task worktree(s) removed", removed.len())?;
    Ok(())
}
