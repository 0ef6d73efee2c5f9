//! A whole task session: preflight, freeze, the worker's own repository,
//! a sandboxed run, the second line, snapshot and fetch of the work,
//! validation with isolated configuration, outcome and — on request —
//! promotion by fast-forward.

use fs_err as fs;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bh_git::{GitRunner, Repo, Scope};

pub use crate::error::PreflightError;
pub(crate) use crate::error::io;
pub use crate::options::{SandboxOptions, TASK_REF_PREFIX, TaskOptions};
pub use crate::report::{Outcome, TaskReport, new_task_id};
pub(crate) use crate::report::{sha256_hex, write_json};

use crate::contain::{Ending, RunError, RunOutcome, RunSpec, run_contained, run_sandboxed};
use crate::outcome::{finish, patch_cut_note, rejection_reasons, work_message};
use crate::patch::write_patch;
use crate::promote::{clean_check, promote};
use crate::scope::FrozenScope;
use crate::second_line::Watch;
use crate::taskrepo;
use crate::validate::{validate_candidate, validate_uncommitted};

/// Runs one task session end to end, phase by phase: [`preflight`],
/// [`freeze`], [`prepare`] (the worker's repository and sandbox), the run,
/// the second line, [`keep_work`], then the outcome ([`judge_ending`],
/// [`judge_work`]). Errors are preflight/setup failures; everything after
/// the worker starts ends in a [`TaskReport`].
pub fn run_task(
    runner: &GitRunner,
    opts: &TaskOptions,
    cancel: &AtomicBool,
) -> Result<TaskReport, PreflightError> {
    let src = preflight(runner, opts)?;
    let artifacts = freeze(opts, &src)?;
    let mut worker = prepare(runner, opts, &src, &artifacts)?;
    let before = Watch::capture(&src.source, &src.admin, &src.common, &opts.config_files);
    let (spec, ran) = start(opts, &mut worker, &artifacts, cancel);
    let mut report = new_report(opts, &src, &artifacts, &worker);
    let run = match ran {
        Ok(run) => run,
        Err(err @ RunError::Spawn { .. }) => {
            // The command could not even start: the worker failed.
            report.outcome = Outcome::Failed;
            report.reasons.push(err.to_string());
            report.reasons.extend(worker.tmp_hints(opts, &src));
            return finish(report, &artifacts, worker.dir);
        }
        Err(err) => {
            let _ = fs::remove_dir_all(&worker.dir);
            return Err(err.into());
        }
    };
    report.ending = Some(run.ending);

    // The second line: what the worker must not touch, compared.
    let after = Watch::capture(&src.source, &src.admin, &src.common, &opts.config_files);
    let changed = before.differences(&after);
    if !changed.is_empty() {
        report.outcome = Outcome::Untrusted;
        report
            .reasons
            .push("the worker changed what it must not touch".into());
        report.reasons.extend(changed);
        report.worktree = Some(worker.dir);
        write_json(&artifacts.join("state.json"), &report)?;
        return Ok(report);
    }

    let isolated = runner
        .repo(&src.source, Scope::Isolated)
        .with_config("core.attributesFile", "/dev/null")
        .with_config("diff.ignoreSubmodules", "none")
        .with_config("core.fsmonitor", "false");
    let snap = keep_work(opts, &src, &worker, &isolated, &artifacts, &mut report)?;
    if judge_ending(&run, &spec, opts, &src, &worker, &mut report) == Verdict::KeepWorktree {
        report.worktree = Some(worker.dir);
        write_json(&artifacts.join("state.json"), &report)?;
        return Ok(report);
    }
    judge_work(runner, opts, &src, &isolated, &artifacts, snap, &mut report)?;
    if report.outcome == Outcome::Succeeded {
        report.notes.push(match &report.candidate {
            Some(c) if *c != src.base => format!(
                "take the result with `git merge --ff-only {}` in {} (or run the task \
                 with --promote)",
                kept_ref(opts),
                src.source.display()
            ),
            _ => "the worker changed nothing".to_owned(),
        });
    }
    finish(report, &artifacts, worker.dir)
}

/// The user's repository as preflight found it.
struct Source {
    source: PathBuf,
    repo: Repo,
    /// Its git dir and common dir (absolute).
    admin: PathBuf,
    common: PathBuf,
    branch: Option<String>,
    base: String,
    scope: FrozenScope,
}

/// Preflight: the repository's top, not a task's own, not nested, on a
/// branch when promoting; the base and the frozen scope.
fn preflight(runner: &GitRunner, opts: &TaskOptions) -> Result<Source, PreflightError> {
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
    Ok(Source {
        source,
        repo,
        admin,
        common,
        branch,
        base,
        scope,
    })
}

/// Freeze: the artifact folder (new, private, outside the repository) and,
/// under `--promote`, a checkout that matches `HEAD`. Returns the folder.
fn freeze(opts: &TaskOptions, src: &Source) -> Result<PathBuf, PreflightError> {
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
    if artifacts.starts_with(&src.source) {
        let _ = fs::remove_dir(&artifacts);
        return Err(PreflightError::Artifacts {
            path: artifacts.display().to_string(),
            why: format!("inside the repository {}", src.source.display()),
        });
    }
    // Only a promotion needs the checkout to match HEAD (the task itself
    // starts from HEAD in a repository of its own); untracked files are
    // judged at promotion, and only those it would overwrite.
    if opts.promote
        && let Some(why) = clean_check(&src.repo, &artifacts)?
    {
        let _ = fs::remove_dir_all(&artifacts);
        return Err(PreflightError::Dirty {
            path: src.source.display().to_string(),
            detail: why,
        });
    }
    Ok(artifacts)
}

/// The worker's own repository, home and sandbox.
struct Worker {
    dir: PathBuf,
    home: PathBuf,
    identity: Option<taskrepo::Identity>,
    /// Taken by the run ([`start`]); the snapshot builds its own.
    sandbox: Option<bh_sandbox::Sandbox>,
    sandbox_report: Option<bh_sandbox::Report>,
    /// The worker's environment (bh's variables set, the caller's `GIT_*`,
    /// `HOME` and `TMPDIR` replaced).
    env: Vec<(OsString, OsString)>,
}

impl Worker {
    /// What the sandbox hides under /tmp, named when the worker fails.
    fn tmp_hints(&self, opts: &TaskOptions, src: &Source) -> Vec<String> {
        crate::hints::hidden_by_the_sandbox(opts, &[&src.source, &self.dir, &self.home])
    }
}

/// The sandbox of the worker (and of the snapshot that reads its work):
/// its repository and home writable, the user's git dirs and protected
/// paths read-only, the source visible, `/tmp` private.
fn sandbox_of(
    opts: &TaskOptions,
    src: &Source,
    dir: &Path,
    home: &Path,
) -> Result<Option<bh_sandbox::Sandbox>, PreflightError> {
    let Some(s) = &opts.sandbox else {
        return Ok(None);
    };
    let mut read_only = vec![
        src.admin.clone(),
        src.common.clone(),
        src.source.join(".git"),
    ];
    read_only.extend(s.protected.iter().cloned());
    let policy = bh_sandbox::Policy {
        writable: [dir.to_path_buf(), home.to_path_buf()]
            .into_iter()
            .chain(s.allow_write.iter().cloned())
            .collect(),
        read_only,
        visible: std::iter::once(src.source.clone())
            .chain(s.allow_read.iter().cloned())
            .collect(),
        private_tmp: true,
        network: s.network,
        hidden: s.hidden.clone(),
        allow_sockets: s.allow_sockets.clone(),
        deny_unix_sockets: s.deny_unix_sockets,
        overlays: Vec::new(),
    };
    Ok(Some(bh_sandbox::Sandbox::new(&policy, dir)?))
}

/// The worker's repository (the user's objects as an alternate), its home
/// with the user's identity, its sandbox, and `task.json`.
fn prepare(
    runner: &GitRunner,
    opts: &TaskOptions,
    src: &Source,
    artifacts: &Path,
) -> Result<Worker, PreflightError> {
    let id = &opts.id;
    let env_record: Vec<serde_json::Value> = opts
        .env
        .iter()
        .map(|(k, v)| serde_json::json!({"name": k.to_string_lossy(), "sha256": sha256_hex(v.as_bytes())}))
        .collect();
    let dir = artifacts.join("worktree");
    let home = artifacts.join("home");
    // Commits the harness makes for the user are theirs: their identity,
    // read from their configuration through the hardened runner.
    let identity = taskrepo::user_identity(&src.repo);
    taskrepo::private_home(&home, identity.as_ref())?;
    taskrepo::create(runner, &dir, &src.common.join("objects"), &src.base)?;
    let nonce = sha256_hex(format!("{id}{:?}", std::time::SystemTime::now()).as_bytes());
    fs::write(dir.join(".git/bh-task-nonce"), &nonce).map_err(PreflightError::Fs)?;
    let sandbox = match sandbox_of(opts, src, &dir, &home) {
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
            "source": src.source,
            "branch": src.branch,
            "base": src.base,
            "base_tree": src.repo.tree_of(&src.base)?,
            "harness_sha256": opts.harness_digest,
            "argv": opts.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "env": env_record,
            "scope": src.scope.shown,
            "promote": opts.promote,
            "commit": opts.commit,
            "timeout_ms": opts.timeout.map(|t| t.as_millis() as u64),
            "sandbox": sandbox_report,
            "no_sandbox": opts.sandbox.is_none(),
        }),
    )?;
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
    Ok(Worker {
        dir,
        home,
        identity,
        sandbox,
        sandbox_report,
        env,
    })
}

/// Runs the worker (sandboxed, or contained without a sandbox), its output
/// logged in the artifact folder.
fn start(
    opts: &TaskOptions,
    worker: &mut Worker,
    artifacts: &Path,
    cancel: &AtomicBool,
) -> (RunSpec, Result<RunOutcome, RunError>) {
    let spec = RunSpec {
        argv: opts.argv.clone(),
        cwd: worker.dir.clone(),
        env: worker.env.clone(),
        timeout: opts.timeout,
        stdout_log: artifacts.join("stdout.log"),
        stderr_log: artifacts.join("stderr.log"),
        keep_head: 256 * 1024,
        keep_tail: 256 * 1024,
        grace: opts.grace,
        echo: opts.echo.clone(),
    };
    let ran = match worker.sandbox.take() {
        Some(sb) => run_sandboxed(&spec, sb, cancel),
        None => run_contained(&spec, cancel),
    };
    (spec, ran)
}

/// The report as the run begins: succeeded until a phase says otherwise.
fn new_report(opts: &TaskOptions, src: &Source, artifacts: &Path, worker: &Worker) -> TaskReport {
    TaskReport {
        id: opts.id.clone(),
        outcome: Outcome::Succeeded,
        reasons: Vec::new(),
        violations: Vec::new(),
        source: src.source.clone(),
        branch: src.branch.clone(),
        base: src.base.clone(),
        candidate: None,
        kept_ref: None,
        worktree: None,
        artifacts: artifacts.to_path_buf(),
        ending: None,
        work: None,
        sandbox: worker.sandbox_report.clone(),
        no_sandbox: opts.sandbox.is_none(),
        notes: Vec::new(),
    }
}

/// The ref the worker's work is kept under.
fn kept_ref(opts: &TaskOptions) -> String {
    format!("{TASK_REF_PREFIX}{}", opts.id)
}

/// Keeps the work: the worker's repository snapshotted (in its sandbox),
/// its objects fetched with git's checks under the kept ref, and the patch
/// written. The snapshot, or why the work could not be read.
fn keep_work(
    opts: &TaskOptions,
    src: &Source,
    worker: &Worker,
    isolated: &Repo,
    artifacts: &Path,
    report: &mut TaskReport,
) -> Result<Result<taskrepo::Snapshot, String>, PreflightError> {
    let snap = sandbox_of(opts, src, &worker.dir, &worker.home).map(|sb| {
        taskrepo::snapshot(
            &worker.dir,
            sb,
            &worker.env,
            &worker.home,
            worker
                .identity
                .as_ref()
                .unwrap_or(&taskrepo::Identity::harness()),
            &work_message(opts),
        )
        .map_err(|why| format!("cannot read the worker's repository: {why}"))
    })?;
    let kept_ref = kept_ref(opts);
    let snap = snap.and_then(|snap| {
        if snap.work != src.base {
            taskrepo::fetch(isolated, &worker.dir, &kept_ref)
                .map_err(|why| format!("the worker's objects failed git's checks: {why}"))?;
        }
        Ok(snap)
    });
    if let Ok(s) = &snap
        && s.work != src.base
    {
        report.kept_ref = Some(kept_ref.clone());
        report.work = Some(s.work.clone());
        patch_into(
            isolated,
            opts,
            &src.base,
            &s.work,
            artifacts,
            "work.patch",
            report,
        )?;
    }
    Ok(snap)
}

/// Writes the diff `base..work` as `name` in the artifact folder (cut at
/// the patch limit), saying so in the report's notes when it was cut.
fn patch_into(
    isolated: &Repo,
    opts: &TaskOptions,
    base: &str,
    work: &str,
    artifacts: &Path,
    name: &str,
    report: &mut TaskReport,
) -> Result<(), PreflightError> {
    if write_patch(
        isolated,
        base,
        work,
        &artifacts.join(name),
        opts.patch_limit,
    )? {
        report.notes.push(patch_cut_note(
            name,
            opts.patch_limit,
            base,
            &kept_ref(opts),
        ));
    }
    Ok(())
}

/// What [`judge_ending`] decided.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Go on and judge the work.
    Judge,
    /// Interrupted: stop here, the worker's repository kept.
    KeepWorktree,
}

/// The outcome the worker's ending gives (interrupted, timed out, failed
/// with the tail of its stderr, killed).
fn judge_ending(
    run: &RunOutcome,
    spec: &RunSpec,
    opts: &TaskOptions,
    src: &Source,
    worker: &Worker,
    report: &mut TaskReport,
) -> Verdict {
    match run.ending {
        Ending::Interrupted => {
            report.outcome = Outcome::Interrupted;
            report.reasons.push(
                "bh was asked to stop (Ctrl-C, SIGTERM or SIGHUP); the worker's repository is kept"
                    .into(),
            );
            return Verdict::KeepWorktree;
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
            report.reasons.extend(worker.tmp_hints(opts, src));
        }
        Ending::Signaled { signal } => {
            report.outcome = Outcome::Failed;
            report
                .reasons
                .push(format!("the worker was killed by signal {signal}"));
        }
    }
    Verdict::Judge
}

/// Judges the work of a worker that succeeded: the candidate (its `HEAD`,
/// or its whole work with `--commit`) validated against the frozen scope —
/// rejected with the reasons and a patch, or promoted on request.
fn judge_work(
    runner: &GitRunner,
    opts: &TaskOptions,
    src: &Source,
    isolated: &Repo,
    artifacts: &Path,
    snap: Result<taskrepo::Snapshot, String>,
    report: &mut TaskReport,
) -> Result<(), PreflightError> {
    let snap = match snap {
        Err(why) => {
            if report.outcome == Outcome::Succeeded {
                report.outcome = Outcome::Rejected;
            }
            report.reasons.push(why);
            return Ok(());
        }
        Ok(snap) if report.outcome == Outcome::Succeeded => snap,
        Ok(_) => return Ok(()),
    };
    let base = &src.base;
    let kept_ref = kept_ref(opts);
    let candidate = if opts.commit {
        snap.work.clone()
    } else {
        snap.head.clone()
    };
    report.candidate = Some(candidate.clone());
    let mut violations = Vec::new();
    if candidate != *base {
        violations = validate_candidate(isolated, &src.scope, &candidate)?;
    }
    if !opts.commit && snap.work != snap.head {
        violations.extend(validate_uncommitted(
            isolated, &src.scope, &snap.head, &snap.work,
        )?);
    }
    if !violations.is_empty() {
        report.outcome = Outcome::Rejected;
        report
            .reasons
            .extend(rejection_reasons(&violations, &kept_ref));
        report.violations = violations;
        patch_into(
            isolated,
            opts,
            base,
            &snap.work,
            artifacts,
            "rejected.patch",
            report,
        )?;
    } else if opts.promote && candidate != *base {
        promote(
            runner, opts, &src.repo, &src.admin, artifacts, report, &candidate,
        )?;
    }
    Ok(())
}
