//! Opening directories beneath a directory descriptor, never following a
//! symlink: the agent tools' confinement and checkpoint restores share it.
//!
//! [`Beneath::open_dir`] asks the kernel for the whole path at once with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`;
//! where `openat2` is missing (or to create missing directories) it walks one
//! component at a time with `openat(O_NOFOLLOW | O_DIRECTORY)`. Either way a
//! symlink anywhere on the path — even one swapped in by another process
//! between a check and the open — makes the open fail instead of leading out.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{Mode, mkdirat};

/// Flags of every directory open: no symlink at the last component either.
pub const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// Why [`Beneath::open_dir`] failed: the error and how many components (from
/// the first) name the directory it failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenDirError {
    pub errno: Errno,
    pub depth: usize,
}

/// A directory that paths are opened beneath.
#[derive(Debug)]
pub struct Beneath {
    fd: OwnedFd,
    no_openat2: AtomicBool,
}

impl Beneath {
    /// Opens `path` itself (following symlinks on the way: it is the caller's
    /// chosen anchor) as the directory to open beneath.
    pub fn open(path: &Path) -> Result<Beneath, Errno> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Beneath::from_fd(fd))
    }

    /// Anchors on an already opened directory.
    pub fn from_fd(fd: OwnedFd) -> Beneath {
        Beneath {
            fd,
            no_openat2: AtomicBool::new(false),
        }
    }

    /// The anchor directory's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A new descriptor of the anchor directory.
    pub fn dup(&self) -> Result<OwnedFd, Errno> {
        self.fd.try_clone().map_err(|_| Errno::EMFILE)
    }

    /// Forces the `O_NOFOLLOW` component walk (what runs where `openat2` is
    /// unavailable); for tests.
    pub fn disable_openat2(&self) {
        self.no_openat2.store(true, Ordering::Relaxed);
    }

    /// Opens the directory named by `comps` (plain names, no `/`, `.` or
    /// `..`) beneath the anchor, never following a symlink. With `create`,
    /// missing directories are made (mode `0o777` before the umask).
    pub fn open_dir<C: AsRef<[u8]>>(
        &self,
        comps: &[C],
        create: bool,
    ) -> Result<OwnedFd, OpenDirError> {
        let whole = |errno| OpenDirError {
            errno,
            depth: comps.len(),
        };
        if comps.is_empty() {
            return self.dup().map_err(whole);
        }
        if comps
            .iter()
            .any(|c| matches!(c.as_ref(), b"" | b"." | b"..") || c.as_ref().contains(&b'/'))
        {
            return Err(whole(Errno::EINVAL));
        }
        if !create && !self.no_openat2.load(Ordering::Relaxed) {
            let rel: PathBuf = comps
                .iter()
                .map(|c| OsStr::from_bytes(c.as_ref()))
                .collect();
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(
                    ResolveFlag::RESOLVE_BENEATH
                        | ResolveFlag::RESOLVE_NO_SYMLINKS
                        | ResolveFlag::RESOLVE_NO_MAGICLINKS,
                );
            match openat2(self.fd.as_fd(), &rel, how) {
                Ok(fd) => return Ok(fd),
                Err(Errno::ENOSYS) | Err(Errno::EPERM) | Err(Errno::E2BIG) => {
                    self.no_openat2.store(true, Ordering::Relaxed);
                }
                // A concurrent rename: RESOLVE_BENEATH asks for a retry; walk instead.
                Err(Errno::EAGAIN) => {}
                Err(e) => return Err(whole(e)),
            }
        }
        let mut cur = self
            .dup()
            .map_err(|errno| OpenDirError { errno, depth: 0 })?;
        for (i, c) in comps.iter().enumerate() {
            let name = OsStr::from_bytes(c.as_ref());
            let at = |errno| OpenDirError {
                errno,
                depth: i + 1,
            };
            let next = match openat(cur.as_fd(), name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) if create => {
                    match mkdirat(cur.as_fd(), name, Mode::from_bits_truncate(0o777)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(at(e)),
                    }
                    openat(cur.as_fd(), name, DIR_FLAGS, Mode::empty()).map_err(at)?
                }
                Err(e) => return Err(at(e)),
            };
            cur = next;
        }
        Ok(cur)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn symlinks_are_refused_on_both_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs_err::create_dir_all(root.join("a/b")).unwrap();
        fs_err::os::unix::fs::symlink(tmp.path(), root.join("a/link")).unwrap();
        for walk in [false, true] {
            let b = Beneath::open(&root).unwrap();
            if walk {
                b.disable_openat2();
            }
            assert!(b.open_dir(&["a", "b"], false).is_ok());
            let err = b.open_dir(&["a", "link", "x"], false).unwrap_err();
            assert!(
                matches!(err.errno, Errno::ELOOP | Errno::ENOTDIR),
                "{err:?}"
            );
            assert!(b.open_dir(&["a", "link"], true).is_err());
            assert!(b.open_dir(&["..", "x"], false).is_err());
            assert!(b.open_dir(&["new", "dir"], true).is_ok());
        }
        assert!(root.join("new/dir").is_dir());
        assert_eq!(fs_err::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
