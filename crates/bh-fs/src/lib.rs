//! `bh-fs`: the few file-system primitives every state-keeping crate needs,
//! written once.
//!
//! * [`write_atomic`] / [`write_json_atomic`]: a reader sees the old bytes or
//!   the new ones, never a torn file — a uniquely named temporary file in the
//!   same folder (no two writers share one), written, fsynced and renamed over
//!   the target, then the folder is fsynced so the rename itself survives a
//!   crash. The temporary file is removed when anything fails.
//! * [`beneath`]: opening directories beneath a directory descriptor without
//!   ever following a symlink (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`,
//!   or a component walk with `O_NOFOLLOW` where the kernel lacks it).
//! * [`time_ordered_id`]: ids that sort by creation time and do not collide
//!   between processes or within one.
//!
//! Errors are plain `std::io::Error`s; callers add the path and what they were
//! doing to their own error types.

use fs_err as fs;
use fs_err::OpenOptions;
use fs_err::os::unix::fs::OpenOptionsExt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};

pub mod beneath;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn nanos_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A temporary path beside `path`, unique to this process and call (the time
/// keeps a leftover of a dead process whose pid was reused out of the way).
fn temp_beside(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(
        ".tmp-{}-{:x}-{}",
        std::process::id(),
        nanos_now(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    dir.join(name)
}

/// Replaces `path` with `bytes` atomically; a new file gets `mode` (e.g.
/// `0o600` for private state). The folder must exist.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Flushes a folder's entries (a rename or a new name in it) to disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    fs::File::open(dir)?.sync_all()
}

/// [`write_atomic`] of `value` as pretty JSON, private to the user (`0o600`).
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &text, 0o600)
}

/// `<prefix><ms since the epoch, hex>-<8 hex digits>`: sorts by time (to the
/// millisecond), and the digits hash `salt`, the exact time, the process id
/// and a per-process counter, so ids made at once never collide.
pub fn time_ordered_id(prefix: &str, salt: &[u8]) -> String {
    let nanos = nanos_now();
    let mut h = Sha256::new();
    h.update(salt);
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    format!(
        "{prefix}{:x}-{}",
        nanos / 1_000_000,
        &hex::encode(h.finalize())[..8]
    )
}
