//! `bh checkpoint restore --session FILE --entry ID [--rewind-session]`: the
//! files back to the checkpoint taken before the first mutating call at or
//! after a session entry (an undo point first), and optionally the session's
//! leaf moved back to that entry. The same logic serves the REPL's `/rewind`.

use std::path::{Path, PathBuf};

use bh_checkpoint::{Checkpoint, RestoreMode, RestoreOutcome, Store};
use bh_runtime::RewindError;
use bh_session::Session;
use serde_json::json;

use super::checkpoint_error;
use crate::context::Ctx;
use crate::display::escape;
use crate::error::{CliError, ErrorKind, print_json};

/// The exit-code kind of each rewind failure.
pub(crate) fn rewind_error(e: RewindError) -> CliError {
    let kind = match e {
        RewindError::Store { source, project } => {
            let inner = checkpoint_error(*source);
            return CliError::new(
                inner.kind,
                format!("checkpoints of {}: {}", project.display(), inner.message),
            );
        }
        RewindError::Session(s) => return crate::agent::session_error(s),
        RewindError::BadEntryId { .. } => ErrorKind::Usage,
        RewindError::NoSuchEntry { .. } | RewindError::CheckpointGone { .. } => ErrorKind::NotFound,
        RewindError::AmbiguousEntry { .. } => ErrorKind::Ambiguous,
        RewindError::OtherProject { .. } => ErrorKind::Refused,
    };
    CliError::new(kind, e.to_string())
}

/// The files restored for a rewind to `entry`: the checkpoint and the
/// restore's outcome, or `None` when no mutating call followed the entry.
pub(crate) fn restore_files(
    session: &Session,
    store: &Store,
    entry: &bh_session::Entry,
) -> Result<Option<(Checkpoint, RestoreOutcome)>, CliError> {
    let Some(cp) = bh_runtime::files_checkpoint(session, store, entry).map_err(rewind_error)?
    else {
        return Ok(None);
    };
    let outcome = store
        .restore(&cp.commit, &[], RestoreMode::Exact)
        .map_err(checkpoint_error)?;
    Ok(Some((cp, outcome)))
}

/// A failure after the files were rewound (moving the session's leaf): says
/// that they were, and how to undo them (`undo`, a command), in the message
/// and, under `--json`, in the document printed with the error.
pub(crate) fn files_already_rewound(
    e: CliError,
    (cp, r): &(Checkpoint, RestoreOutcome),
    undo: &str,
) -> CliError {
    let message = format!(
        "{}; the files were already rewound to checkpoint {} ({} written, {} deleted); undo with: {undo}",
        e.message,
        cp.id,
        r.restored.len(),
        r.deleted.len()
    );
    CliError {
        message,
        details: Some(json!({ "checkpoint": cp, "restore": r, "undo": undo })),
        ..e
    }
}

/// Says there was nothing to restore after `entry`.
pub(crate) fn no_checkpoint(entry: &str) -> String {
    format!(
        "no checkpoint after entry {entry}: no mutating tool call with a checkpoint followed it, so there are no files to rewind"
    )
}

/// `bh checkpoint restore --session FILE --entry ID`.
pub(crate) fn run(
    ctx: &Ctx,
    store: &Store,
    session_file: &Path,
    entry: &str,
    rewind_session: bool,
) -> Result<(), CliError> {
    // A path, or a session id prefix as Pi takes it.
    let file: PathBuf =
        bh_runtime::find_session(ctx.pi_agent_dir().ok().as_deref(), &ctx.cwd, session_file)
            .map_err(crate::agent::runtime_error)?;
    if file.is_dir() {
        return Err(CliError::usage(format!(
            "--session {}: is a directory, not a session file",
            file.display()
        )));
    }
    let session = Session::load(&file).map_err(crate::agent::session_error)?;
    session
        .require_header("rewind")
        .map_err(crate::agent::session_error)?;
    let target = bh_runtime::resolve_entry(&session, entry).map_err(rewind_error)?;
    let old_leaf = session.leaf().map(|e| e.id.clone());
    let files = restore_files(&session, store, target)?;
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
                Some(done) => files_already_rewound(
                    e,
                    done,
                    &format!("bh checkpoint restore {} --exact", done.1.safety.id),
                ),
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
            "checkpoint": files.as_ref().map(|(cp, _)| cp),
            "restore": files.as_ref().map(|(_, r)| r),
            "leaf": leaf.as_ref().map(|(to, appended)| json!({
                "from": old_leaf, "to": to, "appended": appended,
            })),
        }));
    }
    match &files {
        Some((cp, r)) => println!(
            "files rewound to checkpoint {} (before the first mutating call after entry {}): {} written, {} deleted\n\
             undo with: bh checkpoint restore {} --exact",
            cp.id,
            target.id,
            r.restored.len(),
            r.deleted.len(),
            r.safety.id
        ),
        None => println!("files unchanged: {}", no_checkpoint(&target.id)),
    }
    if let Some((to, appended)) = leaf {
        println!(
            "session leaf moved to {} (entry {appended} appended); the previous leaf was {} \
             (`/tree {}` in `bh agent --session {}` goes back)",
            to.as_deref().unwrap_or("a new root"),
            old_leaf.as_deref().unwrap_or("none"),
            old_leaf.as_deref().unwrap_or("ID"),
            escape(&file.display().to_string())
        );
    }
    Ok(())
}
