//! `bh checkpoint list`: the project's checkpoints, newest first (never
//! creating a store).

use bh_checkpoint::{CheckpointKind, Store, StoreOptions};
use bh_fs::now_ms;
use serde_json::json;

use super::{ProjectArg, no_store, open};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;
use crate::units::{human_age, human_size};

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args { project } = args;
    // Listing never creates a store: a folder without one has none.
    let store = if project.project.is_some() {
        open(ctx, &project, None)?
    } else {
        let options = StoreOptions {
            state_dir: ctx.state_dir.clone(),
            max_file_size: project.max_file_size,
        };
        match Store::open_existing_in(&ctx.git(), &ctx.cwd, &options).map_err(checkpoint_error)? {
            Some(store) => store,
            None => return no_store(ctx),
        }
    };
    let list = store.list().map_err(checkpoint_error)?;
    let size = store.size();
    let (skips, last_skip) = store.skipped_snapshots();
    if ctx.json {
        return print_json(&json!({
            "project": store.project().to_string_lossy(),
            "store": store.dir(),
            "store_size": size,
            "checkpoints": list,
            "skipped_snapshots": { "count": skips, "last": last_skip },
        }));
    }
    let now = now_ms();
    outln!(
        "{} checkpoint{} of {} (store {}, {})",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        store.project().display(),
        store.dir().display(),
        human_size(size)
    )?;
    if skips > 0 {
        outln!(
            "{skips} checkpoint{} could not be taken (last: {})",
            if skips == 1 { "" } else { "s" },
            last_skip.as_deref().unwrap_or("?")
        )?;
    }
    if !list.is_empty() {
        outln!(
            "{:<12}  {:>8}  {:<14}  {:>5}  NOTE",
            "ID",
            "AGE",
            "TOOL",
            "FILES"
        )?;
    }
    for cp in &list {
        let mut note = Vec::new();
        if cp.kind != CheckpointKind::Snapshot {
            note.push(cp.kind.to_string());
        }
        if let Some(s) = &cp.session {
            note.push(format!("session {s}"));
        }
        if let Some(e) = &cp.entry {
            note.push(format!("entry {e}"));
        }
        if cp.skipped > 0 {
            note.push(format!("{} skipped", cp.skipped));
        }
        outln!(
            "{:<12}  {:>8}  {:<14}  {:>5}  {}",
            cp.id,
            human_age(now - cp.time_ms),
            cp.tool,
            cp.files_changed,
            note.join(", ")
        )?;
    }
    Ok(())
}
