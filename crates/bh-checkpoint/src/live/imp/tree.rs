//! Building the trees and the commit of a fast snapshot from the last
//! checkpoint's tree and the changed files alone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use super::{Change, Live, MAX_CACHED_ENTRIES, Miss, TreeEntries, miss, parse_tree, read_object};
use bh_git::loose::write_loose;

impl Live {
    /// A cached directory's entries if they are those of tree `oid`; taken
    /// out of the cache either way (the caller puts back the directory's
    /// next version).
    fn take_cached(&mut self, dir: &[u8], oid: &str) -> Option<TreeEntries> {
        let (cached, entries) = self.trees.remove(dir)?;
        self.cached_entries -= entries.len();
        (cached == oid).then_some(entries)
    }

    /// Each directory of `levels` (`seen` holds them all) as it is in the
    /// base tree (empty when new).
    /// Taken from the cache when the parent's entry names the cached
    /// version; the rest are asked of `cat-file` in one pipelined round as
    /// `<base>:<dir>`, whatever their depth — a directory not cached
    /// usually has ancestors that are not either, and a round per level is
    /// a hand-off to git per level, each waiting for the scheduler on a
    /// loaded machine. Every directory is then checked against its parent's
    /// entry, wherever either came from.
    fn load_base(
        &mut self,
        base: Option<&str>,
        levels: &[Vec<Vec<u8>>],
        seen: &HashSet<Vec<u8>>,
    ) -> std::result::Result<HashMap<Vec<u8>, TreeEntries>, Miss> {
        let mut trees: HashMap<Vec<u8>, TreeEntries> = HashMap::new();
        let mut oid_of: HashMap<Vec<u8>, String> = HashMap::new();
        if let Some(root) = base {
            oid_of.insert(Vec::new(), root.to_owned());
            let mut fetch: Vec<Vec<u8>> = Vec::new();
            let mut fetching: HashSet<&[u8]> = HashSet::new();
            for dir in levels.iter().flatten() {
                let parent_fetched = !dir.is_empty() && fetching.contains(parent_of(dir));
                let cached = match (parent_fetched, oid_of.get(dir).cloned()) {
                    (false, Some(oid)) => self.take_cached(dir, &oid),
                    // New in this snapshot: its (loaded) parent has no such entry.
                    (false, None) => continue,
                    (true, _) => None,
                };
                match cached {
                    Some(entries) => {
                        note_children(dir, &entries, seen, &mut oid_of);
                        trees.insert(dir.clone(), entries);
                    }
                    None => {
                        fetch.push(dir.clone());
                        fetching.insert(dir);
                    }
                }
            }
            // A request is one line: a name holding a newline would be two
            // requests, and every later answer would pair with the wrong one.
            if fetch.iter().any(|d| d.contains(&b'\n')) {
                return Err(miss("a directory name holds a newline"));
            }
            // One round: requests bounded in bytes so that they always fit
            // in the pipe while git may be blocked writing answers.
            let h = self.helpers()?;
            let mut rest = fetch.as_slice();
            while !rest.is_empty() {
                let mut request = Vec::new();
                let mut n = 0;
                while n < rest.len() && (n == 0 || request.len() + rest[n].len() < 16 << 10) {
                    request.extend_from_slice(root.as_bytes());
                    if !rest[n].is_empty() {
                        request.push(b':');
                        request.extend_from_slice(&rest[n]);
                    }
                    request.push(b'\n');
                    n += 1;
                }
                h.cat.stdin.write_all(&request)?;
                h.cat.stdin.flush()?;
                for dir in &rest[..n] {
                    match read_object(&mut h.cat)? {
                        None if dir.is_empty() => return Err(miss(format!("tree {root} missing"))),
                        // Not in the base: a new directory.
                        None => {}
                        Some((oid, kind, body)) => {
                            if dir.is_empty() && oid != *root {
                                return Err(miss(format!("asked for tree {root}, got {oid}")));
                            }
                            if kind != "tree" {
                                return Err(miss("a file became a directory"));
                            }
                            let entries = parse_tree(&body)
                                .ok_or_else(|| miss(format!("tree {oid} unreadable")))?;
                            oid_of.insert(dir.clone(), oid);
                            trees.insert(dir.clone(), entries);
                        }
                    }
                }
                rest = &rest[n..];
            }
        }
        for dir in levels.iter().flatten() {
            trees.entry(dir.clone()).or_default();
        }
        // Every directory agrees with its parent's entry: a tree of that id,
        // or no entry and a new (empty) directory.
        for dir in levels.iter().skip(1).flatten() {
            let name = &dir[dir.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1)..];
            let entry = trees.get(parent_of(dir)).and_then(|t| t.get(name));
            match (entry, oid_of.get(dir)) {
                (Some((0o040000, o)), Some(oid)) if o == oid => {}
                (None, None) => {}
                (Some((0o040000, _)), _) | (None, Some(_)) => {
                    return Err(miss("a directory's tree disagrees with its parent"));
                }
                (Some(_), _) => return Err(miss("a file became a directory")),
            }
        }
        Ok(trees)
    }

    pub(super) fn remember_tree(&mut self, dir: Vec<u8>, oid: String, entries: TreeEntries) {
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
    /// read and written: one pipelined `cat-file` round going down for all
    /// trees not cached ([`Live::load_base`]), the new trees written
    /// in-process coming up, level by level.
    /// Records `(status, path)` of every real change.
    pub(super) fn build_tree(
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
        let mut trees = self.load_base(base, &levels, &seen)?;
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
        // Coming up: deepest first, each tree encoded and written here
        // (`objects`), its id set in its parent.
        let objects = self.store.git_dir.join("objects");
        let mut root = None;
        for level in levels.iter().rev() {
            for dir in level {
                let entries = trees.remove(dir).unwrap_or_default();
                if entries.is_empty() {
                    if !dir.is_empty() {
                        set_child(&mut trees, dir, None);
                    }
                    continue;
                }
                let oid = write_loose(&objects, "tree", &encode_tree(&entries)?)?;
                if dir.is_empty() {
                    root = Some(oid.clone());
                } else {
                    set_child(&mut trees, dir, Some(oid.clone()));
                }
                self.remember_tree(dir.clone(), oid, entries);
            }
        }
        Ok(root)
    }

    /// Writes a parentless commit object (as `commit-tree` does).
    pub(super) fn write_commit(
        &mut self,
        tree: &str,
        message: &str,
        time_ms: i64,
    ) -> std::result::Result<String, Miss> {
        let ident = bh_git::object::ident(
            "Better Harness",
            "checkpoints@better-harness.invalid",
            time_ms / 1000,
            "+0000",
        );
        let body = bh_git::object::encode_commit(tree, &[], &ident, &ident, message)
            .map_err(|e| miss(e.to_string()))?;
        Ok(write_loose(
            &self.store.git_dir.join("objects"),
            "commit",
            &body,
        )?)
    }
}

/// The directory holding `dir` ("" for a top-level one).
fn parent_of(dir: &[u8]) -> &[u8] {
    &dir[..dir.iter().rposition(|b| *b == b'/').unwrap_or(0)]
}

/// The base ids of `dir`'s subdirectories on changed paths.
fn note_children(
    dir: &[u8],
    entries: &TreeEntries,
    seen: &HashSet<Vec<u8>>,
    oid_of: &mut HashMap<Vec<u8>, String>,
) {
    for (name, (mode, oid)) in entries {
        let child = join(dir, name);
        // A non-tree entry is refused by `load_base`'s check.
        if *mode == 0o040000 && seen.contains(&child) {
            oid_of.insert(child, oid.clone());
        }
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

/// A tree object's bytes (`bh_git::object`).
fn encode_tree(entries: &TreeEntries) -> std::result::Result<Vec<u8>, Miss> {
    bh_git::object::encode_tree(
        entries
            .iter()
            .map(|(name, (mode, oid))| (name.as_slice(), *mode, oid.as_str())),
    )
    .map_err(|e| miss(e.to_string()))
}
