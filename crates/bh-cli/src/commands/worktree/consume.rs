//! `bh worktree consume`: the handoff of a prepared session consumed (the
//! arrival verified and recorded once), as the agent runtime does on open.

use std::path::PathBuf;

use bh_handoff::ConsumeOutcome;

use crate::command_error::handoff_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::{errln, outln};

// The variant's doc comment in `WorktreeCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The prepared session: a file, or a session id prefix as Pi takes it.
    target: PathBuf,
}

/// `bh worktree consume`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let target = crate::names::session_path(ctx, &args.target)?;
    if fs_err::symlink_metadata(&target).is_err() {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!("{}: no such session file", target.display()),
        ));
    }
    let out = bh_handoff::consume(&ctx.git(), &ctx.state_dir, &target).map_err(handoff_error)?;
    if ctx.json {
        return print_json(&serde_json::to_value(&out).map_err(CliError::internal)?);
    }
    match out {
        ConsumeOutcome::NotPending => outln!("no pending handoff")?,
        ConsumeOutcome::Verified { entry_id } => outln!("arrival verified (entry {entry_id})")?,
        ConsumeOutcome::Caveat { entry_id, problems } => {
            outln!("arrival NOT as planned (caveat entry {entry_id}):")?;
            for p in problems {
                outln!("  {}", crate::display::escape(&p))?;
            }
        }
        ConsumeOutcome::Foreign { record, reason } => errln!(
            "bh: warning: ignored {}: not a handoff record bh wrote ({reason}); nothing was consumed",
            crate::display::escape(&record.display().to_string())
        ),
    }
    Ok(())
}
