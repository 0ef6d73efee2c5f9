//! The progress display of a project's first snapshot (it hashes every
//! file), for the REPL and for `bh agent -p`: only when stderr is a terminal
//! and the output is not JSON; it ends at the turn's first checkpoint (or
//! warning) event.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use bh_core::Agent;

use crate::progress::SnapshotDisplay;

/// On a terminal, the first snapshot of a project that has no checkpoint yet
/// (it hashes every file) shows its progress, until its checkpoint event.
pub(super) struct FirstSnapshot {
    store: Arc<bh_checkpoint::Store>,
    display: Arc<Mutex<Option<SnapshotDisplay>>>,
}

impl FirstSnapshot {
    pub(super) fn watch(agent: &Agent) -> Option<FirstSnapshot> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let store = agent.checkpoint_store()?.clone();
        if !store.list().is_ok_and(|l| l.is_empty()) {
            return None;
        }
        let display: Arc<Mutex<Option<SnapshotDisplay>>> = Arc::default();
        let shown = display.clone();
        store.set_progress(Some(Arc::new(move |step| {
            if let Ok(mut d) = shown.lock() {
                d.get_or_insert_with(|| SnapshotDisplay::new(false))
                    .show(step);
            }
        })));
        Some(FirstSnapshot { store, display })
    }

    /// Called with every event of a turn: the first checkpoint (or warning)
    /// event ends the display in `watching`, which is then `None`.
    pub(super) fn on_event(watching: &mut Option<FirstSnapshot>, e: &bh_core::Event) {
        let checkpointed = matches!(e, bh_core::Event::Checkpoint { .. });
        if (checkpointed || matches!(e, bh_core::Event::Warning { .. }))
            && let Some(f) = watching.take()
        {
            f.end(checkpointed);
        }
    }

    /// Ends the display (the snapshot succeeded or not) and stops watching.
    fn end(self, ok: bool) {
        self.store.set_progress(None);
        if let Some(d) = self.display.lock().ok().and_then(|mut d| d.take()) {
            d.end(ok);
        }
    }
}

impl Drop for FirstSnapshot {
    fn drop(&mut self) {
        self.store.set_progress(None);
    }
}
