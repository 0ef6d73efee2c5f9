//! `bh checkpoint prune`: drop old checkpoints, then repack the store.

use bh_checkpoint::PrunePolicy;
use serde_json::json;

use super::{ProjectArg, open};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;
use crate::units::{human_size, parse_duration};

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// Keep the newest N checkpoints.
    #[arg(long, value_name = "N")]
    keep: Option<usize>,
    /// Drop checkpoints older than this (e.g. 7d, 12h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Option<std::time::Duration>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        project,
        keep,
        older_than,
    } = args;
    if keep.is_none() && older_than.is_none() {
        return Err(CliError::usage(
            "prune needs --keep N and/or --older-than DURATION",
        ));
    }
    let store = open(ctx, &project, None)?;
    let outcome = store
        .prune(&PrunePolicy { keep, older_than })
        .map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(
            &json!({ "project": store.project().to_string_lossy(), "prune": outcome }),
        );
    }
    outln!(
        "removed {} checkpoint{}, kept {}; store {} -> {}",
        outcome.removed.len(),
        if outcome.removed.len() == 1 { "" } else { "s" },
        outcome.kept,
        human_size(outcome.size_before),
        human_size(outcome.size_after)
    )?;
    Ok(())
}
