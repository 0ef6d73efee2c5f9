//! The git dirs `bash` must keep read-only: every one under the root, as
//! the file tools protect them, not only the root's own.
//!
//! The root's git dir and common dir come from the harness's own runner
//! (`rev-parse`, never by name). Then the root is walked (symlinks are not
//! followed): a `.git` folder, the `gitdir:` target of a `.git` file (and
//! that target's `commondir`), and any folder git itself would take for a
//! repository (`HEAD` plus `objects/` and `refs/`, a bare `.bare` layout)
//! are protected; the walk does not enter them. A `.git` entry that cannot
//! be resolved (a `gitdir:` file naming nothing, unreadable, a dangling
//! link) refuses the command: protecting less in silence is the failure.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why bash may not run: a git dir that cannot be resolved.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}; bash does not run when a git dir cannot be kept read-only")]
pub(crate) struct Unresolved {
    path: String,
    why: String,
}

fn unresolved(path: &Path, why: impl Into<String>) -> Unresolved {
    Unresolved {
        path: path.display().to_string(),
        why: why.into(),
    }
}

fn is_dir(p: &Path) -> bool {
    fs_err::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn is_file(p: &Path) -> bool {
    fs_err::symlink_metadata(p).is_ok_and(|m| m.is_file() || m.file_type().is_symlink())
}

/// Git's own test (`is_git_directory`).
fn looks_like_git_dir(d: &Path) -> bool {
    is_file(&d.join("HEAD"))
        && ((is_dir(&d.join("objects")) && is_dir(&d.join("refs")))
            || is_file(&d.join("commondir")))
}

/// `dir` (a git dir) and its common dir, when it has one.
fn with_common(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Unresolved> {
    out.push(dir.to_path_buf());
    let file = dir.join("commondir");
    if fs_err::symlink_metadata(&file).is_ok() {
        let text = fs_err::read(&file).map_err(|e| unresolved(&file, e.to_string()))?;
        let common = dir.join(OsStr::from_bytes(trim(&text)));
        if !is_dir(&common) {
            return Err(unresolved(&file, "names no folder"));
        }
        out.push(common);
    }
    Ok(())
}

fn trim(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// A `.git` entry in `dir`: what it names, protected.
fn dot_git(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Unresolved> {
    let entry = dir.join(".git");
    let Ok(meta) = fs_err::symlink_metadata(&entry) else {
        return Ok(());
    };
    if meta.is_dir() {
        return with_common(&entry, out);
    }
    if meta.file_type().is_symlink() {
        // Protected through its target (the sandbox resolves paths).
        let target = fs_err::canonicalize(&entry)
            .map_err(|e| unresolved(&entry, format!("a link that leads nowhere ({e})")))?;
        out.push(entry);
        return match is_dir(&target) {
            true => with_common(&target, out),
            false => Err(unresolved(&target, "not a git dir")),
        };
    }
    let text = fs_err::read(&entry).map_err(|e| unresolved(&entry, e.to_string()))?;
    let Some(target) = trim(&text).strip_prefix(b"gitdir: ") else {
        return Err(unresolved(&entry, "a .git file without a gitdir: line"));
    };
    let target = dir.join(OsStr::from_bytes(target));
    if !is_dir(&target) {
        return Err(unresolved(&entry, "its gitdir: names no folder"));
    }
    out.push(entry);
    with_common(&target, out)
}

/// Every git dir `bash` in `root` must not write. `known`: the root's git
/// dir and common dir when the caller already asked git (the overlay did),
/// so git is not asked twice per command.
pub(crate) fn git_dirs(
    root: &Path,
    runner: &bh_git::GitRunner,
    known: Option<(&Path, &Path)>,
) -> Result<Vec<PathBuf>, Unresolved> {
    let mut out = Vec::new();
    if let Some((git_dir, common)) = known {
        out.push(git_dir.to_path_buf());
        out.push(common.to_path_buf());
    } else if let Ok(o) = runner.repo(root, bh_git::Scope::Isolated).run([
        "rev-parse",
        "--path-format=absolute",
        "--git-dir",
        "--git-common-dir",
    ]) {
        for line in o.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            out.push(PathBuf::from(OsStr::from_bytes(line)));
        }
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if dir != root && looks_like_git_dir(&dir) {
            with_common(&dir, &mut out)?;
            continue;
        }
        dot_git(&dir, &mut out)?;
        let Ok(entries) = fs_err::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name() == ".git" {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}
