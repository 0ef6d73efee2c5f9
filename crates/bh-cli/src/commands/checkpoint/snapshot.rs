//! `bh checkpoint snapshot`: snapshot the project's working tree now.

use bh_checkpoint::SnapshotRequest;
use serde_json::json;

use super::{ProjectArg, open};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::progress::SnapshotDisplay;
use crate::ui::{errln, outln};

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// The tool about to run.
    #[arg(long, value_name = "NAME", default_value = "manual")]
    tool: String,
    /// Agent session id to record.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Agent session entry id to record.
    #[arg(long, value_name = "ID")]
    entry: Option<String>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        project,
        tool,
        session,
        entry,
    } = args;
    let store = open(ctx, &project, None)?;
    let request = SnapshotRequest {
        tool,
        session,
        entry,
    };
    // The first snapshot hashes every file: show it on a terminal.
    let first = store.list().is_ok_and(|l| l.is_empty());
    let outcome = if first {
        let display = SnapshotDisplay::new(ctx.json);
        let result = store.snapshot_with_progress(&request, &|p| display.show(p));
        display.end(result.is_ok());
        result
    } else {
        store.snapshot(&request)
    }
    .map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(
            &json!({ "project": store.project().to_string_lossy(), "snapshot": outcome }),
        );
    }
    for s in &outcome.skipped {
        errln!("bh: warning: not captured: {} ({})", s.path, s.reason);
    }
    if outcome.created && first {
        // Nothing to compare with: it holds the project, not changes.
        outln!(
            "created checkpoint {} (the first: {} file{})",
            outcome.checkpoint.id,
            outcome.changed.len(),
            if outcome.changed.len() == 1 { "" } else { "s" }
        )?;
    } else if outcome.created {
        outln!(
            "created checkpoint {} ({} file{} changed)",
            outcome.checkpoint.id,
            outcome.changed.len(),
            if outcome.changed.len() == 1 { "" } else { "s" }
        )?;
    } else {
        outln!(
            "no changes since checkpoint {}; reusing it",
            outcome.checkpoint.id
        )?;
    }
    Ok(())
}
