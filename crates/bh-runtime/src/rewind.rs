//! Rewinding a session to an entry: which entry a person means (the whole id
//! or a unique prefix of at least four hex digits), where the conversation
//! continues from, and which checkpoint holds the files as they were there —
//! the one taken before the first mutating tool call at or after the entry.
//!
//! "After the entry" is its subtree: every entry that descends from it, on any
//! branch (on the active branch that is the calls that followed it; a branch
//! abandoned earlier may have changed the files first). Each call's checkpoint
//! is known two ways, both used: the id a tool result records in
//! `details.checkpoint` (`bh agent`; exact even when a snapshot was reused
//! because nothing had changed), and the session and entry a checkpoint is
//! tagged with (the Pi extension and the hook). The earliest of them wins.
//! Undo points (`pre-restore`) never count.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use bh_checkpoint::{Checkpoint, CheckpointError, Store};
use bh_session::{Entry, Session, SessionWriter, SummaryKind, summarize_entry};

/// Hex digits an entry id prefix needs at least.
pub const MIN_ENTRY_PREFIX: usize = 4;

/// Why a rewind cannot be worked out. Each names the session file and what
/// was asked.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error(
        "{file}: {query:?} is not an entry id (a unique prefix of at least {MIN_ENTRY_PREFIX} hex digits; `bh session tree {file}` shows them)"
    )]
    BadEntryId { file: PathBuf, query: String },
    #[error("{file}: no entry matches {query:?} (`bh session tree {file}` shows them)")]
    NoSuchEntry { file: PathBuf, query: String },
    #[error("{file}: entry id prefix {query:?} matches {} entries: {}", .matches.len(), .matches.join(", "))]
    AmbiguousEntry {
        file: PathBuf,
        query: String,
        matches: Vec<String>,
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
    /// A tool result names a checkpoint the store no longer has.
    #[error(
        "{file}: the checkpoint {checkpoint} recorded by entry {entry} is not in the store of {project} (pruned, or another project's)"
    )]
    CheckpointGone {
        file: PathBuf,
        entry: String,
        checkpoint: String,
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
/// prefix (case-insensitive) of at least [`MIN_ENTRY_PREFIX`] hex digits.
pub fn resolve_entry<'s>(session: &'s Session, query: &str) -> Result<&'s Entry, RewindError> {
    let file = session_file(session);
    if let Some(e) = session.entry(query) {
        return Ok(e);
    }
    let q = query.to_ascii_lowercase();
    if q.len() < MIN_ENTRY_PREFIX || !q.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(RewindError::BadEntryId {
            file,
            query: query.to_owned(),
        });
    }
    let matches: Vec<&Entry> = session
        .entries()
        .iter()
        .filter(|e| !e.id.is_empty() && e.id.to_ascii_lowercase().starts_with(&q))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(RewindError::NoSuchEntry {
            file,
            query: query.to_owned(),
        }),
        many => Err(RewindError::AmbiguousEntry {
            file,
            query: query.to_owned(),
            matches: many.iter().map(|e| e.id.clone()).collect(),
        }),
    }
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
/// before the first mutating tool call at or after it (see the module docs).
/// `None` when no call with a checkpoint followed. Refuses a session recorded
/// outside the store's project.
pub fn files_checkpoint(
    session: &Session,
    store: &Store,
    entry: &Entry,
) -> Result<Option<Checkpoint>, RewindError> {
    let file = session_file(session);
    check_project(session, store)?;
    let subtree = subtree(session, &entry.id);
    let store_err = |source| RewindError::Store {
        project: store.project().to_path_buf(),
        source: Box::new(source),
    };
    let mut best: Option<Checkpoint> = None;
    let mut consider = |cp: Checkpoint| {
        if cp.kind != bh_checkpoint::CheckpointKind::PreRestore
            && best.as_ref().is_none_or(|b| cp.seq < b.seq)
        {
            best = Some(cp);
        }
    };
    // Recorded by the tool results (bh agent).
    for e in session.entries() {
        if !subtree.contains(e.id.as_str()) {
            continue;
        }
        if let Some(id) = summarize_entry(session, e).checkpoint {
            match store.resolve(&id) {
                Ok(cp) => consider(cp),
                Err(source @ CheckpointError::UnknownCheckpoint { .. }) => {
                    return Err(RewindError::CheckpointGone {
                        file,
                        entry: e.id.clone(),
                        checkpoint: id,
                        project: store.project().to_path_buf(),
                        source: Box::new(source),
                    });
                }
                Err(e) => return Err(store_err(e)),
            }
        }
    }
    // Tagged with the session and an entry of the subtree (hooks, the Pi extension).
    let session_id = session.header().map(|h| h.id.as_str());
    for cp in store.list().map_err(store_err)? {
        let ours = session_id.is_some() && cp.session.as_deref() == session_id;
        if ours && cp.entry.as_deref().is_some_and(|e| subtree.contains(e)) {
            consider(cp);
        }
    }
    Ok(best)
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
