//! Building a session's index from its bytes: each line scanned (`scan`),
//! then, in file order, entries, problems, the v1/v2 migrations, ids and the
//! parent tree checks.

use std::collections::HashSet;

use bh_protocol::head::{EntryHead, Nullable};
use bh_protocol::{EntryType, RawObject, SessionHeader};

use super::scan::{
    LineScan, PIECE_BYTES, ScannedLine, memchr_nl, scan_line, scan_parallel, scan_workers,
    split_at_newlines,
};
use super::{Entry, Header, Label, Session};
use crate::problem::{Problem, ProblemKind};

impl Session {
    pub(super) fn index(&mut self) {
        let workers = scan_workers(self.data.len());
        self.index_with(workers, PIECE_BYTES);
    }

    /// [`index`](Self::index) scanning on `workers` threads (1: in this one),
    /// `workers` pieces of about `piece` bytes at a time.
    pub(super) fn index_with(&mut self, workers: usize, piece: usize) {
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
                        self.index_line(&data, &mut st, line_no, sl);
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
                let line = ScannedLine {
                    span: (start, end),
                    has_nl,
                    utf8: simdutf8::basic::from_utf8(&data[start..end]).is_ok(),
                    scan: scan_line(&data[start..end]),
                };
                self.index_line(&data, &mut st, line_no, line);
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

    /// Phase 2 for one non-blank or blank line, in file order: its head
    /// parsed (a bad line is recorded as such), its text checked, then it is
    /// read as the session header or as an entry.
    fn index_line(
        &mut self,
        data: &[u8],
        st: &mut IndexState,
        line_no: usize,
        scanned: ScannedLine<'_>,
    ) {
        let ScannedLine {
            span,
            has_nl,
            utf8,
            scan,
        } = scanned;
        let line = &data[span.0..span.1];
        let mut deduped = None;
        let parsed_head = match scan {
            LineScan::Blank => return,
            LineScan::Parsed(r) => r,
            LineScan::Dedupe(e) => parse_deduped(line, e, &mut deduped),
        };
        let head = match parsed_head {
            Ok(h) => h,
            Err(e) => {
                self.unparsed_line(st, line_no, has_nl, &e);
                return;
            }
        };
        self.text_problems(line_no, &head, utf8, has_nl);
        let first_json = !st.saw_json;
        st.saw_json = true;
        if head.kind.as_str() == Some("session") {
            self.session_line(data, st, line_no, span, &head, first_json);
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

    /// A line that is no entry head: skipped with its problem (bad JSON, a
    /// torn last line, or a JSON value that is not an object).
    fn unparsed_line(
        &mut self,
        st: &mut IndexState,
        line_no: usize,
        has_nl: bool,
        e: &serde_json::Error,
    ) {
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
    }

    /// The problems of a parsed line's text: bytes that are not UTF-8, and
    /// no trailing newline.
    fn text_problems(&mut self, line_no: usize, head: &EntryHead<'_>, utf8: bool, has_nl: bool) {
        // Pi reads the file as UTF-8 text: bad bytes become U+FFFD, so what
        // it sees is not what the file holds (the bytes are kept as they are).
        if !utf8 {
            self.problems.push(Problem::new(
                line_no,
                ProblemKind::NotUtf8,
                head.id.as_str(),
                "not UTF-8: Pi reads the bad bytes as U+FFFD, so its text differs from the file's"
                    .to_owned(),
            ));
        }
        if !has_nl {
            self.problems.push(Problem::new(
                line_no,
                ProblemKind::NoTrailingNewline,
                None,
                "last line has no trailing newline".to_owned(),
            ));
        }
    }

    /// A `session` line: the header when it is the first JSON line and has a
    /// string id; otherwise a missing-header or duplicate-header problem.
    fn session_line(
        &mut self,
        data: &[u8],
        st: &mut IndexState,
        line_no: usize,
        span: (usize, usize),
        head: &EntryHead<'_>,
        first_json: bool,
    ) {
        let line = &data[span.0..span.1];
        if first_json && head.id.as_str().is_some() {
            let header = session_header(line, head);
            self.version = header.version.unwrap_or(1);
            self.header = Some(Header {
                line: line_no,
                span,
                header,
            });
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
}

/// The head of a line that failed with a data error, parsed again with its
/// duplicate keys merged into `deduped` (`JSON.parse` accepts them, the last
/// wins); the first error when there are none to merge.
fn parse_deduped<'a>(
    line: &[u8],
    err: serde_json::Error,
    deduped: &'a mut Option<Vec<u8>>,
) -> Result<EntryHead<'a>, serde_json::Error> {
    match dedupe_keys(line) {
        Some(d) => EntryHead::parse(deduped.insert(d)),
        None => Err(err),
    }
}

/// The header of a first `session` line with a string id: the line parsed
/// whole, or, when that fails, what its head holds (Pi only needs the type and
/// a string id).
fn session_header(line: &[u8], head: &EntryHead<'_>) -> SessionHeader {
    serde_json::from_slice::<SessionHeader>(line).unwrap_or_else(|_| SessionHeader {
        kind: "session".to_owned(),
        version: head.version.0.map(|v| v as u64),
        id: head.id.as_str().unwrap_or_default().to_owned(),
        timestamp: head.timestamp.as_str().map(str::to_owned),
        cwd: head.cwd.as_str().map(str::to_owned),
        parent_session: head.parent_session.as_str().map(str::to_owned),
        extra: Default::default(),
    })
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
