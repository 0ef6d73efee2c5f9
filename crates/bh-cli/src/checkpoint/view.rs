//! `bh checkpoint show ID` and `bh checkpoint diff A [B] [-- PATH…]`: one
//! checkpoint with what changed since the one before it, and the changes
//! between a checkpoint and the working tree or a second checkpoint.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use bh_checkpoint::{CheckpointKind, CompareOutcome, DiffText, Store};
use serde_json::json;

use super::{checkpoint_error, rel_paths};
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::units::human_age;

/// Under `latest`, says on stderr when newer pre-restore checkpoints were
/// skipped, so nobody mistakes `latest` for the undo point of a restore.
pub(crate) fn note_latest(store: &Store, id: &str, json: bool) {
    if json || !(id == "latest" || id == "last") {
        return;
    }
    let Ok(list) = store.list() else { return };
    let skipped: Vec<&str> = list
        .iter()
        .take_while(|c| c.kind == CheckpointKind::PreRestore)
        .map(|c| c.id.as_str())
        .collect();
    if let (Some(newest), Some(latest)) = (
        skipped.first(),
        list.iter().find(|c| c.kind != CheckpointKind::PreRestore),
    ) {
        eprintln!(
            "bh: note: `latest` is checkpoint {}; it skips the newer pre-restore checkpoint{} {} (undo points of restores: name them by id)",
            latest.id,
            if skipped.len() == 1 { "" } else { "s" },
            if skipped.len() == 1 {
                (*newest).to_owned()
            } else {
                skipped.join(", ")
            }
        );
    }
}

pub(crate) fn show(ctx: &Ctx, store: &Store, id: &str, patch: bool) -> Result<(), CliError> {
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
    let age = human_age(bh_protocol::now_ms() - cp.time_ms);
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

pub(crate) struct DiffArgs<'a> {
    pub id: &'a str,
    pub rest: &'a [PathBuf],
    pub paths: &'a [PathBuf],
    pub stat: bool,
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
                || (s.len() >= 4 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .map(|s| store.resolve(s));
    match as_id {
        Some(Ok(cp)) if exists(first) => Err(CliError::usage(format!(
            "{} is both checkpoint {} and a path; put paths after `--`",
            first.display(),
            cp.id
        ))),
        Some(Ok(cp)) => Ok((Some(cp.commit), &rest[1..])),
        Some(Err(e @ bh_checkpoint::CheckpointError::AmbiguousCheckpoint { .. }))
            if !exists(first) =>
        {
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

pub(crate) fn diff(ctx: &Ctx, store: &Store, args: &DiffArgs) -> Result<(), CliError> {
    note_latest(store, args.id, ctx.json);
    let (second, rest) = split_rest(ctx, store, args.rest)?;
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
        let outcome = store.diff(args.id, &rel, text).map_err(checkpoint_error)?;
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
        .compare(args.id, &second, &rel, text)
        .map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(&json!({ "project": project, "diff": outcome }));
    }
    write_text(&mut std::io::stdout().lock(), &outcome, ctx.json)
}

fn write_text(out: &mut impl Write, outcome: &CompareOutcome, json: bool) -> Result<(), CliError> {
    if let Some(text) = &outcome.text {
        let color = display::color_stdout(json);
        out.write_all(&display::render_diff(
            text,
            color,
            std::io::stdout().is_terminal(),
        ))?;
    }
    Ok(())
}
