//! One staging pass of a snapshot: `git status` of the shadow index
//! ([`Store::shadow_status`]), each path sorted into what to stage, remove
//! or skip ([`Store::sort_entries`], [`Store::verdict`]), then the index
//! updated ([`Store::apply`]).

use fs_err as fs;
use fs_err::File;
use std::io::ErrorKind;

use bh_git::parse::{self, StatusEntry};

use super::{OnProgress, PREHASH_MIN_FILES, Pass, SnapshotProgress, human_size, nul_join};
use crate::error::{CheckpointError, Result};
use crate::meta::Skipped;
use crate::paths::fs_path;
use crate::store::Store;

/// What a pass does with one path git reported.
enum Verdict {
    /// Staged as it is now (content, link, or gone from under a folder);
    /// `prehash` is the size of a new regular file worth hashing ahead.
    Update { prehash: Option<u64> },
    /// Removed from the index (a folder now stands where it was).
    Remove,
    /// Not captured, for this reason (and removed from the index if tracked).
    Skip(String),
}

/// The paths of one status, sorted for `update-index`.
struct Sorted<'a> {
    update: Vec<&'a [u8]>,
    force_remove: Vec<&'a [u8]>,
    prehash: Vec<(&'a [u8], u64)>,
    skipped: Vec<Skipped>,
    /// Changes against HEAD, exact only while the index matched HEAD.
    changes: Option<Vec<(u8, Vec<u8>)>>,
}

impl Store {
    /// One pass of `status` → `update-index`: what was not captured, and
    /// what changed against the base when status proves it.
    pub(super) fn stage(&self, progress: OnProgress<'_>) -> Result<Pass> {
        // Optimistic: do not open every file first. If git then meets a file it
        // cannot read, look again, opening each candidate, and skip those.
        match self.stage_pass(false, progress) {
            Err(CheckpointError::Git(err)) if err.stderr().contains("Unable to process path") => {
                self.stage_pass(true, progress)
            }
            other => other,
        }
    }

    fn stage_pass(&self, check_readable: bool, progress: OnProgress<'_>) -> Result<Pass> {
        progress(SnapshotProgress::Scanning);
        let entries = self.shadow_status(true)?;
        let sorted = self.sort_entries(&entries, check_readable);
        self.apply(sorted, progress)
    }

    /// The shadow index's status against the project, every untracked file
    /// listed, no renames, submodules left out. `refresh_index: false` runs
    /// it with `GIT_OPTIONAL_LOCKS=0`, writing nothing (a rewind plan).
    pub(crate) fn shadow_status(&self, refresh_index: bool) -> Result<Vec<StatusEntry>> {
        let mut cmd = self.shadow().cmd([
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        ]);
        if !refresh_index {
            cmd = cmd.env("GIT_OPTIONAL_LOCKS", "0");
        }
        let status = cmd.run()?;
        parse::status_v2(&status.stdout).map_err(|detail| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail: format!("cannot parse git status: {detail}"),
        })
    }

    /// Each reported path sorted by its [`Verdict`]; a nested repository is
    /// skipped, and the change list is kept while status proves it exact.
    fn sort_entries<'a>(&self, entries: &'a [StatusEntry], check_readable: bool) -> Sorted<'a> {
        let mut out = Sorted {
            update: Vec::new(),
            force_remove: Vec::new(),
            prehash: Vec::new(),
            skipped: Vec::new(),
            changes: Some(Vec::new()),
        };
        for entry in entries {
            let (path, tracked, change) = match entry {
                StatusEntry::Changed { x: b'.', y, path } if *y != b'.' => (path, true, *y),
                StatusEntry::Changed { y, path, .. } | StatusEntry::Renamed { y, path, .. } => {
                    out.changes = None;
                    if *y == b'.' {
                        continue;
                    }
                    (path, true, *y)
                }
                StatusEntry::Unmerged { path } => {
                    out.changes = None;
                    (path, true, b'M')
                }
                StatusEntry::Untracked { path } => (path, false, b'A'),
                StatusEntry::Ignored { .. } => continue,
            };
            if let Some(dir) = path.strip_suffix(b"/") {
                out.skipped.push(Skipped {
                    path: parse::display_path(dir),
                    reason: "nested repository".into(),
                });
                continue;
            }
            // git saw it gone (possibly "beyond a symbolic link", which
            // update-index refuses): drop it without looking again.
            let verdict = if change == b'D' {
                Verdict::Remove
            } else {
                self.verdict(path, tracked, check_readable)
            };
            let recorded = match verdict {
                Verdict::Update { prehash } => {
                    if let Some(size) = prehash {
                        out.prehash.push((path, size));
                    }
                    out.update.push(path);
                    Some(change)
                }
                Verdict::Remove => {
                    out.force_remove.push(path);
                    Some(b'D')
                }
                Verdict::Skip(reason) => {
                    out.skipped.push(Skipped {
                        path: parse::display_path(path),
                        reason,
                    });
                    tracked.then(|| {
                        out.force_remove.push(path);
                        b'D'
                    })
                }
            };
            if let (Some(list), Some(kind)) = (out.changes.as_mut(), recorded) {
                list.push((kind, path.clone()));
            }
        }
        if let Some(list) = out.changes.as_mut() {
            list.sort_by(|a, b| a.1.cmp(&b.1));
        }
        out
    }

    /// What to do with `path` as it is on disk now.
    fn verdict(&self, path: &[u8], tracked: bool, check_readable: bool) -> Verdict {
        let full = fs_path(&self.project, path);
        match fs::symlink_metadata(&full) {
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Verdict::Update { prehash: None }
            }
            Err(e) => Verdict::Skip(format!("cannot inspect: {e}")),
            Ok(meta) if meta.is_symlink() => Verdict::Update { prehash: None },
            Ok(meta) if meta.is_dir() => Verdict::Remove,
            Ok(meta) if meta.is_file() => {
                if meta.len() > self.max_file_size {
                    return Verdict::Skip(format!(
                        "larger than the {} size cap",
                        human_size(self.max_file_size)
                    ));
                }
                if check_readable && let Err(e) = File::open(&full) {
                    return Verdict::Skip(format!("unreadable: {e}"));
                }
                Verdict::Update {
                    prehash: (!tracked).then_some(meta.len()),
                }
            }
            Ok(_) => Verdict::Skip("not a regular file, directory or symlink".into()),
        }
    }

    /// The index updated: removals first, then (hashed ahead when many new
    /// files) every path to stage.
    fn apply(&self, sorted: Sorted<'_>, progress: OnProgress<'_>) -> Result<Pass> {
        let shadow = self.shadow();
        if !sorted.force_remove.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--force-remove", "--stdin"])
                .stdin(nul_join(&sorted.force_remove))
                .run()?;
        }
        progress(SnapshotProgress::Found {
            files: sorted.update.len(),
            bytes: sorted.prehash.iter().map(|(_, size)| size).sum(),
        });
        if sorted.prehash.len() >= PREHASH_MIN_FILES {
            self.prehash(&sorted.prehash, progress);
        }
        if !sorted.update.is_empty() {
            progress(SnapshotProgress::Indexing {
                files: sorted.update.len(),
            });
            shadow
                .cmd([
                    "update-index",
                    "-z",
                    "--add",
                    "--remove",
                    "--replace",
                    "--stdin",
                ])
                .stdin(nul_join(&sorted.update))
                .run()?;
        }
        Ok(Pass {
            skipped: sorted.skipped,
            changes: sorted.changes,
        })
    }
}
