//! Dropping old checkpoints.

use std::time::Duration;

use serde::Serialize;

use crate::error::{CheckpointError, Result};
use crate::meta::{Checkpoint, CheckpointKind};
use crate::store::{Store, now_ms};

impl Store {
    /// Drops checkpoints by count and/or age, then repacks the store.
    pub fn prune(&self, policy: &PrunePolicy) -> Result<PruneOutcome> {
        if policy.keep.is_none() && policy.older_than.is_none() {
            return Err(CheckpointError::InvalidArgument(
                "prune needs --keep N and/or --older-than DURATION".into(),
            ));
        }
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let before = self.size();
        let list = self.list()?;
        let now_ms = now_ms();
        let mut removed = Vec::new();
        let mut kept = Vec::new();
        // `keep N` counts snapshots, newest first; an undo point (what a
        // restore replaced) goes with the snapshots around it: kept while
        // fewer than N snapshots are counted, dropped after.
        let mut snapshots_seen = 0usize;
        for cp in list {
            let past = policy.keep.is_none_or(|k| snapshots_seen >= k);
            if cp.kind == CheckpointKind::Snapshot {
                snapshots_seen += 1;
            }
            let by_count = past;
            let by_age = policy.older_than.is_none_or(|age| {
                now_ms.saturating_sub(cp.time_ms)
                    > i64::try_from(age.as_millis()).unwrap_or(i64::MAX)
            });
            if by_count && by_age {
                removed.push(cp);
            } else {
                kept.push(cp);
            }
        }
        if !removed.is_empty() {
            let mut tx = String::from("start\n");
            for cp in &removed {
                tx.push_str(&format!(
                    "delete refs/bh/checkpoints/{} {}\n",
                    cp.commit, cp.commit
                ));
            }
            match kept.first() {
                Some(newest) => {
                    tx.push_str(&format!("update refs/bh/last {}\n", newest.commit));
                    tx.push_str(&format!("update refs/heads/bh-base {}\n", newest.commit));
                }
                None => {
                    tx.push_str("delete refs/bh/last\n");
                    tx.push_str("delete refs/heads/bh-base\n");
                }
            }
            tx.push_str("commit\n");
            self.shadow()
                .cmd(["update-ref", "--stdin"])
                .stdin(tx.into_bytes())
                .run()?;
        }
        if kept.is_empty() {
            // Nothing is left to be fast about: the shadow index (and a split
            // index's shared part) would keep every blob of the last state
            // alive through the repack. The next snapshot starts afresh.
            self.drop_shadow_index()?;
        }
        let shadow = self.shadow();
        shadow.run(["pack-refs", "--all", "--prune"])?;
        shadow.run(["repack", "-a", "-d", "-q", "--no-write-bitmap-index"])?;
        shadow.run(["prune", "--expire=now"])?;
        Ok(PruneOutcome {
            removed,
            kept: kept.len(),
            size_before: before,
            size_after: self.size(),
        })
    }
}

impl Store {
    /// Removes the shadow index and any `sharedindex.*` beside it.
    fn drop_shadow_index(&self) -> Result<()> {
        // fs-err's errors name the path already.
        let io = |e: std::io::Error| CheckpointError::io("cannot drop the shadow index", e);
        for entry in fs_err::read_dir(&self.git_dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let name = name.as_encoded_bytes();
            if name == b"index" || name.starts_with(b"sharedindex.") {
                match fs_err::remove_file(entry.path()) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(e)),
                }
            }
        }
        Ok(())
    }
}

/// Which checkpoints `prune` drops: those beyond the newest `keep` snapshots
/// (undo points between them stay) and/or older than `older_than` (both must
/// hold when both are given).
#[derive(Debug, Clone, Default)]
pub struct PrunePolicy {
    pub keep: Option<usize>,
    pub older_than: Option<Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PruneOutcome {
    pub removed: Vec<Checkpoint>,
    pub kept: usize,
    pub size_before: u64,
    pub size_after: u64,
}
