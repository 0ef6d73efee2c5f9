//! `bh session …`: read, validate, fork and list Pi coding-agent sessions.
//! One file per subcommand; this one holds the group and what they share:
//! loading a session as the user named it, escaped output, problem lines.

use std::io::Write;
use std::path::Path;

use bh_session::{Problem, Session, SessionError};
use clap::Subcommand;
use serde_json::Value;

use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind};

mod context;
mod export;
mod fork;
mod list;
mod show;
mod tree;
mod validate;
mod view;
use crate::command_error::session_error;
pub(crate) use view::tree_text;

#[derive(Subcommand, Debug)]
pub enum SessionCmd {
    /// Header, counts, active leaf, name, models, tokens and cost, problems.
    Show(show::Args),
    /// The entry tree as `git log --graph` draws history: the active path on
    /// the left, side branches to its right, runs of tool steps folded.
    Tree(tree::Args),
    /// Check that files are structurally sound; every problem with its line.
    Validate(validate::Args),
    /// The messages a model would see (exactly as Pi builds them).
    Context(context::Args),
    /// Write a fork of a session to a new file and print its path.
    Fork(fork::Args),
    /// A self-contained HTML report of a session (one file, no network): the
    /// tree, every message, tool calls with their diffs, checkpoint markers.
    Export(export::Args),
    /// The sessions Pi keeps for a project, newest first.
    #[command(visible_alias = "ls")]
    List(list::Args),
}

pub fn run(cmd: SessionCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        SessionCmd::Show(args) => show::run(ctx, args),
        SessionCmd::Tree(args) => tree::run(ctx, args),
        SessionCmd::Validate(args) => validate::run(ctx, args),
        SessionCmd::Context(args) => context::run(ctx, args),
        SessionCmd::Fork(args) => fork::run(ctx, args),
        SessionCmd::Export(args) => export::run(ctx, args),
        SessionCmd::List(args) => list::run(ctx, args),
    }
}

fn load(ctx: &Ctx, file: &Path) -> Result<Session, CliError> {
    load_resolved(&crate::names::session_path(ctx, file)?, file)
}

/// [`load`] of `path`, what `file` (as the user gave it) resolved to.
fn load_resolved(path: &Path, file: &Path) -> Result<Session, CliError> {
    if path.is_dir() {
        return Err(CliError::new(
            ErrorKind::Usage,
            format!("{}: is a directory, not a session file", file.display()),
        ));
    }
    Session::load(path).map_err(|e| match e {
        SessionError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            CliError::new(
                ErrorKind::NotFound,
                format!("{}: no such file", file.display()),
            )
        }
        other => session_error(other),
    })
}

/// Refuses a file that is not a Pi session at all (no session header), with
/// the validator's own message, instead of listing a problem per line.
fn require_session(s: &Session, file: &Path) -> Result<(), CliError> {
    s.require_header(&format!("{}", file.display()))
        .map(|_| ())
        .map_err(session_error)
}

/// Human output: every line with its control characters escaped, since
/// sessions and file names are text a stranger may have written.
fn out(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            stdout.write_all(b"\n")?;
        }
        stdout.write_all(display::escape(line).as_bytes())?;
    }
    stdout.flush()?;
    Ok(())
}

/// `LINE: error|warning: message (entry ID)`.
fn problem_line(p: &Problem) -> String {
    let sev = if p.is_error() { "error" } else { "warning" };
    let mut t = format!("{}: {sev}: {}", p.line, p.message);
    if let Some(id) = &p.entry_id {
        t.push_str(&format!(" (entry {id})"));
    }
    t
}

fn problems_json(problems: &[Problem]) -> Value {
    serde_json::to_value(problems).unwrap_or(Value::Null)
}
