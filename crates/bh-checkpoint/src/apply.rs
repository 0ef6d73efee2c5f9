//! Writing a checkpoint's files into the project, and deleting files, only
//! through descriptors opened beneath the project (`bh_fs::beneath`): a folder
//! that another process swaps for a symlink while a restore runs makes that
//! file fail, it never leads outside the project.
//!
//! Blobs are read from the shadow with one long-lived `git cat-file --batch`
//! and streamed into a new file beside the target, which is then renamed over
//! it (as git replaces files on checkout: a hard link elsewhere keeps its
//! bytes). Modes are git's: `100755` is created `0777`, `100644` `0666`, both
//! under the umask; `120000` becomes a symlink whose target is the blob.

use std::ffi::OsStr;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use bh_fs::beneath::Beneath;
use bh_git::{GitProcess, parse};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use crate::error::{CheckpointError, Result};
use crate::paths::fs_path;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The project, opened once, and the shadow's object reader.
pub(crate) struct Writer<'a> {
    project: &'a Path,
    beneath: Beneath,
    cat: GitProcess,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(project: &'a Path, cat: GitProcess) -> Result<Writer<'a>> {
        let beneath = Beneath::open(project).map_err(|e| {
            CheckpointError::io(format!("cannot open {}", project.display()), e.into())
        })?;
        Ok(Writer {
            project,
            beneath,
            cat,
        })
    }

    fn fail(&self, what: &str, rel: &[u8], errno: Errno) -> CheckpointError {
        let path = fs_path(self.project, rel);
        let why = match errno {
            Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV => {
                "a folder on its path is a symbolic link or not a folder (it changed while restoring?)"
                    .to_owned()
            }
            e => e.desc().to_owned(),
        };
        CheckpointError::io(
            format!("cannot {what} {}: {why}", path.display()),
            std::io::Error::from(errno),
        )
    }

    /// The folder holding `rel` and `rel`'s last component.
    fn parent(&self, rel: &[u8], create: bool) -> Result<Option<(OwnedFd, Vec<u8>)>> {
        let comps: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
        let Some((name, dirs)) = comps.split_last() else {
            return Ok(None);
        };
        match self.beneath.open_dir(dirs, create) {
            Ok(fd) => Ok(Some((fd, name.to_vec()))),
            Err(e) if !create && e.errno == Errno::ENOENT => Ok(None),
            Err(e) => Err(self.fail(if create { "write" } else { "delete" }, rel, e.errno)),
        }
    }

    /// Deletes a file or symlink (never a folder); gone already is fine.
    pub(crate) fn delete(&self, rel: &[u8]) -> Result<bool> {
        let Some((dir, name)) = self.parent(rel, false)? else {
            return Ok(false);
        };
        let name = OsStr::from_bytes(&name);
        match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => return Ok(false),
            Err(e) => return Err(self.fail("delete", rel, e)),
            Ok(st) if is_type(st.st_mode, SFlag::S_IFDIR) => return Ok(false),
            Ok(_) => {}
        }
        match unlinkat(dir.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(self.fail("delete", rel, e)),
        }
    }

    /// Removes the folders on `rel`'s path that are now empty, deepest first,
    /// as git does after deleting a file (the project itself stays).
    pub(crate) fn prune_empty_parents(&self, rel: &[u8]) {
        let mut end = rel.len();
        while let Some(slash) = rel[..end].iter().rposition(|b| *b == b'/') {
            let dir = &rel[..slash];
            let Ok(Some((parent, name))) = self.parent(dir, false) else {
                return;
            };
            if unlinkat(
                parent.as_fd(),
                OsStr::from_bytes(&name),
                UnlinkatFlags::RemoveDir,
            )
            .is_err()
            {
                return;
            }
            end = slash;
        }
    }

    /// Writes the blob `oid` at `rel` with git's `mode`, replacing a file or
    /// symlink (or an empty folder) there.
    pub(crate) fn write(&mut self, rel: &[u8], mode: u32, oid: &str) -> Result<()> {
        let Some((dir, name)) = self.parent(rel, true)? else {
            return Ok(());
        };
        let name = OsStr::from_bytes(&name);
        if let Ok(st) = fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW)
            && is_type(st.st_mode, SFlag::S_IFDIR)
        {
            unlinkat(dir.as_fd(), name, UnlinkatFlags::RemoveDir).map_err(|e| match e {
                Errno::ENOTEMPTY | Errno::EEXIST => CheckpointError::DirectoryConflict {
                    path: parse::display_path(rel),
                    examples: "(it is not empty)".into(),
                },
                e => self.fail("replace the folder", rel, e),
            })?;
        }
        let tmp = format!(
            ".bh-restore-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let result = self
            .write_temp(dir.as_fd(), &tmp, rel, mode, oid)
            .and_then(|()| {
                renameat(dir.as_fd(), tmp.as_str(), dir.as_fd(), name)
                    .map_err(|e| self.fail("write", rel, e))
            });
        if result.is_err() {
            let _ = unlinkat(dir.as_fd(), tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        result
    }

    fn write_temp(
        &mut self,
        dir: BorrowedFd<'_>,
        tmp: &str,
        rel: &[u8],
        mode: u32,
        oid: &str,
    ) -> Result<()> {
        let corrupt = |detail: String| {
            CheckpointError::io(
                format!("cannot read object {oid} for {}", parse::display_path(rel)),
                std::io::Error::other(detail),
            )
        };
        let io = |e: std::io::Error| {
            CheckpointError::io(format!("cannot read object {oid} from the shadow"), e)
        };
        let perm = if mode == 0o100755 { 0o777 } else { 0o666 };
        let file = if mode == 0o120000 {
            None
        } else {
            let fd = openat(
                dir,
                tmp,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(perm),
            )
            .map_err(|e| self.fail("write", rel, e))?;
            // A descriptor from `openat` beneath the checkout: its errors are
            // reported through `self.fail` with the entry's path.
            #[allow(clippy::disallowed_types)]
            Some(std::fs::File::from(fd))
        };
        self.cat.stdin.write_all(oid.as_bytes()).map_err(io)?;
        self.cat.stdin.write_all(b"\n").map_err(io)?;
        self.cat.stdin.flush().map_err(io)?;
        let mut header = String::new();
        self.cat.stdout.read_line(&mut header).map_err(io)?;
        let size = match header.trim_end().split(' ').collect::<Vec<_>>().as_slice() {
            [_, "blob", size] => size
                .parse::<u64>()
                .map_err(|_| corrupt(format!("cat-file said {header:?}")))?,
            _ => return Err(corrupt(format!("cat-file said {header:?}"))),
        };
        let mut body = (&mut self.cat.stdout).take(size);
        let Some(mut file) = file else {
            let mut target = Vec::new();
            body.read_to_end(&mut target).map_err(io)?;
            self.end_of_object()?;
            return symlinkat(OsStr::from_bytes(&target), dir, tmp)
                .map_err(|e| self.fail("write", rel, e));
        };
        let copied = std::io::copy(&mut body, &mut file);
        // Whatever happened to the file, the object must be read to its end
        // for the next answer to line up.
        let rest = std::io::copy(&mut body, &mut std::io::sink()).map_err(io)?;
        self.end_of_object()?;
        let copied = copied.map_err(|e| {
            CheckpointError::io(
                format!("cannot write {}", fs_path(self.project, rel).display()),
                e,
            )
        })?;
        if copied + rest != size {
            return Err(corrupt("object ended early".into()));
        }
        Ok(())
    }

    /// `cat-file --batch` ends every object with a newline.
    fn end_of_object(&mut self) -> Result<()> {
        let mut nl = [0u8; 1];
        self.cat.stdout.read_exact(&mut nl).map_err(|e| {
            CheckpointError::io("cannot read from the shadow's cat-file".to_owned(), e)
        })?;
        Ok(())
    }
}

fn is_type(mode: u32, kind: SFlag) -> bool {
    mode & SFlag::S_IFMT.bits() == kind.bits()
}
