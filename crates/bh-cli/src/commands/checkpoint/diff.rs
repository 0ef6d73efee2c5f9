//! `bh checkpoint diff A [B] [-- PATH…]`: what changed between a checkpoint
//! and the working tree, or a second checkpoint.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use bh_checkpoint::{DiffText, Store};
use serde_json::json;

use super::view::{note_latest, write_text};
use super::{ProjectArg, open, rel_paths};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
    id: String,
    /// A second checkpoint (the diff then goes from ID to it), then paths
    /// (relative to the current directory; see --project).
    #[arg(value_name = "ID2|PATH")]
    rest: Vec<PathBuf>,
    /// Paths to limit the diff to (everything after `--`).
    #[arg(last = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// A diffstat instead of the patch.
    #[arg(long)]
    stat: bool,
}

/// The second positional argument of `diff` is a checkpoint when it resolves
/// as one, else it and the rest are paths, which must exist now (as git: a
/// path that is gone goes after `--`); both at once is refused.
fn split_rest<'a>(
    ctx: &Ctx,
    store: &Store,
    rest: &'a [PathBuf],
) -> Result<(Option<String>, &'a [PathBuf]), CliError> {
    let Some(first) = rest.first() else {
        return Ok((None, rest));
    };
    let base = super::path_base(ctx, store);
    let exists = |p: &Path| fs_err::symlink_metadata(base.join(p)).is_ok();
    let as_id = first
        .to_str()
        .filter(|s| {
            *s == "latest"
                || *s == "last"
                || (s.len() >= bh_protocol::prefix::MIN_HEX
                    && s.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .map(|s| store.resolve(s));
    match as_id {
        Some(Ok(cp)) if exists(first) => Err(CliError::usage(format!(
            "{} is both checkpoint {} and a path; put paths after `--`",
            first.display(),
            cp.id
        ))),
        Some(Ok(cp)) => Ok((Some(cp.commit), &rest[1..])),
        Some(Err(e)) if e.class() == bh_checkpoint::ErrorClass::Ambiguous && !exists(first) => {
            Err(checkpoint_error(e))
        }
        _ => {
            for p in rest {
                if !exists(p) {
                    return Err(CliError::new(
                        ErrorKind::NotFound,
                        format!(
                            "{} is neither a checkpoint nor a path in the working tree (a path that is gone goes after `--`)",
                            base.join(p).display()
                        ),
                    ));
                }
            }
            Ok((None, rest))
        }
    }
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let store = &open(ctx, &args.project, None)?;
    note_latest(store, &args.id, ctx.json);
    let (second, rest) = split_rest(ctx, store, &args.rest)?;
    let mut all: Vec<PathBuf> = rest.to_vec();
    all.extend(args.paths.iter().cloned());
    let rel = rel_paths(ctx, store, &all)?;
    let text = match (ctx.json, args.stat) {
        (true, _) => DiffText::None,
        (false, true) => DiffText::Stat,
        (false, false) => DiffText::Patch,
    };
    let project = store.project().to_string_lossy();
    let Some(second) = second else {
        let outcome = store.diff(&args.id, &rel, text).map_err(checkpoint_error)?;
        if ctx.json {
            return print_json(&json!({ "project": project, "diff": outcome }));
        }
        let mut out = std::io::stdout().lock();
        if let Some(text) = &outcome.text {
            let color = display::color_stdout(ctx.json);
            out.write_all(&display::render_diff(
                text,
                color,
                std::io::stdout().is_terminal(),
            ))?;
        }
        return Ok(());
    };
    let outcome = store
        .compare(&args.id, &second, &rel, text)
        .map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(&json!({ "project": project, "diff": outcome }));
    }
    write_text(&mut std::io::stdout().lock(), &outcome, ctx.json)
}
