//! Live snapshots: one store watched for the lifetime of an agent, so that a
//! snapshot after a few files changed starts no git process.
//!
//! From its second snapshot on (a single snapshot would not repay it), a
//! [`LiveStore`] arms an inotify watch on every directory a snapshot can see
//! (the project minus `.git`, the insides of nested repositories and ignored
//! directories that hold no captured file), *then* takes an ordinary snapshot:
//! from that moment every change to the work tree leaves an event. The next
//! snapshot reads the events; when they name only files (no directory made,
//! removed or moved, no `.gitignore` or `.git` touched, no overflow) it builds
//! the new tree from the last checkpoint's tree and those files alone, and
//! commits it exactly as an ordinary snapshot would. The blobs (up to 1 MiB),
//! trees and commit are hashed and written as loose objects in-process (a
//! round trip to git per tree level was most of the cost on a loaded
//! machine); git is asked only what it alone knows, through long-lived
//! processes: trees not cached (`cat-file --batch`), ignore rules
//! (`check-ignore --stdin`), larger blobs (`hash-object --stdin-paths`) and
//! the ref transaction (`update-ref --stdin`). Anything unusual — a
//! symlink, a file over the size cap, an unreadable file, another process
//! having moved `refs/bh/last`, a changed exclude file, a helper that died —
//! falls back to the ordinary snapshot, which re-arms the watch.
//!
//! The shadow index is not touched by the fast path; the entries it would have
//! changed are kept and written into the index (without stat data, so git
//! re-reads those files) before the next ordinary snapshot, which therefore
//! sees exactly the tracked set it would have seen without the fast path.
//!
//! Blind spots are those of every inotify-based monitor (git's fsmonitor
//! included): writes through a shared `mmap`, writes to a file through another
//! hard link to it outside the project, and changes made on another machine of
//! a network file system. Network and FUSE file systems are therefore never
//! watched.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::meta::{CheckpointKind, SnapshotRequest};
use crate::snapshot::SnapshotOutcome;
use crate::store::Store;

/// How the snapshots of one [`LiveStore`] were taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Snapshots built from watched changes alone.
    pub fast: u64,
    /// Ordinary snapshots (the first two, then every fallback).
    pub full: u64,
}

type Job = (
    SnapshotRequest,
    CheckpointKind,
    mpsc::Sender<(Result<SnapshotOutcome>, LiveStats)>,
);

/// A checkpoint store with a watch over its project; see the module docs.
///
/// Snapshots run on one worker thread that owns the watch and the long-lived
/// git processes (a git child dies with the thread that started it).
#[derive(Debug)]
pub struct LiveStore {
    store: Arc<Store>,
    worker: Mutex<Option<Worker>>,
    stats: Mutex<LiveStats>,
}

#[derive(Debug)]
struct Worker {
    jobs: mpsc::Sender<Job>,
    thread: std::thread::JoinHandle<()>,
}

impl LiveStore {
    pub fn new(store: Arc<Store>) -> LiveStore {
        LiveStore {
            store,
            worker: Mutex::new(None),
            stats: Mutex::new(LiveStats::default()),
        }
    }

    /// The store itself (for listing, restoring, diffing).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// How the snapshots so far were taken.
    pub fn stats(&self) -> LiveStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    /// Snapshots the project, exactly as [`Store::snapshot`] would.
    pub fn snapshot(&self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
        self.snapshot_kind(request, CheckpointKind::Snapshot)
    }

    /// The state a call left, exactly as [`Store::snapshot_after`] would.
    pub fn snapshot_after(&self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
        self.snapshot_kind(request, CheckpointKind::After)
    }

    fn snapshot_kind(
        &self,
        request: &SnapshotRequest,
        kind: CheckpointKind,
    ) -> Result<SnapshotOutcome> {
        let ordinary = |kind: CheckpointKind| match kind {
            CheckpointKind::After => self.store.snapshot_after(request),
            _ => self.store.snapshot(request),
        };
        let Some(reply) = self.submit(request, kind.clone()) else {
            return ordinary(kind);
        };
        match reply.recv() {
            Ok((outcome, stats)) => {
                if let Ok(mut s) = self.stats.lock() {
                    *s = stats;
                }
                outcome
            }
            // The worker is gone (it panicked): do it here.
            Err(_) => {
                if let Ok(mut w) = self.worker.lock() {
                    *w = None;
                }
                ordinary(kind)
            }
        }
    }

    fn submit(
        &self,
        request: &SnapshotRequest,
        kind: CheckpointKind,
    ) -> Option<mpsc::Receiver<(Result<SnapshotOutcome>, LiveStats)>> {
        let mut worker = self.worker.lock().ok()?;
        if worker.is_none() {
            let (jobs, rx) = mpsc::channel::<Job>();
            let store = self.store.clone();
            let thread = std::thread::Builder::new()
                .name("bh-checkpoint-live".into())
                .spawn(move || imp::serve(store, rx))
                .ok()?;
            *worker = Some(Worker { jobs, thread });
        }
        let (tx, rx) = mpsc::channel();
        worker
            .as_ref()?
            .jobs
            .send((request.clone(), kind, tx))
            .ok()?;
        Some(rx)
    }
}

impl Drop for LiveStore {
    fn drop(&mut self) {
        if let Ok(mut w) = self.worker.lock()
            && let Some(worker) = w.take()
        {
            drop(worker.jobs);
            let _ = worker.thread.join();
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    pub(super) fn serve(store: Arc<Store>, jobs: mpsc::Receiver<Job>) {
        let mut stats = LiveStats::default();
        for (request, kind, reply) in jobs {
            stats.full += 1;
            let outcome = match kind {
                CheckpointKind::After => store.snapshot_after(&request),
                _ => store.snapshot(&request),
            };
            let _ = reply.send((outcome, stats));
        }
    }
}

#[cfg(target_os = "linux")]
mod imp;
