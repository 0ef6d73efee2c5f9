//! Where a run's files are: the virtual worktree (the default: the base
//! commit's tree read through `cat-file`, the run's writes in memory, the
//! result tree built from both — no checkout, `bh-vfs`), or a detached
//! worktree at the base (`--checkout`, needed for filter drivers and for
//! `--keep-worktree`). Both give the tools the same answers; they differ in
//! what a failure leaves behind: the worktree is kept, or the result tree is
//! written and named.

use std::path::PathBuf;
use std::sync::Arc;

use bh_git::{Repo, Scope, WorktreeGuard};
use bh_runtime::{Runtime, RuntimeOptions};
use bh_vfs::VirtualTree;
use serde::Serialize;

use crate::error::ExecError;
use crate::filters::{configured_drivers, switch_off};
use crate::folder::Execution;
use crate::plan::Plan;

/// How a run holds its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkMode {
    /// The base tree plus an overlay of the run's writes; nothing checked out.
    Virtual,
    /// A detached worktree at the base.
    Checkout,
}

impl WorkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkMode::Virtual => "virtual",
            WorkMode::Checkout => "checkout",
        }
    }
}

/// The files of one run.
pub(crate) enum Work<'r> {
    Checkout {
        guard: WorktreeGuard<'r>,
        worktree: PathBuf,
        /// The filter drivers switched off for staging.
        drivers: Vec<String>,
    },
    Virtual(Arc<VirtualTree>),
}

impl<'r> Work<'r> {
    /// A detached worktree at the base, locked from its creation. Unless
    /// the plan allows filters, it is made empty first (`--no-checkout`) and
    /// its drivers listed as git sees them *there* — a linked worktree's git
    /// reads config the main checkout's does not (`includeIf
    /// "gitdir:**/worktrees/**"`) — then checked out with all of them off.
    /// `drivers`: those the main checkout's config defines.
    pub(crate) fn checkout(
        repo: &'r Repo,
        plan: &Plan,
        exec: &Execution,
        mut drivers: Vec<String>,
    ) -> Result<Work<'r>, ExecError> {
        let worktree = exec.worktree();
        let reason = exec.lock_reason();
        if plan.allow_filters {
            repo.worktree_add_detached(&worktree, &plan.base.commit, &reason)?;
            return Ok(Work::Checkout {
                guard: WorktreeGuard::new(repo, &worktree),
                worktree,
                drivers,
            });
        }
        switch_off(repo, &drivers).worktree_add_detached_empty(
            &worktree,
            &plan.base.commit,
            &reason,
        )?;
        // Removes the worktree should anything below fail.
        let guard = WorktreeGuard::new(repo, &worktree);
        let here = repo.runner().repo(&worktree, repo.scope());
        for name in configured_drivers(&here)? {
            if !drivers.contains(&name) {
                drivers.push(name);
            }
        }
        switch_off(&here, &drivers)
            .cmd(["reset", "--hard", "--quiet", &plan.base.commit])
            .run()?;
        Ok(Work::Checkout {
            guard,
            worktree,
            drivers,
        })
    }

    /// The base tree, shown to the tools as the execution's worktree path
    /// (never created).
    pub(crate) fn virtual_tree(
        repo: &Repo,
        plan: &Plan,
        exec: &Execution,
    ) -> Result<Work<'r>, ExecError> {
        let tree = VirtualTree::open(repo, &plan.base.tree, &exec.worktree())?;
        Ok(Work::Virtual(Arc::new(tree)))
    }

    pub(crate) fn mode(&self) -> WorkMode {
        match self {
            Work::Checkout { .. } => WorkMode::Checkout,
            Work::Virtual(_) => WorkMode::Virtual,
        }
    }

    /// Keeps the worktree after the run (`--keep-worktree`).
    pub(crate) fn keep_worktree(&mut self) {
        if let Work::Checkout { guard, .. } = self {
            guard.keep();
        }
    }

    /// The agent's tools over these files.
    pub(crate) fn runtime(
        &self,
        runner: &bh_git::GitRunner,
        exec: &Execution,
        opts: &RuntimeOptions,
    ) -> Result<Runtime, ExecError> {
        Ok(match self {
            Work::Checkout { worktree, .. } => Runtime::open(runner, worktree, opts)?,
            Work::Virtual(tree) => Runtime::over(&exec.worktree(), Box::new(tree.clone()), opts)?,
        })
    }

    /// The files as a tree: the worktree staged through a private index, or
    /// the base with the overlay.
    pub(crate) fn tree(
        &self,
        runner: &bh_git::GitRunner,
        plan: &Plan,
        exec: &Execution,
    ) -> Result<String, ExecError> {
        match self {
            Work::Checkout {
                worktree, drivers, ..
            } => Ok(switch_off(&runner.repo(worktree, Scope::User), drivers)
                .temp_index(exec.index())
                .stage_work_tree(&plan.base.commit)?),
            Work::Virtual(tree) => Ok(tree.tree(&exec.dir)?),
        }
    }

    /// A failure once the agent ran: what it did is kept — the worktree as
    /// it is, or the result tree written (named in the error) — and
    /// `kept` in the execution folder says why.
    pub(crate) fn keep(
        &mut self,
        runner: &bh_git::GitRunner,
        plan: &Plan,
        exec: &Execution,
        tree: Option<&str>,
        err: ExecError,
    ) -> ExecError {
        exec.log(&format!("kept the work: {err}"));
        let _ = exec.mark_kept(&err.to_string());
        match self {
            Work::Checkout {
                guard, worktree, ..
            } => {
                guard.keep();
                ExecError::WorkKept {
                    worktree: worktree.clone(),
                    dir: exec.dir.clone(),
                    source: Box::new(err),
                }
            }
            Work::Virtual(_) => {
                let tree = match tree {
                    Some(t) => Ok(t.to_owned()),
                    None => self.tree(runner, plan, exec),
                };
                match tree {
                    // Nothing was changed: nothing to keep.
                    Ok(t) if t == plan.base.tree => err,
                    Ok(tree) => ExecError::TreeKept {
                        tree,
                        base: plan.base.tree.clone(),
                        dir: exec.dir.clone(),
                        source: Box::new(err),
                    },
                    // The writes are in the forked session's tool calls.
                    Err(_) => err,
                }
            }
        }
    }

    /// Removes the worktree unless `keep` (the result stands either way).
    pub(crate) fn finish(self, keep: bool) {
        if let Work::Checkout { mut guard, .. } = self
            && !keep
        {
            let _ = guard.remove();
        }
    }
}
