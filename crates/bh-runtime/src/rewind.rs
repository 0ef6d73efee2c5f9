//! Rewinding a session to an entry: which entry a person means (the whole id
//! or a unique prefix of at least four hex digits), where the conversation
//! continues from, and which checkpoint holds the files as they were there —
//! [`bh_checkpoint::Store::checkpoint_at_entry`], the one answer the
//! checkpoint server gives too, told the entry's whole subtree (every entry
//! that descends from it, on any branch), the checkpoints the session's tool
//! results record in `details.checkpoint`, and the session id (the call
//! journal and the store's tags). See that function's module for what
//! "after the entry" means and which calls count.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bh_checkpoint::{CallSpan, Checkpoint, CheckpointError, EntryCalls, Recorded, Store};
use bh_protocol::prefix::{self, Named, PrefixError, Shape};
use bh_session::{Entry, Session, SessionWriter, SummaryKind, summarize_entry};

/// Why a rewind cannot be worked out. Each names the session file and what
/// was asked.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// An entry id that names no single entry of the session (the one
    /// prefix rule of `bh_protocol::prefix`).
    #[error("{file}: {source} (`bh session tree {file}` shows the entries)")]
    Entry {
        file: PathBuf,
        #[source]
        source: PrefixError,
    },
    /// The session was recorded in a directory outside the store's project.
    #[error(
        "session {file} was recorded in {recorded}, which is not in project {project}; \
         use the checkpoints of that project (--project DIR)"
    )]
    OtherProject {
        file: PathBuf,
        recorded: String,
        project: PathBuf,
    },
    /// A tool result or the call journal names a checkpoint the store no
    /// longer has.
    #[error("{file}: {source} (store of {project})")]
    CheckpointGone {
        file: PathBuf,
        project: PathBuf,
        #[source]
        source: Box<CheckpointError>,
    },
    #[error("cannot read the checkpoints of {project}")]
    Store {
        project: PathBuf,
        #[source]
        source: Box<CheckpointError>,
    },
    #[error(transparent)]
    Session(#[from] bh_session::SessionError),
}

/// The one entry of `session` that `query` names: its whole id, or a unique
/// prefix (case-insensitive) of at least [`prefix::MIN_HEX`] hex digits.
pub fn resolve_entry<'s>(session: &'s Session, query: &str) -> Result<&'s Entry, RewindError> {
    prefix::resolve(Named::Entry, Shape::Hex, query, session.entries(), |e| {
        e.id.as_str()
    })
    .map_err(|source| RewindError::Entry {
        file: session_file(session),
        source,
    })
}

/// Where the conversation continues after rewinding to `entry`, as Pi's
/// `/tree` does: a user message is rewound too (the next prompt replaces it,
/// so the leaf is its parent; `None` = a new root), any other entry stays.
pub fn conversation_leaf(session: &Session, entry: &Entry) -> Option<String> {
    if summarize_entry(session, entry).kind == SummaryKind::User {
        entry
            .parent_id
            .clone()
            .filter(|p| session.entry(p).is_some())
    } else {
        Some(entry.id.clone())
    }
}

/// The checkpoint holding the files as they were at `entry`: the one taken
/// before the first mutating call after it (see the module docs). `None` when
/// no call with a checkpoint followed. Refuses a session recorded outside the
/// store's project.
pub fn files_checkpoint(
    session: &Session,
    store: &Store,
    entry: &Entry,
) -> Result<Option<Checkpoint>, RewindError> {
    with_calls(session, store, entry, |calls| {
        store.checkpoint_at_entry(calls)
    })
}

/// The session's mutating calls after `entry`, in call order, for a rewind
/// plan ([`bh_checkpoint::Store::entry_spans`]); empty when none followed.
/// Refuses a session recorded outside the store's project.
pub fn files_spans(
    session: &Session,
    store: &Store,
    entry: &Entry,
) -> Result<Vec<CallSpan>, RewindError> {
    with_calls(session, store, entry, |calls| store.entry_spans(calls))
}

fn with_calls<T>(
    session: &Session,
    store: &Store,
    entry: &Entry,
    f: impl FnOnce(&EntryCalls<'_>) -> Result<T, CheckpointError>,
) -> Result<T, RewindError> {
    check_project(session, store)?;
    let subtree = subtree(session, &entry.id);
    let recorded: Vec<Recorded> = session
        .entries()
        .iter()
        .filter(|e| subtree.contains(e.id.as_str()))
        .filter_map(|e| {
            summarize_entry(session, e)
                .checkpoint
                .map(|checkpoint| Recorded {
                    entry: e.id.clone(),
                    checkpoint,
                })
        })
        .collect();
    let calls = EntryCalls {
        session: session.header().map(|h| h.id.as_str()),
        entry: &entry.id,
        subtree: &subtree,
        recorded: &recorded,
    };
    f(&calls).map_err(|source| {
        let project = store.project().to_path_buf();
        match source {
            CheckpointError::CallCheckpointGone { .. } => RewindError::CheckpointGone {
                file: session_file(session),
                project,
                source: Box::new(source),
            },
            source => RewindError::Store {
                project,
                source: Box::new(source),
            },
        }
    })
}

/// Makes `leaf` the session file's active leaf for Pi and for `bh`: appends an
/// entry that adds nothing to the context (`custom`, `better-harness.set-leaf`)
/// under it, or as a new root for `None`. Returns the appended entry's id.
pub fn move_leaf(path: &Path, leaf: Option<&str>) -> Result<String, RewindError> {
    let mut writer = SessionWriter::open(path)?;
    match leaf {
        Some(id) => Ok(writer.select_leaf(id)?),
        None => {
            writer.branch(None)?;
            Ok(writer.append_custom(
                bh_session::SET_LEAF_CUSTOM_TYPE,
                Some(serde_json::json!({ "targetId": null })),
            )?)
        }
    }
}

/// Entry ids of `root` and everything descending from it.
fn subtree<'s>(session: &'s Session, root: &str) -> HashSet<&'s str> {
    let entries = session.entries();
    let (_, children) = session.children_map();
    let mut out = HashSet::new();
    let mut stack: Vec<usize> = session.index_of(root).into_iter().collect();
    while let Some(ix) = stack.pop() {
        if out.insert(entries[ix].id.as_str()) {
            stack.extend(children[ix].iter().copied());
        }
    }
    out
}

fn check_project(session: &Session, store: &Store) -> Result<(), RewindError> {
    let Some(recorded) = session.header().and_then(|h| h.cwd.as_deref()) else {
        return Ok(());
    };
    let real = fs_err::canonicalize(recorded).unwrap_or_else(|_| PathBuf::from(recorded));
    if real.starts_with(store.project()) {
        return Ok(());
    }
    Err(RewindError::OtherProject {
        file: session_file(session),
        recorded: recorded.to_owned(),
        project: store.project().to_path_buf(),
    })
}

fn session_file(session: &Session) -> PathBuf {
    session
        .path()
        .map_or_else(|| PathBuf::from(session.display_name()), Path::to_path_buf)
}
