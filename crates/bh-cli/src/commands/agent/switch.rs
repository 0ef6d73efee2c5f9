//! `/worktree …` in the interactive `bh agent`: parses the line, runs the
//! move as `bh-runtime`'s transaction ([`bh_runtime::Live`]: the session,
//! tools, checkpoint store and system prompt follow the new cwd, or nothing
//! changes), and prints what happened.

use bh_handoff::EnterOutcome;
use bh_runtime::{Live, Moved, RelocateError};
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::command_error::{runtime_error, worktree_error};
use crate::commands::worktree::{NewWorktree, print_created, print_disposed};
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};
use crate::ui::{errln, out, outln};

#[derive(Parser, Debug)]
#[command(
    name = "/worktree",
    no_binary_name = true,
    disable_version_flag = true,
    disable_help_subcommand = true
)]
struct Repl {
    #[command(subcommand)]
    cmd: ReplCmd,
}

#[derive(Subcommand, Debug)]
enum ReplCmd {
    /// Create a managed worktree (as `bh worktree create`) and move the session into it.
    Create {
        #[command(flatten)]
        new: NewWorktree,
    },
    /// Move the session into an existing managed worktree.
    Enter { name: String },
    /// Move the session back to the main checkout, then dispose the worktree
    /// it was in (checkpoint first; refuses dirty or unmerged work unless --force).
    /// With NAME, another managed worktree is disposed and the session stays.
    Dispose {
        /// The worktree to dispose (default: the one the session is in).
        name: Option<String>,
        #[arg(long)]
        force: bool,
    },
    /// Every worktree, as `bh worktree list`.
    List,
}

/// Runs one `/worktree …` line (the words after `/worktree`).
pub(super) async fn command(
    live: &mut Live,
    ctx: &Ctx,
    words: &[&str],
    cancel: &CancellationToken,
) -> Result<(), CliError> {
    let repl = match Repl::try_parse_from(words.iter().copied()) {
        Ok(r) => r,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            out!("{}", e.render())?;
            return Ok(());
        }
        Err(e) => {
            return Err(CliError::usage(
                e.render().to_string().trim_end().to_owned(),
            ));
        }
    };
    match repl.cmd {
        ReplCmd::List => crate::commands::worktree::print_list(ctx, Some(live.cwd().to_path_buf())),
        ReplCmd::Create { new } => {
            let name = new.name.clone();
            let session = Some(live.agent().session_path().display().to_string());
            let opts = new.options(None, session, live.cwd().to_path_buf());
            let runner = live.runner().clone();
            let out = tokio::task::spawn_blocking(move || bh_worktree::create(&runner, &opts))
                .await
                .map_err(|e| CliError::internal(format!("a worktree task failed: {e}")))?
                .map_err(worktree_error)?;
            print_created(&out)?;
            if cancel.is_cancelled() {
                return Err(CliError::new(
                    ErrorKind::Interrupted,
                    format!(
                        "cancelled: worktree {name} was created at {}, but the session stays in {} \
                         (/worktree enter {name} moves it)",
                        out.receipt.path.display(),
                        live.cwd().display()
                    ),
                ));
            }
            let moved = live
                .enter_worktree(&name, cancel)
                .await
                .map_err(relocate_error)?;
            print_moved(&moved, "into the worktree")?;
            Ok(())
        }
        ReplCmd::Enter { name } => {
            let moved = live
                .enter_worktree(&name, cancel)
                .await
                .map_err(relocate_error)?;
            print_moved(&moved, "into the worktree")?;
            Ok(())
        }
        ReplCmd::Dispose {
            name: Some(name),
            force,
        } if current_worktree(live).as_deref() != Some(name.as_str()) => {
            // Another worktree: disposed as `bh worktree dispose NAME` does;
            // the session is not in it and does not move.
            let opts = bh_worktree::DisposeOptions {
                name,
                cwd: live.cwd().to_path_buf(),
                force,
                state_dir: ctx.state_dir.clone(),
                max_file_size: bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
            };
            let runner = live.runner().clone();
            let out = tokio::task::spawn_blocking(move || bh_worktree::dispose(&runner, &opts))
                .await
                .map_err(|e| CliError::internal(format!("a worktree task failed: {e}")))?
                .map_err(worktree_error)?;
            print_disposed(&out)?;
            Ok(())
        }
        ReplCmd::Dispose { force, .. } => {
            let done = live
                .dispose_worktree(force, cancel)
                .await
                .map_err(relocate_error)?;
            print_moved(&done.moved, "back to the main checkout")?;
            print_disposed(&done.disposed)?;
            Ok(())
        }
    }
}

/// The managed worktree the live session is in (the deepest one holding
/// its cwd), `None` in the main checkout or outside Git.
pub(super) fn current_worktree(live: &Live) -> Option<String> {
    bh_worktree::containing(live.runner(), live.cwd())
        .ok()
        .flatten()
        .map(|(name, _)| name)
}

fn warn_discard(discard: Option<&bh_handoff::HandoffError>) {
    if let Some(d) = discard {
        errln!("bh: warning: cannot delete the prepared session: {d}");
    }
}

fn relocate_error(e: RelocateError) -> CliError {
    let message = e.to_string();
    match e {
        RelocateError::Cancelled { discard, .. } => {
            warn_discard(discard.as_deref());
            CliError::new(ErrorKind::Interrupted, message)
        }
        RelocateError::AlreadyThere { .. } => CliError::new(ErrorKind::Refused, message),
        RelocateError::NotInWorktree { cwd } => CliError::usage(format!(
            "/worktree dispose works inside a managed worktree; {} is not one \
             (/worktree list shows them)",
            cwd.display()
        )),
        RelocateError::NoMainCheckout { .. } => CliError::new(ErrorKind::NotFound, message),
        RelocateError::DisposeRefused { source, .. } => {
            CliError::new(worktree_error(*source).kind, message)
        }
        RelocateError::Failed { source, discard } => {
            warn_discard(discard.as_deref());
            runtime_error(*source)
        }
        RelocateError::DisposeFailed { moved, source, .. } => {
            if let Err(e) = print_moved(&moved, "back to the main checkout") {
                return CliError::from(e);
            }
            CliError::new(worktree_error(*source).kind, message)
        }
    }
}

fn print_moved(moved: &Moved, what: &str) -> std::io::Result<()> {
    let out: &EnterOutcome = &moved.enter;
    outln!(
        "session moved {what} {} ({}, {} entries carried); session file {}",
        out.worktree.display(),
        out.carry,
        out.entries_carried,
        out.target.display()
    )?;
    if let Some(n) = out.left_behind_count.filter(|n| *n > 0) {
        outln!(
            "{n} uncommitted file(s) stayed behind in {}",
            out.source_cwd
        )?;
    }
    for w in &moved.warnings {
        errln!("bh: warning: {w}");
    }
    Ok(())
}
