//! Differences between two checkpoints, one checkpoint against the one before
//! it (`show`), and the id resolution every command shares (`latest` skips
//! the undo points a restore takes).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

use crate::diff::{DiffEntry, DiffText};
use crate::error::{CheckpointError, Result};
use crate::meta::Checkpoint;
use crate::paths::check_relative;
use crate::store::Store;

/// Two checkpoints and what changed from the first to the second.
#[derive(Debug, Clone, Serialize)]
pub struct CompareOutcome {
    /// The older side (`None`: the empty tree, for the first checkpoint).
    pub from: Option<Checkpoint>,
    pub to: Checkpoint,
    pub entries: Vec<DiffEntry>,
    #[serde(skip)]
    pub text: Option<Vec<u8>>,
}

impl Store {
    /// Differences from checkpoint `from` to checkpoint `to`, limited to
    /// `paths` (project-relative; empty = everything). Reads only the store.
    pub fn compare(
        &self,
        from: &str,
        to: &str,
        paths: &[Vec<u8>],
        text: DiffText,
    ) -> Result<CompareOutcome> {
        for p in paths {
            check_relative(&self.project, p)?;
        }
        let _lock = self.lock()?;
        let from = self.resolve(from)?;
        let to = self.resolve(to)?;
        let (entries, text) = self.diff_trees(&from.tree, &to.tree, paths, text)?;
        Ok(CompareOutcome {
            from: Some(from),
            to,
            entries,
            text,
        })
    }

    /// One checkpoint and what changed since the checkpoint before it (by
    /// sequence number; the empty tree for the first).
    pub fn show(&self, id: &str, text: DiffText) -> Result<CompareOutcome> {
        let _lock = self.lock()?;
        let to = self.resolve(id)?;
        let from = self.list()?.into_iter().find(|c| c.seq < to.seq);
        let from_tree = match &from {
            Some(c) => c.tree.clone(),
            None => self
                .shadow()
                .run_line(["hash-object", "-t", "tree", "/dev/null"])?,
        };
        let (entries, text) = self.diff_trees(&from_tree, &to.tree, &[], text)?;
        Ok(CompareOutcome {
            from,
            to,
            entries,
            text,
        })
    }

    /// The changes from tree `a` to tree `b` (name-status with line counts)
    /// and, on request, the patch or diffstat text.
    pub(crate) fn diff_trees(
        &self,
        a: &str,
        b: &str,
        paths: &[Vec<u8>],
        patch: DiffText,
    ) -> Result<(Vec<DiffEntry>, Option<Vec<u8>>)> {
        let shadow = self.shadow();
        let pathspec = |cmd: bh_git::GitCommand| {
            let cmd = cmd.env("GIT_LITERAL_PATHSPECS", "1").arg("--");
            paths
                .iter()
                .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)))
        };
        let names = pathspec(shadow.cmd([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            a,
            b,
        ]))
        .run()?;
        let names = bh_git::parse::name_status(&names.stdout).map_err(|detail| {
            CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail,
            }
        })?;
        let nums =
            pathspec(shadow.cmd(["diff-tree", "-r", "-z", "--no-renames", "--numstat", a, b]))
                .run()?;
        let nums = bh_git::parse::numstat(&nums.stdout).unwrap_or_default();
        let entries = names
            .into_iter()
            .map(|n| {
                let stat = nums.iter().find(|s| s.path == n.path);
                DiffEntry {
                    status: (n.status as char).to_string(),
                    path: bh_git::parse::display_path(&n.path),
                    added: stat.and_then(|s| s.added),
                    deleted: stat.and_then(|s| s.deleted),
                }
            })
            .collect();
        let text = match patch {
            DiffText::None => None,
            DiffText::Patch | DiffText::Stat => {
                let flag = if patch == DiffText::Stat {
                    "--stat"
                } else {
                    "-p"
                };
                let out = pathspec(shadow.cmd([
                    "diff-tree",
                    "-r",
                    "--no-renames",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    "--no-commit-id",
                    flag,
                    a,
                    b,
                ]))
                .run()?;
                Some(out.stdout)
            }
        };
        Ok((entries, text))
    }
}
