//! A whole task session: preflight, freeze, the worker's own repository,
//! a sandboxed run, the second line, snapshot and fetch of the work,
//! validation with isolated configuration, outcome and — on request —
//! promotion by fast-forward.

use fs_err as fs;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bh_git::{GitRunner, Scope};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::contain::{Ending, RunSpec, run_contained, run_sandboxed};
use crate::outcome::{finish, patch_cut_note, rejection_reasons, work_message};
use crate::patch::write_patch;
use crate::promote::{clean_check, promote};
use crate::scope::{FrozenScope, ScopeSpec};
use crate::second_line::Watch;
use crate::taskrepo;
use crate::validate::{Violation, validate_candidate, validate_uncommitted};

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

/// Failures that prevent a task from starting (preflight, freeze, setup).
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{path} is not the top level of a Git worktree (it is inside {top})")]
    NotTopLevel { path: String, top: String },
    #[error("{path} is not a Git repository")]
    NotARepository { path: String },
    #[error(
        "the source checkout {path} is not clean: {detail}; --promote fast-forwards it, so its \
         tracked files must match HEAD: commit or stash them, or run without --promote (the \
         task starts from HEAD either way)"
    )]
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
    #[error(transparent)]
    Sandbox(#[from] bh_sandbox::SandboxError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// An error of an `fs_err` call: its message already names the path
    /// ("failed to create directory `…`: …"), so none is added.
    #[error(transparent)]
    Fs(std::io::Error),
}

/// Context for an I/O error that does not name its path (a `std` or
/// `bh_fs` call, a pipe); `fs_err` errors go in [`PreflightError::Fs`].
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> PreflightError {
    let context = context.into();
    move |source| PreflightError::Io { context, source }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A fresh task id: time-ordered, unique per process and moment.
pub fn new_task_id() -> String {
    bh_fs::time_ordered_id("t", b"")
}

pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), PreflightError> {
    bh_fs::write_json_atomic(path, value).map_err(io(format!("cannot write {}", path.display())))
}

/// Runs one task session end to end. Errors are preflight/setup failures;
/// everything after the worker starts ends in a [`TaskReport`].
#[allow(
    clippy::too_many_lines,
    reason = "a phase orchestrator not yet split into named steps (issue 26)"
)]
pub fn run_task(
    runner: &GitRunner,
    opts: &TaskOptions,
    cancel: &AtomicBool,
) -> Result<TaskReport, PreflightError> {
    // --- preflight -------------------------------------------------------
    let source = fs::canonicalize(&opts.source).map_err(PreflightError::Fs)?;
    let repo = runner.repo(&source, Scope::User);
    let top = repo
        .run_line(["rev-parse", "--show-toplevel"])
        .map_err(|_| PreflightError::NotARepository {
            path: source.display().to_string(),
        })?;
    let top = fs::canonicalize(&top).map_err(PreflightError::Fs)?;
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
            why: format!(
                "{} is a repository made by a task session",
                source.display()
            ),
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
    let hooks_path = crate::policy::resolved_hooks_path(&repo, &source);
    let scope = FrozenScope::freeze(&repo, &base, &opts.scope, hooks_path.as_deref())?;

    // --- freeze ----------------------------------------------------------
    let artifacts = &opts.artifacts;
    if artifacts.exists() {
        return Err(PreflightError::Artifacts {
            path: artifacts.display().to_string(),
            why: "already exists".into(),
        });
    }
    bh_fs::create_dir_all_mode(artifacts, 0o700)
        .map_err(io(format!("cannot create {}", artifacts.display())))?;
    let artifacts = fs::canonicalize(artifacts).map_err(PreflightError::Fs)?;
    if artifacts.starts_with(&source) {
        let _ = fs::remove_dir(&artifacts);
        return Err(PreflightError::Artifacts {
            path: artifacts.display().to_string(),
            why: format!("inside the repository {}", source.display()),
        });
    }
    // Only a promotion needs the checkout to match HEAD (the task itself
    // starts from HEAD in a repository of its own); untracked files are
    // judged at promotion, and only those it would overwrite.
    if opts.promote
        && let Some(why) = clean_check(&repo, &artifacts)?
    {
        let _ = fs::remove_dir_all(&artifacts);
        return Err(PreflightError::Dirty {
            path: source.display().to_string(),
            detail: why,
        });
    }
    let id = opts.id.clone();
    let env_record: Vec<serde_json::Value> = opts
        .env
        .iter()
        .map(|(k, v)| serde_json::json!({"name": k.to_string_lossy(), "sha256": sha256_hex(v.as_bytes())}))
        .collect();

    // --- the worker's repository and sandbox -----------------------------
    let dir = artifacts.join("worktree");
    let home = artifacts.join("home");
    // Commits the harness makes for the user are theirs: their identity,
    // read from their configuration through the hardened runner.
    let identity = taskrepo::user_identity(&repo);
    taskrepo::private_home(&home, identity.as_ref())?;
    taskrepo::create(runner, &dir, &common.join("objects"), &base)?;
    let nonce = sha256_hex(format!("{id}{:?}", std::time::SystemTime::now()).as_bytes());
    fs::write(dir.join(".git/bh-task-nonce"), &nonce).map_err(PreflightError::Fs)?;
    let make_sandbox = || -> Result<Option<bh_sandbox::Sandbox>, PreflightError> {
        let Some(s) = &opts.sandbox else {
            return Ok(None);
        };
        let mut read_only = vec![admin.clone(), common.clone(), source.join(".git")];
        read_only.extend(s.protected.iter().cloned());
        let policy = bh_sandbox::Policy {
            writable: [dir.clone(), home.clone()]
                .into_iter()
                .chain(s.allow_write.iter().cloned())
                .collect(),
            read_only,
            visible: std::iter::once(source.clone())
                .chain(s.allow_read.iter().cloned())
                .collect(),
            private_tmp: true,
            network: s.network,
            hidden: s.hidden.clone(),
            overlays: Vec::new(),
        };
        Ok(Some(bh_sandbox::Sandbox::new(&policy, &dir)?))
    };
    let sandbox = match make_sandbox() {
        Ok(s) => s,
        Err(e) => {
            let _ = fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    let sandbox_report = sandbox.as_ref().map(|s| s.report().clone());
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
            "commit": opts.commit,
            "timeout_ms": opts.timeout.map(|t| t.as_millis() as u64),
            "sandbox": sandbox_report,
            "no_sandbox": opts.sandbox.is_none(),
        }),
    )?;
    let before = Watch::capture(&source, &admin, &common, &opts.config_files);

    // --- run -------------------------------------------------------------
    let mut env = opts.env.clone();
    env.retain(|(k, _)| {
        !k.as_bytes().starts_with(b"GIT_") && k != "BH_TASK_SESSION" && k != "HOME" && k != "TMPDIR"
    });
    env.push(("BH_TASK_SESSION".into(), "1".into()));
    env.push(("HOME".into(), home.clone().into()));
    env.push((
        "TMPDIR".into(),
        if sandbox.is_some() {
            "/tmp".into()
        } else {
            home.clone().into()
        },
    ));
    env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
    env.push(("GIT_CONFIG_KEY_0".into(), "core.hooksPath".into()));
    env.push(("GIT_CONFIG_VALUE_0".into(), "/dev/null".into()));
    let spec = RunSpec {
        argv: opts.argv.clone(),
        cwd: dir.clone(),
        env: env.clone(),
        timeout: opts.timeout,
        stdout_log: artifacts.join("stdout.log"),
        stderr_log: artifacts.join("stderr.log"),
        keep_head: 256 * 1024,
        keep_tail: 256 * 1024,
        grace: opts.grace,
        echo: opts.echo.clone(),
    };
    // What the sandbox hides under /tmp, named when the worker fails.
    let tmp_hints = || crate::hints::hidden_by_the_sandbox(opts, &[&source, &dir, &home]);
    let ran = match sandbox {
        Some(sb) => run_sandboxed(&spec, sb, cancel),
        None => run_contained(&spec, cancel),
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
        ending: None,
        work: None,
        sandbox: sandbox_report,
        no_sandbox: opts.sandbox.is_none(),
        notes: Vec::new(),
    };
    let run = match ran {
        Ok(run) => run,
        Err(err @ crate::contain::RunError::Spawn { .. }) => {
            // The command could not even start: the worker failed.
            report.outcome = Outcome::Failed;
            report.reasons.push(err.to_string());
            report.reasons.extend(tmp_hints());
            return finish(report, &artifacts, dir);
        }
        Err(err) => {
            let _ = fs::remove_dir_all(&dir);
            return Err(err.into());
        }
    };
    report.ending = Some(run.ending);

    // --- the second line ---------------------------------------------------
    let after = Watch::capture(&source, &admin, &common, &opts.config_files);
    let changed = before.differences(&after);
    if !changed.is_empty() {
        report.outcome = Outcome::Untrusted;
        report
            .reasons
            .push("the worker changed what it must not touch".into());
        report.reasons.extend(changed);
        report.worktree = Some(dir);
        write_json(&artifacts.join("state.json"), &report)?;
        return Ok(report);
    }

    // --- keep the work ---------------------------------------------------
    let isolated = runner
        .repo(&source, Scope::Isolated)
        .with_config("core.attributesFile", "/dev/null")
        .with_config("diff.ignoreSubmodules", "none")
        .with_config("core.fsmonitor", "false");
    let snap = make_sandbox().map(|sb| {
        taskrepo::snapshot(
            &dir,
            sb,
            &env,
            &home,
            identity.as_ref().unwrap_or(&taskrepo::Identity::harness()),
            &work_message(opts),
        )
        .map_err(|why| format!("cannot read the worker's repository: {why}"))
    })?;
    let kept_ref = format!("{TASK_REF_PREFIX}{id}");
    let snap = snap.and_then(|snap| {
        if snap.work != base {
            taskrepo::fetch(&isolated, &dir, &kept_ref)
                .map_err(|why| format!("the worker's objects failed git's checks: {why}"))?;
        }
        Ok(snap)
    });
    if let Ok(s) = &snap
        && s.work != base
    {
        report.kept_ref = Some(kept_ref.clone());
        report.work = Some(s.work.clone());
        if write_patch(
            &isolated,
            &base,
            &s.work,
            &artifacts.join("work.patch"),
            opts.patch_limit,
        )? {
            report.notes.push(patch_cut_note(
                "work.patch",
                opts.patch_limit,
                &base,
                &kept_ref,
            ));
        }
    }

    match run.ending {
        Ending::Interrupted => {
            report.outcome = Outcome::Interrupted;
            report.reasons.push(
                "bh was asked to stop (Ctrl-C, SIGTERM or SIGHUP); the worker's repository is kept"
                    .into(),
            );
            report.worktree = Some(dir);
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
            let tail = taskrepo::log_tail(&spec.stderr_log, 3);
            report.reasons.push(if tail.is_empty() {
                format!("the worker exited with code {code}")
            } else {
                format!("the worker exited with code {code}: {tail}")
            });
            report.reasons.extend(tmp_hints());
        }
        Ending::Signaled { signal } => {
            report.outcome = Outcome::Failed;
            report
                .reasons
                .push(format!("the worker was killed by signal {signal}"));
        }
    }
    match snap {
        Err(why) => {
            if report.outcome == Outcome::Succeeded {
                report.outcome = Outcome::Rejected;
            }
            report.reasons.push(why);
        }
        Ok(snap) if report.outcome == Outcome::Succeeded => {
            let candidate = if opts.commit {
                snap.work.clone()
            } else {
                snap.head.clone()
            };
            report.candidate = Some(candidate.clone());
            let mut violations = Vec::new();
            if candidate != base {
                violations = validate_candidate(&isolated, &scope, &candidate)?;
            }
            if !opts.commit && snap.work != snap.head {
                violations.extend(validate_uncommitted(
                    &isolated, &scope, &snap.head, &snap.work,
                )?);
            }
            if !violations.is_empty() {
                report.outcome = Outcome::Rejected;
                report
                    .reasons
                    .extend(rejection_reasons(&violations, &kept_ref));
                report.violations = violations;
                if write_patch(
                    &isolated,
                    &base,
                    &snap.work,
                    &artifacts.join("rejected.patch"),
                    opts.patch_limit,
                )? {
                    report.notes.push(patch_cut_note(
                        "rejected.patch",
                        opts.patch_limit,
                        &base,
                        &kept_ref,
                    ));
                }
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
        }
        Ok(_) => {}
    }
    if report.outcome == Outcome::Succeeded {
        report.notes.push(match &report.candidate {
            Some(c) if *c != base => format!(
                "take the result with `git merge --ff-only {kept_ref}` in {} (or run the task \
                 with --promote)",
                source.display()
            ),
            _ => "the worker changed nothing".to_owned(),
        });
    }
    finish(report, &artifacts, dir)
}
