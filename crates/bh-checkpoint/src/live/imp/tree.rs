//! Building the trees and the commit of a fast snapshot from the last
//! checkpoint's tree and the changed files alone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use super::objects::write_loose;
use super::{Change, Live, MAX_CACHED_ENTRIES, Miss, TreeEntries, miss, parse_tree, read_object};

impl Live {
    /// The entries of many `(directory, tree id)`s, the ones not cached
    /// asked for all at once. Cached entries are taken out of the cache:
    /// the caller puts back the directory's next version.
    pub(super) fn read_trees(
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
                        parse_tree(&body).ok_or_else(|| miss(format!("tree {oid} unreadable")))?,
                    );
                }
            }
        }
        out.into_iter()
            .map(|e| e.ok_or_else(|| miss("tree not read")))
            .collect()
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
    /// read and written, level by level: one pipelined `cat-file` round
    /// per depth going down (for trees not cached), the new trees written
    /// in-process coming up.
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
