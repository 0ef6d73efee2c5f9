//! A session carried back into a checkout it has a file in already: instead
//! of a new copy of the whole history on every round trip (`bh session ls`
//! filling with near-identical files), the earlier file is extended with
//! what happened since, then the orientation.
//!
//! The earlier file qualifies only when it is exactly a prefix of the
//! session being carried — the same entries, byte for byte, in the same
//! order, and nothing after them (nobody wrote to it since the session left
//! it) — it is the carried session's parent or child (`parentSession`), its
//! header names the target checkout, and no handoff of it is pending. The
//! extension is one append under the file's lock that happens only if the
//! file still has the length it was read at; a move that fails afterwards
//! cuts the file back to that length (the same check), so a failed or
//! cancelled move leaves it as it was. Anything else forks a new file, as
//! before.

use std::path::{Path, PathBuf};

use bh_session::Session;
use fs_err as fs;

use crate::handoff::{handoff_path, sibling};

/// An earlier file of the session in the target checkout, and how much of
/// the carried session it already holds.
pub(crate) struct Resumable {
    pub path: PathBuf,
    /// Its length when read (the extension requires it unchanged).
    pub len: u64,
    /// How many of the carried session's entries it holds (a prefix).
    pub have: usize,
}

/// The earlier file of `source` (loaded from `source_path`) in `dir` that
/// the move can extend, if there is one (the one holding most of it).
pub(crate) fn find(
    source: &Session,
    source_path: &Path,
    dir: &Path,
    target_cwd: &str,
) -> Option<Resumable> {
    // Lines are carried as they are: a session Pi would migrate forks instead.
    if source.entries().iter().any(|e| e.migration.is_some()) {
        return None;
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(parent) = source.header().and_then(|h| h.parent_session.as_deref()) {
        let parent = PathBuf::from(parent);
        if parent.parent() == Some(dir) {
            candidates.push(parent);
        }
    }
    let source_str = source_path.display().to_string();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl")
                && !candidates.contains(&path)
                && first_line_parent(&path).as_deref() == Some(source_str.as_str())
            {
                candidates.push(path);
            }
        }
    }
    candidates
        .into_iter()
        .filter(|c| c.as_path() != source_path)
        .filter_map(|c| check(source, &c, target_cwd))
        .max_by_key(|r| r.have)
}

/// The `parentSession` of the header line of `path` (a bounded read).
fn first_line_parent(path: &Path) -> Option<String> {
    use std::io::{BufRead, BufReader, Read};
    let file = fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .ok()?;
    let header: bh_protocol::SessionHeader = serde_json::from_slice(&line).ok()?;
    header.parent_session
}

fn check(source: &Session, path: &Path, target_cwd: &str) -> Option<Resumable> {
    // A pending (or claimed) handoff of it: another move owns it.
    if handoff_path(path).exists() || claimed(path) {
        return None;
    }
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let cand = Session::load(path).ok()?;
    if !cand.is_valid() || cand.header().and_then(|h| h.cwd.as_deref()) != Some(target_cwd) {
        return None;
    }
    let (ours, theirs) = (source.entries(), cand.entries());
    if theirs.is_empty() || theirs.len() > ours.len() || !cand.bytes().ends_with(b"\n") {
        return None;
    }
    let same = theirs.iter().zip(ours).all(|(t, o)| {
        t.id == o.id && t.migration.is_none() && cand.line_text(t) == source.line_text(o)
    });
    same.then(|| Resumable {
        path: path.to_path_buf(),
        len: cand.bytes().len() as u64,
        have: theirs.len(),
    })
}

/// Whether a handoff record of `target` was claimed by an older `bh`.
fn claimed(target: &Path) -> bool {
    let prefix = sibling(target, ".handoff.claimed");
    let (Some(dir), Some(prefix)) = (target.parent(), prefix.file_name()) else {
        return false;
    };
    let prefix = prefix.as_encoded_bytes().to_vec();
    fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().as_encoded_bytes().starts_with(&prefix))
    })
}

/// The lines of `source`'s entries after the first `have`, each ending in a
/// newline: what the earlier file lacks.
pub(crate) fn missing_lines(source: &Session, have: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for e in &source.entries()[have..] {
        out.extend_from_slice(source.line_text(e));
        out.push(b'\n');
    }
    out
}
