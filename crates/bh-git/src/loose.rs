//! Loose objects written in-process, without a git process (moved here
//! from the checkpoint store's fast path, issue 26: writing objects is Git's
//! business, and this crate is where Git is done).
//!
//! The checkpoint store's fast snapshot writes a few blobs, the trees on their paths and a
//! commit. Handing each of them to `git hash-object` costs a round trip
//! through a pipe per tree level (and a temporary file per tree), and on a
//! loaded machine every such hand-off waits for the scheduler; the bench in
//! BENCHMARKS.md ("Hook-path checkpoints") measured those waits as most of
//! the fast path's time. The objects are therefore hashed and written here,
//! exactly as git writes a loose object: `<kind> <size>\0<body>`, SHA-1 named
//! (the store is always a SHA-1 repository: `git init` with no format
//! asked), zlib-deflated at the store's `core.looseCompression` (1), written
//! to a temporary file in the fan-out folder, read-only, then renamed into
//! place. Like git with its default `core.fsync`, loose objects are not
//! fsynced; the ref update that makes them reachable is git's.
//!
//! An object already present as a loose file is not written again. One
//! present only in a pack is written loose once more (git would skip it):
//! a duplicate, harmless, and dropped by the next repack (`prune`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::Compression;
use flate2::write::ZlibEncoder;
use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use sha1::{Digest, Sha1};

/// The object id git gives `body` as a `kind` object.
pub fn object_id(kind: &str, body: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", body.len()).as_bytes());
    h.update(body);
    hex::encode(h.finalize())
}

/// Writes `body` as a loose `kind` object under `objects` (a repository's
/// `objects` folder); returns its id.
pub fn write_loose(objects: &Path, kind: &str, body: &[u8]) -> std::io::Result<String> {
    let oid = object_id(kind, body);
    let dir = objects.join(&oid[..2]);
    let path = dir.join(&oid[2..]);
    if fs::symlink_metadata(&path).is_ok() {
        return Ok(oid);
    }
    match fs::create_dir(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let tmp = temp_name(&dir);
    let result = (|| {
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&tmp)?;
        let mut z = ZlibEncoder::new(file, Compression::new(1));
        z.write_all(format!("{kind} {}\0", body.len()).as_bytes())?;
        z.write_all(body)?;
        z.finish()?;
        fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| oid)
}

/// A temporary name in `dir` no other writer (this process's threads, other
/// processes) uses; `git prune` removes leftovers named `tmp_obj_*`.
fn temp_name(dir: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("tmp_obj_bh{}_{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Read;

    #[test]
    fn ids_are_gits() {
        // `git hash-object -t blob --stdin <<< ''` and the empty tree.
        assert_eq!(
            object_id("blob", b"\n"),
            "8b137891791fe96927ad78e64b0aad7bded08bdc"
        );
        assert_eq!(
            object_id("tree", b""),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn written_objects_read_back_and_are_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        fs::create_dir(&objects).unwrap();
        let oid = write_loose(&objects, "blob", b"hello\n").unwrap();
        assert_eq!(oid, "ce013625030ba8dba906f756967f9e9ca394464a");
        let path = objects.join(&oid[..2]).join(&oid[2..]);
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(fs::File::open(&path).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw, b"blob 6\0hello\n");
        let mode = fs::metadata(&path).unwrap().permissions();
        assert!(mode.readonly());
        // Present: left alone, no temporary file left behind.
        assert_eq!(write_loose(&objects, "blob", b"hello\n").unwrap(), oid);
        let names: Vec<_> = fs::read_dir(objects.join(&oid[..2]))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from(&oid[2..])]);
    }
}
