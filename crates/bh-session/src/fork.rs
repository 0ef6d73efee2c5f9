//! Forks: Pi's `forkFrom` (whole tree, same ids, new header) and
//! `createBranchedSession` (root→entry path only, labels re-created, 1.x re-linking).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bh_protocol::entry::LabelEntry;
use bh_protocol::{EntryType, SessionHeader};

use crate::error::{Result, SessionError};
use crate::session::Session;
use crate::write::{
    SessionWriter, create_new_file, new_entry_id, new_session_id, now_iso, session_file_name,
};

/// Where the fork goes.
#[derive(Debug, Clone)]
pub enum ForkTarget {
    /// A directory; the file gets Pi's name `<timestamp>_<id>.jsonl`.
    Dir(PathBuf),
    /// An exact path (refused if it exists).
    File(PathBuf),
}

#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Only the root→entry path (`createBranchedSession`); else the whole tree.
    pub path_only: bool,
    /// The entry to fork at: the end of the path, or (whole tree) the entry
    /// made the active leaf. Default: the source's active leaf.
    pub entry: Option<String>,
    /// Header `cwd` of the fork (default: the source's).
    pub cwd: Option<String>,
    /// Header `parentSession` (default: the source path made absolute).
    pub parent_session: Option<String>,
    /// Session id (default: a new UUIDv7).
    pub session_id: Option<String>,
    /// Header timestamp (default: now).
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Forked {
    pub path: PathBuf,
    pub session_id: String,
    /// Entries written (header not counted).
    pub entries: usize,
    /// The active leaf of the new file.
    pub leaf: Option<String>,
}

fn enc(session: &Session, line: usize) -> impl Fn(serde_json::Error) -> SessionError + '_ {
    move |source| {
        if line == 0 {
            SessionError::Serialize {
                file: session.display_name(),
                source,
            }
        } else {
            SessionError::Encode {
                file: session.display_name(),
                line,
                source,
            }
        }
    }
}

/// Write a fork of `src`. The source file is only read.
pub fn fork(src: &Session, target: &ForkTarget, opts: &ForkOptions) -> Result<Forked> {
    let src_header = src.require_header("cannot fork")?;
    let at = match &opts.entry {
        Some(id) => Some(src.require(id)?.id.clone()),
        None => src.leaf().map(|e| e.id.clone()),
    };
    let session_id = opts.session_id.clone().unwrap_or_else(new_session_id);
    let timestamp = opts.timestamp.clone().unwrap_or_else(now_iso);
    let parent_session = match &opts.parent_session {
        Some(p) => Some(p.clone()),
        None => src
            .path()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
            .map(|p| p.display().to_string()),
    };
    let cwd = opts
        .cwd
        .clone()
        .or_else(|| src_header.cwd.clone())
        .unwrap_or_default();
    let header = SessionHeader::new(session_id.clone(), timestamp.clone(), cwd, parent_session);
    let mut out = serde_json::to_vec(&header).map_err(enc(src, 0))?;
    out.push(b'\n');

    let (count, last) = if opts.path_only {
        write_path(src, at.as_deref(), &mut out)?
    } else {
        let mut n = 0;
        let mut last = None;
        for e in src.entries() {
            out.extend_from_slice(&src.entry_line(e)?);
            out.push(b'\n');
            n += 1;
            if !e.id.is_empty() {
                last = Some(e.id.clone());
            }
        }
        (n, last)
    };

    let path = match target {
        ForkTarget::File(p) => p.clone(),
        ForkTarget::Dir(d) => d.join(session_file_name(&timestamp, &session_id)),
    };
    create_new_file(&path, &out)?;
    let mut forked = Forked {
        path,
        session_id,
        entries: count,
        leaf: last.clone(),
    };
    // Whole tree at an entry that is not the leaf: make it the active leaf.
    if !opts.path_only
        && let Some(at) = at
        && last.as_deref() != Some(at.as_str())
    {
        let fresh = Session::parse(out, Some(forked.path.clone()));
        let mut w = SessionWriter::from_session(&fresh, forked.path.clone());
        let id = w.select_leaf(&at)?;
        forked.entries += 1;
        forked.leaf = Some(id);
    }
    Ok(forked)
}

/// The root→`at` path with label entries dropped, children re-linked across
/// them, then the labels of kept entries re-created at the end ([P16]
/// `createBranchedSession`).
fn write_path(
    src: &Session,
    at: Option<&str>,
    out: &mut Vec<u8>,
) -> Result<(usize, Option<String>)> {
    let Some(at) = at else {
        return Ok((0, None));
    };
    let path = src.path_to_root(at)?;
    let mut replacement: HashMap<&str, &str> = HashMap::new();
    let mut pending: Vec<&str> = Vec::new();
    let mut parent: Option<&str> = None;
    let mut kept: HashSet<String> = HashSet::new();
    let mut count = 0;
    for e in &path {
        if e.kind == EntryType::Label {
            pending.push(&e.id);
            continue;
        }
        for l in pending.drain(..) {
            replacement.insert(l, &e.id);
        }
        let new_first_kept = if e.kind == EntryType::Compaction {
            e.first_kept_entry_id
                .as_deref()
                .filter(|fk| *fk != e.id)
                .and_then(|fk| replacement.get(fk).copied())
        } else {
            None
        };
        if e.parent_id.as_deref() == parent && new_first_kept.is_none() {
            out.extend_from_slice(&src.entry_line(e)?);
        } else {
            let mut obj = src.entry_object(e)?;
            obj.set("parentId", &parent).map_err(enc(src, e.line))?;
            if let Some(fk) = new_first_kept {
                obj.set("firstKeptEntryId", fk).map_err(enc(src, e.line))?;
            }
            out.extend_from_slice(obj.to_json().map_err(enc(src, e.line))?.as_bytes());
        }
        out.push(b'\n');
        count += 1;
        kept.insert(e.id.clone());
        parent = Some(&e.id);
    }
    let mut last = parent.map(str::to_owned);
    let mut taken = kept.clone();
    for l in src.labels() {
        if !kept.contains(&l.target_id) {
            continue;
        }
        let id = new_entry_id(&taken);
        taken.insert(id.clone());
        let entry = LabelEntry {
            kind: "label".into(),
            id: id.clone(),
            parent_id: last.clone(),
            timestamp: l.timestamp.clone(),
            target_id: l.target_id.clone(),
            label: Some(l.label.clone()),
        };
        out.extend_from_slice(&serde_json::to_vec(&entry).map_err(enc(src, 0))?);
        out.push(b'\n');
        count += 1;
        last = Some(id);
    }
    Ok((count, last))
}

/// Default directory of a fork that stays in the source's project: the
/// source file's folder (Pi's `createBranchedSession` uses the session dir).
pub fn default_fork_dir(src_path: &Path) -> PathBuf {
    src_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
