//! What the file tools (`read`, `ls`, `edit`, `write`) work on: a
//! [`Workspace`]. The tools hold Pi's logic (arguments, texts, truncation,
//! edits); a workspace holds the files. Two exist: the confined directory
//! ([`Root`], a checkout on disk) and the executor's virtual worktree (a base
//! tree plus an overlay of the run's writes, `bh-vfs`). A workspace answers
//! every question with the error the directory would give (the same
//! [`ConfineError`] for the same situation), so a tool's result is the same
//! text whichever one it ran on.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::sys::stat::{SFlag, fstatat};

use crate::confine::{ConfineError, Opened, RelPath, Root, file_type, is_git_name};
use crate::truncate::format_size;

/// Files larger than this are not read into memory.
pub const MAX_READ_BYTES: i64 = 256 * 1024 * 1024;

/// What a path names, as `read` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file's bytes.
    File(Vec<u8>),
    Dir,
}

/// Why a workspace operation failed: a refusal or a lookup failure of the
/// path ([`ConfineError`], matched on by the tools), or a message the tool
/// reports as it is (a file too large, an I/O error, the edit's own error).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Confine(#[from] ConfineError),
    #[error("{0}")]
    Message(String),
}

/// The change `edit` makes to a file's bytes (its error is the tool's).
pub type Change<'a> = &'a mut dyn FnMut(Vec<u8>) -> Result<Vec<u8>, String>;

/// The files the tools read and write; see the module docs.
pub trait Workspace: Send + Sync + std::fmt::Debug {
    /// The lexical checks of a path exactly as the model sent it
    /// ([`Root::resolve`]'s rules).
    fn resolve(&self, raw: &str) -> Result<RelPath, ConfineError>;
    /// The absolute path a relative path names (for messages).
    fn abs(&self, rel: &RelPath) -> PathBuf;
    /// An existing regular file's bytes (at most [`MAX_READ_BYTES`]), or
    /// [`Node::Dir`].
    fn read(&self, rel: &RelPath) -> Result<Node, FsError>;
    /// A directory's entries (name, is a directory), `.git` names left out,
    /// in no particular order. A path that is not a directory is
    /// `ConfineError::NotRegular`/`NotDirectory`.
    fn list(&self, rel: &RelPath) -> Result<Vec<(Vec<u8>, bool)>, FsError>;
    /// Replaces an existing regular file's bytes with `change(bytes)`.
    fn update(&self, rel: &RelPath, change: Change<'_>) -> Result<(), FsError>;
    /// Writes a regular file, creating it and its missing parents.
    fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError>;
}

#[allow(clippy::disallowed_types)] // a descriptor opened beneath the root (`confine`)
fn read_all(file: &mut std::fs::File, size: i64, abs: &str) -> Result<Vec<u8>, FsError> {
    check_size(size, abs)?;
    let mut buf = Vec::with_capacity(size.max(0) as usize);
    file.take(MAX_READ_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| FsError::Message(format!("EIO: {e}, read '{abs}'")))?;
    if buf.len() as i64 > MAX_READ_BYTES {
        return Err(FsError::Message(format!("File too large to read: {abs}")));
    }
    Ok(buf)
}

/// The refusal of a file over [`MAX_READ_BYTES`] (`abs` names it).
pub fn check_size(size: i64, abs: &str) -> Result<(), FsError> {
    if size > MAX_READ_BYTES {
        return Err(FsError::Message(format!(
            "File too large to read: {abs} ({}, limit {})",
            format_size(size as usize),
            format_size(MAX_READ_BYTES as usize)
        )));
    }
    Ok(())
}

fn write_error(e: std::io::Error, abs: &str) -> FsError {
    FsError::Message(format!("EIO: {e}, write '{abs}'"))
}

impl Workspace for Root {
    fn resolve(&self, raw: &str) -> Result<RelPath, ConfineError> {
        Root::resolve(self, raw)
    }

    fn abs(&self, rel: &RelPath) -> PathBuf {
        Root::abs(self, rel)
    }

    fn read(&self, rel: &RelPath) -> Result<Node, FsError> {
        let abs = self.abs(rel).display().to_string();
        match self.open_read(rel)? {
            Opened::File(mut f, st) => Ok(Node::File(read_all(&mut f, st.st_size, &abs)?)),
            Opened::Dir(_) => Ok(Node::Dir),
        }
    }

    fn list(&self, rel: &RelPath) -> Result<Vec<(Vec<u8>, bool)>, FsError> {
        let dir_fd = match self.open_read(rel)? {
            Opened::Dir(fd) => fd,
            Opened::File(..) => {
                return Err(ConfineError::NotDirectory(self.abs(rel).display().to_string()).into());
            }
        };
        let cannot = |e: nix::errno::Errno| FsError::Message(format!("Cannot read directory: {e}"));
        let iter_fd = dir_fd
            .try_clone()
            .map_err(|e| FsError::Message(format!("Cannot read directory: {e}")))?;
        let mut dir = nix::dir::Dir::from_fd(iter_fd).map_err(cannot)?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(cannot)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." || is_git_name(std::ffi::OsStr::from_bytes(name)) {
                continue;
            }
            // An entry gone (or unreadable) meanwhile is left out.
            let Ok(st) = fstatat(
                dir_fd.as_fd(),
                std::ffi::OsStr::from_bytes(name),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            out.push((name.to_vec(), file_type(&st) == SFlag::S_IFDIR));
        }
        Ok(out)
    }

    fn update(&self, rel: &RelPath, change: Change<'_>) -> Result<(), FsError> {
        let abs = self.abs(rel).display().to_string();
        let (mut file, st) = self.open_rw(rel)?;
        let bytes = read_all(&mut file, st.st_size, &abs)?;
        let new = change(bytes).map_err(FsError::Message)?;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.set_len(0))
            .and_then(|()| file.write_all(&new))
            .and_then(|()| file.flush())
            .map_err(|e| write_error(e, &abs))
    }

    fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        let abs = self.abs(rel).display().to_string();
        let (mut file, _st) = self.open_create(rel)?;
        file.set_len(0)
            .and_then(|()| file.write_all(bytes))
            .and_then(|()| file.flush())
            .map_err(|e| write_error(e, &abs))
    }
}

/// A shared workspace (the executor keeps one to build its result from).
impl<W: Workspace + ?Sized> Workspace for std::sync::Arc<W> {
    fn resolve(&self, raw: &str) -> Result<RelPath, ConfineError> {
        (**self).resolve(raw)
    }
    fn abs(&self, rel: &RelPath) -> PathBuf {
        (**self).abs(rel)
    }
    fn read(&self, rel: &RelPath) -> Result<Node, FsError> {
        (**self).read(rel)
    }
    fn list(&self, rel: &RelPath) -> Result<Vec<(Vec<u8>, bool)>, FsError> {
        (**self).list(rel)
    }
    fn update(&self, rel: &RelPath, change: Change<'_>) -> Result<(), FsError> {
        (**self).update(rel, change)
    }
    fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), FsError> {
        (**self).write(rel, bytes)
    }
}
