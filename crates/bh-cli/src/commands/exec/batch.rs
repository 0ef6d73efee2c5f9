//! `bh exec batch DIR|MANIFEST`: every plan of a manifest, `--jobs N` at a
//! time, each in its own `bh exec run --plans … --index I --yes` process
//! (the same entry point an engine calls, so a local batch and a cluster
//! behave alike). Resume is the entry point's: a plan whose ref already
//! holds its result is done without running; a transient failure (75, or
//! a worker killed by a signal) is retried up to `--attempts` times. Also
//! `--failed-indices` (what to resubmit) and `--emit slurm|k8s` (recipes).
//!
//! SIGINT, SIGTERM or SIGHUP stop the batch as they stop one run: nothing
//! new starts, every running worker gets SIGTERM (it ends its run aborted
//! and writes a transient receipt), and the batch reports what settled and
//! exits 8. Running the batch again resumes it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bh_exec::{Manifest, Receipt, ReceiptState, emit};
use serde_json::json;

use crate::command_error::batch_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, exec_code, print_json};
use crate::ui::{out, outln};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Slurm,
    K8s,
}

#[derive(clap::Args, Debug)]
pub struct BatchArgs {
    /// A directory of plan files (sorted by file name) or a manifest file
    /// (one plan path a line, relative to it).
    #[arg(value_name = "DIR|MANIFEST")]
    pub plans: PathBuf,
    /// Plans run at once (Slurm's %P, Kubernetes' parallelism).
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Where receipts/<I>.json go (default: receipts/ in the plans
    /// directory, or beside the manifest file).
    #[arg(long, value_name = "DIR")]
    pub receipts: Option<PathBuf>,
    /// Push each result ref to this remote (name or URL), create-only.
    #[arg(long, value_name = "REMOTE")]
    pub publish: Option<String>,
    /// The provider's base URL (never stored in a plan).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Retries of a model call inside one attempt (default 3).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// Attempts per plan when it fails transiently (exit 75).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub attempts: u32,
    /// Accept plans sealed by another state directory once every re-check passes.
    #[arg(long)]
    pub trust_plan: bool,
    /// Run each plan in a detached worktree at its base instead of over the
    /// base tree with no checkout (needed for filter drivers).
    #[arg(long)]
    pub checkout: bool,
    /// Print the indices to resubmit (receipt exit 75, or no receipt),
    /// comma-separated, and run nothing.
    #[arg(long, conflicts_with = "emit")]
    pub failed_indices: bool,
    /// Print a recipe for an engine instead of running: an sbatch script
    /// (slurm) or an Indexed Job (k8s, JSON, which kubectl reads as YAML).
    #[arg(long, value_name = "ENGINE")]
    pub emit: Option<Engine>,
    /// k8s: the image (with bh and git) the pods run.
    #[arg(long, value_name = "IMAGE", default_value = "bh:latest")]
    pub image: String,
    /// k8s: the Job's name; slurm: the job name.
    #[arg(long, value_name = "NAME", default_value = "bh-exec-batch")]
    pub name: String,
    /// k8s: the Secret holding the provider keys (its keys become env vars).
    #[arg(long, value_name = "NAME", default_value = "bh-provider-keys")]
    pub secret: String,
    /// k8s: the PersistentVolumeClaim holding repository, sessions and plans.
    #[arg(long, value_name = "NAME", default_value = "bh-work")]
    pub claim: String,
    /// k8s: where the claim is mounted (default: the deepest folder holding
    /// the manifest, the receipts and every plan's repository and session).
    #[arg(long, value_name = "DIR")]
    pub mount: Option<PathBuf>,
}

/// How one index ended in this batch.
struct Ended {
    index: usize,
    exit: Option<i32>,
    tries: u32,
    receipt: Option<Receipt>,
}

pub fn run(ctx: &Ctx, args: &BatchArgs) -> Result<(), CliError> {
    let source = ctx.cwd.join(&args.plans);
    let manifest = Manifest::open(&source).map_err(batch_error)?;
    let receipts = super::index::receipts_dir(ctx, &manifest, args.receipts.as_deref());
    let count = manifest.plans.len();
    if args.failed_indices {
        let ids = bh_exec::retry_indices(&receipts, count);
        if ctx.json {
            return print_json(&json!({ "indices": ids }));
        }
        let list: Vec<String> = ids.iter().map(ToString::to_string).collect();
        outln!("{}", list.join(","))?;
        return Ok(());
    }
    if let Some(engine) = args.emit {
        return emit_recipe(ctx, args, engine, &manifest, &receipts);
    }
    let program = std::env::current_exe()
        .map_err(|e| CliError::internal(format!("cannot find the bh program: {e}")))?;
    let logs = receipts.join("logs");
    bh_fs::create_dir_all_mode(&logs, 0o755)
        .map_err(|e| CliError::internal(format!("cannot create {}: {e}", logs.display())))?;
    let queue: Mutex<VecDeque<(usize, u32)>> = Mutex::new((0..count).map(|i| (i, 1)).collect());
    let left = AtomicUsize::new(count);
    let ended: Mutex<Vec<Ended>> = Mutex::new(Vec::new());
    let progress = crate::progress::Progress::new(ctx.json);
    let show = |ended: usize, failed: usize| {
        progress.update(&format!(
            "{ended}/{count} plan(s) settled, {failed} failed, {} job(s)",
            args.jobs.max(1)
        ));
    };
    show(0, 0);
    let workers = Workers::default();
    {
        let workers = workers.clone();
        crate::signals::on_first_stop(move |_| workers.stop());
    }
    std::thread::scope(|s| {
        for _ in 0..args.jobs.clamp(1, count.max(1)) {
            s.spawn(|| {
                while left.load(Ordering::SeqCst) > 0 && !workers.stopping() {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    let Some((index, tries)) = next else {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    let cmd = worker(ctx, args, &program, &source, &receipts, &logs, index);
                    let exit = workers.run(cmd);
                    let transient = exit.is_none_or(|c| c == i32::from(exec_code::TEMPFAIL));
                    if transient && tries < args.attempts && !workers.stopping() {
                        std::thread::sleep(Duration::from_millis(200 * u64::from(tries)));
                        queue
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push_back((index, tries + 1));
                        continue;
                    }
                    let mut all = ended.lock().unwrap_or_else(PoisonError::into_inner);
                    all.push(Ended {
                        index,
                        exit,
                        tries,
                        receipt: bh_exec::read_receipt(&receipts, index),
                    });
                    left.fetch_sub(1, Ordering::SeqCst);
                    show(all.len(), all.iter().filter(|e| e.exit != Some(0)).count());
                }
            });
        }
    });
    drop(progress);
    let mut ended = ended.into_inner().unwrap_or_else(PoisonError::into_inner);
    ended.sort_by_key(|e| e.index);
    let stopped = workers.stopping().then(|| count - ended.len());
    summary(ctx, &manifest, &receipts, &ended, stopped)
}

/// The running workers, and whether the batch was asked to stop. Shared
/// with the signal thread, which sets `stopping` and sends SIGTERM to each
/// worker; a worker started after that is sent it at once.
#[derive(Clone, Default)]
struct Workers {
    stopping: Arc<AtomicBool>,
    running: Arc<Mutex<Vec<u32>>>,
}

impl Workers {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    fn stop(&self) {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        self.stopping.store(true, Ordering::SeqCst);
        for pid in running.iter() {
            terminate(*pid);
        }
    }

    /// Runs one worker to its end; its exit code (`None`: killed by a
    /// signal). Its pid is registered under the same lock `stop` takes, so
    /// none escapes the stop.
    fn run(&self, mut cmd: Command) -> Option<i32> {
        let mut child = {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            let Ok(child) = cmd.spawn() else {
                // Could not start: a permanent failure of this machine, not the plan.
                return Some(1);
            };
            running.push(child.id());
            if self.stopping() {
                terminate(child.id());
            }
            child
        };
        let status = child.wait();
        let pid = child.id();
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| *p != pid);
        match status {
            Ok(status) => status.code(),
            Err(_) => Some(1),
        }
    }
}

fn terminate(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // It may have ended already: nothing to do then.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

/// The command that runs index `index` in its own process.
fn worker(
    ctx: &Ctx,
    args: &BatchArgs,
    program: &Path,
    source: &Path,
    receipts: &Path,
    logs: &Path,
    index: usize,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg("--state-dir")
        .arg(&ctx.state_dir)
        .args(["exec", "run", "--yes", "--plans"])
        .arg(source)
        .arg("--index")
        .arg(index.to_string())
        .arg("--receipts")
        .arg(receipts)
        .current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(r) = &args.publish {
        cmd.arg("--publish").arg(r);
    }
    if let Some(u) = &args.base_url {
        cmd.arg("--base-url").arg(u);
    }
    if let Some(n) = args.max_retries {
        cmd.arg("--max-retries").arg(n.to_string());
    }
    if args.checkout {
        cmd.arg("--checkout");
    }
    if args.trust_plan {
        cmd.arg("--trust-plan");
    }
    let log = logs.join(format!("{index}.log"));
    match fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
    {
        Ok(f) => cmd.stderr(Stdio::from(f.into_parts().0)),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    // A batch killed with SIGKILL (no chance to forward a stop) still
    // stops its workers: each ends its run aborted, as under SIGTERM.
    bh_proc::terminate_with_parent(&mut cmd);
    cmd
}

fn summary(
    ctx: &Ctx,
    manifest: &Manifest,
    receipts: &Path,
    ended: &[Ended],
    stopped: Option<usize>,
) -> Result<(), CliError> {
    let state = |e: &Ended| match (&e.receipt, e.exit) {
        (Some(r), Some(c)) if i32::from(r.exit_code) == c => r.state,
        (_, None) => ReceiptState::Transient,
        (_, Some(0)) => ReceiptState::Done,
        (_, Some(c)) if c == i32::from(exec_code::TEMPFAIL) => ReceiptState::Transient,
        (_, Some(1)) => ReceiptState::Internal,
        _ => ReceiptState::Permanent,
    };
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for e in ended {
        *counts.entry(state(e).as_str()).or_default() += 1;
    }
    let permanent = ended
        .iter()
        .filter(|e| matches!(state(e), ReceiptState::Permanent | ReceiptState::Internal))
        .count();
    let transient = ended
        .iter()
        .filter(|e| state(e) == ReceiptState::Transient)
        .count();
    let rows: Vec<_> = ended
        .iter()
        .map(|e| {
            json!({
                "index": e.index,
                "plan": manifest.plans.get(e.index),
                "state": state(e).as_str(),
                "exit_code": e.exit,
                "tries": e.tries,
                "commit": e.receipt.as_ref().and_then(|r| r.commit.clone()),
                "ref": e.receipt.as_ref().and_then(|r| r.output_ref.clone()),
                "message": e.receipt.as_ref().and_then(|r| r.message.clone()),
            })
        })
        .collect();
    let doc = json!({
        "manifest": manifest.source,
        "receipts": receipts,
        "plans": rows,
        "counts": counts,
        "stopped": stopped.is_some(),
        "unsettled": stopped.unwrap_or(0),
    });
    let failure = if let Some(unsettled) = stopped {
        Some(CliError::new(
            ErrorKind::Interrupted,
            format!(
                "stopped by a signal: {} plan(s) settled, {unsettled} not; run the batch again to resume (receipts in {})",
                ended.len(),
                receipts.display()
            ),
        ))
    } else if permanent > 0 {
        Some(CliError::new(
            ErrorKind::WorkerFailed,
            format!(
                "{permanent} of {} plan(s) failed permanently, {transient} transiently (receipts in {})",
                ended.len(),
                receipts.display()
            ),
        ))
    } else if transient > 0 {
        Some(
            CliError::new(
                ErrorKind::WorkerFailed,
                format!(
                    "{transient} of {} plan(s) failed transiently: run the batch again (receipts in {})",
                    ended.len(),
                    receipts.display()
                ),
            )
            .with_exit_code(exec_code::TEMPFAIL),
        )
    } else {
        None
    };
    if ctx.json {
        return match failure {
            None => print_json(&doc),
            Some(e) => Err(e.with_details(doc)),
        };
    }
    outln!(
        "{:>5}  {:<10}  {:>4}  {:>5}  {:<12}  PLAN",
        "INDEX",
        "STATE",
        "EXIT",
        "TRIES",
        "COMMIT"
    )?;
    for e in ended {
        let commit = e
            .receipt
            .as_ref()
            .and_then(|r| r.commit.as_deref())
            .unwrap_or("-");
        let plan = manifest
            .plans
            .get(e.index)
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        outln!(
            "{:>5}  {:<10}  {:>4}  {:>5}  {:<12}  {}",
            e.index,
            state(e).as_str(),
            e.exit.map_or_else(|| "sig".to_owned(), |c| c.to_string()),
            e.tries,
            &commit[..commit.len().min(12)],
            crate::display::escape(&plan)
        )?;
    }
    let said: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    outln!("{} plan(s): {}", ended.len(), said.join(", "))?;
    match failure {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

fn emit_recipe(
    ctx: &Ctx,
    args: &BatchArgs,
    engine: Engine,
    manifest: &Manifest,
    receipts: &Path,
) -> Result<(), CliError> {
    if manifest.plans.is_empty() {
        return Err(CliError::usage(format!(
            "{} holds no plan: nothing to emit",
            manifest.source.display()
        )));
    }
    let shown = |p: &Path| p.display().to_string();
    let text = match engine {
        Engine::Slurm => {
            let program = std::env::current_exe()
                .map(|p| shown(&p))
                .unwrap_or_else(|_| "bh".to_owned());
            emit::slurm::script(&emit::slurm::SlurmRecipe {
                program,
                plans: shown(&manifest.source),
                receipts: shown(receipts),
                state_dir: Some(shown(&ctx.state_dir)),
                count: manifest.plans.len(),
                parallel: args.jobs,
                publish: args.publish.clone(),
                base_url: args.base_url.clone(),
                max_retries: args.max_retries,
                trust_plan: args.trust_plan,
                checkout: args.checkout,
                job_name: args.name.clone(),
            })
        }
        Engine::K8s => {
            let mount = match &args.mount {
                Some(m) => ctx.cwd.join(m),
                None => common_folder(manifest, receipts),
            };
            let job = emit::k8s::job(&emit::k8s::K8sRecipe {
                name: args.name.clone(),
                image: args.image.clone(),
                plans: shown(&manifest.source),
                receipts: shown(receipts),
                count: manifest.plans.len(),
                parallelism: args.jobs,
                attempts: args.attempts,
                publish: args.publish.clone(),
                base_url: args.base_url.clone(),
                secret: args.secret.clone(),
                claim: args.claim.clone(),
                mount: shown(&mount),
                checkout: args.checkout,
            });
            let mut t = serde_json::to_string_pretty(&job).map_err(CliError::internal)?;
            t.push('\n');
            t
        }
    };
    out!("{text}")?;
    Ok(())
}

/// The deepest folder holding the manifest, the receipts and every plan's
/// repository and session file (what the pods must see at the same paths).
fn common_folder(manifest: &Manifest, receipts: &Path) -> PathBuf {
    let mut paths: Vec<PathBuf> = vec![manifest.source.clone(), receipts.to_path_buf()];
    for p in &manifest.plans {
        paths.push(p.clone());
        if let Ok(plan) = bh_exec::read_plan(p) {
            paths.push(plan.repo.top_level);
            paths.push(plan.session.file);
        }
    }
    let mut common = paths[0].clone();
    for p in &paths[1..] {
        while !p.starts_with(&common) {
            if !common.pop() {
                return PathBuf::from("/");
            }
        }
    }
    if common == manifest.source && !manifest.is_dir {
        common.pop();
    }
    common
}

#[cfg(test)]
mod tests {
    /// The recipes' permanent codes are exactly the CLI's codes that are
    /// neither success, internal (1), interrupted (8: under --index a
    /// signal is 75), transient (75) nor the quiet pipe code.
    #[test]
    fn permanent_codes_match_the_exit_code_table() {
        let mut table: Vec<u8> = crate::error::exit_code_rows(true)
            .into_iter()
            .map(|(c, _)| c)
            .filter(|c| ![0, 1, 8, 75, crate::error::EXIT_PIPE_CLOSED].contains(c))
            .collect();
        table.sort_unstable();
        assert_eq!(table, bh_exec::emit::PERMANENT_EXIT_CODES.to_vec());
    }
}
