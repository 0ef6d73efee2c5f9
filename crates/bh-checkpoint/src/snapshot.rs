//! Taking a snapshot: stage the work tree into the shadow index, write a tree,
//! and commit it unless nothing changed since the last checkpoint.

mod stage;

use fs_err as fs;

use serde::Serialize;

use crate::diff::DiffEntry;
use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint, CheckpointKind, NewMeta, Skipped, SnapshotRequest};
use crate::store::{EMPTY_TREE, Store, now_ms, trim_line, write_atomic};

/// Untracked files at which a snapshot pre-hashes new files in parallel.
const PREHASH_MIN_FILES: usize = 512;

/// Where a snapshot is, for a progress display (a first snapshot of a large
/// tree takes a while: every file is hashed once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotProgress {
    /// Seeding the shadow from the user's own index.
    Seeding,
    /// Asking git which files changed.
    Scanning,
    /// Paths found to record (new, changed or deleted), and the size of the
    /// new files among them.
    Found { files: usize, bytes: u64 },
    /// New files hashed so far, of `total`.
    Hashing { done: usize, total: usize },
    /// Recording `files` paths in the shadow index.
    Indexing { files: usize },
    /// Writing the tree and the checkpoint commit.
    Committing,
}

/// The callback a snapshot reports its progress to.
pub type OnProgress<'a> = &'a (dyn Fn(SnapshotProgress) + Sync);

/// A progress callback that ignores everything.
pub(crate) fn no_progress(_: SnapshotProgress) {}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotOutcome {
    pub checkpoint: Checkpoint,
    /// `false` when nothing changed and the last checkpoint was reused.
    pub created: bool,
    /// Paths changed since the previous checkpoint (`A`/`M`/`D`/`T`).
    pub changed: Vec<DiffEntry>,
    /// Paths not captured, and why.
    pub skipped: Vec<Skipped>,
    /// The shadow was seeded from the user's own index and objects.
    pub seeded: bool,
}

/// The work tree staged into the shadow index.
pub(crate) struct Staged {
    pub tree: String,
    pub skipped: Vec<Skipped>,
    pub seeded: bool,
    /// What changed relative to the shadow's base (`HEAD`), when `git status`
    /// alone proves it: the index matched `HEAD` before staging.
    pub changes: Option<Vec<(u8, Vec<u8>)>>,
}

/// The result of one `status` → `update-index` pass.
struct Pass {
    skipped: Vec<Skipped>,
    changes: Option<Vec<(u8, Vec<u8>)>>,
}

impl Store {
    /// Snapshots the project. Holds the store lock for the whole operation.
    pub fn snapshot(&self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        self.snapshot_locked(request, CheckpointKind::Snapshot)
    }

    /// The state a mutating call left, as an after-record checkpoint (kind
    /// `after`; reused when the call changed nothing).
    pub fn snapshot_after(&self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        self.snapshot_locked(request, CheckpointKind::After)
    }

    /// [`snapshot`](Self::snapshot), reporting its phases to `progress`.
    pub fn snapshot_with_progress(
        &self,
        request: &SnapshotRequest,
        progress: OnProgress<'_>,
    ) -> Result<SnapshotOutcome> {
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        self.snapshot_locked_with(request, CheckpointKind::Snapshot, progress)
    }

    pub(crate) fn snapshot_locked(
        &self,
        request: &SnapshotRequest,
        kind: CheckpointKind,
    ) -> Result<SnapshotOutcome> {
        match self.observer.get() {
            Some(observer) => self.snapshot_locked_with(request, kind, &*observer),
            None => self.snapshot_locked_with(request, kind, &no_progress),
        }
    }

    fn snapshot_locked_with(
        &self,
        request: &SnapshotRequest,
        kind: CheckpointKind,
        progress: OnProgress<'_>,
    ) -> Result<SnapshotOutcome> {
        // Reading the last checkpoint is independent of staging: overlap them.
        let (staged, last) = std::thread::scope(|scope| {
            let last = scope.spawn(|| self.last_checkpoint());
            let staged = self.stage_current_with(progress);
            let last = last.join().unwrap_or_else(|_| {
                Err(CheckpointError::Corrupt {
                    store: self.dir.clone(),
                    detail: "reading the last checkpoint panicked".into(),
                })
            });
            (staged, last)
        });
        let (staged, last) = (staged?, last?);
        progress(SnapshotProgress::Committing);
        let shadow = self.shadow();
        if let Some(prev) = &last
            && prev.tree == staged.tree
            && kind.may_reuse(&prev.kind)
        {
            return Ok(SnapshotOutcome {
                checkpoint: prev.clone(),
                created: false,
                changed: Vec::new(),
                skipped: staged.skipped,
                seeded: staged.seeded,
            });
        }
        // The shadow's HEAD is the last checkpoint (refs/heads/bh-base moves with
        // refs/bh/last; both are absent before the first one), so status
        // already said what changed — unless the index had drifted from HEAD
        // (after a seed, a diff or a prune), which status shows in column X.
        let changed = match staged.changes {
            Some(changes) => changes
                .into_iter()
                .map(|(status, path)| DiffEntry::name_only(status, &path))
                .collect(),
            None => {
                let base_tree = last.as_ref().map_or(EMPTY_TREE, |c| c.tree.as_str());
                self.changed_paths(base_tree, &staged.tree)?
            }
        };
        let time_ms = now_ms();
        let new = NewMeta::for_request(
            request,
            last.as_ref().map_or(1, |c| c.seq + 1),
            time_ms,
            changed.len() as u64,
            &staged.skipped,
            kind,
        );
        let message = meta::message(&new);
        let date = format!("@{} +0000", time_ms / 1000);
        let commit = shadow
            .cmd(["commit-tree", &staged.tree, "-F", "-"])
            .env("GIT_AUTHOR_NAME", "Better Harness")
            .env("GIT_AUTHOR_EMAIL", "checkpoints@better-harness.invalid")
            .env("GIT_COMMITTER_NAME", "Better Harness")
            .env("GIT_COMMITTER_EMAIL", "checkpoints@better-harness.invalid")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .stdin(message.into_bytes())
            .run()?;
        let commit = String::from_utf8_lossy(trim_line(&commit.stdout)).into_owned();
        let old_last = last
            .as_ref()
            .map_or(bh_git::NULL_OID, |c| c.commit.as_str());
        let tx = format!(
            "start\ncreate refs/bh/checkpoints/{commit} {commit}\nupdate refs/bh/last {commit} {old_last}\nupdate refs/heads/bh-base {commit}\ncommit\n"
        );
        shadow
            .cmd(["update-ref", "--stdin"])
            .stdin(tx.into_bytes())
            .run()?;
        let checkpoint = meta::from_new(&commit, &staged.tree, &new).ok_or_else(|| {
            CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail: format!("git printed an odd commit id {commit:?}"),
            }
        })?;
        Ok(SnapshotOutcome {
            checkpoint,
            created: true,
            changed,
            skipped: staged.skipped,
            seeded: staged.seeded,
        })
    }

    /// The newest checkpoint (`refs/bh/last`), if any, in one git call.
    pub(crate) fn last_checkpoint(&self) -> Result<Option<Checkpoint>> {
        let out = self
            .shadow()
            .cmd([
                "log",
                "-1",
                "--no-walk",
                "--ignore-missing",
                "--format=%H%x00%T%x00%(trailers:only,unfold)",
                "refs/bh/last",
                "--",
            ])
            .run()?;
        if out.stdout.is_empty() {
            return Ok(None);
        }
        self.parse_log_record(&out.stdout, "refs/bh/last").map(Some)
    }

    fn parse_log_record(&self, out: &[u8], commit: &str) -> Result<Checkpoint> {
        let mut parts = out.splitn(3, |b| *b == 0);
        let (Some(c), Some(t), Some(tr)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail: format!("cannot read checkpoint {commit}"),
            });
        };
        meta::parse(
            &String::from_utf8_lossy(c),
            &String::from_utf8_lossy(t),
            &String::from_utf8_lossy(tr),
        )
        .ok_or_else(|| CheckpointError::Corrupt {
            store: self.dir.clone(),
            detail: format!("commit {commit} has no checkpoint trailers"),
        })
    }

    pub(crate) fn changed_paths(&self, from: &str, to: &str) -> Result<Vec<DiffEntry>> {
        Ok(self
            .shadow()
            .name_status(from, to)?
            .into_iter()
            .map(|e| DiffEntry::name_only(e.status, &e.path))
            .collect())
    }

    /// Brings the shadow index up to date with the work tree and writes its tree.
    /// Caller holds the lock.
    pub(crate) fn stage_current(&self) -> Result<Staged> {
        self.stage_current_with(&no_progress)
    }

    fn stage_current_with(&self, progress: OnProgress<'_>) -> Result<Staged> {
        self.sync_exclude()?;
        let index = self.git_dir.join("index");
        let mut seeded = false;
        let mut seed_skipped = Vec::new();
        if !index.exists()
            && let Some(skipped) = self.seed(progress)?
        {
            seeded = true;
            seed_skipped = skipped;
        }
        // Against a seeded base whose objects went missing, status fails:
        // that too starts over below.
        let staged = match self.stage(progress) {
            Ok(p) => Some(p),
            Err(_) if seeded => None,
            Err(e) => return Err(e),
        };
        let shadow = self.shadow();
        // A seeded tree must be whole: a checkpoint never claims to exist
        // without its objects (a concurrent gc of the user's repository may
        // have moved some away while they were linked).
        let written = match staged.as_ref().map(|_| shadow.run(["write-tree"])) {
            None => Err(()),
            Some(Ok(out)) if seeded => {
                let tree = String::from_utf8_lossy(trim_line(&out)).into_owned();
                if self.seeded_tree_is_whole(&tree) {
                    Ok(out)
                } else {
                    Err(())
                }
            }
            Some(Ok(out)) => Ok(out),
            Some(Err(err)) if !seeded => return Err(err.into()),
            Some(Err(_)) => Err(()),
        };
        let mut pass = staged;
        let tree = match written {
            Ok(out) => out,
            Err(()) => {
                // The seeded index names an object the user's store did not give
                // us (e.g. it lives in one of their alternates): start over.
                let _ = fs::remove_file(&index);
                let _ = shadow.run(["update-ref", "-d", "refs/heads/bh-base"]);
                seeded = false;
                seed_skipped.clear();
                pass = Some(self.stage(progress)?);
                shadow.run(["write-tree"])?
            }
        };
        let Some(pass) = pass else {
            return Err(CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail: "staging after a failed seed left nothing staged".into(),
            });
        };
        seed_skipped.extend(pass.skipped);
        Ok(Staged {
            tree: String::from_utf8_lossy(trim_line(&tree)).into_owned(),
            skipped: seed_skipped,
            seeded,
            changes: if seeded { None } else { pass.changes },
        })
    }

    /// Mirrors the user's `info/exclude` into the shadow (only meaningful when
    /// the project is the repository's top level).
    fn sync_exclude(&self) -> Result<()> {
        let wanted = match &self.user {
            Some(user) if user.is_top => fs::read(&user.exclude).unwrap_or_default(),
            _ => Vec::new(),
        };
        let path = self.git_dir.join("info/exclude");
        if fs::read(&path).ok().as_deref() != Some(wanted.as_slice()) {
            write_atomic(&path, &wanted)?;
        }
        Ok(())
    }
}

pub(crate) fn nul_join(paths: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(paths.iter().map(|p| p.len() + 1).sum());
    for p in paths {
        out.extend_from_slice(p);
        out.push(0);
    }
    out
}

/// `50MiB`, `1.5GiB`, `512B`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0}{}", UNITS[unit])
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}
