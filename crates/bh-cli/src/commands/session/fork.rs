//! `bh session fork`: write a fork of a session to a new file and print its path.

use std::path::{Path, PathBuf};

use bh_session::{ForkOptions, ForkTarget, session_dir_for_cwd};
use serde_json::json;

use super::{load_resolved, out};
use crate::command_error::session_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session to fork: a file, or a session id prefix as Pi takes it.
    file: PathBuf,
    /// Fork at this entry (id or unique prefix of at least 4 hex digits;
    /// default: the active leaf). Whole-tree forks
    /// make it the active leaf by appending an entry under it.
    #[arg(long, value_name = "ID")]
    entry: Option<String>,
    /// Copy only the root→entry path (Pi's createBranchedSession)
    /// instead of the whole tree (Pi's forkFrom).
    #[arg(long)]
    path_only: bool,
    /// Working directory recorded in the new header; the fork goes to
    /// that project's session folder (default: the source's cwd and folder).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Exact output path (refused if it exists).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        file,
        entry,
        path_only,
        cwd,
        out,
    } = args;
    fork(ctx, &file, entry, path_only, cwd, out)
}

fn fork(
    ctx: &Ctx,
    file: &Path,
    entry: Option<String>,
    path_only: bool,
    cwd: Option<PathBuf>,
    out_path: Option<PathBuf>,
) -> Result<(), CliError> {
    // Resolved once: the file forked is the file read.
    let src_path = crate::names::session_path(ctx, file)?;
    let s = load_resolved(&src_path, file)?;
    if s.header().is_none() {
        return Err(CliError::new(
            ErrorKind::Invalid,
            format!(
                "cannot fork: {}: source session file is empty or invalid",
                file.display()
            ),
        ));
    }
    let entry = entry.map(|q| crate::names::entry_id(&s, &q)).transpose()?;
    let cwd = cwd.map(|c| ctx.abs(&c).display().to_string());
    let target = match (&out_path, &cwd) {
        (Some(o), _) => ForkTarget::File(ctx.abs(o)),
        (None, Some(c)) => ForkTarget::Dir(session_dir_for_cwd(&ctx.pi_agent_dir()?, c)),
        (None, None) => ForkTarget::Dir(bh_session::fork::default_fork_dir(&src_path)),
    };
    let opts = ForkOptions {
        path_only,
        entry,
        cwd,
        ..ForkOptions::default()
    };
    let forked = bh_session::fork(&s, &target, &opts).map_err(session_error)?;
    if ctx.json {
        return print_json(&json!({
            "path": forked.path.display().to_string(),
            "sessionId": forked.session_id,
            "entries": forked.entries,
            "leaf": forked.leaf,
            "parentSession": src_path.display().to_string(),
            "pathOnly": path_only,
        }));
    }
    out(&format!("{}\n", forked.path.display()))
}
