//! Moving a live agent between the main checkout and managed worktrees, as
//! one transaction.
//!
//! A move: the target session is prepared by `bh_handoff::enter` (or
//! `enter_main` on the way back) on a blocking thread — a fork of the session
//! into the new cwd ending in one orientation entry, plus a handoff → if the
//! token was cancelled meanwhile, stop → the runtime of the new cwd is opened
//! ([`Runtime::open`]: tools confined to it, its checkpoint store) →
//! `bh_handoff::consume` verifies the arrival once and records it → the
//! agent is rebuilt from the target file (history = its context, so the next
//! model request sees the orientation) → commit: the old agent is dropped,
//! the cwd replaced. Until the commit any failure or cancellation discards
//! the prepared target and its handoff (`bh_handoff::discard`); the source
//! session file is never written, and the old agent stays as it was.
//!
//! The session writer appends every entry as it completes, so the live
//! session never holds entries the file lacks; what can differ is the leaf
//! (moved without writing), which is passed as the entry to carry from.
//! Nothing here reads or changes the process's current directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_core::Agent;
use bh_git::GitRunner;
use bh_handoff::{ConsumeOutcome, EnterOptions, EnterOutcome, HandoffError};
use bh_session::SessionWriter;
use bh_worktree::{DisposeOptions, DisposeOutcome, WorktreeError};
use tokio_util::sync::CancellationToken;

use crate::error::RuntimeError;
use crate::runtime::{Runtime, RuntimeOptions};
use crate::session::canonical_dir;

/// Why a move did not happen (or, for [`RelocateError::DisposeFailed`], what
/// failed after it).
#[derive(Debug, thiserror::Error)]
pub enum RelocateError {
    /// Cancelled before the commit: nothing changed.
    #[error(
        "cancelled: the session stays in {stays} (the prepared session for {target} was deleted)"
    )]
    Cancelled {
        stays: PathBuf,
        target: PathBuf,
        /// The prepared session could not be deleted.
        discard: Option<Box<HandoffError>>,
    },
    #[error("the session is already in worktree {name} ({path})")]
    AlreadyThere { name: String, path: PathBuf },
    #[error("disposing works inside a managed worktree; {cwd} is not one")]
    NotInWorktree { cwd: PathBuf },
    #[error("no main checkout found for {cwd}")]
    NoMainCheckout { cwd: PathBuf },
    /// `check_dispose` refused before anything moved.
    #[error("{source}; the session stays in {stays}")]
    DisposeRefused {
        stays: PathBuf,
        #[source]
        source: Box<WorktreeError>,
    },
    /// The move failed before the commit: nothing changed.
    #[error("{source}")]
    Failed {
        #[source]
        source: Box<RuntimeError>,
        /// The prepared session could not be deleted.
        discard: Option<Box<HandoffError>>,
    },
    #[error(
        "the session is back in {back_in}, but disposing worktree {name} failed: {source}; \
         it is still at {still_at}"
    )]
    DisposeFailed {
        /// The move that did happen.
        moved: Box<Moved>,
        back_in: PathBuf,
        name: String,
        still_at: PathBuf,
        #[source]
        source: Box<WorktreeError>,
    },
}

impl From<RuntimeError> for RelocateError {
    fn from(source: RuntimeError) -> Self {
        RelocateError::Failed {
            source: Box::new(source),
            discard: None,
        }
    }
}

impl From<WorktreeError> for RelocateError {
    fn from(e: WorktreeError) -> Self {
        RuntimeError::from(e).into()
    }
}

impl From<HandoffError> for RelocateError {
    fn from(e: HandoffError) -> Self {
        RuntimeError::from(e).into()
    }
}

/// A committed move.
#[derive(Debug)]
pub struct Moved {
    pub enter: EnterOutcome,
    pub consumed: ConsumeOutcome,
    /// What the new runtime reported (e.g. checkpoints off there).
    pub warnings: Vec<String>,
}

/// A move back to the main checkout followed by the disposal of the worktree.
#[derive(Debug)]
pub struct Disposed {
    pub moved: Moved,
    pub disposed: DisposeOutcome,
}

/// An agent working in one directory, able to move.
pub struct Live {
    agent: Agent,
    cwd: PathBuf,
    runner: GitRunner,
    options: RuntimeOptions,
    /// Pi's agent dir: where moved sessions are written.
    agent_dir: PathBuf,
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RelocateError> + Send + 'static,
) -> Result<T, RelocateError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RelocateError::from(RuntimeError::Task(e)))?
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

impl Live {
    pub fn new(
        agent: Agent,
        cwd: PathBuf,
        runner: GitRunner,
        options: RuntimeOptions,
        agent_dir: PathBuf,
    ) -> Live {
        Live {
            agent,
            cwd,
            runner,
            options,
            agent_dir,
        }
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    pub fn agent_mut(&mut self) -> &mut Agent {
        &mut self.agent
    }

    /// The directory the agent works in.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    pub fn options(&self) -> &RuntimeOptions {
        &self.options
    }

    pub fn runner(&self) -> &GitRunner {
        &self.runner
    }

    fn enter_options(&self, name: String) -> EnterOptions {
        EnterOptions {
            name,
            cwd: self.cwd.clone(),
            session: self.agent.session_path().to_path_buf(),
            entry: self.agent.leaf().map(str::to_owned),
            agent_dir: self.agent_dir.clone(),
            unflushed: Vec::new(),
            state_dir: self.options.state_dir.clone(),
        }
    }

    /// Moves the agent into managed worktree `name` (refused when it is there).
    pub async fn enter_worktree(
        &mut self,
        name: &str,
        cancel: &CancellationToken,
    ) -> Result<Moved, RelocateError> {
        if let Some(w) = bh_worktree::list(&self.runner, &self.cwd)?
            .into_iter()
            .find(|w| w.name.as_deref() == Some(name))
            && same_dir(&w.path, &self.cwd)
        {
            return Err(RelocateError::AlreadyThere {
                name: name.to_owned(),
                path: w.path,
            });
        }
        let opts = self.enter_options(name.to_owned());
        let runner = self.runner.clone();
        self.relocate(cancel, move || Ok(bh_handoff::enter(&runner, &opts)?))
            .await
    }

    /// Moves the agent back to the main checkout, then disposes the managed
    /// worktree it was in. `check_dispose` refuses before anything moves.
    pub async fn dispose_worktree(
        &mut self,
        force: bool,
        cancel: &CancellationToken,
    ) -> Result<Disposed, RelocateError> {
        let all = bh_worktree::list(&self.runner, &self.cwd)?;
        let Some(main) = all.iter().find(|w| w.main) else {
            return Err(RelocateError::NoMainCheckout {
                cwd: self.cwd.clone(),
            });
        };
        // The managed worktree the agent is in (the deepest one holding its cwd).
        let Some((name, still_at)) = bh_worktree::containing(&self.runner, &self.cwd)? else {
            return Err(RelocateError::NotInWorktree {
                cwd: self.cwd.clone(),
            });
        };
        let dispose = DisposeOptions {
            name: name.clone(),
            cwd: main.path.clone(),
            force,
            state_dir: self.options.state_dir.clone(),
            max_file_size: bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
        };
        let runner = self.runner.clone();
        let check = dispose.clone();
        let stays = self.cwd.clone();
        blocking(move || {
            bh_worktree::check_dispose(&runner, &check).map_err(|source| {
                RelocateError::DisposeRefused {
                    stays,
                    source: Box::new(source),
                }
            })
        })
        .await?;
        let opts = self.enter_options(name.clone());
        let runner = self.runner.clone();
        let moved = self
            .relocate(cancel, move || {
                Ok(bh_handoff::enter_main(&runner, &opts, true)?)
            })
            .await?;
        let runner = self.runner.clone();
        let back_in = self.cwd.clone();
        let disposed = blocking(move || Ok(bh_worktree::dispose(&runner, &dispose))).await?;
        match disposed {
            Ok(disposed) => Ok(Disposed { moved, disposed }),
            Err(source) => Err(RelocateError::DisposeFailed {
                moved: Box::new(moved),
                back_in,
                name,
                still_at,
                source: Box::new(source),
            }),
        }
    }

    /// Prepares the target with `prepare`, then moves the live agent into
    /// it (see the module docs). On `Err` nothing changed.
    pub async fn relocate(
        &mut self,
        cancel: &CancellationToken,
        prepare: impl FnOnce() -> Result<EnterOutcome, RelocateError> + Send + 'static,
    ) -> Result<Moved, RelocateError> {
        let out = blocking(prepare).await?;
        if cancel.is_cancelled() {
            return Err(RelocateError::Cancelled {
                stays: self.cwd.clone(),
                target: out.worktree.clone(),
                discard: bh_handoff::discard(&self.options.state_dir, &out.target)
                    .err()
                    .map(Box::new),
            });
        }
        match self.arrive(&out) {
            Ok((agent, cwd, consumed, warnings)) => {
                // Commit.
                self.agent = agent;
                self.cwd = cwd;
                Ok(Moved {
                    enter: out,
                    consumed,
                    warnings,
                })
            }
            Err(source) => Err(RelocateError::Failed {
                source: Box::new(source),
                discard: bh_handoff::discard(&self.options.state_dir, &out.target)
                    .err()
                    .map(Box::new),
            }),
        }
    }

    /// Everything of the new cwd, built before anything is replaced.
    fn arrive(
        &self,
        out: &EnterOutcome,
    ) -> Result<(Agent, PathBuf, ConsumeOutcome, Vec<String>), RuntimeError> {
        let cwd = canonical_dir(&out.worktree)?;
        let runtime = Runtime::open(&self.runner, &cwd, &self.options)?;
        let consumed = bh_handoff::consume(&self.runner, &self.options.state_dir, &out.target)?;
        let mut warnings = runtime.warnings.clone();
        if let ConsumeOutcome::Caveat { problems, .. } = &consumed {
            warnings.push(format!(
                "the move into {} did not land as planned: {}",
                out.worktree.display(),
                problems.join("; ")
            ));
        }
        // Opened after `consume`, so the writer's leaf is the file's last entry.
        let writer = SessionWriter::open(&out.target)?;
        let agent = runtime.agent(&self.options, Arc::clone(self.agent.provider()), writer)?;
        Ok((agent, cwd, consumed, warnings))
    }
}
