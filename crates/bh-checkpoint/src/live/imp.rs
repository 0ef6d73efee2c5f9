//! The live store's worker (Linux: inotify): the ordinary snapshot armed
//! with a watch, and the fast path built from the watched changes. The watch
//! itself is in `watch`, the tree building in `tree`.

use fs_err as fs;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use bh_git::GitProcess;
use nix::sys::inotify::{Inotify, WatchDescriptor};

use super::*;

mod objects;
mod tree;
mod watch;

use crate::diff::DiffEntry;
use crate::meta::{self, Checkpoint, CheckpointKind, NewMeta};
use crate::paths::fs_path;
use crate::store::{EMPTY_TREE, now_ms};
use watch::read_ignored;

/// More directories than this and the project is not watched.
const MAX_WATCHES: usize = 16_384;

/// Paths changed by fast snapshots before an ordinary one is due.
const MAX_PENDING_INDEX: usize = 10_000;

/// Files up to this size are hashed and written in-process (`objects`);
/// larger ones are streamed through `git hash-object`.
const IN_PROCESS_BLOB: u64 = 1 << 20;

/// Tree entries kept in memory between snapshots (cleared when full).
const MAX_CACHED_ENTRIES: usize = 65_536;

type TreeEntries = BTreeMap<Vec<u8>, (u32, String)>;

pub(super) fn serve(store: Arc<Store>, jobs: mpsc::Receiver<Job>) {
    let mut live = Live {
        store,
        armed: None,
        helpers: None,
        pending_index: BTreeMap::new(),
        disabled: false,
        trees: HashMap::new(),
        cached_entries: 0,
        stats: LiveStats::default(),
    };
    for (request, kind, reply) in jobs {
        let outcome = live.snapshot(&request, kind);
        let _ = reply.send((outcome, live.stats));
    }
}

/// Why the fast path was not taken (for debugging; a miss is never an
/// error, it only means an ordinary snapshot).
#[derive(Debug)]
struct Miss(#[allow(dead_code)] String);

fn miss(why: impl Into<String>) -> Miss {
    Miss(why.into())
}

impl From<std::io::Error> for Miss {
    fn from(e: std::io::Error) -> Miss {
        Miss(format!("helper: {e}"))
    }
}

struct Live {
    store: Arc<Store>,
    armed: Option<Armed>,
    helpers: Option<Helpers>,
    /// Shadow-index entries the fast path changed since the last ordinary
    /// snapshot (`None` = removed).
    pending_index: BTreeMap<Vec<u8>, Option<(u32, String)>>,
    /// The project cannot be watched (file system, watch limit).
    disabled: bool,
    /// The last known tree of each directory the fast path touched: its
    /// id and entries. Replaced, not accumulated, so memory follows the
    /// size of the touched directories, not the number of snapshots.
    trees: HashMap<Vec<u8>, (String, TreeEntries)>,
    cached_entries: usize,
    stats: LiveStats,
}

/// The watch over the project's directories.
struct Watch {
    inotify: Inotify,
    dirs: HashMap<WatchDescriptor, WatchedDir>,
    /// The user's exclude files as they were when armed.
    excludes: Vec<Option<Vec<u8>>>,
}

struct Armed {
    watch: Watch,
    /// The checkpoint holding the work tree as of the last snapshot.
    base: Checkpoint,
    /// The next snapshot must be an ordinary one.
    stale: bool,
}

struct WatchedDir {
    /// Project-relative, no trailing slash; empty for the project itself.
    path: Vec<u8>,
    /// The top of a nested repository: any event there means "look again".
    nested: bool,
}

struct Helpers {
    cat: GitProcess,
    blobs: GitProcess,
    refs: GitProcess,
    ignore: GitProcess,
}

enum Change {
    /// The file exists: its mode and blob.
    Set {
        mode: u32,
        oid: String,
    },
    /// Like `Set`, but the file is ignored: only kept if already tracked.
    SetIfTracked {
        mode: u32,
        oid: String,
    },
    Remove,
}

impl Live {
    fn snapshot(
        &mut self,
        request: &SnapshotRequest,
        kind: CheckpointKind,
    ) -> Result<SnapshotOutcome> {
        let lock = self.store.lock()?;
        if self.armed.as_ref().is_some_and(|a| !a.stale) {
            match self.fast(request, &kind) {
                Ok(outcome) => {
                    self.stats.fast += 1;
                    drop(lock);
                    return Ok(outcome);
                }
                // `full` starts afresh (helpers that failed may be
                // mid-request).
                Err(_miss) => {}
            }
        }
        let outcome = self.full(request, kind);
        drop(lock);
        outcome
    }

    /// The ordinary snapshot, armed first so that nothing it misses goes
    /// unseen. Caller holds the store lock.
    fn full(&mut self, request: &SnapshotRequest, kind: CheckpointKind) -> Result<SnapshotOutcome> {
        self.armed = None;
        // Fresh helpers: a long-lived `check-ignore` may hold ignore rules
        // read before they changed, and arming asks it about directories.
        self.helpers = None;
        self.store.clean_stale_locks()?;
        self.flush_pending_index()?;
        let index_existed = self.store.git_dir.join("index").exists();
        // The first snapshot is not armed: arming (a walk, a watch per
        // directory, `ls-files`) only pays off when more follow, and a
        // run that checkpoints once (an executor run) should not pay it.
        let arming = if self.disabled || self.stats.full + self.stats.fast == 0 {
            None
        } else {
            self.arm().ok()
        };
        self.stats.full += 1;
        let outcome = self.store.snapshot_locked(request, kind)?;
        if let Some(watch) = arming {
            self.armed = Some(Armed {
                watch,
                base: outcome.checkpoint.clone(),
                // A seeded index (first snapshot) may track files in
                // ignored directories the watch skipped; skipped files are
                // not handled by the fast path at all.
                stale: !index_existed || !outcome.skipped.is_empty(),
            });
        }
        Ok(outcome)
    }

    /// Writes what the fast path changed into the shadow index, and drops
    /// the index's untracked cache: its directory stat data predate the
    /// work the fast path saw, and once the index is rewritten git's
    /// racy-timestamp guard no longer covers them (a differential test
    /// caught a directory made again between two ordinary snapshots being
    /// trusted as unchanged). The next `status` rebuilds the cache.
    fn flush_pending_index(&mut self) -> Result<()> {
        if self.pending_index.is_empty() {
            return Ok(());
        }
        let mut input = Vec::new();
        for (path, entry) in &self.pending_index {
            match entry {
                Some((mode, oid)) => {
                    input.extend_from_slice(format!("{mode:o} {oid}\t").as_bytes())
                }
                None => input.extend_from_slice(format!("0 {}\t", bh_git::NULL_OID).as_bytes()),
            }
            input.extend_from_slice(path);
            input.push(0);
        }
        self.store
            .shadow()
            .cmd(["update-index", "--no-untracked-cache", "-z", "--index-info"])
            .stdin(input)
            .run()?;
        self.pending_index.clear();
        Ok(())
    }

    fn helpers(&mut self) -> std::result::Result<&mut Helpers, Miss> {
        if self.helpers.is_none() {
            let shadow = self.store.shadow();
            let spawn = |args: &[&str]| {
                shadow
                    .cmd(args)
                    .spawn_process()
                    .map_err(|e| miss(e.to_string()))
            };
            self.helpers = Some(Helpers {
                cat: spawn(&["cat-file", "--batch"])?,
                blobs: spawn(&["hash-object", "-w", "--no-filters", "--stdin-paths"])?,
                refs: spawn(&["update-ref", "--stdin"])?,
                ignore: spawn(&["check-ignore", "--stdin", "-z", "--no-index", "-v", "-n"])?,
            });
        }
        self.helpers.as_mut().ok_or_else(|| miss("no helpers"))
    }

    /// The user's exclude files (`info/exclude`, `core.excludesFile`).
    fn exclude_contents(&self) -> Vec<Option<Vec<u8>>> {
        let mut files: Vec<&Path> = Vec::new();
        if let Some(user) = &self.store.user {
            files.push(&user.exclude);
        }
        if let Some(path) = &self.store.excludes_file {
            files.push(path);
        }
        files.into_iter().map(|p| fs::read(p).ok()).collect()
    }

    /// The fast path. Caller holds the store lock.
    fn fast(
        &mut self,
        request: &SnapshotRequest,
        kind: &CheckpointKind,
    ) -> std::result::Result<SnapshotOutcome, Miss> {
        let dirty = self.drain_events()?;
        let excludes = self.exclude_contents();
        let armed = self.armed.as_ref().ok_or_else(|| miss("not armed"))?;
        if excludes != armed.watch.excludes {
            return Err(miss("exclude files changed"));
        }
        let base = armed.base.clone();
        // Another process may have checkpointed, restored or pruned: ask
        // now, read the answer after the files are hashed.
        let h = self.helpers()?;
        h.cat.stdin.write_all(b"refs/bh/last\n")?;
        h.cat.stdin.flush()?;
        let changes = self.classify(dirty)?;
        let h = self.helpers()?;
        let last = read_object(&mut h.cat)?.map(|(oid, _, _)| oid);
        if last.as_deref() != Some(base.commit.as_str()) {
            return Err(miss("refs/bh/last moved"));
        }
        let reuse = kind.may_reuse(&base.kind);
        if changes.is_empty() && reuse {
            return Ok(unchanged(base));
        }
        let mut changed = Vec::new();
        let base_tree = (base.tree != EMPTY_TREE).then_some(base.tree.as_str());
        let tree = if changes.is_empty() {
            base.tree.clone()
        } else {
            self.build_tree(base_tree, &changes, &mut changed)?
                .unwrap_or_else(|| EMPTY_TREE.to_owned())
        };
        if tree == base.tree && reuse {
            self.armed_mut()?.base = base.clone();
            return Ok(unchanged(base));
        }
        changed.sort_by(|a: &(u8, Vec<u8>), b| a.1.cmp(&b.1));
        let time_ms = now_ms();
        let new = NewMeta::for_request(
            request,
            base.seq + 1,
            time_ms,
            changed.len() as u64,
            &[],
            kind.clone(),
        );
        let commit = self.write_commit(&tree, &meta::message(&new), time_ms)?;
        let checkpoint =
            meta::from_new(&commit, &tree, &new).ok_or_else(|| miss("odd commit id"))?;
        let h = self.helpers()?;
        let tx = format!(
            "start\ncreate refs/bh/checkpoints/{commit} {commit}\nupdate refs/bh/last {commit} {old}\nupdate refs/heads/bh-base {commit}\nprepare\ncommit\n",
            old = base.commit
        );
        h.refs.stdin.write_all(tx.as_bytes())?;
        h.refs.stdin.flush()?;
        for want in ["start: ok", "prepare: ok", "commit: ok"] {
            let mut line = String::new();
            h.refs.stdout.read_line(&mut line)?;
            if line.trim_end() != want {
                return Err(miss(format!("update-ref said {line:?}")));
            }
        }
        // The refs moved: from here on this is the checkpoint.
        for (path, change) in &changes {
            match change {
                Change::Set { mode, oid } => {
                    self.pending_index
                        .insert(path.clone(), Some((*mode, oid.clone())));
                }
                Change::SetIfTracked { mode, oid } => {
                    if changed.iter().any(|(_, p)| p == path) {
                        self.pending_index
                            .insert(path.clone(), Some((*mode, oid.clone())));
                    }
                }
                Change::Remove => {
                    self.pending_index.insert(path.clone(), None);
                }
            }
        }
        let pending = self.pending_index.len();
        let armed = self.armed_mut()?;
        armed.base = checkpoint.clone();
        // Keep the entries owed to the shadow index bounded: an ordinary
        // snapshot now and then writes them.
        armed.stale = pending > MAX_PENDING_INDEX;
        Ok(SnapshotOutcome {
            checkpoint,
            created: true,
            changed: changed
                .into_iter()
                .map(|(status, path)| DiffEntry::name_only(status, &path))
                .collect(),
            skipped: Vec::new(),
            seeded: false,
        })
    }

    fn armed_mut(&mut self) -> std::result::Result<&mut Armed, Miss> {
        self.armed.as_mut().ok_or_else(|| miss("not armed"))
    }

    /// What the work tree now holds at each dirty path. Requests to
    /// `check-ignore` and `hash-object` are pipelined, in bounded chunks
    /// so that neither side can fill a pipe and block the other.
    fn classify(
        &mut self,
        dirty: Vec<Vec<u8>>,
    ) -> std::result::Result<BTreeMap<Vec<u8>, Change>, Miss> {
        let mut changes = BTreeMap::new();
        for chunk in dirty.chunks(256) {
            let mut files = Vec::new();
            for rel in chunk {
                let full = fs_path(&self.store.project, rel);
                let meta = match fs::symlink_metadata(&full) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        changes.insert(rel.clone(), Change::Remove);
                        continue;
                    }
                    Err(e) => return Err(miss(format!("lstat: {e}"))),
                    Ok(m) => m,
                };
                if !meta.file_type().is_file() {
                    return Err(miss("not a regular file"));
                }
                if meta.len() > self.store.max_file_size {
                    return Err(miss("over the size cap"));
                }
                // `hash-object --stdin-paths` reads project-relative lines
                // (its working folder is the project, whatever its path).
                if rel.contains(&b'\n') || rel.first() == Some(&b'"') || rel.contains(&0) {
                    return Err(miss("a path the helpers cannot take"));
                }
                let mode = if meta.mode() & 0o100 != 0 {
                    0o100755
                } else {
                    0o100644
                };
                files.push((rel.clone(), full, mode, meta.len() <= IN_PROCESS_BLOB));
            }
            if files.is_empty() {
                continue;
            }
            let objects = self.store.git_dir.join("objects");
            let max = self.store.max_file_size;
            let h = self.helpers()?;
            for (rel, _, _, small) in &files {
                h.ignore.stdin.write_all(rel)?;
                h.ignore.stdin.write_all(b"\0")?;
                if !small {
                    h.blobs.stdin.write_all(rel)?;
                    h.blobs.stdin.write_all(b"\n")?;
                }
            }
            h.ignore.stdin.flush()?;
            h.blobs.stdin.flush()?;
            // Small files are hashed here while git answers `check-ignore`.
            let mut oids = Vec::with_capacity(files.len());
            for (_, full, _, small) in &files {
                oids.push(if *small {
                    let body = objects::read_regular(full, IN_PROCESS_BLOB.min(max))?
                        .ok_or_else(|| miss("changed under the fast path"))?;
                    Some(bh_git::loose::write_loose(&objects, "blob", &body)?)
                } else {
                    None
                });
            }
            for ((rel, _, mode, _), oid) in files.into_iter().zip(oids) {
                let ignored = read_ignored(&mut h.ignore)?;
                let oid = match oid {
                    Some(oid) => oid,
                    None => read_oid(&mut h.blobs)?,
                };
                let change = if ignored {
                    Change::SetIfTracked { mode, oid }
                } else {
                    Change::Set { mode, oid }
                };
                changes.insert(rel, change);
            }
        }
        Ok(changes)
    }
}

/// Nothing changed since `base`: it is reused, as an ordinary snapshot does.
fn unchanged(base: Checkpoint) -> SnapshotOutcome {
    SnapshotOutcome {
        checkpoint: base,
        created: false,
        changed: Vec::new(),
        skipped: Vec::new(),
        seeded: false,
    }
}

fn read_oid(p: &mut GitProcess) -> std::result::Result<String, Miss> {
    Ok(bh_git::object::read_oid_line(p)?)
}

/// One `cat-file --batch` answer: `None` for "missing".
#[allow(clippy::type_complexity)]
fn read_object(p: &mut GitProcess) -> std::result::Result<Option<(String, String, Vec<u8>)>, Miss> {
    Ok(bh_git::object::read_batch_object(p)?)
}

/// A tree object's entries by name.
fn parse_tree(body: &[u8]) -> Option<TreeEntries> {
    let entries = bh_git::object::parse_tree(body).ok()?;
    Some(
        entries
            .into_iter()
            .map(|e| (e.name, (e.mode, e.oid)))
            .collect(),
    )
}
