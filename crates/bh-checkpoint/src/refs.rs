//! Ref moves in rewinds: the refs a session's calls moved (bash's commits
//! from the sandbox, carried over by bh-tools' git broker and journalled in
//! the call's after-record) go back with its files.
//!
//! As with paths: a ref goes back to its value before the first call that
//! moved it; one whose current value is not what the session's last move
//! left was moved by someone else since — a conflict, refused unless forced
//! (`--force REF`). `HEAD` moves are symbolic (`ref: refs/heads/x`) and go
//! first. When the index is exactly `HEAD`'s commit before the moves
//! (nothing staged since), it follows `HEAD` to its new commit, so `git
//! status` and the rewound files agree; otherwise the index is left as it
//! is. The undo puts every ref back the same way.

use serde::{Deserialize, Serialize};

use bh_git::{Repo, Scope};

use crate::error::{CheckpointError, Result};
use crate::store::Store;

/// A ref someone else moved since the session's last move of it.
pub(crate) struct RefConflict {
    pub name: String,
    pub reason: String,
    pub forced: bool,
}

/// One ref a call moved: its value before and after (`None`: absent; an
/// object id, or `ref: <name>` for `HEAD`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefMove {
    pub name: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// A ref a rewind puts back: from `from` (what the session's last move
/// left, and what it is now) to `to`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefRevert {
    pub name: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

impl Store {
    fn user_repo(&self) -> Repo {
        self.runner.repo(&self.project, Scope::User)
    }

    /// A ref's value now (`ref: X` for a symbolic `HEAD`).
    fn ref_now(&self, name: &str) -> Option<String> {
        let repo = self.user_repo();
        if name == "HEAD"
            && let Ok(target) = repo.run_line(["symbolic-ref", "-q", "HEAD"])
        {
            return Some(format!("ref: {target}"));
        }
        repo.run_line(["rev-parse", "--verify", "-q", "--end-of-options", name])
            .ok()
    }

    /// The refs `moves` (in call order) moved, planned back; a conflict is
    /// taken when `forced` covers its name.
    pub(crate) fn plan_refs<'m>(
        &self,
        moves: impl Iterator<Item = &'m RefMove>,
        forced: &dyn Fn(&[u8]) -> bool,
        conflicts: &mut Vec<RefConflict>,
    ) -> Vec<RefRevert> {
        let mut order: Vec<RefRevert> = Vec::new();
        for m in moves {
            match order.iter_mut().find(|r| r.name == m.name) {
                Some(r) => r.from = m.after.clone(),
                None => order.push(RefRevert {
                    name: m.name.clone(),
                    from: m.after.clone(),
                    to: m.before.clone(),
                }),
            }
        }
        let mut out = Vec::new();
        for r in order {
            let now = self.ref_now(&r.name);
            if now == r.to {
                continue;
            }
            if now != r.from {
                let forced = forced(r.name.as_bytes());
                conflicts.push(RefConflict {
                    name: r.name.clone(),
                    reason: format!(
                        "moved since the session's last call (now {}, the session left {})",
                        short(now.as_deref()),
                        short(r.from.as_deref())
                    ),
                    forced,
                });
                if !forced {
                    continue;
                }
                out.push(RefRevert { from: now, ..r });
                continue;
            }
            out.push(r);
        }
        // HEAD first: a branch it leaves may then be deleted.
        out.sort_by_key(|r| r.name != "HEAD");
        out
    }

    /// Moves each ref from `from` to `to` (an undo swaps them). When the
    /// index was exactly `HEAD`'s commit before, it follows `HEAD` to its
    /// new commit.
    pub(crate) fn apply_refs(&self, reverts: &[RefRevert], why: &str) -> Result<()> {
        if reverts.is_empty() {
            return Ok(());
        }
        let repo = self.user_repo();
        let head_commit = || repo.run_line(["rev-parse", "--verify", "-q", "HEAD"]).ok();
        let old_head = head_commit();
        let clean_index = old_head.as_deref().is_some_and(|h| {
            repo.cmd(["diff-index", "--cached", "--quiet", h, "--"])
                .run()
                .is_ok()
        });
        for r in reverts {
            let failed = |e: bh_git::GitError| CheckpointError::RefMove {
                name: r.name.clone(),
                detail: e.stderr().trim().to_owned(),
            };
            if r.name == "HEAD" {
                if let Some(target) = r.to.as_deref().and_then(|t| t.strip_prefix("ref: ")) {
                    repo.run(["symbolic-ref", "-m", why, "HEAD", target])
                        .map_err(failed)?;
                }
                continue;
            }
            let old = r.from.clone().unwrap_or_default();
            match &r.to {
                Some(to) => repo.run(["update-ref", "-m", why, &r.name, to, &old]),
                None => repo.run(["update-ref", "-m", why, "-d", &r.name, &old]),
            }
            .map_err(failed)?;
        }
        let new_head = head_commit();
        if clean_index && new_head != old_head {
            let tree = new_head.as_deref().unwrap_or("--empty");
            repo.cmd(["read-tree", tree])
                .optional_locks(true)
                .run()
                .map_err(|e| CheckpointError::RefMove {
                    name: "the index".into(),
                    detail: e.stderr().trim().to_owned(),
                })?;
            let _ = repo
                .cmd(["update-index", "-q", "--refresh"])
                .ok_codes(&[0, 1])
                .run();
        }
        Ok(())
    }
}

fn short(v: Option<&str>) -> String {
    match v {
        None => "nothing".to_owned(),
        Some(s) if s.starts_with("ref: ") => s.to_owned(),
        Some(s) => s.chars().take(12).collect(),
    }
}

/// The reverse of `reverts` (what the undo applies), in reverse order.
pub(crate) fn reversed(reverts: &[RefRevert]) -> Vec<RefRevert> {
    let mut out: Vec<RefRevert> = reverts
        .iter()
        .rev()
        .map(|r| RefRevert {
            name: r.name.clone(),
            from: r.to.clone(),
            to: r.from.clone(),
        })
        .collect();
    out.sort_by_key(|r| r.name == "HEAD");
    out
}
