//! Settling plan `I` of a batch exactly once, whichever engine runs it and
//! however often: done when its output ref already holds this plan's result
//! (here, then published when asked, or on the remote); skipped when its
//! last receipt says this very plan finished with no change; else run, and
//! after a lost create-only race (another run of the same plan made the ref
//! first) done when the winner made this plan's result, taken otherwise.
//! The caller reads the plan, runs it (its provider, its progress) and
//! turns a [`SettleError`] into an exit code and a receipt.

use bh_git::Repo;

use crate::batch_error::BatchError;
use crate::error::ExecError;
use crate::outcome::{Verdict, verdict};
use crate::plan::Plan;
use crate::publish::{RefHolds, local_ref, publish, remote_ref};
use crate::receipt::{Receipt, ReceiptState};
use crate::run::RunResult;

/// How a plan settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// `Done` (held already), `Committed` or `NoChanges`.
    pub state: ReceiptState,
    pub commit: Option<String>,
    pub execution_id: Option<String>,
    /// The ref was pushed to (or found on) the remote.
    pub published: bool,
}

/// Why a plan did not settle.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The run returned and failed: worth another attempt or not.
    #[error("execution {} {}: {}", .result.execution_id, .result.state, .result.reason.as_deref().unwrap_or(""))]
    Failed {
        verdict: Verdict,
        result: Box<RunResult>,
    },
    #[error("the output ref {name} vanished during the run")]
    RefVanished { name: String },
}

/// Settles `plan` (in `repo`; `remote` to publish to): `run` is called
/// only when it is not settled already, and may fail in the caller's own
/// terms (`E`) or the executor's (the inner `ExecError`, which is looked
/// at for a lost race).
pub fn settle<E: From<SettleError>>(
    repo: &Repo,
    plan: &Plan,
    remote: Option<&str>,
    previous: Option<&Receipt>,
    run: impl FnOnce() -> Result<Result<RunResult, ExecError>, E>,
) -> Result<Settled, E> {
    if let Some(done) = already(repo, plan, remote)? {
        return Ok(done);
    }
    // A run of this very plan that finished with no change leaves no ref:
    // its receipt is the record, so a resumed batch does not run it again.
    // (A receipt is not authenticated: the most an edited one can do is
    // keep a plan from running, never stand for a commit.)
    if let Some(r) = previous
        && r.state == ReceiptState::NoChanges
        && r.plan_sha256.as_deref() == Some(plan.plan_sha256.as_str())
    {
        return Ok(Settled {
            state: ReceiptState::NoChanges,
            commit: None,
            execution_id: r.execution_id.clone(),
            published: false,
        });
    }
    match run()? {
        Ok(result) => Ok(finished(repo, plan, remote, result)?),
        Err(e) if lost_race(&e) => {
            drop_kept_worktree(repo, &e);
            Ok(taken_or_done(repo, plan, remote)?)
        }
        Err(e) => Err(SettleError::Exec(e).into()),
    }
}

/// A run that returned: done (published when asked), or why not.
fn finished(
    repo: &Repo,
    plan: &Plan,
    remote: Option<&str>,
    result: RunResult,
) -> Result<Settled, SettleError> {
    match verdict(&result) {
        v @ (Verdict::Transient | Verdict::Permanent) => Err(SettleError::Failed {
            verdict: v,
            result: Box::new(result),
        }),
        Verdict::Done => {
            let published = match (&result.commit, remote) {
                (Some(c), Some(r)) => {
                    publish(repo, r, plan, c)?;
                    true
                }
                _ => false,
            };
            Ok(Settled {
                state: match result.commit {
                    Some(_) => ReceiptState::Committed,
                    None => ReceiptState::NoChanges,
                },
                commit: result.commit,
                execution_id: Some(result.execution_id),
                published,
            })
        }
    }
}

/// Done already: the ref holds this plan's result here (then published,
/// when asked) or on the remote. A ref holding anything else is taken.
fn already(repo: &Repo, plan: &Plan, remote: Option<&str>) -> Result<Option<Settled>, SettleError> {
    let done = |commit: String, published: bool| Settled {
        state: ReceiptState::Done,
        commit: Some(commit),
        execution_id: None,
        published,
    };
    match local_ref(repo, plan).map_err(BatchError::from)? {
        RefHolds::ThisPlan(c) => {
            if let Some(r) = remote {
                publish(repo, r, plan, &c)?;
            }
            return Ok(Some(done(c, remote.is_some())));
        }
        RefHolds::Other(c) => {
            return Err(BatchError::RefTaken {
                name: plan.output_ref.clone(),
                place: "here".to_owned(),
                commit: c,
            }
            .into());
        }
        RefHolds::Absent => {}
    }
    let Some(r) = remote else { return Ok(None) };
    match remote_ref(repo, r, plan)? {
        RefHolds::ThisPlan(c) => Ok(Some(done(c, true))),
        RefHolds::Other(c) => Err(BatchError::RefTaken {
            name: plan.output_ref.clone(),
            place: format!("on {r}"),
            commit: c,
        }
        .into()),
        RefHolds::Absent => Ok(None),
    }
}

/// After losing the create-only race: done when the winner made this
/// plan's result, taken otherwise.
fn taken_or_done(repo: &Repo, plan: &Plan, remote: Option<&str>) -> Result<Settled, SettleError> {
    already(repo, plan, remote)?.ok_or_else(|| SettleError::RefVanished {
        name: plan.output_ref.clone(),
    })
}

/// Whether the run lost the create-only race for its ref (another run of
/// the same plan created it first).
fn lost_race(err: &ExecError) -> bool {
    match err {
        ExecError::RefExists { .. } | ExecError::RefCreate { .. } => true,
        ExecError::WorkKept { source, .. } | ExecError::TreeKept { source, .. } => {
            lost_race(source)
        }
        _ => false,
    }
}

/// The worktree a lost race kept: the plan's result is the winner's
/// commit, so the duplicate's worktree goes (its commit object stays,
/// unreferenced, for `git gc`).
fn drop_kept_worktree(repo: &Repo, err: &ExecError) {
    if let ExecError::WorkKept { worktree, dir, .. } = err {
        let _ = repo.worktree_unlock(worktree);
        if repo.worktree_remove(worktree, true).is_ok() {
            let _ = fs_err::remove_file(dir.join("kept"));
        }
    }
}
