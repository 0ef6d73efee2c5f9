//! `bh exec plan`: pin a Pi session entry to a commit, sealed with the
//! state folder's key.

use std::path::PathBuf;

use bh_exec::{Limits, PlanKey, PlanRequest, make_plan, write_plan};
use serde_json::json;

use super::checks;
use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;
use crate::units::parse_duration;

// The variant's doc comment in `ExecCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
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
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let Args {
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
    } = args;
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
