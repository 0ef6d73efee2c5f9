//! The watch over the project: which folders a snapshot can see, and the
//! files the events since the last snapshot name.

use fs_err as fs;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::os::unix::ffi::OsStrExt;

use bh_git::GitProcess;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::{Live, MAX_WATCHES, Miss, Watch, WatchedDir, miss};
use crate::paths::fs_path;

impl Live {
    /// Watches every directory a snapshot can see.
    pub(super) fn arm(&mut self) -> std::result::Result<Watch, Miss> {
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
    pub(super) fn tracked_dirs(&self) -> std::result::Result<HashSet<Vec<u8>>, Miss> {
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

    pub(super) fn is_ignored_dir(&mut self, rel: &[u8]) -> std::result::Result<bool, Miss> {
        let mut query = rel.to_vec();
        query.push(b'/');
        self.is_ignored(&query)
    }

    /// Asks `check-ignore` (without the index) whether `rel` is ignored.
    pub(super) fn is_ignored(&mut self, rel: &[u8]) -> std::result::Result<bool, Miss> {
        if rel.contains(&0) {
            return Err(miss("NUL in path"));
        }
        let h = self.helpers()?;
        h.ignore.stdin.write_all(rel)?;
        h.ignore.stdin.write_all(b"\0")?;
        h.ignore.stdin.flush()?;
        read_ignored(&mut h.ignore)
    }

    /// Files named by the events since the last snapshot; a miss for
    /// anything but plain file events in watched directories.
    pub(super) fn drain_events(&mut self) -> std::result::Result<Vec<Vec<u8>>, Miss> {
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
}

/// One `check-ignore -v -n -z` answer: `source line pattern path`, each
/// NUL-terminated; ignored when a pattern matched and it is not a negation.
pub(super) fn read_ignored(p: &mut GitProcess) -> std::result::Result<bool, Miss> {
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
