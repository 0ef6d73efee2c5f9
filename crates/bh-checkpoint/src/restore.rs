//! Restoring files from a checkpoint. Every restore first takes a checkpoint of
//! the current state, so it can itself be undone.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;

use bh_git::parse;
use serde::Serialize;

use crate::error::{CheckpointError, Result};
use crate::meta::Checkpoint;
use crate::paths::{check_relative, fs_path};
use crate::snapshot::SnapshotRequest;
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
                "pre-restore",
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
            "--name-status",
            &safety.tree,
            &target.tree,
        ]))
        .run()?;
        let changes =
            parse::name_status(&diff.stdout).map_err(|detail| CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail,
            })?;
        self.check_conflicts(&safety, &changes)?;

        // Files the target checkpoint skipped (too large, unreadable, nested
        // repositories) are outside its scope: never delete them.
        let protected = self.skipped_in(&target.commit)?;
        let mut restored = Vec::new();
        let mut deleted: Vec<Vec<u8>> = Vec::new();
        let mut kept = Vec::new();
        for c in &changes {
            let shown = parse::display_path(&c.path);
            match (c.status, mode) {
                (b'D', RestoreMode::Exact) if !protected.iter().any(|p| is_under(&c.path, p)) => {
                    deleted.push(c.path.clone())
                }
                (b'D', _) => kept.push(shown),
                _ => restored.push(shown),
            }
        }
        if changes.iter().any(|c| c.status != b'D') {
            let mut pathspec = Vec::new();
            if paths.is_empty() {
                pathspec.extend_from_slice(b".\0");
            } else {
                for p in paths {
                    pathspec.extend_from_slice(p);
                    pathspec.push(0);
                }
            }
            shadow
                .cmd([
                    "restore",
                    "--quiet",
                    "--worktree",
                    "--overlay",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ])
                .arg(format!("--source={}", target.commit))
                .env("GIT_LITERAL_PATHSPECS", "1")
                .stdin(pathspec)
                .run()?;
        }
        for path in &deleted {
            self.remove_file(path)?;
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

    /// Deletes one file or symlink (never a directory) and then the parent
    /// directories it leaves empty, as git does.
    fn remove_file(&self, rel: &[u8]) -> Result<()> {
        let full = fs_path(&self.project, rel);
        match fs::symlink_metadata(&full) {
            Ok(m) if !m.is_dir() => fs::remove_file(&full)
                .map_err(|e| CheckpointError::io(format!("cannot delete {}", full.display()), e))?,
            _ => return Ok(()),
        }
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.project || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// Paths a checkpoint recorded as not captured.
    fn skipped_in(&self, commit: &str) -> Result<Vec<Vec<u8>>> {
        let body = self
            .shadow()
            .run(["log", "-1", "--no-walk", "--format=%B", commit])?;
        Ok(String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| l.starts_with("skipped ("))
            .filter_map(|l| l.split_once("): ").map(|(_, p)| unquote(p)))
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
    fn check_conflicts(&self, safety: &Checkpoint, changes: &[parse::NameStatus]) -> Result<()> {
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

/// Reverses [`bh_git::parse::display_path`].
fn unquote(shown: &str) -> Vec<u8> {
    let Some(inner) = shown.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return shown.as_bytes().to_vec();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0'..=b'7' if bytes.len() >= i + 4 => {
                    let oct = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("0");
                    out.push(u8::from_str_radix(oct, 8).unwrap_or(b'?'));
                    i += 4;
                    continue;
                }
                other => out.push(other),
            }
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
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
