//! The result tree: the base tree with the overlay's files, built bottom-up
//! — only the folders on the way to a written file are read and rewritten
//! (`git mktree`), so the cost follows the change, not the repository.
//!
//! A file new to the base that the repository ignores is left out, as
//! `git add -A` in a checkout leaves it out. Which ones are is asked of git
//! itself (`check-ignore --no-index`) in a scratch folder holding only the
//! new files (empty) and the `.gitignore` files of their folders as the run
//! left them; the user's exclude files (`info/exclude`, `core.excludesFile`)
//! apply as in the checkout.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bh_git::Scope;
use bh_git::object::{MODE_GITLINK, MODE_TREE};
use fs_err as fs;

use crate::error::{VfsError, io};
use crate::{State, VirtualTree, Written, join};

/// A tree entry to be: mode, object id.
type Slot = (u32, String);

impl VirtualTree {
    /// The tree of the base with every file the run wrote (new ignored
    /// files left out). `scratch` is a folder of the caller's that this may
    /// fill and empties again.
    pub fn tree(&self, scratch: &Path) -> Result<String, VfsError> {
        let mut st = self.lock()?;
        // The overlay is set aside while the base's trees are read (and put
        // back whatever happens).
        let written = std::mem::take(&mut st.written);
        let result = self.build(&mut st, &written, scratch);
        st.written = written;
        result
    }

    fn build(
        &self,
        st: &mut State,
        written: &BTreeMap<Vec<Vec<u8>>, Written>,
        scratch: &Path,
    ) -> Result<String, VfsError> {
        let mut new = Vec::new();
        for key in written.keys() {
            if !self.in_base(st, key) {
                new.push(key.clone());
            }
        }
        let ignored = self.ignored(st, written, &new, scratch)?;
        let kept: Vec<(&Vec<Vec<u8>>, &Written)> = written
            .iter()
            .filter(|(k, _)| !ignored.contains(*k))
            .collect();
        if kept.is_empty() {
            return Ok(self.base_tree.clone());
        }
        let blobs = self.hash_blobs(kept.iter().map(|(_, w)| w.bytes.as_slice()), scratch)?;
        // The folders to rewrite, and each one's new entries.
        let mut slots: BTreeMap<Vec<Vec<u8>>, BTreeMap<Vec<u8>, Slot>> = BTreeMap::new();
        for ((key, w), blob) in kept.iter().zip(blobs) {
            let Some((name, dir)) = key.split_last() else {
                continue;
            };
            slots
                .entry(dir.to_vec())
                .or_default()
                .insert(name.clone(), (w.mode, blob));
            for depth in 0..dir.len() {
                slots.entry(dir[..depth].to_vec()).or_default();
            }
        }
        // Deepest first: a folder's new id goes into its parent.
        let mut dirs: Vec<Vec<Vec<u8>>> = slots.keys().cloned().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.len()));
        let mut root = self.base_tree.clone();
        for dir in dirs {
            let mut entries: BTreeMap<Vec<u8>, Slot> = BTreeMap::new();
            if let Some(tree) = self.base_tree_at(st, &dir)? {
                for e in self.tree_entries(st, &tree)?.iter() {
                    entries.insert(e.name.clone(), (e.mode, e.oid.clone()));
                }
            }
            entries.extend(slots.remove(&dir).unwrap_or_default());
            let oid = self.mktree(&entries)?;
            match dir.split_last() {
                Some((name, parent)) => {
                    slots
                        .entry(parent.to_vec())
                        .or_default()
                        .insert(name.clone(), (MODE_TREE, oid));
                }
                None => root = oid,
            }
        }
        Ok(root)
    }

    /// Whether `key` names a file of the base (not one the run made).
    fn in_base(&self, st: &mut State, key: &[Vec<u8>]) -> bool {
        let Some((name, dir)) = key.split_last() else {
            return false;
        };
        match self.base_tree_at(st, dir) {
            Ok(Some(tree)) => self
                .tree_entries(st, &tree)
                .map(|es| es.iter().any(|e| &e.name == name))
                .unwrap_or(false),
            _ => false,
        }
    }

    /// The base tree at the folder `dir` (stored names), if the base has it.
    fn base_tree_at(&self, st: &mut State, dir: &[Vec<u8>]) -> Result<Option<String>, VfsError> {
        let mut tree = self.base_tree.clone();
        for name in dir {
            let entries = self.tree_entries(st, &tree)?;
            match entries.iter().find(|e| &e.name == name) {
                Some(e) if e.mode == MODE_TREE => tree = e.oid.clone(),
                _ => return Ok(None),
            }
        }
        Ok(Some(tree))
    }

    /// The new files (of `new`) the repository ignores.
    fn ignored(
        &self,
        st: &mut State,
        written: &BTreeMap<Vec<Vec<u8>>, Written>,
        new: &[Vec<Vec<u8>>],
        scratch: &Path,
    ) -> Result<BTreeSet<Vec<Vec<u8>>>, VfsError> {
        if new.is_empty() {
            return Ok(BTreeSet::new());
        }
        let work = scratch.join("ignore-check");
        let _ = fs::remove_dir_all(&work);
        fs::create_dir_all(&work).map_err(io("create", &work))?;
        let mut dirs: BTreeSet<Vec<Vec<u8>>> = BTreeSet::new();
        let mut input = Vec::new();
        for key in new {
            let file = work.join(join(key));
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).map_err(io("create", parent))?;
            }
            fs::write(&file, b"").map_err(io("write", &file))?;
            input.extend_from_slice(join(key).as_os_str().as_bytes());
            input.push(0);
            for depth in 0..key.len() {
                dirs.insert(key[..depth].to_vec());
            }
        }
        for dir in dirs {
            let mut path = dir.clone();
            path.push(b".gitignore".to_vec());
            // As the run left it: written, else the base's (a regular file).
            let bytes = match written.get(&path) {
                Some(w) => Some(w.bytes.clone()),
                None => match self.base_tree_at(st, &dir)? {
                    Some(tree) => {
                        let entries = self.tree_entries(st, &tree)?;
                        match entries.iter().find(|e| e.name == b".gitignore") {
                            Some(e) if e.mode & 0o170000 == 0o100000 => {
                                self.blob(&e.oid, ".gitignore").ok()
                            }
                            _ => None,
                        }
                    }
                    None => None,
                },
            };
            if let Some(bytes) = bytes {
                let file = work.join(join(&path));
                fs::write(&file, bytes).map_err(io("write", &file))?;
            }
        }
        let repo = self
            .repo
            .runner()
            .repo(&work, Scope::User)
            .with_git_dir(&self.git_dir)
            .with_work_tree(&work);
        let out = repo
            .cmd(["check-ignore", "-z", "--stdin", "--no-index"])
            .stdin(input)
            .ok_codes(&[0, 1])
            .run();
        let _ = fs::remove_dir_all(&work);
        let out = out?;
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| p.split(|b| *b == b'/').map(<[u8]>::to_vec).collect())
            .collect())
    }

    /// The blobs of `files`, written with no filter (one `hash-object` for all).
    fn hash_blobs<'a>(
        &self,
        files: impl Iterator<Item = &'a [u8]>,
        scratch: &Path,
    ) -> Result<Vec<String>, VfsError> {
        let dir = scratch.join("blobs");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let mut input = Vec::new();
        let mut count = 0usize;
        for (i, bytes) in files.enumerate() {
            let file = dir.join(i.to_string());
            fs::write(&file, bytes).map_err(io("write", &file))?;
            input.extend_from_slice(file.as_os_str().as_bytes());
            input.push(b'\n');
            count += 1;
        }
        let out = self
            .repo
            .cmd(["hash-object", "-w", "--no-filters", "--stdin-paths"])
            .stdin(input)
            .run();
        let _ = fs::remove_dir_all(&dir);
        let oids: Vec<String> = String::from_utf8_lossy(&out?.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        if oids.len() != count {
            return Err(VfsError::Reader(format!(
                "hash-object wrote {} of {count} blobs",
                oids.len()
            )));
        }
        Ok(oids)
    }

    fn mktree(&self, entries: &BTreeMap<Vec<u8>, Slot>) -> Result<String, VfsError> {
        let mut input = Vec::new();
        for (name, (mode, oid)) in entries {
            let kind = match *mode {
                MODE_TREE => "tree",
                MODE_GITLINK => "commit",
                _ => "blob",
            };
            input.extend_from_slice(format!("{mode:06o} {kind} {oid}\t").as_bytes());
            input.extend_from_slice(name);
            input.push(0);
        }
        // `--missing`: every id is the base's or was just written; a
        // gitlink's commit is not in this repository at all.
        let out = self
            .repo
            .cmd(["mktree", "-z", "--missing"])
            .stdin(input)
            .run()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}
