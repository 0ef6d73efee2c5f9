//! `bh checkpoint restore --session FILE --entry ID [--rewind-session]`: the
//! paths the session's own calls changed after an entry back to how they
//! were before the first of them (the plan of `bh_checkpoint`'s
//! `Store::rewind`; an undo point first), and optionally the session's leaf
//! moved back to that entry. The same logic serves `bh rewind` and the
//! REPL's `/rewind`.

use std::path::{Path, PathBuf};

use bh_checkpoint::{CheckpointError, Force, RewindOutcome, Store};
use bh_session::Session;
use serde_json::json;

use crate::command_error::{checkpoint_error, rewind_error, runtime_error, session_error};
use crate::context::Ctx;
use crate::display::escape;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;

/// The files of a rewind to `entry`, by the session's own calls after it
/// (the plan of [`Store::rewind`]: only the paths they changed, conflicts
/// refused unless forced; an undo point first). `None` when no mutating
/// call followed the entry. `context` is kept for `bh rewind --undo`.
pub(crate) fn rewind_files(
    session: &Session,
    store: &Store,
    entry: &bh_session::Entry,
    force: &Force,
    dry_run: bool,
    context: serde_json::Value,
) -> Result<Option<RewindOutcome>, CliError> {
    let spans = bh_runtime::files_spans(session, store, entry).map_err(rewind_error)?;
    if spans.is_empty() {
        return Ok(None);
    }
    match store.rewind(&spans, force, dry_run, context) {
        Ok(outcome) => Ok(Some(outcome)),
        Err(e @ CheckpointError::RewindConflict { .. }) => {
            let plan = store.rewind_plan(&spans, force).ok();
            Err(checkpoint_error(e).with_details(json!({ "plan": plan })))
        }
        Err(e) => Err(checkpoint_error(e)),
    }
}

/// The plan, one line per path, for people.
pub(crate) fn print_plan(o: &RewindOutcome) -> std::io::Result<()> {
    let p = &o.plan;
    for c in &p.conflicts {
        let what = if c.forced { "forced  " } else { "conflict" };
        outln!("{what} {} ({})", c.path, c.reason)?;
    }
    for path in &p.revert {
        outln!("revert   {path}")?;
    }
    for path in &p.delete {
        outln!("delete   {path}")?;
    }
    for path in &p.left_alone {
        outln!("leave    {path} (not changed by the session)")?;
    }
    let shown = |v: &Option<String>| match v.as_deref() {
        None => "(none)".to_owned(),
        Some(s) if s.starts_with("ref: ") => s.to_owned(),
        Some(s) => s.chars().take(12).collect(),
    };
    for r in &p.refs {
        outln!(
            "ref      {} {} -> {}",
            crate::display::escape(&r.name),
            shown(&r.from),
            shown(&r.to)
        )?;
    }
    if let Some(note) = &p.approximate {
        outln!("note: {note}")?;
    }
    let refused = p.refused().len();
    let head = if o.dry_run { "would rewind" } else { "rewound" };
    outln!(
        "{head} {} call{} to checkpoint {}: {} reverted, {} deleted, {} left alone{}{}",
        p.calls,
        if p.calls == 1 { "" } else { "s" },
        p.target.id,
        p.revert.len(),
        p.delete.len(),
        p.left_alone.len(),
        if p.refs.is_empty() {
            String::new()
        } else {
            format!(", {} ref(s) moved back", p.refs.len())
        },
        if refused > 0 {
            format!(", {refused} conflict(s) refused (--force PATH takes one)")
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// A failure after the files were rewound (moving the session's leaf): says
/// that they were, and how to undo them (`undo`, a command), in the message
/// and, under `--json`, in the document printed with the error.
pub(crate) fn files_already_rewound(e: CliError, r: &RewindOutcome, undo: &str) -> CliError {
    let message = format!(
        "{}; the files were already rewound to checkpoint {} ({} reverted, {} deleted); undo with: {undo}",
        e.message,
        r.plan.target.id,
        r.plan.revert.len(),
        r.plan.delete.len()
    );
    CliError {
        message,
        details: Some(json!({ "rewind": r, "undo": undo })),
        ..e
    }
}

/// Says there was nothing to restore after `entry`.
pub(crate) fn no_checkpoint(entry: &str) -> String {
    format!(
        "no checkpoint after entry {entry}: no mutating tool call with a checkpoint followed it, so there are no files to rewind"
    )
}

/// How a rewind to a session entry runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct RewindOpts {
    /// Also move the session's leaf back to the entry.
    pub rewind_session: bool,
    /// Print the plan, change nothing.
    pub dry_run: bool,
    pub force: Force,
}

/// `bh checkpoint restore --session FILE --entry ID` and `bh rewind`.
pub(crate) fn run(
    ctx: &Ctx,
    store: &Store,
    session_file: &Path,
    entry: &str,
    opts: &RewindOpts,
) -> Result<(), CliError> {
    let rewind_session = opts.rewind_session && !opts.dry_run;
    // A path, or a session id prefix as Pi takes it.
    let file: PathBuf =
        bh_runtime::find_session(ctx.pi_agent_dir().ok().as_deref(), &ctx.cwd, session_file)
            .map_err(runtime_error)?;
    if file.is_dir() {
        return Err(CliError::usage(format!(
            "--session {}: is a directory, not a session file",
            file.display()
        )));
    }
    let session = Session::load(&file).map_err(session_error)?;
    session.require_header("rewind").map_err(session_error)?;
    let target = bh_runtime::resolve_entry(&session, entry).map_err(rewind_error)?;
    let old_leaf = session.leaf().map(|e| e.id.clone());
    let context = json!({ "session": file, "leaf": old_leaf, "moved": rewind_session });
    let files = rewind_files(&session, store, target, &opts.force, opts.dry_run, context)?;
    if files.is_none() && !rewind_session {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!("{}; nothing changed", no_checkpoint(&target.id)),
        ));
    }
    let leaf = if rewind_session {
        let to = bh_runtime::conversation_leaf(&session, target);
        let appended = bh_runtime::move_leaf(&file, to.as_deref())
            .map_err(rewind_error)
            .map_err(|e| match &files {
                Some(done) => files_already_rewound(e, done, "bh rewind --undo"),
                None => e,
            })?;
        Some((to, appended))
    } else {
        None
    };
    if ctx.json {
        return print_json(&json!({
            "project": store.project().to_string_lossy(),
            "session": file,
            "entry": target.id,
            "dry_run": opts.dry_run,
            "checkpoint": files.as_ref().map(|r| &r.plan.target),
            "rewind": files,
            "leaf": leaf.as_ref().map(|(to, appended)| json!({
                "from": old_leaf, "to": to, "appended": appended,
            })),
        }));
    }
    match &files {
        Some(r) if r.dry_run => {
            print_plan(r)?;
            outln!("dry run: nothing was changed")?;
        }
        Some(r) => {
            print_plan(r)?;
            outln!(
                "the session's changes after entry {} are undone (checkpoint {}); undo with: bh rewind --undo",
                target.id,
                r.plan.target.id
            )?;
        }
        None => outln!("files unchanged: {}", no_checkpoint(&target.id))?,
    }
    if let Some((to, appended)) = leaf {
        outln!(
            "session leaf moved to {} (entry {appended} appended); the previous leaf was {} \
             (`/tree {}` in `bh agent --session {}` goes back)",
            to.as_deref().unwrap_or("a new root"),
            old_leaf.as_deref().unwrap_or("none"),
            old_leaf.as_deref().unwrap_or("ID"),
            escape(&file.display().to_string())
        )?;
    }
    Ok(())
}
