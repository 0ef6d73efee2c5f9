//! Protected paths ([`crate::Policy::read_only`]) as the kernel can keep
//! them: an existing one by its canonical path (bound read-only); one that
//! is a symbolic link also as the link itself (pinned: bound onto itself,
//! so it can be neither removed nor replaced inside a writable root); and a
//! missing one inside a writable root — which the command could create
//! (a planted `~/.gitconfig`) and no mount can cover — is a refusal naming
//! it, unless a read-only folder around it already keeps it.

use std::path::{Path, PathBuf};

use crate::SandboxError;

/// The policy's protected paths, resolved.
pub(crate) struct Protected {
    /// Canonical paths of the ones that exist (a link's target).
    pub existing: Vec<PathBuf>,
    /// The links among them, by their own path (canonical parent).
    pub links: Vec<PathBuf>,
    /// The ones that do not exist: where the command would create them,
    /// and why they cannot be bound.
    pub missing: Vec<(PathBuf, &'static str)>,
}

pub(crate) fn resolve(paths: &[PathBuf]) -> Protected {
    let mut out = Protected {
        existing: Vec::new(),
        links: Vec::new(),
        missing: Vec::new(),
    };
    for p in paths {
        let is_link = fs_err::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && let Some(l) = link_path(p) {
            out.links.push(l);
        }
        match fs_err::canonicalize(p) {
            Ok(r) => out.existing.push(r),
            Err(_) if is_link => out
                .missing
                .push((through_links(p), "is a symbolic link to a missing file")),
            Err(_) => out.missing.push((through_links(p), "does not exist")),
        }
    }
    out.links.sort();
    out.links.dedup();
    out
}

/// Refuses a missing protected path that lies inside a writable root and
/// in no read-only folder.
pub(crate) fn refuse_unprotectable(
    missing: &[(PathBuf, &'static str)],
    writable: &[PathBuf],
    read_only: &[PathBuf],
) -> Result<(), SandboxError> {
    for (path, why) in missing {
        if read_only.iter().any(|r| path.starts_with(r)) {
            continue;
        }
        if let Some(root) = writable.iter().find(|w| path.starts_with(w)) {
            return Err(SandboxError::Unprotectable {
                path: path.display().to_string(),
                root: root.display().to_string(),
                why,
            });
        }
    }
    Ok(())
}

/// A link's own path with its folder canonical (the link not followed).
fn link_path(p: &Path) -> Option<PathBuf> {
    let parent = p.parent().filter(|d| !d.as_os_str().is_empty())?;
    Some(fs_err::canonicalize(parent).ok()?.join(p.file_name()?))
}

/// `p` with its nearest existing ancestor made canonical: where a path
/// that does not exist yet would be created.
fn through_links(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        if let Ok(real) = fs_err::canonicalize(at) {
            return rest.iter().rev().fold(real, |acc, name| acc.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return p.to_path_buf(),
        }
    }
}
