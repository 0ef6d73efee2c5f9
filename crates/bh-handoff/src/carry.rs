//! What `enter` carries into the target: the source session as the live
//! session holds it ([`source_session`]), and the target file it becomes
//! ([`carry`]) — an earlier file of the same session extended (resumed), a
//! fork (the whole tree, or the path to one entry), or a new empty session.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use bh_protocol::SessionHeader;
use bh_session::{ForkOptions, ForkTarget, Session, SessionWriter, fork, new_session_id, now_iso};

use serde::Serialize;

use crate::error::{HandoffError, Result};
use crate::handoff::Resumed;

/// What a move put in the target session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Carry {
    /// A fork holding the whole tree.
    WholeTree,
    /// A fork holding the path to the chosen entry.
    FromEntry,
    /// A new session (the source held no entries).
    Empty,
    /// The session's earlier file in the target checkout, extended in place
    /// (a round trip: into a worktree and back, or back into it again).
    Resumed,
}

impl Carry {
    pub fn as_str(self) -> &'static str {
        match self {
            Carry::WholeTree => "whole-tree",
            Carry::FromEntry => "from-entry",
            Carry::Empty => "empty",
            Carry::Resumed => "resumed",
        }
    }
}

impl std::fmt::Display for Carry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the source session is and what the live session adds to it.
pub(crate) struct SourceSpec<'a> {
    /// The source session file (may not exist yet: Pi writes lazily).
    pub(crate) session: &'a Path,
    /// The entry the live session is at, when it differs from the file's leaf.
    pub(crate) entry: Option<&'a String>,
    /// Where the caller stands.
    pub(crate) cwd: &'a Path,
    /// Entries the live session holds beyond the file.
    pub(crate) unflushed: &'a [serde_json::Value],
}

/// The source session: the file plus the entries the live session holds
/// beyond it (carried in memory; the source file is never written), checked
/// valid, the asked entry present. `None`: no entries at all.
pub(crate) fn source_session(opts: &SourceSpec<'_>) -> Result<Option<Session>> {
    // The source: a missing or empty file is a session with no entries.
    let mut bytes = match fs_err::read(opts.session) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(HandoffError::io(opts.session, e)),
    };
    if !opts.unflushed.is_empty() {
        let enc = |e: serde_json::Error| HandoffError::Format {
            path: opts.session.to_path_buf(),
            message: e.to_string(),
        };
        if bytes.is_empty() {
            let header = SessionHeader::new(
                new_session_id(),
                now_iso(),
                opts.cwd.display().to_string(),
                None,
            );
            bytes = serde_json::to_vec(&header).map_err(enc)?;
            bytes.push(b'\n');
        }
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        for entry in opts.unflushed {
            bytes.extend_from_slice(&serde_json::to_vec(entry).map_err(enc)?);
            bytes.push(b'\n');
        }
    }
    let source =
        (!bytes.is_empty()).then(|| Session::parse(bytes, Some(opts.session.to_path_buf())));
    if let Some(s) = &source {
        if s.header().is_none() || !s.is_valid() {
            let why = s
                .errors()
                .next()
                .map(|p| p.to_string())
                .unwrap_or_else(|| "no session header".into());
            return Err(HandoffError::Refused(format!(
                "{} is not a valid Pi session: {why}",
                opts.session.display()
            )));
        }
        if let Some(e) = opts.entry {
            s.require(e)?;
        }
    } else if let Some(e) = opts.entry {
        return Err(HandoffError::Missing {
            what: "session entry".into(),
            detail: format!("{e} ({} has no entries)", opts.session.display()),
        });
    }
    Ok(source)
}

/// The target file as [`carry`] wrote it, and how to take it back.
pub(crate) struct Carried {
    pub(crate) target: PathBuf,
    pub(crate) carry: Carry,
    /// Entries carried.
    pub(crate) entries: usize,
    /// The entry the orientation must hang under.
    pub(crate) expected_parent: Option<String>,
    /// A resumed earlier file: its path and lengths before and after.
    pub(crate) resumed: Option<(PathBuf, Resumed)>,
    /// A resumed file's length after the orientation, once written.
    pub(crate) written_end: Cell<Option<u64>>,
}

impl Carried {
    /// A failed move leaves no trace: a new file goes, a resumed one is cut
    /// back to its length before the move (unless someone appended since).
    /// Returns `e`.
    pub(crate) fn undo(&self, e: HandoffError) -> HandoffError {
        match (&self.resumed, self.written_end.get()) {
            (Some((_, r)), Some(end)) => {
                let _ = bh_session::write::truncate_if_unchanged(&self.target, end, r.from_len);
            }
            _ => {
                let _ = fs_err::remove_file(&self.target);
            }
        }
        e
    }
}

/// Writes the target session in `dir`: a whole session going back to a
/// checkout that has its earlier file extends that file (`crate::resume`);
/// otherwise a fork (the whole tree, or the path to the asked entry); a
/// source without entries starts a new session naming it as parent.
pub(crate) fn carry(
    opts: &SourceSpec<'_>,
    source: Option<&Session>,
    source_abs: &Path,
    dir: &Path,
    target_cwd: &str,
) -> Result<Carried> {
    let file_leaf = source.and_then(|s| s.leaf().map(|e| e.id.clone()));
    let whole = opts.entry.is_none() || opts.entry == file_leaf.as_ref();
    let resumed = match source {
        Some(s) if whole && !s.entries().is_empty() => resume_into(s, source_abs, dir, target_cwd)?,
        _ => None,
    };
    let (target, carry, entries, expected_parent) = match (source, &resumed) {
        (Some(s), Some((path, _))) => (path.clone(), Carry::Resumed, s.entries().len(), file_leaf),
        (Some(s), None) if !s.entries().is_empty() => {
            let partial = !whole;
            let forked = fork(
                s,
                &ForkTarget::Dir(dir.to_path_buf()),
                &ForkOptions {
                    path_only: partial,
                    entry: if partial { opts.entry.cloned() } else { None },
                    cwd: Some(target_cwd.to_owned()),
                    parent_session: Some(source_abs.display().to_string()),
                    ..ForkOptions::default()
                },
            )?;
            let carry = if partial {
                Carry::FromEntry
            } else {
                Carry::WholeTree
            };
            (forked.path, carry, forked.entries, forked.leaf)
        }
        (_, _) => {
            let header = SessionHeader::new(
                new_session_id(),
                now_iso(),
                target_cwd.to_owned(),
                source
                    .map(|_| source_abs.display().to_string())
                    .or_else(|| {
                        opts.session
                            .exists()
                            .then(|| source_abs.display().to_string())
                    }),
            );
            let w = SessionWriter::create_in_dir(dir, &header)?;
            (w.path().to_path_buf(), Carry::Empty, 0, None)
        }
    };
    Ok(Carried {
        written_end: Cell::new(resumed.as_ref().map(|(_, r)| r.to_len)),
        target,
        carry,
        entries,
        expected_parent,
        resumed,
    })
}

/// Extends the earlier file of `s` in `dir` with what it lacks, when there
/// is one that qualifies (`crate::resume`): its path and lengths (`to_len`:
/// after these lines, before the orientation).
fn resume_into(
    s: &Session,
    source_abs: &Path,
    dir: &Path,
    target_cwd: &str,
) -> Result<Option<(PathBuf, Resumed)>> {
    let Some(r) = crate::resume::find(s, source_abs, dir, target_cwd) else {
        return Ok(None);
    };
    let lines = crate::resume::missing_lines(s, r.have);
    if !bh_session::write::extend_if_unchanged(&r.path, r.len, &lines)? {
        // Written meanwhile: a new file, as for any other move.
        return Ok(None);
    }
    let to_len = r.len + lines.len() as u64;
    Ok(Some((
        r.path,
        Resumed {
            from_len: r.len,
            to_len,
        },
    )))
}
