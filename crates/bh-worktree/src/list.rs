//! `list`: every registered worktree with its provisioning state, dirty and
//! unpushed counts.

use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Repo};
use serde::Serialize;

use crate::error::{Result, WorktreeError};
use crate::project::Project;
use crate::receipt::{Receipt, Stage, State};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeInfo {
    pub path: PathBuf,
    /// The managed name (from a receipt), `None` for hand-made worktrees.
    pub name: Option<String>,
    pub main: bool,
    pub head: Option<String>,
    /// Short branch name, `None` when detached.
    pub branch: Option<String>,
    pub detached: bool,
    pub locked: Option<String>,
    pub prunable: Option<String>,
    /// Provisioning state; `None` = unmanaged.
    pub state: Option<State>,
    pub stage: Option<Stage>,
    /// Changed tracked plus untracked files; `None` when it cannot be read.
    pub dirty: Option<u64>,
    /// Commits not on any remote-tracking branch; `None` = unknown (no upstream, detached).
    pub unpushed: Option<u64>,
}

/// Every receipt in the admin folder.
pub(crate) fn receipts(project: &Project) -> Result<Vec<Receipt>> {
    let dir = project.admin_dir();
    let mut out = Vec::new();
    let entries = match fs_err::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(WorktreeError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| WorktreeError::io(&dir, e))?;
        let p = entry.path();
        if p.extension().is_some_and(|x| x == "json")
            && let Some(r) = Receipt::load(&p)?
        {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Changed tracked files plus untracked (not ignored) files.
pub(crate) fn dirty_count(repo: &Repo) -> Result<u64> {
    let out = repo.run([
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=none",
    ])?;
    Ok(bh_git::parse::split_z(&out)
        .filter(|r| !r.is_empty())
        .count() as u64)
}

/// Commits of `HEAD` on no remote-tracking branch; `None` (unknown) when
/// detached or the branch has no upstream.
pub(crate) fn unpushed_count(repo: &Repo, branch: Option<&str>) -> Result<Option<u64>> {
    let Some(branch) = branch else {
        return Ok(None);
    };
    let up = repo.run_line([
        "for-each-ref",
        "--format=%(upstream)",
        &format!("refs/heads/{branch}"),
    ])?;
    if up.is_empty() {
        return Ok(None);
    }
    let n = repo.run_line(["rev-list", "--count", "HEAD", "--not", "--remotes", "--"])?;
    Ok(n.parse().ok())
}

/// A branch's short name (`refs/heads/` dropped), as `git worktree list` gives it.
pub fn short_branch(full: &[u8]) -> String {
    let s = String::from_utf8_lossy(full);
    s.strip_prefix("refs/heads/").unwrap_or(&s).to_owned()
}

/// Whether two paths name the same file or folder (equal, or equal once
/// canonicalised; a path that does not exist is only equal to itself).
pub fn same_path(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The managed worktree holding `cwd` (the deepest one, for worktrees made
/// inside others): its name and path; `None` in the main checkout, in a
/// hand-made worktree, or when `cwd` is in none. Cheap: no status is read.
pub fn containing(runner: &GitRunner, cwd: &Path) -> Result<Option<(String, PathBuf)>> {
    let project = Project::discover(runner, cwd)?;
    let receipts = receipts(&project)?;
    let Ok(here) = fs_err::canonicalize(cwd) else {
        return Ok(None);
    };
    let found = project
        .repo()
        .worktrees()?
        .into_iter()
        .skip(1)
        .filter(|wt| !wt.bare)
        .filter_map(|wt| {
            let name = receipts
                .iter()
                .find(|r| same_path(&r.path, &wt.path))?
                .name
                .clone();
            let real = fs_err::canonicalize(&wt.path).ok()?;
            here.starts_with(&real)
                .then_some((real.as_os_str().len(), name, wt.path))
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, name, path)| (name, path));
    Ok(found)
}

pub fn list(runner: &GitRunner, cwd: &Path) -> Result<Vec<WorktreeInfo>> {
    let project = Project::discover(runner, cwd)?;
    let receipts = receipts(&project)?;
    let mut out = Vec::new();
    for (i, wt) in project.repo().worktrees()?.into_iter().enumerate() {
        if wt.bare {
            continue;
        }
        let receipt = receipts.iter().find(|r| same_path(&r.path, &wt.path));
        let branch = wt.branch.as_deref().map(short_branch);
        let (dirty, unpushed) = if wt.prunable.is_none() && wt.path.is_dir() {
            let repo = project.repo_at(&wt.path);
            (
                dirty_count(&repo).ok(),
                unpushed_count(&repo, branch.as_deref()).ok().flatten(),
            )
        } else {
            (None, None)
        };
        out.push(WorktreeInfo {
            name: receipt.map(|r| r.name.clone()),
            main: i == 0,
            head: wt.head.clone(),
            detached: wt.detached,
            locked: wt.locked.clone(),
            prunable: wt.prunable.clone(),
            state: receipt.map(|r| r.state),
            stage: receipt.map(|r| r.stage),
            dirty,
            unpushed,
            branch,
            path: wt.path,
        });
    }
    Ok(out)
}
