//! `bh`: the Better Harness command line.
//!
//! This is the only crate that prints, reads the environment or `$HOME`. Every
//! subcommand lives in its own module and returns `Result<(), CliError>`; `main`
//! maps errors to the exit-code table in `ARCHITECTURE.md`.

// Every write goes through `ui` (a closed pipe is an error value); a
// guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod command_error;
mod commands;
use commands::{agent, checkpoint, demo, exec, rewind, session, task, worktree};
mod context;
mod display;
mod error;
mod ids;
mod man;
mod names;
mod progress;
mod provider;
mod sandbox_policy;
mod signals;
mod ui;
mod units;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::context::Ctx;

#[derive(Parser, Debug)]
#[command(
    name = "bh",
    version = VERSION,
    about = "Better Harness: safe, reproducible, reviewable coding-agent work on Git"
)]
struct Cli {
    /// Run as if bh was started in DIR (like `git -C`): relative paths on the
    /// command line, `--project`/`--repo` and the default project resolve
    /// from there. Several compose: `-C a -C b` is `a/b`.
    #[arg(short = 'C', global = true, value_name = "DIR", action = clap::ArgAction::Append)]
    chdir: Vec<std::path::PathBuf>,

    /// Where Better Harness keeps its state (checkpoint stores, executions, tasks).
    #[arg(long, global = true, env = "BH_STATE_DIR", value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,

    /// Print exactly one JSON document on stdout (failures too).
    #[arg(long, global = true)]
    json: bool,

    /// When to colour output: `auto` on a terminal unless `NO_COLOR` is set
    /// or `TERM=dumb` (never with --json).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: display::ColorWhen,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Snapshot, list, diff and restore the working tree of a project.
    #[command(subcommand)]
    Checkpoint(checkpoint::CheckpointCmd),
    /// Undo what a session's own calls did to the files after an entry (only
    /// those paths; conflicts refused unless --force), or --undo the last rewind.
    Rewind(rewind::RewindArgs),
    /// Read, validate, fork and list Pi coding-agent sessions.
    #[command(subcommand)]
    Session(session::SessionCmd),
    /// Run a command in a disposable worktree with a frozen scope; promote by fast-forward.
    #[command(subcommand)]
    Task(task::TaskCmd),
    /// Run the agent on a Pi session: model, confined tools, checkpoints, limits.
    #[command(after_long_help = error::SCRIPT_FORMAT_HELP)]
    Agent(agent::AgentArgs),
    /// Session-checkpoint executor: continue a Pi session from one entry at one
    /// commit into a new commit (plan, verify, run, gc).
    #[command(subcommand)]
    Exec(exec::ExecCmd),
    /// The main job on a throwaway repository: plan and run a session
    /// continuation, then undo agent damage with checkpoints.
    Demo(demo::DemoArgs),
    #[command(
        subcommand,
        about = "Create, list, enter and dispose managed linked worktrees."
    )]
    Worktree(worktree::WorktreeCmd),
    /// Print a shell completion script (e.g. `bh completions bash > /etc/bash_completion.d/bh`).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; e.g. `bh man | man -l -`); `bh man exec run` prints bh-exec-run(1).
    Man {
        /// The subcommand whose page to print (none: bh(1)).
        command: Vec<String>,
    },
}

/// `bh --version`: the package version and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("BH_COMMIT"), ")");

/// `harness-session-executor`: the executor's own name for `bh exec`.
#[derive(Parser, Debug)]
#[command(
    name = "harness-session-executor",
    version = VERSION,
    about = "Continue a Pi session from one exact entry at one exact commit (same as `bh exec`)"
)]
struct ExecCli {
    /// Run as if started in DIR (like `git -C`; several compose).
    #[arg(short = 'C', global = true, value_name = "DIR", action = clap::ArgAction::Append)]
    chdir: Vec<std::path::PathBuf>,
    /// Where Better Harness keeps its state (executions, checkpoint stores).
    #[arg(long, global = true, env = "BH_STATE_DIR", value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// Print exactly one JSON document on stdout (failures too).
    #[arg(long, global = true)]
    json: bool,
    /// When to colour output: `auto` on a terminal unless `NO_COLOR` is set
    /// or `TERM=dumb` (never with --json).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: display::ColorWhen,
    #[command(subcommand)]
    command: exec::ExecCmd,
}

/// The clap tree with every command's `--help` ending in the exit-code table
/// (`error::exit_codes_help`, generated from `ErrorKind`); `bh exec …` adds the
/// executor's own codes.
fn with_exit_codes(cmd: clap::Command, executor: bool) -> clap::Command {
    let executor = executor || cmd.get_name() == "exec";
    let codes = error::exit_codes_help(executor);
    // `--help` shows the long text instead of the short one when there is one.
    let long = cmd
        .get_after_long_help()
        .map(|long| format!("{long}\n\n{codes}"));
    let mut cmd = cmd.after_help(codes);
    if let Some(long) = long {
        cmd = cmd.after_long_help(long);
    }
    cmd.mut_subcommands(|sub| with_exit_codes(sub, executor))
}

/// `bh`'s clap command (parsing, completions, man page).
fn bh_command() -> clap::Command {
    with_exit_codes(Cli::command(), false)
}

fn parse<T: FromArgMatches>(cmd: clap::Command) -> Result<T, clap::Error> {
    let mut cmd = cmd;
    let mut matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    T::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

fn invoked_as_executor() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_os_string()))
        .is_some_and(|n| n == "harness-session-executor")
}

/// Every command ends quietly when its reader goes away (`bh … | head`):
/// writes go through `ui`, which returns the broken pipe as an error value
/// and remembers it, and whatever the command then returns, the exit code is
/// the one a shell reports for SIGPIPE (141) and nothing is said. SIGPIPE
/// itself stays ignored, so a git helper or a socket peer that goes away is
/// an error the code handles, never a kill.
fn main() -> ExitCode {
    let code = real_main();
    if ui::pipe_closed() {
        return ExitCode::from(error::EXIT_PIPE_CLOSED);
    }
    code
}

/// clap's help, version or usage error, printed; a reader that went away
/// (`bh --help | head -1`) ends it quietly like any other output.
fn clap_exit(err: &clap::Error) -> ExitCode {
    match err.print() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::from(error::EXIT_PIPE_CLOSED)
        }
        _ => ExitCode::from(if err.use_stderr() { 2 } else { 0 }),
    }
}

fn real_main() -> ExitCode {
    if invoked_as_executor() {
        let cli = match parse::<ExecCli>(with_exit_codes(ExecCli::command(), true)) {
            Ok(cli) => cli,
            Err(err) => return clap_exit(&err),
        };
        let json = cli.json;
        display::set_color(cli.color);
        return match context::change_dir(&context::chdirs_in_order(std::env::args_os(), cli.chdir))
            .and_then(|()| Ctx::from_env(cli.state_dir, json))
            .and_then(|ctx| exec::run(cli.command, &ctx))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                err.report(json);
                ExitCode::from(err.code())
            }
        };
    }
    let cli = match parse::<Cli>(bh_command()) {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout and usage errors to stderr;
            // with --json a usage error is a JSON document like any failure.
            if err.use_stderr() && std::env::args().any(|a| a == "--json") {
                let message = err.kind().to_string();
                let detail = err.to_string();
                let first = detail.lines().next().unwrap_or(&message);
                let first = first.strip_prefix("error: ").unwrap_or(first);
                error::CliError::usage(first).report(true);
                return ExitCode::from(2);
            }
            return clap_exit(&err);
        }
    };
    let json = cli.json;
    display::set_color(cli.color);
    let result = context::change_dir(&context::chdirs_in_order(std::env::args_os(), cli.chdir))
        .and_then(|()| Ctx::from_env(cli.state_dir, json))
        .and_then(|ctx| match cli.command {
            Command::Checkpoint(cmd) => checkpoint::run(cmd, &ctx),
            Command::Rewind(args) => rewind::run(args, &ctx),
            Command::Session(cmd) => session::run(cmd, &ctx),
            Command::Task(cmd) => task::run(cmd, &ctx),
            Command::Agent(args) => agent::run(args, &ctx),
            Command::Exec(cmd) => exec::run(cmd, &ctx),
            Command::Demo(args) => demo::run(args, &ctx),
            Command::Worktree(cmd) => worktree::run(cmd, &ctx),
            Command::Completions { shell } => {
                // Rendered first: clap_complete panics on a failed write (`| head`).
                let mut script = Vec::new();
                clap_complete::generate(shell, &mut bh_command(), "bh", &mut script);
                ui::write_bytes(&script).map_err(error::CliError::from)
            }
            Command::Man { command } => man::run(bh_command(), &command),
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away: quiet, as after SIGPIPE.
        Err(err) if err.quiet || error::stdout_reader_gone() => {
            ExitCode::from(error::EXIT_PIPE_CLOSED)
        }
        Err(err) => {
            err.report(json);
            ExitCode::from(err.code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command below `cmd` (itself included), with its path.
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            walk(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    fn all(cmd: clap::Command) -> Vec<(String, clap::Command)> {
        let mut cmd = cmd;
        cmd.build();
        let mut out = Vec::new();
        let name = cmd.get_name().to_owned();
        walk(&cmd, name, &mut out);
        out
    }

    #[test]
    fn every_command_and_argument_is_described() {
        let mut missing = Vec::new();
        let mut checked = 0;
        for cli in [bh_command(), with_exit_codes(ExecCli::command(), true)] {
            for (path, cmd) in all(cli) {
                checked += 1 + cmd.get_arguments().count();
                if cmd.get_about().is_none() && cmd.get_long_about().is_none() {
                    missing.push(format!("{path}: no about"));
                }
                for arg in cmd.get_arguments() {
                    let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                    if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                        missing.push(format!("{path}: {} has no help", arg.get_id()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "undescribed:\n{}", missing.join("\n"));
        // The walk reaches every command and option (sanity: there are many).
        assert!(
            checked > 300,
            "only {checked} commands and arguments checked"
        );
    }

    #[test]
    fn every_help_lists_the_exit_codes_from_the_enum() {
        for cli in [bh_command(), with_exit_codes(ExecCli::command(), true)] {
            // clap's own `help` subcommands print other commands' help.
            for (path, mut cmd) in all(cli).into_iter().filter(|(p, _)| !p.contains(" help")) {
                let short = cmd.render_help().to_string();
                let long = cmd.render_long_help().to_string();
                for text in [&short, &long] {
                    assert!(text.contains("Exit codes:"), "{path}: {text}");
                    for kind in error::ErrorKind::ALL {
                        let row = format!("{:>3}  {}:", kind.exit_code(), kind.as_str());
                        assert!(text.contains(&row), "{path}: no {row:?} in\n{text}");
                    }
                }
                let executor =
                    path.starts_with("harness-session-executor") || path.starts_with("bh exec");
                assert_eq!(short.contains("20  tampered:"), executor, "{path}");
            }
        }
    }

    #[test]
    fn the_scripted_model_format_is_in_agent_and_exec_plan_help() {
        for (path, mut cmd) in all(bh_command()) {
            let long = cmd.render_long_help().to_string();
            let documented = long.contains("Scripted model file")
                && long.contains("toolCalls")
                && long.contains("stopReason");
            let wanted = path == "bh agent" || path == "bh exec plan";
            assert_eq!(documented, wanted, "{path}");
        }
    }
}
