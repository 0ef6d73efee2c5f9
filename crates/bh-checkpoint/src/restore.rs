//! Restoring files from a checkpoint. Every restore first takes a checkpoint of
//! the current state, so it can itself be undone; files are then written and
//! deleted only through descriptors beneath the project (`apply`).

use fs_err as fs;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;

use bh_git::parse;
use serde::Serialize;

use crate::apply::Writer;
use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint};
use crate::meta::{CheckpointKind, SnapshotRequest};
use crate::paths::{check_relative, fs_path};
use crate::store::Store;

/// How a restore treats files created since the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RestoreMode {
    /// Re-create and overwrite what the checkpoint had; keep newer files.
    Additive,
    /// Also delete files created since that the checkpoint would have captured
    /// (never ignored or skipped files).
    Exact,
}

#[derive(Debug, Clone, Serialize)]
pub struct RestoreOutcome {
    pub checkpoint: Checkpoint,
    /// The checkpoint of the state just before the restore (undo point).
    pub safety: Checkpoint,
    pub mode: RestoreMode,
    /// Paths written from the checkpoint.
    pub restored: Vec<String>,
    /// Paths deleted (exact mode only).
    pub deleted: Vec<String>,
    /// Paths created since the checkpoint and left in place (additive mode).
    pub kept: Vec<String>,
}

impl Store {
    /// Restores `paths` (project-relative; empty = the whole project) from the
    /// checkpoint `id`.
    pub fn restore(
        &self,
        id: &str,
        paths: &[Vec<u8>],
        mode: RestoreMode,
    ) -> Result<RestoreOutcome> {
        for p in paths {
            check_relative(&self.project, p)?;
        }
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let target = self.resolve(id)?;
        let safety = self
            .snapshot_locked(
                &SnapshotRequest {
                    tool: "restore".into(),
                    session: None,
                    entry: None,
                },
                CheckpointKind::PreRestore,
            )?
            .checkpoint;
        let shadow = self.shadow();
        let with_paths = |cmd: bh_git::GitCommand| {
            let cmd = cmd.env("GIT_LITERAL_PATHSPECS", "1").arg("--");
            paths
                .iter()
                .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)))
        };

        // Every named path must exist in the checkpoint (or, for an exact
        // restore, at least now, so that it gets deleted).
        if !paths.is_empty() {
            let in_target = self.files_under(&target.tree, paths)?;
            let in_now = if mode == RestoreMode::Exact {
                self.files_under(&safety.tree, paths)?
            } else {
                Vec::new()
            };
            for p in paths {
                let covered = |files: &[Vec<u8>]| files.iter().any(|f| is_under(f, p));
                if !covered(&in_target) && !covered(&in_now) {
                    return Err(CheckpointError::PathNotInCheckpoint {
                        path: parse::display_path(p),
                        id: target.id.clone(),
                    });
                }
            }
        }

        let diff = with_paths(shadow.cmd([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--raw",
            &safety.tree,
            &target.tree,
        ]))
        .run()?;
        let changes = parse::raw_diff(&diff.stdout).map_err(|detail| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail,
        })?;
        self.check_conflicts(&safety, &changes)?;

        // Files the target checkpoint skipped (too large, unreadable, nested
        // repositories) are outside its scope: never delete them.
        let protected = self.skipped_in(&target.commit)?;
        let writes: Vec<&parse::RawChange> = changes
            .iter()
            .filter(|c| c.status != b'D' && c.new_mode != 0o160000)
            .collect();
        let mut restored = Vec::new();
        let mut deleted: Vec<Vec<u8>> = Vec::new();
        let mut kept = Vec::new();
        // The written paths and every folder on their way, to find what is in
        // the way in one pass.
        let written: HashSet<&[u8]> = writes.iter().map(|w| w.path.as_slice()).collect();
        let folders: HashSet<&[u8]> = writes
            .iter()
            .flat_map(|w| {
                w.path
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .map(|(i, _)| &w.path[..i])
            })
            .collect();
        for c in &changes {
            let in_the_way = || {
                folders.contains(c.path.as_slice())
                    || c.path
                        .iter()
                        .enumerate()
                        .any(|(i, b)| *b == b'/' && written.contains(&c.path[..i]))
            };
            match (c.status, mode) {
                (b'D', RestoreMode::Exact) if !protected.iter().any(|p| is_under(&c.path, p)) => {
                    deleted.push(c.path.clone())
                }
                // A file where a folder comes back (or inside a folder that
                // becomes a file): the safety checkpoint holds it.
                (b'D', _) if in_the_way() => deleted.push(c.path.clone()),
                (b'D', _) => kept.push(parse::display_path(&c.path)),
                _ => restored.push(parse::display_path(&c.path)),
            }
        }
        // Restoring named paths: a file or symlink (which the safety checkpoint
        // holds) where one of their folders comes back is in the way too.
        if !paths.is_empty() {
            for blocker in self.non_folders_among(&safety.tree, &writes)? {
                if !deleted.contains(&blocker) {
                    deleted.push(blocker);
                }
            }
        }
        if !deleted.is_empty() || !writes.is_empty() {
            let cat = shadow.cmd(["cat-file", "--batch"]).spawn_process()?;
            let mut writer = Writer::new(&self.project, cat)?;
            // Deepest first, so that emptied folders can go.
            deleted.sort_by(|a, b| b.cmp(a));
            for path in &deleted {
                if writer.delete(path)? {
                    writer.prune_empty_parents(path);
                }
            }
            for w in &writes {
                writer.write(&w.path, w.new_mode, &w.new_oid)?;
            }
        }
        let deleted = deleted.iter().map(|p| parse::display_path(p)).collect();
        Ok(RestoreOutcome {
            checkpoint: target,
            safety,
            mode,
            restored,
            deleted,
            kept,
        })
    }

    /// Paths a checkpoint recorded as not captured.
    fn skipped_in(&self, commit: &str) -> Result<Vec<Vec<u8>>> {
        let body = self
            .shadow()
            .run(["log", "-1", "--no-walk", "--format=%B", commit])?;
        Ok(meta::skipped_paths(&String::from_utf8_lossy(&body)))
    }

    /// The folders on the paths of `writes` that `tree` holds as something
    /// other than a folder.
    fn non_folders_among(&self, tree: &str, writes: &[&parse::RawChange]) -> Result<Vec<Vec<u8>>> {
        let mut prefixes: Vec<&[u8]> = Vec::new();
        for w in writes {
            for (i, b) in w.path.iter().enumerate() {
                if *b == b'/' {
                    prefixes.push(&w.path[..i]);
                }
            }
        }
        prefixes.sort();
        prefixes.dedup();
        if prefixes.is_empty() {
            return Ok(Vec::new());
        }
        let cmd = self
            .shadow()
            .cmd(["ls-tree", "-z", "--full-tree", tree])
            .env("GIT_LITERAL_PATHSPECS", "1")
            .arg("--");
        let out = prefixes
            .iter()
            .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)))
            .run()?;
        let entries = parse::ls_tree(&out.stdout).map_err(|detail| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail,
        })?;
        Ok(entries
            .into_iter()
            .filter(|e| e.mode != 0o040000 && prefixes.contains(&e.path.as_slice()))
            .map(|e| e.path)
            .collect())
    }

    /// Files of `tree` at or under any of `paths`.
    fn files_under(&self, tree: &str, paths: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let cmd = self
            .shadow()
            .cmd(["ls-tree", "-r", "-z", "--name-only", "--full-tree", tree])
            .env("GIT_LITERAL_PATHSPECS", "1")
            .arg("--");
        let cmd = paths
            .iter()
            .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)));
        let out = cmd.run()?;
        Ok(parse::split_z(&out.stdout).map(<[u8]>::to_vec).collect())
    }

    /// Refuses a restore that would destroy something no checkpoint holds:
    /// an ignored or skipped file in the way of a file the checkpoint brings
    /// back, or such files inside a directory that must become a file.
    fn check_conflicts(&self, safety: &Checkpoint, changes: &[parse::RawChange]) -> Result<()> {
        let mut suspects: Vec<Vec<u8>> = Vec::new();
        let mut dirs: Vec<Vec<u8>> = Vec::new();
        for c in changes.iter().filter(|c| c.status == b'A') {
            // Ancestors that exist as something other than a directory.
            let mut end = 0;
            while let Some(pos) = c.path[end..].iter().position(|b| *b == b'/') {
                let prefix = &c.path[..end + pos];
                match fs::symlink_metadata(fs_path(&self.project, prefix)) {
                    Ok(m) if !m.is_dir() => suspects.push(prefix.to_vec()),
                    _ => {}
                }
                end += pos + 1;
            }
            match fs::symlink_metadata(fs_path(&self.project, &c.path)) {
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
                Ok(m) if m.is_dir() => dirs.push(c.path.clone()),
                _ => suspects.push(c.path.clone()),
            }
        }
        if suspects.is_empty() && dirs.is_empty() {
            return Ok(());
        }
        let mut query = suspects.clone();
        query.extend(dirs.iter().cloned());
        let saved: HashSet<Vec<u8>> = self
            .files_under(&safety.tree, &query)?
            .into_iter()
            .collect();
        for s in &suspects {
            if !saved.contains(s) {
                return Err(CheckpointError::DirectoryConflict {
                    path: parse::display_path(s),
                    examples: parse::display_path(s),
                });
            }
        }
        for d in &dirs {
            let mut unsaved = Vec::new();
            walk_files(&self.project, d, &mut |f| {
                if !saved.contains(f) && unsaved.len() < 5 {
                    unsaved.push(parse::display_path(f));
                }
            });
            if !unsaved.is_empty() {
                return Err(CheckpointError::DirectoryConflict {
                    path: parse::display_path(d),
                    examples: unsaved.join(", "),
                });
            }
        }
        Ok(())
    }
}

fn is_under(file: &[u8], path: &[u8]) -> bool {
    file == path || (file.starts_with(path) && file.get(path.len()) == Some(&b'/'))
}

/// Calls `f` with the project-relative path of every non-directory under `rel`.
fn walk_files(project: &std::path::Path, rel: &[u8], f: &mut dyn FnMut(&[u8])) {
    let Ok(entries) = fs::read_dir(fs_path(project, rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let mut child = rel.to_vec();
        child.push(b'/');
        child.extend_from_slice(entry.file_name().as_bytes());
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk_files(project, &child, f),
            _ => f(&child),
        }
    }
}
