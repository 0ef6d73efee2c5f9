//! `bh task …`: run a command sandboxed in a repository of its own, list
//! and show the tasks, remove kept worktrees. One file per subcommand; this
//! one holds the group and the report words they share.

use bh_task::run::{Outcome, TaskReport};
use clap::Subcommand;

use crate::context::Ctx;
use crate::display;
use crate::error::CliError;
use crate::ui::outln;

mod gc;
mod list;
mod live;
mod run;
mod show;

// Parsed once per process: the size of `Run` does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum TaskCmd {
    /// Run COMMAND in a disposable worktree of the repository and validate
    /// everything it touched against the granted scope.
    Run(run::Args),
    /// The tasks under the state folder, oldest first: id, outcome, branch,
    /// base and command.
    #[command(visible_alias = "ls")]
    List,
    /// Show a task's outcome, reasons, violations and paths.
    Show(show::Args),
    /// Remove worktrees that task sessions kept (interrupted or untrusted).
    Gc(gc::Args),
}

pub fn run(cmd: TaskCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        TaskCmd::Run(args) => run::run(ctx, args),
        TaskCmd::List => list::run(ctx),
        TaskCmd::Show(args) => show::run(ctx, args),
        TaskCmd::Gc(args) => gc::run(ctx, args),
    }
}

pub(super) fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => "succeeded",
        Outcome::Promoted => "promoted",
        Outcome::Rejected => "rejected",
        Outcome::Failed => "failed",
        Outcome::TimedOut => "timed out",
        Outcome::Interrupted => "was interrupted",
        Outcome::Untrusted => "is untrusted",
    }
}

/// The report for people. Every text that may carry the worker's bytes
/// (reasons quote its stderr, paths are its file names) goes through the
/// same escaping as the live echo.
pub(super) fn print_report(report: &TaskReport) -> std::io::Result<()> {
    let esc = |t: &str| display::escape(t).into_owned();
    let path = |p: &std::path::Path| esc(&p.display().to_string());
    outln!("task {}: {}", esc(&report.id), outcome_word(report.outcome))?;
    match &report.sandbox {
        Some(sb) => outln!(
            "  sandbox:   Landlock ABI {}, network {}, {}{}{}",
            sb.landlock_abi,
            if sb.network { "on" } else { "off" },
            match sb.unix_sockets {
                bh_tools::UnixSockets::Covered =>
                    format!("{} host Unix socket(s) covered", sb.sockets_covered),
                mode => crate::display::unix_sockets_words(mode).to_owned(),
            },
            if sb.unix_sockets == bh_tools::UnixSockets::Denied || sb.sockets_allowed.is_empty() {
                String::new()
            } else {
                let allowed: Vec<String> = sb.sockets_allowed.iter().map(|p| path(p)).collect();
                format!(" (allowed: {})", allowed.join(", "))
            },
            if sb.not_enforced.is_empty() {
                String::new()
            } else {
                format!(" (not enforced: {})", esc(&sb.not_enforced.join("; ")))
            }
        )?,
        None if report.no_sandbox => outln!("  sandbox:   OFF (--no-sandbox)")?,
        None => {}
    }
    outln!(
        "  source:    {} ({})",
        path(&report.source),
        esc(report.branch.as_deref().unwrap_or("detached"))
    )?;
    outln!("  base:      {}", esc(&report.base))?;
    if let Some(c) = &report.candidate {
        outln!("  candidate: {}", esc(c))?;
    }
    for r in &report.reasons {
        outln!("  reason:    {}", esc(r))?;
    }
    for v in &report.violations {
        let at = v
            .commit
            .as_deref()
            .map(|c| format!(" in {}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        outln!(
            "  violation: {}{}: {}",
            esc(v.path.as_deref().unwrap_or("-")),
            esc(&at),
            esc(&v.reason)
        )?;
    }
    if let Some(r) = &report.kept_ref {
        outln!("  kept:      {}", esc(r))?;
    }
    if let Some(w) = &report.work {
        outln!("  work:      {}", esc(w))?;
    }
    if let Some(w) = &report.worktree {
        outln!("  worktree:  {} (kept)", path(w))?;
    }
    for n in &report.notes {
        outln!("  note:      {}", esc(n))?;
    }
    outln!("  artifacts: {}", path(&report.artifacts))?;
    Ok(())
}
