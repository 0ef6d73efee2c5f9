//! `bh checkpoint show ID`: one checkpoint, with what changed since the one
//! before it (a diffstat, or the patch).

use std::io::Write;

use bh_checkpoint::DiffText;
use serde_json::json;

use super::view::{note_latest, write_text};
use super::{ProjectArg, open};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, print_json};
use crate::units::human_age;

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
    id: String,
    /// The patch instead of the diffstat.
    #[arg(long)]
    patch: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args { project, id, patch } = args;
    let store = open(ctx, &project, None)?;
    let (store, id) = (&store, id.as_str());
    note_latest(store, id, ctx.json);
    let text = match (ctx.json, patch) {
        (true, _) => DiffText::None,
        (false, true) => DiffText::Patch,
        (false, false) => DiffText::Stat,
    };
    let outcome = store.show(id, text).map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(
            &json!({ "project": store.project().to_string_lossy(), "show": outcome }),
        );
    }
    let cp = &outcome.to;
    let age = human_age(bh_fs::now_ms() - cp.time_ms);
    let mut out = std::io::stdout().lock();
    writeln!(out, "checkpoint {} ({})", cp.id, cp.kind)?;
    writeln!(out, "commit     {}", cp.commit)?;
    writeln!(out, "sequence   #{}", cp.seq)?;
    writeln!(
        out,
        "taken      {age}, before tool {}",
        display::escape(&cp.tool)
    )?;
    if let Some(s) = &cp.session {
        writeln!(out, "session    {}", display::escape(s))?;
    }
    if let Some(e) = &cp.entry {
        writeln!(out, "entry      {}", display::escape(e))?;
    }
    if cp.skipped > 0 {
        writeln!(out, "skipped    {} file(s) not captured", cp.skipped)?;
    }
    match &outcome.from {
        Some(prev) => writeln!(
            out,
            "changes since checkpoint {} (#{}): {} file(s)",
            prev.id,
            prev.seq,
            outcome.entries.len()
        )?,
        None => writeln!(
            out,
            "first checkpoint of the store: {} file(s)",
            outcome.entries.len()
        )?,
    }
    write_text(&mut out, &outcome, ctx.json)
}
