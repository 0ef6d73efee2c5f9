//! Staging through a private index file, so the user's index is never read
//! or written: `GIT_INDEX_FILE` on every command, optional locks allowed (the
//! file is ours alone). The file is removed when the [`TempIndex`] is dropped.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::runner::{GitCommand, GitError, Repo};

/// A private index of a repository's work tree.
pub struct TempIndex<'a> {
    repo: &'a Repo,
    path: PathBuf,
}

impl Repo {
    /// A fresh private index at `path` (a leftover file there is replaced).
    pub fn temp_index(&self, path: impl Into<PathBuf>) -> TempIndex<'_> {
        let path = path.into();
        let _ = fs_err::remove_file(&path);
        TempIndex { repo: self, path }
    }
}

impl TempIndex<'_> {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A command that uses this index.
    pub fn cmd<I, S>(&self, args: I) -> GitCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.repo
            .cmd(args)
            .env("GIT_INDEX_FILE", self.path.as_os_str())
            .optional_locks(true)
    }

    /// Loads `tree_ish` into the index (`git read-tree`).
    pub fn read_tree(&self, tree_ish: &str) -> Result<(), GitError> {
        self.cmd(["read-tree", tree_ish]).run().map(|_| ())
    }

    /// Stages the whole work tree as `git add -A` would (ignored files stay out).
    pub fn add_all(&self) -> Result<(), GitError> {
        self.cmd(["add", "-A", "--", "."]).run().map(|_| ())
    }

    /// Writes the index as a tree and returns its id.
    pub fn write_tree(&self) -> Result<String, GitError> {
        let out = self.cmd(["write-tree"]).run()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The work tree's content as a tree: `base` plus every change in the
    /// work tree (additions, edits, deletions).
    pub fn stage_work_tree(&self, base: &str) -> Result<String, GitError> {
        self.read_tree(base)?;
        self.add_all()?;
        self.write_tree()
    }
}

impl Drop for TempIndex<'_> {
    fn drop(&mut self) {
        let _ = fs_err::remove_file(&self.path);
    }
}
