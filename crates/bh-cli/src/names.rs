//! How people name the things commands take, the same way everywhere: a Pi
//! session by path **or** id (as Pi does), a session entry by its id or a
//! unique prefix of at least four hex digits. Ambiguous → exit 10 listing the
//! candidates; unknown → not found (exit 4). Checkpoints resolve in
//! `bh-checkpoint`, executions and tasks in `exec::ids`.

use std::path::{Path, PathBuf};

use bh_runtime::{SessionChoice, SessionRequest};
use bh_session::Session;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};
use crate::exec::ids::MIN_HEX;

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
    };
    request.find(arg).map_err(crate::agent::runtime_error)
}

/// The full id of the entry `query` names in `session`: the id itself, or a
/// unique prefix of at least [`MIN_HEX`] hex digits.
pub(crate) fn entry_id(session: &Session, file: &Path, query: &str) -> Result<String, CliError> {
    if session.entry(query).is_some() {
        return Ok(query.to_owned());
    }
    let not_found = || {
        CliError::new(
            ErrorKind::NotFound,
            format!(
                "no entry {query:?} in {} (`bh session tree` shows the entries)",
                file.display()
            ),
        )
    };
    if query.is_empty() || !query.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_found());
    }
    if query.len() < MIN_HEX {
        return Err(CliError::usage(format!(
            "entry id prefix {query:?} is too short: give at least {MIN_HEX} hex digits"
        )));
    }
    let query_lower = query.to_ascii_lowercase();
    let mut matches: Vec<&str> = session
        .entries()
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| !id.is_empty() && id.to_ascii_lowercase().starts_with(&query_lower))
        .collect();
    matches.dedup();
    match matches.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(not_found()),
        many => Err(CliError::new(
            ErrorKind::Ambiguous,
            format!(
                "entry id prefix {query:?} is ambiguous in {}; candidates: {}",
                file.display(),
                many.join(", ")
            ),
        )),
    }
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
    let session = Session::load(file).map_err(crate::agent::session_error)?;
    entry_id(&session, file, &query).map(Some)
}
