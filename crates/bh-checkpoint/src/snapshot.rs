//! Taking a snapshot: stage the work tree into the shadow index, write a tree,
//! and commit it unless nothing changed since the last checkpoint.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bh_git::parse::{self, StatusEntry};
use serde::Serialize;

use crate::diff::DiffEntry;
use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint, NewMeta, Skipped, SnapshotRequest};
use crate::paths::fs_path;
use crate::store::{EMPTY_TREE, Store, now_ms, trim_line, write_atomic};

/// Untracked files at which a snapshot pre-hashes new files in parallel.
const PREHASH_MIN_FILES: usize = 512;

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
        self.snapshot_locked(request, "snapshot")
    }

    pub(crate) fn snapshot_locked(
        &self,
        request: &SnapshotRequest,
        kind: &str,
    ) -> Result<SnapshotOutcome> {
        // Reading the last checkpoint is independent of staging: overlap them.
        let (staged, last) = std::thread::scope(|scope| {
            let last = scope.spawn(|| self.last_checkpoint());
            let staged = self.stage_current();
            let last = last.join().unwrap_or_else(|_| {
                Err(CheckpointError::Corrupt {
                    store: self.dir.clone(),
                    detail: "reading the last checkpoint panicked".into(),
                })
            });
            (staged, last)
        });
        let (staged, last) = (staged?, last?);
        let shadow = self.shadow();
        if let Some(prev) = &last
            && prev.tree == staged.tree
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
        self.sync_exclude()?;
        let index = self.git_dir.join("index");
        let mut seeded = false;
        let mut seed_skipped = Vec::new();
        if !index.exists()
            && let Some(skipped) = self.seed()?
        {
            seeded = true;
            seed_skipped = skipped;
        }
        let mut pass = self.stage()?;
        let shadow = self.shadow();
        let tree = match shadow.run(["write-tree"]) {
            Ok(out) => out,
            Err(_) if seeded => {
                // The seeded index names an object the user's store did not give
                // us (e.g. it lives in one of their alternates): start over.
                let _ = fs::remove_file(&index);
                let _ = shadow.run(["update-ref", "-d", "refs/heads/bh-base"]);
                seeded = false;
                seed_skipped.clear();
                pass = self.stage()?;
                shadow.run(["write-tree"])?
            }
            Err(err) => return Err(err.into()),
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

    /// One pass of `status` → `update-index`: what was not captured, and
    /// what changed against the base when status proves it.
    fn stage(&self) -> Result<Pass> {
        // Optimistic: do not open every file first. If git then meets a file it
        // cannot read, look again, opening each candidate, and skip those.
        match self.stage_pass(false) {
            Err(CheckpointError::Git(err)) if err.stderr().contains("Unable to process path") => {
                self.stage_pass(true)
            }
            other => other,
        }
    }

    fn stage_pass(&self, check_readable: bool) -> Result<Pass> {
        let shadow = self.shadow();
        let status = shadow
            .cmd([
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=all",
                "--no-renames",
                "--ignore-submodules=all",
            ])
            .run()?;
        let entries =
            parse::status_v2(&status.stdout).map_err(|detail| CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail: format!("cannot parse git status: {detail}"),
            })?;
        let mut update: Vec<&[u8]> = Vec::new();
        let mut force_remove: Vec<&[u8]> = Vec::new();
        let mut prehash: Vec<(&[u8], u64)> = Vec::new();
        let mut skipped = Vec::new();
        // Changes against HEAD, exact only while the index matched HEAD.
        let mut changes: Option<Vec<(u8, Vec<u8>)>> = Some(Vec::new());
        for entry in &entries {
            let (path, tracked, change) = match entry {
                StatusEntry::Changed { x: b'.', y, path } if *y != b'.' => (path, true, *y),
                StatusEntry::Changed { y, path, .. } | StatusEntry::Renamed { y, path, .. } => {
                    changes = None;
                    if *y == b'.' {
                        continue;
                    }
                    (path, true, *y)
                }
                StatusEntry::Unmerged { path } => {
                    changes = None;
                    (path, true, b'M')
                }
                StatusEntry::Untracked { path } => (path, false, b'A'),
                StatusEntry::Ignored { .. } => continue,
            };
            if let Some(dir) = path.strip_suffix(b"/") {
                skipped.push(Skipped {
                    path: parse::display_path(dir),
                    reason: "nested repository".into(),
                });
                continue;
            }
            let full = fs_path(&self.project, path);
            let before = (update.len(), force_remove.len());
            if change == b'D' {
                // git saw it gone (possibly "beyond a symbolic link", which
                // update-index refuses): drop it without looking again.
                force_remove.push(path);
                if let Some(list) = changes.as_mut() {
                    list.push((b'D', path.clone()));
                }
                continue;
            }
            match fs::symlink_metadata(&full) {
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    update.push(path)
                }
                Err(e) => {
                    skipped.push(Skipped {
                        path: parse::display_path(path),
                        reason: format!("cannot inspect: {e}"),
                    });
                    if tracked {
                        force_remove.push(path);
                    }
                }
                Ok(meta) if meta.is_symlink() => update.push(path),
                Ok(meta) if meta.is_dir() => force_remove.push(path),
                Ok(meta) if meta.is_file() => {
                    let reason = if meta.len() > self.max_file_size {
                        Some(format!(
                            "larger than the {} size cap",
                            human_size(self.max_file_size)
                        ))
                    } else if check_readable {
                        match File::open(&full) {
                            Ok(_) => None,
                            Err(e) => Some(format!("unreadable: {e}")),
                        }
                    } else {
                        None
                    };
                    match reason {
                        Some(reason) => {
                            skipped.push(Skipped {
                                path: parse::display_path(path),
                                reason,
                            });
                            if tracked {
                                force_remove.push(path);
                            }
                        }
                        None => {
                            if !tracked {
                                prehash.push((path, meta.len()));
                            }
                            update.push(path);
                        }
                    }
                }
                Ok(_) => {
                    skipped.push(Skipped {
                        path: parse::display_path(path),
                        reason: "not a regular file, directory or symlink".into(),
                    });
                    if tracked {
                        force_remove.push(path);
                    }
                }
            }
            if let Some(list) = changes.as_mut() {
                if force_remove.len() > before.1 {
                    list.push((b'D', path.clone()));
                } else if update.len() > before.0 {
                    list.push((change, path.clone()));
                }
            }
        }
        if let Some(list) = changes.as_mut() {
            list.sort_by(|a, b| a.1.cmp(&b.1));
        }
        if !force_remove.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--force-remove", "--stdin"])
                .stdin(nul_join(&force_remove))
                .run()?;
        }
        if prehash.len() >= PREHASH_MIN_FILES {
            self.prehash(&prehash);
        }
        if !update.is_empty() {
            shadow
                .cmd([
                    "update-index",
                    "-z",
                    "--add",
                    "--remove",
                    "--replace",
                    "--stdin",
                ])
                .stdin(nul_join(&update))
                .run()?;
        }
        Ok(Pass { skipped, changes })
    }

    /// Writes the objects of many new files with parallel workers, so the
    /// serial `update-index` that follows only hashes and finds every object
    /// present. Small files are streamed by `fast-import` into one pack per
    /// worker (no file per object); larger ones go through `hash-object -w`
    /// as uncompressed loose objects (fast-import is slow per byte). No file is
    /// ever held in memory. Purely an optimisation: `update-index` re-reads
    /// every file and is the source of truth, so a file changing meanwhile
    /// costs one unused object, and a failing worker costs only time.
    fn prehash(&self, files: &[(&[u8], u64)]) {
        // Measured on git 2.47 (ext4, 2 vCPUs): fast-import costs ~40µs per
        // blob but is slow per byte; a loose object costs ~130µs to create but
        // is cheap per byte, and creating files overlaps well beyond the core
        // count. Break-even is around 4 KiB.
        const SMALL: u64 = 4 * 1024;
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8);
        let mut sorted: Vec<&(&[u8], u64)> = files.iter().collect();
        sorted.sort_by_key(|f| std::cmp::Reverse(f.1));
        let mut small: Vec<(u64, Vec<(std::path::PathBuf, u64)>)> = vec![(0, Vec::new()); cores];
        let mut large: Vec<(u64, Vec<u8>)> = vec![(0, Vec::new()); cores * 2];
        for (path, size) in sorted {
            let plain_name = !path.contains(&b'\n') && !path.starts_with(b"\"");
            if *size >= SMALL && plain_name {
                if let Some(bucket) = large.iter_mut().min_by_key(|b| b.0) {
                    bucket.0 += size + 16 * 1024;
                    bucket.1.extend_from_slice(path);
                    bucket.1.push(b'\n');
                }
            } else if let Some(bucket) = small.iter_mut().min_by_key(|b| b.0) {
                bucket.0 += size + 1024;
                bucket.1.push((fs_path(&self.project, path), *size));
            }
        }
        let shadow = self.shadow();
        std::thread::scope(|scope| {
            for (_, list) in small.into_iter().filter(|b| !b.1.is_empty()) {
                let shadow = shadow.clone();
                scope.spawn(move || {
                    let _ = shadow
                        .cmd([
                            "-c",
                            "pack.compression=0",
                            "fast-import",
                            "--quiet",
                            "--depth=0",
                            "--big-file-threshold=8m",
                        ])
                        .run_streaming(move |out| stream_blobs(&list, out));
                });
            }
            for (_, list) in large.into_iter().filter(|b| !b.1.is_empty()) {
                let shadow = shadow.clone();
                scope.spawn(move || {
                    let _ = shadow
                        .cmd([
                            "-c",
                            "core.looseCompression=0",
                            "hash-object",
                            "-w",
                            "--no-filters",
                            "--stdin-paths",
                        ])
                        .stdin(list)
                        .run();
                });
            }
        });
    }

    /// Seeds an empty shadow from the user's own repository: their objects
    /// (hard-linked, else copied — never borrowed through alternates, so their
    /// `gc` cannot break a checkpoint) and their index, whose stat data lets the
    /// first snapshot skip re-hashing every unchanged file. Entries whose bytes
    /// the user's git converts (attributes, autocrlf) are dropped from the seed
    /// so they are re-read raw. Returns `None` when seeding does not apply.
    fn seed(&self) -> Result<Option<Vec<Skipped>>> {
        let Some(user) = &self.user else {
            return Ok(None);
        };
        if !user.is_top || !user.index.is_file() {
            return Ok(None);
        }
        let get = |key: &str| -> Option<String> {
            let out = user
                .repo
                .cmd(["config", "--get", key])
                .ok_codes(&[0, 1])
                .run()
                .ok()?;
            Some(String::from_utf8_lossy(trim_line(&out.stdout)).to_lowercase())
        };
        let autocrlf = get("core.autocrlf").unwrap_or_default();
        if autocrlf == "true" || autocrlf == "input" {
            return Ok(None);
        }
        if get("index.sparse").as_deref() == Some("true")
            || get("core.splitindex").as_deref() == Some("true")
            || has_shared_index(&user.git_dir)
        {
            return Ok(None);
        }
        link_objects(
            &user.common_dir.join("objects"),
            &self.git_dir.join("objects"),
        );
        let index = self.git_dir.join("index");
        let tmp = self.git_dir.join("index.seed.tmp");
        if fs::copy(&user.index, &tmp).is_err() || fs::rename(&tmp, &index).is_err() {
            let _ = fs::remove_file(&tmp);
            return Ok(None);
        }
        let shadow = self.shadow();
        // Compare status against the user's HEAD, so only their real changes show.
        if let Ok(head) = user
            .repo
            .run_line(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            && !head.is_empty()
            && shadow.run(["cat-file", "-e", &head]).is_ok()
        {
            shadow.run(["update-ref", "refs/heads/bh-base", &head])?;
        }
        let listing = shadow.run(["ls-files", "-z", "-s", "-v"])?;
        let mut gitlinks = Vec::new();
        let mut assumed = Vec::new();
        let mut skip_worktree = Vec::new();
        let mut all_paths = Vec::new();
        for rec in parse::split_z(&listing) {
            // "<tag> <mode> <oid> <stage>\t<path>"
            let Some(tab) = rec.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let (meta, path) = (&rec[..tab], &rec[tab + 1..]);
            let tag = meta.first().copied().unwrap_or(b'H');
            if meta.get(2..8) == Some(b"160000") {
                gitlinks.push(path);
                continue;
            }
            if tag == b'S' || tag == b's' {
                skip_worktree.push(path);
            }
            if tag.is_ascii_lowercase() {
                assumed.push(path);
            }
            all_paths.push(path);
        }
        let mut skipped = Vec::new();
        let mut drop: Vec<&[u8]> = gitlinks.clone();
        for g in &gitlinks {
            skipped.push(Skipped {
                path: parse::display_path(g),
                reason: "nested repository (submodule)".into(),
            });
        }
        let has_attribute_files = all_paths
            .iter()
            .any(|p| *p == b".gitattributes" || p.ends_with(b"/.gitattributes"));
        if has_attribute_files || self.user_has_global_attributes(user) {
            drop.extend(self.converted_paths(user, &all_paths)?);
        }
        if !drop.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--force-remove", "--stdin"])
                .stdin(nul_join(&drop))
                .run()?;
        }
        if !assumed.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--no-assume-unchanged", "--stdin"])
                .stdin(nul_join(&assumed))
                .run()?;
        }
        if !skip_worktree.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--no-skip-worktree", "--stdin"])
                .stdin(nul_join(&skip_worktree))
                .run()?;
        }
        Ok(Some(skipped))
    }

    /// Whether attributes could come from outside the work tree: the
    /// repository's `info/attributes`, `core.attributesFile`, or the default
    /// `$XDG_CONFIG_HOME/git/attributes` (`~/.config/git/attributes`).
    fn user_has_global_attributes(&self, user: &crate::user::UserRepo) -> bool {
        let non_empty = |p: &Path| fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false);
        if non_empty(&user.common_dir.join("info/attributes")) {
            return true;
        }
        let configured = user
            .repo
            .cmd(["config", "--path", "--get", "core.attributesFile"])
            .ok_codes(&[0, 1])
            .run()
            .map(|o| !trim_line(&o.stdout).is_empty())
            .unwrap_or(true);
        if configured {
            return true;
        }
        let xdg = self
            .runner
            .env_var("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| {
                self.runner
                    .env_var("HOME")
                    .map(|h| Path::new(h).join(".config"))
            });
        // Without a known home, assume the worst and check.
        xdg.is_none_or(|dir| fs::metadata(dir.join("git/attributes")).is_ok())
    }

    /// Paths whose stored bytes the user's git may convert (text/eol/crlf,
    /// filters, ident, working-tree-encoding), as the user's own attributes say.
    fn converted_paths<'a>(
        &self,
        user: &crate::user::UserRepo,
        paths: &[&'a [u8]],
    ) -> Result<Vec<&'a [u8]>> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let out = user
            .repo
            .cmd([
                "check-attr",
                "-z",
                "--stdin",
                "text",
                "eol",
                "crlf",
                "filter",
                "ident",
                "working-tree-encoding",
            ])
            .stdin(nul_join(paths))
            .run()?;
        let mut converted = std::collections::HashSet::new();
        let mut fields = parse::split_z(&out.stdout);
        while let (Some(path), Some(_attr), Some(value)) =
            (fields.next(), fields.next(), fields.next())
        {
            if value != b"unspecified" && value != b"unset" {
                converted.insert(path);
            }
        }
        Ok(paths
            .iter()
            .copied()
            .filter(|p| converted.contains(p))
            .collect())
    }
}

/// Feeds `fast-import` one `blob` command per file, exactly `size` bytes each
/// (padded or cut if the file changed since it was measured).
fn stream_blobs(
    files: &[(std::path::PathBuf, u64)],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let mut buf = vec![0u8; 1 << 16];
    for (path, size) in files {
        let Ok(file) = File::open(path) else { continue };
        write!(out, "blob\ndata {size}\n")?;
        let mut left = *size;
        let mut reader = file.take(*size);
        while left > 0 {
            let n = match reader.read(&mut buf) {
                Ok(0) | Err(_) => {
                    // shorter than measured: pad, the object is simply unused
                    let pad = usize::try_from(left.min(buf.len() as u64)).unwrap_or(0);
                    buf[..pad].fill(0);
                    pad
                }
                Ok(n) => n,
            };
            out.write_all(&buf[..n])?;
            left -= n as u64;
        }
        out.write_all(b"\n")?;
    }
    out.flush()
}

fn nul_join(paths: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(paths.iter().map(|p| p.len() + 1).sum());
    for p in paths {
        out.extend_from_slice(p);
        out.push(0);
    }
    out
}

fn has_shared_index(git_dir: &Path) -> bool {
    fs::read_dir(git_dir)
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_name().as_bytes().starts_with(b"sharedindex."))
        })
        .unwrap_or(false)
}

/// Hard-links (or copies, across file systems) the user's packs and loose
/// objects into the shadow. Objects are immutable, so a link shares bytes with
/// the user's store without ever depending on it: their `gc` removes only
/// their own name for the file.
fn link_objects(from: &Path, to: &Path) {
    let link = |src: &Path, dst: &Path| {
        if dst.exists() {
            return;
        }
        if fs::hard_link(src, dst).is_err() {
            let _ = fs::copy(src, dst);
        }
    };
    if let Ok(packs) = fs::read_dir(from.join("pack")) {
        let _ = fs::create_dir_all(to.join("pack"));
        let mut names: Vec<_> = packs.flatten().map(|e| e.file_name()).collect();
        // Index after pack, so a reader never sees an index without its pack.
        names.sort_by_key(|n| n.as_bytes().ends_with(b".idx"));
        for name in names {
            let bytes = name.as_bytes();
            if bytes.ends_with(b".pack") || bytes.ends_with(b".idx") {
                link(&from.join("pack").join(&name), &to.join("pack").join(&name));
            }
        }
    }
    let Ok(dirs) = fs::read_dir(from) else {
        return;
    };
    let fanout: Vec<std::path::PathBuf> = dirs
        .flatten()
        .filter(|d| {
            let name = d.file_name();
            let b = name.as_bytes();
            b.len() == 2 && b.iter().all(|c| c.is_ascii_hexdigit())
        })
        .map(|d| d.path())
        .collect();
    // Loose objects are one file each: link the 256 fan-out folders in parallel.
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(dir) = fanout.get(i) else { break };
                    let Ok(objects) = fs::read_dir(dir) else {
                        continue;
                    };
                    let Some(name) = dir.file_name() else {
                        continue;
                    };
                    let target = to.join(name);
                    let _ = fs::create_dir_all(&target);
                    for obj in objects.flatten() {
                        link(&obj.path(), &target.join(obj.file_name()));
                    }
                }
            });
        }
    });
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
