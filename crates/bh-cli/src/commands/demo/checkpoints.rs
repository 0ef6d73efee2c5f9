//! The demo's checkpoints by hand: two snapshots as an agent's calls would
//! take them, damage, the diff, an exact restore, and a check that it all
//! came back.

use fs_err as fs;
use std::path::Path;

use bh_checkpoint::{DiffText, RestoreMode, SnapshotRequest, Store, StoreOptions};

use super::write;
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::CliError;

/// Runs the steps on `project` with the store under `state`; whether the
/// restore brought everything back.
pub(super) fn run(
    ctx: &Ctx,
    state: &Path,
    project: &Path,
    say: &mut dyn FnMut(String),
) -> Result<bool, CliError> {
    let store =
        Store::open(&ctx.git(), project, &StoreOptions::new(state)).map_err(checkpoint_error)?;
    let first = store
        .snapshot(&SnapshotRequest {
            tool: "Edit".into(),
            session: Some("demo-session".into()),
            entry: None,
        })
        .map_err(checkpoint_error)?;
    say(format!(
        "1. before the agent's first edit: checkpoint {} ({} files)",
        first.checkpoint.id,
        first.changed.len()
    ));

    // The "agent" works, then does damage.
    write(&project.join("src/lib.rs"), "pub fn helper() {}\n")?;
    let second = store
        .snapshot(&SnapshotRequest {
            tool: "Bash".into(),
            session: Some("demo-session".into()),
            entry: None,
        })
        .map_err(checkpoint_error)?;
    say(format!(
        "2. before the agent runs a shell command: checkpoint {} ({} file changed)",
        second.checkpoint.id,
        second.changed.len()
    ));
    fs::remove_file(project.join("src/main.rs"))?;
    write(&project.join("README.md"), "oops, overwritten\n")?;
    write(&project.join("scratch.txt"), "agent leftovers\n")?;
    say("3. the agent deletes src/main.rs, overwrites README.md, leaves scratch.txt".into());

    let diff = store
        .diff(&second.checkpoint.id, &[], DiffText::Stat)
        .map_err(checkpoint_error)?;
    say(format!(
        "4. diff against checkpoint {}: {}",
        second.checkpoint.id,
        diff.entries
            .iter()
            .map(|e| format!("{} {}", e.status, e.path))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let restored = store
        .restore(&second.checkpoint.id, &[], RestoreMode::Exact)
        .map_err(checkpoint_error)?;
    say(format!(
        "5. exact restore of {}: wrote {}, deleted {} (undo point: {})",
        second.checkpoint.id,
        restored.restored.join(", "),
        restored.deleted.join(", "),
        restored.safety.id
    ));
    let main_ok = fs::read_to_string(project.join("src/main.rs")).is_ok();
    let readme = fs::read_to_string(project.join("README.md")).unwrap_or_default();
    let ignored_ok = project.join("target/debug/app").exists();
    let ok = main_ok && readme == "# demo\n" && ignored_ok && !project.join("scratch.txt").exists();
    say(format!(
        "6. verified: src/main.rs back, README.md back, ignored target/ untouched, scratch.txt gone: {}",
        if ok { "yes" } else { "NO" }
    ));
    let list = store.list().map_err(checkpoint_error)?;
    say(format!(
        "7. {} checkpoints in the store (newest first): {}",
        list.len(),
        list.iter()
            .map(|c| format!("{} {}", c.id, c.tool))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    Ok(ok)
}
