//! The handoff record `enter` leaves beside the target session, and its
//! consumption: exactly one caller verifies the arrival and appends the
//! verdict ([`consume`]); [`discard`] removes an unused target.

use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use bh_session::{Session, SessionWriter};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::enter::ORIENTATION_TYPE;
use crate::error::{Result, WorktreeError};
use crate::list::same_path;
use crate::receipt::{Receipt, State, file_sha256};

/// `customType` of the entry [`consume`] appends.
pub const VERIFICATION_TYPE: &str = "better-harness-transition-verification";

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
}

/// What [`consume`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum ConsumeOutcome {
    /// No pending handoff (none was made, or another caller consumed it).
    NotPending,
    /// Every check held; a `custom` entry records it.
    Verified { entry_id: String },
    /// Something did not hold; a visible `custom_message` says what.
    Caveat {
        entry_id: String,
        problems: Vec<String>,
    },
}

pub fn handoff_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".handoff.json");
    target.with_file_name(name)
}

/// Deletes a prepared target session that will not be used (a cancelled or
/// failed switch): the file, its handoff record (pending, claimed or
/// consumed), and its session folder when that is left empty. Missing files
/// are not an error.
pub fn discard(target: &Path) -> Result<()> {
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(WorktreeError::io(p, e)),
        _ => Ok(()),
    };
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

fn sibling(target: &Path, suffix: &str) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    target.with_file_name(name)
}

/// Consumes the handoff of `target` if one is pending: exactly one caller
/// wins (atomic rename of the record), verifies the arrival and appends the
/// verdict to the session; everyone else, and every later call, gets
/// [`ConsumeOutcome::NotPending`].
pub fn consume(runner: &GitRunner, target: &Path) -> Result<ConsumeOutcome> {
    let pending = handoff_path(target);
    let claimed = sibling(
        target,
        &format!(
            ".handoff.claimed-{}-{}.json",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ),
    );
    match fs_err::rename(&pending, &claimed) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !reclaim_abandoned(target, &claimed)? {
                return Ok(ConsumeOutcome::NotPending);
            }
        }
        Err(e) => return Err(WorktreeError::io(&pending, e)),
    }
    let done = sibling(target, ".handoff.consumed.json");
    let bytes = fs_err::read(&claimed).map_err(|e| WorktreeError::io(&claimed, e))?;
    let problems = match serde_json::from_slice::<Handoff>(&bytes) {
        Ok(h) => check_arrival(runner, &h, target),
        Err(e) => vec![format!("the handoff record is unreadable: {e}")],
    };
    let handoff: Option<Handoff> = serde_json::from_slice(&bytes).ok();
    // A reclaimed record may already have its verdict in the session (its
    // first claimer died between appending it and renaming the record).
    if let Some(h) = &handoff
        && verdict_recorded(target, &h.operation_id)?
    {
        let _ = fs_err::rename(&claimed, &done);
        return Ok(ConsumeOutcome::NotPending);
    }
    let mut w = SessionWriter::open(target)?;
    let outcome = if problems.is_empty() {
        let entry_id = w.append_custom(
            VERIFICATION_TYPE,
            Some(json!({
                "status": "verified",
                "operationId": handoff.as_ref().map(|h| h.operation_id.clone()),
                "worktree": handoff.as_ref().map(|h| h.worktree.clone()),
            })),
        )?;
        ConsumeOutcome::Verified { entry_id }
    } else {
        let text = format!(
            "[better-harness] The move into this worktree did NOT land as planned: {}. \
             Check where you are (`pwd`, `git status`, `git worktree list`) before changing anything.",
            problems.join("; ")
        );
        let entry_id = w.append_custom_message(
            VERIFICATION_TYPE,
            json!(text),
            true,
            Some(json!({
                "status": "caveat",
                "problems": problems,
                "operationId": handoff.as_ref().map(|h| h.operation_id.clone()),
            })),
        )?;
        ConsumeOutcome::Caveat { entry_id, problems }
    };
    let _ = fs_err::rename(&claimed, &done);
    Ok(outcome)
}

/// A handoff claimed by a process that is gone (it died after claiming,
/// before the record was marked consumed) is taken over by renaming it to
/// `claimed`: one caller wins. A claimer that is alive — or a pid reused by
/// another live process — is left alone.
fn reclaim_abandoned(target: &Path, claimed: &Path) -> Result<bool> {
    let Some(dir) = target.parent() else {
        return Ok(false);
    };
    let mut prefix = target.file_name().unwrap_or_default().to_owned();
    prefix.push(".handoff.claimed-");
    let prefix = prefix.as_encoded_bytes().to_vec();
    let entries = match fs_err::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(WorktreeError::io(dir, e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.as_encoded_bytes().strip_prefix(prefix.as_slice()) else {
            continue;
        };
        let pid = rest
            .iter()
            .position(|b| *b == b'-')
            .and_then(|end| std::str::from_utf8(&rest[..end]).ok())
            .and_then(|p| p.parse::<i32>().ok());
        let Some(pid) = pid.filter(|p| *p > 0) else {
            continue;
        };
        if pid as u32 == std::process::id() || process_alive(pid) {
            continue;
        }
        match fs_err::rename(entry.path(), claimed) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(WorktreeError::io(entry.path(), e)),
        }
    }
    Ok(false)
}

fn process_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        // EPERM: it exists, owned by someone else.
        Err(_) => true,
    }
}

/// Whether the session already holds a verdict for `operation_id`.
fn verdict_recorded(target: &Path, operation_id: &str) -> Result<bool> {
    let session = Session::load(target)?;
    Ok(session.entries().iter().any(|e| {
        e.custom_type.as_deref() == Some(VERIFICATION_TYPE)
            && serde_json::from_slice::<serde_json::Value>(session.line_text(e))
                .ok()
                .and_then(|v| {
                    v.get("data")
                        .or_else(|| v.get("details"))
                        .and_then(|d| d.get("operationId"))
                        .and_then(|o| o.as_str().map(str::to_owned))
                })
                .as_deref()
                == Some(operation_id)
    }))
}

fn check_arrival(runner: &GitRunner, h: &Handoff, target: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let repo = runner
        .repo(&h.common_dir, Scope::User)
        .with_git_dir(&h.common_dir);
    match repo.worktrees() {
        Ok(list) => {
            if !list
                .iter()
                .any(|w| same_path(&w.path, &h.worktree) && w.prunable.is_none())
            {
                problems.push(format!(
                    "{} is no longer a registered worktree",
                    h.worktree.display()
                ));
            }
        }
        Err(e) => problems.push(format!("cannot list worktrees: {e}")),
    }
    if !h.worktree.is_dir() {
        problems.push(format!("{} does not exist", h.worktree.display()));
    }
    if let Some(rp) = &h.receipt {
        match Receipt::load(rp) {
            Ok(Some(r)) if r.state == State::Ready => {}
            Ok(Some(r)) => problems.push(format!("the receipt is {}", r.state.as_str())),
            Ok(None) => problems.push("the provisioning receipt is gone".into()),
            Err(e) => problems.push(format!("the receipt is unreadable: {e}")),
        }
        match file_sha256(rp) {
            Ok(Some(sum)) if Some(&sum) == h.receipt_sha256.as_ref() => {}
            Ok(Some(_)) => problems.push("the provisioning receipt changed since enter".into()),
            Ok(None) => {}
            Err(e) => problems.push(format!("cannot read the receipt: {e}")),
        }
    }
    match Session::load(target) {
        Ok(s) => {
            let cwd = s.header().and_then(|hd| hd.cwd.clone());
            if cwd.as_deref() != Some(h.worktree.display().to_string().as_str()) {
                problems.push(format!(
                    "the session's cwd {cwd:?} is not {}",
                    h.worktree.display()
                ));
            }
            if s.entry(&h.orientation_id)
                .and_then(|e| e.custom_type.as_deref())
                != Some(ORIENTATION_TYPE)
            {
                problems.push("the orientation entry is missing from the session".into());
            }
        }
        Err(e) => problems.push(format!("cannot read the session: {e}")),
    }
    problems
}
