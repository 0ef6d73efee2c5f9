//! `run`: continue the planned conversation point inside a detached worktree
//! at the planned commit, and record the result as a commit with one parent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_git::{GitRunner, Repo, Scope};
use bh_runtime::{
    CancellationToken, Event, Limits, Profile, Provider, RunOutcome, RunStop, RuntimeOptions,
    SystemPrompt,
};
use bh_session::{ForkOptions, ForkTarget, Forked, Session, SessionWriter, Totals};
use serde::Serialize;

use crate::commit::{commit_message, commit_tree};
use crate::error::{ExecError, session as session_err};
use crate::filters::configured_drivers;
use crate::folder::{Execution, gc};
use crate::ids::{IdKind, check_id};
use crate::key::PlanKey;
use crate::plan::Plan;
use crate::verify::{Trust, verify_read_once};
use crate::work::{Work, WorkMode};

/// How a run is set up by its caller (the CLI).
pub struct RunSetup {
    /// The Better Harness state directory (executions go to `executions/`).
    pub state_dir: PathBuf,
    /// Keep the execution's worktree (implies `checkout`).
    pub keep_worktree: bool,
    /// Run in a detached worktree at the base instead of the virtual
    /// worktree (implied by a plan that allows filter drivers).
    pub checkout: bool,
    /// The model the plan names, built by the caller (endpoint and key never
    /// come from the plan).
    pub provider: Arc<dyn Provider>,
    pub cancel: CancellationToken,
    /// The state directory's plan key (`None`: it has none, so only a
    /// trusted foreign plan can run).
    pub plan_key: Option<PlanKey>,
    /// Accept a plan sealed with another key once every re-check passes
    /// (`--trust-plan`).
    pub trust_plan: bool,
    /// Called once the plan and the session bytes are verified, before
    /// anything is created (a seam for tests: the session file may change
    /// here, the run forks the verified bytes).
    pub after_verify: Option<Box<dyn Fn() + Send + Sync>>,
    /// The `plan_sha256` of the plan the caller checked (and built the
    /// provider for): a plan file replaced since then is refused.
    pub expect_plan_sha256: Option<String>,
    /// The environment the agent's `bash` gets (the CLI: bh's own minus
    /// every provider key, the withheld names recorded in each result);
    /// `None`: bh's whole environment.
    pub bash_env: Option<bh_runtime::BashEnv>,
}

impl RunSetup {
    /// A setup with the state directory's key opened (if it has one), no
    /// foreign plans, no hook.
    pub fn new(
        state_dir: PathBuf,
        provider: Arc<dyn Provider>,
        cancel: CancellationToken,
    ) -> Result<RunSetup, ExecError> {
        Ok(RunSetup {
            plan_key: PlanKey::open(&state_dir)?,
            state_dir,
            keep_worktree: false,
            checkout: false,
            provider,
            cancel,
            trust_plan: false,
            after_verify: None,
            expect_plan_sha256: None,
            bash_env: None,
        })
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RunState {
    /// The agent finished and changed something: a commit under the output ref.
    #[serde(rename = "committed")]
    Committed,
    /// The agent finished without changing anything: no commit, no ref.
    #[serde(rename = "no-changes")]
    NoChanges,
    /// Stopped by a limit or cancellation: no commit; the change as a patch.
    #[serde(rename = "aborted")]
    Aborted,
    /// The model call failed: no commit; the change as a patch.
    #[serde(rename = "failed")]
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Committed => "committed",
            RunState::NoChanges => "no-changes",
            RunState::Aborted => "aborted",
            RunState::Failed => "failed",
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StopReason {
    #[serde(rename = "completed")]
    Completed,
    #[serde(rename = "error")]
    Error,
    #[serde(rename = "cancelled")]
    Cancelled,
    #[serde(rename = "limit")]
    Limit,
    /// The harness could not run a tool (a sandbox that cannot be built).
    #[serde(rename = "harness")]
    Harness,
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<RunStop> for StopReason {
    fn from(s: RunStop) -> Self {
        match s {
            RunStop::Completed => StopReason::Completed,
            RunStop::Error => StopReason::Error,
            RunStop::Cancelled => StopReason::Cancelled,
            RunStop::Limit => StopReason::Limit,
            RunStop::Harness => StopReason::Harness,
        }
    }
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Error => "error",
            StopReason::Cancelled => "cancelled",
            StopReason::Limit => "limit",
            StopReason::Harness => "harness",
        }
    }
}

/// Where a run is, for a progress display (reported in this order; the
/// model turns and tool calls as they happen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunProgress {
    /// Re-checking the plan against the repository and the session.
    Checks,
    /// Opening the base: its tree (virtual) or a detached worktree of it.
    Worktree,
    /// Forking the session at the planned entry.
    Fork,
    /// Model call number `turn` (1-based) of the run.
    ModelTurn { turn: u32 },
    /// A tool call starting: its name and the path (or command, pattern) it names.
    ToolCall { tool: String, target: String },
    /// The tool call last reported ended; `failed` when its result is an error.
    ToolDone { failed: bool },
    /// Building the result tree (staging the worktree, or the base tree
    /// with the run's writes).
    Staging,
    /// Recording the result: the commit and its ref, or the partial patch.
    Commit,
}

/// What `result.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub state: RunState,
    pub execution_id: String,
    pub commit: Option<String>,
    pub tree: Option<String>,
    #[serde(rename = "ref")]
    pub output_ref: Option<String>,
    pub changed_paths: Vec<String>,
    pub tool_calls: u64,
    /// Tool calls whose result was an error (told to the model).
    pub failed_tool_calls: u64,
    pub stop_reason: StopReason,
    pub reason: Option<String>,
    /// The run's tokens and cost (the loop's sums, as `bh session stats`).
    pub usage: Totals,
    pub forked_session: PathBuf,
    pub checkpoints: Vec<String>,
    /// The partial change of a run that committed nothing.
    pub patch: Option<PathBuf>,
    pub execution_dir: PathBuf,
    /// How the run held its files.
    pub mode: WorkMode,
    /// The kept worktree (`--keep-worktree`).
    pub worktree: Option<PathBuf>,
    /// What the runtime reported (e.g. checkpoints off for this run).
    pub warnings: Vec<String>,
}

/// Runs a plan. Every re-check happens before any model call or Git
/// mutation; a run stopped by a limit, a provider failure or cancellation
/// commits nothing and saves its partial change as a patch.
pub async fn run_plan(
    runner: &GitRunner,
    plan_path: &Path,
    setup: &RunSetup,
) -> Result<RunResult, ExecError> {
    run_plan_with_progress(runner, plan_path, setup, &|_| {}).await
}

/// [`run_plan`], reporting each phase to `progress` as it starts.
pub async fn run_plan_with_progress(
    runner: &GitRunner,
    plan_path: &Path,
    setup: &RunSetup,
    progress: &(dyn Fn(RunProgress) + Sync),
) -> Result<RunResult, ExecError> {
    // 1. Re-check everything the plan pins; keep the session bytes verified.
    progress(RunProgress::Checks);
    let trust = Trust {
        key: setup.plan_key.as_ref(),
        foreign: setup.trust_plan,
    };
    let (plan, session_bytes) = verify_read_once(runner, plan_path, trust)?;
    if setup
        .expect_plan_sha256
        .as_ref()
        .is_some_and(|want| *want != plan.plan_sha256)
    {
        return Err(ExecError::PlanTampered {
            path: plan_path.to_path_buf(),
        });
    }
    if let Some(hook) = &setup.after_verify {
        hook();
    }
    let repo = runner.repo(&plan.repo.top_level, Scope::User);
    // Filters need a checkout, and so does a worktree to keep.
    let checkout = setup.checkout || setup.keep_worktree || plan.allow_filters;
    // Filter drivers only when the plan allows them (found before anything
    // is created, so a driver that cannot be switched off refuses cleanly).
    let drivers = if plan.allow_filters || !checkout {
        Vec::new()
    } else {
        configured_drivers(&repo)?
    };
    // The model string the commit will carry, checked before anything is
    // created (the provider's when the plan names none).
    let model = plan.model.clone().unwrap_or_else(|| {
        let m = setup.provider.model();
        format!("{}/{}", m.provider, m.id)
    });
    check_id(IdKind::Model, &model)?;
    // 2. Leftovers of crashed executions go first.
    let _ = gc(runner, &plan.repo.top_level, &setup.state_dir);
    // 3. The execution folder, and the commit message built before the agent
    // runs (a message that cannot be written refuses the run, not its result).
    let exec = Execution::create(&setup.state_dir, &plan)?;
    let message = commit_message(&plan, &exec.id, &model)?;
    // 4. The base: a detached worktree locked from its creation, or its tree.
    progress(RunProgress::Worktree);
    let mut work = if checkout {
        Work::checkout(&repo, &plan, &exec, drivers)?
    } else {
        Work::virtual_tree(&repo, &plan, &exec)?
    };
    exec.log(&format!("files: {}", work.mode().as_str()));
    if setup.keep_worktree {
        work.keep_worktree();
    }
    // 5. The session forked at the planned entry, working in the worktree.
    progress(RunProgress::Fork);
    let forked = fork_session(&plan, &exec, session_bytes)?;
    // 6. The agent continues it with exactly the executor's tools. From the
    // moment it starts, a failure keeps what it did.
    let (outcome, warnings, failed_tool_calls) =
        match continue_session(runner, &plan, &exec, &work, &forked, setup, progress).await? {
            Ok(ran) => ran,
            Err(e) => return Err(work.keep(runner, &plan, &exec, None, e)),
        };
    // 7. The files as a tree.
    progress(RunProgress::Staging);
    let tree = match work.tree(runner, &plan, &exec) {
        Ok(tree) => tree,
        Err(e) => return Err(work.keep(runner, &plan, &exec, None, e)),
    };
    // 8. Record it: a commit under the output ref, or the partial patch.
    let mut result = RunResult {
        state: RunState::NoChanges,
        execution_id: exec.id.clone(),
        commit: None,
        tree: Some(tree.clone()),
        output_ref: None,
        changed_paths: Vec::new(),
        tool_calls: outcome.tool_calls,
        failed_tool_calls,
        stop_reason: outcome.stop.into(),
        reason: outcome.reason.clone(),
        usage: outcome.usage,
        forked_session: forked.path.clone(),
        checkpoints: outcome.checkpoints.clone(),
        patch: None,
        execution_dir: exec.dir.clone(),
        mode: work.mode(),
        worktree: (setup.keep_worktree && work.mode() == WorkMode::Checkout)
            .then(|| exec.worktree()),
        warnings,
    };
    progress(RunProgress::Commit);
    if let Err(e) = record(&repo, &plan, &exec, &outcome, &tree, message, &mut result) {
        // A lost race for the ref keeps nothing (in either mode, unless
        // the worktree was asked to be kept): the plan's result is the
        // ref's commit.
        if matches!(e, ExecError::RefExists { .. }) {
            work.finish(setup.keep_worktree);
            return Err(e);
        }
        return Err(work.keep(runner, &plan, &exec, Some(&tree), e));
    }
    // 9. Clean up; `result.json` marks the execution finished.
    work.finish(setup.keep_worktree);
    exec.write_result(&result)?;
    exec.log(&format!("result: {}", result.state.as_str()));
    Ok(result)
}

/// A new session file in the execution folder: new id, `parentSession` =
/// the source, `cwd` = the worktree, the planned entry as the leaf. Forks
/// the bytes that were verified (the file is not read again).
fn fork_session(plan: &Plan, exec: &Execution, bytes: Vec<u8>) -> Result<Forked, ExecError> {
    let file = &plan.session.file;
    let source = Session::parse(bytes, Some(file.clone()));
    let forked = bh_session::fork(
        &source,
        &ForkTarget::File(exec.session()),
        &ForkOptions {
            path_only: false,
            entry: Some(plan.session.entry.clone()),
            cwd: Some(exec.worktree().display().to_string()),
            parent_session: Some(file.display().to_string()),
            ..Default::default()
        },
    )
    .map_err(session_err(file))?;
    exec.log(&format!(
        "forked session {} at {}",
        forked.session_id,
        forked.path.display()
    ));
    Ok(forked)
}

/// The agent of the worktree (bh-runtime: read, ls, edit, write confined to
/// it, its checkpoint store, the plan's limits) runs the prompt. The outer
/// error: the agent could not be set up (nothing ran); the inner one: the
/// agent ran and failed (the worktree may hold its work).
async fn continue_session(
    runner: &GitRunner,
    plan: &Plan,
    exec: &Execution,
    work: &Work<'_>,
    forked: &Forked,
    setup: &RunSetup,
    progress: &(dyn Fn(RunProgress) + Sync),
) -> Result<Result<(RunOutcome, Vec<String>, u64), ExecError>, ExecError> {
    let mut opts = RuntimeOptions::new(&setup.state_dir, Profile::Executor);
    opts.tool_output_dir = Some(exec.dir.clone());
    opts.system_prompt = SystemPrompt::Omitted;
    opts.bash_env = setup.bash_env.clone();
    opts.limits = Limits {
        max_tool_calls: Some(u64::from(plan.limits.max_tool_calls)),
        timeout: Some(std::time::Duration::from_secs(plan.limits.timeout_secs)),
        max_turns: None,
    };
    let runtime = work.runtime(runner, exec, &opts)?;
    for w in &runtime.warnings {
        exec.log(w);
    }
    let writer = SessionWriter::open(&forked.path).map_err(session_err(&forked.path))?;
    let mut agent = runtime.agent(&opts, setup.provider.clone(), writer)?;
    let mut turn = 0u32;
    let mut failed = 0u64;
    let mut sink = |event: Event| match event {
        Event::TurnStart => {
            turn += 1;
            progress(RunProgress::ModelTurn { turn });
        }
        Event::ToolExecutionStart {
            tool_name, args, ..
        } => {
            let target = ["path", "command", "pattern"]
                .iter()
                .find_map(|k| args.get(*k).and_then(|v| v.as_str()))
                .unwrap_or("")
                .to_owned();
            progress(RunProgress::ToolCall {
                tool: tool_name,
                target,
            });
        }
        Event::ToolExecutionEnd { is_error, .. } => {
            failed += u64::from(is_error);
            progress(RunProgress::ToolDone { failed: is_error });
        }
        _ => {}
    };
    let outcome = match agent.run(&plan.prompt.text, &setup.cancel, &mut sink).await {
        Ok(o) => o,
        Err(source) => {
            return Ok(Err(ExecError::Agent {
                file: forked.path.clone(),
                source: Box::new(source),
            }));
        }
    };
    exec.log(&format!(
        "agent stopped: {} {}",
        StopReason::from(outcome.stop).as_str(),
        outcome.reason.as_deref().unwrap_or("")
    ));
    Ok(Ok((outcome, runtime.warnings, failed)))
}

/// Commits a finished run's change under the output ref (create-only), or
/// saves a stopped run's change as a patch.
fn record(
    repo: &Repo,
    plan: &Plan,
    exec: &Execution,
    outcome: &RunOutcome,
    tree: &str,
    message: String,
    result: &mut RunResult,
) -> Result<(), ExecError> {
    let changed = tree != plan.base.tree;
    if outcome.stop != RunStop::Completed {
        result.state = if matches!(outcome.stop, RunStop::Error | RunStop::Harness) {
            RunState::Failed
        } else {
            RunState::Aborted
        };
        if changed {
            let patch = repo.run([
                "diff",
                "--binary",
                "--no-ext-diff",
                "--no-textconv",
                &plan.base.tree,
                tree,
                "--",
            ])?;
            result.patch = Some(exec.write_patch(&patch)?);
        }
        return Ok(());
    }
    if !changed {
        result.state = RunState::NoChanges;
        return Ok(());
    }
    let commit = commit_tree(repo, tree, &plan.base.commit, message, exec.started_secs())?;
    exec.log(&format!("commit {commit}"));
    // Create-only: losing a race is an error, never an overwrite. Git's own
    // words say why (the ref exists, a stale lock, a full disk).
    // Taken while the run was in flight (another run of the plan, or a
    // hand): the exit-25 error that a ref existing before the run gets.
    if let Err(source) = repo.create_ref(&plan.output_ref, &commit) {
        if let Ok(Some(at)) = repo.read_ref(&plan.output_ref) {
            exec.log(&format!(
                "the output ref was taken during the run (at {at}); this run's commit {commit} is left unreferenced"
            ));
            return Err(ExecError::RefExists {
                name: plan.output_ref.clone(),
                at,
            });
        }
        return Err(ExecError::RefCreate {
            name: plan.output_ref.clone(),
            commit: commit.clone(),
            source: Box::new(source),
        });
    }
    result.changed_paths = repo
        .name_status(&plan.base.commit, &commit)?
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c.status as char,
                bh_git::parse::display_path(&c.path)
            )
        })
        .collect();
    result.commit = Some(commit);
    result.output_ref = Some(plan.output_ref.clone());
    result.state = RunState::Committed;
    Ok(())
}
