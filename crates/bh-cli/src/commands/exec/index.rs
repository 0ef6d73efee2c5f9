//! `bh exec run --plans DIR|MANIFEST --index I`: the entry point any engine
//! (Slurm array, Kubernetes Indexed Job, `bh exec batch`) calls. Resolves
//! plan I of the sorted manifest, settles it (done when its ref already
//! holds this plan's result, here or on the `--publish` remote), runs it,
//! publishes the commit create-only, and writes `receipts/<I>.json`. Exit 0
//! committed or done, 75 transient, any other code permanent (see
//! `exec_code::BATCH`).

use std::path::{Path, PathBuf};

use bh_exec::{
    BatchError, ExecError, Manifest, Receipt, ReceiptState, RefHolds, RunResult, Settled, Trust,
};
use bh_git::Scope;
use serde_json::json;

use crate::command_error::{batch_error, exec_error};
use crate::context::Ctx;
use crate::error::{CliError, exec_code, print_json};
use crate::ui::outln;

/// The contract of `exec run --plans … --index I`, in `--help`.
pub const RUN_HELP: &str = "\
Many plans (--plans DIR|MANIFEST --index I): the entry point an engine calls
(a Slurm array task, a Kubernetes Indexed Job pod, `bh exec batch`). Plan I of
the sorted manifest (a directory's *.json files by file name, or a manifest
file's lines, relative to it) is settled, run and recorded:
  exit 0   committed, or its ref already holds this plan's result (a commit on
           the plan's base whose Better-Harness-Plan trailer names the plan's
           digest; then nothing runs), here or on the --publish remote, or
           its receipt says this very plan already ran to no change
  exit 75  transient (EX_TEMPFAIL): provider 5xx/408/409/429, network, a
           dropped stream, SIGTERM/SIGINT/SIGHUP (preemption), a failed push
  other    permanent, never retried: 28 index out of range, 29 the ref holds
           another commit, 30 unreadable manifest, 20-27 the plan's re-checks,
           2/4/6 a bad plan, 7 a limit, 9 the model failed for good; 1 internal
A receipt receipts/<I>.json (plan digest, ref, commit, model, execution,
state, exit code, message, timings, attempt, host; never a key) is written
at the end of every attempt. --publish REMOTE pushes the commit create-only
(git push REMOTE <commit>:<ref> --force-with-lease=<ref>:). Without --yes: a
dry run of plan I.";

/// The index-addressed form of `bh exec run` (flattened into it).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct IndexArgs {
    /// A directory of plan files (sorted by file name) or a manifest file
    /// (one plan path a line, relative to it): run its plan --index.
    #[arg(
        long,
        value_name = "DIR|MANIFEST",
        requires = "index",
        conflicts_with = "plan"
    )]
    pub plans: Option<PathBuf>,
    /// Which plan of --plans (from 0), e.g. $SLURM_ARRAY_TASK_ID or
    /// $JOB_COMPLETION_INDEX.
    #[arg(long, value_name = "I", requires = "plans")]
    pub index: Option<usize>,
    /// Where receipts/<I>.json go (default: receipts/ in the plans
    /// directory, or beside the manifest file).
    #[arg(long, value_name = "DIR", requires = "plans")]
    pub receipts: Option<PathBuf>,
    /// Push the result ref to this remote (name or URL), create-only.
    #[arg(long, value_name = "REMOTE", requires = "plans")]
    pub publish: Option<String>,
    /// Retries of a model call inside one attempt (default 3, at 2 s, 4 s,
    /// 8 s); 0 leaves retrying to the engine (exit 75).
    #[arg(long, value_name = "N", requires = "plans")]
    pub max_retries: Option<u32>,
}

/// The flags of `exec run` that apply to an index-addressed run too.
pub struct RunFlags<'a> {
    pub yes: bool,
    pub base_url: Option<&'a str>,
    pub keep_worktree: bool,
    pub checkout: bool,
    pub trust_plan: bool,
    pub allow_invisible: bool,
}

pub fn run(ctx: &Ctx, args: &IndexArgs, flags: &RunFlags<'_>) -> Result<(), CliError> {
    let (Some(plans), Some(index)) = (&args.plans, args.index) else {
        return Err(CliError::usage("--plans needs --index"));
    };
    let started = now_ms();
    let manifest = Manifest::open(&ctx.cwd.join(plans)).map_err(batch_error)?;
    let receipts = args
        .receipts
        .as_ref()
        .map_or_else(|| manifest.default_receipts(), |d| ctx.cwd.join(d));
    let previous = bh_exec::read_receipt(&receipts, index);
    let attempt = previous.as_ref().map_or(1, |r| r.attempt + 1);
    let mut receipt = Receipt {
        index,
        plan: None,
        plan_sha256: None,
        output_ref: None,
        commit: None,
        model: None,
        execution_id: None,
        state: ReceiptState::Internal,
        exit_code: 1,
        message: None,
        published: None,
        started_unix_ms: started,
        finished_unix_ms: started,
        duration_ms: 0,
        attempt,
        host: bh_exec::host_name(),
    };
    if !flags.yes {
        return dry_run(ctx, &manifest, index, flags);
    }
    let outcome = settle(
        ctx,
        &manifest,
        index,
        args,
        flags,
        &mut receipt,
        previous.as_ref(),
    );
    let finished = now_ms();
    receipt.finished_unix_ms = finished;
    receipt.duration_ms = finished.saturating_sub(started);
    match &outcome {
        Ok(s) => {
            receipt.state = s.state;
            receipt.commit = s.commit.clone();
            receipt.execution_id = s.execution_id.clone().or(receipt.execution_id.take());
            receipt.exit_code = 0;
            receipt.published = s.published.then(|| args.publish.clone()).flatten();
        }
        Err(e) => {
            receipt.exit_code = e.code();
            receipt.state = match e.code() {
                exec_code::TEMPFAIL => ReceiptState::Transient,
                1 => ReceiptState::Internal,
                _ => ReceiptState::Permanent,
            };
            receipt.message = Some(scrub(&e.message));
        }
    }
    let written = bh_exec::write_receipt(&receipts, &receipt).map_err(batch_error)?;
    match outcome {
        Ok(_) => {
            if ctx.json {
                return print_json(&json!({ "receipt": receipt, "receipt_file": written }));
            }
            outln!(
                "index {index}: {} {}",
                receipt.state.as_str(),
                receipt.commit.as_deref().unwrap_or("")
            )?;
            if let Some(r) = &receipt.output_ref {
                outln!("  ref:     {r}")?;
            }
            outln!("  receipt: {}", written.display())?;
            Ok(())
        }
        Err(e) => {
            let e = CliError {
                message: scrub(&e.message),
                ..e
            };
            Err(e.with_details(json!({ "receipt": receipt, "receipt_file": written })))
        }
    }
}

/// Resolves plan `index` and settles it ([`bh_exec::settle`]: done
/// already, skipped, or run here with this command's provider).
fn settle(
    ctx: &Ctx,
    manifest: &Manifest,
    index: usize,
    args: &IndexArgs,
    flags: &RunFlags<'_>,
    receipt: &mut Receipt,
    previous: Option<&Receipt>,
) -> Result<Settled, CliError> {
    let path = manifest.plan(index).map_err(batch_error)?.to_path_buf();
    receipt.plan = Some(path.clone());
    let plan = bh_exec::read_plan(&path).map_err(exec_error)?;
    receipt.plan_sha256 = Some(plan.plan_sha256.clone());
    receipt.output_ref = Some(plan.output_ref.clone());
    receipt.model = plan.model.clone();
    let repo = ctx.git().repo(&plan.repo.top_level, Scope::User);
    let mut execution_id = None;
    let settled = bh_exec::settle(&repo, &plan, args.publish.as_deref(), previous, || {
        let result = run_here(ctx, &path, args, flags)?;
        if let Ok(r) = &result {
            execution_id = Some(r.execution_id.clone());
        }
        Ok::<_, CliError>(result)
    });
    if execution_id.is_some() {
        receipt.execution_id = execution_id;
    }
    settled
}

/// The plan verified (its MAC, and for a foreign plan its prompt) and run
/// with this command's provider; the executor's own failures are returned
/// inside, for [`bh_exec::settle`] to tell a lost race.
fn run_here(
    ctx: &Ctx,
    path: &Path,
    args: &IndexArgs,
    flags: &RunFlags<'_>,
) -> Result<Result<RunResult, ExecError>, CliError> {
    let key = bh_exec::PlanKey::open(&ctx.state_dir).map_err(exec_error)?;
    let trust = Trust {
        key: key.as_ref(),
        foreign: flags.trust_plan,
    };
    let checked = match bh_exec::verify_plan(&ctx.git(), path, trust) {
        Ok(p) => p,
        // Created since we looked: `settle` asks whose it is.
        Err(e @ ExecError::RefExists { .. }) => return Ok(Err(e)),
        Err(e) => return Err(exec_error(e)),
    };
    let own = key.as_ref().is_some_and(|k| k.id() == checked.mac.key_id);
    super::checks::foreign_invisible(&checked, own, flags.allow_invisible)?;
    let provider = crate::provider::build_provider_with(
        checked.model.as_deref(),
        None,
        flags.base_url,
        args.max_retries,
        ctx,
    )?;
    super::run_verified(
        ctx,
        path,
        super::Verified {
            provider,
            keep_worktree: flags.keep_worktree,
            checkout: flags.checkout,
            plan_key: key,
            trust_plan: flags.trust_plan,
            plan_sha256: checked.plan_sha256.clone(),
        },
    )
}

/// Without --yes: what plan I is and whether it is done here; writes,
/// pushes and runs nothing (no receipt either).
fn dry_run(
    ctx: &Ctx,
    manifest: &Manifest,
    index: usize,
    flags: &RunFlags<'_>,
) -> Result<(), CliError> {
    let path = manifest.plan(index).map_err(batch_error)?;
    outln!("index {index}: plan {}", path.display())?;
    let plan = bh_exec::read_plan(path).map_err(exec_error)?;
    let repo = ctx.git().repo(&plan.repo.top_level, Scope::User);
    match bh_exec::local_ref(&repo, &plan).map_err(|e| batch_error(e.into()))? {
        RefHolds::ThisPlan(c) => {
            outln!("done: {} holds this plan's result {c}", plan.output_ref)?;
            return Ok(());
        }
        RefHolds::Other(c) => {
            return Err(batch_error(BatchError::RefTaken {
                name: plan.output_ref.clone(),
                place: "here".to_owned(),
                commit: c,
            }));
        }
        RefHolds::Absent => {}
    }
    let key = bh_exec::PlanKey::open(&ctx.state_dir).map_err(exec_error)?;
    let trust = Trust {
        key: key.as_ref(),
        foreign: flags.trust_plan,
    };
    let checked = bh_exec::verify_plan(&ctx.git(), path, trust).map_err(exec_error)?;
    super::checks::dry_run(ctx, path, &checked, flags.checkout || flags.keep_worktree)
}

/// `text` with the value of every provider key of this environment (a
/// variable named `*_API_KEY`, `*_KEY` or `*_TOKEN`, 8 characters or more)
/// replaced: a provider's error message may quote the key it was sent.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = text.to_owned();
    for (k, v) in std::env::vars() {
        let secret = k.ends_with("_KEY") || k.ends_with("_TOKEN");
        if secret && v.len() >= 8 && out.contains(&v) {
            out = out.replace(&v, "[redacted]");
        }
    }
    out
}

/// The workspace's one clock ([`bh_fs::now_ms`]), unsigned as receipts keep it.
fn now_ms() -> u64 {
    u64::try_from(bh_fs::now_ms()).unwrap_or(0)
}

/// The receipts folder for a manifest (for `exec batch`).
pub(crate) fn receipts_dir(ctx: &Ctx, manifest: &Manifest, flag: Option<&Path>) -> PathBuf {
    flag.map_or_else(|| manifest.default_receipts(), |d| ctx.cwd.join(d))
}
