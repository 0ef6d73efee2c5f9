//! Paths as the child needs them, prepared by the parent: NUL-terminated
//! canonical paths, the folders to make on a fresh tmpfs, the private
//! `/tmp`'s size, and the overlays' mount options.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{Policy, SandboxError, sys};

pub(crate) fn c(path: &Path) -> CString {
    // Canonical paths from the kernel never hold NUL bytes.
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// The folders between `top` (excluded) and `path` (excluded), outermost
/// first: what to create on a fresh tmpfs at `top` before `path` can be
/// bound there.
pub(crate) fn parents_below(path: &Path, top: &Path) -> Vec<CString> {
    let mut out: Vec<CString> = path
        .ancestors()
        .skip(1)
        .take_while(|a| a.starts_with(top) && *a != top)
        .map(c)
        .collect();
    out.reverse();
    out
}

/// The outermost folders the private `/tmp` gets only to reach the carried
/// paths: each bind's first made folder that is not itself carried or
/// inside a carried path (see `sys::Plan::tmp_skeleton`).
pub(crate) fn tmp_skeleton(binds: &[sys::Bind]) -> Vec<CString> {
    let carried = |d: &CString| {
        binds.iter().any(|b| {
            let (b, d) = (b.path.as_bytes(), d.as_bytes());
            d == b || (d.starts_with(b) && d.get(b.len()) == Some(&b'/'))
        })
    };
    let mut out: Vec<CString> = binds
        .iter()
        .filter_map(|b| b.mkdirs.iter().find(|d| !carried(d)).cloned())
        .collect();
    out.sort();
    out.dedup();
    // Only the outermost: a folder inside another is made read-only with it.
    let all = out.clone();
    out.retain(|d| {
        !all.iter().any(|o| {
            let (o, d) = (o.as_bytes(), d.as_bytes());
            d != o && d.starts_with(o) && d.get(o.len()) == Some(&b'/')
        })
    });
    out
}

/// The private `/tmp`'s size limit in bytes: a quarter of the memory, at
/// most 4 GiB (a tmpfs takes memory only for what is written; without a
/// limit it may take half of it, and a command filling it then starves the
/// machine instead of getting ENOSPC).
pub(crate) fn tmp_size() -> u64 {
    const CAP: u64 = 4 << 30;
    let pages = nix::unistd::sysconf(nix::unistd::SysconfVar::_PHYS_PAGES)
        .ok()
        .flatten();
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten();
    match (pages, page) {
        (Some(n), Some(p)) if n > 0 && p > 0 => (n as u64 * p as u64 / 4).min(CAP),
        _ => 1 << 30,
    }
}

/// Each overlay's canonical target and its mount options
/// (`lowerdir=T,upperdir=U,workdir=W,userxattr`: the user namespace's
/// overlay keeps its metadata in `user.` attributes).
pub(crate) fn overlays(policy: &Policy) -> Result<Vec<(PathBuf, CString)>, SandboxError> {
    let mut out = Vec::new();
    for o in &policy.overlays {
        let bad = |why: &str| SandboxError::Overlay {
            path: o.target.display().to_string(),
            why: why.to_owned(),
        };
        let real = |p: &Path, what: &str| -> Result<PathBuf, SandboxError> {
            let r = fs_err::canonicalize(p).map_err(|e| bad(&format!("{what}: {e}")))?;
            if !r.is_dir() {
                return Err(bad(&format!("{what} {} is not a folder", r.display())));
            }
            // The options string separates with ',' and layers with ':'.
            if r.as_os_str()
                .as_bytes()
                .iter()
                .any(|b| matches!(b, b',' | b':' | b'\\'))
            {
                return Err(bad(&format!(
                    "{what} {} holds ',', ':' or '\\', which overlay options cannot carry",
                    r.display()
                )));
            }
            Ok(r)
        };
        let target = real(&o.target, "the folder")?;
        let upper = real(&o.upper, "the upper folder")?;
        let work = real(&o.work, "the work folder")?;
        let mut opts = b"lowerdir=".to_vec();
        opts.extend_from_slice(target.as_os_str().as_bytes());
        opts.extend_from_slice(b",upperdir=");
        opts.extend_from_slice(upper.as_os_str().as_bytes());
        opts.extend_from_slice(b",workdir=");
        opts.extend_from_slice(work.as_os_str().as_bytes());
        opts.extend_from_slice(b",userxattr");
        out.push((target, CString::new(opts).unwrap_or_default()));
    }
    Ok(out)
}
