//! `bh task …`: run a command in a disposable worktree with a frozen scope,
//! validate everything it touched, promote by fast-forward on request.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bh_task::ScopeSpec;
use bh_task::contain::Echo;
use bh_task::list::{list_tasks, read_task};
use bh_task::run::{Outcome, SandboxOptions, TaskOptions, TaskReport, new_task_id, run_task};
use clap::Subcommand;
use serde_json::json;

use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::sandbox_policy::{git_config_files, hidden_paths, protected_paths};
use crate::units::{parse_duration, parse_size};

mod live;
use crate::command_error::preflight_error;
use crate::ui::{errln, outln};
use live::LiveOutput;

/// Variables a worker inherits besides the ones named with `--env`.
const WORKER_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL", "TZ",
];

// Parsed once per process: the size of `Run` does not matter.
#[allow(clippy::large_enum_variant)]
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
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
        /// Commit the worker's uncommitted in-scope work as one commit
        /// naming the task, then validate (and promote) it as usual.
        #[arg(long)]
        commit: bool,
        /// The message of that commit (default: one naming the task and its
        /// command). It is by you: your user.name and user.email.
        #[arg(long, short = 'm', value_name = "TEXT", requires = "commit")]
        message: Option<String>,
        /// The most work.patch and rejected.patch may hold; a longer diff is
        /// cut and the outcome says so (the work itself is whole under the
        /// task's ref).
        #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_size)]
        patch_limit: u64,
        /// Let the worker write this folder too, e.g. a build cache (repeatable).
        #[arg(long = "allow-write", value_name = "DIR")]
        allow_write: Vec<PathBuf>,
        /// Let the worker see this folder under /tmp, read-only (the sandbox
        /// replaces /tmp with a private one; everything else is readable
        /// already) (repeatable).
        #[arg(long = "allow-read", value_name = "DIR")]
        allow_read: Vec<PathBuf>,
        /// Hide this file or folder from the worker too, beyond the built-in
        /// list of credential stores (repeatable).
        #[arg(long = "deny-read", value_name = "PATH")]
        deny_read: Vec<PathBuf>,
        /// Let the worker connect to this host Unix socket (repeatable): by
        /// default every socket the host's servers have bound is covered.
        #[arg(long = "allow-unix-socket", value_name = "PATH")]
        allow_unix_socket: Vec<PathBuf>,
        /// Cut the worker's network (a network namespace of its own).
        #[arg(long)]
        no_network: bool,
        /// Run the worker without the kernel sandbox (printed and recorded).
        #[arg(long)]
        no_sandbox: bool,
        /// Do not show the worker's output while it runs (it is still kept
        /// in the task's stdout.log and stderr.log). Without it, the
        /// worker's stdout goes to stdout and its stderr to stderr, control
        /// characters escaped; with --json both go to stderr.
        #[arg(long, short = 'q')]
        quiet: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
    /// The tasks under the state folder, oldest first: id, outcome, branch,
    /// base and command.
    #[command(visible_alias = "ls")]
    List,
    /// Show a task's outcome, reasons, violations and paths.
    Show {
        /// The task id (or a unique prefix of at least 4 hex digits), or its
        /// artifact folder (a path: contains `/`, or an existing directory).
        task: String,
    },
    /// Remove worktrees that task sessions kept (interrupted or untrusted).
    Gc {
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
}

static CANCEL: AtomicBool = AtomicBool::new(false);

/// Ctrl-C, SIGTERM and SIGHUP cancel the running task instead of killing
/// `bh`, so the worker's tree is cleaned up and the state recorded
/// (`crate::signals`; installed before this returns).
fn catch_signals() {
    crate::signals::on_first_stop(|_| CANCEL.store(true, Ordering::SeqCst));
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
    // The reasons quote the worker's stderr: escaped like its live echo.
    let mut message = format!("task {} {}", report.id, outcome_word(report.outcome));
    if !report.reasons.is_empty() {
        message.push_str(&format!(
            ": {}",
            display::escape(&report.reasons.join("; "))
        ));
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

/// The report for people. Every text that may carry the worker's bytes
/// (reasons quote its stderr, paths are its file names) goes through the
/// same escaping as the live echo.
fn print_report(report: &TaskReport) -> std::io::Result<()> {
    let esc = |t: &str| display::escape(t).into_owned();
    let path = |p: &std::path::Path| esc(&p.display().to_string());
    outln!("task {}: {}", esc(&report.id), outcome_word(report.outcome))?;
    match &report.sandbox {
        Some(sb) => outln!(
            "  sandbox:   Landlock ABI {}, network {}, {} host Unix socket(s) covered{}{}",
            sb.landlock_abi,
            if sb.network { "on" } else { "off" },
            sb.sockets_covered,
            if sb.sockets_allowed.is_empty() {
                String::new()
            } else {
                let allowed: Vec<String> = sb.sockets_allowed.iter().map(|p| path(p)).collect();
                format!(" (allowed: {})", allowed.join(", "))
            },
            if sb.not_enforced.is_empty() {
                String::new()
            } else {
                format!(" (not enforced: {})", esc(&sb.not_enforced.join("; ")))
            }
        )?,
        None if report.no_sandbox => outln!("  sandbox:   OFF (--no-sandbox)")?,
        None => {}
    }
    outln!(
        "  source:    {} ({})",
        path(&report.source),
        esc(report.branch.as_deref().unwrap_or("detached"))
    )?;
    outln!("  base:      {}", esc(&report.base))?;
    if let Some(c) = &report.candidate {
        outln!("  candidate: {}", esc(c))?;
    }
    for r in &report.reasons {
        outln!("  reason:    {}", esc(r))?;
    }
    for v in &report.violations {
        let at = v
            .commit
            .as_deref()
            .map(|c| format!(" in {}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        outln!(
            "  violation: {}{}: {}",
            esc(v.path.as_deref().unwrap_or("-")),
            esc(&at),
            esc(&v.reason)
        )?;
    }
    if let Some(r) = &report.kept_ref {
        outln!("  kept:      {}", esc(r))?;
    }
    if let Some(w) = &report.work {
        outln!("  work:      {}", esc(w))?;
    }
    if let Some(w) = &report.worktree {
        outln!("  worktree:  {} (kept)", path(w))?;
    }
    for n in &report.notes {
        outln!("  note:      {}", esc(n))?;
    }
    outln!("  artifacts: {}", path(&report.artifacts))?;
    Ok(())
}

#[allow(
    clippy::too_many_lines,
    reason = "a phase orchestrator not yet split into named steps (issue 26)"
)]
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
            message,
            patch_limit,
            allow_write,
            allow_read,
            deny_read,
            allow_unix_socket,
            no_network,
            no_sandbox,
            quiet,
            command,
        } => {
            catch_signals();
            let allow_sockets = crate::sandbox_policy::allowed_sockets(ctx, &allow_unix_socket)?;
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
            // Streamed: the binary can be 100 MB (a debug build).
            let harness_digest = std::env::current_exe()
                .ok()
                .and_then(|p| fs_err::File::open(p).ok())
                .and_then(|mut f| {
                    use sha2::Digest;
                    let mut hasher = sha2::Sha256::new();
                    std::io::copy(&mut f, &mut hasher).ok()?;
                    Some(hex::encode(hasher.finalize()))
                })
                .unwrap_or_default();
            let opts = TaskOptions {
                source: ctx.dir_arg(repo.as_deref(), "--repo")?,
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
                message,
                patch_limit,
                sandbox: (!no_sandbox).then(|| SandboxOptions {
                    allow_write: allow_write.iter().map(|d| ctx.cwd.join(d)).collect(),
                    allow_read: allow_read.iter().map(|d| ctx.cwd.join(d)).collect(),
                    network: !no_network,
                    protected: protected_paths(ctx),
                    hidden: hidden_paths(ctx)
                        .into_iter()
                        .chain(deny_read.iter().map(|d| ctx.cwd.join(d)))
                        .collect(),
                    allow_sockets,
                }),
                config_files: git_config_files(ctx),
                echo: (!quiet).then(|| {
                    std::sync::Arc::new(LiveOutput::new(ctx.json)) as std::sync::Arc<dyn Echo>
                }),
            };
            if no_sandbox {
                errln!(
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
            print_report(&report)?;
            failure.map_or(Ok(()), Err)
        }
        TaskCmd::List => list(ctx),
        TaskCmd::Show { task } => show(ctx, &task),
        TaskCmd::Gc { repo } => {
            let dir = ctx.dir_arg(repo.as_deref(), "--repo")?;
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
                outln!("removed {}", p.display())?;
            }
            outln!("{} task worktree(s) removed", removed.len())?;
            Ok(())
        }
    }
}

/// `bh task list`.
fn list(ctx: &Ctx) -> Result<(), CliError> {
    let root = ctx.state_dir.join("tasks");
    let records = list_tasks(&root).map_err(|e| {
        CliError::internal(format!("cannot list the tasks in {}: {e}", root.display()))
    })?;
    if ctx.json {
        let items: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "outcome": r.outcome(),
                    "branch": r.task.as_ref().and_then(|t| t["branch"].as_str()),
                    "base": r.task.as_ref().and_then(|t| t["base"].as_str()),
                    "candidate": r.report.as_ref().and_then(|x| x.candidate.clone()),
                    "argv": r.argv(),
                    "dir": r.dir,
                    "problems": r.problems,
                })
            })
            .collect();
        return print_json(&json!({ "tasks": items }));
    }
    if records.is_empty() {
        outln!("no tasks under {}", root.display())?;
        return Ok(());
    }
    let width = display::stdout_width();
    for r in &records {
        let outcome = r.outcome().map_or("unfinished", outcome_word);
        let base = r
            .task
            .as_ref()
            .and_then(|t| t["base"].as_str())
            .map_or("-", |b| &b[..b.len().min(12)]);
        let branch = r
            .task
            .as_ref()
            .and_then(|t| t["branch"].as_str())
            .map_or("detached", |b| b.strip_prefix("refs/heads/").unwrap_or(b));
        let line = format!(
            "{}  {:<16}  {}  {}  {}",
            r.id,
            outcome,
            display::escape(branch),
            base,
            display::escape(&r.argv().join(" "))
        );
        match width {
            Some(w) => outln!("{}", display::fit(&line, w))?,
            None => outln!("{line}")?,
        }
    }
    Ok(())
}

/// `bh task show ID|DIR`.
fn show(ctx: &Ctx, task: &str) -> Result<(), CliError> {
    let as_path = ctx.abs(std::path::Path::new(task));
    let record = if task.contains('/') || as_path.is_dir() {
        let path = as_path.join("state.json");
        if !path.is_file() {
            return Err(CliError::new(
                ErrorKind::NotFound,
                format!("cannot read {}: no such task state", path.display()),
            ));
        }
        read_task(task, &as_path)
    } else {
        let root = ctx.state_dir.join("tasks");
        let records = list_tasks(&root).map_err(|e| {
            CliError::internal(format!("cannot list the tasks in {}: {e}", root.display()))
        })?;
        let id = crate::ids::resolve(
            bh_protocol::prefix::Named::Task,
            "bh task list",
            task,
            records.iter().map(|r| r.id.as_str()),
        )?
        .to_owned();
        records
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| CliError::internal(format!("task {id} vanished")))?
    };
    let Some(report) = &record.report else {
        let why = record.problems.first().cloned();
        if let Some(why) = why {
            return Err(CliError::new(
                ErrorKind::Invalid,
                display::escape(&why).into_owned(),
            ));
        }
        if ctx.json {
            return print_json(&json!({
                "id": record.id,
                "outcome": null,
                "task": record.task,
                "artifacts": record.dir,
            }));
        }
        outln!(
            "task {}: no outcome yet (running, or stopped before it wrote state.json)",
            display::escape(&record.id)
        )?;
        outln!("  command:   {}", display::escape(&record.argv().join(" ")))?;
        outln!(
            "  artifacts: {}",
            display::escape(&record.dir.display().to_string())
        )?;
        return Ok(());
    };
    if ctx.json {
        return print_json(&serde_json::to_value(report).map_err(CliError::internal)?);
    }
    print_report(report)?;
    Ok(())
}
