//! `bh demo`: the main job on an embedded default — checkpoints protecting a
//! throwaway project from an "agent" that damages it, end to end.

use fs_err as fs;
use std::path::Path;

use bh_checkpoint::{DiffText, RestoreMode, SnapshotRequest, Store, StoreOptions};
use clap::Args;
use serde_json::json;

use crate::command_error::{checkpoint_error, exec_error};
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::outln;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the throwaway project and its store instead of deleting them.
    #[arg(long)]
    keep: bool,
}

#[allow(
    clippy::too_many_lines,
    reason = "a phase orchestrator not yet split into named steps (issue 26)"
)]
pub fn run(args: DemoArgs, ctx: &Ctx) -> Result<(), CliError> {
    let scratch = tempfile::Builder::new()
        .prefix("bh-demo-")
        .tempdir()
        .map_err(|e| CliError::internal(format!("cannot create a scratch folder: {e}")))?;
    // With --keep the folder is kept from the start, so nothing that goes
    // wrong later (a closed pipe on stdout included) deletes it.
    let (_scratch, root) = if args.keep {
        (None, scratch.keep())
    } else {
        let root = scratch.path().to_path_buf();
        (Some(scratch), root)
    };
    let project = root.join("project");
    let state = root.join("state");
    let mut log: Vec<String> = Vec::new();
    let mut say = |line: String| {
        if !ctx.json {
            // A closed stdout is noted (`ui::pipe_closed`); the demo goes on.
            let _ = outln!("{line}");
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

    // --- the session-checkpoint executor ---------------------------------
    executor_demo(ctx, &root, &project, args.keep, &mut say)?;

    // --- checkpoints by hand ----------------------------------------------
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

/// Plans and runs a continuation of a Pi session with the scripted provider.
fn executor_demo(
    ctx: &Ctx,
    root: &Path,
    project: &Path,
    keep: bool,
    say: &mut dyn FnMut(String),
) -> Result<(), CliError> {
    let state = root.join("state");
    let session_path = root.join("session.jsonl");
    let now = jiff::Timestamp::now().as_millisecond();
    let header = bh_protocol::SessionHeader::new(
        bh_session::new_session_id(),
        bh_session::now_iso(),
        project.display().to_string(),
        None,
    );
    let session_err = |e: bh_session::SessionError| CliError::internal(e);
    let mut w = bh_session::SessionWriter::create(&session_path, &header).map_err(session_err)?;
    w.append_message(&json!({
        "role": "user",
        "content": [{"type": "text", "text": "What does this project do?"}],
        "timestamp": now
    }))
    .map_err(session_err)?;
    let zero = json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
    let entry = w
        .append_message(&json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "It prints hello from src/main.rs."}],
            "api": "scripted", "provider": "scripted", "model": "scripted",
            "usage": zero, "stopReason": "stop", "timestamp": now
        }))
        .map_err(session_err)?;
    say(format!(
        "a Pi session {} with the conversation so far; continuing from entry {entry}",
        session_path.display()
    ));
    let turns = root.join("turns.jsonl");
    let script = [
        json!({"text": "I'll add a greeting module.", "toolCalls": [{"name": "write", "arguments": {
            "path": "src/greet.rs", "content": "pub fn greet() -> &'static str {\n    \"hello\"\n}\n"}}]}),
        json!({"toolCalls": [{"name": "edit", "arguments": {"path": "README.md",
            "edits": [{"oldText": "# demo", "newText": "# demo\n\nNow with a greeting."}]}}]}),
        json!({"text": "Added src/greet.rs and mentioned it in the README."}),
    ];
    let lines: Vec<String> = script.iter().map(|v| v.to_string()).collect();
    fs::write(&turns, lines.join("\n") + "\n")?;
    let plan_path = root.join("plan.json");
    let plan = bh_exec::make_plan(
        &ctx.git(),
        &bh_exec::PlanRequest {
            repo: project.to_path_buf(),
            base: "HEAD".into(),
            session: session_path.clone(),
            entry: entry.clone(),
            prompt: "Add a greeting function".into(),
            model: Some(format!("scripted/{}", turns.display())),
            limits: bh_exec::Limits::default(),
            allow_filters: false,
        },
        &bh_exec::PlanKey::open_or_create(&state).map_err(exec_error)?,
    )
    .map_err(exec_error)?;
    bh_exec::write_plan(&plan_path, &plan, false).map_err(exec_error)?;
    say(format!(
        "planned: {} (sha256:{})",
        plan_path.display(),
        &plan.plan_sha256[..16]
    ));
    let provider = crate::provider::build_provider(plan.model.as_deref(), None, None, ctx)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::internal)?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let setup = bh_exec::RunSetup::new(state, provider, cancel.clone()).map_err(exec_error)?;
    let result = runtime
        .block_on(async {
            // Ctrl-C, SIGTERM and SIGHUP end the run through its cancellation.
            let signals = crate::signals::cancel_on_stop(cancel);
            let result = bh_exec::run_plan(&ctx.git(), &plan_path, &setup).await;
            signals.abort();
            result
        })
        .map_err(exec_error)?;
    let commit = result.commit.clone().unwrap_or_default();
    say(format!(
        "ran: {} — commit {} (one parent: the base), ref {}, files: {}",
        result.state,
        &commit[..commit.len().min(12)],
        result.output_ref.as_deref().unwrap_or("-"),
        result.changed_paths.join(", ")
    ));
    let repo = ctx.git().repo(project, bh_git::Scope::User);
    if let Ok(trailers) = repo.run_line(["log", "-1", "--format=%(trailers:only,unfold)", &commit])
    {
        for line in trailers.lines() {
            say(format!("   {line}"));
        }
    }
    say(format!(
        "forked session: {} ; checkpoints before each edit: {}",
        result.forked_session.display(),
        result.checkpoints.join(", ")
    ));
    let out_ref = result.output_ref.as_deref().unwrap_or("HEAD");
    say(if keep {
        format!(
            "your branch, index and files were not touched; inspect with: git -C {} show {out_ref}",
            project.display()
        )
    } else {
        // The folder goes when the demo ends: a command naming it would fail.
        "your branch, index and files were not touched; the demo folder is removed now: \
         run `bh demo --keep` to keep it and inspect the commit with git show"
            .into()
    });
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)
        .map_err(|e| CliError::internal(format!("cannot write {}: {e}", path.display())))
}
