//! Loading a session file: tolerant parsing, in-memory migration, the index.
//!
//! The types and accessors live here; building the index is in `index`, the
//! per-line (optionally parallel) scan in `scan`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bh_protocol::head::UsageHead;
use bh_protocol::{EntryType, RawObject, SessionHeader};
use serde_json::value::RawValue;

use crate::error::{Result, SessionError};
use crate::problem::{Problem, ProblemKind};

/// What in-memory migration changed on one entry (v1/v2 files only; the file
/// itself is never rewritten).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Migration {
    /// v1 → v2: `id` and `parentId` were added (appended as the last keys).
    pub added_ids: bool,
    /// v1 → v2: a `compaction`'s `firstKeptEntryIndex` was replaced; `Some(id)`
    /// is the `firstKeptEntryId` added, `None` means Pi found no target.
    pub first_kept: Option<Option<String>>,
    /// v2 → v3: message role `hookMessage` became `custom`.
    pub role_renamed: bool,
}

/// One entry (any line with a `type` other than `session`), indexed.
#[derive(Debug, Clone)]
pub struct Entry {
    /// 1-based line number in the file.
    pub line: usize,
    /// Byte range of the line in the file, without the newline.
    pub span: (usize, usize),
    pub kind: EntryType,
    /// The entry id ("" when the entry has none: see the problems).
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: Option<String>,
    /// `message` entries: the role (after migration).
    pub role: Option<String>,
    /// Model: assistant `provider`/`model`, `model_change` `provider`/`modelId`,
    /// `usage` entry `provider`/`model`.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Token and cost numbers, when the entry carries a usage object.
    pub usage: Option<UsageHead>,
    /// `label`/`context_edit` target.
    pub target_id: Option<String>,
    /// `label` text (`None` clears), `session_info` name.
    pub text: Option<String>,
    /// `compaction.firstKeptEntryId` (after migration).
    pub first_kept_entry_id: Option<String>,
    /// `thinking_level_change.thinkingLevel`.
    pub thinking_level: Option<String>,
    /// `custom`/`custom_message` `customType`.
    pub custom_type: Option<String>,
    pub migration: Option<Box<Migration>>,
}

/// The header line, parsed.
#[derive(Debug, Clone)]
pub struct Header {
    pub line: usize,
    pub span: (usize, usize),
    pub header: SessionHeader,
}

/// A label on an entry, resolved the way Pi's `_buildIndex` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub target_id: String,
    pub label: String,
    pub timestamp: Option<String>,
}

/// A loaded session: the original bytes plus an index over them.
#[derive(Debug, Clone)]
pub struct Session {
    path: Option<PathBuf>,
    data: Vec<u8>,
    header: Option<Header>,
    version: u64,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    /// In Pi's Map order (first set keeps its position; a clear removes).
    labels: Vec<Label>,
    name: Option<String>,
    problems: Vec<Problem>,
    /// Lines Pi drops (bad JSON, non-objects).
    skipped_lines: usize,
}

fn display_path(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string())
        .unwrap_or_else(|| "<memory>".to_owned())
}

mod index;
mod scan;
#[cfg(test)]
mod tests;

impl Session {
    /// `data` before indexing.
    fn unindexed(data: Vec<u8>, path: Option<PathBuf>) -> Session {
        Session {
            path,
            data,
            header: None,
            version: crate::CURRENT_VERSION,
            entries: Vec::new(),
            by_id: HashMap::new(),
            labels: Vec::new(),
            name: None,
            problems: Vec::new(),
            skipped_lines: 0,
        }
    }

    /// Read and index a file. Never writes to it.
    pub fn load(path: impl AsRef<Path>) -> Result<Session> {
        let path = path.as_ref();
        let data = fs_err::read(path).map_err(|e| SessionError::io(path, e))?;
        Ok(Session::parse(data, Some(path.to_path_buf())))
    }

    /// Index the bytes of a session file. Never fails: every defect becomes a
    /// [`Problem`] with its line number.
    pub fn parse(data: Vec<u8>, path: Option<PathBuf>) -> Session {
        let mut s = Session::unindexed(data, path);
        s.index();
        s
    }

    // ----- accessors ---------------------------------------------------------

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The file name or path for messages.
    pub fn display_name(&self) -> String {
        display_path(self.path.as_deref())
    }

    /// The original bytes, exactly as read.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn header(&self) -> Option<&SessionHeader> {
        self.header.as_ref().map(|h| &h.header)
    }

    pub fn header_line(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The header, or the error that says this is not a session (the
    /// header problem when there is one, else `what` failed for want of it).
    pub fn require_header(&self, what: &str) -> Result<&SessionHeader> {
        if let Some(header) = self.header() {
            return Ok(header);
        }
        let problem = self
            .problems()
            .iter()
            .find(|p| p.kind == ProblemKind::NoHeader)
            .cloned();
        Err(match problem {
            Some(problem) => SessionError::NotASession {
                file: self.display_name(),
                problem,
            },
            None => SessionError::Invalid {
                file: self.display_name(),
                message: format!("{what}: no session header"),
            },
        })
    }

    /// Header `version` (absent means 1), before in-memory migration.
    pub fn source_version(&self) -> u64 {
        self.version
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }

    /// Structurally sound: no error-level problems.
    pub fn is_valid(&self) -> bool {
        self.errors().next().is_none()
    }

    /// Lines Pi drops when it loads the file (bad JSON, non-objects).
    pub fn skipped_lines(&self) -> usize {
        self.skipped_lines
    }

    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&ix| &self.entries[ix])
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Like [`entry`](Self::entry) but an error naming the file.
    pub fn require(&self, id: &str) -> Result<&Entry> {
        self.entry(id).ok_or_else(|| SessionError::EntryNotFound {
            file: self.display_name(),
            id: id.to_owned(),
        })
    }

    /// The active leaf: the last entry in file order ([P73] `_buildIndex`).
    pub fn leaf(&self) -> Option<&Entry> {
        self.entries.iter().rev().find(|e| !e.id.is_empty())
    }

    /// The session name from the latest `session_info` (empty clears).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    pub fn label_of(&self, id: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|l| l.target_id == id)
            .map(|l| l.label.as_str())
    }

    /// The text of one line.
    pub fn line_text(&self, e: &Entry) -> &[u8] {
        &self.data[e.span.0..e.span.1]
    }

    /// Entries from the root to `id` (root first), following `parentId` like
    /// Pi's `getBranch`: a missing parent ends the walk (broken chain). Cycles
    /// are cut at the first repeated entry.
    pub fn path_to_root(&self, id: &str) -> Result<Vec<&Entry>> {
        let mut ix = self
            .by_id
            .get(id)
            .copied()
            .ok_or_else(|| SessionError::EntryNotFound {
                file: self.display_name(),
                id: id.to_owned(),
            })?;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        loop {
            if !seen.insert(ix) {
                break;
            }
            let e = &self.entries[ix];
            out.push(e);
            match e.parent_id.as_ref().and_then(|p| self.by_id.get(p)) {
                Some(&p) => ix = p,
                None => break,
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Children of every entry (file order), and the roots: entries with a
    /// null, self or missing parent ([P73] `getTree`).
    pub fn children_map(&self) -> (Vec<usize>, Vec<Vec<usize>>) {
        let mut roots = Vec::new();
        let mut children = vec![Vec::new(); self.entries.len()];
        for (ix, e) in self.entries.iter().enumerate() {
            if e.id.is_empty() {
                continue;
            }
            if self.by_id.get(&e.id) != Some(&ix) {
                continue; // shadowed duplicate
            }
            match &e.parent_id {
                Some(p) if p != &e.id => match self.by_id.get(p) {
                    Some(&pix) => children[pix].push(ix),
                    None => roots.push(ix),
                },
                _ => roots.push(ix),
            }
        }
        (roots, children)
    }

    pub fn children(&self, id: &str) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| e.parent_id.as_deref() == Some(id) && e.id != id)
            .collect()
    }

    /// The raw object of an entry, with in-memory migrations applied (what Pi
    /// holds in memory after `migrateToCurrentVersion`).
    pub fn entry_object(&self, e: &Entry) -> Result<RawObject> {
        let text = std::str::from_utf8(self.line_text(e)).map_err(|err| SessionError::Invalid {
            file: self.display_name(),
            message: format!("line {}: not UTF-8: {err}", e.line),
        })?;
        let mut obj = RawObject::parse(text).map_err(|source| SessionError::Encode {
            file: self.display_name(),
            line: e.line,
            source,
        })?;
        if let Some(m) = &e.migration {
            self.apply_migration(e, m, &mut obj)?;
        }
        Ok(obj)
    }

    fn apply_migration(&self, e: &Entry, m: &Migration, obj: &mut RawObject) -> Result<()> {
        let enc = |source| SessionError::Encode {
            file: self.display_name(),
            line: e.line,
            source,
        };
        if m.added_ids {
            obj.set("id", &e.id).map_err(enc)?;
            obj.set("parentId", &e.parent_id).map_err(enc)?;
        }
        if let Some(first_kept) = &m.first_kept {
            if let Some(id) = first_kept {
                obj.set("firstKeptEntryId", id).map_err(enc)?;
            }
            obj.remove("firstKeptEntryIndex");
        }
        if m.role_renamed
            && let Some(msg) = obj.get("message")
        {
            let mut msg = RawObject::parse(msg.get()).map_err(enc)?;
            msg.set("role", "custom").map_err(enc)?;
            let raw = msg.to_raw_value().map_err(enc)?;
            obj.set_raw("message", raw);
        }
        Ok(())
    }

    /// The line of an entry as Pi would write it after loading: the original
    /// bytes when nothing was migrated, else the migrated object.
    pub fn entry_line(&self, e: &Entry) -> Result<Vec<u8>> {
        if e.migration.is_none() {
            return Ok(self.line_text(e).to_vec());
        }
        let obj = self.entry_object(e)?;
        obj.to_json()
            .map(String::into_bytes)
            .map_err(|source| SessionError::Encode {
                file: self.display_name(),
                line: e.line,
                source,
            })
    }

    /// The raw `message` object of a `message` entry, migrated.
    pub fn message_raw(&self, e: &Entry) -> Result<Option<Box<RawValue>>> {
        let obj = self.entry_object(e)?;
        Ok(obj.get("message").map(RawValue::to_owned))
    }
}
