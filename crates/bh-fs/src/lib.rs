//! `bh-fs`: the few file-system primitives every state-keeping crate needs,
//! written once.
//!
//! * [`write_atomic`] / [`write_json_atomic`]: a reader sees the old bytes or
//!   the new ones, never a torn file — a uniquely named temporary file in the
//!   same folder (no two writers share one), written, fsynced and renamed over
//!   the target, then the folder is fsynced so the rename itself survives a
//!   crash. The temporary file is removed when anything fails.
//! * [`write_new_atomic`]: the same for a file that must not exist yet — the
//!   finished temporary file is hard-linked into place, which fails when the
//!   name is taken (no-clobber, never a partial file).
//! * [`beneath`]: opening directories beneath a directory descriptor without
//!   ever following a symlink (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`,
//!   or a component walk with `O_NOFOLLOW` where the kernel lacks it).
//! * [`run_id`]: ids whose first characters differ between runs, that carry
//!   their creation time ([`id_time_ms`]) and do not collide between
//!   processes or within one; [`now_ms`], the one clock reading.
//! * [`key::StateKey`]: the state directory's secret, with which bh MACs what
//!   it must later recognise as its own (plans, handoff records).
//! * [`read_regular_file`]: a whole file read only if the opened descriptor
//!   is a regular file (never blocks on a FIFO, never reads a device).
//!
//! Errors are `std::io::Error`s from `fs_err` (they name the file at fault,
//! e.g. the temporary one); callers add what they were doing to their own
//! error types.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

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
pub mod key;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Now, in Unix milliseconds: the unit of every `timestamp` of Pi's messages
/// and of checkpoints — the one clock reading of the workspace (out of
/// `bh-protocol`, which holds data and reads nothing; issue 26).
pub fn now_ms() -> i64 {
    i64::try_from(nanos_now() / 1_000_000).unwrap_or(i64::MAX)
}

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
        #[cfg(test)]
        steps::record(steps::Step::FileSynced(tmp.clone()));
        fs::rename(&tmp, path)?;
        #[cfg(test)]
        steps::record(steps::Step::Renamed(path.to_path_buf()));
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` with `bytes` and `mode`, never replacing anything: the
/// bytes go to a uniquely named temporary file beside it (its name says
/// nothing of the content), fsynced, then hard-linked into place — which
/// fails with `AlreadyExists` when the name is taken — and the folder is
/// fsynced. A reader sees no file or the whole file, never a partial one.
/// The temporary file is always removed.
pub fn write_new_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::hard_link(&tmp, path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    })();
    let _ = fs::remove_file(&tmp);
    result
}

/// Reads the whole of `path`, which must be a regular file: it is opened
/// non-blocking (a FIFO does not hang the open) and the opened descriptor is
/// checked, so a FIFO, a device such as `/dev/zero`, a socket or a folder is
/// refused (`InvalidInput`, naming the path) before a byte is read.
pub fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_dir() {
            "a folder"
        } else {
            "not a file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file (it is {what})", path.display()),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Creates `dir` and its missing parents with `mode` (e.g. `0o700` for
/// private state; folders that exist keep theirs). The workspace's one
/// `DirBuilder` (`fs_err` has none): the error is the plain `io::Error`, and
/// every caller names `dir` in its own error.
pub fn create_dir_all_mode(dir: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    #[allow(clippy::disallowed_methods)] // the callers name the folder in their errors
    let created = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir);
    created
}

/// Flushes a folder's entries (a rename or a new name in it) to disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    fs::File::open(dir)?.sync_all()?;
    #[cfg(test)]
    steps::record(steps::Step::DirSynced(dir.to_path_buf()));
    Ok(())
}

/// What [`write_atomic`] did, in order, on this thread (tests only: the
/// seam that shows the folder is synced after the rename).
#[cfg(test)]
mod steps {
    use std::cell::RefCell;
    use std::path::PathBuf;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Step {
        FileSynced(PathBuf),
        Renamed(PathBuf),
        DirSynced(PathBuf),
    }

    thread_local! {
        static STEPS: RefCell<Vec<Step>> = const { RefCell::new(Vec::new()) };
    }

    pub(crate) fn record(step: Step) {
        STEPS.with(|s| s.borrow_mut().push(step));
    }

    pub(crate) fn take() -> Vec<Step> {
        STEPS.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::steps::{Step, take};

    #[test]
    fn a_new_file_is_written_whole_and_never_replaces_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        super::write_new_atomic(&path, b"one", 0o600).unwrap();
        assert_eq!(fs_err::read(&path).unwrap(), b"one");
        let mode = fs_err::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let err = super::write_new_atomic(&path, b"two", 0o600).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(fs_err::read(&path).unwrap(), b"one");
        // No temporary file is left behind, on success or failure.
        let names: Vec<_> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("key")]);
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::io::Write::write_all(&mut fs_err::File::create(&file).unwrap(), b"abc").unwrap();
        assert_eq!(super::read_regular_file(&file).unwrap(), b"abc");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, what) in [
            (fifo.as_path(), "a FIFO"),
            (std::path::Path::new("/dev/zero"), "a device"),
            (dir.path(), "a folder"),
        ] {
            let err = super::read_regular_file(path).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
            let text = err.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(what), "{text}");
        }
    }

    #[test]
    fn the_folder_is_synced_after_the_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        take();
        super::write_atomic(&path, b"x", 0o600).unwrap();
        let steps = take();
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!(matches!(&steps[0], Step::FileSynced(t) if t.parent() == Some(dir.path())));
        assert_eq!(steps[1], Step::Renamed(path.clone()));
        assert_eq!(steps[2], Step::DirSynced(dir.path().to_path_buf()));
        // A file name without a folder syncs the current one.
        super::sync_dir(std::path::Path::new("")).unwrap();
        assert_eq!(take(), vec![Step::DirSynced(".".into())]);
    }
}

/// [`write_atomic`] of `value` as pretty JSON, private to the user (`0o600`).
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &text, 0o600)
}

/// `<prefix><8 hex digits>-<ms since the epoch, hex>`. The digits hash
/// `salt`, the exact time, the process id and a per-process counter, so ids
/// made at once never collide, and they come first: ids made around the
/// same time differ from their first character on, so a short prefix names
/// one (`bh exec show c8fc`; issue 26 — the time used to come first, and
/// every id of the same hours shared its leading characters). The time
/// after the `-` orders them ([`id_time_ms`]).
pub fn run_id(prefix: &str, salt: &[u8]) -> String {
    let nanos = nanos_now();
    let mut h = Sha256::new();
    h.update(salt);
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    format!(
        "{prefix}{}-{:x}",
        &hex::encode(h.finalize())[..8],
        nanos / 1_000_000
    )
}

/// When an id of [`run_id`] was made, in ms since the epoch: its time part
/// (the longer of the two hex parts, so the earlier form
/// `<prefix><ms hex>-<8 hex digits>` reads too); `None` for another shape.
/// Lists sort by it, then by the id.
pub fn id_time_ms(id: &str) -> Option<u64> {
    let body = id.trim_start_matches(|c: char| !c.is_ascii_hexdigit());
    let (a, b) = body.split_once('-')?;
    let time = if a.len() > b.len() { a } else { b };
    u64::from_str_radix(time, 16).ok()
}
