//! Reading executions back: the folders under `<state>/executions/` as
//! records (plan copy, `result.json`, whether the run is still going), and
//! the facts `bh exec show` adds from Git (the commit's trailers, the
//! diffstat and patch of the change). Reads only.

use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use fs_err as fs;
use serde::{Deserialize, Serialize};

use crate::commit::{TRAILER_KEYS, Trailers};
use crate::error::{ExecError, io};
use crate::folder::EXECUTIONS_DIR;
use crate::plan::Plan;
use crate::run::RunState;
use crate::verify::read_plan_copy;

/// Where an execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecStatus {
    /// Finished: `result.json` says how.
    Finished(RunState),
    /// No `result.json` yet and its owner process is alive.
    Running,
    /// No `result.json` and its owner is gone: the run crashed or was
    /// killed (`bh exec gc` removes its worktree).
    Unfinished,
}

impl ExecStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Finished(s) => s.as_str(),
            ExecStatus::Running => "running",
            ExecStatus::Unfinished => "unfinished",
        }
    }
}

/// What `result.json` recorded, as read back (the fields a view needs; the
/// whole document is kept in [`ExecutionRecord::result_json`]).
#[derive(Debug, Clone, Deserialize)]
pub struct StoredResult {
    pub state: String,
    pub commit: Option<String>,
    pub tree: Option<String>,
    #[serde(rename = "ref")]
    pub output_ref: Option<String>,
    #[serde(default)]
    pub tool_calls: u64,
    pub stop_reason: Option<String>,
    pub reason: Option<String>,
    pub forked_session: Option<PathBuf>,
    pub patch: Option<PathBuf>,
}

/// One execution folder read back.
#[derive(Debug, Clone)]
pub struct ExecutionRecord {
    pub id: String,
    pub dir: PathBuf,
    /// The plan as run (`plan.json`); `None` when it cannot be read (see
    /// `problems`).
    pub plan: Option<Plan>,
    pub result: Option<StoredResult>,
    pub result_json: Option<serde_json::Value>,
    pub status: ExecStatus,
    /// Why part of the folder could not be read.
    pub problems: Vec<String>,
}

impl ExecutionRecord {
    /// The forked session the run continued.
    pub fn session_file(&self) -> PathBuf {
        self.result
            .as_ref()
            .and_then(|r| r.forked_session.clone())
            .unwrap_or_else(|| self.dir.join("session.jsonl"))
    }
}

/// Every execution under `state_dir`, oldest first (ids are time-ordered).
/// A missing executions folder is an empty list.
pub fn list_executions(state_dir: &Path) -> Result<Vec<ExecutionRecord>, ExecError> {
    let root = state_dir.join(EXECUTIONS_DIR);
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ExecError::Io {
                what: "list",
                path: root,
                source: e,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io("list", &root))?;
        let dir = entry.path();
        let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !dir.is_dir() || !dir.join("plan.json").exists() && !dir.join("owner").exists() {
            continue;
        }
        out.push(read_execution(&id, &dir));
    }
    // Oldest first, by the time the id carries.
    out.sort_by(|a, b| (bh_fs::id_time_ms(&a.id), &a.id).cmp(&(bh_fs::id_time_ms(&b.id), &b.id)));
    Ok(out)
}

/// Reads one execution folder; what cannot be read is named in `problems`.
pub fn read_execution(id: &str, dir: &Path) -> ExecutionRecord {
    let mut problems = Vec::new();
    let plan = read_plan_copy(&dir.join("plan.json"))
        .map_err(|e| problems.push(e.to_string()))
        .ok();
    let result_path = dir.join("result.json");
    let result_json: Option<serde_json::Value> = match fs::read(&result_path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(format!("{}: {e}", result_path.display()));
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let result: Option<StoredResult> = result_json.as_ref().and_then(|v| {
        serde_json::from_value(v.clone())
            .map_err(|e| problems.push(format!("{}: {e}", result_path.display())))
            .ok()
    });
    let status = match &result {
        Some(r) => match run_state(&r.state) {
            Some(s) => ExecStatus::Finished(s),
            None => {
                problems.push(format!(
                    "{}: unknown state {:?}",
                    result_path.display(),
                    r.state
                ));
                ExecStatus::Unfinished
            }
        },
        None if result_json.is_none() && owner_alive(dir) => ExecStatus::Running,
        None => ExecStatus::Unfinished,
    };
    ExecutionRecord {
        id: id.to_owned(),
        dir: dir.to_path_buf(),
        plan,
        result,
        result_json,
        status,
        problems,
    }
}

fn run_state(s: &str) -> Option<RunState> {
    [
        RunState::Committed,
        RunState::NoChanges,
        RunState::Aborted,
        RunState::Failed,
    ]
    .into_iter()
    .find(|r| r.as_str() == s)
}

/// Whether the process named in `owner` (`<pid> <start time>`) still runs.
fn owner_alive(dir: &Path) -> bool {
    let Ok(owner) = fs::read_to_string(dir.join("owner")) else {
        return false;
    };
    let mut parts = owner.split_whitespace();
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
        return false;
    };
    pid.parse::<u32>()
        .ok()
        .and_then(bh_proc::process_start_time)
        .is_some_and(|now| now.to_string() == start)
}

/// One file of a diffstat (`None` counts: a binary file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileStat {
    pub path: String,
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

/// What Git says about an execution's change.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChangeFacts {
    /// The trailers of the execution's commit, when it has one.
    pub trailers: Option<Vec<(String, String)>>,
    /// Where the output ref points now (`None`: it does not exist).
    pub ref_now: Option<String>,
    pub diffstat: Vec<FileStat>,
    /// The change as a unified diff (text; binary files summarised by Git).
    pub patch: Option<String>,
    /// What Git could not answer (e.g. the tree was pruned).
    pub problems: Vec<String>,
}

/// The trailers, diffstat and patch of an execution's change: the commit's
/// when it committed, else the recorded tree against the base.
pub fn change_facts(runner: &GitRunner, record: &ExecutionRecord, with_patch: bool) -> ChangeFacts {
    let mut facts = ChangeFacts::default();
    let (Some(plan), Some(result)) = (&record.plan, &record.result) else {
        return facts;
    };
    let repo = runner.repo(&plan.repo.top_level, Scope::User);
    if let Some(commit) = &result.commit {
        match repo.run(["log", "-1", "--format=%B", commit.as_str(), "--"]) {
            Ok(msg) => {
                let text = String::from_utf8_lossy(&msg);
                facts.trailers = Trailers::parse(&text).map(|t| {
                    let values = [
                        t.plan,
                        t.base,
                        t.session,
                        t.session_sha256,
                        t.entry,
                        t.execution,
                        t.model,
                    ];
                    TRAILER_KEYS
                        .iter()
                        .zip(values)
                        .map(|(k, v)| ((*k).to_owned(), v))
                        .collect()
                });
                if facts.trailers.is_none() {
                    facts.problems.push(format!(
                        "commit {commit} does not end with the executor's trailers"
                    ));
                }
            }
            Err(e) => facts.problems.push(e.to_string()),
        }
    }
    if let Some(r) = &result.output_ref {
        facts.ref_now = repo.read_ref(r).ok().flatten();
    }
    let to = result.commit.as_deref().or(result.tree.as_deref());
    let Some(to) = to.filter(|t| *t != plan.base.tree && *t != plan.base.commit) else {
        return facts;
    };
    let from = if result.commit.is_some() {
        plan.base.commit.as_str()
    } else {
        plan.base.tree.as_str()
    };
    match repo.run([
        "diff",
        "--numstat",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        from,
        to,
        "--",
    ]) {
        Ok(out) => match bh_git::parse::numstat(&out) {
            Ok(stats) => {
                facts.diffstat = stats
                    .into_iter()
                    .map(|s| FileStat {
                        path: bh_git::parse::display_path(&s.path),
                        added: s.added,
                        deleted: s.deleted,
                    })
                    .collect();
            }
            Err(e) => facts.problems.push(e),
        },
        Err(e) => facts.problems.push(e.to_string()),
    }
    if with_patch {
        match repo.run([
            "diff",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            from,
            to,
            "--",
        ]) {
            Ok(out) => facts.patch = Some(String::from_utf8_lossy(&out).into_owned()),
            Err(e) => facts.problems.push(e.to_string()),
        }
    }
    facts
}
