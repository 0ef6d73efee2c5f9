//! The execution folder `<state>/executions/<id>/` (0700): `plan.json` (the
//! plan as run), `owner` (`<pid> <start time> <host>` of the running process),
//! `run.log`, `session.jsonl` (the forked session), `worktree/` (the detached
//! worktree, removed at the end unless kept), `index` (the private index,
//! removed), `partial.patch` (a stopped run's change), `kept` (why a failure
//! after the agent ran kept the worktree) and `result.json` (written last:
//! an execution without it did not finish).

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use std::io::Write;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use serde::Serialize;

use crate::error::{ExecError, io};
use crate::plan::Plan;

/// Executions live under `<state>/executions/`.
pub const EXECUTIONS_DIR: &str = "executions";
/// Present in an execution folder whose worktree holds work a failure kept.
pub const KEPT_FILE: &str = "kept";
/// The lock reason of an execution's worktree: `bh exec <id>`.
const LOCK_PREFIX: &str = "bh exec ";

/// One execution's folder.
pub struct Execution {
    pub id: String,
    pub dir: PathBuf,
}

impl Execution {
    /// Creates the folder of a new execution of `plan` with its plan copy
    /// and owner stamp.
    /// The copy is the verified plan itself, serialised again (the plan
    /// file is not read a second time).
    pub fn create(state_dir: &Path, plan: &Plan) -> Result<Execution, ExecError> {
        let id = bh_fs::run_id("x", plan.plan_sha256.as_bytes());
        let dir = state_dir.join(EXECUTIONS_DIR).join(&id);
        bh_fs::create_dir_all_mode(&dir, 0o700).map_err(io("create", &dir))?;
        let copy = dir.join("plan.json");
        bh_fs::write_json_atomic(&copy, plan).map_err(io("write the plan copy", &copy))?;
        let owner = dir.join("owner");
        fs::write(&owner, owner_stamp(std::process::id()).unwrap_or_default())
            .map_err(io("write", &owner))?;
        let exec = Execution { id, dir };
        exec.log(&format!(
            "execution {} of plan sha256:{}",
            exec.id, plan.plan_sha256
        ));
        Ok(exec)
    }

    /// The execution's worktree. Named for the execution, not `worktree`:
    /// git names a worktree's admin folder (`.git/worktrees/<name>`) after
    /// the path's last component and picks `worktree2`, `worktree3`… by
    /// looking first, which races when several runs add one at once
    /// ("failed to read .git/worktrees/worktree2/commondir"). A folder of an
    /// earlier version keeps its old name.
    pub fn worktree(&self) -> PathBuf {
        let legacy = self.dir.join("worktree");
        if legacy.exists() {
            return legacy;
        }
        self.dir.join(format!("wt-{}", self.id))
    }

    pub fn session(&self) -> PathBuf {
        self.dir.join("session.jsonl")
    }

    pub fn index(&self) -> PathBuf {
        self.dir.join("index")
    }

    /// The lock reason of this execution's worktree.
    pub fn lock_reason(&self) -> String {
        format!("{LOCK_PREFIX}{}", self.id)
    }

    /// Appends a line to `run.log` (best effort: the log is for people).
    pub fn log(&self, line: &str) {
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.dir.join("run.log"))
        {
            let _ = writeln!(f, "{line}");
        }
    }

    /// The execution's start time (seconds), fixed by the plan copy's
    /// creation so the commit is deterministic for a given execution.
    pub fn started_secs(&self) -> u64 {
        fs::metadata(self.dir.join("plan.json"))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// Saves a stopped run's change as `partial.patch`.
    pub fn write_patch(&self, patch: &[u8]) -> Result<PathBuf, ExecError> {
        let path = self.dir.join("partial.patch");
        bh_fs::write_atomic(&path, patch, 0o600).map_err(io("write", &path))?;
        Ok(path)
    }

    /// Marks the execution's worktree as kept after a failure once the agent
    /// had run (`kept` holds why): [`gc`] never removes it.
    pub fn mark_kept(&self, why: &str) -> Result<(), ExecError> {
        let path = self.dir.join(KEPT_FILE);
        bh_fs::write_atomic(&path, format!("{why}\n").as_bytes(), 0o600).map_err(io("write", &path))
    }

    /// Writes `result.json`, the mark of a finished execution.
    pub fn write_result(&self, result: &impl Serialize) -> Result<(), ExecError> {
        let path = self.dir.join("result.json");
        bh_fs::write_json_atomic(&path, result).map_err(io("write", &path))
    }
}

/// Removes what crashed executions left behind: worktrees the executor made
/// (locked `bh exec <id>`, inside `<state>/executions/`) whose execution has
/// no `result.json` nor `kept` and whose owner is gone. Touches nothing else. Returns
/// the paths removed.
pub fn gc(
    runner: &GitRunner,
    repo_dir: &Path,
    state_dir: &Path,
) -> Result<Vec<PathBuf>, ExecError> {
    let repo = runner.repo(repo_dir, Scope::User);
    let executions = state_dir.join(EXECUTIONS_DIR);
    let mut removed = Vec::new();
    for wt in repo.worktrees()? {
        let ours = wt
            .locked
            .as_deref()
            .is_some_and(|r| r.starts_with(LOCK_PREFIX));
        let inside = wt.path.starts_with(&executions);
        let exec_dir = wt.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let finished = exec_dir.join("result.json").exists() || exec_dir.join(KEPT_FILE).exists();
        let running = fs::read_to_string(exec_dir.join("owner"))
            .ok()
            .and_then(|o| owner_running(&o))
            .unwrap_or(false);
        if ours && inside && !finished && !running {
            let _ = repo.worktree_unlock(&wt.path);
            repo.worktree_remove(&wt.path, true)?;
            removed.push(wt.path);
        }
    }
    Ok(removed)
}

/// `"<pid> <start time> <host>"` of a live process (start time from
/// `/proc`, so a reused pid does not look like the original owner; the host
/// so a state directory shared by several machines, e.g. the workers of a
/// Slurm array on shared storage, never judges another machine's pid).
fn owner_stamp(pid: u32) -> Option<String> {
    let start = bh_proc::process_start_time(pid)?;
    Some(format!("{pid} {start} {}", crate::receipt::host_name()))
}

/// Whether the owner stamp names a live process; one of another host
/// counts as live (it is not this machine's to collect). `None`: not a stamp.
fn owner_running(stamp: &str) -> Option<bool> {
    let mut f = stamp.split_whitespace();
    let pid: u32 = f.next()?.parse().ok()?;
    let start = f.next()?;
    if f.next()
        .is_some_and(|host| host != crate::receipt::host_name())
    {
        return Some(true);
    }
    Some(bh_proc::process_start_time(pid).is_some_and(|now| now.to_string() == start))
}
