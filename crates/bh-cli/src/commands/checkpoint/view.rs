//! What `show`, `diff` and `restore` share: the note under `latest`, and a
//! diff's text written (coloured on a terminal).

use std::io::{IsTerminal, Write};

use bh_checkpoint::{CheckpointKind, CompareOutcome, Store};

use crate::display;
use crate::error::CliError;
use crate::ui::errln;

/// Under `latest`, says on stderr when newer pre-restore checkpoints were
/// skipped, so nobody mistakes `latest` for the undo point of a restore.
pub(crate) fn note_latest(store: &Store, id: &str, json: bool) {
    if json || !(id == "latest" || id == "last") {
        return;
    }
    let Ok(list) = store.list() else { return };
    let skipped: Vec<&str> = list
        .iter()
        .take_while(|c| c.kind == CheckpointKind::PreRestore)
        .map(|c| c.id.as_str())
        .collect();
    if let (Some(newest), Some(latest)) = (
        skipped.first(),
        list.iter().find(|c| c.kind != CheckpointKind::PreRestore),
    ) {
        errln!(
            "bh: note: `latest` is checkpoint {}; it skips the newer pre-restore checkpoint{} {} (undo points of restores: name them by id)",
            latest.id,
            if skipped.len() == 1 { "" } else { "s" },
            if skipped.len() == 1 {
                (*newest).to_owned()
            } else {
                skipped.join(", ")
            }
        );
    }
}

pub(super) fn write_text(
    out: &mut impl Write,
    outcome: &CompareOutcome,
    json: bool,
) -> Result<(), CliError> {
    if let Some(text) = &outcome.text {
        let color = display::color_stdout(json);
        out.write_all(&display::render_diff(
            text,
            color,
            std::io::stdout().is_terminal(),
        ))?;
    }
    Ok(())
}
