//! Every way planning, re-checking or running can fail, each naming what is
//! at fault and keeping its source. Exit codes are the CLI's business.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{path} is not a Git repository")]
    NotARepository {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("base revision {rev:?} does not name a commit in {repo}")]
    UnknownBase {
        rev: String,
        repo: PathBuf,
        #[source]
        source: Box<bh_git::GitError>,
    },
    #[error("session {file}: {source}")]
    SessionRead {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("session {file}: no session header")]
    NoHeader { file: PathBuf },
    #[error("session {file}: {source}")]
    Session {
        file: PathBuf,
        #[source]
        source: Box<bh_session::SessionError>,
    },
    #[error("entry {entry} is not in session {file}")]
    UnknownEntry { file: PathBuf, entry: String },
    #[error("entry {entry} in {file}: the chain to the root is broken at {at}")]
    BrokenChain {
        file: PathBuf,
        entry: String,
        at: String,
    },
    #[error("plan {path} already exists (use --force to overwrite)")]
    PlanExists { path: PathBuf },
    #[error("plan {path} cannot be read: {source}")]
    PlanRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("plan {path} is not a plan: {source}")]
    PlanFormat {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "plan {path} has version {version}, this executor reads only version {supported}: re-plan it with `bh exec plan`"
    )]
    PlanVersion {
        path: PathBuf,
        version: u32,
        supported: u32,
    },
    #[error("plan {path} was modified after it was written (plan digest mismatch)")]
    PlanTampered { path: PathBuf },
    #[error("plan {path} was not made by this state directory or was edited: {detail}")]
    PlanNotOurs { path: PathBuf, detail: String },
    #[error("plan {path}: {field} {detail}")]
    PlanInconsistent {
        path: PathBuf,
        field: &'static str,
        detail: String,
    },
    #[error("limits refused: {detail}")]
    LimitsOutOfBounds { detail: String },
    #[error("the path of the {what} {path:?} is not UTF-8 and cannot be recorded in a plan")]
    NonUtf8Path { what: &'static str, path: PathBuf },
    #[error("plan key {path} {problem}")]
    PlanKey {
        path: PathBuf,
        problem: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {value:?} is refused: allowed are {rule}")]
    InvalidId {
        what: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("session {file} is invalid (as `bh session validate` says): {problems}")]
    SessionInvalid { file: PathBuf, problems: String },
    #[error(
        "the filter driver {name:?} in the repository's Git config cannot be switched off for the execution (its name holds '=', a control character or is not UTF-8); remove it or plan with --allow-filters"
    )]
    FilterName { name: String },
    #[error("base commit {commit} no longer resolves to the recorded commit and tree ({detail})")]
    BaseMoved { commit: String, detail: String },
    #[error("session file {file} changed since the plan (sha256 {now}, plan has {planned})")]
    SessionChanged {
        file: PathBuf,
        planned: String,
        now: String,
    },
    #[error("session file {file} now has session id {now}, the plan has {planned}")]
    SessionIdChanged {
        file: PathBuf,
        planned: String,
        now: String,
    },
    #[error("entry {entry} or its path to the root changed in {file}")]
    EntryChanged { file: PathBuf, entry: String },
    #[error("output ref {name} already exists (at {at}); a plan runs once")]
    RefExists { name: String, at: String },
    #[error("cannot create the output ref {name} at the execution's commit {commit}: {source}")]
    RefCreate {
        name: String,
        commit: String,
        #[source]
        source: Box<bh_git::GitError>,
    },
    #[error(
        "{source}; the agent's work is kept in the worktree {worktree} (execution folder {dir}; \
         the worktree is locked, `git worktree unlock` and `git worktree remove` it once saved)"
    )]
    WorkKept {
        worktree: PathBuf,
        dir: PathBuf,
        #[source]
        source: Box<ExecError>,
    },
    #[error(
        "{source}; the agent's work is kept as the tree {tree} (execution folder {dir}; \
         `git diff {base} {tree}` shows it)"
    )]
    TreeKept {
        tree: String,
        base: String,
        dir: PathBuf,
        #[source]
        source: Box<ExecError>,
    },
    #[error("cannot build the execution's result tree: {0}")]
    Tree(#[from] bh_vfs::VfsError),
    #[error("the {trailer} trailer value {value:?} would break the commit message")]
    TrailerValue {
        trailer: &'static str,
        value: String,
    },
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the agent cannot write its session {file}: {source}")]
    Agent {
        file: PathBuf,
        #[source]
        source: Box<bh_runtime::CoreError>,
    },
    #[error(transparent)]
    Runtime(Box<bh_runtime::RuntimeError>),
    #[error(transparent)]
    Git(Box<bh_git::GitError>),
}

impl From<bh_git::GitError> for ExecError {
    fn from(e: bh_git::GitError) -> Self {
        ExecError::Git(Box::new(e))
    }
}

impl From<bh_runtime::RuntimeError> for ExecError {
    fn from(e: bh_runtime::RuntimeError) -> Self {
        ExecError::Runtime(Box::new(e))
    }
}

/// `map_err` helper for I/O on a path.
pub(crate) fn io(
    what: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> ExecError {
    let path = path.to_path_buf();
    move |source| ExecError::Io { what, path, source }
}

pub(crate) fn session(
    file: &std::path::Path,
) -> impl FnOnce(bh_session::SessionError) -> ExecError {
    let file = file.to_path_buf();
    move |source| ExecError::Session {
        file,
        source: Box::new(source),
    }
}
