//! `bh task …`: run a command in a disposable worktree with a frozen scope,
//! validate everything it touched, promote by fast-forward on request.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bh_task::run::{
    Outcome, PreflightError, SandboxOptions, TaskOptions, TaskReport, new_task_id, run_task,
};
use bh_task::{ScopeSpec, TaskError};
use clap::Subcommand;
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::units::parse_duration;

/// Variables a worker inherits besides the ones named with `--env`.
const WORKER_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL", "TZ",
];

#[derive(Subcommand, Debug)]
pub enum TaskCmd {
    /// Run COMMAND in a disposable worktree of the repository and validate
    /// everything it touched against the granted scope.
    Run {
        /// A directory or file tracked at the base commit the worker may change
        /// (repository-relative, literal; at least one).
        #[arg(long = "module", value_name = "PATH", required = true)]
        modules: Vec<PathBuf>,
        /// One exact existing tracked file the worker may change.
        #[arg(long = "allow-path", value_name = "PATH")]
        allow_paths: Vec<PathBuf>,
        /// One exact path that must not exist at the base, which the worker may create.
        #[arg(long = "allow-new-path", value_name = "PATH")]
        allow_new_paths: Vec<PathBuf>,
        /// Fast-forward the source branch to the result when everything holds.
        #[arg(long)]
        promote: bool,
        /// The task's artifact folder (default: a new folder under the state dir).
        #[arg(long, value_name = "DIR")]
        artifacts: Option<PathBuf>,
        /// Stop the worker after this long (e.g. 90s, 15m).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
        /// Pass this environment variable to the worker (repeatable).
        #[arg(long = "env", value_name = "NAME")]
        env: Vec<String>,
        /// The source repository (default: the current directory).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// Commit the worker's uncommitted in-scope work as one commit
        /// naming the task, then validate (and promote) it as usual.
        #[arg(long)]
        commit: bool,
        /// Let the worker write this folder too, e.g. a build cache (repeatable).
        #[arg(long = "allow-write", value_name = "DIR")]
        allow_write: Vec<PathBuf>,
        /// Cut the worker's network (a network namespace of its own).
        #[arg(long)]
        no_network: bool,
        /// Run the worker without the kernel sandbox (printed and recorded).
        #[arg(long)]
        no_sandbox: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
    /// Show a task's state, reasons and paths.
    Show {
        /// The task's artifact folder.
        dir: PathBuf,
    },
    /// Remove worktrees that task sessions kept (interrupted or untrusted).
    Gc {
        /// The repository (default: the current directory).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
    },
}

static CANCEL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    CANCEL.store(true, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM cancel the running task instead of killing `bh`, so the
/// worker's tree is cleaned up and the state recorded.
#[allow(unsafe_code)]
fn catch_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        let _ = unsafe { signal(sig, SigHandler::Handler(on_signal)) };
    }
}

fn preflight_error(err: PreflightError) -> CliError {
    let kind = match &err {
        PreflightError::Scope(TaskError::BadPath { .. } | TaskError::NoModule) => ErrorKind::Usage,
        PreflightError::Scope(
            TaskError::ModuleNotTracked { .. }
            | TaskError::AllowPathNotTracked { .. }
            | TaskError::AllowNewPathExists { .. },
        ) => ErrorKind::NotFound,
        PreflightError::NotTopLevel { .. }
        | PreflightError::NotARepository { .. }
        | PreflightError::Dirty { .. }
        | PreflightError::Detached { .. }
        | PreflightError::Nested { .. }
        | PreflightError::Artifacts { .. }
        | PreflightError::Sandbox(_) => ErrorKind::Refused,
        _ => ErrorKind::Internal,
    };
    CliError::new(kind, err.to_string())
}

fn path_bytes(p: &std::path::Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    b.strip_suffix(b"/").unwrap_or(b).to_vec()
}

fn outcome_error(report: &TaskReport) -> Option<CliError> {
    let kind = match report.outcome {
        Outcome::Succeeded | Outcome::Promoted => return None,
        Outcome::Rejected => ErrorKind::Invalid,
        Outcome::Failed => ErrorKind::WorkerFailed,
        Outcome::TimedOut => ErrorKind::Limit,
        Outcome::Interrupted => ErrorKind::Interrupted,
        Outcome::Untrusted => ErrorKind::Tampered,
    };
    let mut message = format!("task {} {}", report.id, outcome_word(report.outcome));
    if !report.reasons.is_empty() {
        message.push_str(&format!(": {}", report.reasons.join("; ")));
    }
    Some(CliError::new(kind, message))
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => "succeeded",
        Outcome::Promoted => "promoted",
        Outcome::Rejected => "rejected",
        Outcome::Failed => "failed",
        Outcome::TimedOut => "timed out",
        Outcome::Interrupted => "was interrupted",
        Outcome::Untrusted => "is untrusted",
    }
}

/// `~/.gitconfig`, `$XDG_CONFIG_HOME` (or `~/.config`) and the state folder:
/// read-only to the worker even where a writable folder contains them.
/// What a sandboxed worker or bash must not write even inside its writable
/// roots: the state folder, `~/.gitconfig`, the XDG config folder.
pub(crate) fn protected_paths(ctx: &Ctx) -> Vec<PathBuf> {
    let mut out = vec![ctx.state_dir.clone()];
    if let Some(home) = &ctx.home {
        out.push(home.join(".gitconfig"));
    }
    out.extend(xdg_config(ctx));
    out
}

fn xdg_config(ctx: &Ctx) -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| ctx.home.as_ref().map(|h| h.join(".config")))
}

/// The Git configuration and attributes files outside the repository that
/// the second line compares before and after the worker.
fn git_config_files(ctx: &Ctx) -> Vec<PathBuf> {
    let mut out = vec![
        PathBuf::from("/etc/gitconfig"),
        PathBuf::from("/etc/gitattributes"),
    ];
    if let Some(home) = &ctx.home {
        out.push(home.join(".gitconfig"));
    }
    if let Some(xdg) = xdg_config(ctx) {
        out.push(xdg.join("git/config"));
        out.push(xdg.join("git/attributes"));
    }
    out
}

fn print_report(report: &TaskReport) {
    println!("task {}: {}", report.id, outcome_word(report.outcome));
    match &report.sandbox {
        Some(sb) => println!(
            "  sandbox:   Landlock ABI {}, network {}{}",
            sb.landlock_abi,
            if sb.network { "on" } else { "off" },
            if sb.not_enforced.is_empty() {
                String::new()
            } else {
                format!(" (not enforced: {})", sb.not_enforced.join("; "))
            }
        ),
        None if report.no_sandbox => println!("  sandbox:   OFF (--no-sandbox)"),
        None => {}
    }
    println!(
        "  source:    {} ({})",
        report.source.display(),
        report.branch.as_deref().unwrap_or("detached")
    );
    println!("  base:      {}", report.base);
    if let Some(c) = &report.candidate {
        println!("  candidate: {c}");
    }
    for r in &report.reasons {
        println!("  reason:    {r}");
    }
    for v in &report.violations {
        let at = v
            .commit
            .as_deref()
            .map(|c| format!(" in {}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        println!(
            "  violation: {}{}: {}",
            v.path.as_deref().unwrap_or("-"),
            at,
            v.reason
        );
    }
    if let Some(r) = &report.kept_ref {
        println!("  kept:      {r}");
    }
    if let Some(w) = &report.work {
        println!("  work:      {w}");
    }
    if let Some(w) = &report.worktree {
        println!("  worktree:  {} (kept)", w.display());
    }
    println!("  artifacts: {}", report.artifacts.display());
}

pub fn run(cmd: TaskCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        TaskCmd::Run {
            modules,
            allow_paths,
            allow_new_paths,
            promote,
            artifacts,
            timeout,
            env,
            repo,
            commit,
            allow_write,
            no_network,
            no_sandbox,
            command,
        } => {
            catch_signals();
            let tasks_root = ctx.state_dir.join("tasks");
            let id = new_task_id();
            let artifacts = match artifacts {
                Some(a) => ctx.cwd.join(a),
                None => tasks_root.join(&id),
            };
            let mut worker_env: Vec<(OsString, OsString)> = Vec::new();
            for name in WORKER_ENV
                .iter()
                .copied()
                .chain(env.iter().map(String::as_str))
            {
                if let Some(v) = std::env::var_os(name)
                    && !worker_env.iter().any(|(k, _)| k == name)
                {
                    worker_env.push((name.into(), v));
                }
            }
            let harness_digest = std::env::current_exe()
                .ok()
                .and_then(|p| std::fs::read(p).ok())
                .map(|b| {
                    use sha2::Digest;
                    hex::encode(sha2::Sha256::digest(&b))
                })
                .unwrap_or_default();
            let opts = TaskOptions {
                source: repo
                    .map(|r| ctx.cwd.join(r))
                    .unwrap_or_else(|| ctx.cwd.clone()),
                scope: ScopeSpec {
                    modules: modules.iter().map(|p| path_bytes(p)).collect(),
                    allow_paths: allow_paths.iter().map(|p| path_bytes(p)).collect(),
                    allow_new_paths: allow_new_paths.iter().map(|p| path_bytes(p)).collect(),
                },
                promote,
                artifacts,
                lock_dir: ctx.state_dir.join("locks"),
                timeout,
                argv: command,
                env: worker_env,
                id,
                harness_digest,
                inside_task_session: std::env::var_os("BH_TASK_SESSION").is_some(),
                tasks_root,
                grace: Duration::from_secs(2),
                commit,
                sandbox: (!no_sandbox).then(|| SandboxOptions {
                    allow_write: allow_write.iter().map(|d| ctx.cwd.join(d)).collect(),
                    network: !no_network,
                    protected: protected_paths(ctx),
                }),
                config_files: git_config_files(ctx),
            };
            if no_sandbox {
                eprintln!(
                    "bh: warning: --no-sandbox: the worker runs with your full authority (recorded in the task's artifacts)"
                );
            }
            let report = run_task(&ctx.git(), &opts, &CANCEL).map_err(preflight_error)?;
            let failure = outcome_error(&report);
            if ctx.json {
                let doc = serde_json::to_value(&report).map_err(CliError::internal)?;
                return match failure {
                    None => print_json(&doc),
                    Some(err) => Err(err.with_details(json!({ "task": doc }))),
                };
            }
            print_report(&report);
            failure.map_or(Ok(()), Err)
        }
        TaskCmd::Show { dir } => {
            let path = ctx.cwd.join(&dir).join("state.json");
            let text = std::fs::read_to_string(&path).map_err(|e| {
                CliError::new(
                    ErrorKind::NotFound,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            let report: TaskReport = serde_json::from_str(&text).map_err(|e| {
                CliError::new(
                    ErrorKind::Invalid,
                    format!("{} is not a task state: {e}", path.display()),
                )
            })?;
            if ctx.json {
                return print_json(&serde_json::to_value(&report).map_err(CliError::internal)?);
            }
            print_report(&report);
            Ok(())
        }
        TaskCmd::Gc { repo } => {
            let dir = repo
                .map(|r| ctx.cwd.join(r))
                .unwrap_or_else(|| ctx.cwd.clone());
            let git = ctx.git().repo(&dir, bh_git::Scope::User);
            let mut removed = Vec::new();
            for wt in git.worktrees().map_err(CliError::internal)? {
                if wt
                    .locked
                    .as_deref()
                    .is_some_and(|r| r.starts_with("bh task "))
                {
                    let _ = git.worktree_unlock(&wt.path);
                    git.worktree_remove(&wt.path, true)
                        .map_err(CliError::internal)?;
                    removed.push(wt.path);
                }
            }
            if ctx.json {
                return print_json(&json!({ "removed": removed }));
            }
            for p in &removed {
                println!("removed {}", p.display());
            }
            println!("{} task worktree(s) removed", removed.len());
            Ok(())
        }
    }
}
