//! Validation of what a worker did: every commit between the base and the
//! candidate, and what it left in its worktree.

use bh_git::Repo;
use bh_git::parse::{self, StatusEntry, display_path};
use serde::Serialize;

use crate::TaskError;
use crate::scope::{FrozenScope, Verdict};

/// The reason of a violation that is work left uncommitted.
pub(crate) const UNCOMMITTED: &str = "uncommitted change";

const SYMLINK: u32 = 0o120000;
const GITLINK: u32 = 0o160000;

/// One reason a candidate cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Violation {
    /// The commit at fault, when the violation is in history.
    pub commit: Option<String>,
    /// The path at fault, shown git-style.
    pub path: Option<String>,
    pub reason: String,
}

fn violation(commit: Option<&str>, path: Option<&[u8]>, reason: impl Into<String>) -> Violation {
    Violation {
        commit: commit.map(str::to_owned),
        path: path.map(display_path),
        reason: reason.into(),
    }
}

fn check_path(scope: &FrozenScope, commit: Option<&str>, path: &[u8], out: &mut Vec<Violation>) {
    match scope.verdict(path) {
        Verdict::Allowed => {}
        Verdict::OutOfScope => out.push(violation(commit, Some(path), "outside the granted scope")),
        Verdict::Protected(why) => {
            out.push(violation(commit, Some(path), format!("protected ({why})")))
        }
    }
}

/// Every violation in the history from the scope's base to `candidate`: the
/// candidate must descend from the base; no merge commits; every path touched
/// by any commit (so a forbidden change committed and later reverted is still
/// caught; a rename counts on both sides) must be in scope and unprotected; no
/// commit may add or retarget a symlink or a gitlink.
pub fn validate_candidate(
    repo: &Repo,
    scope: &FrozenScope,
    candidate: &str,
) -> Result<Vec<Violation>, TaskError> {
    let mut out = Vec::new();
    if !repo.is_ancestor(&scope.base, candidate)? {
        out.push(violation(
            Some(candidate),
            None,
            format!("does not descend from the base commit {}", scope.base),
        ));
        return Ok(out);
    }
    for entry in repo.log_raw(&scope.base, candidate)? {
        let commit = entry.commit;
        if entry.parents.len() > 1 {
            out.push(violation(Some(&commit), None, "merge commit"));
            continue;
        }
        for change in entry.changes {
            check_path(scope, Some(&commit), &change.path, &mut out);
            // A link or gitlink is judged whenever a commit leaves one at
            // the path: new, retargeted (`120000 -> 120000` with another
            // target) or a file turned into one.
            if change.new_mode == SYMLINK {
                let what = if change.old_mode == SYMLINK {
                    "changes a symbolic link"
                } else {
                    "adds a symbolic link"
                };
                out.push(violation(Some(&commit), Some(&change.path), what));
            }
            if change.new_mode == GITLINK {
                let what = if change.old_mode == GITLINK {
                    "changes a gitlink (submodule)"
                } else {
                    "adds a gitlink (submodule)"
                };
                out.push(violation(Some(&commit), Some(&change.path), what));
            }
        }
    }
    Ok(out)
}

/// What the worker left uncommitted in its worktree (`worktree` is a handle
/// on that worktree): every staged, unstaged, untracked or deleted path is a
/// violation, and its scope is reported too.
pub fn validate_worktree(
    worktree: &Repo,
    scope: &FrozenScope,
) -> Result<Vec<Violation>, TaskError> {
    let status = worktree.run([
        "status",
        "--porcelain=v2",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=none",
    ])?;
    let entries = parse::status_v2(&status).map_err(|detail| {
        TaskError::Git(bh_git::GitError::Parse {
            argv: "git status --porcelain=v2 -z".into(),
            detail,
        })
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let path = match &entry {
            StatusEntry::Changed { path, .. }
            | StatusEntry::Unmerged { path }
            | StatusEntry::Untracked { path } => path.clone(),
            StatusEntry::Renamed { path, orig, .. } => {
                out.push(violation(None, Some(orig), UNCOMMITTED));
                path.clone()
            }
            StatusEntry::Ignored { .. } => continue,
        };
        out.push(violation(None, Some(&path), UNCOMMITTED));
        check_path(
            scope,
            None,
            path.strip_suffix(b"/").unwrap_or(&path),
            &mut out,
        );
    }
    Ok(out)
}

/// What the worker left uncommitted (the snapshot commit `work` on top of
/// its `head`, judged in the user's repository): every path is a violation
/// ("uncommitted change"), and its scope is reported too.
pub fn validate_uncommitted(
    repo: &Repo,
    scope: &FrozenScope,
    head: &str,
    work: &str,
) -> Result<Vec<Violation>, TaskError> {
    let mut out = Vec::new();
    for entry in repo.log_raw(head, work)? {
        for change in entry.changes {
            out.push(violation(None, Some(&change.path), UNCOMMITTED));
            check_path(scope, None, &change.path, &mut out);
        }
    }
    Ok(out)
}
