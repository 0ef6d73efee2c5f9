//! `enter`: carry a Pi session into a worktree's cwd, ending in one visible
//! orientation entry, plus a handoff record consumed exactly once by
//! [`crate::consume()`].

use std::path::{Path, PathBuf};

use bh_git::GitRunner;
use bh_session::{Session, SessionWriter, session_dir_for_cwd};
use bh_worktree::{
    Claim, Project, Receipt, State, WorktreeError, file_sha256, same_path, short_branch,
    validate_name,
};
use serde::Serialize;
use serde_json::json;

use crate::carry::{SourceSpec, carry, source_session};
use crate::error::{HandoffError, Result};
use crate::handoff::{Handoff, Resumed, handoff_path};

/// `customType` of the orientation entry `enter` appends.
pub const ORIENTATION_TYPE: &str = "better-harness-transition";
/// `customType` of the entry [`consume`] appends.
pub const VERIFICATION_TYPE: &str = "better-harness-transition-verification";

/// How many left-behind paths the orientation names.
const LEFT_BEHIND_SHOWN: usize = 20;

#[derive(Debug, Clone)]
pub struct EnterOptions {
    pub name: String,
    /// Where the caller stands (any worktree of the repository).
    pub cwd: PathBuf,
    /// The source session file (may not exist yet: Pi writes lazily).
    pub session: PathBuf,
    /// The entry the live session is at, when it differs from the file's leaf.
    pub entry: Option<String>,
    /// Pi's agent dir (`<agent dir>/sessions/--<cwd>--/`).
    pub agent_dir: PathBuf,
    /// Entries (complete Pi entry objects) the live session holds that are
    /// not in the file yet; they follow the file's entries in the target.
    pub unflushed: Vec<serde_json::Value>,
    /// bh's state directory: its key seals the handoff record.
    pub state_dir: PathBuf,
}

pub use crate::carry::Carry;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnterOutcome {
    pub target: PathBuf,
    pub handoff: PathBuf,
    pub worktree: PathBuf,
    pub source_cwd: String,
    pub branch: Option<String>,
    pub base: Option<String>,
    pub carry: Carry,
    pub entries_carried: usize,
    pub orientation_id: String,
    pub left_behind: Vec<String>,
    pub left_behind_count: Option<u64>,
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
    /// The record at `record` is not one bh wrote (module docs of
    /// `handoff`): left in place, nothing appended to the session.
    Foreign { record: PathBuf, reason: String },
}

pub fn enter(runner: &GitRunner, opts: &EnterOptions) -> Result<EnterOutcome> {
    validate_name(&opts.name)?;
    let project = Project::discover(runner, &opts.cwd)?;
    let claim = Claim::acquire(&project.claim_path(&opts.name), &opts.name, "enter")?;
    let result = managed_destination(&project, &opts.name)
        .and_then(|dest| enter_claimed(&project, opts, &dest));
    drop(claim);
    result
}

/// Like [`enter`], but carries the session back into the **main checkout**
/// (the first worktree of the repository). `opts.name` names the managed
/// worktree the session leaves: its claim is held during the move (so it is
/// not disposed under it) and the handoff records it. `disposing` says, in
/// the orientation, that the worktree left is about to be disposed.
/// Refused when `opts.cwd` already is the main checkout.
pub fn enter_main(
    runner: &GitRunner,
    opts: &EnterOptions,
    disposing: bool,
) -> Result<EnterOutcome> {
    validate_name(&opts.name)?;
    let project = Project::discover(runner, &opts.cwd)?;
    if same_path(&opts.cwd, &project.main) {
        return Err(HandoffError::Refused(format!(
            "{} is already the main checkout",
            opts.cwd.display()
        )));
    }
    let claim = Claim::acquire(&project.claim_path(&opts.name), &opts.name, "enter")?;
    let result = main_destination(&project, &opts.name, disposing)
        .and_then(|dest| enter_claimed(&project, opts, &dest));
    drop(claim);
    result
}

/// Where a session is carried.
struct Destination {
    /// Recorded in the handoff: the worktree entered, or (back to main) the one left.
    name: String,
    path: PathBuf,
    branch: Option<String>,
    base: Option<String>,
    receipt: Option<(PathBuf, Receipt)>,
    kind: Move,
}

#[derive(Clone, Copy)]
enum Move {
    IntoWorktree,
    BackToMain { disposing: bool },
}

fn managed_destination(project: &Project, name: &str) -> Result<Destination> {
    let receipt_path = project.receipt_path(name);
    let receipt = Receipt::load(&receipt_path)?;
    if let Some(r) = &receipt
        && r.state != State::Ready
    {
        return Err(HandoffError::Refused(format!(
            "worktree {name:?} is not ready (state {}, stage {:?})",
            r.state.as_str(),
            r.stage
        )));
    }
    let wanted = receipt
        .as_ref()
        .map(|r| r.path.clone())
        .unwrap_or_else(|| project.worktrees_root().join(name));
    let worktrees = project.repo().worktrees()?;
    let wt = worktrees
        .iter()
        .find(|w| same_path(&w.path, &wanted) && w.prunable.is_none())
        .ok_or_else(|| WorktreeError::NotFound {
            name: name.to_owned(),
        })?;
    Ok(Destination {
        name: name.to_owned(),
        path: wt.path.clone(),
        branch: wt.branch.as_deref().map(short_branch),
        base: receipt.as_ref().map(|r| r.base.clone()),
        receipt: receipt.map(|r| (receipt_path, r)),
        kind: Move::IntoWorktree,
    })
}

fn main_destination(project: &Project, left: &str, disposing: bool) -> Result<Destination> {
    let worktrees = project.repo().worktrees()?;
    let main = worktrees
        .iter()
        .find(|w| !w.bare && same_path(&w.path, &project.main))
        .ok_or_else(|| HandoffError::Missing {
            what: "main checkout".into(),
            detail: project.main.display().to_string(),
        })?;
    if !main.path.is_dir() {
        return Err(HandoffError::Missing {
            what: "main checkout".into(),
            detail: format!("{} does not exist", main.path.display()),
        });
    }
    Ok(Destination {
        name: left.to_owned(),
        path: main.path.clone(),
        branch: main.branch.as_deref().map(short_branch),
        base: None,
        receipt: None,
        kind: Move::BackToMain { disposing },
    })
}

/// A claimed move, phase by phase: the key, the source session
/// ([`crate::carry::source_session`]), the target file
/// ([`crate::carry::carry`]: resumed, forked or new), the orientation entry
/// appended and verified, then the sealed handoff record. A failure after
/// the target was written takes it back (`Carried::undo`).
fn enter_claimed(
    project: &Project,
    opts: &EnterOptions,
    dest: &Destination,
) -> Result<EnterOutcome> {
    let name = &dest.name;
    let target_cwd = dest.path.display().to_string();
    let branch = dest.branch.clone();
    let base = dest.base.clone();
    // The key that seals the handoff record, opened (or made) before
    // anything is written, so a bad key leaves nothing behind.
    let key = bh_fs::key::StateKey::open_or_create(&opts.state_dir)
        .map_err(|e| HandoffError::Key(Box::new(e)))?;
    let spec = SourceSpec {
        session: &opts.session,
        entry: opts.entry.as_ref(),
        cwd: &opts.cwd,
        unflushed: &opts.unflushed,
    };
    let source = source_session(&spec)?;
    let source_cwd = source
        .as_ref()
        .and_then(|s| s.header().and_then(|h| h.cwd.clone()))
        .unwrap_or_else(|| opts.cwd.display().to_string());
    let source_abs = std::path::absolute(&opts.session).unwrap_or_else(|_| opts.session.clone());
    let dir = session_dir_for_cwd(&opts.agent_dir, &target_cwd);
    let carried = carry(&spec, source.as_ref(), &source_abs, &dir, &target_cwd)?;
    let target = carried.target.clone();
    let cleanup = |e: HandoffError| carried.undo(e);

    let (left_behind, left_behind_count) = left_behind(project, &source_cwd);
    let text = orientation_text(
        dest.kind,
        &source_cwd,
        &target_cwd,
        branch.as_deref(),
        base.as_deref(),
        &left_behind,
        left_behind_count,
    );
    let details = match dest.kind {
        Move::IntoWorktree => json!({
            "from": { "cwd": source_cwd, "session": source_abs },
            "to": { "cwd": target_cwd, "name": name, "branch": branch, "base": base,
                    "provisioning": dest.receipt.as_ref().map(|(_, r)| r.state.as_str()).unwrap_or("unmanaged") },
            "leftBehind": { "count": left_behind_count, "paths": left_behind },
            "carry": carried.carry.as_str(),
        }),
        Move::BackToMain { disposing } => json!({
            "from": { "cwd": source_cwd, "session": source_abs, "name": name },
            "to": { "cwd": target_cwd, "main": true, "branch": branch },
            "leftBehind": { "count": left_behind_count, "paths": left_behind },
            "carry": carried.carry.as_str(),
            "disposing": disposing,
        }),
    };
    let orientation_id = (|| -> Result<String> {
        let mut w = SessionWriter::open(&target)?;
        let id = w.append_custom_message(ORIENTATION_TYPE, json!(text), true, Some(details))?;
        if carried.resumed.is_some() {
            let len = fs_err::metadata(&target)
                .map_err(|e| HandoffError::io(&target, e))?
                .len();
            carried.written_end.set(Some(len));
        }
        Ok(id)
    })()
    .map_err(cleanup)?;

    verify_target(
        &target,
        &target_cwd,
        &orientation_id,
        carried.expected_parent.as_deref(),
    )
    .map_err(cleanup)?;

    let mut handoff = Handoff {
        version: 1,
        operation_id: uuid::Uuid::now_v7().to_string(),
        name: name.clone(),
        worktree: dest.path.clone(),
        common_dir: project.common_dir.clone(),
        target_session: target.clone(),
        source_session: source_abs,
        source_cwd: source_cwd.clone(),
        receipt: dest.receipt.as_ref().map(|(p, _)| p.clone()),
        receipt_sha256: match &dest.receipt {
            Some((p, _)) => file_sha256(p).map_err(|e| cleanup(e.into()))?,
            None => None,
        },
        orientation_id: orientation_id.clone(),
        created_at: jiff::Timestamp::now().to_string(),
        resumed: match (&carried.resumed, carried.written_end.get()) {
            (Some((_, r)), Some(to_len)) => Some(Resumed {
                from_len: r.from_len,
                to_len,
            }),
            _ => None,
        },
        mac: None,
    };
    handoff.seal(&key);
    let hpath = handoff_path(&target);
    let bytes = serde_json::to_vec_pretty(&handoff)
        .map_err(|e| HandoffError::Format {
            path: hpath.clone(),
            message: e.to_string(),
        })
        .map_err(cleanup)?;
    bh_session::write::create_new_file(&hpath, &bytes).map_err(|e| cleanup(e.into()))?;

    Ok(EnterOutcome {
        target,
        handoff: hpath,
        worktree: dest.path.clone(),
        source_cwd,
        branch,
        base,
        carry: carried.carry,
        entries_carried: carried.entries,
        orientation_id,
        left_behind,
        left_behind_count,
    })
}

/// Uncommitted paths of the source checkout (first few) and their count.
fn left_behind(project: &Project, source_cwd: &str) -> (Vec<String>, Option<u64>) {
    let dir = Path::new(source_cwd);
    if !dir.is_dir() {
        return (Vec::new(), None);
    }
    let repo = project.repo_at(dir);
    let Ok(out) = repo.run([
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
    ]) else {
        return (Vec::new(), None);
    };
    let records: Vec<String> = bh_git::parse::split_z(&out)
        .filter(|r| r.len() > 3)
        .map(|r| String::from_utf8_lossy(&r[3..]).into_owned())
        .collect();
    let count = records.len() as u64;
    (
        records.into_iter().take(LEFT_BEHIND_SHOWN).collect(),
        Some(count),
    )
}

fn orientation_text(
    kind: Move,
    from: &str,
    to: &str,
    branch: Option<&str>,
    base: Option<&str>,
    left: &[String],
    left_count: Option<u64>,
) -> String {
    let mut t = match kind {
        Move::IntoWorktree => format!(
            "[better-harness] This session moved from {from} to the worktree {to}. \
             From now on work only in {to}: the old root {from} is off-limits — do not read, edit or run commands there. \
             Repository-relative paths now refer to {to}.\n"
        ),
        Move::BackToMain { disposing } => format!(
            "[better-harness] This session came back from the worktree {from} to the main checkout {to}. \
             From now on work only in {to}: the worktree {from} is off-limits{} — do not read, edit or run commands there. \
             Repository-relative paths now refer to {to}.\n",
            if disposing {
                " (it is being disposed)"
            } else {
                ""
            }
        ),
    };
    match branch {
        Some(b) => t.push_str(&format!("Branch: {b}.")),
        None => t.push_str("HEAD is detached (no branch)."),
    }
    if let Some(base) = base {
        t.push_str(&format!(" Base commit: {base}."));
    }
    t.push('\n');
    let (old, here) = match kind {
        Move::IntoWorktree => ("the old root", "this worktree"),
        Move::BackToMain { .. } => ("the worktree", "the main checkout"),
    };
    match left_count {
        Some(0) => t.push_str(&format!("No uncommitted work stayed behind in {old}.\n")),
        Some(n) => {
            t.push_str(&format!(
                "{n} uncommitted file(s) stayed behind in {old} and are NOT in {here}: {}",
                left.join(", ")
            ));
            if (n as usize) > left.len() {
                t.push_str(", …");
            }
            if let Move::BackToMain { disposing: true } = kind {
                t.push_str(" (the disposal checkpoints them first)");
            }
            t.push('\n');
        }
        None => t.push_str(&format!(
            "Uncommitted work in {old} could not be determined.\n"
        )),
    }
    t.push_str("Check `git status` here before redoing any work.");
    t
}

fn verify_target(target: &Path, cwd: &str, orientation: &str, parent: Option<&str>) -> Result<()> {
    let fail = |reason: String| HandoffError::Verification {
        path: target.to_path_buf(),
        reason,
    };
    let s = Session::load(target)?;
    if !s.is_valid() {
        return Err(fail("the file has errors".into()));
    }
    if s.header().and_then(|h| h.cwd.as_deref()) != Some(cwd) {
        return Err(fail(format!("header cwd is not {cwd}")));
    }
    let leaf = s.leaf().ok_or_else(|| fail("no leaf".into()))?;
    if leaf.id != orientation || leaf.custom_type.as_deref() != Some(ORIENTATION_TYPE) {
        return Err(fail("the orientation entry is not the leaf".into()));
    }
    if leaf.parent_id.as_deref() != parent {
        return Err(fail(format!(
            "the orientation hangs under {:?}, expected {parent:?}",
            leaf.parent_id
        )));
    }
    let on_path = s
        .path_to_root(orientation)?
        .iter()
        .filter(|e| e.id == orientation)
        .count();
    if on_path != 1 {
        return Err(fail(
            "orientation not exactly once on the active path".into(),
        ));
    }
    Ok(())
}
