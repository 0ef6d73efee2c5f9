//! Problems found while loading a session, each tied to a line.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Structural: `validate` fails.
    Error,
    /// Tolerated by Pi (and by us), reported for information.
    Warning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The file is empty or its first JSON line is not a `session` header with a string id.
    NoHeader,
    /// A line that is not valid JSON (Pi skips it).
    BadJson,
    /// The last line is cut short and has no newline (a crash during a write).
    TornLastLine,
    /// Valid JSON, but not an object (or a known field of the wrong shape).
    NotAnObject,
    /// A second `session` header line (Pi 0.73.1 writes one when continuing an empty file).
    DuplicateHeader,
    /// An entry without `type`.
    MissingType,
    /// An entry without a string `id` (v2+).
    MissingId,
    /// Two entries with the same id (Pi keeps the later one).
    DuplicateId,
    /// `parentId` names no entry in the file (Pi cuts the context there).
    DanglingParent,
    /// Following `parentId` loops (Pi would hang).
    Cycle,
    /// An entry type this library does not know (kept verbatim).
    UnknownType,
    /// A message role this library does not know (kept verbatim).
    UnknownRole,
    /// A `message` entry without a `message` object.
    MissingMessage,
    /// A compaction whose `firstKeptEntryId` is not on its path.
    FirstKeptNotOnPath,
    /// The last line has no trailing newline (appends add one first).
    NoTrailingNewline,
    /// An entry line that is not valid UTF-8 (Pi reads it lossily, with U+FFFD).
    NotUtf8,
}

impl ProblemKind {
    pub fn severity(self) -> Severity {
        match self {
            ProblemKind::NoHeader
            | ProblemKind::BadJson
            | ProblemKind::TornLastLine
            | ProblemKind::NotAnObject
            | ProblemKind::MissingType
            | ProblemKind::MissingId
            | ProblemKind::DuplicateId
            | ProblemKind::DanglingParent
            | ProblemKind::Cycle
            | ProblemKind::MissingMessage => Severity::Error,
            ProblemKind::DuplicateHeader
            | ProblemKind::UnknownType
            | ProblemKind::UnknownRole
            | ProblemKind::FirstKeptNotOnPath
            | ProblemKind::NoTrailingNewline
            | ProblemKind::NotUtf8 => Severity::Warning,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::NoHeader => "no_header",
            ProblemKind::BadJson => "bad_json",
            ProblemKind::TornLastLine => "torn_last_line",
            ProblemKind::NotAnObject => "not_an_object",
            ProblemKind::DuplicateHeader => "duplicate_header",
            ProblemKind::MissingType => "missing_type",
            ProblemKind::MissingId => "missing_id",
            ProblemKind::DuplicateId => "duplicate_id",
            ProblemKind::DanglingParent => "dangling_parent",
            ProblemKind::Cycle => "cycle",
            ProblemKind::UnknownType => "unknown_type",
            ProblemKind::UnknownRole => "unknown_role",
            ProblemKind::MissingMessage => "missing_message",
            ProblemKind::FirstKeptNotOnPath => "first_kept_not_on_path",
            ProblemKind::NoTrailingNewline => "no_trailing_newline",
            ProblemKind::NotUtf8 => "not_utf8",
        }
    }
}

/// One problem, at a 1-based line of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub line: usize,
    pub severity: Severity,
    pub kind: ProblemKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn new(line: usize, kind: ProblemKind, entry_id: Option<&str>, message: String) -> Self {
        Problem {
            line,
            severity: kind.severity(),
            kind,
            entry_id: entry_id.map(str::to_owned),
            message,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "line {}: {sev}: {}", self.line, self.message)?;
        if let Some(id) = &self.entry_id {
            write!(f, " (entry {id})")?;
        }
        Ok(())
    }
}
