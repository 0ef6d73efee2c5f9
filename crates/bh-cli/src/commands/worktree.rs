//! `bh worktree …`: managed linked worktrees — create (provisioning receipt,
//! `.env*` links, post-create commands), list, enter and leave (carry a Pi
//! session into one and back), dispose (checkpoint first), and consume a
//! prepared handoff. One file per subcommand; this one holds the group and
//! what its subcommands share (the new worktree's arguments, the environment
//! of post-create commands, the report of a prepared session).

use std::path::PathBuf;

use bh_worktree::CreateOptions;
use clap::Subcommand;

use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::{errln, outln};

mod consume;
mod create;
mod dispose;
mod enter;
mod leave;
mod list;

pub(crate) use create::print_created;
pub(crate) use dispose::print_disposed;
pub(crate) use list::print_list;

/// What a new worktree is: shared by `bh worktree create` and the agent's
/// `/worktree create`.
#[derive(clap::Args, Debug)]
pub struct NewWorktree {
    /// Worktree name (letters, digits, '.', '_', '-').
    pub name: String,
    /// Start at this revision (default: HEAD of the checkout it is made from).
    #[arg(long, value_name = "REV")]
    pub from: Option<String>,
    /// Check out (or create) this branch (default: a new branch named NAME).
    #[arg(long, value_name = "BRANCH", conflicts_with = "detach")]
    pub branch: Option<String>,
    /// Detached HEAD, no branch.
    #[arg(long)]
    pub detach: bool,
}

impl NewWorktree {
    /// The library options for creating it from `cwd`.
    pub(crate) fn options(
        self,
        path: Option<PathBuf>,
        session: Option<String>,
        cwd: PathBuf,
    ) -> CreateOptions {
        CreateOptions {
            name: self.name,
            from: self.from,
            branch: self.branch,
            detach: self.detach,
            path,
            session,
            cwd,
            command_env: command_env(),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum WorktreeCmd {
    /// Add a linked worktree: link the main checkout's ignored .env* files, run
    /// the post-create commands of .better-harness/worktree.toml, record a receipt.
    Create(create::Args),
    /// Every worktree, managed or not: branch, provisioning state, dirty and unpushed counts.
    #[command(visible_alias = "ls")]
    List(list::Args),
    /// Prepare a session for the worktree: fork FILE into its cwd with one
    /// orientation entry and a handoff; prints the new session file.
    Enter(enter::Args),
    /// Prepare a session for the main checkout (the way back from a managed
    /// worktree; what `/worktree dispose` of the worktree a session is in
    /// needs first): fork FILE into the main checkout with one orientation
    /// entry and a handoff; prints the new session file.
    Leave(leave::Args),
    /// Checkpoint every file (ignored ones too), then remove the worktree;
    /// refuses dirty or unmerged work unless --force.
    Dispose(dispose::Args),
    /// Consume the handoff of a session prepared by `enter` (what the agent
    /// runtime does when it opens it): verify the arrival, record it once.
    Consume(consume::Args),
}

pub fn run(cmd: WorktreeCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        WorktreeCmd::Create(args) => create::run(ctx, args),
        WorktreeCmd::List(args) => list::run(ctx, args),
        WorktreeCmd::Enter(args) => enter::run(ctx, args),
        WorktreeCmd::Leave(args) => leave::run(ctx, args),
        WorktreeCmd::Dispose(args) => dispose::run(ctx, args),
        WorktreeCmd::Consume(args) => consume::run(ctx, args),
    }
}

fn repo_dir(ctx: &Ctx, repo: Option<PathBuf>) -> Result<PathBuf, CliError> {
    ctx.dir_arg(repo.as_deref(), "--repo")
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The environment of post-create commands (installers, builds): the
/// caller's, minus `GIT_*` (a hook's `GIT_DIR` would aim them elsewhere).
pub(crate) fn command_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| !k.as_encoded_bytes().starts_with(b"GIT_"))
        .collect()
}

/// The report of a prepared session (`enter`, `leave`): the session path on
/// stdout, for scripts; the rest on stderr, for a person.
fn print_entered(ctx: &Ctx, out: &bh_handoff::EnterOutcome) -> Result<(), CliError> {
    if ctx.json {
        return print_json(&serde_json::to_value(out).map_err(CliError::internal)?);
    }
    errln!(
        "bh: session carried into {} ({}, {} entries); orientation {}; handoff {}",
        out.worktree.display(),
        out.carry,
        out.entries_carried,
        out.orientation_id,
        out.handoff.display()
    );
    if let Some(n) = out.left_behind_count.filter(|n| *n > 0) {
        errln!(
            "bh: {n} uncommitted file(s) stayed behind in {}",
            out.source_cwd
        );
    }
    // The next step, for a person (stdout stays the session path, for scripts).
    let (dir, file) = (shell_quote(&out.worktree), shell_quote(&out.target));
    errln!("bh: next: cd {dir} && pi --session {file}");
    errln!("bh:   or: bh agent --cwd {dir} --session {file}");
    outln!("{}", out.target.display())?;
    Ok(())
}

/// `path` as one word for a POSIX shell: as is when it holds only safe
/// characters, else single-quoted.
fn shell_quote(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
