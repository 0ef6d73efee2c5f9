//! What a path in the work tree is now, hashed in-process as git would
//! store it (so a rewind plan reads without writing anything).

use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use fs_err as fs;
use sha1::{Digest, Sha1};

use super::State;
use crate::paths::fs_path;
use crate::store::Store;

/// A path in the work tree, as a tree would hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Now {
    Missing,
    Entry(State),
    Folder,
    Unreadable(String),
}

impl Now {
    pub(super) fn of(state: &Option<State>) -> Now {
        match state {
            Some(s) => Now::Entry(s.clone()),
            None => Now::Missing,
        }
    }
}

impl Store {
    /// What `rel` is now, hashed as git would store it (raw bytes: the
    /// shadow neutralises every conversion).
    pub(super) fn now_state(&self, rel: &[u8]) -> Now {
        let full = fs_path(&self.project, rel);
        let meta = match fs::symlink_metadata(&full) {
            Ok(m) => m,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Now::Missing;
            }
            Err(e) => return Now::Unreadable(e.to_string()),
        };
        if meta.is_dir() {
            return Now::Folder;
        }
        if meta.is_symlink() {
            return match fs::read_link(&full) {
                Ok(t) => Now::Entry((0o120000, blob_id(t.as_os_str().as_bytes()))),
                Err(e) => Now::Unreadable(e.to_string()),
            };
        }
        if !meta.is_file() {
            return Now::Unreadable("not a regular file".into());
        }
        let mode = if meta.permissions().mode() & 0o100 != 0 {
            0o100755
        } else {
            0o100644
        };
        match hash_file(&full, meta.len()) {
            Ok(oid) => Now::Entry((mode, oid)),
            Err(e) => Now::Unreadable(e.to_string()),
        }
    }
}

fn blob_id(body: &[u8]) -> String {
    bh_git::loose::object_id("blob", body)
}

fn hash_file(path: &std::path::Path, len: u64) -> std::io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut h = Sha1::new();
    h.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        h.update(&buf[..n]);
    }
    if seen != len {
        return Err(std::io::Error::other("changed while being read"));
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blob_ids_are_gits() {
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }
}
