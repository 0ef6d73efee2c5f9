//! Typed operations on a repository through the hardened runner: revision
//! lookups, create-only and compare-and-swap ref updates, ancestry, linked
//! worktrees and tree differences. Every function is one or two git calls
//! whose `-z` output is parsed as bytes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::NULL_OID;
use crate::parse::{self, NameStatus, RawChange};
use crate::runner::{GitError, Repo};

/// One commit of [`Repo::log_raw`]: its parents and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCommit {
    pub commit: String,
    pub parents: Vec<String>,
    /// Changes against the first parent (none are listed for merges).
    pub changes: Vec<RawChange>,
}

/// Removes a worktree the harness made when dropped (unlock, then forced
/// remove of that exact path — never a global prune), unless [`keep`] was
/// called: any early return or error leaves the user's repository as it was.
///
/// [`keep`]: WorktreeGuard::keep
pub struct WorktreeGuard<'a> {
    repo: &'a Repo,
    path: PathBuf,
    armed: bool,
}

impl<'a> WorktreeGuard<'a> {
    pub fn new(repo: &'a Repo, path: impl Into<PathBuf>) -> Self {
        WorktreeGuard {
            repo,
            path: path.into(),
            armed: true,
        }
    }

    /// Keep the worktree (for inspection, or evidence).
    pub fn keep(&mut self) {
        self.armed = false;
    }

    /// Remove it now, reporting a failure.
    pub fn remove(&mut self) -> Result<(), GitError> {
        self.armed = false;
        let _ = self.repo.worktree_unlock(&self.path);
        self.repo.worktree_remove(&self.path, true)
    }
}

impl Drop for WorktreeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.repo.worktree_unlock(&self.path);
            let _ = self.repo.worktree_remove(&self.path, true);
        }
    }
}

/// One entry of `git worktree list --porcelain -z`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    /// Checked-out commit (absent for a bare repository or an unborn branch).
    pub head: Option<String>,
    /// `refs/heads/…` when a branch is checked out.
    pub branch: Option<Vec<u8>>,
    pub detached: bool,
    pub bare: bool,
    /// `Some(reason)` (possibly empty) when locked.
    pub locked: Option<String>,
    /// `Some(reason)` when git considers it prunable.
    pub prunable: Option<String>,
}

fn parse_error(cmd: &str, detail: impl Into<String>) -> GitError {
    GitError::Parse {
        argv: cmd.to_owned(),
        detail: detail.into(),
    }
}

impl Repo {
    /// The full id of the commit `rev` names (`rev` is never taken as an
    /// option).
    pub fn resolve_commit(&self, rev: &str) -> Result<String, GitError> {
        self.run_line([
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])
    }

    /// The full id of the tree of commit `commit`.
    pub fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        self.run_line([
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{commit}^{{tree}}"),
        ])
    }

    /// The value of a ref, or `None` when it does not exist.
    pub fn read_ref(&self, name: &str) -> Result<Option<String>, GitError> {
        let out = self
            .cmd(["rev-parse", "--verify", "--quiet", "--end-of-options", name])
            .ok_codes(&[0, 1])
            .run()?;
        let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((out.code == 0 && !value.is_empty()).then_some(value))
    }

    /// Creates `name` at `new`; fails if the ref already exists.
    pub fn create_ref(&self, name: &str, new: &str) -> Result<(), GitError> {
        self.update_ref_cas(name, new, NULL_OID)
    }

    /// Moves `name` from `old` to `new` atomically; fails if it is not at `old`
    /// (`old` = [`NULL_OID`] means "must not exist").
    pub fn update_ref_cas(&self, name: &str, new: &str, old: &str) -> Result<(), GitError> {
        self.cmd([
            "update-ref",
            "--no-deref",
            "--end-of-options",
            name,
            new,
            old,
        ])
        .optional_locks(true)
        .run()
        .map(drop)
    }

    /// Deletes `name` only if it still points at `old`.
    pub fn delete_ref_cas(&self, name: &str, old: &str) -> Result<(), GitError> {
        self.cmd([
            "update-ref",
            "--no-deref",
            "-d",
            "--end-of-options",
            name,
            old,
        ])
        .optional_locks(true)
        .run()
        .map(drop)
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `descendant`.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool, GitError> {
        let out = self
            .cmd(["merge-base", "--is-ancestor", ancestor, descendant])
            .ok_codes(&[0, 1])
            .run()?;
        Ok(out.code == 0)
    }

    /// Commits reachable from `head` but not from `base`, oldest first.
    pub fn commits_between(&self, base: &str, head: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(["rev-list", "--reverse", &format!("{base}..{head}"), "--"])?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// Paths changed between two trees or commits (no rename detection).
    pub fn name_status(&self, from: &str, to: &str) -> Result<Vec<NameStatus>, GitError> {
        let cmd = "git diff-tree --name-status";
        let out = self.run([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            from,
            to,
            "--",
        ])?;
        parse::name_status(&out).map_err(|d| parse_error(cmd, d))
    }

    /// Paths a single commit changed relative to its only parent (or to the
    /// empty tree for a root commit).
    pub fn commit_name_status(&self, commit: &str) -> Result<Vec<NameStatus>, GitError> {
        let cmd = "git diff-tree --root --name-status";
        let out = self.run([
            "diff-tree",
            "-r",
            "-z",
            "--root",
            "--no-commit-id",
            "--no-renames",
            "--name-status",
            commit,
            "--",
        ])?;
        parse::name_status(&out).map_err(|d| parse_error(cmd, d))
    }

    /// Modes, ids and status of every path a single commit changed relative
    /// to its first parent (or the empty tree for a root commit).
    pub fn commit_raw_changes(&self, commit: &str) -> Result<Vec<RawChange>, GitError> {
        let out = self.run([
            "diff-tree",
            "-r",
            "-z",
            "--root",
            "--no-commit-id",
            "--no-renames",
            "--raw",
            "--no-abbrev",
            commit,
            "--",
        ])?;
        parse::raw_diff(&out).map_err(|d| parse_error("git diff-tree --raw", d))
    }

    /// Every commit reachable from `head` but not from `base`, oldest first,
    /// with its parents and raw changes — one git call for the whole range.
    pub fn log_raw(&self, base: &str, head: &str) -> Result<Vec<LogCommit>, GitError> {
        let out = self.run([
            "log",
            "--reverse",
            "-z",
            "--no-renames",
            "--raw",
            "--no-abbrev",
            "--format=%x01%H %P",
            &format!("{base}..{head}"),
            "--",
        ])?;
        parse_log_raw(&out).map_err(|d| parse_error("git log --raw -z", d))
    }

    /// The parents of a commit.
    pub fn parents(&self, commit: &str) -> Result<Vec<String>, GitError> {
        let line = self.run_line(["rev-list", "--parents", "-n", "1", commit, "--"])?;
        Ok(line.split(' ').skip(1).map(str::to_owned).collect())
    }

    /// Every worktree of the repository, the main one first.
    pub fn worktrees(&self) -> Result<Vec<Worktree>, GitError> {
        let out = self.run(["worktree", "list", "--porcelain", "-z"])?;
        parse_worktrees(&out).map_err(|d| parse_error("git worktree list --porcelain -z", d))
    }

    /// Adds a detached worktree at `path` checked out at `commit`, locked with
    /// `reason` from the moment it exists (no window in which `git worktree
    /// prune` could take it).
    pub fn worktree_add_detached(
        &self,
        path: &Path,
        commit: &str,
        reason: &str,
    ) -> Result<(), GitError> {
        self.worktree_add(path, commit, reason, true)
    }

    /// Like [`Repo::worktree_add_detached`] but with nothing checked out
    /// (`--no-checkout`: HEAD at `commit`, no index, no files), so that
    /// what git would run there (filter drivers its config defines for that
    /// worktree only, e.g. under `includeIf "gitdir:…/worktrees/…"`) can be
    /// looked at before anything is checked out.
    pub fn worktree_add_detached_empty(
        &self,
        path: &Path,
        commit: &str,
        reason: &str,
    ) -> Result<(), GitError> {
        self.worktree_add(path, commit, reason, false)
    }

    fn worktree_add(
        &self,
        path: &Path,
        commit: &str,
        reason: &str,
        checkout: bool,
    ) -> Result<(), GitError> {
        let add = || {
            self.cmd([
                "worktree", "add", "--quiet", "--detach", "--lock", "--reason", reason,
            ])
            .args(if checkout {
                None
            } else {
                Some("--no-checkout")
            })
            .arg("--")
            .arg(path)
            .arg(commit)
            .optional_locks(true)
            .run()
            .map(drop)
        };
        // git reads every other worktree's admin folder while adding one,
        // and fails on one another `worktree add` is still creating
        // ("failed to read .git/worktrees/<name>/commondir"): a race of
        // concurrent adds, retried a few times.
        let mut tries = 0;
        loop {
            match add() {
                Err(e)
                    if tries < 8
                        && e.stderr().contains("failed to read")
                        && e.stderr().contains("commondir") =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50 * tries));
                }
                r => return r,
            }
        }
    }

    pub fn worktree_unlock(&self, path: &Path) -> Result<(), GitError> {
        self.cmd(["worktree", "unlock", "--"])
            .arg(path)
            .optional_locks(true)
            .run()
            .map(drop)
    }

    /// Removes a worktree; `force` discards its changes and overrides a lock.
    pub fn worktree_remove(&self, path: &Path, force: bool) -> Result<(), GitError> {
        let mut cmd = self.cmd(["worktree", "remove"]);
        if force {
            cmd = cmd.args(["--force", "--force"]);
        }
        cmd.arg("--").arg(path).optional_locks(true).run().map(drop)
    }
}

/// Parses `git log -z --raw --format=%x01%H %P` output.
pub fn parse_log_raw(out: &[u8]) -> Result<Vec<LogCommit>, String> {
    let mut commits: Vec<LogCommit> = Vec::new();
    let mut tokens = out.split(|b| *b == 0);
    while let Some(token) = tokens.next() {
        let token = token.strip_prefix(b"\n").unwrap_or(token);
        if token.is_empty() {
            continue;
        }
        if let Some(header) = token.strip_prefix(b"\x01") {
            let header = std::str::from_utf8(header).map_err(|_| "non-UTF-8 commit header")?;
            let mut ids = header.split_whitespace().map(str::to_owned);
            let commit = ids.next().ok_or("commit header without an id")?;
            commits.push(LogCommit {
                commit,
                parents: ids.collect(),
                changes: Vec::new(),
            });
        } else if token.starts_with(b":") {
            let path = tokens.next().ok_or("raw record without a path")?;
            let mut record = token.to_vec();
            record.push(0);
            record.extend_from_slice(path);
            record.push(0);
            let mut parsed = parse::raw_diff(&record)?;
            let current = commits.last_mut().ok_or("raw record before any commit")?;
            current.changes.append(&mut parsed);
        } else {
            return Err(format!(
                "unexpected log record {:?}",
                String::from_utf8_lossy(token)
            ));
        }
    }
    Ok(commits)
}

/// Parses `git worktree list --porcelain -z`: records separated by an empty
/// field, each field `key[ value]`.
pub fn parse_worktrees(out: &[u8]) -> Result<Vec<Worktree>, String> {
    let mut list = Vec::new();
    let mut current: Option<Worktree> = None;
    for field in out.split(|b| *b == 0) {
        if field.is_empty() {
            if let Some(wt) = current.take() {
                list.push(wt);
            }
            continue;
        }
        let (key, value) = match field.iter().position(|b| *b == b' ') {
            Some(i) => (&field[..i], Some(&field[i + 1..])),
            None => (field, None),
        };
        if key == b"worktree" {
            if let Some(wt) = current.take() {
                list.push(wt);
            }
            let path = value.ok_or("worktree record without a path")?;
            current = Some(Worktree {
                path: PathBuf::from(OsStr::from_bytes(path)),
                head: None,
                branch: None,
                detached: false,
                bare: false,
                locked: None,
                prunable: None,
            });
            continue;
        }
        let wt = current
            .as_mut()
            .ok_or_else(|| "field before the first worktree record".to_owned())?;
        let text = || value.map(|v| String::from_utf8_lossy(v).into_owned());
        match key {
            b"HEAD" => wt.head = text(),
            b"branch" => wt.branch = value.map(<[u8]>::to_vec),
            b"detached" => wt.detached = true,
            b"bare" => wt.bare = true,
            b"locked" => wt.locked = Some(text().unwrap_or_default()),
            b"prunable" => wt.prunable = Some(text().unwrap_or_default()),
            _ => {}
        }
    }
    if let Some(wt) = current.take() {
        list.push(wt);
    }
    Ok(list)
}
