//! `run`: continue the planned conversation point inside a detached worktree
//! at the planned commit, and record the result as a commit with one parent.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_checkpoint::{Store, StoreOptions};
use bh_core::{Agent, AgentConfig, Limits, RunStop};
use bh_git::{GitRunner, Repo, Scope};
use bh_llm::Provider;
use bh_session::{ForkOptions, ForkTarget, Session, SessionWriter};
use bh_tools::{Profile, Toolbox, ToolboxOptions};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::{ExecError, Plan, verify_plan};

/// How a run is set up by its caller (the CLI).
pub struct RunSetup {
    /// The Better Harness state directory (executions go to `executions/`).
    pub state_dir: PathBuf,
    pub keep_worktree: bool,
    /// The model the plan names, built by the caller (endpoint and key never
    /// come from the plan).
    pub provider: Arc<dyn Provider>,
    pub cancel: CancellationToken,
}

/// What `result.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// `committed`, `no-changes`, `aborted` or `failed`.
    pub state: String,
    pub execution_id: String,
    pub commit: Option<String>,
    pub tree: Option<String>,
    #[serde(rename = "ref")]
    pub output_ref: Option<String>,
    pub changed_paths: Vec<String>,
    pub tool_calls: u64,
    pub stop_reason: String,
    pub reason: Option<String>,
    pub usage: UsageTotals,
    pub forked_session: PathBuf,
    pub checkpoints: Vec<String>,
    /// The partial change of a run that committed nothing.
    pub patch: Option<PathBuf>,
    pub execution_dir: PathBuf,
    pub worktree: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct UsageTotals {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total_tokens: f64,
    pub cost: f64,
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ExecError {
    let context = context.into();
    move |source| ExecError::Io { context, source }
}

fn execution_id(plan: &Plan) -> String {
    bh_fs::time_ordered_id("x", plan.plan_sha256.as_bytes())
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), ExecError> {
    bh_fs::write_json_atomic(path, value).map_err(io(format!("cannot write {}", path.display())))
}

/// The worktree's content as a tree, staged through a temporary index (the
/// user's index is never involved).
fn stage_tree(worktree: &Repo, index: &Path, base: &str) -> Result<String, ExecError> {
    let with_index = |args: &[&str]| {
        worktree
            .cmd(args.iter().copied())
            .env("GIT_INDEX_FILE", index.as_os_str())
            .optional_locks(true)
    };
    let _ = fs::remove_file(index);
    with_index(&["read-tree", base]).run()?;
    with_index(&["add", "-A", "--", "."]).run()?;
    let tree = with_index(&["write-tree"]).run()?;
    Ok(String::from_utf8_lossy(&tree.stdout).trim().to_owned())
}

/// The commit message: summary, body, and the provenance trailers in their
/// fixed order.
pub fn commit_message(plan: &Plan, execution: &str, model: &str) -> String {
    let first_line = plan.prompt.text.lines().next().unwrap_or("").trim();
    let mut summary: String = first_line.chars().take(60).collect();
    if first_line.chars().count() > 60 {
        summary.push('…');
    }
    format!(
        "Continue session {session} from entry {entry}: {summary}\n\n\
         Continued Pi session {session} from entry {entry} at commit {base}\n\
         with the prompt (sha256:{prompt}), by the Better Harness session-checkpoint\n\
         executor, execution {execution}.\n\n\
         Better-Harness-Plan: sha256:{plan_sha}\n\
         Better-Harness-Base: {base}\n\
         Better-Harness-Session: {session}\n\
         Better-Harness-Session-SHA256: {session_sha}\n\
         Better-Harness-Entry: {entry}\n\
         Better-Harness-Execution: {execution}\n\
         Better-Harness-Model: {model}\n",
        session = plan.session.id,
        entry = plan.session.entry,
        base = plan.base.commit,
        prompt = plan.prompt.sha256,
        plan_sha = plan.plan_sha256,
        session_sha = plan.session.sha256,
    )
}

/// Runs a verified plan. Every re-check happens before any model call or Git
/// mutation; a run stopped by a limit, a provider failure or cancellation
/// commits nothing and saves its partial change as a patch.
pub async fn run_plan(
    runner: &GitRunner,
    plan_path: &Path,
    setup: &RunSetup,
) -> Result<RunResult, ExecError> {
    let plan = verify_plan(runner, plan_path)?;
    let repo = runner.repo(&plan.repo.top_level, Scope::User);
    // Leftovers of crashed executions go first.
    let _ = gc(runner, &plan.repo.top_level, &setup.state_dir);
    let id = execution_id(&plan);
    let dir = setup.state_dir.join("executions").join(&id);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io(format!("cannot create {}", dir.display())))?;
    fs::copy(plan_path, dir.join("plan.json")).map_err(io("cannot copy the plan"))?;
    fs::write(
        dir.join("owner"),
        owner_stamp(std::process::id()).unwrap_or_default(),
    )
    .map_err(io("cannot write the owner file"))?;
    let log = |line: &str| {
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join("run.log"))
        {
            let _ = writeln!(f, "{line}");
        }
    };
    log(&format!(
        "execution {id} of plan sha256:{}",
        plan.plan_sha256
    ));

    // A detached worktree at the base, locked from its creation.
    let worktree = dir.join("worktree");
    repo.worktree_add_detached(&worktree, &plan.base.commit, &format!("bh exec {id}"))?;
    let mut guard = bh_git::WorktreeGuard::new(&repo, &worktree);
    if setup.keep_worktree {
        guard.keep();
    }
    let wt = runner.repo(&worktree, Scope::User);

    // The forked session: new id, parentSession = source, cwd = worktree,
    // the planned entry as the active leaf.
    let source = Session::load(&plan.session.file).map_err(|e| ExecError::Session {
        file: plan.session.file.display().to_string(),
        detail: e.to_string(),
    })?;
    let forked = bh_session::fork(
        &source,
        &ForkTarget::File(dir.join("session.jsonl")),
        &ForkOptions {
            path_only: false,
            entry: Some(plan.session.entry.clone()),
            cwd: Some(worktree.display().to_string()),
            parent_session: Some(plan.session.file.display().to_string()),
            ..Default::default()
        },
    )
    .map_err(|e| ExecError::Session {
        file: plan.session.file.display().to_string(),
        detail: e.to_string(),
    })?;
    log(&format!(
        "forked session {} at {}",
        forked.session_id,
        forked.path.display()
    ));

    // The agent: exactly read, ls, edit, write, confined to the worktree.
    let toolbox =
        Toolbox::new(ToolboxOptions::new(&worktree, Profile::Executor, &dir)).map_err(|e| {
            ExecError::Io {
                context: "cannot set up the tools".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
    // A store that cannot be opened turns checkpoints off for this run; the
    // run log says why (the worktree itself is disposable).
    let store = match Store::open(runner, &worktree, &StoreOptions::new(&setup.state_dir)) {
        Ok(store) => Some(store),
        Err(e) => {
            log(&format!("checkpoints off: {e}"));
            None
        }
    };
    let writer = SessionWriter::open(&forked.path).map_err(|e| ExecError::Session {
        file: forked.path.display().to_string(),
        detail: e.to_string(),
    })?;
    let mut agent = Agent::new(AgentConfig {
        provider: setup.provider.clone(),
        toolbox: Arc::new(toolbox),
        tools: Some(Profile::Executor.specs().to_vec()),
        session: writer,
        checkpoints: store.map(Arc::new),
        system_prompt: None,
        thinking: Default::default(),
        max_tokens: None,
        limits: Limits {
            max_tool_calls: Some(u64::from(plan.limits.max_tool_calls)),
            timeout: Some(std::time::Duration::from_secs(plan.limits.timeout_secs)),
            max_turns: None,
        },
    })
    .map_err(|e| ExecError::Session {
        file: forked.path.display().to_string(),
        detail: e.to_string(),
    })?;
    let mut sink = |_event: bh_core::Event| {};
    let outcome = agent
        .run(&plan.prompt.text, &setup.cancel, &mut sink)
        .await
        .map_err(|e| ExecError::Session {
            file: forked.path.display().to_string(),
            detail: e.to_string(),
        })?;
    log(&format!(
        "agent stopped: {:?} {:?}",
        outcome.stop, outcome.reason
    ));

    let usage = usage_since(&forked.path, forked.entries);
    let model = plan.model.clone().unwrap_or_else(|| {
        setup.provider.model().provider.clone() + "/" + &setup.provider.model().id
    });
    let tree = stage_tree(&wt, &dir.join("index"), &plan.base.commit)?;
    let mut result = RunResult {
        state: String::new(),
        execution_id: id.clone(),
        commit: None,
        tree: Some(tree.clone()),
        output_ref: None,
        changed_paths: Vec::new(),
        tool_calls: outcome.tool_calls,
        stop_reason: format!("{:?}", outcome.stop).to_lowercase(),
        reason: outcome.reason.clone(),
        usage,
        forked_session: forked.path.clone(),
        checkpoints: outcome.checkpoints.clone(),
        patch: None,
        execution_dir: dir.clone(),
        worktree: setup.keep_worktree.then(|| worktree.clone()),
    };
    if outcome.stop != RunStop::Completed {
        result.state = if outcome.stop == RunStop::Error {
            "failed"
        } else {
            "aborted"
        }
        .into();
        if tree != plan.base.tree {
            let patch = repo.run([
                "diff",
                "--binary",
                "--no-ext-diff",
                "--no-textconv",
                &plan.base.tree,
                &tree,
                "--",
            ])?;
            let path = dir.join("partial.patch");
            fs::write(&path, patch).map_err(io("cannot write the partial patch"))?;
            result.patch = Some(path);
        }
    } else if tree == plan.base.tree {
        result.state = "no-changes".into();
    } else {
        let message = commit_message(&plan, &id, &model);
        let date = format!("@{} +0000", plan_time(&dir));
        let commit = repo
            .cmd(["commit-tree", &tree, "-p", &plan.base.commit, "-F", "-"])
            .env("GIT_AUTHOR_NAME", "Better Harness")
            .env("GIT_AUTHOR_EMAIL", "executor@better-harness.invalid")
            .env("GIT_COMMITTER_NAME", "Better Harness")
            .env("GIT_COMMITTER_EMAIL", "executor@better-harness.invalid")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .stdin(message.into_bytes())
            .run()?;
        let commit = String::from_utf8_lossy(&commit.stdout).trim().to_owned();
        // Create-only: losing a race is an error, never an overwrite.
        repo.create_ref(&plan.output_ref, &commit)
            .map_err(|_| ExecError::RefExists {
                name: plan.output_ref.clone(),
                at: repo
                    .read_ref(&plan.output_ref)
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            })?;
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
        result.state = "committed".into();
    }
    let _ = fs::remove_file(dir.join("index"));
    if !setup.keep_worktree {
        // The result stands whether or not the removal succeeds (as before:
        // the guard's drop ignored failures too).
        let _ = guard.remove();
    }
    write_json(&dir.join("result.json"), &result)?;
    log(&format!("result: {}", result.state));
    Ok(result)
}

/// The execution's start time (seconds), fixed by the folder's creation so
/// the commit is deterministic for a given execution.
fn plan_time(dir: &Path) -> u64 {
    fs::metadata(dir.join("plan.json"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Token and cost totals of the entries appended after the fork.
fn usage_since(path: &Path, skip: usize) -> UsageTotals {
    let mut totals = UsageTotals::default();
    if let Ok(session) = Session::load(path) {
        for e in session.entries().iter().skip(skip) {
            if let Some(u) = &e.usage {
                totals.input += u.input;
                totals.output += u.output;
                totals.cache_read += u.cache_read;
                totals.cache_write += u.cache_write;
                totals.total_tokens += u.total_tokens;
                totals.cost += u.cost_total;
            }
        }
    }
    totals
}

/// Removes what crashed executions left behind: worktrees the executor made
/// (locked `bh exec <id>`) whose execution has no `result.json`. Touches
/// nothing else. Returns the paths removed.
pub fn gc(
    runner: &GitRunner,
    repo_dir: &Path,
    state_dir: &Path,
) -> Result<Vec<PathBuf>, ExecError> {
    let repo = runner.repo(repo_dir, Scope::User);
    let executions = state_dir.join("executions");
    let mut removed = Vec::new();
    for wt in repo.worktrees()? {
        let ours = wt
            .locked
            .as_deref()
            .is_some_and(|r| r.starts_with("bh exec "));
        let inside = wt.path.starts_with(&executions);
        let exec_dir = wt.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let finished = exec_dir.join("result.json").exists();
        let running = fs::read_to_string(exec_dir.join("owner"))
            .ok()
            .and_then(|o| {
                let pid: u32 = o.split_whitespace().next()?.parse().ok()?;
                Some(owner_stamp(pid).as_deref() == Some(o.as_str()))
            })
            .unwrap_or(false);
        if ours && inside && !finished && !running {
            let _ = repo.worktree_unlock(&wt.path);
            repo.worktree_remove(&wt.path, true)?;
            removed.push(wt.path);
        }
    }
    Ok(removed)
}

/// `"<pid> <start time>"` of a live process (start time from `/proc`, so a
/// reused pid does not look like the original owner).
fn owner_stamp(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // fields after the command: state is field 3; start time is field 22
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}
