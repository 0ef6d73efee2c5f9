//! `bh demo`: the main job on an embedded default — checkpoints protecting a
//! throwaway project from an "agent" that damages it, end to end.

use std::fs;
use std::path::Path;

use bh_checkpoint::{DiffText, RestoreMode, SnapshotRequest, Store, StoreOptions};
use clap::Args;
use serde_json::json;

use crate::checkpoint::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the throwaway project and its store instead of deleting them.
    #[arg(long)]
    keep: bool,
}

pub fn run(args: DemoArgs, ctx: &Ctx) -> Result<(), CliError> {
    let scratch = tempfile::Builder::new()
        .prefix("bh-demo-")
        .tempdir()
        .map_err(|e| CliError::internal(format!("cannot create a scratch folder: {e}")))?;
    let root = scratch.path().to_path_buf();
    let project = root.join("project");
    let state = root.join("state");
    let mut log: Vec<String> = Vec::new();
    let mut say = |line: String| {
        if !ctx.json {
            println!("{line}");
        }
        log.push(line);
    };

    write(
        &project.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )?;
    write(&project.join("README.md"), "# demo\n")?;
    write(&project.join(".gitignore"), "target/\n")?;
    write(
        &project.join("target/debug/app"),
        "build output (ignored)\n",
    )?;
    let runner = ctx.git();
    let repo = runner.repo(&project, bh_git::Scope::Isolated);
    repo.run(["init", "--quiet"]).map_err(CliError::internal)?;
    repo.run(["add", "-A"]).map_err(CliError::internal)?;
    repo.cmd(["commit", "--quiet", "-m", "initial"])
        .env("GIT_AUTHOR_NAME", "Demo")
        .env("GIT_AUTHOR_EMAIL", "demo@example.invalid")
        .env("GIT_COMMITTER_NAME", "Demo")
        .env("GIT_COMMITTER_EMAIL", "demo@example.invalid")
        .run()
        .map_err(CliError::internal)?;
    say(format!(
        "project: {} (a git repo with 3 files)",
        project.display()
    ));

    let store =
        Store::open(&runner, &project, &StoreOptions::new(&state)).map_err(checkpoint_error)?;
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

    let kept = if args.keep {
        let path = scratch.keep();
        say(format!("kept the demo folder: {}", path.display()));
        Some(path)
    } else {
        None
    };
    if ctx.json {
        print_json(&json!({ "ok": ok, "steps": log, "kept": kept }))?;
    }
    if ok {
        Ok(())
    } else {
        Err(CliError::internal(
            "the demo restore did not bring the project back",
        ))
    }
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)
        .map_err(|e| CliError::internal(format!("cannot write {}: {e}", path.display())))
}
