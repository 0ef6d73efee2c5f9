//! The bytes of a file the fast path hashes itself: read only when it is
//! still a regular file (the objects are written by `bh_git::loose`).

use std::io::Read;
use std::path::Path;

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;

/// The bytes of regular file `path`, read without following a symbolic
/// link and without blocking on a FIFO put in its place; `None` when it
/// cannot be opened or is no longer a regular file of at most `limit` bytes
/// (the caller then takes the slow way).
pub(super) fn read_regular(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use nix::fcntl::OFlag;
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
    {
        Ok(f) => f,
        // Gone, become a symbolic link (ELOOP), unreadable: whatever it
        // is now, an ordinary snapshot looks at it.
        Err(_) => return Ok(None),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.len() > limit {
        return Ok(None);
    }
    let mut body = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Ok(None);
    }
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn read_regular_refuses_links_fifos_and_big_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap().unwrap(), b"12345");
        assert!(read_regular(&file, 4).unwrap().is_none());
        let link = dir.path().join("l");
        fs_err::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_regular(&link, 100).unwrap().is_none());
        let fifo = dir.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_regular(&fifo, 100).unwrap().is_none());
    }
}
