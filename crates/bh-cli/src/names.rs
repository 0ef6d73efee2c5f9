//! How people name the things commands take, the same way everywhere: a Pi
//! session by path **or** id (as Pi does), a session entry by its id or a
//! unique prefix of at least four hex digits. Ambiguous → exit 10 listing the
//! candidates; unknown → not found (exit 4). Checkpoints resolve in
//! `bh-checkpoint`, executions and tasks in `exec::ids`.

use std::path::{Path, PathBuf};

use bh_runtime::{SessionChoice, SessionRequest};
use bh_session::Session;

use crate::command_error::{rewind_error, runtime_error, session_error};
use crate::context::Ctx;
use crate::error::CliError;

/// A session argument: an existing file (relative to the current
/// directory), or, when no such file exists and the argument is not
/// path-like (no `/`, not ending in `.jsonl`), a session id prefix looked up
/// as `bh agent --session` does (this directory's sessions first, then all).
/// A path-like argument that does not exist is returned as is, so the
/// caller's own "no such file" error names it.
pub(crate) fn session_path(ctx: &Ctx, arg: &Path) -> Result<PathBuf, CliError> {
    let path = ctx.abs(arg);
    if fs_err::symlink_metadata(&path).is_ok() {
        return Ok(path);
    }
    let Ok(agent_dir) = ctx.pi_agent_dir() else {
        return Ok(path);
    };
    let request = SessionRequest {
        choice: SessionChoice::New,
        agent_dir: Some(agent_dir),
        run_dir: ctx.cwd.clone(),
        cwd: None,
        state_dir: ctx.state_dir.clone(),
    };
    request.find(arg).map_err(runtime_error)
}

/// The full id of the entry `query` names in `session`: the id itself, or a
/// unique prefix of at least four hex digits (`bh_runtime::resolve_entry`,
/// the one rule).
pub(crate) fn entry_id(session: &Session, query: &str) -> Result<String, CliError> {
    bh_runtime::resolve_entry(session, query)
        .map(|e| e.id.clone())
        .map_err(rewind_error)
}

/// [`entry_id`] for an optional `--entry`, loading the session only when
/// one is given.
pub(crate) fn entry_in_file(
    file: &Path,
    query: Option<String>,
) -> Result<Option<String>, CliError> {
    let Some(query) = query else {
        return Ok(None);
    };
    let session = Session::load(file).map_err(session_error)?;
    entry_id(&session, &query).map(Some)
}
