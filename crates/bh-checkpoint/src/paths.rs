//! Path handling: project-relative paths are bytes, `/`-separated, never
//! absolute and never with `.`/`..` components.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{CheckpointError, Result};

/// Turns a path given by a person (absolute, or relative to `cwd`) into a path
/// relative to `project`, refusing anything that leaves the project. Symlinked
/// parents are resolved where they exist, so `link/../x` cannot escape either.
/// An empty result means the project itself.
pub fn project_relative(project: &Path, cwd: &Path, given: &Path) -> Result<Vec<u8>> {
    let outside = || CheckpointError::PathOutside {
        path: given.display().to_string(),
        project: project.to_path_buf(),
    };
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        cwd.join(given)
    };
    let mut normal = PathBuf::new();
    for comp in joined.components() {
        match comp {
            Component::RootDir => normal.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            Component::Normal(c) => normal.push(c),
            Component::Prefix(_) => return Err(outside()),
        }
    }
    // Resolve the parent (symlinks included) but not the last component: `link`
    // names the link itself, not its target.
    let full = match (normal.parent(), normal.file_name()) {
        (Some(parent), Some(last)) => resolve_existing_prefix(parent).join(last),
        _ => normal.clone(),
    };
    let rel = full.strip_prefix(project).map_err(|_| outside())?;
    let mut out = Vec::new();
    for comp in rel.components() {
        match comp {
            Component::Normal(c) if c != ".git" => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(c.as_bytes());
            }
            _ => return Err(outside()),
        }
    }
    Ok(out)
}

/// Canonicalises the longest existing ancestor of `path` and appends the rest.
pub(crate) fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(mut resolved) = fs_err::canonicalize(&existing) {
            for t in tail.iter().rev() {
                resolved.push(t);
            }
            return resolved;
        }
        match existing.file_name() {
            Some(name) => {
                tail.push(name.to_os_string());
                existing.pop();
            }
            None => return path.to_path_buf(),
        }
    }
}

/// Checks a project-relative path given to the library directly.
pub(crate) fn check_relative(project: &Path, path: &[u8]) -> Result<()> {
    if !bh_git::parse::is_plain_relative(path) {
        return Err(CheckpointError::PathOutside {
            path: bh_git::parse::display_path(path),
            project: project.to_path_buf(),
        });
    }
    Ok(())
}

/// The file-system path of a project-relative byte path.
pub(crate) fn fs_path(project: &Path, rel: &[u8]) -> PathBuf {
    project.join(OsStr::from_bytes(rel))
}
