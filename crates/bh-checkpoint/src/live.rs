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
//! the new tree from the last checkpoint's tree and those files alone, through
//! long-lived git processes (`cat-file --batch`, `hash-object --stdin-paths`,
//! `hash-object -t tree`, `check-ignore --stdin`, `update-ref --stdin`), and
//! commits it exactly as an ordinary snapshot would. Anything unusual — a
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
use crate::meta::SnapshotRequest;
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
        let Some(reply) = self.submit(request) else {
            return self.store.snapshot(request);
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
                self.store.snapshot(request)
            }
        }
    }

    fn submit(
        &self,
        request: &SnapshotRequest,
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
        worker.as_ref()?.jobs.send((request.clone(), tx)).ok()?;
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
        for (request, reply) in jobs {
            stats.full += 1;
            let _ = reply.send((store.snapshot(&request), stats));
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::ffi::OsStr;
    use std::fs;
    use std::io::{BufRead, Read, Write};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    use bh_git::GitProcess;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

    use super::*;
    use crate::diff::DiffEntry;
    use crate::meta::{self, Checkpoint, NewMeta};
    use crate::paths::fs_path;
    use crate::store::{EMPTY_TREE, now_ms};

    /// More directories than this and the project is not watched.
    const MAX_WATCHES: usize = 16_384;

    /// Paths changed by fast snapshots before an ordinary one is due.
    const MAX_PENDING_INDEX: usize = 10_000;

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
        for (request, reply) in jobs {
            let outcome = live.snapshot(&request);
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
        trees: GitProcess,
        commits: GitProcess,
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
        fn snapshot(&mut self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
            let lock = self.store.lock()?;
            if self.armed.as_ref().is_some_and(|a| !a.stale) {
                match self.fast(request) {
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
            let outcome = self.full(request);
            drop(lock);
            outcome
        }

        /// The ordinary snapshot, armed first so that nothing it misses goes
        /// unseen. Caller holds the store lock.
        fn full(&mut self, request: &SnapshotRequest) -> Result<SnapshotOutcome> {
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
            let outcome = self.store.snapshot_locked(request, "snapshot")?;
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
                    trees: spawn(&["hash-object", "-t", "tree", "-w", "--stdin-paths"])?,
                    commits: spawn(&["hash-object", "-t", "commit", "-w", "--stdin-paths"])?,
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

        /// Watches every directory a snapshot can see.
        fn arm(&mut self) -> std::result::Result<Watch, Miss> {
            let project = self.store.project.clone();
            let fs_type = nix::sys::statfs::statfs(&project)
                .map_err(|e| miss(format!("statfs: {e}")))?
                .filesystem_type();
            use nix::sys::statfs::{FUSE_SUPER_MAGIC, NFS_SUPER_MAGIC, SMB_SUPER_MAGIC};
            const CIFS_MAGIC: i64 = 0xFF53_4D42;
            const SMB2_MAGIC: i64 = 0xFE53_4D42;
            if [FUSE_SUPER_MAGIC, NFS_SUPER_MAGIC, SMB_SUPER_MAGIC].contains(&fs_type)
                || [CIFS_MAGIC, SMB2_MAGIC].contains(&(fs_type.0 as i64))
            {
                self.disabled = true;
                return Err(miss("network or FUSE file system"));
            }
            // Read before `check-ignore` reads them: a change from here on is
            // a difference the fast path notices.
            let excludes = self.exclude_contents();
            // Directories holding tracked files are watched even when ignored.
            let tracked = self.tracked_dirs()?;
            let inotify = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
                Ok(i) => i,
                Err(e) => {
                    // Out of inotify instances (or none at all): do not retry
                    // (and re-list the index) on every snapshot.
                    self.disabled = true;
                    return Err(miss(format!("inotify: {e}")));
                }
            };
            let flags = AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_MOVE_SELF
                | AddWatchFlags::IN_ONLYDIR
                | AddWatchFlags::IN_DONT_FOLLOW;
            let mut dirs = HashMap::new();
            let mut queue: Vec<Vec<u8>> = vec![Vec::new()];
            while let Some(rel) = queue.pop() {
                let full = if rel.is_empty() {
                    project.clone()
                } else {
                    fs_path(&project, &rel)
                };
                // Watch first, then read: an entry made in between still
                // leaves an event.
                if dirs.len() >= MAX_WATCHES {
                    self.disabled = true;
                    return Err(miss("too many directories"));
                }
                let wd = match inotify.add_watch(&full, flags) {
                    Ok(wd) => wd,
                    Err(nix::errno::Errno::ENOSPC) => {
                        self.disabled = true;
                        return Err(miss("inotify watch limit"));
                    }
                    Err(e) => return Err(miss(format!("add_watch: {e}"))),
                };
                let entries = fs::read_dir(&full).map_err(|e| miss(format!("read_dir: {e}")))?;
                let mut children = Vec::new();
                let mut nested = false;
                for entry in entries {
                    let entry = entry.map_err(|e| miss(format!("read_dir: {e}")))?;
                    let name = entry.file_name();
                    let name = name.as_bytes();
                    if name == b".git" {
                        nested = !rel.is_empty();
                        continue;
                    }
                    let ty = entry
                        .file_type()
                        .map_err(|e| miss(format!("file type: {e}")))?;
                    if ty.is_dir() {
                        let mut child = rel.clone();
                        if !child.is_empty() {
                            child.push(b'/');
                        }
                        child.extend_from_slice(name);
                        children.push(child);
                    }
                }
                dirs.insert(
                    wd,
                    WatchedDir {
                        path: rel.clone(),
                        nested,
                    },
                );
                if nested {
                    continue;
                }
                for child in children {
                    if tracked.contains(&child) || !self.is_ignored_dir(&child)? {
                        queue.push(child);
                    }
                }
            }
            Ok(Watch {
                inotify,
                dirs,
                excludes,
            })
        }

        /// Every directory holding a file of the shadow index.
        fn tracked_dirs(&self) -> std::result::Result<HashSet<Vec<u8>>, Miss> {
            let mut dirs = HashSet::new();
            if !self.store.git_dir.join("index").exists() {
                return Ok(dirs);
            }
            let out = self
                .store
                .shadow()
                .run(["ls-files", "-z", "--cached"])
                .map_err(|e| miss(e.to_string()))?;
            for path in out.split(|b| *b == 0).filter(|p| !p.is_empty()) {
                let mut end = path.len();
                while let Some(slash) = path[..end].iter().rposition(|b| *b == b'/') {
                    if !dirs.insert(path[..slash].to_vec()) {
                        break;
                    }
                    end = slash;
                }
            }
            Ok(dirs)
        }

        fn is_ignored_dir(&mut self, rel: &[u8]) -> std::result::Result<bool, Miss> {
            let mut query = rel.to_vec();
            query.push(b'/');
            self.is_ignored(&query)
        }

        /// Asks `check-ignore` (without the index) whether `rel` is ignored.
        fn is_ignored(&mut self, rel: &[u8]) -> std::result::Result<bool, Miss> {
            if rel.contains(&0) {
                return Err(miss("NUL in path"));
            }
            let h = self.helpers()?;
            h.ignore.stdin.write_all(rel)?;
            h.ignore.stdin.write_all(b"\0")?;
            h.ignore.stdin.flush()?;
            read_ignored(&mut h.ignore)
        }

        /// The fast path. Caller holds the store lock.
        fn fast(
            &mut self,
            request: &SnapshotRequest,
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
            if changes.is_empty() {
                return Ok(unchanged(base));
            }
            let mut changed = Vec::new();
            let base_tree = (base.tree != EMPTY_TREE).then_some(base.tree.as_str());
            let tree = self
                .build_tree(base_tree, &changes, &mut changed)?
                .unwrap_or_else(|| EMPTY_TREE.to_owned());
            if tree == base.tree {
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
                "snapshot",
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

        /// Files named by the events since the last snapshot; a miss for
        /// anything but plain file events in watched directories.
        fn drain_events(&mut self) -> std::result::Result<Vec<Vec<u8>>, Miss> {
            let armed = self.armed.as_mut().ok_or_else(|| miss("not armed"))?;
            let mut dirty = HashSet::new();
            loop {
                let events = match armed.watch.inotify.read_events() {
                    Ok(events) => events,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(e) => {
                        armed.stale = true;
                        return Err(miss(format!("inotify read: {e}")));
                    }
                };
                if events.is_empty() {
                    break;
                }
                for ev in events {
                    let structural = AddWatchFlags::IN_Q_OVERFLOW
                        | AddWatchFlags::IN_IGNORED
                        | AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF
                        | AddWatchFlags::IN_UNMOUNT;
                    if ev.mask.intersects(structural) {
                        armed.stale = true;
                        return Err(miss(format!("structural event {:?}", ev.mask)));
                    }
                    let Some(dir) = armed.watch.dirs.get(&ev.wd) else {
                        armed.stale = true;
                        return Err(miss("event for an unknown watch"));
                    };
                    let Some(name) = ev.name.as_deref().map(OsStr::as_bytes) else {
                        continue;
                    };
                    if ev.mask.contains(AddWatchFlags::IN_ISDIR) {
                        if ev.mask == AddWatchFlags::IN_ISDIR | AddWatchFlags::IN_ATTRIB {
                            continue;
                        }
                        armed.stale = true;
                        return Err(miss("a directory came or went"));
                    }
                    if dir.nested || name == b".git" || name == b".gitignore" {
                        armed.stale = true;
                        return Err(miss("a repository or ignore file changed"));
                    }
                    let mut path = dir.path.clone();
                    if !path.is_empty() {
                        path.push(b'/');
                    }
                    path.extend_from_slice(name);
                    dirty.insert(path);
                }
            }
            let mut dirty: Vec<Vec<u8>> = dirty.into_iter().collect();
            dirty.sort();
            Ok(dirty)
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
                    let bytes = full.as_os_str().as_bytes();
                    if bytes.contains(&b'\n') || bytes.first() == Some(&b'"') || rel.contains(&0) {
                        return Err(miss("a path the helpers cannot take"));
                    }
                    let mode = if meta.mode() & 0o100 != 0 {
                        0o100755
                    } else {
                        0o100644
                    };
                    files.push((rel.clone(), full, mode));
                }
                if files.is_empty() {
                    continue;
                }
                let h = self.helpers()?;
                for (rel, full, _) in &files {
                    h.ignore.stdin.write_all(rel)?;
                    h.ignore.stdin.write_all(b"\0")?;
                    h.blobs.stdin.write_all(full.as_os_str().as_bytes())?;
                    h.blobs.stdin.write_all(b"\n")?;
                }
                h.ignore.stdin.flush()?;
                h.blobs.stdin.flush()?;
                for (rel, _, mode) in files {
                    let ignored = read_ignored(&mut h.ignore)?;
                    let oid = read_oid(&mut h.blobs)?;
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

        /// The entries of many `(directory, tree id)`s, the ones not cached
        /// asked for all at once. Cached entries are taken out of the cache:
        /// the caller puts back the directory's next version.
        fn read_trees(
            &mut self,
            wanted: &[(Vec<u8>, String)],
        ) -> std::result::Result<Vec<TreeEntries>, Miss> {
            let mut out: Vec<Option<TreeEntries>> = Vec::with_capacity(wanted.len());
            let mut missing = Vec::new();
            for (i, (dir, oid)) in wanted.iter().enumerate() {
                match self.trees.remove(dir) {
                    Some((cached, entries)) if cached == *oid => {
                        self.cached_entries -= entries.len();
                        out.push(Some(entries));
                    }
                    other => {
                        if let Some((_, entries)) = other {
                            self.cached_entries -= entries.len();
                        }
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
            if !missing.is_empty() {
                let h = self.helpers()?;
                // Requests are 41 bytes: a chunk cannot fill the request pipe
                // while git waits for its answers to be read.
                for chunk in missing.chunks(512) {
                    for &i in chunk {
                        h.cat.stdin.write_all(wanted[i].1.as_bytes())?;
                        h.cat.stdin.write_all(b"\n")?;
                    }
                    h.cat.stdin.flush()?;
                    for &i in chunk {
                        let oid = &wanted[i].1;
                        let Some((_, kind, body)) = read_object(&mut h.cat)? else {
                            return Err(miss(format!("tree {oid} missing")));
                        };
                        if kind != "tree" {
                            return Err(miss(format!("{oid} is a {kind}")));
                        }
                        out[i] = Some(
                            parse_tree(&body)
                                .ok_or_else(|| miss(format!("tree {oid} unreadable")))?,
                        );
                    }
                }
            }
            out.into_iter()
                .map(|e| e.ok_or_else(|| miss("tree not read")))
                .collect()
        }

        fn remember_tree(&mut self, dir: Vec<u8>, oid: String, entries: TreeEntries) {
            if let Some((_, old)) = self.trees.remove(&dir) {
                self.cached_entries -= old.len();
            }
            if self.cached_entries + entries.len() > MAX_CACHED_ENTRIES {
                self.trees.clear();
                self.cached_entries = 0;
            }
            self.cached_entries += entries.len();
            self.trees.insert(dir, (oid, entries));
        }

        /// `base` (a tree id, `None` = empty) with `changes` applied; `None`
        /// when it ends up empty. Only the directories on changed paths are
        /// read and written, level by level: one pipelined `cat-file` round
        /// per depth going down, one `hash-object -t tree` batch per depth
        /// coming up.
        /// Records `(status, path)` of every real change.
        fn build_tree(
            &mut self,
            base: Option<&str>,
            changes: &BTreeMap<Vec<u8>, Change>,
            changed: &mut Vec<(u8, Vec<u8>)>,
        ) -> std::result::Result<Option<String>, Miss> {
            // Every directory on a changed path, by depth ("" is depth 0).
            let mut levels: Vec<Vec<Vec<u8>>> = vec![vec![Vec::new()]];
            let mut seen: HashSet<Vec<u8>> = HashSet::new();
            for path in changes.keys() {
                for (i, b) in path.iter().enumerate() {
                    if *b != b'/' {
                        continue;
                    }
                    let dir = path[..i].to_vec();
                    let depth = dir.iter().filter(|c| **c == b'/').count() + 1;
                    if seen.insert(dir.clone()) {
                        if levels.len() <= depth {
                            levels.resize(depth + 1, Vec::new());
                        }
                        levels[depth].push(dir);
                    }
                }
            }
            // Going down: each directory's entries in the base (empty if new).
            let mut trees: HashMap<Vec<u8>, TreeEntries> = HashMap::new();
            let mut oid_of: HashMap<Vec<u8>, String> = HashMap::new();
            if let Some(root) = base {
                oid_of.insert(Vec::new(), root.to_owned());
            }
            for level in &levels {
                let known: Vec<(Vec<u8>, String)> = level
                    .iter()
                    .filter_map(|d| oid_of.get(d).map(|o| (d.clone(), o.clone())))
                    .collect();
                let read = self.read_trees(&known)?;
                for ((dir, _), entries) in known.into_iter().zip(read) {
                    trees.insert(dir, entries);
                }
                for dir in level {
                    let entries = trees.entry(dir.clone()).or_default();
                    for (name, (mode, oid)) in entries.iter() {
                        let child = join(dir, name);
                        if seen.contains(&child) {
                            if *mode != 0o040000 {
                                return Err(miss("a file became a directory"));
                            }
                            oid_of.insert(child, oid.clone());
                        }
                    }
                }
            }
            // File changes, each in its directory.
            for (path, change) in changes {
                let (dir, name) = match path.iter().rposition(|b| *b == b'/') {
                    Some(i) => (&path[..i], &path[i + 1..]),
                    None => (&path[..0], &path[..]),
                };
                let entries = trees
                    .get_mut(dir)
                    .ok_or_else(|| miss("directory not loaded"))?;
                let old = entries.get(name).cloned();
                if matches!(old, Some((m, _)) if m == 0o040000 || m == 0o160000) {
                    return Err(miss("a directory became a file"));
                }
                match (change, old) {
                    (Change::Remove, Some(_)) => {
                        entries.remove(name);
                        changed.push((b'D', path.clone()));
                    }
                    (Change::Remove, None) | (Change::SetIfTracked { .. }, None) => {}
                    (Change::Set { mode, oid } | Change::SetIfTracked { mode, oid }, old) => {
                        match old {
                            Some((m, o)) if m == *mode && o == *oid => {}
                            Some((0o120000, _)) => changed.push((b'T', path.clone())),
                            Some(_) => changed.push((b'M', path.clone())),
                            None => changed.push((b'A', path.clone())),
                        }
                        entries.insert(name.to_vec(), (*mode, oid.clone()));
                    }
                }
            }
            // Coming up: write each level in one batch, deepest first. Each
            // tree is encoded here and handed to `hash-object -t tree` as a
            // file (git checks the format; unlike `mktree` it does not look up
            // every entry's object, which costs an open per loose object).
            let mut root = None;
            let mut files = Vec::new();
            for level in levels.iter().rev() {
                let mut written = Vec::new();
                for dir in level {
                    let entries = trees.remove(dir).unwrap_or_default();
                    if entries.is_empty() {
                        if !dir.is_empty() {
                            set_child(&mut trees, dir, None);
                        }
                        continue;
                    }
                    written.push((dir, entries));
                }
                if written.is_empty() {
                    continue;
                }
                let mut oids = Vec::with_capacity(written.len());
                for chunk in written.chunks(256) {
                    for (i, (_, entries)) in chunk.iter().enumerate() {
                        if files.len() <= i {
                            files.push(self.store.git_dir.join(format!("bh-live-tree-{i}")));
                        }
                        fs::write(&files[i], encode_tree(entries)?)?;
                    }
                    let h = self.helpers()?;
                    for file in &files[..chunk.len()] {
                        h.trees.stdin.write_all(file.as_os_str().as_bytes())?;
                        h.trees.stdin.write_all(b"\n")?;
                    }
                    h.trees.stdin.flush()?;
                    for _ in 0..chunk.len() {
                        oids.push(read_oid(&mut h.trees)?);
                    }
                }
                for ((dir, entries), oid) in written.into_iter().zip(oids) {
                    if dir.is_empty() {
                        root = Some(oid.clone());
                    } else {
                        set_child(&mut trees, dir, Some(oid.clone()));
                    }
                    self.remember_tree(dir.clone(), oid, entries);
                }
            }
            for file in files {
                let _ = fs::remove_file(file);
            }
            Ok(root)
        }

        /// Writes a parentless commit object (as `commit-tree` does).
        fn write_commit(
            &mut self,
            tree: &str,
            message: &str,
            time_ms: i64,
        ) -> std::result::Result<String, Miss> {
            let ident = format!(
                "Better Harness <checkpoints@better-harness.invalid> {} +0000",
                time_ms / 1000
            );
            let body = format!("tree {tree}\nauthor {ident}\ncommitter {ident}\n\n{message}");
            let file: PathBuf = self.store.git_dir.join("bh-live-commit");
            fs::write(&file, body.as_bytes())?;
            let h = self.helpers()?;
            h.commits.stdin.write_all(file.as_os_str().as_bytes())?;
            h.commits.stdin.write_all(b"\n")?;
            h.commits.stdin.flush()?;
            let oid = read_oid(&mut h.commits);
            let _ = fs::remove_file(&file);
            oid
        }
    }

    fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
        let mut p = dir.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        p
    }

    /// Sets (or, for `None`, removes) directory `dir`'s entry in its parent.
    fn set_child(trees: &mut HashMap<Vec<u8>, TreeEntries>, dir: &[u8], oid: Option<String>) {
        let (parent, name) = match dir.iter().rposition(|b| *b == b'/') {
            Some(i) => (&dir[..i], &dir[i + 1..]),
            None => (&dir[..0], dir),
        };
        let entries = trees.entry(parent.to_vec()).or_default();
        match oid {
            Some(oid) => {
                entries.insert(name.to_vec(), (0o040000, oid));
            }
            None => {
                entries.remove(name);
            }
        }
    }

    /// A tree object's bytes: entries in git's order (a directory sorts as
    /// if its name ended in `/`), each `mode SP name NUL oid(20 bytes)`.
    fn encode_tree(entries: &TreeEntries) -> std::result::Result<Vec<u8>, Miss> {
        let mut sorted: Vec<(&Vec<u8>, &(u32, String))> = entries.iter().collect();
        let key = |name: &[u8], mode: u32| {
            let mut k = name.to_vec();
            if mode == 0o040000 {
                k.push(b'/');
            }
            k
        };
        sorted.sort_by_key(|(name, (mode, _))| key(name, *mode));
        let mut out = Vec::with_capacity(entries.len() * 48);
        for (name, (mode, oid)) in sorted {
            out.extend_from_slice(format!("{mode:o} ").as_bytes());
            out.extend_from_slice(name);
            out.push(0);
            let raw = hex::decode(oid).map_err(|_| miss(format!("odd object id {oid}")))?;
            if raw.len() != 20 {
                return Err(miss(format!("odd object id {oid}")));
            }
            out.extend_from_slice(&raw);
        }
        Ok(out)
    }

    /// One `check-ignore -v -n -z` answer: `source line pattern path`, each
    /// NUL-terminated; ignored when a pattern matched and it is not a negation.
    fn read_ignored(p: &mut GitProcess) -> std::result::Result<bool, Miss> {
        let mut fields = Vec::with_capacity(4);
        for _ in 0..4 {
            let mut field = Vec::new();
            p.stdout.read_until(0, &mut field)?;
            if field.pop() != Some(0) {
                return Err(miss("check-ignore ended"));
            }
            fields.push(field);
        }
        let pattern = &fields[2];
        Ok(!pattern.is_empty() && pattern.first() != Some(&b'!'))
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
        let mut line = String::new();
        p.stdout.read_line(&mut line)?;
        let oid = line.trim_end();
        if oid.len() == 40 && oid.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(oid.to_owned())
        } else {
            Err(miss(format!("{} said {line:?}", p.argv())))
        }
    }

    /// One `cat-file --batch` answer: `None` for "missing".
    #[allow(clippy::type_complexity)]
    fn read_object(
        p: &mut GitProcess,
    ) -> std::result::Result<Option<(String, String, Vec<u8>)>, Miss> {
        let mut header = String::new();
        p.stdout.read_line(&mut header)?;
        let parts: Vec<&str> = header.trim_end().split(' ').collect();
        match parts.as_slice() {
            [_, "missing"] | [_, "ambiguous"] => Ok(None),
            [oid, kind, size] => {
                let size: usize = size.parse().map_err(|_| miss("cat-file size"))?;
                let mut body = vec![0; size + 1];
                p.stdout.read_exact(&mut body)?;
                body.pop();
                Ok(Some(((*oid).to_owned(), (*kind).to_owned(), body)))
            }
            _ => Err(miss(format!("cat-file said {header:?}"))),
        }
    }

    /// Binary tree entries: `mode SP name NUL oid(20)`.
    fn parse_tree(mut body: &[u8]) -> Option<TreeEntries> {
        let mut out = BTreeMap::new();
        while !body.is_empty() {
            let sp = body.iter().position(|b| *b == b' ')?;
            let mode = u32::from_str_radix(std::str::from_utf8(&body[..sp]).ok()?, 8).ok()?;
            let rest = &body[sp + 1..];
            let nul = rest.iter().position(|b| *b == 0)?;
            let name = rest[..nul].to_vec();
            let oid = rest.get(nul + 1..nul + 21)?;
            out.insert(name, (mode, hex::encode(oid)));
            body = &rest[nul + 21..];
        }
        Some(out)
    }
}
