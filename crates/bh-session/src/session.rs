//! Loading a session file: tolerant parsing, in-memory migration, the index.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bh_protocol::head::{EntryHead, Nullable, UsageHead};
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

/// A cheap, deterministic 8-hex id for v1 entries migrated in memory.
fn migrated_id(seed: &str, ordinal: usize, taken: &HashSet<String>) -> String {
    let mut salt = 0u64;
    loop {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed
            .as_bytes()
            .iter()
            .chain(ordinal.to_le_bytes().iter())
            .chain(salt.to_le_bytes().iter())
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let id = format!("{:08x}", (h ^ (h >> 32)) as u32);
        if !taken.contains(&id) {
            return id;
        }
        salt += 1;
    }
}

fn display_path(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string())
        .unwrap_or_else(|| "<memory>".to_owned())
}

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

    fn index(&mut self) {
        let workers = scan_workers(self.data.len());
        self.index_with(workers, PIECE_BYTES);
    }

    /// [`index`](Self::index) scanning on `workers` threads (1: in this one),
    /// `workers` pieces of about `piece` bytes at a time.
    fn index_with(&mut self, workers: usize, piece: usize) {
        let data = std::mem::take(&mut self.data);
        let mut st = IndexState::default();
        let len = data.len();
        if workers > 1 {
            // Phase 1 (parallel): scan a round of pieces, each line on its
            // own; phase 2 (sequential, file order): build entries, problems,
            // migrations. Rounds bound the memory the scanned lines take.
            let ranges = split_at_newlines(&data, (len / piece.max(1)).max(workers));
            let mut line_no = 0usize;
            for round in ranges.chunks(workers) {
                for chunk in scan_parallel(&data, round) {
                    for sl in chunk {
                        line_no += 1;
                        self.index_line(&data, &mut st, line_no, sl.span, sl.has_nl, sl.scan);
                    }
                }
            }
        } else {
            let mut start = 0usize;
            let mut line_no = 0usize;
            while start < len {
                line_no += 1;
                let (end, next, has_nl) = match memchr_nl(&data[start..]) {
                    Some(i) => (start + i, start + i + 1, true),
                    None => (len, len, false),
                };
                let scan = scan_line(&data[start..end]);
                self.index_line(&data, &mut st, line_no, (start, end), has_nl, scan);
                start = next;
            }
        }
        if !st.saw_json && !st.no_header {
            self.problems.push(Problem::new(
                1,
                ProblemKind::NoHeader,
                None,
                if len == 0 {
                    "empty file: no session header".to_owned()
                } else {
                    "no JSON line: no session header".to_owned()
                },
            ));
        }
        self.data = data;
        self.migrate(&st.parsed, &st.pending_first_kept);
        self.build_index();
    }

    /// Phase 2 for one non-blank or blank line, in file order.
    fn index_line(
        &mut self,
        data: &[u8],
        st: &mut IndexState,
        line_no: usize,
        span: (usize, usize),
        has_nl: bool,
        scan: LineScan<'_>,
    ) {
        let line = &data[span.0..span.1];
        let deduped: Vec<u8>;
        let parsed_head = match scan {
            LineScan::Blank => return,
            LineScan::Parsed(r) => r,
            // JSON.parse accepts duplicate keys (the last wins); so do we.
            LineScan::Dedupe(e) => match dedupe_keys(line) {
                Some(d) => {
                    deduped = d;
                    EntryHead::parse(&deduped)
                }
                None => Err(e),
            },
        };
        let head = match parsed_head {
            Ok(h) => h,
            Err(e) => {
                self.skipped_lines += 1;
                let kind = if e.is_data() {
                    ProblemKind::NotAnObject
                } else if !has_nl {
                    ProblemKind::TornLastLine
                } else {
                    ProblemKind::BadJson
                };
                let msg = match kind {
                    ProblemKind::TornLastLine => {
                        format!("last line is cut short (no newline, invalid JSON: {e})")
                    }
                    ProblemKind::NotAnObject => format!("not a session entry object: {e}"),
                    _ => format!("invalid JSON: {e}"),
                };
                if kind == ProblemKind::NotAnObject {
                    // Pi's entries array holds it (it shifts v1 indexes), and
                    // as the first JSON value it makes the file invalid.
                    st.parsed.push(None);
                    if !st.saw_json {
                        st.no_header = true;
                        self.problems.push(Problem::new(
                            line_no,
                            ProblemKind::NoHeader,
                            None,
                            "first JSON line is not a session header".to_owned(),
                        ));
                    }
                    st.saw_json = true;
                }
                self.problems.push(Problem::new(line_no, kind, None, msg));
                return;
            }
        };
        if !has_nl {
            self.problems.push(Problem::new(
                line_no,
                ProblemKind::NoTrailingNewline,
                None,
                "last line has no trailing newline".to_owned(),
            ));
        }
        let first_json = !st.saw_json;
        st.saw_json = true;
        let kind_str = head.kind.as_str();
        if kind_str == Some("session") {
            if first_json && head.id.as_str().is_some() {
                match serde_json::from_slice::<SessionHeader>(line) {
                    Ok(h) => {
                        self.version = h.version.unwrap_or(1);
                        self.header = Some(Header {
                            line: line_no,
                            span,
                            header: h,
                        });
                    }
                    Err(_) => {
                        // Pi only needs type and a string id; keep what we can.
                        let h = SessionHeader {
                            kind: "session".to_owned(),
                            version: head.version.0.map(|v| v as u64),
                            id: head.id.as_str().unwrap_or_default().to_owned(),
                            timestamp: head.timestamp.as_str().map(str::to_owned),
                            cwd: head.cwd.as_str().map(str::to_owned),
                            parent_session: head.parent_session.as_str().map(str::to_owned),
                            extra: Default::default(),
                        };
                        self.version = h.version.unwrap_or(1);
                        self.header = Some(Header {
                            line: line_no,
                            span,
                            header: h,
                        });
                    }
                }
            } else if first_json {
                st.no_header = true;
                self.problems.push(Problem::new(
                    line_no,
                    ProblemKind::NoHeader,
                    None,
                    "session header has no string id".to_owned(),
                ));
            } else {
                let same = self
                    .header
                    .as_ref()
                    .is_some_and(|h| data[h.span.0..h.span.1] == *line);
                self.problems.push(Problem::new(
                    line_no,
                    ProblemKind::DuplicateHeader,
                    None,
                    if same {
                        "duplicate of the header line (Pi ignores it)".to_owned()
                    } else {
                        "a second, different session header (Pi ignores it)".to_owned()
                    },
                ));
            }
            st.parsed.push(None);
            return;
        }
        if first_json {
            st.no_header = true;
            self.problems.push(Problem::new(
                line_no,
                ProblemKind::NoHeader,
                None,
                "first line is not a session header (Pi treats the file as invalid)".to_owned(),
            ));
        }
        let entry_ix = self.entries.len();
        st.parsed.push(Some(entry_ix));
        let entry = self.entry_from_head(head, line_no, span, &mut st.pending_first_kept);
        self.entries.push(entry);
    }

    fn entry_from_head(
        &mut self,
        head: EntryHead<'_>,
        line: usize,
        span: (usize, usize),
        pending_first_kept: &mut Vec<(usize, usize)>,
    ) -> Entry {
        let kind = match head.kind.as_str() {
            Some(k) => EntryType::from_type(k),
            None => {
                self.problems.push(Problem::new(
                    line,
                    ProblemKind::MissingType,
                    head.id.as_str(),
                    "entry has no \"type\"".to_owned(),
                ));
                EntryType::Unknown(String::new())
            }
        };
        if let EntryType::Unknown(t) = &kind
            && !t.is_empty()
        {
            self.problems.push(Problem::new(
                line,
                ProblemKind::UnknownType,
                head.id.as_str(),
                format!("unknown entry type {t:?} (kept verbatim)"),
            ));
        }
        let mut e = Entry {
            line,
            span,
            kind,
            id: head.id.into_owned().unwrap_or_default(),
            parent_id: head.parent_id.as_str().map(str::to_owned),
            timestamp: head.timestamp.into_owned(),
            role: None,
            provider: None,
            model: None,
            usage: head.usage,
            target_id: head.target_id.into_owned(),
            text: None,
            first_kept_entry_id: head.first_kept_entry_id.into_owned(),
            thinking_level: head.thinking_level.into_owned(),
            custom_type: head.custom_type.into_owned(),
            migration: None,
        };
        match &e.kind {
            EntryType::Message => match head.message.0 {
                Some(m) => {
                    let role = m.role.into_owned();
                    if let Some(r) = &role
                        && !bh_protocol::message::KNOWN_ROLES.contains(&r.as_str())
                    {
                        self.problems.push(Problem::new(
                            line,
                            ProblemKind::UnknownRole,
                            Some(&e.id),
                            format!("unknown message role {r:?} (kept verbatim)"),
                        ));
                    }
                    if role.as_deref() == Some("assistant") {
                        e.provider = m.provider.into_owned();
                        e.model = m.model.into_owned();
                    }
                    e.role = role;
                    e.usage = m.usage;
                }
                None => self.problems.push(Problem::new(
                    line,
                    ProblemKind::MissingMessage,
                    Some(&e.id),
                    "message entry has no \"message\" object".to_owned(),
                )),
            },
            EntryType::ModelChange => {
                e.provider = head.provider.into_owned();
                e.model = head.model_id.into_owned();
            }
            EntryType::Usage => {
                e.provider = head.provider.into_owned();
                e.model = head.model.into_owned();
            }
            EntryType::Label => {
                e.text = head.label.as_str().map(str::to_owned);
            }
            EntryType::SessionInfo => {
                e.text = match head.name {
                    Nullable::Str(s) => Some(s.into_owned()),
                    _ => None,
                };
            }
            EntryType::Compaction => {
                if let Some(ix) = head.first_kept_entry_index.0
                    && ix >= 0.0
                    && ix.fract() == 0.0
                {
                    pending_first_kept.push((self.entries.len(), ix as usize));
                }
            }
            _ => {}
        }
        e
    }

    /// v1 → v2 → v3, in memory ([P73] `migrateV1ToV2`, `migrateV2ToV3`).
    fn migrate(&mut self, parsed: &[Option<usize>], pending_first_kept: &[(usize, usize)]) {
        if self.header.is_none() || self.version >= 3 {
            return;
        }
        if self.version < 2 {
            let seed = self
                .header
                .as_ref()
                .map(|h| h.header.id.clone())
                .unwrap_or_default();
            let mut taken = HashSet::new();
            let mut prev: Option<String> = None;
            for (ordinal, e) in self.entries.iter_mut().enumerate() {
                let id = migrated_id(&seed, ordinal, &taken);
                taken.insert(id.clone());
                e.id = id.clone();
                e.parent_id = prev.replace(id);
                e.migration.get_or_insert_with(Default::default).added_ids = true;
            }
            for &(entry_ix, index) in pending_first_kept {
                let target = parsed
                    .get(index)
                    .copied()
                    .flatten()
                    .and_then(|ix| self.entries.get(ix))
                    .map(|t| t.id.clone());
                if let Some(e) = self.entries.get_mut(entry_ix) {
                    e.first_kept_entry_id = target.clone();
                    e.migration.get_or_insert_with(Default::default).first_kept = Some(target);
                }
            }
        }
        for e in &mut self.entries {
            if e.kind == EntryType::Message && e.role.as_deref() == Some("hookMessage") {
                e.role = Some("custom".to_owned());
                e.migration
                    .get_or_insert_with(Default::default)
                    .role_renamed = true;
            }
        }
    }

    fn build_index(&mut self) {
        for (ix, e) in self.entries.iter().enumerate() {
            if e.id.is_empty() {
                if e.kind.as_str() != "" {
                    self.problems.push(Problem::new(
                        e.line,
                        ProblemKind::MissingId,
                        None,
                        format!("{} entry has no string \"id\"", e.kind.as_str()),
                    ));
                }
                continue;
            }
            if let Some(prev) = self.by_id.insert(e.id.clone(), ix) {
                let prev_line = self.entries[prev].line;
                self.problems.push(Problem::new(
                    e.line,
                    ProblemKind::DuplicateId,
                    Some(&e.id),
                    format!("id {} already used on line {prev_line}", e.id),
                ));
            }
        }
        // Labels and name, in file order (Pi's `_buildIndex`, `getSessionName`).
        for e in &self.entries {
            match e.kind {
                EntryType::Label => {
                    let Some(target) = &e.target_id else { continue };
                    match e.text.as_deref().filter(|l| !l.is_empty()) {
                        Some(label) => {
                            if let Some(l) = self.labels.iter_mut().find(|l| &l.target_id == target)
                            {
                                l.label = label.to_owned();
                                l.timestamp = e.timestamp.clone();
                            } else {
                                self.labels.push(Label {
                                    target_id: target.clone(),
                                    label: label.to_owned(),
                                    timestamp: e.timestamp.clone(),
                                });
                            }
                        }
                        None => self.labels.retain(|l| &l.target_id != target),
                    }
                }
                EntryType::SessionInfo => {
                    self.name = e
                        .text
                        .as_deref()
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned);
                }
                _ => {}
            }
        }
        // Dangling parents and cycles.
        let n = self.entries.len();
        let parent_ix: Vec<Option<usize>> = self
            .entries
            .iter()
            .map(|e| {
                e.parent_id
                    .as_ref()
                    .and_then(|p| self.by_id.get(p).copied())
            })
            .collect();
        for (ix, e) in self.entries.iter().enumerate() {
            if let Some(p) = &e.parent_id
                && parent_ix[ix].is_none()
            {
                self.problems.push(Problem::new(
                    e.line,
                    ProblemKind::DanglingParent,
                    Some(&e.id),
                    format!("parentId {p} names no entry in this file (Pi cuts the context here)"),
                ));
            }
        }
        // 0 = unvisited, 1 = on the current walk, 2 = known to reach a root.
        let mut state = vec![0u8; n];
        let mut walk = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            walk.clear();
            let mut cur = Some(start);
            let mut cycle_at = None;
            while let Some(c) = cur {
                match state[c] {
                    2 => break,
                    1 => {
                        cycle_at = Some(c);
                        break;
                    }
                    _ => {
                        state[c] = 1;
                        walk.push(c);
                        cur = parent_ix[c];
                    }
                }
            }
            if let Some(c) = cycle_at {
                let e = &self.entries[c];
                self.problems.push(Problem::new(
                    e.line,
                    ProblemKind::Cycle,
                    Some(&e.id),
                    format!("parentId chain from entry {} loops back to itself", e.id),
                ));
            }
            for &w in &walk {
                state[w] = 2;
            }
        }
        self.problems.sort_by_key(|p| p.line);
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

/// The object with duplicate keys merged the way `JSON.parse` does (first
/// position, last value); `None` when it has no duplicates or is not an object.
fn dedupe_keys(line: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?;
    let obj = RawObject::parse(text).ok()?;
    let merged = obj.dedup_last_wins()?;
    merged.to_json().ok().map(String::into_bytes)
}

/// State of the sequential pass of [`Session::index`].
#[derive(Default)]
struct IndexState {
    /// Ordinal of every successfully parsed JSON line (Pi's `entries` array,
    /// header included), for v1 `firstKeptEntryIndex`.
    parsed: Vec<Option<usize>>,
    pending_first_kept: Vec<(usize, usize)>,
    saw_json: bool,
    no_header: bool,
}

/// One line as scanned on its own (no session state needed, so lines can be
/// scanned in parallel). Kept unboxed: only one round of pieces is held at a
/// time, and the head moves straight into the sequential pass.
#[allow(clippy::large_enum_variant)]
enum LineScan<'a> {
    /// Empty or whitespace only.
    Blank,
    /// The head, or why the line is no entry (bad JSON, not an object).
    Parsed(std::result::Result<EntryHead<'a>, serde_json::Error>),
    /// A `{` line that failed with a data error: retried sequentially with
    /// duplicate keys merged.
    Dedupe(serde_json::Error),
}

struct ScannedLine<'a> {
    span: (usize, usize),
    has_nl: bool,
    scan: LineScan<'a>,
}

fn scan_line(line: &[u8]) -> LineScan<'_> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return LineScan::Blank;
    }
    let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'{') {
        match EntryHead::parse(line) {
            Err(e) if e.is_data() => LineScan::Dedupe(e),
            other => LineScan::Parsed(other),
        }
    } else {
        // Valid JSON that is not an object: Pi parses it, but it is no entry.
        LineScan::Parsed(
            serde_json::from_slice::<serde::de::IgnoredAny>(line)
                .and_then(|_| Err(serde::de::Error::custom("expected a JSON object"))),
        )
    }
}

/// Inputs at least this large are scanned on several threads.
const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// About how many bytes one thread scans per round.
const PIECE_BYTES: usize = 1 << 20;

/// How many threads scan `len` bytes (1: the single-threaded path).
fn scan_workers(len: usize) -> usize {
    if len < PARALLEL_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// Scan `data[from..to]` line by line; `to` is `data.len()` or just past a newline.
fn scan_range(data: &[u8], from: usize, to: usize) -> Vec<ScannedLine<'_>> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let (end, next, has_nl) = match memchr_nl(&data[start..to]) {
            Some(i) => (start + i, start + i + 1, true),
            None => (to, to, false),
        };
        out.push(ScannedLine {
            span: (start, end),
            has_nl,
            scan: scan_line(&data[start..end]),
        });
        start = next;
    }
    out
}

/// `data` cut into up to `pieces` non-empty ranges, each ending just past a
/// newline (the last at the end of `data`).
fn split_at_newlines(data: &[u8], pieces: usize) -> Vec<(usize, usize)> {
    let len = data.len();
    let pieces = pieces.max(1);
    let mut ranges = Vec::with_capacity(pieces);
    let mut from = 0usize;
    for i in 1..=pieces {
        if from >= len {
            break;
        }
        let target = (len / pieces * i).max(from);
        let to = if i == pieces {
            len
        } else {
            match memchr_nl(&data[target..]) {
                Some(j) => target + j + 1,
                None => len,
            }
        };
        if to > from {
            ranges.push((from, to));
            from = to;
        }
    }
    ranges
}

/// Scan `ranges` on scoped threads (the first in this one); the results come
/// back in the order of `ranges`.
fn scan_parallel<'a>(data: &'a [u8], ranges: &[(usize, usize)]) -> Vec<Vec<ScannedLine<'a>>> {
    std::thread::scope(|s| {
        let mut rest = ranges.iter();
        let first = rest.next().copied();
        let handles: Vec<_> = rest
            .map(|&(a, b)| s.spawn(move || scan_range(data, a, b)))
            .collect();
        let mut out = Vec::with_capacity(ranges.len());
        if let Some((a, b)) = first {
            out.push(scan_range(data, a, b));
        }
        for h in handles {
            match h.join() {
                Ok(v) => out.push(v),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        out
    })
}

/// The first `\n` in `hay`, eight bytes at a time (SWAR, no `unsafe`).
fn memchr_nl(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut chunks = hay.chunks_exact(8);
    let mut off = 0usize;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w) ^ NL;
        // The lowest flagged byte is always a real `\n` (borrows only run upwards).
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(off + (found.trailing_zeros() / 8) as usize);
        }
        off += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| off + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_with(data: &[u8], workers: usize, piece: usize) -> String {
        let mut s = Session::unindexed(data.to_vec(), None);
        s.index_with(workers, piece);
        // `by_id` is a HashMap: compare it sorted.
        let mut by_id: Vec<_> = std::mem::take(&mut s.by_id).into_iter().collect();
        by_id.sort();
        // The bytes are the input; leave them out of the comparison.
        s.data = Vec::new();
        format!("{s:?} {by_id:?}")
    }

    fn assert_same_all_splits(data: &[u8]) {
        let one = parse_with(data, 1, PIECE_BYTES);
        for workers in [2, 3, 5, 8] {
            for piece in [97, 4096, PIECE_BYTES] {
                assert_eq!(
                    one,
                    parse_with(data, workers, piece),
                    "workers = {workers}, piece = {piece}"
                );
            }
        }
    }

    const BODY: &[&str] = &[
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"}}"#,
        "",
        "   ",
        r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","provider":"p","model":"m","usage":{"input":1,"output":2}}}"#,
        r#"{"type":"label","id":"l1","parentId":"a2","targetId":"a1","label":"x"}"#,
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
        r#"{"type":"session","version":3,"id":"other"}"#,
        "{not json",
        "[1,2]",
        "42",
        r#"{"type":"message","id":"d1","id":"d2","parentId":"a2","message":{"role":"user"}}"#,
        r#"{"type":"weird","id":"w1"}"#,
        r#"{"id":"nt"}"#,
        r#"{"type":"message","id":"m0"}"#,
        r#"{"type":"message","id":"r1","message":{"role":"hookMessage"}}"#,
        r#"{"type":"compaction","id":"c1","firstKeptEntryIndex":3,"summary":"s"}"#,
        r#"{"type":"session_info","id":"i1","name":"n"}"#,
        r#"{"type":"model_change","id":"mc","provider":"p","modelId":"m"}"#,
    ];

    fn big(header: &str, tail: &str, min: usize) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(header.as_bytes());
        let mut i = 0usize;
        while out.len() < min {
            out.extend_from_slice(BODY[i % BODY.len()].as_bytes());
            out.push(b'\n');
            i += 1;
        }
        out.extend_from_slice(tail.as_bytes());
        out
    }

    #[test]
    fn parallel_scan_matches_sequential() {
        // `index_with` takes the parallel path whatever the size.
        let min = 20_000;
        let v3 =
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n";
        let v1 = "{\"type\":\"session\",\"id\":\"s1\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n";
        for header in [
            v3,
            v1,
            "{\"type\":\"session\",\"version\":2,\"id\":\"s2\"}\n",
            "",
            "\n[]\n",
        ] {
            for tail in [
                "",
                "{\"type\":\"message\",\"id\":\"z\"}",
                "{\"type\":\"mess",
                "\n\n",
                "  ",
            ] {
                let data = big(header, tail, min);
                assert_same_all_splits(&data);
            }
        }
        // Tiny inputs and inputs with fewer lines than workers.
        for data in [
            &b""[..],
            b"\n",
            b"{}",
            b"{\"type\":\"session\",\"id\":\"s\"}\n{}\n",
        ] {
            assert_same_all_splits(data);
        }
        // One long line without a newline: a single chunk.
        let mut one = vec![b' '; min];
        one.push(b'{');
        assert_same_all_splits(&one);
    }

    #[test]
    fn pieces_cover_the_data_and_end_at_newlines() {
        let data = big("", "tail", 5000);
        for pieces in [1, 2, 7, 100, 10_000] {
            let ranges = split_at_newlines(&data, pieces);
            assert!(ranges.len() <= pieces);
            let mut at = 0;
            for (ix, &(a, b)) in ranges.iter().enumerate() {
                assert_eq!(a, at);
                assert!(b > a);
                if ix + 1 < ranges.len() {
                    assert_eq!(data[b - 1], b'\n');
                }
                at = b;
            }
            assert_eq!(at, data.len());
        }
        assert!(split_at_newlines(b"", 4).is_empty());
    }

    #[test]
    fn newline_search_matches_the_naive_one() {
        let mut hay = vec![b'x'; 40];
        assert_eq!(memchr_nl(&hay), None);
        for at in 0..40 {
            hay[at] = b'\n';
            for from in 0..=at {
                assert_eq!(memchr_nl(&hay[from..]), Some(at - from));
            }
            hay[at] = 0x8a; // high bit set, low bits of `\n`
            assert_eq!(memchr_nl(&hay), None);
            hay[at] = b'x';
        }
        assert_eq!(memchr_nl(b"\x0b\x0a"), Some(1));
        assert_eq!(memchr_nl(b"\x09\x0a\x0a"), Some(1));
    }

    #[test]
    fn big_inputs_scan_in_parallel_small_ones_do_not() {
        assert_eq!(scan_workers(PARALLEL_MIN_BYTES - 1), 1);
        assert!((1..=8).contains(&scan_workers(PARALLEL_MIN_BYTES)));
    }
}
