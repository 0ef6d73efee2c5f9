//! Differences between a checkpoint and the current working tree.

use serde::Serialize;

use crate::error::Result;
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
        let (entries, text) = self.diff_trees(&target.tree, &current.tree, paths, patch)?;
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
