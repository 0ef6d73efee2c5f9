//! `bh rewind --session FILE|ID --entry ID [--dry-run] [--force [PATH]…]
//! [--files-only]`: the paths the session's own calls changed after the entry
//! back to how they were before the first of them, everything else left
//! alone, and the session's leaf moved back to the entry; `bh rewind --undo`
//! puts back the files and the leaf of the last rewind. `--claude` does the
//! same for a Claude Code session recorded by the hook (`claude.rs`). The
//! whole-tree restore is `bh checkpoint restore ID --exact`.

use std::path::PathBuf;

use bh_checkpoint::Force;
use clap::Args;
use serde_json::json;

mod claude;

use crate::command_error::{checkpoint_error, rewind_error};
use crate::commands::checkpoint::rewind::RewindOpts;
use crate::commands::checkpoint::{ProjectArg, open, rel_paths};
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;

#[derive(Args, Debug)]
pub struct RewindArgs {
    #[command(flatten)]
    project: ProjectArg,
    /// A Pi or bh session (a path, or an id prefix as Pi takes it).
    #[arg(long, value_name = "FILE|ID", required_unless_present_any = ["undo", "claude"])]
    session: Option<PathBuf>,
    /// The entry to rewind to (its id or a unique prefix of at least 4 hex
    /// digits): the session's calls at and after it are undone.
    #[arg(long, value_name = "ID", required_unless_present_any = ["undo", "claude"])]
    entry: Option<String>,
    /// A Claude Code session (default: the last one its hook recorded):
    /// lists its prompts, or with --prompt rewinds the files to before it.
    #[arg(long, value_name = "SESSION", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["session", "entry", "undo", "files_only"])]
    claude: Option<String>,
    /// With --claude: the prompt (its number in the list, or a uuid prefix).
    #[arg(long, value_name = "N|UUID", requires = "claude")]
    prompt: Option<String>,
    /// Print the plan (paths to revert, to delete, conflicts, paths left
    /// alone) and change nothing.
    #[arg(long, conflicts_with = "undo")]
    dry_run: bool,
    /// Take conflicting paths anyway (paths someone else changed since the
    /// session's last change): all of them, or the PATHs given.
    #[arg(long, value_name = "PATH", num_args = 0.., conflicts_with = "undo")]
    force: Option<Vec<PathBuf>>,
    /// Rewind the files only; leave the session's leaf where it is.
    #[arg(long, conflicts_with = "undo")]
    files_only: bool,
    /// Undo the last rewind of this project: its files and the session's leaf.
    #[arg(long, conflicts_with_all = ["session", "entry"])]
    undo: bool,
}

pub fn run(args: RewindArgs, ctx: &Ctx) -> Result<(), CliError> {
    let store = open(ctx, &args.project, None)?;
    if args.undo {
        return undo(ctx, &store);
    }
    let force = match &args.force {
        None => Force::None,
        Some(paths) if paths.is_empty() => Force::All,
        Some(paths) => {
            let rel = rel_paths(ctx, &store, paths)?;
            if rel.is_empty() {
                Force::All
            } else {
                Force::Paths(rel)
            }
        }
    };
    if let Some(claude) = &args.claude {
        let session = (!claude.is_empty()).then_some(claude.as_str());
        return claude::run(
            ctx,
            &store,
            session,
            args.prompt.as_deref(),
            &force,
            args.dry_run,
        );
    }
    let (Some(session), Some(entry)) = (&args.session, &args.entry) else {
        return Err(CliError::usage(
            "rewind needs --session FILE --entry ID, --claude [SESSION], or --undo",
        ));
    };
    let opts = RewindOpts {
        rewind_session: !args.files_only,
        dry_run: args.dry_run,
        force,
    };
    crate::commands::checkpoint::rewind::run(ctx, &store, session, entry, &opts)
}

fn undo(ctx: &Ctx, store: &bh_checkpoint::Store) -> Result<(), CliError> {
    let Some(done) = store.undo_rewind().map_err(checkpoint_error)? else {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "no rewind to undo in the checkpoints of {}",
                store.project().display()
            ),
        ));
    };
    let file = done.context.get("session").and_then(|v| v.as_str());
    let moved = done.context.get("moved").and_then(|v| v.as_bool()) == Some(true);
    let old_leaf = done.context.get("leaf").and_then(|v| v.as_str());
    let leaf = match (file, moved) {
        (Some(file), true) => Some(
            bh_runtime::move_leaf(std::path::Path::new(file), old_leaf)
                .map_err(rewind_error)
                .map_err(|e| {
                    CliError::new(
                        e.kind,
                        format!("{}; the files were put back already", e.message),
                    )
                })?,
        ),
        _ => None,
    };
    if ctx.json {
        return print_json(&json!({
            "project": store.project().to_string_lossy(),
            "undo": done,
            "leaf": leaf.as_ref().map(|appended| json!({ "to": old_leaf, "appended": appended })),
        }));
    }
    match &done.restore {
        Some(r) => {
            for p in &r.restored {
                outln!("restored {p}")?;
            }
            for p in &r.deleted {
                outln!("deleted  {p}")?;
            }
            outln!(
                "rewind undone: {} written, {} deleted from undo point {}",
                r.restored.len(),
                r.deleted.len(),
                r.checkpoint.id
            )?;
        }
        None => outln!("rewind undone: it had changed no file")?,
    }
    if let Some(appended) = leaf {
        outln!(
            "session leaf back at {} (entry {appended} appended)",
            old_leaf.unwrap_or("a new root")
        )?;
    }
    Ok(())
}
