//! Git dirs by identity: the directories the tools must never enter, known
//! by device and inode rather than by the name `.git`.
//!
//! Protected are: the git dir and common dir that serve the root (asked of
//! git with `rev-parse --git-dir --git-common-dir` when the root is opened);
//! the git dir (and its common dir) a `.git` file or folder points to, for
//! the root and every directory a path walks through (so a repository nested
//! in the root is discovered the first time a tool enters it); and every
//! directory that *is* a git dir by git's own test (`HEAD` plus `objects/` and
//! `refs/`, or a `commondir` file), whatever its name: a bare repository
//! such as `project/.bare` or a dotfiles `~/.dotfiles`. A git dir the worker
//! makes later is refused too once seen (refusing more than needed, never
//! less); the root's own git dir and common dir are always refused, even
//! renamed, as their identity does not change.
//!
//! Each directory's verdict is cached by identity, so a walk over a large
//! tree looks at each folder once.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};

/// `(device, inode)` of a directory.
pub(crate) type Identity = (u64, u64);

/// What the tools know about directories, by identity.
#[derive(Debug, Default)]
pub(crate) struct GitDirs {
    /// `true`: a git dir or common dir (refused); `false`: checked, not one.
    seen: Mutex<HashMap<Identity, bool>>,
}

pub(crate) fn identity(fd: BorrowedFd<'_>) -> Result<Identity, Errno> {
    let st = fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

impl GitDirs {
    /// Protects the git dir and common dir that serve `root` (as git
    /// resolves them) and whatever `root`'s own `.git` points to.
    pub(crate) fn for_root(
        root: &Path,
        root_fd: BorrowedFd<'_>,
        runner: &bh_git::GitRunner,
    ) -> GitDirs {
        let dirs = GitDirs::default();
        let repo = runner.repo(root, bh_git::Scope::Isolated);
        for asked in ["--git-dir", "--git-common-dir"] {
            if let Ok(out) = repo.run(["rev-parse", "--path-format=absolute", asked])
                && let Some(path) = out.strip_suffix(b"\n")
            {
                dirs.protect_path(root_fd, OsStr::from_bytes(path));
            }
        }
        dirs.discover_pointer(root_fd);
        dirs
    }

    fn set(&self, id: Identity, protected: bool) {
        if let Ok(mut seen) = self.seen.lock() {
            // never downgrade a protected directory
            let entry = seen.entry(id).or_insert(protected);
            *entry |= protected;
        }
    }

    fn get(&self, id: Identity) -> Option<bool> {
        self.seen.lock().ok()?.get(&id).copied()
    }

    /// Protects the directory `path` names (relative to `base`), and its
    /// common dir if it has one.
    fn protect_path(&self, base: BorrowedFd<'_>, path: &OsStr) {
        let Ok(fd) = openat(
            base,
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        if let Ok(id) = identity(fd.as_fd()) {
            self.set(id, true);
        }
        if let Some(common) = read_small(fd.as_fd(), "commondir") {
            let common = trim_newline(&common);
            let _ = self.protect_path_once(fd.as_fd(), OsStr::from_bytes(common));
        }
    }

    fn protect_path_once(&self, base: BorrowedFd<'_>, path: &OsStr) -> Option<()> {
        let fd = openat(
            base,
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        self.set(identity(fd.as_fd()).ok()?, true);
        Some(())
    }

    /// A `.git` in `dir`: a folder is protected as it is; a file's `gitdir:`
    /// target (and that target's common dir) is.
    fn discover_pointer(&self, dir: BorrowedFd<'_>) {
        match fstatat(dir, ".git", AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if kind(st.st_mode) == SFlag::S_IFDIR => {
                self.protect_path(dir, OsStr::new(".git"))
            }
            Ok(st) if kind(st.st_mode) == SFlag::S_IFREG => {
                if let Some(text) = read_small(dir, ".git")
                    && let Some(target) = text.strip_prefix(b"gitdir: ")
                {
                    self.protect_path(dir, OsStr::from_bytes(trim_newline(target)));
                }
            }
            _ => {}
        }
    }

    /// Whether `dir` (a directory beneath the root, not the root) must be
    /// refused; learns about it and any repository it holds.
    pub(crate) fn is_protected(&self, dir: BorrowedFd<'_>) -> bool {
        let Ok(id) = identity(dir) else {
            return true;
        };
        if let Some(verdict) = self.get(id) {
            return verdict;
        }
        let protected = looks_like_git_dir(dir);
        self.set(id, protected);
        if !protected {
            self.discover_pointer(dir);
        }
        // discovery may have found `dir` itself (`gitdir: .`)
        self.get(id).unwrap_or(protected)
    }
}

/// Git's own test (`is_git_directory`): `HEAD`, and `objects/` plus `refs/`
/// or a `commondir` file that supplies them.
fn looks_like_git_dir(dir: BorrowedFd<'_>) -> bool {
    let is = |name: &str, want: SFlag| {
        fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| kind(st.st_mode) == want)
    };
    let head = is("HEAD", SFlag::S_IFREG) || is("HEAD", SFlag::S_IFLNK);
    head && ((is("objects", SFlag::S_IFDIR) && is("refs", SFlag::S_IFDIR))
        || is("commondir", SFlag::S_IFREG))
}

fn kind(mode: u32) -> SFlag {
    SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits())
}

fn trim_newline(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// The first 4 KiB of a regular file `name` in `dir`, never through a
/// symlink or into a FIFO.
fn read_small(dir: BorrowedFd<'_>, name: &str) -> Option<Vec<u8>> {
    let fd: OwnedFd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    if kind(fstat(fd.as_fd()).ok()?.st_mode) != SFlag::S_IFREG {
        return None;
    }
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(4096)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}
