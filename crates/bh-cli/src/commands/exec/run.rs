//! `bh exec run`: a verified plan continued into one commit under its
//! output ref.

use std::path::PathBuf;

use bh_exec::{Trust, verify_plan};
use serde_json::json;

use super::{checks, index, trust};
use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `ExecCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plan file `bh exec plan` wrote.
    #[arg(long, value_name = "PLAN", required_unless_present = "plans")]
    plan: Option<PathBuf>,
    #[command(flatten)]
    indexed: index::IndexArgs,
    /// Really run (without it: a dry run that says what would happen and exits 0).
    #[arg(long)]
    yes: bool,
    /// The provider's base URL (never stored in the plan).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Keep the execution worktree for inspection (implies --checkout).
    #[arg(long)]
    keep_worktree: bool,
    /// Run in a detached worktree at the base (git checks it out, with
    /// the repository's end-of-line and filter rules) instead of over the
    /// base tree with no checkout. Implied by a plan made with
    /// --allow-filters.
    #[arg(long)]
    checkout: bool,
    /// Accept a plan sealed by another state directory (another machine)
    /// once every re-check passes; see `bh exec plan --help`.
    #[arg(long)]
    trust_plan: bool,
    /// Accept such a plan even when its prompt holds invisible
    /// characters (TAG, zero-width, …; the dry run shows them).
    #[arg(long)]
    allow_invisible: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        plan,
        yes,
        base_url,
        keep_worktree,
        checkout,
        trust_plan,
        allow_invisible,
        indexed,
    } = args;
    let Some(plan) = plan else {
        let flags = index::RunFlags {
            yes,
            base_url: base_url.as_deref(),
            keep_worktree,
            checkout,
            trust_plan,
            allow_invisible,
        };
        return index::run(ctx, &indexed, &flags);
    };
    let path = ctx.cwd.join(plan);
    let (key, foreign) = trust(ctx, trust_plan)?;
    let checked = verify_plan(
        &ctx.git(),
        &path,
        Trust {
            key: key.as_ref(),
            foreign,
        },
    )
    .map_err(exec_error)?;
    let own = key.as_ref().is_some_and(|k| k.id() == checked.mac.key_id);
    if !yes {
        return checks::dry_run(ctx, &path, &checked, checkout || keep_worktree);
    }
    checks::foreign_invisible(&checked, own, allow_invisible)?;
    let provider =
        crate::provider::build_provider(checked.model.as_deref(), None, base_url.as_deref(), ctx)?;
    let result = run_verified(
        ctx,
        &path,
        Verified {
            provider,
            keep_worktree,
            checkout,
            plan_key: key,
            trust_plan: foreign,
            plan_sha256: checked.plan_sha256.clone(),
        },
    )?;
    let result = result.map_err(exec_error)?;
    let failure = crate::command_error::failure_kind(&result);
    if ctx.json {
        let doc = json!({ "result": result });
        return match failure {
            None => print_json(&doc),
            Some(kind) => Err(CliError::new(
                kind,
                format!(
                    "execution {} {}: {}",
                    result.execution_id,
                    result.state,
                    result.reason.clone().unwrap_or_default()
                ),
            )
            .with_details(doc)),
        };
    }
    outln!("execution {}: {}", result.execution_id, result.state)?;
    if let Some(c) = &result.commit {
        outln!("  commit:  {c}")?;
    }
    if let Some(r) = &result.output_ref {
        outln!("  ref:     {r}")?;
    }
    for p in &result.changed_paths {
        outln!("  changed: {p}")?;
    }
    outln!("  session: {}", result.forked_session.display())?;
    let failed = match result.failed_tool_calls {
        0 => String::new(),
        n => format!(", {n} failed"),
    };
    outln!(
        "  tools:   {} call(s){failed}; stop: {}",
        result.tool_calls,
        result.stop_reason
    )?;
    if let Some(p) = &result.patch {
        outln!("  patch:   {}", p.display())?;
    }
    // What next: the report, and how the commit reaches a branch.
    outln!(
        "next: bh exec show {} --html -o run.html",
        result.execution_id
    )?;
    if let (Some(r), Some(c)) = (&result.output_ref, &result.commit) {
        outln!(
            "      git merge --ff-only {r}   (on a branch at the base; else git cherry-pick {})",
            &c[..c.len().min(12)]
        )?;
    }
    match failure {
        None => Ok(()),
        Some(kind) => Err(CliError::new(
            kind,
            format!(
                "execution {} {}: {}",
                result.execution_id,
                result.state,
                result.reason.unwrap_or_default()
            ),
        )),
    }
}

/// One phase of `exec run` as the progress display shows it.
fn run_phase(p: &bh_exec::RunProgress) -> String {
    use bh_exec::RunProgress as P;
    match p {
        P::Checks => "checking the plan".to_owned(),
        P::Worktree => "opening the base".to_owned(),
        P::Fork => "forking the session".to_owned(),
        P::ModelTurn { turn } => format!("model turn {turn}"),
        P::ToolCall { tool, target } => format!("  {tool} {target}"),
        P::ToolDone { .. } => String::new(),
        P::Staging => "building the result tree".to_owned(),
        P::Commit => "recording the result".to_owned(),
    }
}

/// What a verified plan runs with (`exec run --plan` and `--plans --index`).
pub(crate) struct Verified {
    pub provider: std::sync::Arc<dyn bh_llm::Provider>,
    pub keep_worktree: bool,
    pub checkout: bool,
    pub plan_key: Option<bh_exec::PlanKey>,
    pub trust_plan: bool,
    pub plan_sha256: String,
}

/// Runs the verified plan at `path`: progress on a terminal, and Ctrl-C,
/// SIGTERM and SIGHUP ending the run through its cancellation (a
/// scheduler's preemption under `--index`: the run ends aborted).
pub(crate) fn run_verified(
    ctx: &Ctx,
    path: &std::path::Path,
    v: Verified,
) -> Result<Result<bh_exec::RunResult, bh_exec::ExecError>, CliError> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::internal)?;
    let setup = bh_exec::RunSetup {
        state_dir: ctx.state_dir.clone(),
        keep_worktree: v.keep_worktree,
        checkout: v.checkout,
        provider: v.provider,
        cancel: cancel.clone(),
        plan_key: v.plan_key,
        trust_plan: v.trust_plan,
        after_verify: None,
        expect_plan_sha256: Some(v.plan_sha256),
        // As `bh agent`'s bash: none of bh's provider keys.
        bash_env: Some(crate::provider::bash_env(ctx, &[])),
    };
    let progress = crate::progress::Progress::new(ctx.json);
    let report = |p: bh_exec::RunProgress| match p {
        // A tool call's line ends with its own mark: ✗ when it failed.
        bh_exec::RunProgress::ToolDone { failed: true } => progress.failed(),
        bh_exec::RunProgress::ToolDone { failed: false } => progress.done(),
        p => progress.phase(&run_phase(&p)),
    };
    let result = runtime.block_on(async {
        let signals = crate::signals::cancel_on_stop(cancel.clone());
        let result = bh_exec::run_plan_with_progress(&ctx.git(), path, &setup, &report).await;
        signals.abort();
        result
    });
    match &result {
        Ok(_) => progress.done(),
        Err(_) => progress.failed(),
    }
    drop(progress);
    Ok(result)
}
