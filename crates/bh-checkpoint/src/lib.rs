//! `bh-checkpoint`: shadow-git checkpoints of a project's working tree.
//!
//! A project's checkpoints live in a private Git repository (the *shadow*) under
//! `<state>/checkpoints/<name>-<hash>/`, never in the user's `.git`. A snapshot
//! stages the working tree as the user sees it (their ignore rules, raw bytes,
//! symlinks and exec bits) into the shadow's persistent index — which doubles as
//! the stat cache — writes a tree and, unless nothing changed, a parentless
//! commit kept alive by `refs/bh/checkpoints/<id>`. Every multi-step operation
//! holds one `flock` on the store.
//!
//! ```text
//! <store>/lock      flock(2) target, held for a whole snapshot/restore/diff/prune
//! <store>/project   the canonical project path this store belongs to
//! <store>/git/      the shadow repository (isolated config, info/attributes
//!                   neutralising every byte conversion, info/exclude synced)
//! ```

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod apply;
mod compare;
mod diff;
mod entry;
mod error;
mod journal;
mod live;
mod meta;
mod paths;
mod plan;
mod prehash;
mod prune;
mod refs;
mod restore;
mod seed;
mod snapshot;
mod store;
mod trust;
mod user;

pub use compare::CompareOutcome;
pub use diff::{DiffEntry, DiffOutcome, DiffText};
pub use entry::{EntryCalls, Recorded};
pub use error::{CheckpointError, ErrorClass, Result};
pub use journal::{AfterCall, Call, Compacted, Journal};
pub use live::{LiveStats, LiveStore};
pub use meta::{Checkpoint, CheckpointKind, Skipped, SnapshotRequest};
pub use paths::project_relative;
pub use plan::{CallSpan, Force, PlanConflict, RewindOutcome, RewindPlan, UndoOutcome};
pub use prune::{PruneOutcome, PrunePolicy};
pub use refs::{RefMove, RefRevert};
pub use restore::{RestoreMode, RestoreOutcome};
pub use snapshot::{OnProgress, SnapshotOutcome, SnapshotProgress, human_size};
pub use store::{
    DEFAULT_MAX_FILE_SIZE, ProgressFn, Store, StoreOptions, call_journal_path, project_key,
};
