//! `bh worktree create`: add a managed linked worktree (receipt, `.env*`
//! links, post-create commands), with progress on a terminal.

use std::path::PathBuf;

use bh_worktree::{CreateOutcome, CreateProgress};
use serde_json::json;

use super::{NewWorktree, repo_dir, short};
use crate::command_error::worktree_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::progress::Progress;
use crate::ui::outln;

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    new: NewWorktree,
    /// Folder that holds the worktree (default: config `dir`, else `<repo>.worktrees`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The Pi session asking for it (recorded in the receipt).
    #[arg(long, value_name = "FILE")]
    session: Option<PathBuf>,
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

/// `bh worktree create`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        new,
        dir,
        session,
        repo,
    } = args;
    let path = dir.map(|d| ctx.abs(&d).join(&new.name));
    let session = session.map(|s| ctx.abs(&s).display().to_string());
    let opts = new.options(path, session, repo_dir(ctx, repo)?);
    let progress = Progress::new(ctx.json);
    let result = bh_worktree::create_with_progress(&ctx.git(), &opts, &mut |p| match p {
        CreateProgress::AddWorktree => progress.phase("git worktree add"),
        CreateProgress::LinkEnv => progress.phase("linking .env files"),
        CreateProgress::PostCreate {
            index,
            total,
            command,
        } => progress.phase(&format!("post-create {index}/{total}: {command}")),
    });
    match &result {
        Ok(_) => progress.done(),
        Err(_) => progress.failed(),
    }
    drop(progress);
    let out = result.map_err(worktree_error)?;
    if ctx.json {
        return print_json(&json!({
            "worktree": out.receipt,
            "receipt": out.receipt_path,
            "log": out.log,
        }));
    }
    print_created(&out)?;
    Ok(())
}

/// The human report of `create` (also `/worktree create` in `bh agent`).
pub(crate) fn print_created(out: &CreateOutcome) -> std::io::Result<()> {
    let r = &out.receipt;
    let what = match (&r.branch, r.created_branch) {
        (Some(b), true) => format!("new branch {b} at {}", short(&r.base)),
        (Some(b), false) => format!("branch {b} at {}", short(&r.base)),
        (None, _) => format!("detached at {}", short(&r.base)),
    };
    outln!(
        "created worktree {} at {} ({what})",
        r.name,
        r.path.display()
    )?;
    if !r.env_links.is_empty() {
        outln!("linked: {}", r.env_links.join(", "))?;
    }
    if !r.post_create.is_empty() {
        outln!(
            "post-create: {} command(s) ran (log: {})",
            r.post_create.len(),
            out.log.display()
        )?;
    }
    Ok(())
}
