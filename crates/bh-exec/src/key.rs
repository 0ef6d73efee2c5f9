//! The plan key: a secret of one state directory (`<state>/plan.key`, 0600,
//! owned by the user) that authenticates the plans made with it
//! (HMAC-SHA256 over their canonical bytes).
//!
//! Created atomically: 32 random bytes are written (hex) to a private
//! temporary file opened with `O_EXCL`, synced, and hard-linked into place,
//! which fails when the name is taken, so no reader ever sees a partial key
//! and two processes creating it at once agree on one. Opened with
//! `O_NOFOLLOW` and checked on the descriptor: a symlink, a file that is not
//! regular, not the user's, or readable or writable by group or others is
//! refused, never repaired.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::error::{ExecError, io};

/// The key's file name inside the state directory.
pub const PLAN_KEY_FILE: &str = "plan.key";
const KEY_BYTES: usize = 32;

/// An opened, checked plan key.
#[derive(Clone)]
pub struct PlanKey {
    secret: [u8; KEY_BYTES],
    id: String,
    path: PathBuf,
}

impl std::fmt::Debug for PlanKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanKey")
            .field("id", &self.id)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl PlanKey {
    /// The key of `state_dir`, created (with the folder, 0700) when missing.
    pub fn open_or_create(state_dir: &Path) -> Result<PlanKey, ExecError> {
        let path = state_dir.join(PLAN_KEY_FILE);
        match Self::open_file(&path) {
            Err(ExecError::PlanKey { ref source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Self::create(state_dir, &path)?;
                Self::open_file(&path)
            }
            other => other,
        }
    }

    /// The key of `state_dir`; `None` when it has none yet (no plan was
    /// made there, so no plan can be its own).
    pub fn open(state_dir: &Path) -> Result<Option<PlanKey>, ExecError> {
        match Self::open_file(&state_dir.join(PLAN_KEY_FILE)) {
            Ok(k) => Ok(Some(k)),
            Err(ExecError::PlanKey { ref source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A short public name of the key (it reveals nothing of the secret).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// HMAC-SHA256 of `bytes`, hex.
    pub fn mac(&self, bytes: &[u8]) -> String {
        hex::encode(self.hmac(bytes).finalize().into_bytes())
    }

    /// Whether `mac_hex` is the MAC of `bytes` (constant-time comparison).
    pub fn verify(&self, bytes: &[u8], mac_hex: &str) -> bool {
        match hex::decode(mac_hex) {
            Ok(tag) => self.hmac(bytes).verify_slice(&tag).is_ok(),
            Err(_) => false,
        }
    }

    fn hmac(&self, bytes: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        m.update(bytes);
        m
    }

    fn create(state_dir: &Path, path: &Path) -> Result<(), ExecError> {
        bh_fs::create_dir_all_mode(state_dir, 0o700).map_err(io("create", state_dir))?;
        let mut secret = [0u8; KEY_BYTES];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut secret))
            .map_err(|source| ExecError::PlanKey {
                path: PathBuf::from("/dev/urandom"),
                problem: "cannot be read",
                source,
            })?;
        // The temporary file's name is not derived from the secret.
        match bh_fs::write_new_atomic(path, format!("{}\n", hex::encode(secret)).as_bytes(), 0o600)
        {
            // Another process made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other.map_err(io("create the plan key", path)),
        }
    }

    fn open_file(path: &Path) -> Result<PlanKey, ExecError> {
        let refuse = |problem: &'static str| ExecError::PlanKey {
            path: path.to_path_buf(),
            problem,
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| {
                let link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
                if link {
                    refuse("is a symlink")
                } else {
                    ExecError::PlanKey {
                        path: path.to_path_buf(),
                        problem: "cannot be opened",
                        source: std::io::Error::new(e.kind(), e.to_string()),
                    }
                }
            })?;
        let meta = f.metadata().map_err(io("inspect", path))?;
        if !meta.file_type().is_file() {
            return Err(refuse("is not a regular file"));
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(refuse("is not owned by this user"));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(refuse("is accessible to group or others (it must be 0600)"));
        }
        let mut text = String::new();
        Read::by_ref(&mut f)
            .take(256)
            .read_to_string(&mut text)
            .map_err(io("read", path))?;
        let secret: [u8; KEY_BYTES] = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| refuse("is not a plan key (64 hex digits)"))?;
        let id = hex::encode(Sha256::digest(
            [b"bh plan key id\0".as_slice(), &secret].concat(),
        ))[..16]
            .to_owned();
        Ok(PlanKey {
            secret,
            id,
            path: path.to_path_buf(),
        })
    }
}
