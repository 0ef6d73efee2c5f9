//! Pi coding-agent sessions: tolerant loading with line-numbered problems,
//! in-memory migration of v1/v2 files, the entry tree, the model context
//! exactly as Pi builds it, forks, and appends that real Pi accepts.
//!
//! Format reference: `shared/design/pi-sessions.md` (citation keys [P73],
//! [P16], [C] refer to it). Library rules: no printing, no environment, no
//! `$HOME`; every path comes in as an argument.
//!
//! Invariants:
//! * A loaded file is never written. [`Session::bytes`] are the exact input and
//!   an untouched entry is re-emitted from its original line
//!   ([`Session::entry_line`]), so unknown types, fields and roles survive.
//! * The active leaf is the last entry in file order ([`Session::leaf`]).
//! * New files are created with O_EXCL; appends hold an exclusive lock.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod context;
pub mod error;
pub mod fork;
pub mod graph;
pub mod list;
pub mod problem;
pub mod session;
mod skim;
pub mod stats;
pub mod summary;
pub mod write;

pub use context::{Context, ContextMessage, ModelRef, SystemPrompt};
pub use error::{Result, SessionError};
pub use fork::{ForkOptions, ForkTarget, Forked, fork};
pub use graph::{Graph, GraphOptions, Placement, Row, RowKind};
pub use list::{SessionSummary, list_sessions};
pub use problem::{Problem, ProblemKind, Severity};
pub use session::{Entry, Label, Migration, Session};
pub use stats::{Stats, Totals};
pub use summary::{Summary, SummaryKind, summarize, summarize_entry};
pub use write::{
    SET_LEAF_CUSTOM_TYPE, SessionWriter, new_entry_id, new_session_id, now_iso, select_leaf,
    session_dir_for_cwd, session_file_name,
};

/// Header version Pi writes (unchanged through 1.x).
pub const CURRENT_VERSION: u64 = bh_protocol::CURRENT_SESSION_VERSION;
