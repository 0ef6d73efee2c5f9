//! What a task is given: everything the caller (the CLI) decides before
//! it starts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::scope::ScopeSpec;

/// Refs under this prefix belong to the harness (excluded from the control
/// plane; rejected candidates are kept here).
pub const TASK_REF_PREFIX: &str = "refs/better-harness/tasks/";

/// Everything a task needs, decided by the caller (the CLI).
#[derive(Debug, Clone)]
pub struct TaskOptions {
    /// The source checkout (must be the top level of a worktree).
    pub source: PathBuf,
    pub scope: ScopeSpec,
    pub promote: bool,
    /// A new folder for this task (created 0700; must not exist, must be
    /// outside the repository).
    pub artifacts: PathBuf,
    /// Folder of per-repository promotion locks (outside every repository).
    pub lock_dir: PathBuf,
    pub timeout: Option<Duration>,
    pub argv: Vec<OsString>,
    /// The worker's environment before `BH_TASK_SESSION=1` and the hooks-off
    /// configuration are added; names are recorded with digests of values.
    pub env: Vec<(OsString, OsString)>,
    /// The task id (also the artifact folder's name by default); see
    /// [`new_task_id`].
    pub id: String,
    /// Digest of the `bh` binary, recorded in the freeze.
    pub harness_digest: String,
    /// The caller's own process carries `BH_TASK_SESSION`.
    pub inside_task_session: bool,
    /// Folder that holds task artifacts by default; a source inside it is a
    /// nested session.
    pub tasks_root: PathBuf,
    pub grace: Duration,
    /// Commit the worker's uncommitted work as one commit and validate (and
    /// promote) that (`--commit`).
    pub commit: bool,
    /// The most `work.patch` and `rejected.patch` may hold (bytes); a
    /// longer patch is cut and the outcome says so (the work itself is
    /// whole under the task's ref).
    pub patch_limit: u64,
    /// That commit's message (`--message`); `None`: one naming the task and
    /// its command.
    pub message: Option<String>,
    /// The sandbox; `None` is `--no-sandbox` (printed and recorded).
    pub sandbox: Option<SandboxOptions>,
    /// Global, system and XDG Git configuration and attributes files the
    /// second line compares before and after.
    pub config_files: Vec<PathBuf>,
    /// Where the worker's output is shown live (besides `stdout.log` and
    /// `stderr.log`); `None` keeps it to the logs.
    pub echo: Option<std::sync::Arc<dyn crate::contain::Echo>>,
}

/// What the worker's sandbox grants besides its own repository and home.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    /// `--allow-write DIR` (e.g. build caches).
    pub allow_write: Vec<PathBuf>,
    /// `--allow-read DIR`: carried over read-only onto the private `/tmp`
    /// (everything outside `/tmp` is readable already).
    pub allow_read: Vec<PathBuf>,
    /// `false` for `--no-network`.
    pub network: bool,
    /// Kept read-only even inside a writable folder: `~/.gitconfig`,
    /// `$XDG_CONFIG_HOME`, the harness's state folder.
    pub protected: Vec<PathBuf>,
    /// Not readable at all: keys, credential stores, checkpoint sockets
    /// (see `bh_sandbox::Policy::hidden`).
    pub hidden: Vec<PathBuf>,
    /// `--allow-unix-socket PATH`: host sockets the worker may connect to
    /// (every other one is covered; `bh_sandbox::Policy::allow_sockets`).
    pub allow_sockets: Vec<PathBuf>,
    /// `--no-unix-sockets`: the worker may make no Unix socket at all
    /// (`bh_sandbox::Policy::deny_unix_sockets`).
    pub deny_unix_sockets: bool,
}
