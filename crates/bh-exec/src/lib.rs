//! `bh-exec`: the session-checkpoint executor's plan (issue 5, first part).
//!
//! A plan pins one exact conversation point (a Pi session file, an entry in
//! it) to one exact commit, with a prompt, a model, limits and the output ref,
//! all as full ids and SHA-256 digests, and a digest of the plan itself.
//! [`make_plan`] only reads: it creates no worktree, commit, ref or object.
//! [`verify_plan`] re-checks every recorded half before anything runs; each
//! mismatch is its own [`ExecError`] variant.
//!
//! The caller supplies the (commit, entry) pair; the plan records and
//! re-checks both halves but cannot prove that the original session ever ran
//! on that commit.

mod execute;
mod plan;

pub use execute::{RunResult, RunSetup, UsageTotals, commit_message, gc, run_plan};

pub use plan::{
    BaseRecord, EXECUTOR_TOOLS, Limits, OUTPUT_REF_PREFIX, PLAN_VERSION, Plan, PlanRequest,
    PromptRecord, RepoRecord, SessionRecord, make_plan, read_plan, verify_plan, write_plan,
};

/// Every way planning or re-checking can fail, each naming what is at fault.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{path} is not a Git repository")]
    NotARepository { path: String },
    #[error("base revision {rev:?} does not name a commit in {repo}")]
    UnknownBase { rev: String, repo: String },
    #[error("session {file}: {detail}")]
    Session { file: String, detail: String },
    #[error("entry {entry} is not in session {file}")]
    UnknownEntry { file: String, entry: String },
    #[error("entry {entry} in {file}: the chain to the root is broken at {at}")]
    BrokenChain {
        file: String,
        entry: String,
        at: String,
    },
    #[error("plan {path} already exists (use --force to overwrite)")]
    PlanExists { path: String },
    #[error("plan {path} cannot be read: {detail}")]
    PlanUnreadable { path: String, detail: String },
    #[error("plan {path} was modified after it was written (plan digest mismatch)")]
    PlanTampered { path: String },
    #[error("base commit {commit} no longer resolves to the recorded commit and tree ({detail})")]
    BaseMoved { commit: String, detail: String },
    #[error("session file {file} changed since the plan (sha256 {now}, plan has {planned})")]
    SessionChanged {
        file: String,
        planned: String,
        now: String,
    },
    #[error("session file {file} now has session id {now}, the plan has {planned}")]
    SessionIdChanged {
        file: String,
        planned: String,
        now: String,
    },
    #[error("entry {entry} or its path to the root changed in {file}")]
    EntryChanged { file: String, entry: String },
    #[error("output ref {name} already exists (at {at}); a plan runs once")]
    RefExists { name: String, at: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
}

impl ExecError {
    /// The exit code of this failure (see ARCHITECTURE.md): the re-checks of a
    /// plan each have their own.
    pub fn exit_code(&self) -> u8 {
        match self {
            ExecError::PlanTampered { .. } => 20,
            ExecError::BaseMoved { .. } => 21,
            ExecError::SessionChanged { .. } => 22,
            ExecError::SessionIdChanged { .. } => 23,
            ExecError::EntryChanged { .. } => 24,
            ExecError::RefExists { .. } => 25,
            ExecError::PlanExists { .. } => 3,
            ExecError::NotARepository { .. }
            | ExecError::UnknownBase { .. }
            | ExecError::UnknownEntry { .. } => 4,
            ExecError::BrokenChain { .. } | ExecError::Session { .. } => 6,
            ExecError::PlanUnreadable { .. } => 2,
            ExecError::Io { .. } | ExecError::Git(_) => 1,
        }
    }
}
