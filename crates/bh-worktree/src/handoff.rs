//! The handoff record a move leaves beside its target session
//! (`<target>.handoff.json`), consumed exactly once by [`crate::consume()`],
//! and [`discard()`], which undoes a prepared target that will not be used.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, WorktreeError};

/// The handoff record `<target>.handoff.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    pub version: u32,
    pub operation_id: String,
    pub name: String,
    pub worktree: PathBuf,
    pub common_dir: PathBuf,
    pub target_session: PathBuf,
    pub source_session: PathBuf,
    pub source_cwd: String,
    /// `None` for an unmanaged worktree.
    pub receipt: Option<PathBuf>,
    pub receipt_sha256: Option<String>,
    pub orientation_id: String,
    pub created_at: String,
    /// Set when the move extended the session's earlier file in the target
    /// checkout instead of creating one (`crate::resume`): a discard cuts it
    /// back to `from_len`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<Resumed>,
}

pub fn handoff_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".handoff.json");
    target.with_file_name(name)
}

/// Deletes a prepared target session that will not be used (a cancelled or
/// failed switch): the file, its handoff record (pending, claimed or
/// consumed), and its session folder when that is left empty. Missing files
/// are not an error. A resumed target (the session's earlier file, extended
/// by the move) is cut back to what it was instead.
pub fn discard(target: &Path) -> Result<()> {
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(WorktreeError::io(p, e)),
        _ => Ok(()),
    };
    // A resumed target is the session's earlier file: cut back to its length
    // before the move (unless someone appended since), never deleted; only
    // this move's pending record goes.
    let pending = handoff_path(target);
    if let Ok(bytes) = crate::receipt::read_regular(&pending, crate::receipt::RECORD_CAP)
        && let Ok(h) = serde_json::from_slice::<Handoff>(&bytes)
        && let Some(r) = h.resumed
    {
        bh_session::write::truncate_if_unchanged(target, r.to_len, r.from_len)?;
        return gone(fs_err::remove_file(&pending), &pending);
    }
    gone(fs_err::remove_file(target), target)?;
    let Some(dir) = target.parent() else {
        return Ok(());
    };
    let mut prefix = target.file_name().unwrap_or_default().to_owned();
    prefix.push(".handoff");
    let prefix = prefix.as_encoded_bytes().to_vec();
    let entries = match fs_err::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(WorktreeError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| WorktreeError::io(dir, e))?;
        if entry.file_name().as_encoded_bytes().starts_with(&prefix) {
            let p = entry.path();
            gone(fs_err::remove_file(&p), &p)?;
        }
    }
    // Only succeeds when nothing else is in it.
    let _ = fs_err::remove_dir(dir);
    Ok(())
}

pub(crate) fn sibling(target: &Path, suffix: &str) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    target.with_file_name(name)
}

/// Recorded in the handoff of a resumed target: the file's length before
/// the move's writes and after them, so a discard cuts it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resumed {
    pub from_len: u64,
    pub to_len: u64,
}
