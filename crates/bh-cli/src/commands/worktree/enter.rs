//! `bh worktree enter`: prepare a session for a managed worktree (a fork of
//! it in the worktree's cwd, one orientation entry, a sealed handoff).

use std::path::PathBuf;

use bh_handoff::EnterOptions;

use super::{print_entered, repo_dir};
use crate::command_error::handoff_error;
use crate::context::Ctx;
use crate::error::CliError;

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The managed worktree's name.
    name: String,
    /// The source session: a file, or a session id prefix as Pi takes it.
    #[arg(long, value_name = "FILE|ID")]
    session: PathBuf,
    /// The entry the live session is at, when the file's leaf is not it
    /// (id or unique prefix of at least 4 hex digits).
    #[arg(long, value_name = "ID")]
    entry: Option<String>,
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

/// `bh worktree enter`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let session = crate::names::session_path(ctx, &args.session)?;
    let entry = crate::names::entry_in_file(&session, args.entry)?;
    let opts = EnterOptions {
        name: args.name,
        cwd: repo_dir(ctx, args.repo)?,
        session,
        entry,
        agent_dir: ctx.pi_agent_dir()?,
        unflushed: Vec::new(),
        state_dir: ctx.state_dir.clone(),
    };
    let out = bh_handoff::enter(&ctx.git(), &opts).map_err(handoff_error)?;
    print_entered(ctx, &out)
}
