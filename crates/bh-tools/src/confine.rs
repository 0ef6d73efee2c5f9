//! Confinement: every path a tool touches resolves beneath one root directory.
//!
//! A model-supplied path is first checked lexically ([`Root::resolve`]): NUL
//! bytes, over-long paths, absolute paths outside the root, `..` that leaves
//! the root and any `.git` component (any letter case) are refused. The parent
//! directory is then opened *beneath the root's file descriptor* with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, or,
//! where the kernel lacks `openat2`, by a walk that opens one component at a
//! time with `openat(O_NOFOLLOW | O_DIRECTORY)` (both in `bh_fs::beneath`,
//! which checkpoint restores share). The last component is then
//! opened relative to that directory descriptor with `O_NOFOLLOW | O_NONBLOCK`
//! and checked with `fstat` to be a regular file (or a directory). A symlink
//! anywhere, even one swapped in between a check and the open, makes the open
//! fail; devices and FIFOs are never read or written. Every folder on the way
//! is checked by identity not to be a git dir or common dir (see
//! `gitdirs`): the name `.git` is refused, and so are `project/.bare` or a
//! dotfiles `~/.dotfiles`.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use bh_fs::beneath::Beneath;

mod gitdirs;

use gitdirs::{GitDirs, Identity, identity};
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

/// Longest path (in bytes) a tool accepts, as Linux's `PATH_MAX`.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest single component (in bytes), as Linux's `NAME_MAX`.
pub const MAX_NAME_BYTES: usize = 255;

/// Why a path was refused or could not be opened. The `Display` text is what
/// the model sees as the tool error.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("Path contains a NUL byte")]
    Nul,
    #[error("Path is too long: {0} bytes (limit {MAX_PATH_BYTES})")]
    TooLong(usize),
    #[error("Path component is too long: {0} bytes (limit {MAX_NAME_BYTES})")]
    NameTooLong(usize),
    #[error("Path is outside the working directory: {0}")]
    Outside(String),
    #[error("Access to .git is not allowed: {0}")]
    Git(String),
    #[error("Access to a Git directory is not allowed: {0}")]
    GitDir(String),
    #[error("Path contains a symbolic link, which is not allowed: {0}")]
    Symlink(String),
    #[error("Not a regular file: {0}")]
    NotRegular(String),
    #[error(
        "Refusing to modify a file with several hard links (it may be shared with files outside the working directory): {0}"
    )]
    HardLinked(String),
    #[error("ENOENT: no such file or directory, access '{0}'")]
    NotFound(String),
    #[error("Not a directory: {0}")]
    NotDirectory(String),
    #[error("EISDIR: illegal operation on a directory, open '{0}'")]
    IsDirectory(String),
    #[error("{code}: {desc}, {op} '{path}'")]
    Os {
        code: &'static str,
        desc: &'static str,
        op: &'static str,
        path: String,
    },
}

impl ConfineError {
    fn from_errno(errno: Errno, op: &'static str, abs: &Path) -> Self {
        let path = abs.display().to_string();
        match errno {
            Errno::ENOENT => ConfineError::NotFound(path),
            Errno::ELOOP | Errno::EXDEV => ConfineError::Symlink(path),
            Errno::ENOTDIR => ConfineError::NotDirectory(path),
            Errno::ENAMETOOLONG => ConfineError::TooLong(path.len()),
            Errno::EISDIR => ConfineError::IsDirectory(path),
            other => ConfineError::Os {
                code: errno_code(other),
                desc: other.desc(),
                op,
                path,
            },
        }
    }
}

fn errno_code(e: Errno) -> &'static str {
    match e {
        Errno::EACCES => "EACCES",
        Errno::EPERM => "EPERM",
        Errno::EEXIST => "EEXIST",
        Errno::ENOSPC => "ENOSPC",
        Errno::EROFS => "EROFS",
        Errno::EBUSY => "EBUSY",
        Errno::ETXTBSY => "ETXTBSY",
        Errno::EAGAIN => "EAGAIN",
        Errno::EINVAL => "EINVAL",
        Errno::EIO => "EIO",
        _ => "EIO",
    }
}

/// Is this file name a `.git` (any case; trailing dots/spaces ignored too).
pub fn is_git_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    let mut end = b.len();
    while end > 0 && (b[end - 1] == b'.' || b[end - 1] == b' ') {
        end -= 1;
    }
    b[..end].eq_ignore_ascii_case(b".git")
}

/// A lexically checked path relative to the root: normal components only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath {
    components: Vec<Vec<u8>>,
}

impl RelPath {
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }
    /// Components as bytes.
    pub fn components(&self) -> &[Vec<u8>] {
        &self.components
    }
    /// The relative path as a `PathBuf` (`.` for the root).
    pub fn to_path(&self) -> PathBuf {
        if self.components.is_empty() {
            return PathBuf::from(".");
        }
        let mut p = PathBuf::new();
        for c in &self.components {
            p.push(OsStr::from_bytes(c));
        }
        p
    }
    /// The path this names beneath `root` (`root` itself for the root).
    pub fn beneath(&self, root: &Path) -> PathBuf {
        if self.components.is_empty() {
            return root.to_path_buf();
        }
        root.join(self.to_path())
    }
    fn split_last(&self) -> Option<(&[Vec<u8>], &[u8])> {
        let (last, parent) = self.components.split_last()?;
        Some((parent, last))
    }
}

/// The directory all tools are confined to.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    /// The root as the caller named it (absolute), if that differs from `path`.
    alias: Option<PathBuf>,
    beneath: Beneath,
    /// The root's identity, where walks up from an opened folder stop.
    root_id: Identity,
    /// Git dirs and common dirs, by identity (see `gitdirs`).
    git: GitDirs,
}

/// What the final component turned out to be.
pub enum Opened {
    File(File, FileStat),
    Dir(OwnedFd),
}

impl Root {
    /// Opens the root directory (the path is canonicalised once, here). The
    /// root's git dir is asked of `git` found on this process's `PATH`, with
    /// no other environment (see [`Root::open_with_git`]).
    pub fn open(path: &Path) -> Result<Self, ConfineError> {
        Root::open_with_git(path, &bh_git::GitRunner::new("git", Vec::new()))
    }

    /// [`Root::open`] asking `runner` (the harness's hardened runner, with
    /// the user's environment) for the git dir and common dir that serve the
    /// root, which are then refused by identity.
    pub fn open_with_git(path: &Path, runner: &bh_git::GitRunner) -> Result<Self, ConfineError> {
        // std, not fs_err: the errno is what is mapped (fs_err's wrapper has
        // none), and the `ConfineError` names the path.
        #[allow(clippy::disallowed_methods)]
        let canon = std::fs::canonicalize(path).map_err(|e| {
            ConfineError::from_errno(
                Errno::from_raw(e.raw_os_error().unwrap_or(libc_eio())),
                "open",
                path,
            )
        })?;
        let beneath =
            Beneath::open(&canon).map_err(|e| ConfineError::from_errno(e, "open", &canon))?;
        let root_id =
            identity(beneath.fd()).map_err(|e| ConfineError::from_errno(e, "open", &canon))?;
        let git = GitDirs::for_root(&canon, beneath.fd(), runner);
        let alias = std::path::absolute(path)
            .ok()
            .filter(|a| a != &canon && a.is_absolute());
        Ok(Root {
            path: canon,
            alias,
            beneath,
            root_id,
            git,
        })
    }

    /// Forces the `O_NOFOLLOW` component walk (what runs where `openat2` is
    /// unavailable); for tests.
    #[doc(hidden)]
    pub fn disable_openat2(&self) {
        self.beneath.disable_openat2();
    }

    /// Whether the root folder was removed, or its path now names another
    /// folder, since it was opened: every tool call would then fail or
    /// work on the wrong tree (a [`crate::HarnessFailure`]).
    pub fn is_gone(&self) -> bool {
        let removed = fstat(self.beneath.fd()).map_or(true, |st| st.st_nlink == 0);
        let moved = nix::sys::stat::stat(&self.path)
            .map_or(true, |st| (st.st_dev, st.st_ino) != self.root_id);
        removed || moved
    }

    /// The canonical root path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The absolute path a relative path names (for messages).
    pub fn abs(&self, rel: &RelPath) -> PathBuf {
        rel.beneath(&self.path)
    }

    /// Lexical checks. `raw` is the path exactly as the model sent it.
    pub fn resolve(&self, raw: &str) -> Result<RelPath, ConfineError> {
        self.resolve_os(OsStr::new(raw))
    }

    /// [`Self::resolve`] for paths that may not be UTF-8 (from directory walks).
    pub fn resolve_os(&self, raw_os: &OsStr) -> Result<RelPath, ConfineError> {
        resolve_beneath(&self.path, self.alias.as_deref(), raw_os)
    }

    fn dup_root(&self) -> Result<OwnedFd, ConfineError> {
        self.beneath
            .dup()
            .map_err(|e| ConfineError::from_errno(e, "open", &self.path))
    }

    /// Opens the directory named by `comps` beneath the root, never following
    /// a symlink (`bh_fs::beneath`). With `create`, missing directories are
    /// made (`mkdir -p`).
    /// Every folder from the root down to it is checked not to be a git dir
    /// (before anything is created).
    fn open_dir(&self, comps: &[Vec<u8>], create: bool) -> Result<OwnedFd, ConfineError> {
        let open = |comps: &[Vec<u8>], create| {
            self.beneath
                .open_dir(comps, create)
                .map_err(|e| self.dir_error(e.errno, &comps[..e.depth.min(comps.len())]))
        };
        if create {
            // The deepest folder that exists must not be (in) a git dir.
            let mut depth = comps.len();
            loop {
                match self.beneath.open_dir(&comps[..depth], false) {
                    Ok(fd) => {
                        self.check_chain(fd.as_fd(), &comps[..depth])?;
                        break;
                    }
                    Err(e) if e.errno == Errno::ENOENT && depth > 0 => depth -= 1,
                    Err(e) => {
                        return Err(self.dir_error(e.errno, &comps[..e.depth.min(depth)]));
                    }
                }
            }
        }
        let fd = open(comps, create)?;
        self.check_chain(fd.as_fd(), comps)?;
        Ok(fd)
    }

    /// Walks up from `dir` (opened beneath the root as `comps`) to the root,
    /// refusing a git dir on the way; a folder that is no longer beneath the
    /// root (moved out meanwhile) is refused too.
    fn check_chain(&self, dir: BorrowedFd<'_>, comps: &[Vec<u8>]) -> Result<(), ConfineError> {
        let abs = || {
            self.abs(&RelPath {
                components: comps.to_vec(),
            })
            .display()
            .to_string()
        };
        let mut cur: Option<OwnedFd> = None;
        for _ in 0..=comps.len() {
            let fd = cur.as_ref().map_or(dir, |f| f.as_fd());
            let id = identity(fd).map_err(|e| ConfineError::from_errno(e, "access", &self.path))?;
            if id == self.root_id {
                return Ok(());
            }
            if self.git.is_protected(fd) {
                return Err(ConfineError::GitDir(abs()));
            }
            let parent = openat(
                fd,
                "..",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| ConfineError::from_errno(e, "access", &self.path))?;
            cur = Some(parent);
        }
        Err(ConfineError::Outside(abs()))
    }

    /// A missing parent is reported, as Node does, with the whole path.
    fn whole(&self, e: ConfineError, rel: &RelPath) -> ConfineError {
        match e {
            ConfineError::NotFound(_) => {
                ConfineError::NotFound(self.abs(rel).display().to_string())
            }
            other => other,
        }
    }

    fn dir_error(&self, e: Errno, comps: &[Vec<u8>]) -> ConfineError {
        let abs = self.abs(&RelPath {
            components: comps.to_vec(),
        });
        match e {
            // O_NOFOLLOW|O_DIRECTORY on a symlink gives ENOTDIR on some kernels,
            // ELOOP on others; tell which it was.
            Errno::ENOTDIR | Errno::ELOOP => {
                if self.any_symlink(comps) {
                    ConfineError::Symlink(abs.display().to_string())
                } else {
                    ConfineError::NotDirectory(abs.display().to_string())
                }
            }
            other => ConfineError::from_errno(other, "access", &abs),
        }
    }

    fn any_symlink(&self, comps: &[Vec<u8>]) -> bool {
        let mut cur = match self.dup_root() {
            Ok(fd) => fd,
            Err(_) => return false,
        };
        for c in comps {
            let name = OsStr::from_bytes(c);
            match fstatat(cur.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if file_type(&st) == SFlag::S_IFLNK => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
            match openat(
                cur.as_fd(),
                name,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => cur = fd,
                Err(_) => return false,
            }
        }
        false
    }

    /// Opens an existing regular file or directory for reading.
    pub fn open_read(&self, rel: &RelPath) -> Result<Opened, ConfineError> {
        let Some((parent, name)) = rel.split_last() else {
            return Ok(Opened::Dir(self.dup_root()?));
        };
        let dir = self
            .open_dir(parent, false)
            .map_err(|e| self.whole(e, rel))?;
        self.open_in(dir.as_fd(), name, rel, OFlag::O_RDONLY, false)
    }

    /// Opens an existing directory.
    pub fn open_directory(&self, rel: &RelPath) -> Result<OwnedFd, ConfineError> {
        match self.open_read(rel)? {
            Opened::Dir(fd) => Ok(fd),
            Opened::File(..) => Err(ConfineError::NotDirectory(
                self.abs(rel).display().to_string(),
            )),
        }
    }

    /// Opens an existing regular file read-write (for `edit`).
    pub fn open_rw(&self, rel: &RelPath) -> Result<(File, FileStat), ConfineError> {
        let Some((parent, name)) = rel.split_last() else {
            return Err(ConfineError::IsDirectory(self.path.display().to_string()));
        };
        let dir = self
            .open_dir(parent, false)
            .map_err(|e| self.whole(e, rel))?;
        match self.open_in(dir.as_fd(), name, rel, OFlag::O_RDWR, false)? {
            Opened::File(f, st) => self.single_link(f, st, rel),
            Opened::Dir(_) => Err(ConfineError::IsDirectory(
                self.abs(rel).display().to_string(),
            )),
        }
    }

    /// Opens (creating it and its parents if needed) a regular file for writing.
    /// The file is not truncated here: the caller truncates after the checks.
    pub fn open_create(&self, rel: &RelPath) -> Result<(File, FileStat), ConfineError> {
        let Some((parent, name)) = rel.split_last() else {
            return Err(ConfineError::IsDirectory(self.path.display().to_string()));
        };
        let dir = self.open_dir(parent, true)?;
        match self.open_in(dir.as_fd(), name, rel, OFlag::O_WRONLY, true)? {
            Opened::File(f, st) => self.single_link(f, st, rel),
            Opened::Dir(_) => Err(ConfineError::IsDirectory(
                self.abs(rel).display().to_string(),
            )),
        }
    }

    /// Files are only modified when this is their only name.
    fn single_link(
        &self,
        f: File,
        st: FileStat,
        rel: &RelPath,
    ) -> Result<(File, FileStat), ConfineError> {
        if st.st_nlink > 1 {
            return Err(ConfineError::HardLinked(
                self.abs(rel).display().to_string(),
            ));
        }
        Ok((f, st))
    }

    fn open_in(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        rel: &RelPath,
        access: OFlag,
        create: bool,
    ) -> Result<Opened, ConfineError> {
        let abs = self.abs(rel);
        let name = OsStr::from_bytes(name);
        // Look first (without following), so that a device or FIFO is never opened.
        match fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => match file_type(&st) {
                SFlag::S_IFLNK => return Err(ConfineError::Symlink(abs.display().to_string())),
                SFlag::S_IFDIR => {
                    let fd = openat(
                        dir,
                        name,
                        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| match e {
                        Errno::ENOTDIR | Errno::ELOOP => {
                            ConfineError::Symlink(abs.display().to_string())
                        }
                        e => ConfineError::from_errno(e, "open", &abs),
                    })?;
                    if self.git.is_protected(fd.as_fd()) {
                        return Err(ConfineError::GitDir(abs.display().to_string()));
                    }
                    return Ok(Opened::Dir(fd));
                }
                SFlag::S_IFREG => {}
                _ => return Err(ConfineError::NotRegular(abs.display().to_string())),
            },
            Err(Errno::ENOENT) if create => {}
            Err(e) => return Err(ConfineError::from_errno(e, "access", &abs)),
        }
        let mut flags = access | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        if create {
            flags |= OFlag::O_CREAT;
        }
        let fd =
            openat(dir, name, flags, Mode::from_bits_truncate(0o666)).map_err(|e| match e {
                Errno::ELOOP => ConfineError::Symlink(abs.display().to_string()),
                e => ConfineError::from_errno(e, "open", &abs),
            })?;
        // Check what was actually opened (a swap after fstatat is caught here).
        let st = fstat(&fd).map_err(|e| ConfineError::from_errno(e, "open", &abs))?;
        if file_type(&st) != SFlag::S_IFREG {
            return Err(ConfineError::NotRegular(abs.display().to_string()));
        }
        // Blocking I/O from here on (regular files never block anyway).
        let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(access));
        Ok(Opened::File(File::from(fd), st))
    }
}

/// The lexical checks of [`Root::resolve`] for a root at `root` (canonical)
/// that the caller may also name `alias`: a path that may not be UTF-8,
/// relative to the root or absolute beneath it. Shared by every workspace.
pub fn resolve_beneath(
    root: &Path,
    alias: Option<&Path>,
    raw_os: &OsStr,
) -> Result<RelPath, ConfineError> {
    let raw_lossy = raw_os.to_string_lossy();
    let raw: &str = &raw_lossy;
    if raw_os.as_bytes().contains(&0) {
        return Err(ConfineError::Nul);
    }
    let bytes = raw_os.as_bytes();
    if bytes.len() > MAX_PATH_BYTES {
        return Err(ConfineError::TooLong(bytes.len()));
    }
    // Pi strips a leading '@' (models copy file mentions verbatim).
    let trimmed = bytes.strip_prefix(b"@").unwrap_or(bytes);
    if trimmed == b"~" || trimmed.starts_with(b"~/") {
        return Err(ConfineError::Outside(raw.to_string()));
    }
    let p = Path::new(OsStr::from_bytes(trimmed));
    let rest: &Path = if p.is_absolute() {
        match p.strip_prefix(root) {
            Ok(r) => r,
            Err(_) => match alias.map(|a| p.strip_prefix(a)) {
                Some(Ok(r)) => r,
                _ => return Err(ConfineError::Outside(raw.to_string())),
            },
        }
    } else {
        p
    };
    let mut out: Vec<Vec<u8>> = Vec::new();
    for c in rest.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.pop().is_none() {
                    return Err(ConfineError::Outside(raw.to_string()));
                }
            }
            Component::Normal(name) => {
                if name.len() > MAX_NAME_BYTES {
                    return Err(ConfineError::NameTooLong(name.len()));
                }
                if is_git_name(name) {
                    return Err(ConfineError::Git(raw.to_string()));
                }
                out.push(name.as_bytes().to_vec());
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ConfineError::Outside(raw.to_string()));
            }
        }
    }
    Ok(RelPath { components: out })
}

fn libc_eio() -> i32 {
    Errno::EIO as i32
}

/// The file-type bits of a stat result.
pub fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}
