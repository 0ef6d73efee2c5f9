//! `bh worktree list`: every worktree, managed or not, one row each.

use std::path::PathBuf;

use bh_worktree::WorktreeInfo;
use serde_json::json;

use super::{repo_dir, short};
use crate::command_error::worktree_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

/// `bh worktree list`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    print_list(ctx, args.repo)
}

/// The list of the worktrees of `repo` (or the cwd); also `/worktree list`
/// in `bh agent` (never `--json` there).
pub(crate) fn print_list(ctx: &Ctx, repo: Option<PathBuf>) -> Result<(), CliError> {
    let all = bh_worktree::list(&ctx.git(), &repo_dir(ctx, repo)?).map_err(worktree_error)?;
    if ctx.json {
        return print_json(&json!({ "worktrees": all }));
    }
    outln!(
        "{:<16} {:<24} {:<14} {:>6} {:>9}  PATH",
        "NAME",
        "BRANCH",
        "STATE",
        "DIRTY",
        "UNPUSHED"
    )?;
    for w in &all {
        outln!("{}", row(w))?;
    }
    Ok(())
}

fn count(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into())
}

fn row(w: &WorktreeInfo) -> String {
    let name = match (&w.name, w.main) {
        (Some(n), _) => n.clone(),
        (None, true) => "(main)".into(),
        (None, false) => "-".into(),
    };
    let branch = match &w.branch {
        Some(b) => b.clone(),
        None => format!("(detached {})", w.head.as_deref().map(short).unwrap_or("?")),
    };
    let mut state = match (w.state, w.main) {
        (Some(s), _) => s.as_str().to_owned(),
        (None, true) => "main".into(),
        (None, false) => "unmanaged".into(),
    };
    if w.locked.is_some() {
        state.push_str(",locked");
    }
    if w.prunable.is_some() {
        state.push_str(",prunable");
    }
    format!(
        "{name:<16} {branch:<24} {state:<14} {:>6} {:>9}  {}",
        count(w.dirty),
        count(w.unpushed),
        w.path.display()
    )
}
