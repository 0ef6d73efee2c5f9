//! Reading what a command wrote into the git dir's overlay (its upper
//! folder) and the real git dir's ref files, as plain data. Nothing here is
//! trusted: the upper folder is the command's; every value read is checked
//! by the broker's policy before anything is applied.

use std::collections::BTreeMap;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A ref's value: an object id, or a symbolic ref's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefVal {
    Oid(String),
    Sym(String),
}

/// A loose ref file in the upper folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loose {
    Value(RefVal),
    /// The overlay's mark of a deletion (a 0/0 character device).
    Whiteout,
    /// A file git would not read as a ref.
    Garbage,
}

pub(crate) fn parse_ref(bytes: &[u8]) -> Option<RefVal> {
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    if let Some(target) = text.strip_prefix("ref: ") {
        return valid_refname(target).then(|| RefVal::Sym(target.to_owned()));
    }
    is_oid(text).then(|| RefVal::Oid(text.to_owned()))
}

pub(crate) fn is_oid(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Git's `check-ref-format` rules, for names read from files.
pub(crate) fn valid_refname(name: &str) -> bool {
    name.starts_with("refs/")
        && !name.ends_with('/')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name.contains("//")
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
        && name.bytes().all(|b| {
            b > 0x20 && b != 0x7f && !matches!(b, b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\')
        })
}

/// `upper/rel` when no component of `rel` is a symbolic link (the
/// command made the upper folder: a link there would have the broker, which
/// is not confined, read a folder the command may not — another
/// repository's packs, a hidden file).
pub(crate) fn inside(upper: &Path, rel: impl AsRef<Path>) -> Option<PathBuf> {
    let mut p = upper.to_path_buf();
    for c in rel.as_ref().components() {
        match c {
            std::path::Component::Normal(n) => p.push(n),
            _ => return None,
        }
        if fs_err::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return None;
        }
    }
    Some(p)
}

/// Every loose ref file (and deletion mark) under `dir/refs`, by name.
pub(crate) fn loose_refs(dir: &Path) -> BTreeMap<String, Loose> {
    let mut out = BTreeMap::new();
    let Some(refs) = inside(dir, "refs") else {
        return out;
    };
    let mut stack = vec![(refs, "refs".to_owned())];
    while let Some((path, name)) = stack.pop() {
        let Ok(entries) = fs_err::read_dir(&path) else {
            continue;
        };
        for e in entries.flatten() {
            let Some(part) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let full = format!("{name}/{part}");
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push((e.path(), full));
            } else if !valid_refname(&full) {
                // A lock file or a name git would not take: not a ref.
            } else if t.is_char_device() {
                out.insert(full, Loose::Whiteout);
            } else if t.is_file() {
                let v = fs_err::read(e.path()).ok().and_then(|b| parse_ref(&b));
                out.insert(full, v.map_or(Loose::Garbage, Loose::Value));
            }
        }
    }
    out
}

/// `packed-refs` of `dir`: `None` when the file is not there (a deletion
/// mark counts as an empty file).
pub(crate) fn packed_refs(dir: &Path) -> Option<BTreeMap<String, String>> {
    let path = inside(dir, "packed-refs")?;
    let meta = fs_err::symlink_metadata(&path).ok()?;
    let mut out = BTreeMap::new();
    if !meta.is_file() {
        return Some(out);
    }
    let text = fs_err::read(&path).ok()?;
    for line in text.split(|b| *b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        if line.starts_with('#') || line.starts_with('^') {
            continue;
        }
        if let Some((oid, name)) = line.split_once(' ')
            && is_oid(oid)
            && valid_refname(name)
        {
            out.insert(name.to_owned(), oid.to_owned());
        }
    }
    Some(out)
}

/// A reflog's lines: `(new oid, message)`, oldest first.
pub(crate) fn reflog(path: &Path) -> Vec<(String, String)> {
    let Ok(meta) = fs_err::symlink_metadata(path) else {
        return Vec::new();
    };
    if !meta.is_file() {
        return Vec::new();
    }
    let text = fs_err::read(path).unwrap_or_default();
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| {
            let (head, msg) = l.split_once('\t').unwrap_or((l, ""));
            let new = head.split(' ').nth(1)?;
            is_oid(new).then(|| (new.to_owned(), msg.to_owned()))
        })
        .collect()
}

/// Whether the upper folder holds `rel` (a file written, or a deletion).
pub(crate) fn has(upper: &Path, rel: &str) -> bool {
    inside(upper, rel).is_some_and(|p| fs_err::symlink_metadata(p).is_ok())
}

/// The object files a command wrote: loose objects by id, and pack
/// files (`.pack` with its `.idx`). Only regular files with names git
/// itself would write; links and anything else are ignored.
pub(crate) struct Objects {
    pub loose: Vec<(String, PathBuf)>,
    pub packs: Vec<(PathBuf, PathBuf)>,
}

pub(crate) fn objects(upper: &Path) -> Objects {
    let mut loose = Vec::new();
    let mut packs = Vec::new();
    let Some(dir) = inside(upper, "objects") else {
        return Objects { loose, packs };
    };
    let regular = |p: &Path| fs_err::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return Objects { loose, packs };
    };
    for e in entries.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        // Folders only, never a link to one (the entry's own type).
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if name == "pack" {
            let Ok(files) = fs_err::read_dir(e.path()) else {
                continue;
            };
            for f in files.flatten() {
                let Some(n) = f.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if let Some(stem) = n.strip_prefix("pack-").and_then(|n| n.strip_suffix(".idx"))
                    && hex(stem)
                {
                    let pack = e.path().join(format!("pack-{stem}.pack"));
                    if regular(&f.path()) && regular(&pack) {
                        packs.push((f.path(), pack));
                    }
                }
            }
        } else if name.len() == 2 && hex(&name) {
            let Ok(files) = fs_err::read_dir(e.path()) else {
                continue;
            };
            for f in files.flatten() {
                let Some(n) = f.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let oid = format!("{name}{n}");
                if is_oid(&oid) && regular(&f.path()) {
                    loose.push((oid, f.path()));
                }
            }
        }
    }
    loose.sort();
    packs.sort();
    Objects { loose, packs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refnames_as_git_checks_them() {
        assert!(valid_refname("refs/heads/main"));
        assert!(valid_refname("refs/heads/feature/x-1"));
        for bad in [
            "refs/heads/main.lock",
            "refs/heads/.hidden",
            "refs/heads/a..b",
            "refs/heads/a b",
            "refs/heads/a@{1}",
            "refs/heads/",
            "HEAD",
            "refs/heads/a\nb",
        ] {
            assert!(!valid_refname(bad), "{bad:?}");
        }
    }

    #[test]
    fn ref_files_parse_as_git_reads_them() {
        let oid = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            parse_ref(format!("{oid}\n").as_bytes()),
            Some(RefVal::Oid(oid.into()))
        );
        assert_eq!(
            parse_ref(b"ref: refs/heads/x\n"),
            Some(RefVal::Sym("refs/heads/x".into()))
        );
        assert_eq!(parse_ref(b"ref: ../../etc\n"), None);
        assert_eq!(parse_ref(b"nonsense"), None);
    }
}
