//! `bh agent`: run the agent loop (`bh-core`) on a Pi session, through
//! `bh-runtime` (session choice, one runtime per directory, moves).
//!
//! Sessions as in Pi: `--session FILE|ID` opens FILE (or the session whose id
//! starts with ID, this directory's sessions first, then all) or creates a
//! new session at exactly FILE; `--continue` takes the newest session of the
//! working directory; `--fork FILE|ID` copies it into a new session of the
//! working directory and continues it; otherwise a new session goes to
//! `<agent dir>/sessions/--<cwd>--/`, the agent dir being
//! `PI_CODING_AGENT_DIR` or `~/.pi/agent`. The working directory is `--cwd`,
//! else the current one; a session recorded in another directory is refused
//! (naming both) unless `--cwd` says which root the tools get. Opening a
//! session that `bh worktree enter` prepared consumes its handoff.
//!
//! Models: `--model PROVIDER/MODEL` (`anthropic/…`, `openai/…`, a provider of
//! Pi's `<agent dir>/models.json`, or any name with `--base-url`, spoken as
//! OpenAI Chat Completions); keys from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`
//! (or what models.json names). `--script FILE` or `--model scripted/FILE`
//! replays a scripted-provider file (see `bh_llm`'s docs for its format).
//!
//! Headless with `-p PROMPT` (module `headless`; more prompts as positional
//! arguments, one user turn each; without either, piped stdin is the prompt).
//! `--json` streams one JSON object per line, like Pi's `--mode json`: the
//! session header first, then the loop's events, ending with `run_end`. Exit
//! codes: 0 when the model stopped on its own, 7 (`limit`) when a hard limit
//! fired, 8 (`interrupted`) on Ctrl-C (the first aborts the turn, a second
//! ends the command), 9 (`worker_failed`) when the model call failed.
//!
//! Interactive on a terminal without a prompt, or with `-i` (module `repl`;
//! commands and prompts are read line by line from stdin, which is how the
//! tests drive it). `/worktree create|enter|dispose|list` (module `switch`)
//! moves the live session between the main checkout and managed worktrees
//! in-process. The process's own current directory is only used to resolve
//! command-line paths.

use std::io::{IsTerminal, Read};

use bh_core::Event;
use bh_handoff::ConsumeOutcome;
use bh_runtime::{Live, Runtime, open_session};
use bh_session::Session;

use crate::command_error::runtime_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};
use crate::ui::errln;

mod args;
mod first_snapshot;
mod headless;
mod input;
mod render;
mod repl;
mod rewind;
mod switch;

pub use args::AgentArgs;
use render::Printer;

/// The prompts of a headless run: the command line's, else piped stdin.
fn prompts(args: &AgentArgs, interactive: bool) -> Result<Vec<String>, CliError> {
    let mut prompts = args.prompts();
    if let Some(i) = prompts.iter().position(|p| p.trim().is_empty()) {
        return Err(CliError::usage(if i == 0 && args.prompt.is_some() {
            "-p PROMPT is empty: give the model something to do".to_owned()
        } else {
            format!("prompt {} is empty: give the model something to do", i + 1)
        }));
    }
    if prompts.is_empty() && !interactive {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::internal(format!("cannot read stdin: {e}")))?;
        if text.trim().is_empty() {
            return Err(CliError::usage(
                "no prompt: pass -p PROMPT or pipe one on stdin",
            ));
        }
        prompts.push(text);
    }
    Ok(prompts)
}

/// Which policy the bash tool runs under: a `sandbox` line in `--json`
/// (after the header), a line on stderr otherwise.
fn say_sandbox(
    printer: &Printer,
    sandbox: &bh_tools::BashSandbox,
    cwd: &std::path::Path,
    withheld: &[String],
) {
    let mode = sandbox.mode;
    let mut writable: Vec<String> = Vec::new();
    if mode == bh_tools::SandboxMode::WorkspaceWrite {
        writable.push(cwd.display().to_string());
    }
    if mode != bh_tools::SandboxMode::Off {
        writable.push("/tmp (private)".to_owned());
        writable.extend(sandbox.allow_write.iter().map(|d| d.display().to_string()));
    }
    if printer.json {
        printer.line(&serde_json::json!({
            "type": "sandbox",
            "mode": mode.as_str(),
            "writable": writable,
            "network": sandbox.network,
            "unix_sockets_allowed": sandbox.allow_sockets,
            "unix_sockets_denied": sandbox.deny_unix_sockets,
            "unix_sockets": sandbox.unix_sockets(),
            "withheld_env": withheld,
        }));
        return;
    }
    if !withheld.is_empty() {
        errln!(
            "bash does not get: {} (provider keys; --pass-env NAME to give one)",
            withheld.join(", ")
        );
    }
    if mode == bh_tools::SandboxMode::Off {
        errln!("sandbox: off (bash runs with your full authority)");
    } else {
        let allowed = if sandbox.allow_sockets.is_empty() {
            String::new()
        } else {
            let allowed: Vec<String> = sandbox
                .allow_sockets
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            format!(" but {}", allowed.join(", "))
        };
        let sockets = format!(
            "{}{allowed}",
            crate::display::unix_sockets_words(sandbox.unix_sockets())
        );
        errln!(
            "sandbox: {} (network {}; bash may write: {}; {})",
            mode.as_str(),
            if sandbox.network { "on" } else { "off" },
            crate::display::escape(&writable.join(", ")),
            crate::display::escape(&sockets)
        );
    }
}

pub fn run(args: AgentArgs, ctx: &Ctx) -> Result<(), CliError> {
    let interactive =
        args.interactive || (args.prompts().is_empty() && std::io::stdin().is_terminal());
    let prompts = prompts(&args, interactive)?;
    if interactive && ctx.json {
        return Err(CliError::usage("--json needs a prompt (-p PROMPT)"));
    }

    let provider = crate::provider::build_provider_with(
        args.model.as_deref(),
        args.script.as_deref(),
        args.base_url.as_deref(),
        args.max_retries,
        ctx,
    )?;
    let options = args.runtime_options(ctx)?;
    let runner = ctx.git();
    let opened = open_session(&runner, &args.session_request(ctx)).map_err(runtime_error)?;
    let printer = Printer { json: ctx.json };
    if ctx.json {
        // Pi's JSON mode starts with the session header.
        if let Ok(s) = Session::load(opened.writer.path())
            && let Some(h) = s.header()
        {
            printer.line(h);
        }
    }
    if let ConsumeOutcome::Caveat { problems, .. } = &opened.handoff {
        printer.event(Event::Warning {
            message: format!(
                "the move into {} did not land as planned: {}",
                crate::display::escape(&opened.cwd.display().to_string()),
                // What a handoff record said: shown, never obeyed.
                crate::display::escape(&problems.join("; "))
            ),
        });
    }
    if let ConsumeOutcome::Foreign { record, reason } = &opened.handoff {
        printer.event(Event::Warning {
            message: format!(
                "ignored {}: not a handoff record bh wrote ({}); nothing was consumed",
                crate::display::escape(&record.display().to_string()),
                crate::display::escape(reason)
            ),
        });
    }
    let runtime = Runtime::open(&runner, &opened.cwd, &options).map_err(runtime_error)?;
    let withheld = options
        .bash_env
        .as_ref()
        .map(|e| e.withheld.clone())
        .unwrap_or_default();
    say_sandbox(&printer, &options.sandbox, &opened.cwd, &withheld);
    for message in &runtime.warnings {
        printer.event(Event::Warning {
            message: message.clone(),
        });
    }
    let cwd = opened.cwd.clone();

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the runtime: {e}")))?;
    let result = tokio.block_on(async {
        let mut agent = runtime
            .agent(&options, provider, opened.writer)
            .map_err(runtime_error)?;
        if interactive {
            let agent_dir = ctx.pi_agent_dir()?;
            let mut live = Live::new(agent, cwd, runner.clone(), options.clone(), agent_dir);
            return repl::run(&mut live, ctx, &args).await;
        }
        headless::run(&mut agent, &prompts, &printer).await
    });
    tokio.shutdown_background();
    match result {
        // The JSONL stream already ended with `run_end`; an error document
        // would break it, so only stderr and the exit code report the failure.
        Err(err) if ctx.json && err.kind != ErrorKind::Internal => Err(err.after_stream()),
        other => other,
    }
}
