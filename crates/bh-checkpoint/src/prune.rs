//! Dropping old checkpoints.

use std::time::Duration;

use serde::Serialize;

use crate::error::{CheckpointError, Result};
use crate::meta::Checkpoint;
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
        for (i, cp) in list.into_iter().enumerate() {
            let by_count = policy.keep.is_none_or(|k| i >= k);
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

/// Which checkpoints `prune` drops: those beyond the newest `keep` and/or older
/// than `older_than` (both must hold when both are given).
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
