//! `bh task run`: the worker in a repository of its own, sandboxed, its
//! work validated against the frozen scope and promoted when all holds.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bh_task::ScopeSpec;
use bh_task::contain::Echo;
use bh_task::run::{Outcome, SandboxOptions, TaskOptions, TaskReport, new_task_id, run_task};
use serde_json::json;

use super::live::LiveOutput;
use super::{outcome_word, print_report};
use crate::command_error::preflight_error;
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::sandbox_policy::{git_config_files, hidden_paths, protected_paths};
use crate::ui::errln;
use crate::units::{parse_duration, parse_size};

/// Variables a worker inherits besides the ones named with `--env`.
const WORKER_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL", "TZ",
];

// The variant's doc comment in `TaskCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
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
    /// Let the worker make no Unix socket at all (`socket(AF_UNIX)` fails
    /// with EACCES; socketpair works): no host server is reached, even one
    /// that binds after the worker started, but its own Unix sockets fail too.
    #[arg(long, conflicts_with = "allow_unix_socket")]
    no_unix_sockets: bool,
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

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
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
        no_unix_sockets,
        no_network,
        no_sandbox,
        quiet,
        command,
    } = args;
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
            deny_unix_sockets: no_unix_sockets,
        }),
        config_files: git_config_files(ctx),
        echo: (!quiet)
            .then(|| std::sync::Arc::new(LiveOutput::new(ctx.json)) as std::sync::Arc<dyn Echo>),
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
