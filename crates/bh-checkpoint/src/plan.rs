//! Rewind plans: put back exactly the paths a session's own calls changed.
//!
//! A session's calls after an entry are given as [`CallSpan`]s, each the
//! checkpoint before a call and the one after it (its after-record). A path
//! is the session's when a call's before and after trees differ there; it
//! goes back to its content before the *first* such call. Paths no call
//! changed are left alone, whoever changed them (listed as `left_alone` when
//! they differ from the target now). A session path whose current bytes (or
//! mode, or type) differ from what the session's *last* call left there was
//! changed by someone else since: a conflict, listed and refused unless
//! forced (all, or per path).
//!
//! Calls recorded before after-records existed have no after checkpoint:
//! the nearest later checkpoint of the store stands in for it, or, when
//! there is none, the current files (the plan says so in `approximate`).
//!
//! Planning reads only: the current files are hashed in-process and
//! `git status` runs without optional locks, so a dry run changes nothing in
//! the project or the store. Applying takes an undo point first (a
//! `pre-restore` checkpoint) and records what it changed, so that
//! [`Store::undo_rewind`] puts exactly those paths back.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;

use bh_git::parse::{self, StatusEntry};
use fs_err as fs;
use serde::{Deserialize, Serialize};

use crate::apply::Writer;
use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint, CheckpointKind, SnapshotRequest};
use crate::restore::RestoreOutcome;
use crate::store::{Store, write_atomic};

/// Candidate paths at most examined for `left_alone`.
const LEFT_ALONE_MAX: usize = 2000;

/// One mutating call: the checkpoint before it and, when recorded, the one
/// after it (full commit or 12-digit id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSpan {
    pub tool: String,
    /// The tool-call id, when known.
    pub call: Option<String>,
    pub before: String,
    pub after: Option<String>,
    /// The refs the call moved (from its after-record).
    pub refs: Vec<crate::RefMove>,
}

/// Which conflicts a rewind may overwrite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Force {
    #[default]
    None,
    All,
    /// Project-relative paths (a folder covers what is under it).
    Paths(Vec<Vec<u8>>),
}

impl Force {
    pub(crate) fn covers(&self, path: &[u8]) -> bool {
        match self {
            Force::None => false,
            Force::All => true,
            Force::Paths(list) => list.iter().any(|p| {
                path == p.as_slice() || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
            }),
        }
    }
}

/// A session path someone else changed since the session's last call.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PlanConflict {
    pub path: String,
    pub reason: String,
    /// Taken anyway (`--force`).
    pub forced: bool,
}

/// What a rewind does (or, for a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct RewindPlan {
    /// The checkpoint before the first call: what reverted paths go back to.
    pub target: Checkpoint,
    /// Calls attributed.
    pub calls: usize,
    /// Session paths written back to their content before the session.
    pub revert: Vec<String>,
    /// Session paths that did not exist before: removed.
    pub delete: Vec<String>,
    /// Session paths changed by someone else since (see [`PlanConflict`]).
    pub conflicts: Vec<PlanConflict>,
    /// Paths the session never touched that differ from the target now:
    /// left as they are.
    pub left_alone: Vec<String>,
    /// Session paths already as they were before the session.
    pub unchanged: Vec<String>,
    /// Set when some call had no after-record: how it was attributed.
    pub approximate: Option<String>,
    /// Refs the session's calls moved, put back (see `refs.rs`).
    pub refs: Vec<crate::RefRevert>,
    #[serde(skip)]
    actions: Vec<Action>,
}

impl RewindPlan {
    /// Conflicts not forced: the rewind is refused while any remain.
    pub fn refused(&self) -> Vec<&PlanConflict> {
        self.conflicts.iter().filter(|c| !c.forced).collect()
    }
}

#[derive(Debug, Clone)]
struct Action {
    path: Vec<u8>,
    /// `None`: delete.
    to: Option<State>,
}

mod build;
mod now;

use now::Now;

/// A git mode and object id.
type State = (u32, String);

/// A session path's state before its first change (`None`: missing) and
/// after its last (`None` inside: missing; outer `None`: whatever it is now).
type Span = (Option<State>, Option<Option<State>>);

/// The result of [`Store::rewind`].
#[derive(Debug, Clone, Serialize)]
pub struct RewindOutcome {
    pub plan: RewindPlan,
    pub dry_run: bool,
    /// The undo point taken before changing anything (`None` for a dry run
    /// or when there was nothing to change).
    pub undo: Option<Checkpoint>,
}

/// The result of [`Store::undo_rewind`].
#[derive(Debug, Clone, Serialize)]
pub struct UndoOutcome {
    /// The restore of the rewound paths from the undo point (`None` when the
    /// rewind changed no file).
    pub restore: Option<RestoreOutcome>,
    /// What the caller recorded with the rewind.
    pub context: serde_json::Value,
}

#[derive(Serialize, Deserialize)]
struct UndoRecord {
    undo: Option<String>,
    paths: Vec<String>,
    context: serde_json::Value,
    /// The refs the rewind moved (the undo moves them back).
    #[serde(default)]
    refs: Vec<crate::RefRevert>,
}

impl Store {
    /// Plans a rewind of `spans` (in call order) without changing anything.
    pub fn rewind_plan(&self, spans: &[CallSpan], force: &Force) -> Result<RewindPlan> {
        let _lock = self.lock()?;
        self.plan_locked(spans, force)
    }

    /// Plans and (unless `dry_run`) applies a rewind of `spans`: refused
    /// with [`CheckpointError::RewindConflict`] while unforced conflicts
    /// remain; otherwise an undo point first, then the files. `context` is
    /// kept with the undo record and handed back by [`Store::undo_rewind`].
    pub fn rewind(
        &self,
        spans: &[CallSpan],
        force: &Force,
        dry_run: bool,
        context: serde_json::Value,
    ) -> Result<RewindOutcome> {
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let plan = self.plan_locked(spans, force)?;
        if dry_run {
            return Ok(RewindOutcome {
                plan,
                dry_run,
                undo: None,
            });
        }
        let refused = plan.refused();
        if !refused.is_empty() {
            return Err(CheckpointError::RewindConflict {
                count: refused.len(),
                paths: refused
                    .iter()
                    .map(|c| format!("{} ({})", c.path, c.reason))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let undo = if plan.actions.is_empty() {
            None
        } else {
            let request = SnapshotRequest {
                tool: "rewind".into(),
                session: None,
                entry: None,
            };
            let undo = self
                .snapshot_locked(&request, CheckpointKind::PreRestore)?
                .checkpoint;
            self.apply_actions(&plan.actions)?;
            Some(undo)
        };
        self.apply_refs(&plan.refs, "bh: rewind")?;
        let record = UndoRecord {
            undo: undo.as_ref().map(|c| c.commit.clone()),
            paths: plan
                .actions
                .iter()
                .map(|a| parse::display_path(&a.path))
                .collect(),
            context,
            refs: plan.refs.clone(),
        };
        let path = self.root.join("rewind-undo.json");
        let body = serde_json::to_vec(&record).map_err(|e| {
            CheckpointError::io(format!("cannot encode {}", path.display()), e.into())
        })?;
        write_atomic(&path, &body)?;
        Ok(RewindOutcome {
            plan,
            dry_run,
            undo,
        })
    }

    /// Undoes the last [`Store::rewind`]: the paths it changed back from its
    /// undo point (exactly: a path it brought back is deleted again), and
    /// its context for the caller (e.g. the session's old leaf). `None` when
    /// there is no rewind to undo (none yet, or it was undone already).
    pub fn undo_rewind(&self) -> Result<Option<UndoOutcome>> {
        let path = self.root.join("rewind-undo.json");
        let body = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(CheckpointError::io(
                    format!("cannot read {}", path.display()),
                    e,
                ));
            }
        };
        let record: UndoRecord =
            serde_json::from_slice(&body).map_err(|e| CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail: format!("{}: {e}", path.display()),
            })?;
        let restore = match &record.undo {
            Some(undo) if !record.paths.is_empty() => {
                let paths: Vec<Vec<u8>> = record.paths.iter().map(|p| meta::unquote(p)).collect();
                Some(self.restore(undo, &paths, crate::RestoreMode::Exact)?)
            }
            _ => None,
        };
        self.apply_refs(&crate::refs::reversed(&record.refs), "bh: rewind undone")?;
        fs::remove_file(&path)
            .map_err(|e| CheckpointError::io(format!("cannot remove {}", path.display()), e))?;
        Ok(Some(UndoOutcome {
            restore,
            context: record.context,
        }))
    }

    fn apply_actions(&self, actions: &[Action]) -> Result<()> {
        let mut deletes: Vec<&[u8]> = actions
            .iter()
            .filter(|a| a.to.is_none())
            .map(|a| a.path.as_slice())
            .collect();
        deletes.sort_by(|a, b| b.cmp(a));
        let cat = self.shadow().cmd(["cat-file", "--batch"]).spawn_process()?;
        let mut writer = Writer::new(&self.project, cat)?;
        for path in deletes {
            if writer.delete(path)? {
                writer.prune_empty_parents(path);
            }
        }
        for a in actions {
            if let Some((mode, oid)) = &a.to {
                writer.write(&a.path, *mode, oid)?;
            }
        }
        Ok(())
    }

    /// Paths outside `session` that differ between `target` and now.
    fn left_alone(
        &self,
        target: &Checkpoint,
        list: &[Checkpoint],
        session: &HashMap<Vec<u8>, Span>,
    ) -> Result<Vec<String>> {
        let mut candidates: HashSet<Vec<u8>> = self.status_paths()?.into_iter().collect();
        if let Some(newest) = list.iter().max_by_key(|c| c.seq)
            && newest.tree != target.tree
        {
            candidates.extend(
                self.raw_changes(&target.tree, &newest.tree)?
                    .into_iter()
                    .map(|c| c.path),
            );
        }
        let mut candidates: Vec<Vec<u8>> = candidates
            .into_iter()
            .filter(|p| !session.contains_key(p))
            .collect();
        candidates.sort();
        candidates.truncate(LEFT_ALONE_MAX);
        let then = self.tree_states(&target.tree, &candidates)?;
        Ok(candidates
            .into_iter()
            .filter(|p| self.now_state(p) != Now::of(&then.get(p).cloned()))
            .map(|p| parse::display_path(&p))
            .collect())
    }

    fn raw_changes(&self, from: &str, to: &str) -> Result<Vec<parse::RawChange>> {
        let out = self
            .shadow()
            .cmd(["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to])
            .run()?;
        parse::raw_diff(&out.stdout).map_err(|detail| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail,
        })
    }

    /// Paths where the work tree differs from the shadow's index or last
    /// checkpoint, by a `git status` that writes nothing.
    fn status_paths(&self) -> Result<Vec<Vec<u8>>> {
        let entries = self.shadow_status(false)?;
        Ok(entries
            .into_iter()
            .filter_map(|e| match e {
                StatusEntry::Changed { path, .. }
                | StatusEntry::Renamed { path, .. }
                | StatusEntry::Unmerged { path }
                | StatusEntry::Untracked { path } => Some(path),
                StatusEntry::Ignored { .. } => None,
            })
            .filter(|p| !p.ends_with(b"/"))
            .collect())
    }

    /// Modes and blob ids of `paths` in `tree` (absent ones are missing).
    fn tree_states(&self, tree: &str, paths: &[Vec<u8>]) -> Result<HashMap<Vec<u8>, State>> {
        if paths.is_empty() {
            return Ok(HashMap::new());
        }
        let cmd = self
            .shadow()
            .cmd(["ls-tree", "-r", "-z", "--full-tree", tree])
            .env("GIT_LITERAL_PATHSPECS", "1")
            .arg("--");
        let out = paths
            .iter()
            .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)))
            .run()?;
        let entries = parse::ls_tree(&out.stdout).map_err(|detail| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail,
        })?;
        Ok(entries
            .into_iter()
            .map(|e| (e.path, (e.mode, e.oid)))
            .collect())
    }
}

/// Why `now` is not what the session's last call left (`left`).
fn why(now: &Now, left: &Option<State>) -> String {
    match (now, left) {
        (Now::Missing, Some(_)) => "deleted since the session's last change".into(),
        (Now::Folder, _) => "is a folder now".into(),
        (Now::Unreadable(e), _) => format!("cannot be read: {e}"),
        (Now::Entry(_), None) => "created again since the session deleted it".into(),
        (Now::Entry((m, _)), Some((lm, _))) if m != lm => {
            "its type or mode changed since the session's last change".into()
        }
        _ => "changed since the session's last change".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn force_covers_paths_and_folders() {
        let f = Force::Paths(vec![b"a".to_vec(), b"dir".to_vec()]);
        assert!(f.covers(b"a") && f.covers(b"dir/x") && !f.covers(b"ab") && !f.covers(b"b"));
        assert!(Force::All.covers(b"x") && !Force::None.covers(b"x"));
    }
}
