//! The executor's virtual worktree: the file tools (`read`, `ls`, `edit`,
//! `write`) over a base commit's tree and an overlay of the run's own
//! writes, with no checkout.
//!
//! Reads go through one long-lived `git cat-file --batch` (`objects`); a
//! tree is parsed once, when a path first goes through it, so memory follows
//! what the run touches, not the repository. Writes and edits land in the
//! overlay (bytes in memory, keyed by path). [`VirtualTree::tree`] builds the
//! result tree from the base and the overlay (`build`).
//!
//! It answers as the checkout would (the detached worktree the executor's
//! `--checkout` mode makes, seen through `bh_tools::Root`), so a tool's
//! result is the same text either way:
//! - a tree is a directory, a blob a regular file, a gitlink an empty
//!   directory (an uninitialised submodule), a symlink a symlink (refused by
//!   every tool, as the confinement refuses one);
//! - an error names the same path with the same words (a missing file, a
//!   directory, a file on the way to a path, a symlink on the way);
//! - a modified file keeps its base mode (the exec bit), a new one is
//!   `100644`; with `core.ignoreCase` a name matches an existing entry in any
//!   ASCII letter case, as a case-insensitive checkout would;
//! - a new file the repository ignores is readable during the run but left
//!   out of the result, as `git add -A` leaves it out.
//!
//! Bytes are the repository's: no filter, no end-of-line conversion, in
//! either direction (see ARCHITECTURE.md for where that differs from a
//! checkout, and `--checkout`). Writing inside a submodule is refused (the
//! checkout would have no way to record it either).

// Libraries never print: a guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod build;
mod error;
mod objects;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bh_git::Repo;
use bh_git::object::{Entry, MODE_GITLINK, MODE_SYMLINK, MODE_TREE, parse_tree_ids};
use bh_tools::confine::resolve_beneath;
use bh_tools::workspace::{Change, FsError, Node, Workspace, check_size};
use bh_tools::{ConfineError, RelPath};

pub use error::VfsError;

use objects::{Object, Objects};

/// A new file's mode.
const MODE_FILE: u32 = 0o100644;
/// Trees are read whole; this only stops a corrupt size.
const TREE_CAP: u64 = 1 << 31;

/// What a path names in the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A directory: a base tree, a folder only the overlay made, or (with
    /// `gitlink`) a submodule's empty folder.
    Dir {
        tree: Option<String>,
        gitlink: bool,
    },
    /// A regular file: its mode, its base blob, whether the run wrote it.
    File {
        mode: u32,
        blob: Option<String>,
    },
    Symlink,
}

/// Where a path's lookup ended.
enum Located {
    /// Every component exists; the path as stored (letter case) and what it is.
    Found(Vec<Vec<u8>>, Kind),
    /// A component is missing (those before it are folders): the whole
    /// path, its existing part as stored; whether the last folder found is
    /// a submodule.
    Missing {
        path: Vec<Vec<u8>>,
        in_gitlink: bool,
    },
    /// A component before the last is a file or a symlink.
    Blocked { symlink: bool },
}

/// A file the run wrote.
#[derive(Debug, Clone)]
struct Written {
    bytes: Vec<u8>,
    mode: u32,
}

#[derive(Debug, Default)]
struct State {
    trees: HashMap<String, Arc<Vec<Entry>>>,
    written: BTreeMap<Vec<Vec<u8>>, Written>,
}

/// The virtual worktree of one execution; see the crate docs.
#[derive(Debug)]
pub struct VirtualTree {
    /// The root the tools name in messages (canonical; need not exist).
    root: PathBuf,
    alias: Option<PathBuf>,
    base_tree: String,
    id_len: usize,
    ignore_case: bool,
    repo: Repo,
    git_dir: PathBuf,
    objects: Objects,
    state: Mutex<State>,
}

impl VirtualTree {
    /// The tree `base_tree` of `repo` (the user's repository, its
    /// configuration applying), shown to the tools as the folder `root`
    /// (which need not exist; its parent must).
    pub fn open(repo: &Repo, base_tree: &str, root: &Path) -> Result<VirtualTree, VfsError> {
        let id_len = base_tree.len() / 2;
        if !matches!(id_len, 20 | 32) || !base_tree.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(VfsError::Missing {
                oid: base_tree.to_owned(),
                what: "base tree".into(),
            });
        }
        let git_dir = PathBuf::from(repo.run_line(["rev-parse", "--absolute-git-dir"])?);
        let ignore_case = repo
            .cmd(["config", "--type=bool", "core.ignorecase"])
            .ok_codes(&[0, 1])
            .run()?
            .stdout
            .starts_with(b"true");
        let (canonical, alias) = canonical_root(root)?;
        let vt = VirtualTree {
            root: canonical,
            alias,
            base_tree: base_tree.to_owned(),
            id_len,
            ignore_case,
            objects: Objects::start(repo),
            repo: repo.clone(),
            git_dir,
            state: Mutex::new(State::default()),
        };
        // The base must be a tree this repository has.
        let mut st = vt.lock()?;
        vt.tree_entries(&mut st, base_tree)?;
        drop(st);
        Ok(vt)
    }

    /// The root the tools name.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The paths the run wrote (as stored), sorted.
    pub fn written(&self) -> Vec<PathBuf> {
        self.lock()
            .map(|st| st.written.keys().map(|k| join(k)).collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, VfsError> {
        self.state
            .lock()
            .map_err(|_| VfsError::Reader("the overlay's lock is poisoned".into()))
    }

    /// A tree's entries, parsed once.
    fn tree_entries(&self, st: &mut State, oid: &str) -> Result<Arc<Vec<Entry>>, VfsError> {
        if let Some(t) = st.trees.get(oid) {
            return Ok(t.clone());
        }
        let body = match self.objects.get(oid, TREE_CAP)? {
            Object::Found {
                kind,
                body: Some(body),
                ..
            } if kind == "tree" => body,
            Object::Found { kind, .. } => {
                return Err(VfsError::Kind {
                    oid: oid.to_owned(),
                    kind,
                    want: "tree",
                });
            }
            Object::Missing => {
                return Err(VfsError::Missing {
                    oid: oid.to_owned(),
                    what: "tree".into(),
                });
            }
        };
        let entries =
            Arc::new(
                parse_tree_ids(&body, self.id_len).map_err(|_| VfsError::BadTree {
                    oid: oid.to_owned(),
                })?,
            );
        st.trees.insert(oid.to_owned(), entries.clone());
        Ok(entries)
    }

    /// A blob's bytes (`abs` names it in the too-large refusal).
    fn blob(&self, oid: &str, abs: &str) -> Result<Vec<u8>, FsError> {
        let cap = bh_tools::workspace::MAX_READ_BYTES as u64;
        match self.objects.get(oid, cap).map_err(message)? {
            Object::Found {
                kind,
                body: Some(body),
                ..
            } if kind == "blob" => Ok(body),
            Object::Found {
                kind, size, body, ..
            } if kind == "blob" && body.is_none() => {
                check_size(i64::try_from(size).unwrap_or(i64::MAX), abs)?;
                Err(FsError::Message(format!("File too large to read: {abs}")))
            }
            Object::Found { kind, .. } => Err(message(VfsError::Kind {
                oid: oid.to_owned(),
                kind,
                want: "blob",
            })),
            Object::Missing => Err(message(VfsError::Missing {
                oid: oid.to_owned(),
                what: abs.to_owned(),
            })),
        }
    }

    /// The child `name` of the folder `dir` (at `at`), exactly named or,
    /// with `core.ignoreCase`, in any letter case: its stored name and kind.
    fn child(
        &self,
        st: &mut State,
        dir: &[Vec<u8>],
        at: &Kind,
        name: &[u8],
    ) -> Result<Option<(Vec<u8>, Kind)>, VfsError> {
        let Kind::Dir { tree, gitlink } = at else {
            return Ok(None);
        };
        if *gitlink {
            return Ok(None);
        }
        if let Some(kind) = self.exact(st, dir, tree.as_deref(), name)? {
            return Ok(Some((name.to_vec(), kind)));
        }
        if self.ignore_case {
            for (stored, _) in self.children(st, dir, at)? {
                if stored.eq_ignore_ascii_case(name) {
                    let kind = self.exact(st, dir, tree.as_deref(), &stored)?;
                    return Ok(kind.map(|k| (stored, k)));
                }
            }
        }
        Ok(None)
    }

    fn exact(
        &self,
        st: &mut State,
        dir: &[Vec<u8>],
        tree: Option<&str>,
        name: &[u8],
    ) -> Result<Option<Kind>, VfsError> {
        let base = match tree {
            Some(t) => self
                .tree_entries(st, t)?
                .iter()
                .find(|e| e.name == name)
                .map(kind_of),
            None => None,
        };
        let mut path = dir.to_vec();
        path.push(name.to_vec());
        if let Some(w) = st.written.get(&path) {
            let blob = match base {
                Some(Kind::File { blob, .. }) => blob,
                _ => None,
            };
            return Ok(Some(Kind::File { mode: w.mode, blob }));
        }
        if base.is_some() {
            return Ok(base);
        }
        let made = st
            .written
            .range(path.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&path));
        Ok(made.then_some(Kind::Dir {
            tree: None,
            gitlink: false,
        }))
    }

    /// A folder's entries: name and whether it is a folder.
    fn children(
        &self,
        st: &mut State,
        dir: &[Vec<u8>],
        at: &Kind,
    ) -> Result<Vec<(Vec<u8>, bool)>, VfsError> {
        let mut out: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        let Kind::Dir { tree, gitlink } = at else {
            return Ok(Vec::new());
        };
        if *gitlink {
            return Ok(Vec::new());
        }
        if let Some(t) = tree {
            for e in self.tree_entries(st, t)?.iter() {
                out.insert(e.name.clone(), matches!(kind_of(e), Kind::Dir { .. }));
            }
        }
        let depth = dir.len();
        for key in st
            .written
            .range(dir.to_vec()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(dir))
        {
            if let Some(name) = key.get(depth) {
                out.entry(name.clone()).or_insert(key.len() > depth + 1);
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Looks `comps` up from the root.
    fn locate(&self, st: &mut State, comps: &[Vec<u8>]) -> Result<Located, VfsError> {
        let mut at = Kind::Dir {
            tree: Some(self.base_tree.clone()),
            gitlink: false,
        };
        let mut path: Vec<Vec<u8>> = Vec::with_capacity(comps.len());
        for (i, name) in comps.iter().enumerate() {
            let Some((stored, kind)) = self.child(st, &path, &at, name)? else {
                let in_gitlink = matches!(at, Kind::Dir { gitlink: true, .. });
                path.extend(comps[i..].iter().cloned());
                return Ok(Located::Missing { path, in_gitlink });
            };
            path.push(stored);
            let last = i + 1 == comps.len();
            match kind {
                Kind::Dir { .. } => at = kind,
                Kind::File { .. } | Kind::Symlink if last => return Ok(Located::Found(path, kind)),
                Kind::File { .. } => return Ok(Located::Blocked { symlink: false }),
                Kind::Symlink => return Ok(Located::Blocked { symlink: true }),
            }
        }
        Ok(Located::Found(path, at))
    }

    fn abs_of(&self, comps: &[Vec<u8>]) -> String {
        self.root.join(join(comps)).display().to_string()
    }

    /// The lookup of `rel` as the checkout's confinement reports it: a
    /// missing component (or a missing parent) names the whole path; a file
    /// or a symlink on the way names the parent folder.
    fn found(&self, st: &mut State, rel: &RelPath) -> Result<(Vec<Vec<u8>>, Kind), FsError> {
        let comps = rel.components();
        match self.locate(st, comps).map_err(message)? {
            Located::Found(path, kind) => Ok((path, kind)),
            Located::Missing { .. } => Err(ConfineError::NotFound(self.abs_of(comps)).into()),
            Located::Blocked { symlink } => Err(self.blocked(comps, symlink)),
        }
    }

    fn blocked(&self, comps: &[Vec<u8>], symlink: bool) -> FsError {
        let parent = self.abs_of(&comps[..comps.len().saturating_sub(1)]);
        if symlink {
            ConfineError::Symlink(parent).into()
        } else {
            ConfineError::NotDirectory(parent).into()
        }
    }

    fn file_bytes(
        &self,
        st: &State,
        path: &[Vec<u8>],
        blob: Option<&str>,
        abs: &str,
    ) -> Result<Vec<u8>, FsError> {
        if let Some(w) = st.written.get(path) {
            return Ok(w.bytes.clone());
        }
        match blob {
            Some(oid) => self.blob(oid, abs),
            None => Err(ConfineError::NotFound(abs.to_owned()).into()),
        }
    }
}

impl Workspace for VirtualTree {
    fn resolve(&self, raw: &str) -> Result<RelPath, ConfineError> {
        resolve_beneath(&self.root, self.alias.as_deref(), OsStr::new(raw))
    }

    fn abs(&self, rel: &RelPath) -> PathBuf {
        rel.beneath(&self.root)
    }

    fn read(&self, rel: &RelPath) -> Result<Node, FsError> {
        let abs = self.abs_of(rel.components());
        let mut st = self.lock().map_err(message)?;
        match self.found(&mut st, rel)? {
            (_, Kind::Dir { .. }) => Ok(Node::Dir),
            (_, Kind::Symlink) => Err(ConfineError::Symlink(abs).into()),
            (path, Kind::File { blob, .. }) => {
                if let Some(w) = st.written.get(&path) {
                    return Ok(Node::File(w.bytes.clone()));
                }
                // The blob is read without the lock held.
                drop(st);
                match blob {
                    Some(oid) => Ok(Node::File(self.blob(&oid, &abs)?)),
                    None => Err(ConfineError::NotFound(abs).into()),
                }
            }
        }
    }

    fn list(&self, rel: &RelPath) -> Result<Vec<(Vec<u8>, bool)>, FsError> {
        let abs = self.abs_of(rel.components());
        let mut st = self.lock().map_err(message)?;
        match self.found(&mut st, rel)? {
            (path, kind @ Kind::Dir { .. }) => Ok(self
                .children(&mut st, &path, &kind)
                .map_err(message)?
                .into_iter()
                // Names a checkout could not hold (a crafted tree) are not shown.
                .filter(|(name, _)| {
                    !matches!(name.as_slice(), b"" | b"." | b"..")
                        && !name.contains(&b'/')
                        && !bh_tools::confine::is_git_name(OsStr::new(&lossless(name)))
                })
                .collect()),
            (_, Kind::Symlink) => Err(ConfineError::Symlink(abs).into()),
            (_, Kind::File { .. }) => Err(ConfineError::NotDirectory(abs).into()),
        }
    }

    fn update(&self, rel: &RelPath, change: Change<'_>) -> Result<(), FsError> {
        let abs = self.abs_of(rel.components());
        if rel.is_root() {
            return Err(ConfineError::IsDirectory(abs).into());
        }
        let mut st = self.lock().map_err(message)?;
        let (path, mode, blob) = match self.found(&mut st, rel)? {
            (_, Kind::Dir { .. }) => return Err(ConfineError::IsDirectory(abs).into()),
            (_, Kind::Symlink) => return Err(ConfineError::Symlink(abs).into()),
            (path, Kind::File { mode, blob }) => (path, mode, blob),
        };
        let bytes = self.file_bytes(&st, &path, blob.as_deref(), &abs)?;
        let new = change(bytes).map_err(FsError::Message)?;
        st.written.insert(path, Written { bytes: new, mode });
        Ok(())
    }

    fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        let comps = rel.components();
        let abs = self.abs_of(comps);
        if rel.is_root() {
            return Err(ConfineError::IsDirectory(abs).into());
        }
        let mut st = self.lock().map_err(message)?;
        let (path, mode) = match self.locate(&mut st, comps).map_err(message)? {
            Located::Found(_, Kind::Dir { .. }) => {
                return Err(ConfineError::IsDirectory(abs).into());
            }
            Located::Found(_, Kind::Symlink) => return Err(ConfineError::Symlink(abs).into()),
            Located::Found(path, Kind::File { mode, .. }) => (path, mode),
            Located::Missing {
                in_gitlink: true, ..
            } => {
                return Err(FsError::Message(format!(
                    "Cannot write {abs}: it is inside a submodule, which the execution has no checkout of"
                )));
            }
            Located::Missing { path, .. } => (path, MODE_FILE),
            Located::Blocked { symlink } => return Err(self.blocked(comps, symlink)),
        };
        st.written.insert(
            path,
            Written {
                bytes: bytes.to_vec(),
                mode,
            },
        );
        Ok(())
    }
}

/// What a base entry is in the merged view.
fn kind_of(e: &Entry) -> Kind {
    match e.mode {
        MODE_TREE => Kind::Dir {
            tree: Some(e.oid.clone()),
            gitlink: false,
        },
        MODE_GITLINK => Kind::Dir {
            tree: None,
            gitlink: true,
        },
        MODE_SYMLINK => Kind::Symlink,
        mode => Kind::File {
            mode,
            blob: Some(e.oid.clone()),
        },
    }
}

fn message(e: VfsError) -> FsError {
    FsError::Message(e.to_string())
}

fn lossless(name: &[u8]) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name).to_owned()
}

/// Components joined as a relative path.
fn join(comps: &[Vec<u8>]) -> PathBuf {
    comps.iter().map(|c| lossless(c)).collect()
}

/// `root` with its parent canonical (the root itself need not exist), and
/// the name the caller used when that differs.
fn canonical_root(root: &Path) -> Result<(PathBuf, Option<PathBuf>), VfsError> {
    let absolute = std::path::absolute(root).map_err(error::io("resolve", root))?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Ok((absolute, None));
    };
    let canonical = fs_err::canonicalize(parent)
        .map_err(error::io("resolve", parent))?
        .join(name);
    let alias = (canonical != absolute).then_some(absolute);
    Ok((canonical, alias))
}
