//! `bh worktree leave`: the session of the managed worktree at `--repo` (or
//! the cwd) prepared for the main checkout — the way back.

use std::path::PathBuf;

use bh_handoff::EnterOptions;

use super::{print_entered, repo_dir};
use crate::command_error::{handoff_error, worktree_error};
use crate::context::Ctx;
use crate::error::CliError;

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The source session, in a managed worktree: a file or a session id prefix.
    #[arg(long, value_name = "FILE|ID")]
    session: PathBuf,
    /// The entry the live session is at, when the file's leaf is not it.
    #[arg(long, value_name = "ID")]
    entry: Option<String>,
    /// The managed worktree the session is in (default: the current directory).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

/// `bh worktree leave`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let session = crate::names::session_path(ctx, &args.session)?;
    let entry = crate::names::entry_in_file(&session, args.entry)?;
    let cwd = repo_dir(ctx, args.repo)?;
    let (name, _) = bh_worktree::containing(&ctx.git(), &cwd)
        .map_err(worktree_error)?
        .ok_or_else(|| {
            CliError::usage(format!(
                "{} is not inside a managed worktree (bh worktree list shows them)",
                cwd.display()
            ))
        })?;
    let opts = EnterOptions {
        name,
        cwd,
        session,
        entry,
        agent_dir: ctx.pi_agent_dir()?,
        unflushed: Vec::new(),
        state_dir: ctx.state_dir.clone(),
    };
    let out = bh_handoff::enter_main(&ctx.git(), &opts, false).map_err(handoff_error)?;
    print_entered(ctx, &out)
}
