//! Whether a store folder can be trusted, and holding on to it once it is.
//!
//! A store is run by git as the user, with the store's own config: whoever can
//! put a look-alike store in its place (a `core.fsmonitor` command, a filter)
//! runs code as the user. So, like ssh's `StrictModes`, every folder from the
//! state root down to the store must be the user's and not writable by group
//! or others, with no symlink on the way (the state root's own path may hold
//! symlinks: it is the user's choice). Each folder is opened relative to the
//! one above with `O_NOFOLLOW` and checked through its descriptor (`fstat`),
//! and the store is then addressed through the descriptor it was checked by:
//! git is given `/proc/<pid>/fd/<n>`, a magic link to that very folder, so a
//! rename race after the check cannot swap it.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::openat;
use nix::sys::stat::{FileStat, Mode, fstat, mkdirat};

use crate::error::{CheckpointError, Result};

/// A store folder that passed the checks, held open.
#[derive(Debug)]
pub(crate) struct TrustedDir {
    /// The folder's real path, for people.
    pub path: PathBuf,
    /// The path to give to git and to open files by: the descriptor's magic
    /// link where `/proc` shows it, else `path`.
    pub access: PathBuf,
    /// Keeps `access` pointing at the checked folder.
    _fd: OwnedFd,
}

/// Opens (creating what is missing, private to the user) `<state>/<sub…>`,
/// refusing anything another user could change on the way.
pub(crate) fn open_trusted(state: &Path, sub: &[&str]) -> Result<TrustedDir> {
    let io = |what: &str, path: &Path, e: std::io::Error| {
        CheckpointError::io(format!("cannot {what} {}", path.display()), e)
    };
    bh_fs::create_dir_all_mode(state, 0o700).map_err(|e| io("create", state, e))?;
    let mut path = fs_err::canonicalize(state).map_err(|e| io("resolve", state, e))?;
    let mut fd = nix::fcntl::open(
        &path,
        nix::fcntl::OFlag::O_RDONLY
            | nix::fcntl::OFlag::O_DIRECTORY
            | nix::fcntl::OFlag::O_NOFOLLOW
            | nix::fcntl::OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io("open", &path, e.into()))?;
    check(&fd, &path, 0o022)?;
    for (i, name) in sub.iter().enumerate() {
        path.push(name);
        let last = i + 1 == sub.len();
        let open = |parent: &OwnedFd| {
            openat(
                parent.as_fd(),
                OsStr::new(name),
                bh_fs::beneath::DIR_FLAGS,
                Mode::empty(),
            )
        };
        let next = match open(&fd) {
            Ok(next) => next,
            Err(Errno::ENOENT) => {
                match mkdirat(
                    fd.as_fd(),
                    OsStr::new(name),
                    Mode::from_bits_truncate(0o700),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(io("create", &path, e.into())),
                }
                open(&fd).map_err(|e| refuse_or_io(&path, e))?
            }
            Err(e) => return Err(refuse_or_io(&path, e)),
        };
        check(&next, &path, if last { 0o077 } else { 0o022 })?;
        fd = next;
    }
    let access = magic_link(&fd).unwrap_or_else(|| path.clone());
    Ok(TrustedDir {
        path,
        access,
        _fd: fd,
    })
}

/// `O_NOFOLLOW | O_DIRECTORY` on a symlink fails with `ELOOP` or `ENOTDIR`.
fn refuse_or_io(path: &Path, e: Errno) -> CheckpointError {
    match fs_err::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => CheckpointError::StoreSymlink {
            path: path.to_path_buf(),
        },
        _ => CheckpointError::io(format!("cannot open {}", path.display()), e.into()),
    }
}

/// The folder must be the user's, and `forbidden` mode bits must be clear.
fn check(fd: &OwnedFd, path: &Path, forbidden: u32) -> Result<()> {
    let st: FileStat = fstat(fd)
        .map_err(|e| CheckpointError::io(format!("cannot inspect {}", path.display()), e.into()))?;
    let me = nix::unistd::getuid().as_raw();
    if st.st_uid != me {
        return Err(CheckpointError::StoreNotOwned {
            path: path.to_path_buf(),
            owner: st.st_uid,
            me,
        });
    }
    if st.st_mode & forbidden != 0 {
        return Err(CheckpointError::StoreInsecure {
            path: path.to_path_buf(),
            mode: st.st_mode & 0o7777,
        });
    }
    Ok(())
}

/// `/proc/<pid>/fd/<n>` when it shows this very folder (git, a child
/// process, reaches our descriptor through it).
fn magic_link(fd: &OwnedFd) -> Option<PathBuf> {
    let link = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        fd.as_raw_fd()
    ));
    let st = fstat(fd).ok()?;
    let seen = fs_err::metadata(&link).ok()?;
    (seen.dev() == st.st_dev && seen.ino() == st.st_ino).then_some(link)
}
