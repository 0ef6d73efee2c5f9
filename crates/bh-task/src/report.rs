//! What a task leaves: how it ended and the `state.json` that records it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::contain::Ending;
use crate::error::{PreflightError, io};
use crate::validate::Violation;

/// How a task ended; each has its own exit code in the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Succeeded,
    Promoted,
    Rejected,
    Failed,
    TimedOut,
    Interrupted,
    Untrusted,
}

/// What `state.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskReport {
    pub id: String,
    pub outcome: Outcome,
    pub reasons: Vec<String>,
    pub violations: Vec<Violation>,
    pub source: PathBuf,
    pub branch: Option<String>,
    pub base: String,
    pub candidate: Option<String>,
    /// Where the rejected candidate is kept.
    pub kept_ref: Option<String>,
    /// The worktree, when it was kept (interrupted, untrusted).
    pub worktree: Option<PathBuf>,
    pub artifacts: PathBuf,
    pub ending: Option<Ending>,
    /// The commit holding all of the worker's work (its commits plus, on
    /// top, one commit of what it left uncommitted), when it differs from
    /// the base.
    #[serde(default)]
    pub work: Option<String>,
    /// What the sandbox enforced; `None` with `no_sandbox`.
    #[serde(default)]
    pub sandbox: Option<bh_sandbox::Report>,
    #[serde(default)]
    pub no_sandbox: bool,
    /// What people should know besides the outcome: a patch cut at its
    /// limit, a repository that could not be removed, the next step.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A fresh task id: time-ordered, unique per process and moment.
pub fn new_task_id() -> String {
    bh_fs::run_id("t", b"")
}

pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), PreflightError> {
    bh_fs::write_json_atomic(path, value).map_err(io(format!("cannot write {}", path.display())))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
