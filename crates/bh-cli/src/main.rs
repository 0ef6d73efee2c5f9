//! `bh`: the Better Harness command line.
//!
//! This is the only crate that prints, reads the environment or `$HOME`. Every
//! subcommand lives in its own module and returns `Result<(), CliError>`; `main`
//! maps errors to the exit-code table in `ARCHITECTURE.md`.

mod checkpoint;
mod context;
mod demo;
mod error;
mod session;
mod task;
mod units;

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
    /// Run a self-contained checkpoint demo on a throwaway project.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
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
        Command::Demo(args) => demo::run(args, &ctx),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            err.report(json);
            ExitCode::from(err.kind.exit_code())
        }
    }
}
