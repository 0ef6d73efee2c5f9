//! `bh checkpoint restore`: files back from a checkpoint, or (`--session
//! --entry`) the attributed rewind to a session entry.

use std::path::PathBuf;

use bh_checkpoint::RestoreMode;
use serde_json::json;

use super::{ProjectArg, open, rel_paths, rewind, view};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::{errln, outln};

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
    #[arg(required_unless_present = "session", conflicts_with = "session")]
    id: Option<String>,
    /// Paths to restore (relative to the current directory; see --project).
    #[arg(conflicts_with = "session")]
    paths: Vec<PathBuf>,
    /// Also delete files created since the checkpoint that it would have
    /// captured (never ignored files).
    #[arg(long)]
    exact: bool,
    /// A Pi session (a path, or an id prefix as Pi takes it): restore the
    /// files (exactly) to the checkpoint taken before the first mutating
    /// tool call at or after --entry.
    #[arg(long, value_name = "FILE|ID", requires = "entry")]
    session: Option<PathBuf>,
    /// With --session: the entry (its id or a unique prefix of at least 4
    /// hex digits).
    #[arg(long, value_name = "ID", requires = "session")]
    entry: Option<String>,
    /// With --session: also move the session's leaf back to the entry (a
    /// user message goes too, as Pi's /tree), so the conversation
    /// continues from there.
    #[arg(long, requires = "session")]
    rewind_session: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        project,
        id,
        paths,
        exact,
        session,
        entry,
        rewind_session,
    } = args;
    let store = open(ctx, &project, None)?;
    let (Some(id), None) = (id, &session) else {
        let (Some(file), Some(entry)) = (session, entry) else {
            return Err(CliError::usage(
                "restore needs ID, or --session FILE --entry ID",
            ));
        };
        let opts = rewind::RewindOpts {
            rewind_session,
            ..Default::default()
        };
        return rewind::run(ctx, &store, &file, &entry, &opts);
    };
    view::note_latest(&store, &id, ctx.json);
    let rel = rel_paths(ctx, &store, &paths)?;
    let mode = if exact {
        RestoreMode::Exact
    } else {
        RestoreMode::Additive
    };
    let outcome = store.restore(&id, &rel, mode).map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(
            &json!({ "project": store.project().to_string_lossy(), "restore": outcome }),
        );
    }
    for p in &outcome.restored {
        outln!("restored {p}")?;
    }
    for p in &outcome.deleted {
        outln!("deleted  {p}")?;
    }
    if !outcome.kept.is_empty() {
        errln!(
            "bh: note: kept {} file{} created since the checkpoint (use --exact to remove them)",
            outcome.kept.len(),
            if outcome.kept.len() == 1 { "" } else { "s" }
        );
    }
    outln!(
        "restored checkpoint {}: {} written, {} deleted; undo with: bh checkpoint restore {} --exact",
        outcome.checkpoint.id,
        outcome.restored.len(),
        outcome.deleted.len(),
        outcome.safety.id
    )?;
    Ok(())
}
