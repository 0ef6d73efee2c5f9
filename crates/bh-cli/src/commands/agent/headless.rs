//! `bh agent -p PROMPT`: one user turn per prompt, events as JSON lines or
//! streamed text; the first Ctrl-C aborts the turn, a second one ends the
//! command at once (exit 8) — by returning, so destructors run. On a
//! terminal (not `--json`), a project's first snapshot shows its progress.

use bh_core::Agent;
use tokio_util::sync::CancellationToken;

use super::first_snapshot::FirstSnapshot;
use super::render::{Printer, final_text, outcome_error};
use crate::error::{CliError, ErrorKind};
use crate::ui::{errln, outln};

pub(super) async fn run(
    agent: &mut Agent,
    prompts: &[String],
    printer: &Printer,
) -> Result<(), CliError> {
    let cancel = CancellationToken::new();
    let quit = CancellationToken::new();
    let signals = watch_ctrl_c(cancel.clone(), quit.clone());
    let mut first_snapshot = if printer.json {
        None
    } else {
        FirstSnapshot::watch(agent)
    };
    let result = async {
        for prompt in prompts {
            let mut sink = |e: bh_core::Event| {
                FirstSnapshot::on_event(&mut first_snapshot, &e);
                printer.event(e)
            };
            let out = tokio::select! {
                biased;
                () = quit.cancelled() => return Err(interrupted()),
                out = agent.run(prompt, &cancel, &mut sink) => {
                    out.map_err(CliError::internal)?
                }
            };
            if !printer.json {
                let text = final_text(&out);
                if !text.is_empty() {
                    outln!("{text}")?;
                }
            }
            if let Some(err) = outcome_error(&out) {
                return Err(err);
            }
        }
        Ok(())
    }
    .await;
    signals.abort();
    if !printer.json && !quit.is_cancelled() {
        errln!("session: {}", agent.session_path().display());
    }
    result
}

pub(super) fn interrupted() -> CliError {
    CliError::new(ErrorKind::Interrupted, "interrupted")
}

/// Ctrl-C, SIGTERM or SIGHUP (`crate::signals`) cancels the current turn;
/// a second one cancels `quit`.
fn watch_ctrl_c(cancel: CancellationToken, quit: CancellationToken) -> tokio::task::JoinHandle<()> {
    let mut signals = crate::signals::StopSignals::catch();
    tokio::spawn(async move {
        signals.recv().await;
        cancel.cancel();
        signals.recv().await;
        errln!();
        quit.cancel();
    })
}
