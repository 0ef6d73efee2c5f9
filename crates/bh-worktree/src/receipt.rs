//! Provisioning receipts: `<common>/better-harness/worktrees/<name>.json`,
//! rewritten atomically (temp file in the same folder, fsync, rename).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, WorktreeError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Provisioning,
    Ready,
    Failed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Provisioning => "provisioning",
            State::Ready => "ready",
            State::Failed => "failed",
        }
    }
}

/// The step a receipt reached (for `failed`: the step that failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    GitWorktreeAdd,
    LinkEnv,
    PostCreate,
    Complete,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub version: u32,
    pub name: String,
    pub path: PathBuf,
    pub state: State,
    pub stage: Stage,
    /// Branch checked out (short name), `None` when detached.
    pub branch: Option<String>,
    /// Whether this tool created `branch` (only then may dispose delete it).
    pub created_branch: bool,
    /// The commit the worktree started at.
    pub base: String,
    /// The revision the caller named (`--from`), if any.
    pub from: Option<String>,
    /// `.env*` files linked from the main checkout.
    pub env_links: Vec<String>,
    pub post_create: Vec<String>,
    /// The Pi session that asked for the worktree, if any.
    pub session: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub error: Option<String>,
    /// SHA-256 of the identity fields (name, path, branch, createdBranch, base).
    pub hash: String,
}

impl Receipt {
    pub fn identity_hash(&self) -> String {
        let identity = serde_json::json!({
            "name": self.name,
            "path": self.path,
            "branch": self.branch,
            "createdBranch": self.created_branch,
            "base": self.base,
        });
        hex::encode(Sha256::digest(identity.to_string().as_bytes()))
    }

    /// Reads a receipt; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<Receipt>> {
        match read_regular(path, RECORD_CAP) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| WorktreeError::Format {
                        path: path.to_path_buf(),
                        message: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(WorktreeError::io(path, e)),
        }
    }

    /// Writes the receipt atomically (updates `updatedAt` and `hash`).
    pub fn store(&mut self, path: &Path) -> Result<()> {
        self.updated_at = jiff::Timestamp::now().to_string();
        self.hash = self.identity_hash();
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| WorktreeError::Format {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        bytes.push(b'\n');
        write_atomic(path, &bytes)
    }
}

/// The most a handoff record or a receipt may hold (bh writes a few KiB).
pub const RECORD_CAP: u64 = 1 << 20;

/// `path`'s bytes, read only as a regular file (`O_NOFOLLOW`, `O_NONBLOCK`:
/// a FIFO, a device such as `/dev/zero` or a symlink is refused, never
/// waited on or read endlessly) of at most `cap` bytes. `NotFound` as is;
/// anything else not a regular file, or larger, is `InvalidData`.
pub fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::io::Read;
    let mut file = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // O_NOFOLLOW on a symlink.
            Some(nix::libc::ELOOP) => invalid(path, "is a symlink"),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(invalid(path, "is not a regular file"));
    }
    if meta.len() > cap {
        return Err(invalid(path, "is larger than a record bh writes"));
    }
    let mut bytes = Vec::new();
    file.by_ref().take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(invalid(path, "is larger than a record bh writes"));
    }
    Ok(bytes)
}

fn invalid(path: &Path, what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{} {what}; refusing to read it", path.display()),
    )
}

/// Writes `bytes` to `path` atomically (`bh_fs`), creating its folder.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir).map_err(|e| WorktreeError::io(dir, e))?;
    bh_fs::write_atomic(path, bytes, 0o666).map_err(|e| WorktreeError::io(path, e))
}

/// SHA-256 of a file's bytes, `None` when it does not exist.
pub fn file_sha256(path: &Path) -> Result<Option<String>> {
    match read_regular(path, RECORD_CAP) {
        Ok(bytes) => Ok(Some(hex::encode(Sha256::digest(&bytes)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WorktreeError::io(path, e)),
    }
}
