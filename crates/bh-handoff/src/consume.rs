//! `consume`: the handoff of a prepared target session, consumed exactly
//! once, in two steps so that a failure anywhere leaves it pending, never
//! lost:
//!
//! 0. **Seal**: a record bh did not write (its MAC does not verify with the
//!    state directory's key, or it names another target) is
//!    [`ConsumeOutcome::Foreign`]: left in place, nothing appended, none of
//!    its fields read further or quoted.
//! 1. **Verdict** (reads only): the pending record `<target>.handoff.json`
//!    and the arrival it describes — the worktree registered and present,
//!    its receipt ready and unchanged, the session's cwd and orientation.
//! 2. **Record** (one append under a lock): the record is opened and locked
//!    (`flock`, exclusive); if it is still the pending record (the same file
//!    at the same path, the bytes that were verified) and the session holds
//!    no verdict for its operation yet, the verdict entry is appended (one
//!    line, under the session's own append lock) and the record renamed to
//!    `<target>.handoff.consumed.json` before the lock is released.
//!
//! Concurrent consumers (two processes opening the same session) each reach a
//! verdict; the lock lets one append, and the others then find the record
//! renamed away: `NotPending`. A failure before the append (an unreadable
//! session, a failed write) leaves the record pending for the next open; a
//! crash between the append and the rename leaves a pending record whose
//! verdict is already in the session, which the next consumer recognises by
//! its operation id and only renames. No lock file is created: the lock is
//! the record's own.

use std::io::{ErrorKind, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use bh_git::{GitRunner, Scope};
use bh_session::{Session, SessionWriter};
use fs_err as fs;
use serde_json::json;

use crate::enter::{ConsumeOutcome, ORIENTATION_TYPE, VERIFICATION_TYPE};
use crate::error::{HandoffError, Result};
use crate::handoff::{Handoff, handoff_path, sibling};
use bh_worktree::{RECORD_CAP, Receipt, State, file_sha256, read_regular, same_path};

/// The record opened as a regular file only (no FIFO to hang on, no
/// symlink followed).
fn open_regular(path: &Path) -> std::io::Result<fs::File> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// The record's file name, escaped for a message (it is bh's own name
/// pattern; the escape is for a session file named oddly).
fn file_label(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.chars().flat_map(char::escape_debug).collect()
}

/// Verdicts reached before the record was found replaced (it never is by
/// `bh`; a bound, not a retry policy).
const ATTEMPTS: usize = 3;

/// Consumes the handoff of `target` if one is pending (module docs): exactly
/// one caller appends the verdict and gets [`ConsumeOutcome::Verified`] or
/// [`ConsumeOutcome::Caveat`]; everyone else, and every later call, gets
/// [`ConsumeOutcome::NotPending`]. An error leaves the handoff pending.
pub fn consume(runner: &GitRunner, state_dir: &Path, target: &Path) -> Result<ConsumeOutcome> {
    let pending = handoff_path(target);
    let mut key = LazyKey::default();
    for _ in 0..ATTEMPTS {
        // 1. The verdict: nothing is written.
        let Some(bytes) = read_pending(target, &pending)? else {
            return Ok(ConsumeOutcome::NotPending);
        };
        // Only a record bh sealed is acted on; anything else is left where
        // it is, unread beyond its seal, and nothing enters the session.
        let handoff = match serde_json::from_slice::<Handoff>(&bytes) {
            Ok(h) => match h.foreign(key.get_or_open(state_dir)?, target) {
                None => h,
                Some(reason) => return Ok(foreign(pending, reason)),
            },
            Err(e) => {
                return Ok(foreign(
                    pending,
                    format!("it is not a handoff record ({e})"),
                ));
            }
        };
        let problems = check_arrival(runner, &handoff, target);
        let handoff = Some(handoff);
        // 2. The record, under its own lock.
        let mut file = match open_regular(&pending) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(ConsumeOutcome::NotPending),
            Err(e) => return Err(HandoffError::io(&pending, e)),
        };
        file.lock().map_err(|e| HandoffError::io(&pending, e))?;
        let recorded = record(
            target,
            &pending,
            &mut file,
            &bytes,
            handoff.as_ref(),
            problems,
        );
        // Closing the file releases the lock.
        drop(file);
        if let Some(outcome) = recorded? {
            return Ok(outcome);
        }
    }
    Err(HandoffError::Format {
        path: pending,
        message: format!(
            "the handoff record kept changing while it was verified ({ATTEMPTS} times)"
        ),
    })
}

fn foreign(record: std::path::PathBuf, reason: String) -> ConsumeOutcome {
    ConsumeOutcome::Foreign { record, reason }
}

/// The state key, opened when a record is first found (a session without
/// one never reads it).
#[derive(Default)]
struct LazyKey(Option<Option<bh_fs::key::StateKey>>);

impl LazyKey {
    fn get_or_open(&mut self, state_dir: &Path) -> Result<Option<&bh_fs::key::StateKey>> {
        if self.0.is_none() {
            self.0 = Some(crate::handoff::open_key(state_dir)?);
        }
        Ok(self.0.as_ref().and_then(Option::as_ref))
    }
}

/// The pending record's bytes; a record an older `bh` claimed and
/// abandoned is put back first. `None`: nothing pending.
fn read_pending(target: &Path, pending: &Path) -> Result<Option<Vec<u8>>> {
    for _ in 0..2 {
        match read_regular(pending, RECORD_CAP) {
            Ok(bytes) => return Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if !reclaim_abandoned(target, pending)? {
                    return Ok(None);
                }
            }
            Err(e) => return Err(HandoffError::io(pending, e)),
        }
    }
    Ok(None)
}

/// The record step; the caller holds the lock on `file` (opened from
/// `pending`). `None`: the record is not the one verified — verify again.
fn record(
    target: &Path,
    pending: &Path,
    file: &mut fs::File,
    verified: &[u8],
    handoff: Option<&Handoff>,
    problems: Vec<String>,
) -> Result<Option<ConsumeOutcome>> {
    let held = file.metadata().map_err(|e| HandoffError::io(pending, e))?;
    match fs::symlink_metadata(pending) {
        Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => {}
        Ok(_) => return Ok(None),
        // Renamed away by the consumer that held the lock before us.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Some(ConsumeOutcome::NotPending)),
        Err(e) => return Err(HandoffError::io(pending, e)),
    }
    let mut now = Vec::new();
    file.by_ref()
        .take(RECORD_CAP + 1)
        .read_to_end(&mut now)
        .map_err(|e| HandoffError::io(pending, e))?;
    if now != verified {
        return Ok(None);
    }
    let done = sibling(target, ".handoff.consumed.json");
    // A consumer that appended and then died before renaming the record.
    if let Some(h) = handoff
        && verdict_recorded(target, &h.operation_id)?
    {
        fs::rename(pending, &done).map_err(|e| HandoffError::io(pending, e))?;
        return Ok(Some(ConsumeOutcome::NotPending));
    }
    let operation_id = handoff.map(|h| h.operation_id.clone());
    let mut w = SessionWriter::open(target)?;
    let outcome = if problems.is_empty() {
        let entry_id = w.append_custom(
            VERIFICATION_TYPE,
            Some(json!({
                "status": "verified",
                "operationId": operation_id,
                "worktree": handoff.map(|h| h.worktree.clone()),
            })),
        )?;
        ConsumeOutcome::Verified { entry_id }
    } else {
        // Fixed text naming the record, never its fields or what was found
        // in them: a record bh did not write must not speak as the harness.
        // The problems are in the entry's details, for a person.
        let text = format!(
            "[better-harness] The move into this worktree did NOT land as planned \
             (handoff record {}; details in this entry). \
             Check where you are (`pwd`, `git status`, `git worktree list`) before changing anything.",
            file_label(pending)
        );
        let entry_id = w.append_custom_message(
            VERIFICATION_TYPE,
            json!(text),
            true,
            Some(json!({
                "status": "caveat",
                "problems": problems,
                "operationId": operation_id,
            })),
        )?;
        ConsumeOutcome::Caveat { entry_id, problems }
    };
    // The verdict is in the session: this is the consumption. Should the
    // rename fail, the next consumer finds the verdict by its operation id
    // and only renames, so the outcome stands.
    let _ = fs::rename(pending, &done);
    Ok(Some(outcome))
}

/// A record claimed by an older `bh` (renamed to
/// `.handoff.claimed-PID-….json` before verifying) whose process is gone is
/// put back as pending by renaming it to `pending`: one caller wins. A
/// claimer that is alive — or a pid reused by another live process — is left
/// alone.
fn reclaim_abandoned(target: &Path, pending: &Path) -> Result<bool> {
    let Some(dir) = target.parent() else {
        return Ok(false);
    };
    let mut prefix = target.file_name().unwrap_or_default().to_owned();
    prefix.push(".handoff.claimed-");
    let prefix = prefix.as_encoded_bytes().to_vec();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(HandoffError::io(dir, e)),
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
        match fs::rename(entry.path(), pending) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(HandoffError::io(entry.path(), e)),
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
