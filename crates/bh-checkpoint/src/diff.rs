//! Differences between a checkpoint and the current working tree.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use serde::Serialize;

use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint};
use crate::paths::check_relative;
use crate::store::Store;

impl Store {
    /// Differences between a checkpoint and the current working tree, limited
    /// to `paths` (project-relative; empty = everything).
    pub fn diff(&self, id: &str, paths: &[Vec<u8>], patch: DiffText) -> Result<DiffOutcome> {
        for p in paths {
            check_relative(&self.project, p)?;
        }
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let target = self.resolve(id)?;
        let current = self.stage_current()?;
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
            &target.tree,
            &current.tree,
        ]))
        .run()?;
        let names = bh_git::parse::name_status(&names.stdout).map_err(|detail| {
            CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail,
            }
        })?;
        let nums = pathspec(shadow.cmd([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--numstat",
            &target.tree,
            &current.tree,
        ]))
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
                    &target.tree,
                    &current.tree,
                ]))
                .run()?;
                Some(out.stdout)
            }
        };
        Ok(DiffOutcome {
            checkpoint: target,
            current_tree: current.tree,
            skipped: current.skipped,
            entries,
            text,
        })
    }
}

/// Which text `diff` renders besides the structured entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffText {
    None,
    Patch,
    Stat,
}

/// One changed path between a checkpoint and the current tree.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DiffEntry {
    /// `A` (exists now, not in the checkpoint), `D` (in the checkpoint, gone
    /// now), `M` (content or mode changed), `T` (type changed).
    pub status: String,
    pub path: String,
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

impl DiffEntry {
    /// A change without line counts (`status` as git prints it).
    pub(crate) fn name_only(status: u8, path: &[u8]) -> DiffEntry {
        DiffEntry {
            status: (status as char).to_string(),
            path: bh_git::parse::display_path(path),
            added: None,
            deleted: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffOutcome {
    pub checkpoint: Checkpoint,
    pub current_tree: String,
    pub skipped: Vec<meta::Skipped>,
    pub entries: Vec<DiffEntry>,
    #[serde(skip)]
    pub text: Option<Vec<u8>>,
}
