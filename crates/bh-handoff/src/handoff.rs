//! The handoff record a move leaves beside its target session
//! (`<target>.handoff.json`), consumed exactly once by [`crate::consume()`],
//! and [`discard()`], which undoes a prepared target that will not be used.
//!
//! A session kept inside the project can sit in a folder the agent writes,
//! so a record there may be planted. bh therefore seals every record it
//! writes with the state directory's key ([`bh_fs::key::StateKey`], hidden
//! inside every sandbox): `mac` is HMAC-SHA256 over
//! `bh handoff record v1\0` + the record's JSON without `mac`. A record
//! whose MAC does not verify, or that names another target, is not bh's:
//! it is never consumed, and nothing it holds is acted on or quoted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use bh_fs::key::StateKey;

use crate::error::{HandoffError, Result};

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
    /// The seal (module docs); `None` only while it is computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The label MACed before a record's bytes (keeps its MACs apart from the
/// key's other uses).
const MAC_DOMAIN: &[u8] = b"bh handoff record v1\0";

impl Handoff {
    /// The bytes the MAC covers: the record without its `mac`.
    fn sealed_bytes(&self) -> Vec<u8> {
        let unsealed = Handoff {
            mac: None,
            ..self.clone()
        };
        // A struct of strings, paths and numbers always serialises.
        serde_json::to_vec(&unsealed).unwrap_or_default()
    }

    /// Sets `mac` with `key`.
    pub(crate) fn seal(&mut self, key: &StateKey) {
        self.mac = Some(key.mac(&[MAC_DOMAIN, &self.sealed_bytes()]));
    }

    /// Why this record is not one bh wrote for `target` with `key`
    /// (`None`: it is). `key` is `None` when the state directory has none
    /// (then bh never sealed anything there).
    pub(crate) fn foreign(&self, key: Option<&StateKey>, target: &Path) -> Option<String> {
        let Some(key) = key else {
            return Some(
                "the state directory has no key, so bh made no handoff record with it".into(),
            );
        };
        let sealed = self
            .mac
            .as_deref()
            .is_some_and(|mac| key.verify(&[MAC_DOMAIN, &self.sealed_bytes()], mac));
        if !sealed {
            return Some(format!(
                "it is not sealed with this state directory's key ({})",
                key.path().display()
            ));
        }
        if !bh_worktree::same_path(&self.target_session, target) {
            return Some("it was made for another session file".into());
        }
        None
    }
}

/// The state directory's key, or `None` when it has none.
pub(crate) fn open_key(state_dir: &Path) -> Result<Option<StateKey>> {
    StateKey::open(state_dir).map_err(|e| HandoffError::Key(Box::new(e)))
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
/// by the move) is cut back to what it was instead — only when the record
/// saying so is bh's own (sealed with `state_dir`'s key).
pub fn discard(state_dir: &Path, target: &Path) -> Result<()> {
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(HandoffError::io(p, e)),
        _ => Ok(()),
    };
    // A resumed target is the session's earlier file: cut back to its length
    // before the move (unless someone appended since), never deleted; only
    // this move's pending record goes.
    // A record that is there must be this move's (bh's, sealed): one that
    // is not says someone else is at work on the target, which is then left
    // as it is.
    let pending = handoff_path(target);
    match bh_worktree::read_regular(&pending, bh_worktree::RECORD_CAP) {
        Ok(bytes) => {
            let refused = |why: String| {
                HandoffError::Refused(format!(
                    "{} is not a handoff record bh wrote ({why}); the prepared session {} is left as it is",
                    pending.display(),
                    target.display()
                ))
            };
            let h =
                serde_json::from_slice::<Handoff>(&bytes).map_err(|e| refused(e.to_string()))?;
            if let Some(why) = h.foreign(open_key(state_dir)?.as_ref(), target) {
                return Err(refused(why));
            }
            if let Some(r) = h.resumed {
                bh_session::write::truncate_if_unchanged(target, r.to_len, r.from_len)?;
                return gone(fs_err::remove_file(&pending), &pending);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(HandoffError::io(&pending, e)),
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
        Err(e) => return Err(HandoffError::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| HandoffError::io(dir, e))?;
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
