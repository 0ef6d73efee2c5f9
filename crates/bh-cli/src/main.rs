//! `bh`: the Better Harness command line.
//!
//! This is the only crate that prints, reads the environment or `$HOME`. Every
//! subcommand lives in its own module and returns `Result<(), CliError>`; `main`
//! maps errors to the exit-code table in `ARCHITECTURE.md`.

mod agent;
mod checkpoint;
mod context;
mod demo;
mod display;
mod error;
mod exec;
mod progress;
mod session;
mod task;
mod units;
mod worktree;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::context::Ctx;

#[derive(Parser, Debug)]
#[command(
    name = "bh",
    version,
    about = "Better Harness: safe, reproducible, reviewable coding-agent work on Git"
)]
struct Cli {
    /// Where Better Harness keeps its state (checkpoint stores, executions, tasks).
    #[arg(long, global = true, env = "BH_STATE_DIR", value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,

    /// Print exactly one JSON document on stdout (failures too).
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Snapshot, list, diff and restore the working tree of a project.
    #[command(subcommand)]
    Checkpoint(checkpoint::CheckpointCmd),
    /// Read, validate, fork and list Pi coding-agent sessions.
    #[command(subcommand)]
    Session(session::SessionCmd),
    /// Run a command in a disposable worktree with a frozen scope; promote by fast-forward.
    #[command(subcommand)]
    Task(task::TaskCmd),
    /// Run the agent on a Pi session: model, confined tools, checkpoints, limits.
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
}

/// `harness-session-executor`: the executor's own name for `bh exec`.
#[derive(Parser, Debug)]
#[command(
    name = "harness-session-executor",
    version,
    about = "Continue a Pi session from one exact entry at one exact commit (same as `bh exec`)"
)]
struct ExecCli {
    #[arg(long, global = true, env = "BH_STATE_DIR", value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: exec::ExecCmd,
}

fn invoked_as_executor() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_os_string()))
        .is_some_and(|n| n == "harness-session-executor")
}

fn main() -> ExitCode {
    if invoked_as_executor() {
        let cli = match ExecCli::try_parse() {
            Ok(cli) => cli,
            Err(err) => {
                let code = if err.use_stderr() { 2 } else { 0 };
                let _ = err.print();
                return ExitCode::from(code);
            }
        };
        let json = cli.json;
        return match Ctx::from_env(cli.state_dir, json).and_then(|ctx| exec::run(cli.command, &ctx))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                err.report(json);
                ExitCode::from(err.code())
            }
        };
    }
    let cli = match Cli::try_parse() {
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
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let json = cli.json;
    let result = Ctx::from_env(cli.state_dir, json).and_then(|ctx| match cli.command {
        Command::Checkpoint(cmd) => checkpoint::run(cmd, &ctx),
        Command::Session(cmd) => session::run(cmd, &ctx),
        Command::Task(cmd) => task::run(cmd, &ctx),
        Command::Agent(args) => agent::run(args, &ctx),
        Command::Exec(cmd) => exec::run(cmd, &ctx),
        Command::Demo(args) => demo::run(args, &ctx),
        Command::Worktree(cmd) => worktree::run(cmd, &ctx),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            err.report(json);
            ExitCode::from(err.code())
        }
    }
}
