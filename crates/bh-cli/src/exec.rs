//! `bh exec …` / `harness-session-executor …`: the session-checkpoint
//! executor. `plan` pins a Pi session entry to a commit; `verify` re-checks a
//! plan exactly as a run does before any model call or Git mutation.

use std::path::PathBuf;

use bh_exec::{ExecError, Limits, PlanRequest, make_plan, verify_plan, write_plan};
use clap::Subcommand;
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::units::parse_duration;

#[derive(Subcommand, Debug)]
pub enum ExecCmd {
    /// Write a plan: repository, base commit, session entry, prompt, model and
    /// limits pinned as full ids and SHA-256 digests. Creates nothing in the
    /// repository.
    Plan {
        #[arg(long, value_name = "DIR")]
        repo: PathBuf,
        /// The base revision (resolved to a full commit id).
        #[arg(long, value_name = "REV")]
        base: String,
        /// The Pi session file (never modified).
        #[arg(long, value_name = "FILE")]
        session: PathBuf,
        /// The entry to continue from.
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
    },
    /// Re-check a plan without running it: plan digest, base commit and tree,
    /// session id, entry path, session digest, output ref.
    Verify {
        #[arg(long, value_name = "PLAN")]
        plan: PathBuf,
    },
}

fn exec_error(err: ExecError) -> CliError {
    let kind = match err.exit_code() {
        2 => ErrorKind::Usage,
        3 => ErrorKind::Refused,
        4 => ErrorKind::NotFound,
        6 => ErrorKind::Invalid,
        1 => ErrorKind::Internal,
        _ => ErrorKind::Tampered,
    };
    let code = err.exit_code();
    CliError::new(kind, err.to_string()).with_exit_code(code)
}

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
        } => {
            let prompt = match (prompt, prompt_file) {
                (Some(p), _) => p,
                (None, Some(f)) => std::fs::read_to_string(ctx.cwd.join(&f)).map_err(|e| {
                    CliError::new(
                        ErrorKind::NotFound,
                        format!("cannot read the prompt file {}: {e}", f.display()),
                    )
                })?,
                (None, None) => {
                    return Err(CliError::usage("--prompt or --prompt-file is required"));
                }
            };
            let req = PlanRequest {
                repo: ctx.cwd.join(repo),
                base,
                session: ctx.cwd.join(session),
                entry,
                prompt,
                model,
                limits: Limits {
                    max_tool_calls,
                    timeout_secs: timeout.as_secs(),
                },
            };
            let plan = make_plan(&ctx.git(), &req).map_err(exec_error)?;
            let out = ctx.cwd.join(out);
            write_plan(&out, &plan, force).map_err(exec_error)?;
            if ctx.json {
                return print_json(&json!({ "plan_file": out, "plan": plan }));
            }
            println!("wrote {}", out.display());
            println!("  base:    {} (tree {})", plan.base.commit, plan.base.tree);
            println!(
                "  session: {} entry {}",
                plan.session.id, plan.session.entry
            );
            println!("  ref:     {}", plan.output_ref);
            println!("  digest:  sha256:{}", plan.plan_sha256);
            Ok(())
        }
        ExecCmd::Verify { plan } => {
            let path = ctx.cwd.join(plan);
            let plan = verify_plan(&ctx.git(), &path).map_err(exec_error)?;
            if ctx.json {
                return print_json(
                    &json!({ "plan_file": path, "ok": true, "plan_sha256": plan.plan_sha256 }),
                );
            }
            println!(
                "plan {} holds: base, session, entry and ref are as recorded",
                path.display()
            );
            Ok(())
        }
    }
}
