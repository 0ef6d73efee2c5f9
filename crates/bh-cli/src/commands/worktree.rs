//! `bh worktree …`: managed linked worktrees — create (provisioning receipt,
//! `.env*` links, post-create commands), list, enter (carry a Pi session into
//! one), dispose (checkpoint first), and consume a prepared handoff.

use std::path::PathBuf;

use bh_handoff::{ConsumeOutcome, EnterOptions};
use bh_worktree::{
    CreateOptions, CreateOutcome, CreateProgress, DisposeOptions, DisposeOutcome, WorktreeInfo,
};
use clap::Subcommand;
use serde_json::json;

use crate::command_error::{handoff_error, worktree_error};
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::progress::Progress;
use crate::ui::{errln, outln};

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
    Create {
        #[command(flatten)]
        new: NewWorktree,
        /// Folder that holds the worktree (default: config `dir`, else `<repo>.worktrees`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The Pi session asking for it (recorded in the receipt).
        #[arg(long, value_name = "FILE")]
        session: Option<PathBuf>,
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Every worktree, managed or not: branch, provisioning state, dirty and unpushed counts.
    #[command(visible_alias = "ls")]
    List {
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Prepare a session for the worktree: fork FILE into its cwd with one
    /// orientation entry and a handoff; prints the new session file.
    Enter {
        /// The managed worktree's name.
        name: String,
        /// The source session: a file, or a session id prefix as Pi takes it.
        #[arg(long, value_name = "FILE|ID")]
        session: PathBuf,
        /// The entry the live session is at, when the file's leaf is not it
        /// (id or unique prefix of at least 4 hex digits).
        #[arg(long, value_name = "ID")]
        entry: Option<String>,
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Prepare a session for the main checkout (the way back from a managed
    /// worktree; what `/worktree dispose` of the worktree a session is in
    /// needs first): fork FILE into the main checkout with one orientation
    /// entry and a handoff; prints the new session file.
    Leave {
        /// The source session, in a managed worktree: a file or a session id prefix.
        #[arg(long, value_name = "FILE|ID")]
        session: PathBuf,
        /// The entry the live session is at, when the file's leaf is not it.
        #[arg(long, value_name = "ID")]
        entry: Option<String>,
        /// The managed worktree the session is in (default: the current directory).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Checkpoint every file (ignored ones too), then remove the worktree;
    /// refuses dirty or unmerged work unless --force.
    Dispose {
        /// The managed worktree's name.
        name: String,
        /// Dispose even with uncommitted or unmerged work (checkpointed first).
        #[arg(long)]
        force: bool,
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// Consume the handoff of a session prepared by `enter` (what the agent
    /// runtime does when it opens it): verify the arrival, record it once.
    Consume {
        /// The prepared session: a file, or a session id prefix as Pi takes it.
        target: PathBuf,
    },
}

pub fn run(cmd: WorktreeCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        WorktreeCmd::Create {
            new,
            dir,
            session,
            repo,
        } => create(ctx, new, dir, session, repo),
        WorktreeCmd::List { repo } => list(ctx, repo),
        WorktreeCmd::Enter {
            name,
            session,
            entry,
            repo,
        } => enter(ctx, name, session, entry, repo),
        WorktreeCmd::Leave {
            session,
            entry,
            repo,
        } => leave(ctx, session, entry, repo),
        WorktreeCmd::Dispose { name, force, repo } => dispose(ctx, name, force, repo),
        WorktreeCmd::Consume { target } => consume(ctx, target),
    }
}

fn repo_dir(ctx: &Ctx, repo: Option<PathBuf>) -> Result<PathBuf, CliError> {
    ctx.dir_arg(repo.as_deref(), "--repo")
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[allow(clippy::too_many_arguments)]
fn create(
    ctx: &Ctx,
    new: NewWorktree,
    dir: Option<PathBuf>,
    session: Option<PathBuf>,
    repo: Option<PathBuf>,
) -> Result<(), CliError> {
    let path = dir.map(|d| ctx.abs(&d).join(&new.name));
    let session = session.map(|s| ctx.abs(&s).display().to_string());
    let opts = new.options(path, session, repo_dir(ctx, repo)?);
    let progress = Progress::new(ctx.json);
    let result = bh_worktree::create_with_progress(&ctx.git(), &opts, &mut |p| match p {
        CreateProgress::AddWorktree => progress.phase("git worktree add"),
        CreateProgress::LinkEnv => progress.phase("linking .env files"),
        CreateProgress::PostCreate {
            index,
            total,
            command,
        } => progress.phase(&format!("post-create {index}/{total}: {command}")),
    });
    match &result {
        Ok(_) => progress.done(),
        Err(_) => progress.failed(),
    }
    drop(progress);
    let out = result.map_err(worktree_error)?;
    if ctx.json {
        return print_json(&json!({
            "worktree": out.receipt,
            "receipt": out.receipt_path,
            "log": out.log,
        }));
    }
    print_created(&out)?;
    Ok(())
}

/// The environment of post-create commands (installers, builds): the
/// caller's, minus `GIT_*` (a hook's `GIT_DIR` would aim them elsewhere).
pub(crate) fn command_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| !k.as_encoded_bytes().starts_with(b"GIT_"))
        .collect()
}

/// The human report of `create` (also `/worktree create` in `bh agent`).
pub(crate) fn print_created(out: &CreateOutcome) -> std::io::Result<()> {
    let r = &out.receipt;
    let what = match (&r.branch, r.created_branch) {
        (Some(b), true) => format!("new branch {b} at {}", short(&r.base)),
        (Some(b), false) => format!("branch {b} at {}", short(&r.base)),
        (None, _) => format!("detached at {}", short(&r.base)),
    };
    outln!(
        "created worktree {} at {} ({what})",
        r.name,
        r.path.display()
    )?;
    if !r.env_links.is_empty() {
        outln!("linked: {}", r.env_links.join(", "))?;
    }
    if !r.post_create.is_empty() {
        outln!(
            "post-create: {} command(s) ran (log: {})",
            r.post_create.len(),
            out.log.display()
        )?;
    }
    Ok(())
}

fn count(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into())
}

/// Also `/worktree list` in `bh agent` (never `--json` there).
pub(crate) fn list(ctx: &Ctx, repo: Option<PathBuf>) -> Result<(), CliError> {
    let all = bh_worktree::list(&ctx.git(), &repo_dir(ctx, repo)?).map_err(worktree_error)?;
    if ctx.json {
        return print_json(&json!({ "worktrees": all }));
    }
    outln!(
        "{:<16} {:<24} {:<14} {:>6} {:>9}  PATH",
        "NAME",
        "BRANCH",
        "STATE",
        "DIRTY",
        "UNPUSHED"
    )?;
    for w in &all {
        outln!("{}", row(w))?;
    }
    Ok(())
}

fn row(w: &WorktreeInfo) -> String {
    let name = match (&w.name, w.main) {
        (Some(n), _) => n.clone(),
        (None, true) => "(main)".into(),
        (None, false) => "-".into(),
    };
    let branch = match &w.branch {
        Some(b) => b.clone(),
        None => format!("(detached {})", w.head.as_deref().map(short).unwrap_or("?")),
    };
    let mut state = match (w.state, w.main) {
        (Some(s), _) => s.as_str().to_owned(),
        (None, true) => "main".into(),
        (None, false) => "unmanaged".into(),
    };
    if w.locked.is_some() {
        state.push_str(",locked");
    }
    if w.prunable.is_some() {
        state.push_str(",prunable");
    }
    format!(
        "{name:<16} {branch:<24} {state:<14} {:>6} {:>9}  {}",
        count(w.dirty),
        count(w.unpushed),
        w.path.display()
    )
}

fn enter(
    ctx: &Ctx,
    name: String,
    session: PathBuf,
    entry: Option<String>,
    repo: Option<PathBuf>,
) -> Result<(), CliError> {
    let session = crate::names::session_path(ctx, &session)?;
    let entry = crate::names::entry_in_file(&session, entry)?;
    let opts = EnterOptions {
        name,
        cwd: repo_dir(ctx, repo)?,
        session,
        entry,
        agent_dir: ctx.pi_agent_dir()?,
        unflushed: Vec::new(),
        state_dir: ctx.state_dir.clone(),
    };
    let out = bh_handoff::enter(&ctx.git(), &opts).map_err(handoff_error)?;
    print_entered(ctx, &out)
}

/// `leave`: the session of the managed worktree at `repo` (or the cwd)
/// carried back into the main checkout.
fn leave(
    ctx: &Ctx,
    session: PathBuf,
    entry: Option<String>,
    repo: Option<PathBuf>,
) -> Result<(), CliError> {
    let session = crate::names::session_path(ctx, &session)?;
    let entry = crate::names::entry_in_file(&session, entry)?;
    let cwd = repo_dir(ctx, repo)?;
    let (name, _) = bh_worktree::containing(&ctx.git(), &cwd)
        .map_err(worktree_error)?
        .ok_or_else(|| {
            CliError::usage(format!(
                "{} is not inside a managed worktree (bh worktree list shows them)",
                cwd.display()
            ))
        })?;
    let opts = EnterOptions {
        name,
        cwd,
        session,
        entry,
        agent_dir: ctx.pi_agent_dir()?,
        unflushed: Vec::new(),
        state_dir: ctx.state_dir.clone(),
    };
    let out = bh_handoff::enter_main(&ctx.git(), &opts, false).map_err(handoff_error)?;
    print_entered(ctx, &out)
}

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

fn dispose(ctx: &Ctx, name: String, force: bool, repo: Option<PathBuf>) -> Result<(), CliError> {
    let opts = DisposeOptions {
        name,
        cwd: repo_dir(ctx, repo)?,
        force,
        state_dir: ctx.state_dir.clone(),
        max_file_size: bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
    };
    let out = bh_worktree::dispose(&ctx.git(), &opts).map_err(worktree_error)?;
    if ctx.json {
        return print_json(&serde_json::to_value(&out).map_err(CliError::internal)?);
    }
    print_disposed(&out)?;
    Ok(())
}

/// The human report of `dispose` (also `/worktree dispose` in `bh agent`).
pub(crate) fn print_disposed(out: &DisposeOutcome) -> std::io::Result<()> {
    outln!("disposed worktree {} ({})", out.name, out.path.display())?;
    outln!(
        "checkpoint {} (restore: bh checkpoint restore {} --project {} after re-adding the worktree there)",
        out.checkpoint.id,
        out.checkpoint.id,
        out.path.display()
    )?;
    outln!(
        "ignored files: {} copied to {}{}",
        out.ignored.files.len(),
        out.ignored.dir.display(),
        if out.ignored.skipped.is_empty() {
            String::new()
        } else {
            format!(
                " ({} skipped, see manifest.json)",
                out.ignored.skipped.len()
            )
        }
    )?;
    match (&out.branch, out.branch_deleted, &out.branch_kept) {
        (Some(b), true, _) => outln!("branch {b} deleted (merged)")?,
        (Some(b), false, Some(why)) => outln!("branch {b} kept ({why})")?,
        _ => {}
    }
    Ok(())
}

fn consume(ctx: &Ctx, target: PathBuf) -> Result<(), CliError> {
    let target = crate::names::session_path(ctx, &target)?;
    if fs_err::symlink_metadata(&target).is_err() {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!("{}: no such session file", target.display()),
        ));
    }
    let out = bh_handoff::consume(&ctx.git(), &ctx.state_dir, &target).map_err(handoff_error)?;
    if ctx.json {
        return print_json(&serde_json::to_value(&out).map_err(CliError::internal)?);
    }
    match out {
        ConsumeOutcome::NotPending => outln!("no pending handoff")?,
        ConsumeOutcome::Verified { entry_id } => outln!("arrival verified (entry {entry_id})")?,
        ConsumeOutcome::Caveat { entry_id, problems } => {
            outln!("arrival NOT as planned (caveat entry {entry_id}):")?;
            for p in problems {
                outln!("  {}", crate::display::escape(&p))?;
            }
        }
        ConsumeOutcome::Foreign { record, reason } => errln!(
            "bh: warning: ignored {}: not a handoff record bh wrote ({reason}); nothing was consumed",
            crate::display::escape(&record.display().to_string())
        ),
    }
    Ok(())
}
