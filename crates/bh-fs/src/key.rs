//! The state key: one secret of a state directory (`<state>/plan.key`,
//! 0600, owned by the user) that lets bh recognise what it wrote itself —
//! plans (bh-exec) and handoff records (bh-worktree) carry its HMAC-SHA256.
//! Every sandbox bh makes hides the file, so nothing confined can read it
//! and forge a MAC.
//!
//! One secret, several uses, kept apart by what is MACed: a plan's MAC is
//! over its canonical JSON (first byte `{`); every other use passes a
//! domain label of its own (`bh handoff record v1\0`, …) as the first part,
//! so a MAC made for one kind of record is never valid for another.
//!
//! Created atomically: 32 random bytes are written (hex) to a private
//! temporary file, synced, and hard-linked into place, which fails when the
//! name is taken, so no reader sees a partial key and two processes creating
//! it at once agree on one. Opened with `O_NOFOLLOW` and checked on the
//! descriptor: a symlink, a file that is not regular, not the user's, or
//! readable or writable by group or others is refused, never repaired.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The key's file name inside the state directory (its first use was
/// plans; the name stays so existing plans keep verifying).
pub const KEY_FILE: &str = "plan.key";
const KEY_BYTES: usize = 32;

/// Why the key could not be used: the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("state key {path} {problem}")]
pub struct KeyError {
    pub path: PathBuf,
    pub problem: &'static str,
    #[source]
    pub source: std::io::Error,
}

impl KeyError {
    /// The key file does not exist (nothing was ever MACed with it).
    pub fn is_missing(&self) -> bool {
        self.source.kind() == std::io::ErrorKind::NotFound
    }
}

/// An opened, checked state key.
#[derive(Clone)]
pub struct StateKey {
    secret: [u8; KEY_BYTES],
    id: String,
    path: PathBuf,
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateKey")
            .field("id", &self.id)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl StateKey {
    /// The key of `state_dir`, created (with the folder, 0700) when missing.
    pub fn open_or_create(state_dir: &Path) -> Result<StateKey, KeyError> {
        let path = state_dir.join(KEY_FILE);
        match Self::open_file(&path) {
            Err(e) if e.is_missing() => {
                Self::create(state_dir, &path)?;
                Self::open_file(&path)
            }
            other => other,
        }
    }

    /// The key of `state_dir`; `None` when it has none yet.
    pub fn open(state_dir: &Path) -> Result<Option<StateKey>, KeyError> {
        match Self::open_file(&state_dir.join(KEY_FILE)) {
            Ok(k) => Ok(Some(k)),
            Err(e) if e.is_missing() => Ok(None),
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

    /// HMAC-SHA256 of the concatenated `parts`, hex.
    pub fn mac(&self, parts: &[&[u8]]) -> String {
        hex::encode(self.hmac(parts).finalize().into_bytes())
    }

    /// Whether `mac_hex` is the MAC of `parts` (constant-time comparison).
    pub fn verify(&self, parts: &[&[u8]], mac_hex: &str) -> bool {
        match hex::decode(mac_hex) {
            Ok(tag) => self.hmac(parts).verify_slice(&tag).is_ok(),
            Err(_) => false,
        }
    }

    fn hmac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        for p in parts {
            m.update(p);
        }
        m
    }

    fn create(state_dir: &Path, path: &Path) -> Result<(), KeyError> {
        crate::create_dir_all_mode(state_dir, 0o700).map_err(|source| KeyError {
            path: state_dir.to_path_buf(),
            problem: "cannot be created (its folder)",
            source,
        })?;
        let mut secret = [0u8; KEY_BYTES];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut secret))
            .map_err(|source| KeyError {
                path: PathBuf::from("/dev/urandom"),
                problem: "cannot be read",
                source,
            })?;
        match crate::write_new_atomic(path, format!("{}\n", hex::encode(secret)).as_bytes(), 0o600)
        {
            // Another process made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other.map_err(|source| KeyError {
                path: path.to_path_buf(),
                problem: "cannot be created",
                source,
            }),
        }
    }

    fn open_file(path: &Path) -> Result<StateKey, KeyError> {
        let refuse = |problem: &'static str| KeyError {
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
                    KeyError {
                        path: path.to_path_buf(),
                        problem: "cannot be opened",
                        source: std::io::Error::new(e.kind(), e.to_string()),
                    }
                }
            })?;
        let meta = f.metadata().map_err(|source| KeyError {
            path: path.to_path_buf(),
            problem: "cannot be inspected",
            source,
        })?;
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
            .map_err(|source| KeyError {
                path: path.to_path_buf(),
                problem: "cannot be read",
                source,
            })?;
        let secret: [u8; KEY_BYTES] = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| refuse("is not a key (64 hex digits)"))?;
        let id = hex::encode(Sha256::digest(
            [b"bh plan key id\0".as_slice(), &secret].concat(),
        ))[..16]
            .to_owned();
        Ok(StateKey {
            secret,
            id,
            path: path.to_path_buf(),
        })
    }
}
