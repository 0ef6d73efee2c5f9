//! `bh exec …` / `harness-session-executor …`: the session-checkpoint
//! executor. `plan` pins a Pi session entry to a commit; `verify` re-checks a
//! plan exactly as a run does before any model call or Git mutation.

use std::path::PathBuf;

use bh_exec::{
    Limits, PlanKey, PlanRequest, RunResult, RunState, StopReason, Trust, make_plan, verify_plan,
    write_plan,
};
use clap::Subcommand;
use serde_json::json;

use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;
use crate::units::parse_duration;

mod batch;
mod checks;
mod index;
mod views;

#[derive(Subcommand, Debug)]
pub enum ExecCmd {
    /// Write a plan: repository, base commit, session entry, prompt, model and
    /// limits pinned as full ids and SHA-256 digests. Creates nothing in the
    /// repository.
    #[command(after_long_help = format!("{PLAN_HELP}\n{}", crate::error::SCRIPT_FORMAT_HELP))]
    Plan {
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
        /// The base revision (resolved to a full commit id).
        #[arg(long, value_name = "REV")]
        base: String,
        /// The Pi session (never modified): a file, or a session id prefix as
        /// Pi takes it (this directory's sessions first, then all).
        #[arg(long, value_name = "FILE|ID")]
        session: PathBuf,
        /// The entry to continue from (its id, or a unique prefix of at least 4
        /// hex digits).
        #[arg(long, value_name = "ID")]
        entry: String,
        /// The continuation prompt.
        #[arg(
            long,
            value_name = "TEXT",
            conflicts_with = "prompt_file",
            required_unless_present = "prompt_file"
        )]
        prompt: Option<String>,
        /// Read the continuation prompt from a file.
        #[arg(long, value_name = "FILE")]
        prompt_file: Option<PathBuf>,
        /// The model, as PROVIDER/MODEL (the plan never holds an endpoint or a key).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// Tool-call limit of the run.
        #[arg(long, value_name = "N", default_value_t = 64)]
        max_tool_calls: u32,
        /// Time limit of the run.
        #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = parse_duration)]
        timeout: std::time::Duration,
        /// Where to write the plan (default: plan.json in the current directory).
        #[arg(long, value_name = "PLAN", default_value = "plan.json")]
        out: PathBuf,
        /// Replace an existing plan file.
        #[arg(long)]
        force: bool,
        /// Let the repository's smudge/clean filter drivers (e.g. Git LFS)
        /// run in the execution's worktree; off by default. Recorded in the
        /// plan.
        #[arg(long)]
        allow_filters: bool,
    },
    /// Run a plan: re-check it, continue the session over the base commit's
    /// tree (no checkout; --checkout: in a detached worktree) with exactly
    /// read, ls, edit and write, and commit the result with one parent and
    /// provenance trailers under the plan's ref.
    #[command(after_long_help = index::RUN_HELP)]
    Run {
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
    },
    /// Run every plan of a directory or manifest, --jobs N at a time, each
    /// through `exec run --plans … --index I`; resume skips what is done.
    /// Or print the indices to resubmit, or an engine's recipe (--emit).
    #[command(after_long_help = index::RUN_HELP)]
    Batch(batch::BatchArgs),
    /// Remove what crashed executions left behind (only what the executor made).
    Gc {
        /// The repository (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        repo: Option<PathBuf>,
    },
    /// The executions under the state folder, oldest first: id, state,
    /// commit, model and prompt.
    #[command(visible_alias = "ls")]
    List,
    /// One execution: plan digests, model, state, commit, ref, trailers and
    /// diffstat; with --html a self-contained report (the conversation
    /// continued, the patch).
    Show {
        /// The execution id, a unique prefix of at least 4 hex digits, or its
        /// output ref (refs/better-harness/executions/…).
        id: String,
        /// Write a self-contained HTML report (to stdout unless --out).
        #[arg(long)]
        html: bool,
        /// Write the report here (refused if it exists, unless --force).
        #[arg(long, short = 'o', value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace an existing --out file.
        #[arg(long)]
        force: bool,
    },
    /// Re-check a plan without running it: plan digest and MAC, the fields
    /// that steer the run, the repository, base commit and tree, session id,
    /// entry path, session digest, output ref.
    Verify {
        /// The plan file `bh exec plan` wrote.
        #[arg(long, value_name = "PLAN")]
        plan: PathBuf,
        /// Accept a plan sealed by another state directory once every
        /// re-check passes.
        #[arg(long)]
        trust_plan: bool,
        /// Accept such a plan even when its prompt holds invisible
        /// characters.
        #[arg(long)]
        allow_invisible: bool,
    },
}

const PLAN_HELP: &str = "\
A plan is sealed with an HMAC-SHA256 under a secret key of the state directory
(<state>/plan.key, created 0600 on first use). `verify` and `run` refuse a plan
whose MAC fails: one edited after it was written, or one made by another state
directory (exit 26).

Moving a plan to another machine: re-plan there (`bh exec plan` with the same
session, entry, base and prompt). That is the recommended way: the plan is then
sealed by the state directory that runs it. `verify --trust-plan` and
`run --trust-plan` accept a plan sealed by another key once every re-check has
passed (digest, repository, base, session, entry, the re-derived output ref,
tools, limits, ids); the prompt, model, limits and filter choice are then taken
on trust, so read them first (`bh exec run --plan FILE` without --yes shows
them). A plan that names this state directory's key and fails its MAC is refused
even with --trust-plan.";

/// This state directory's judgement of a plan's origin.
fn trust(ctx: &Ctx, foreign: bool) -> Result<(Option<PlanKey>, bool), CliError> {
    Ok((PlanKey::open(&ctx.state_dir).map_err(exec_error)?, foreign))
}

/// The exit-code kind of an execution that ran but did not commit.
fn failure_kind(result: &RunResult) -> Option<ErrorKind> {
    match (result.state, result.stop_reason) {
        (RunState::Committed | RunState::NoChanges, _) => None,
        (RunState::Failed, _) => Some(ErrorKind::WorkerFailed),
        (RunState::Aborted, StopReason::Cancelled) => Some(ErrorKind::Interrupted),
        (RunState::Aborted, _) => Some(ErrorKind::Limit),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "a phase orchestrator not yet split into named steps (issue 26)"
)]
pub fn run(cmd: ExecCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        ExecCmd::Plan {
            repo,
            base,
            session,
            entry,
            prompt,
            prompt_file,
            model,
            max_tool_calls,
            timeout,
            out,
            force,
            allow_filters,
        } => {
            let prompt_from = prompt_file.clone();
            let prompt = match (prompt, prompt_file) {
                (Some(p), _) => p,
                (None, Some(f)) => fs_err::read_to_string(ctx.cwd.join(&f)).map_err(|e| {
                    CliError::new(
                        ErrorKind::NotFound,
                        format!("cannot read the prompt file {}: {e}", f.display()),
                    )
                })?,
                (None, None) => {
                    return Err(CliError::usage("--prompt or --prompt-file is required"));
                }
            };
            checks::prompt(&prompt, prompt_from.as_deref())?;
            let model = Some(checks::model(ctx, model.as_deref())?);
            let session = crate::names::session_path(ctx, &session)?;
            // Read as the plan reads it (a regular file only: a FIFO or a
            // device is refused, never waited on or read without end).
            let bytes = bh_exec::read_session(&session).map_err(exec_error)?;
            let parsed = bh_session::Session::parse(bytes, Some(session.clone()));
            let entry = crate::names::entry_id(&parsed, &entry)?;
            drop(parsed);
            let req = PlanRequest {
                repo: ctx.dir_arg(repo.as_deref(), "--repo")?,
                base,
                session,
                entry,
                prompt,
                model,
                limits: Limits {
                    max_tool_calls,
                    timeout_secs: timeout.as_secs(),
                },
                allow_filters,
            };
            let key = PlanKey::open_or_create(&ctx.state_dir).map_err(exec_error)?;
            let plan = make_plan(&ctx.git(), &req, &key).map_err(exec_error)?;
            let out = ctx.cwd.join(out);
            write_plan(&out, &plan, force).map_err(exec_error)?;
            if ctx.json {
                return print_json(&json!({ "plan_file": out, "plan": plan }));
            }
            outln!("wrote {}", out.display())?;
            outln!("  base:    {} (tree {})", plan.base.commit, plan.base.tree)?;
            outln!(
                "  session: {} entry {}",
                plan.session.id,
                plan.session.entry
            )?;
            outln!("  ref:     {}", plan.output_ref)?;
            outln!("  digest:  sha256:{}", plan.plan_sha256)?;
            outln!(
                "  sealed:  key {} ({})",
                plan.mac.key_id,
                key.path().display()
            )?;
            if plan.allow_filters {
                outln!("  filters: the repository's filter drivers will run")?;
            }
            Ok(())
        }
        ExecCmd::Run {
            plan,
            yes,
            base_url,
            keep_worktree,
            checkout,
            trust_plan,
            allow_invisible,
            indexed,
        } => {
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
            let provider = crate::provider::build_provider(
                checked.model.as_deref(),
                None,
                base_url.as_deref(),
                ctx,
            )?;
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
            let failure = failure_kind(&result);
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
        ExecCmd::Gc { repo } => {
            let dir = ctx.dir_arg(repo.as_deref(), "--repo")?;
            let removed = bh_exec::gc(&ctx.git(), &dir, &ctx.state_dir).map_err(exec_error)?;
            if ctx.json {
                return print_json(&json!({ "removed": removed }));
            }
            outln!("{} leftover execution worktree(s) removed", removed.len())?;
            Ok(())
        }
        ExecCmd::Batch(args) => batch::run(ctx, &args),
        ExecCmd::List => views::list(ctx),
        ExecCmd::Show {
            id,
            html,
            out,
            force,
        } => views::show(ctx, &id, html, out.as_deref(), force),
        ExecCmd::Verify {
            plan,
            trust_plan,
            allow_invisible,
        } => {
            let path = ctx.cwd.join(plan);
            let (key, foreign) = trust(ctx, trust_plan)?;
            let plan = verify_plan(
                &ctx.git(),
                &path,
                Trust {
                    key: key.as_ref(),
                    foreign,
                },
            )
            .map_err(exec_error)?;
            let own = key.as_ref().is_some_and(|k| k.id() == plan.mac.key_id);
            checks::foreign_invisible(&plan, own, allow_invisible)?;
            if ctx.json {
                return print_json(&json!({
                    "plan_file": path,
                    "ok": true,
                    "plan_sha256": plan.plan_sha256,
                    "key_id": plan.mac.key_id,
                    "own_key": key.as_ref().is_some_and(|k| k.id() == plan.mac.key_id),
                }));
            }
            outln!(
                "plan {} holds: MAC, repository, base, session, entry and ref are as recorded",
                path.display()
            )?;
            if key.as_ref().is_none_or(|k| k.id() != plan.mac.key_id) {
                outln!(
                    "  sealed by another state directory (key {}), accepted by --trust-plan",
                    plan.mac.key_id
                )?;
            }
            Ok(())
        }
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
