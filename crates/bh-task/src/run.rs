//! A whole task session: preflight, freeze, worktree, contained run,
//! validation, outcome and — on request — promotion by fast-forward.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bh_git::{GitRunner, Repo, Scope};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::contain::{Ending, RunSpec, run_contained};
use crate::scope::{FrozenScope, ScopeSpec};
use crate::validate::{Violation, validate_candidate, validate_worktree};

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
}

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
}

/// Failures that prevent a task from starting (preflight, freeze, setup).
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{path} is not the top level of a Git worktree (it is inside {top})")]
    NotTopLevel { path: String, top: String },
    #[error("{path} is not a Git repository")]
    NotARepository { path: String },
    #[error("the source checkout {path} is not clean: {detail}")]
    Dirty { path: String, detail: String },
    #[error("--promote needs the source to be on a branch; {path} has a detached HEAD")]
    Detached { path: String },
    #[error("refusing a nested task session: {why}")]
    Nested { why: String },
    #[error("artifact folder {path}: {why}")]
    Artifacts { path: String, why: String },
    #[error(transparent)]
    Scope(#[from] crate::TaskError),
    #[error(transparent)]
    Git(#[from] bh_git::GitError),
    #[error(transparent)]
    Run(#[from] crate::contain::RunError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> PreflightError {
    let context = context.into();
    move |source| PreflightError::Io { context, source }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The worktree's identity as recorded at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Identity {
    path: PathBuf,
    dot_git: String,
    admin: PathBuf,
    back_pointer: String,
    nonce: String,
    /// The admin folder's `locked` file (the lock taken at creation).
    locked: String,
    commondir: String,
}

fn identity_of(repo: &Repo, path: &Path) -> Option<Identity> {
    let dot_git = fs::read_to_string(path.join(".git")).ok()?;
    let wt = repo.clone_at(path);
    let admin = PathBuf::from(wt.run_line(["rev-parse", "--absolute-git-dir"]).ok()?);
    let back_pointer = fs::read_to_string(admin.join("gitdir")).ok()?;
    let nonce = fs::read_to_string(admin.join("bh-task-nonce")).ok()?;
    let locked = fs::read_to_string(admin.join("locked")).ok()?;
    let commondir = fs::read_to_string(admin.join("commondir")).ok()?;
    Some(Identity {
        path: fs::canonicalize(path).ok()?,
        dot_git,
        admin,
        back_pointer,
        nonce,
        locked,
        commondir,
    })
}

trait CloneAt {
    fn clone_at(&self, path: &Path) -> Repo;
}

impl CloneAt for Repo {
    fn clone_at(&self, path: &Path) -> Repo {
        self.runner().repo(path, Scope::User)
    }
}

/// Digest of what a worker must not change: repository config, hooks,
/// `info/` (excludes, attributes, grafts), shallow and alternates files, and
/// every ref outside the harness namespace except the source branch (whose
/// movement is judged at promotion).
fn control_plane(
    repo: &Repo,
    common: &Path,
    branch: Option<&str>,
) -> Result<String, PreflightError> {
    let mut h = Sha256::new();
    for file in [
        "config",
        "config.worktree",
        "shallow",
        "objects/info/alternates",
        "objects/info/http-alternates",
    ] {
        h.update(file.as_bytes());
        h.update(fs::read(common.join(file)).unwrap_or_default());
    }
    for dir in ["hooks", "info"] {
        let mut entries: Vec<PathBuf> = Vec::new();
        collect_files(&common.join(dir), &mut entries);
        entries.sort();
        for e in entries {
            h.update(e.as_os_str().as_bytes());
            h.update(fs::read(&e).unwrap_or_default());
            if let Ok(m) = fs::symlink_metadata(&e) {
                h.update(format!(
                    "{:o}",
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions())
                ));
            }
        }
    }
    let refs = repo.run(["for-each-ref", "--format=%(refname) %(objectname)"])?;
    for line in refs.split(|b| *b == b'\n') {
        let name = line.split(|b| *b == b' ').next().unwrap_or_default();
        if name.starts_with(TASK_REF_PREFIX.as_bytes())
            || branch.is_some_and(|b| name == b.as_bytes())
        {
            continue;
        }
        h.update(line);
        h.update(b"\n");
    }
    Ok(hex::encode(h.finalize()))
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect_files(&p, out),
            _ => out.push(p),
        }
    }
}

/// Whether the checkout at `top` is clean, judged by a fresh temporary index
/// built from `HEAD` (so assume-unchanged/skip-worktree bits cannot hide a
/// change) and untracked files judged by `.gitignore` files alone (so
/// `info/exclude` cannot hide one).
fn clean_check(repo: &Repo, scratch: &Path) -> Result<Option<String>, PreflightError> {
    let index = scratch.join("clean-check.index");
    let _ = fs::remove_file(&index);
    let with_index = |args: &[&str]| {
        repo.cmd(args.iter().copied())
            .env("GIT_INDEX_FILE", index.as_os_str())
            .optional_locks(true)
    };
    with_index(&["read-tree", "HEAD"]).run()?;
    // Refresh re-hashes files whose stat data the fresh index lacks; exit 1
    // means "needs update", i.e. changed.
    let refresh = with_index(&["update-index", "-q", "--refresh"])
        .ok_codes(&[0, 1])
        .run()?;
    let changed = with_index(&["diff-files", "--name-only", "-z"]).run()?;
    let untracked = with_index(&[
        "ls-files",
        "-z",
        "--others",
        "--exclude-per-directory=.gitignore",
    ])
    .run()?;
    let _ = fs::remove_file(&index);
    let mut dirty: Vec<String> = bh_git::parse::split_z(&changed.stdout)
        .chain(bh_git::parse::split_z(&untracked.stdout))
        .map(bh_git::parse::display_path)
        .collect();
    if dirty.is_empty() && refresh.code == 0 {
        return Ok(None);
    }
    dirty.truncate(10);
    Ok(Some(if dirty.is_empty() {
        "the index differs from HEAD".into()
    } else {
        dirty.join(", ")
    }))
}

/// A fresh task id: time-ordered, unique per process and moment.
pub fn new_task_id() -> String {
    bh_fs::time_ordered_id("t", b"")
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), PreflightError> {
    bh_fs::write_json_atomic(path, value).map_err(io(format!("cannot write {}", path.display())))
}

/// Runs one task session end to end. Errors are preflight/setup failures;
/// everything after the worker starts ends in a [`TaskReport`].
pub fn run_task(
    runner: &GitRunner,
    opts: &TaskOptions,
    cancel: &AtomicBool,
) -> Result<TaskReport, PreflightError> {
    // --- preflight -------------------------------------------------------
    let source = fs::canonicalize(&opts.source)
        .map_err(io(format!("cannot open {}", opts.source.display())))?;
    let repo = runner.repo(&source, Scope::User);
    let top = repo
        .run_line(["rev-parse", "--show-toplevel"])
        .map_err(|_| PreflightError::NotARepository {
            path: source.display().to_string(),
        })?;
    let top = fs::canonicalize(&top).map_err(io(format!("cannot resolve {top}")))?;
    if top != source {
        return Err(PreflightError::NotTopLevel {
            path: source.display().to_string(),
            top: top.display().to_string(),
        });
    }
    if opts.inside_task_session {
        return Err(PreflightError::Nested {
            why: "BH_TASK_SESSION is set".into(),
        });
    }
    let tasks_root = fs::canonicalize(&opts.tasks_root).unwrap_or_else(|_| opts.tasks_root.clone());
    if source.starts_with(&tasks_root) {
        return Err(PreflightError::Nested {
            why: format!(
                "{} is inside the task folder {}",
                source.display(),
                tasks_root.display()
            ),
        });
    }
    let admin = PathBuf::from(repo.run_line(["rev-parse", "--absolute-git-dir"])?);
    if admin.join("bh-task-nonce").exists() {
        return Err(PreflightError::Nested {
            why: format!("{} is a worktree made by a task session", source.display()),
        });
    }
    let common = PathBuf::from(repo.run_line([
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
    ])?);
    let branch = repo
        .cmd(["symbolic-ref", "-q", "HEAD"])
        .ok_codes(&[0, 1])
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .ok()
        .filter(|b| !b.is_empty());
    if opts.promote && branch.is_none() {
        return Err(PreflightError::Detached {
            path: source.display().to_string(),
        });
    }
    let base = repo.resolve_commit("HEAD")?;
    let hooks_path = repo
        .cmd(["config", "--get", "core.hooksPath"])
        .ok_codes(&[0, 1])
        .run()
        .map(|o| o.stdout.strip_suffix(b"\n").unwrap_or(&o.stdout).to_vec())
        .ok()
        .filter(|h| !h.is_empty());
    let scope = FrozenScope::freeze(&repo, &base, &opts.scope, hooks_path.as_deref())?;

    // --- freeze ----------------------------------------------------------
    let artifacts = &opts.artifacts;
    if artifacts.exists() {
        return Err(PreflightError::Artifacts {
            path: artifacts.display().to_string(),
            why: "already exists".into(),
        });
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(artifacts)
        .map_err(io(format!("cannot create {}", artifacts.display())))?;
    let artifacts = fs::canonicalize(artifacts)
        .map_err(io(format!("cannot resolve {}", artifacts.display())))?;
    if artifacts.starts_with(&source) {
        let _ = fs::remove_dir(&artifacts);
        return Err(PreflightError::Artifacts {
            path: artifacts.display().to_string(),
            why: format!("inside the repository {}", source.display()),
        });
    }
    if let Some(why) = clean_check(&repo, &artifacts)? {
        return Err(PreflightError::Dirty {
            path: source.display().to_string(),
            detail: why,
        });
    }
    let id = opts.id.clone();
    let control = control_plane(&repo, &common, branch.as_deref())?;
    let env_record: Vec<serde_json::Value> = opts
        .env
        .iter()
        .map(|(k, v)| serde_json::json!({"name": k.to_string_lossy(), "sha256": sha256_hex(v.as_bytes())}))
        .collect();
    write_json(
        &artifacts.join("task.json"),
        &serde_json::json!({
            "id": id,
            "source": source,
            "branch": branch,
            "base": base,
            "base_tree": repo.tree_of(&base)?,
            "harness_sha256": opts.harness_digest,
            "argv": opts.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "env": env_record,
            "scope": scope.shown,
            "promote": opts.promote,
            "timeout_ms": opts.timeout.map(|t| t.as_millis() as u64),
            "control_plane_sha256": control,
        }),
    )?;

    // --- worktree --------------------------------------------------------
    let worktree = artifacts.join("worktree");
    repo.worktree_add_detached(&worktree, &base, &format!("bh task {id}"))?;
    let mut guard = bh_git::WorktreeGuard::new(&repo, &worktree);
    let wt_repo = runner.repo(&worktree, Scope::User);
    let wt_admin = PathBuf::from(wt_repo.run_line(["rev-parse", "--absolute-git-dir"])?);
    let nonce = sha256_hex(format!("{id}{:?}", std::time::SystemTime::now()).as_bytes());
    fs::write(wt_admin.join("bh-task-nonce"), &nonce)
        .map_err(io("cannot write the worktree nonce"))?;
    let identity = identity_of(&repo, &worktree).ok_or_else(|| PreflightError::Artifacts {
        path: worktree.display().to_string(),
        why: "cannot record the worktree identity".into(),
    })?;

    // --- run -------------------------------------------------------------
    let mut env = opts.env.clone();
    env.retain(|(k, _)| !k.as_bytes().starts_with(b"GIT_") && k != "BH_TASK_SESSION");
    env.push(("BH_TASK_SESSION".into(), "1".into()));
    env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
    env.push(("GIT_CONFIG_KEY_0".into(), "core.hooksPath".into()));
    env.push(("GIT_CONFIG_VALUE_0".into(), "/dev/null".into()));
    let run = match run_contained(
        &RunSpec {
            argv: opts.argv.clone(),
            cwd: worktree.clone(),
            env,
            timeout: opts.timeout,
            stdout_log: artifacts.join("stdout.log"),
            stderr_log: artifacts.join("stderr.log"),
            keep_head: 256 * 1024,
            keep_tail: 256 * 1024,
            grace: opts.grace,
        },
        cancel,
    ) {
        Ok(run) => run,
        Err(err @ crate::contain::RunError::Spawn { .. }) => {
            // The command could not even start: the worker failed.
            guard.remove()?;
            let report = TaskReport {
                id,
                outcome: Outcome::Failed,
                reasons: vec![err.to_string()],
                violations: Vec::new(),
                source,
                branch,
                base,
                candidate: None,
                kept_ref: None,
                worktree: None,
                artifacts: artifacts.clone(),
                ending: None,
            };
            write_json(&artifacts.join("state.json"), &report)?;
            return Ok(report);
        }
        Err(err) => return Err(err.into()),
    };

    let mut report = TaskReport {
        id: id.clone(),
        outcome: Outcome::Succeeded,
        reasons: Vec::new(),
        violations: Vec::new(),
        source: source.clone(),
        branch: branch.clone(),
        base: base.clone(),
        candidate: None,
        kept_ref: None,
        worktree: None,
        artifacts: artifacts.clone(),
        ending: Some(run.ending),
    };

    // --- validate: identity first ----------------------------------------
    let now = identity_of(&repo, &worktree);
    let control_now = control_plane(&repo, &common, branch.as_deref())?;
    if now.as_ref() != Some(&identity) {
        report.outcome = Outcome::Untrusted;
        report
            .reasons
            .push("the worktree's identity changed (moved, replaced or re-pointed)".into());
    }
    if control_now != control {
        report.outcome = Outcome::Untrusted;
        report
            .reasons
            .push("the repository's control plane changed (config, hooks, info/ or refs)".into());
    }
    if report.outcome == Outcome::Untrusted {
        guard.keep();
        report.worktree = Some(worktree);
        write_json(&artifacts.join("state.json"), &report)?;
        return Ok(report);
    }
    match run.ending {
        Ending::Interrupted => {
            report.outcome = Outcome::Interrupted;
            report.reasons.push("interrupted".into());
            guard.keep();
            report.worktree = Some(worktree);
            write_json(&artifacts.join("state.json"), &report)?;
            return Ok(report);
        }
        Ending::TimedOut => {
            report.outcome = Outcome::TimedOut;
            report.reasons.push("the worker hit the time limit".into());
        }
        Ending::Exited { code: 0 } => {}
        Ending::Exited { code } => {
            report.outcome = Outcome::Failed;
            report
                .reasons
                .push(format!("the worker exited with code {code}"));
        }
        Ending::Signaled { signal } => {
            report.outcome = Outcome::Failed;
            report
                .reasons
                .push(format!("the worker was killed by signal {signal}"));
        }
    }
    if report.outcome == Outcome::Succeeded {
        let candidate = wt_repo.resolve_commit("HEAD")?;
        report.candidate = Some(candidate.clone());
        let mut violations = validate_candidate(&repo, &scope, &candidate)?;
        violations.extend(validate_worktree(&wt_repo, &scope)?);
        // `git status` trusts the worktree's index; judge it again with a
        // fresh one so assume-unchanged or skip-worktree cannot hide work.
        if violations.is_empty()
            && let Some(why) = clean_check(&wt_repo, &artifacts)?
        {
            violations.push(Violation {
                commit: None,
                path: None,
                reason: format!("uncommitted change hidden from git status: {why}"),
            });
        }
        if !violations.is_empty() {
            report.outcome = Outcome::Rejected;
            report.reasons.push(format!(
                "{} violation(s) of the task boundary",
                violations.len()
            ));
            report.violations = violations;
        } else if opts.promote && candidate != base {
            promote(
                runner,
                opts,
                &repo,
                &admin,
                &artifacts,
                &mut report,
                &candidate,
            )?;
        }
        if report.outcome == Outcome::Rejected && candidate != base {
            let name = format!("{TASK_REF_PREFIX}{id}");
            if repo.create_ref(&name, &candidate).is_ok() {
                report.kept_ref = Some(name);
            }
            let patch = repo.run([
                "diff",
                "--binary",
                "--no-ext-diff",
                "--no-textconv",
                &base,
                &candidate,
                "--",
            ])?;
            fs::write(artifacts.join("rejected.patch"), patch)
                .map_err(io("cannot write rejected.patch"))?;
        }
    }
    // Ordinary endings remove that exact worktree (never a global prune).
    guard.remove()?;
    write_json(&artifacts.join("state.json"), &report)?;
    Ok(report)
}

/// Fast-forwards the source branch to `candidate` under a per-repository lock,
/// after re-checking that the source is the same checkout, on the same branch,
/// still at the base and clean. A source that moved is a rejection, never a
/// rebase.
fn promote(
    runner: &GitRunner,
    opts: &TaskOptions,
    repo: &Repo,
    source_admin: &Path,
    artifacts: &Path,
    report: &mut TaskReport,
    candidate: &str,
) -> Result<(), PreflightError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&opts.lock_dir)
        .map_err(io(format!("cannot create {}", opts.lock_dir.display())))?;
    let common = repo.run_line(["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let lock_path = opts
        .lock_dir
        .join(format!("{}.lock", &sha256_hex(common.as_bytes())[..16]));
    let lock = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io(format!("cannot open {}", lock_path.display())))?;
    lock.lock()
        .map_err(io(format!("cannot lock {}", lock_path.display())))?;
    let fresh = runner.repo(&report.source, Scope::User);
    let branch_now = fresh
        .cmd(["symbolic-ref", "-q", "HEAD"])
        .ok_codes(&[0, 1])
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .ok();
    let mut moved = Vec::new();
    let admin_now = fresh.run_line(["rev-parse", "--absolute-git-dir"]).ok();
    if admin_now.as_deref().map(Path::new) != Some(source_admin) {
        moved.push("the source is no longer the same checkout".to_owned());
    }
    if branch_now.as_deref() != report.branch.as_deref() {
        moved.push("the source is no longer on the same branch".to_owned());
    }
    if fresh.resolve_commit("HEAD").ok().as_deref() != Some(report.base.as_str()) {
        moved.push("the source branch moved since the task started".to_owned());
    }
    if moved.is_empty()
        && let Some(why) = clean_check(&fresh, artifacts)?
    {
        moved.push(format!("the source checkout is no longer clean: {why}"));
    }
    if !moved.is_empty() {
        report.outcome = Outcome::Rejected;
        report.reasons.extend(moved);
        return Ok(());
    }
    fresh
        .cmd(["merge", "--ff-only", "--no-edit", "--quiet", candidate])
        .optional_locks(true)
        .run()?;
    if fresh.resolve_commit("HEAD")? == candidate {
        report.outcome = Outcome::Promoted;
    } else {
        report.outcome = Outcome::Rejected;
        report
            .reasons
            .push("after the fast-forward HEAD is not the candidate".into());
    }
    drop(lock);
    Ok(())
}
