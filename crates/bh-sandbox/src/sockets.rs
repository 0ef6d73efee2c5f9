//! The host's pathname Unix sockets: the allowed ones resolved, and — where
//! the init cannot check connects (`UnixSockets::Covered`) — the others
//! listed to be covered.
//!
//! A `connect` to a Unix socket is stopped neither by read-only mounts nor
//! by a network namespace, and Landlock below ABI 9 has no right for it: a
//! confined command that reaches a server's socket (docker, an ssh or gpg
//! agent, a credential helper, an editor) asks an unconfined process to act
//! for it. By default the sandbox's init checks every connect
//! (`sys::supervise`), and needs from here only the allowed sockets'
//! inodes. In the fallback every pathname socket bound in the harness's
//! network namespace when the command starts — the kernel lists them in
//! `/proc/net/unix` — is covered inside the command's mount namespace by a
//! read-only `/dev/null` (a connect then finds no socket there), except the
//! ones the policy allows ([`crate::Policy::allow_sockets`]); a socket a
//! host server binds after the command started is not covered there.
//!
//! An allowed socket inside a hidden folder is carried through the folder's
//! cover (bound onto an empty file in it); one under a private `/tmp` is
//! carried onto it like any visible path.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::SandboxError;

/// The socket table's path.
const TABLE: &str = "/proc/net/unix";

/// What the sandbox does with the host's sockets.
#[derive(Debug, Default)]
pub(crate) struct HostSockets {
    /// Canonical paths of the sockets to cover.
    pub covered: Vec<PathBuf>,
    /// Canonical paths of the sockets the policy allows.
    pub allowed: Vec<PathBuf>,
    /// Their `(st_dev, st_ino)`, for the init's check.
    pub allowed_ids: Vec<(u64, u64)>,
    /// Each allowed socket held open (`O_PATH`) while the command runs:
    /// its inode cannot be freed, so no other file takes its number.
    pub pins: Vec<fs_err::File>,
}

/// Resolves the policy's allowed sockets (each must exist and be a
/// socket) and, with `cover`, lists every other socket bound now.
pub(crate) fn host_sockets(allow: &[PathBuf], cover: bool) -> Result<HostSockets, SandboxError> {
    let mut allowed = Vec::new();
    let mut allowed_ids = Vec::new();
    let mut pins = Vec::new();
    for p in allow {
        let bad = |why: String| SandboxError::Socket {
            path: p.display().to_string(),
            why,
        };
        let real = fs_err::canonicalize(p).map_err(|e| bad(format!("cannot be resolved ({e})")))?;
        let pin = fs_err::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&real)
            .map_err(|e| bad(format!("cannot be opened ({e})")))?;
        let meta = pin
            .metadata()
            .map_err(|e| bad(format!("cannot be read ({e})")))?;
        if !meta.file_type().is_socket() {
            return Err(bad(format!("is not a Unix socket ({})", real.display())));
        }
        allowed_ids.push((meta.dev(), meta.ino()));
        allowed.push(real);
        pins.push(pin);
    }
    allowed.sort();
    allowed.dedup();
    if !cover {
        return Ok(HostSockets {
            covered: Vec::new(),
            allowed,
            allowed_ids,
            pins,
        });
    }
    // No table (a /proc without it): nothing is known to cover; the
    // caller's hidden folders still apply.
    let table = fs_err::read(TABLE).unwrap_or_default();
    let covered = bound_paths(&table)
        .into_iter()
        .filter_map(|p| {
            let real = fs_err::canonicalize(&p).ok()?;
            let is_socket =
                fs_err::symlink_metadata(&real).is_ok_and(|m| m.file_type().is_socket());
            (is_socket && !allowed.contains(&real)).then_some(real)
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Ok(HostSockets {
        covered,
        allowed,
        allowed_ids,
        pins,
    })
}

/// The absolute paths bound in a `/proc/net/unix` table (its lines are
/// `Num: RefCount Protocol Flags Type St Inode [Path]`; abstract names
/// start with `@`, unnamed sockets have no path). A line that is not a
/// socket's (the header, the tail of a name holding a newline) is skipped;
/// the caller keeps only what is a socket on disk, so a forged line can at
/// worst cover another socket.
pub(crate) fn bound_paths(table: &[u8]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for line in table.split(|&b| b == b'\n') {
        let Some(path) = path_of(line) else { continue };
        if path.first() == Some(&b'/') {
            out.insert(PathBuf::from(std::ffi::OsStr::from_bytes(path)));
        }
    }
    out
}

/// The path field of one table line, if the line is a socket's and has one.
fn path_of(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line;
    for field in 0..7 {
        let start = rest.iter().position(|&b| b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        let token = &rest[..end];
        let ok = if field == 0 {
            token.len() > 1
                && token.ends_with(b":")
                && token[..token.len() - 1].iter().all(u8::is_ascii_hexdigit)
        } else {
            token.iter().all(u8::is_ascii_alphanumeric)
        };
        if !ok {
            return None;
        }
        rest = &rest[end..];
    }
    // One space, then the name to the end of the line.
    rest.strip_prefix(b" ").filter(|p| !p.is_empty())
}

/// The allowed sockets that lie inside `folder` (carried through its
/// cover).
pub(crate) fn inside<'a>(allowed: &'a [PathBuf], folder: &Path) -> Vec<&'a PathBuf> {
    allowed
        .iter()
        .filter(|s| s.as_path() != folder && s.starts_with(folder))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_gives_only_absolute_names_of_real_lines() {
        let table = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
0000000000000000: 00000002 00000000 00010000 0001 01  2044 /run/user/1000/bus\n\
0000000000000000: 00000003 00000000 00000000 0001 03 30981 /run/user/1000/bus\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12345 @/tmp/.X11-unix/X0\n\
0000000000000000: 00000002 00000000 00000000 0002 01 16270\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12346 /tmp/a name with spaces\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12347 /tmp/line\n/etc/passwd\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12348 relative.sock\n";
        let got: Vec<_> = bound_paths(table).into_iter().collect();
        assert_eq!(
            got,
            [
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/tmp/a name with spaces"),
                PathBuf::from("/tmp/line"),
            ]
        );
    }

    #[test]
    fn allowed_sockets_must_be_sockets() {
        let tmp = std::env::temp_dir();
        let e = host_sockets(std::slice::from_ref(&tmp), true)
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("is not a Unix socket")),
            "{e:?}"
        );
        let e = host_sockets(&[tmp.join("no-such-socket-here")], false)
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("cannot be resolved")),
            "{e:?}"
        );
    }
}
