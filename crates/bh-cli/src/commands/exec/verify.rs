//! `bh exec verify`: re-check a plan exactly as a run does, before any
//! model call or Git mutation.

use std::path::PathBuf;

use bh_exec::{Trust, verify_plan};
use serde_json::json;

use super::{checks, trust};
use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `ExecCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
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
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
        plan,
        trust_plan,
        allow_invisible,
    } = args;
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
