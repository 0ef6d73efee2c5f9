//! The second line, always on (with or without the sandbox, with or without
//! `--promote`): what the worker must not have touched, captured before it
//! starts and again after it is gone. Any difference makes the task
//! `untrusted`, and the difference is named.
//!
//! Areas: the user's checkout (every file, tracked or untracked or ignored,
//! by a stat stamp that includes the ctime, which no process can set back),
//! the source's git dir when it is a linked worktree (`HEAD`, `index`, …), the
//! whole common dir except `objects/` and `logs/` (config, hooks, info,
//! refs, packed-refs, `worktrees/*/config.worktree`, `modules/**`, the main
//! index and `HEAD`), and the caller's global/system/XDG Git configuration
//! and attributes files.

use fs_err as fs;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Stamps by area, then by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    areas: BTreeMap<&'static str, BTreeMap<PathBuf, String>>,
}

fn stat_stamp(m: &std::fs::Metadata) -> String {
    format!(
        "{:o} {} {} {}.{} {}.{}",
        m.mode(),
        m.len(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
}

fn content_stamp(path: &Path, m: &std::fs::Metadata) -> String {
    if m.file_type().is_symlink() {
        return format!(
            "link {}",
            fs::read_link(path)
                .map(|t| hex::encode(t.as_os_str().as_bytes()))
                .unwrap_or_default()
        );
    }
    if m.is_dir() {
        return format!("dir {:o}", m.mode());
    }
    let digest = fs::read(path)
        .map(|b| hex::encode(Sha256::digest(&b)))
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    format!("{:o} {digest}", m.mode())
}

/// Every entry under `dir` (not following symlinks), except the names in
/// `skip` (relative to `dir`).
fn walk(
    dir: &Path,
    base: &Path,
    skip: &[&str],
    stamp: &dyn Fn(&Path, &std::fs::Metadata) -> String,
    out: &mut BTreeMap<PathBuf, String>,
) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let rel = p.strip_prefix(base).unwrap_or(&p).to_path_buf();
        if skip.iter().any(|s| rel == Path::new(s)) {
            continue;
        }
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        out.insert(rel, stamp(&p, &m));
        if m.is_dir() {
            walk(&p, base, skip, stamp, out);
        }
    }
}

impl Watch {
    /// `checkout`: the user's working tree (its top `.git` entry is judged
    /// through the git dir and common dir); `git_dir` and `common_dir` as
    /// resolved by `git rev-parse`; `config_files`: global/system/XDG files.
    pub fn capture(
        checkout: &Path,
        git_dir: &Path,
        common_dir: &Path,
        config_files: &[PathBuf],
    ) -> Watch {
        let mut areas = BTreeMap::new();
        let mut tree = BTreeMap::new();
        let stat = |_: &Path, m: &std::fs::Metadata| stat_stamp(m);
        walk(checkout, checkout, &[".git"], &stat, &mut tree);
        // The `.git` entry itself (a `gitdir:` file can be re-pointed).
        if let Ok(m) = fs::symlink_metadata(checkout.join(".git"))
            && !m.is_dir()
        {
            tree.insert(
                PathBuf::from(".git"),
                content_stamp(&checkout.join(".git"), &m),
            );
        }
        areas.insert("the checkout", tree);
        let content = |p: &Path, m: &std::fs::Metadata| content_stamp(p, m);
        let mut common = BTreeMap::new();
        walk(
            common_dir,
            common_dir,
            &["objects", "logs"],
            &content,
            &mut common,
        );
        areas.insert("the common dir", common);
        if git_dir != common_dir {
            let mut admin = BTreeMap::new();
            walk(git_dir, git_dir, &["logs"], &content, &mut admin);
            areas.insert("the git dir", admin);
        }
        let mut config = BTreeMap::new();
        for f in config_files {
            let stamp = match fs::symlink_metadata(f) {
                Ok(m) => content_stamp(f, &m),
                Err(_) => "absent".to_owned(),
            };
            config.insert(f.clone(), stamp);
            if f.is_dir() {
                walk(f, Path::new("/"), &[], &content, &mut config);
            }
        }
        areas.insert("Git configuration", config);
        Watch { areas }
    }

    /// Every difference between `self` (before) and `after`, named (at most
    /// ten per area).
    pub fn differences(&self, after: &Watch) -> Vec<String> {
        let mut out = Vec::new();
        for (area, before) in &self.areas {
            let empty = BTreeMap::new();
            let now = after.areas.get(area).unwrap_or(&empty);
            let mut changed: Vec<String> = Vec::new();
            for (path, stamp) in before {
                match now.get(path) {
                    None => changed.push(format!("{} removed", path.display())),
                    Some(s) if s != stamp => changed.push(format!("{} changed", path.display())),
                    Some(_) => {}
                }
            }
            for path in now.keys().filter(|p| !before.contains_key(*p)) {
                changed.push(format!("{} created", path.display()));
            }
            let n = changed.len();
            changed.truncate(10);
            if n > 0 {
                let more = if n > 10 {
                    format!(" (and {} more)", n - 10)
                } else {
                    String::new()
                };
                out.push(format!("{area}: {}{more}", changed.join(", ")));
            }
        }
        out
    }
}
