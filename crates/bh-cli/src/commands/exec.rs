//! `bh exec …` / `harness-session-executor …`: the session-checkpoint
//! executor. `plan` pins a Pi session entry to a commit; `verify` re-checks a
//! plan exactly as a run does before any model call or Git mutation. One
//! file per subcommand; this one holds the group and the trust judgement
//! they share.

use bh_exec::PlanKey;
use clap::Subcommand;

use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::CliError;

mod batch;
mod checks;
mod gc;
mod index;
mod plan;
mod run;
mod show;
mod verify;
mod views;

pub(crate) use run::{Verified, run_verified};

#[derive(Subcommand, Debug)]
pub enum ExecCmd {
    /// Write a plan: repository, base commit, session entry, prompt, model and
    /// limits pinned as full ids and SHA-256 digests. Creates nothing in the
    /// repository.
    #[command(after_long_help = format!("{PLAN_HELP}\n{}", crate::error::SCRIPT_FORMAT_HELP))]
    Plan(plan::Args),
    /// Run a plan: re-check it, continue the session over the base commit's
    /// tree (no checkout; --checkout: in a detached worktree) with exactly
    /// read, ls, edit and write, and commit the result with one parent and
    /// provenance trailers under the plan's ref.
    #[command(after_long_help = index::RUN_HELP)]
    Run(run::Args),
    /// Run every plan of a directory or manifest, --jobs N at a time, each
    /// through `exec run --plans … --index I`; resume skips what is done.
    /// Or print the indices to resubmit, or an engine's recipe (--emit).
    #[command(after_long_help = index::RUN_HELP)]
    Batch(batch::BatchArgs),
    /// Remove what crashed executions left behind (only what the executor made).
    Gc(gc::Args),
    /// The executions under the state folder, oldest first: id, state,
    /// commit, model and prompt.
    #[command(visible_alias = "ls")]
    List,
    /// One execution: plan digests, model, state, commit, ref, trailers and
    /// diffstat; with --html a self-contained report (the conversation
    /// continued, the patch).
    Show(show::Args),
    /// Re-check a plan without running it: plan digest and MAC, the fields
    /// that steer the run, the repository, base commit and tree, session id,
    /// entry path, session digest, output ref.
    Verify(verify::Args),
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
pub(super) fn trust(ctx: &Ctx, foreign: bool) -> Result<(Option<PlanKey>, bool), CliError> {
    Ok((PlanKey::open(&ctx.state_dir).map_err(exec_error)?, foreign))
}

pub fn run(cmd: ExecCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        ExecCmd::Plan(args) => plan::run(ctx, args),
        ExecCmd::Run(args) => run::run(ctx, args),
        ExecCmd::Batch(args) => batch::run(ctx, &args),
        ExecCmd::Gc(args) => gc::run(ctx, args),
        ExecCmd::List => views::list(ctx),
        ExecCmd::Show(args) => show::run(ctx, args),
        ExecCmd::Verify(args) => verify::run(ctx, args),
    }
}
