//! Serde types for the JSONL session files of the Pi coding agent (no I/O).
//!
//! Format reference: `shared/design/pi-sessions.md` (§3). A session file is one
//! JSON object per line: a `session` header, then entries that form a tree
//! through `id`/`parentId`.
//!
//! Three layers, from cheapest to richest:
//! * [`head::EntryHead`]: a borrowed, lenient scan of one line that reads only the
//!   fields needed to index a session (type, ids, labels, models, usage). Every
//!   field tolerates an unexpected JSON type (it becomes `None`), so a line that
//!   is valid JSON never fails to scan.
//! * [`raw::RawObject`]: an ordered list of `(key, raw JSON value)` pairs. It is
//!   the escape hatch that lets unknown entry types, unknown fields and unknown
//!   roles survive byte-for-byte, and lets a single field be patched (a
//!   `parentId` re-linked, a migrated `id` added) without touching the rest.
//! * [`entry`] and [`message`]: typed entries and messages, used to write new
//!   entries in Pi's key order and to render known content.
//!
//! Also [`ToolSpec`], a tool as offered to a model (shared by `bh-tools`,
//! `bh-llm` and `bh-core`).

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod entry;
pub mod head;
pub mod header;
pub mod message;
pub mod prefix;
pub mod raw;
pub mod tool;

pub use entry::EntryType;

pub use head::{EntryHead, MessageHead, UsageHead};
pub use header::SessionHeader;
pub use raw::RawObject;
pub use tool::ToolSpec;

/// The header `version` Pi writes today (unchanged through Pi 1.x).
pub const CURRENT_SESSION_VERSION: u64 = 3;
