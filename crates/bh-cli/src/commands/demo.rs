//! `bh demo`: the main job on an embedded default — checkpoints protecting a
//! throwaway project from an "agent" that damages it, end to end. The steps:
//! a scratch project ([`make_project`]), the session-checkpoint executor
//! ([`executor`]), then checkpoints by hand ([`checkpoints`]).

mod checkpoints;
mod executor;

use fs_err as fs;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the throwaway project and its store instead of deleting them.
    #[arg(long)]
    keep: bool,
}

pub fn run(args: DemoArgs, ctx: &Ctx) -> Result<(), CliError> {
    let (_scratch, root) = scratch(args.keep)?;
    let mut log: Vec<String> = Vec::new();
    let mut say = |line: String| {
        if !ctx.json {
            // A closed stdout is noted (`ui::pipe_closed`); the demo goes on.
            let _ = outln!("{line}");
        }
        log.push(line);
    };
    let project = make_project(ctx, &root)?;
    say(format!(
        "project: {} (a git repo with 3 files)",
        project.display()
    ));
    executor::run(ctx, &root, &project, args.keep, &mut say)?;
    let ok = checkpoints::run(ctx, &root.join("state"), &project, &mut say)?;
    let kept = if args.keep {
        say(format!("kept the demo folder: {}", root.display()));
        Some(root.clone())
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

/// The scratch folder, and its guard unless `keep`: with --keep the folder is
/// kept from the start, so nothing that goes wrong later (a closed pipe on
/// stdout included) deletes it.
fn scratch(keep: bool) -> Result<(Option<tempfile::TempDir>, PathBuf), CliError> {
    let scratch = tempfile::Builder::new()
        .prefix("bh-demo-")
        .tempdir()
        .map_err(|e| CliError::internal(format!("cannot create a scratch folder: {e}")))?;
    Ok(if keep {
        (None, scratch.keep())
    } else {
        let root = scratch.path().to_path_buf();
        (Some(scratch), root)
    })
}

/// `root/project`: a git repository with three files and an ignored build output.
fn make_project(ctx: &Ctx, root: &Path) -> Result<PathBuf, CliError> {
    let project = root.join("project");
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
    Ok(project)
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)
        .map_err(|e| CliError::internal(format!("cannot write {}: {e}", path.display())))
}
