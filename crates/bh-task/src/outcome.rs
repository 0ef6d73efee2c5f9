//! How a task's outcome is worded for people and written down: the reasons
//! of a rejection, the notes, the message of the commit of the worker's
//! work, and the last step (state first, then the worker's repository).

use fs_err as fs;
use std::path::{Path, PathBuf};

use crate::error::PreflightError;
use crate::options::TaskOptions;
use crate::report::{TaskReport, write_json};
use crate::validate::{UNCOMMITTED, Violation};

pub(crate) fn patch_cut_note(name: &str, limit: u64, base: &str, kept_ref: &str) -> String {
    format!(
        "{name} was cut at its limit of {limit} bytes (the diff is longer); all of the work is \
         under {kept_ref}: git diff --binary {base} {kept_ref}"
    )
}

/// The message of the commit holding the worker's uncommitted work.
pub(crate) fn work_message(opts: &TaskOptions) -> String {
    if let Some(m) = opts.message.as_deref().filter(|m| !m.trim().is_empty()) {
        return m.to_owned();
    }
    if !opts.commit {
        return format!("bh task {}: the worker's uncommitted work", opts.id);
    }
    let mut command: String = opts
        .argv
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if command.chars().count() > 60 {
        command = command.chars().take(59).collect::<String>() + "…";
    }
    format!("bh task {}: {command}", opts.id)
}

/// Why a candidate with `violations` is rejected, in words for people: work
/// left uncommitted (which `--commit` would have committed) apart from the
/// boundary's violations.
pub(crate) fn rejection_reasons(violations: &[Violation], kept_ref: &str) -> Vec<String> {
    let uncommitted: std::collections::BTreeSet<&str> = violations
        .iter()
        .filter(|v| v.reason == UNCOMMITTED)
        .filter_map(|v| v.path.as_deref())
        .collect();
    let others = violations
        .iter()
        .filter(|v| v.reason != UNCOMMITTED)
        .count();
    let mut out = Vec::new();
    if !uncommitted.is_empty() {
        out.push(format!(
            "the worker left {} file(s) changed without committing them: run the task with \
             --commit to commit its work as one commit (validated the same way); the work is \
             kept under {kept_ref}",
            uncommitted.len()
        ));
    }
    if others > 0 {
        out.push(format!("{others} violation(s) of the task boundary"));
    }
    out
}

/// Ordinary endings: the state is written, then the worker's repository is
/// removed (its work is kept under the task's ref and in `work.patch`). A
/// removal that fails keeps the outcome, keeps the folder and says so.
pub(crate) fn finish(
    mut report: TaskReport,
    artifacts: &Path,
    dir: PathBuf,
) -> Result<TaskReport, PreflightError> {
    let state = artifacts.join("state.json");
    write_json(&state, &report)?;
    if let Err(e) = fs::remove_dir_all(&dir) {
        report.notes.push(format!(
            "the worker's repository could not be removed ({e}); what is left of it is kept: \
             remove it by hand"
        ));
        report.worktree = Some(dir);
        write_json(&state, &report)?;
    }
    Ok(report)
}
