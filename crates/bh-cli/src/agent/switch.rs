//! `/worktree …` in the interactive `bh agent`: moves the LIVE session between
//! the main checkout and managed worktrees, in-process.
//!
//! A move: the target session is prepared by `bh_worktree::enter` (or
//! `enter_main` on the way back) on a blocking thread — a fork of the session
//! into the new cwd ending in one orientation entry, plus a handoff → if
//! Ctrl-C came meanwhile, stop → the runtime of the new cwd is opened: tools
//! confined to it, its checkpoint store (same state dir) → `bh_worktree::consume`
//! verifies the arrival once and records it → the agent is rebuilt from the
//! target file (history = its context, so the next model request sees the
//! orientation) → commit: the old agent is dropped, the cwd replaced. Until
//! the commit any failure or cancellation discards the prepared target and
//! its handoff (`bh_worktree::discard`); the source session file is never
//! written, and the old agent stays as it was.
//!
//! Nothing here reads or changes the process's current directory: every path
//! comes from the session's cwd.
//!
//! The session writer appends (and syncs) every entry as it completes, so the
//! live session never holds entries the file lacks; what can differ is the
//! leaf (`/tree ENTRY` moves it without writing), which is passed as the
//! entry to carry from. `EnterOptions::unflushed` is therefore always empty.

use std::path::{Path, PathBuf};

use bh_core::Agent;
use bh_git::GitRunner;
use bh_session::SessionWriter;
use bh_worktree::{ConsumeOutcome, DisposeOptions, EnterOptions, EnterOutcome, WorktreeInfo};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use super::{AgentArgs, agent_config, canonical_dir, runtime_parts, session_error};
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};
use crate::worktree::{NewWorktree, cli_err, print_created, print_disposed};

#[derive(Parser, Debug)]
#[command(
    name = "/worktree",
    no_binary_name = true,
    disable_version_flag = true,
    disable_help_subcommand = true
)]
struct Repl {
    #[command(subcommand)]
    cmd: ReplCmd,
}

#[derive(Subcommand, Debug)]
enum ReplCmd {
    /// Create a managed worktree (as `bh worktree create`) and move the session into it.
    Create {
        #[command(flatten)]
        new: NewWorktree,
    },
    /// Move the session into an existing managed worktree.
    Enter { name: String },
    /// Move the session back to the main checkout, then dispose the worktree
    /// it was in (checkpoint first; refuses dirty or unmerged work unless --force).
    Dispose {
        #[arg(long)]
        force: bool,
    },
    /// Every worktree, as `bh worktree list`.
    List,
}

/// Runs one `/worktree …` line (the words after `/worktree`).
pub(super) async fn command(
    agent: &mut Agent,
    cwd: &mut PathBuf,
    ctx: &Ctx,
    args: &AgentArgs,
    words: &[&str],
    cancel: &CancellationToken,
) -> Result<(), CliError> {
    let repl = match Repl::try_parse_from(words.iter().copied()) {
        Ok(r) => r,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            print!("{}", e.render());
            return Ok(());
        }
        Err(e) => {
            return Err(CliError::usage(
                e.render().to_string().trim_end().to_owned(),
            ));
        }
    };
    let mut live = Live {
        agent,
        cwd,
        ctx,
        args,
        runner: ctx.git(),
    };
    match repl.cmd {
        ReplCmd::List => crate::worktree::list(ctx, Some(live.cwd.clone())),
        ReplCmd::Create { new } => live.create(new, cancel).await,
        ReplCmd::Enter { name } => live.enter(name, cancel).await,
        ReplCmd::Dispose { force } => live.dispose(force, cancel).await,
    }
}

/// The live session being moved.
struct Live<'a> {
    agent: &'a mut Agent,
    cwd: &'a mut PathBuf,
    ctx: &'a Ctx,
    args: &'a AgentArgs,
    runner: GitRunner,
}

/// Runs blocking library work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CliError> + Send + 'static,
) -> Result<T, CliError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| CliError::internal(format!("a worktree task failed: {e}")))?
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

impl Live<'_> {
    fn enter_options(&self, name: String) -> Result<EnterOptions, CliError> {
        Ok(EnterOptions {
            name,
            cwd: self.cwd.clone(),
            session: self.agent.session_path().to_path_buf(),
            entry: self.agent.leaf().map(str::to_owned),
            agent_dir: self.ctx.pi_agent_dir()?,
            unflushed: Vec::new(),
        })
    }

    fn worktrees(&self) -> Result<Vec<WorktreeInfo>, CliError> {
        bh_worktree::list(&self.runner, self.cwd).map_err(cli_err)
    }

    async fn create(
        &mut self,
        new: NewWorktree,
        cancel: &CancellationToken,
    ) -> Result<(), CliError> {
        let name = new.name.clone();
        let session = Some(self.agent.session_path().display().to_string());
        let opts = new.options(None, session, self.cwd.clone());
        let runner = self.runner.clone();
        let out = blocking(move || bh_worktree::create(&runner, &opts).map_err(cli_err)).await?;
        print_created(&out);
        if cancel.is_cancelled() {
            return Err(CliError::new(
                ErrorKind::Interrupted,
                format!(
                    "cancelled: worktree {name} was created at {}, but the session stays in {} \
                     (/worktree enter {name} moves it)",
                    out.receipt.path.display(),
                    self.cwd.display()
                ),
            ));
        }
        self.move_into(name, cancel).await
    }

    async fn enter(&mut self, name: String, cancel: &CancellationToken) -> Result<(), CliError> {
        if let Some(w) = self
            .worktrees()?
            .into_iter()
            .find(|w| w.name.as_deref() == Some(name.as_str()))
            && same_dir(&w.path, self.cwd)
        {
            return Err(CliError::new(
                ErrorKind::Refused,
                format!(
                    "the session already is in worktree {name} ({})",
                    w.path.display()
                ),
            ));
        }
        self.move_into(name, cancel).await
    }

    /// Moves the session into managed worktree `name`.
    async fn move_into(
        &mut self,
        name: String,
        cancel: &CancellationToken,
    ) -> Result<(), CliError> {
        let opts = self.enter_options(name)?;
        let runner = self.runner.clone();
        let moved = self
            .switch(cancel, move || {
                bh_worktree::enter(&runner, &opts).map_err(cli_err)
            })
            .await?;
        print_moved(&moved, "into the worktree");
        Ok(())
    }

    async fn dispose(&mut self, force: bool, cancel: &CancellationToken) -> Result<(), CliError> {
        let all = self.worktrees()?;
        let here = std::fs::canonicalize(&*self.cwd).unwrap_or_else(|_| self.cwd.clone());
        let Some(main) = all.iter().find(|w| w.main) else {
            return Err(CliError::new(
                ErrorKind::NotFound,
                format!("no main checkout found for {}", self.cwd.display()),
            ));
        };
        // The managed worktree the session is in (the deepest one holding its cwd).
        let current = all
            .iter()
            .filter(|w| !w.main && w.name.is_some())
            .filter_map(|w| {
                let p = std::fs::canonicalize(&w.path).ok()?;
                here.starts_with(&p).then_some((p.as_os_str().len(), w))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, w)| w);
        let (Some(wt), Some(name)) = (current, current.and_then(|w| w.name.clone())) else {
            return Err(CliError::usage(format!(
                "/worktree dispose works inside a managed worktree; {} is not one (/worktree list shows them)",
                self.cwd.display()
            )));
        };
        let wt_path = wt.path.clone();
        let dispose_opts = DisposeOptions {
            name: name.clone(),
            cwd: main.path.clone(),
            force,
            state_dir: self.ctx.state_dir.clone(),
            max_file_size: bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
        };
        // Refuse before moving: a refusal changes nothing.
        let runner = self.runner.clone();
        let check = dispose_opts.clone();
        blocking(move || bh_worktree::check_dispose(&runner, &check).map_err(cli_err))
            .await
            .map_err(|e| {
                CliError::new(
                    e.kind,
                    format!("{}; the session stays in {}", e.message, self.cwd.display()),
                )
            })?;
        let opts = self.enter_options(name.clone())?;
        let runner = self.runner.clone();
        let moved = self
            .switch(cancel, move || {
                bh_worktree::enter_main(&runner, &opts, true).map_err(cli_err)
            })
            .await?;
        print_moved(&moved, "back to the main checkout");
        let runner = self.runner.clone();
        match blocking(move || bh_worktree::dispose(&runner, &dispose_opts).map_err(cli_err)).await
        {
            Ok(out) => {
                print_disposed(&out);
                Ok(())
            }
            Err(e) => Err(CliError::new(
                e.kind,
                format!(
                    "the session is back in {}, but disposing worktree {name} failed: {}; \
                     it is still at {}",
                    self.cwd.display(),
                    e.message,
                    wt_path.display()
                ),
            )),
        }
    }

    /// Prepares the target with `prepare`, then moves the live session into
    /// it (see the module docs). On `Err` nothing changed.
    async fn switch(
        &mut self,
        cancel: &CancellationToken,
        prepare: impl FnOnce() -> Result<EnterOutcome, CliError> + Send + 'static,
    ) -> Result<EnterOutcome, CliError> {
        let out = blocking(prepare).await?;
        let target = out.target.clone();
        let discard = |e: CliError| -> CliError {
            if let Err(d) = bh_worktree::discard(&target) {
                eprintln!(
                    "bh: warning: cannot delete the prepared session {}: {d}",
                    target.display()
                );
            }
            e
        };
        if cancel.is_cancelled() {
            return Err(discard(CliError::new(
                ErrorKind::Interrupted,
                format!(
                    "cancelled: the session stays in {} (the prepared session for {} was deleted)",
                    self.cwd.display(),
                    out.worktree.display()
                ),
            )));
        }
        let new_cwd = canonical_dir(&out.worktree).map_err(discard)?;
        let tools = super::tool_list(self.args).map_err(discard)?;
        let (toolbox, checkpoints) = runtime_parts(self.args, self.ctx, &new_cwd, &mut |w| {
            eprintln!("bh: warning: {w}")
        })
        .map_err(discard)?;
        let consumed =
            bh_worktree::consume(&self.runner, &target).map_err(|e| discard(cli_err(e)))?;
        if let ConsumeOutcome::Caveat { problems, .. } = &consumed {
            eprintln!(
                "bh: warning: the move into {} did not land as planned: {}",
                out.worktree.display(),
                problems.join("; ")
            );
        }
        // Opened after `consume`, so the writer's leaf is the file's last entry.
        let writer = SessionWriter::open(&target)
            .map_err(session_error)
            .map_err(discard)?;
        let config = agent_config(
            self.args,
            self.agent.provider().clone(),
            Some(tools),
            &new_cwd,
            toolbox,
            checkpoints,
            writer,
        );
        let agent = Agent::new(config).map_err(|e| {
            discard(CliError::internal(format!(
                "cannot continue in {}: {e}",
                target.display()
            )))
        })?;
        // Commit.
        *self.agent = agent;
        *self.cwd = new_cwd;
        Ok(out)
    }
}

fn print_moved(out: &EnterOutcome, what: &str) {
    println!(
        "session moved {what} {} ({}, {} entries carried); session file {}",
        out.worktree.display(),
        out.carry,
        out.entries_carried,
        out.target.display()
    );
    if let Some(n) = out.left_behind_count.filter(|n| *n > 0) {
        println!(
            "{n} uncommitted file(s) stayed behind in {}",
            out.source_cwd
        );
    }
}
