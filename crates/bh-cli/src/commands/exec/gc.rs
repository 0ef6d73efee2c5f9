//! `bh exec gc`: remove what crashed executions left behind (only what the
//! executor made).

use std::path::PathBuf;

use serde_json::json;

use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

// The variant's doc comment in `ExecCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The repository (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    repo: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let dir = ctx.dir_arg(args.repo.as_deref(), "--repo")?;
    let removed = bh_exec::gc(&ctx.git(), &dir, &ctx.state_dir).map_err(exec_error)?;
    if ctx.json {
        return print_json(&json!({ "removed": removed }));
    }
    outln!("{} leftover execution worktree(s) removed", removed.len())?;
    Ok(())
}
