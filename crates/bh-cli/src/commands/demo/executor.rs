//! The demo's session-checkpoint executor: a Pi session written
//! ([`write_session`]), a plan to continue it from its last entry ([`plan`]),
//! the run with the scripted provider ([`execute`]), and what it made
//! ([`report`]).

use fs_err as fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::error::CliError;

/// Plans and runs a continuation of a Pi session with the scripted provider.
pub(super) fn run(
    ctx: &Ctx,
    root: &Path,
    project: &Path,
    keep: bool,
    say: &mut dyn FnMut(String),
) -> Result<(), CliError> {
    let (session, entry) = write_session(root, project)?;
    say(format!(
        "a Pi session {} with the conversation so far; continuing from entry {entry}",
        session.display()
    ));
    let (plan_path, plan) = plan(ctx, root, project, &session, &entry)?;
    say(format!(
        "planned: {} (sha256:{})",
        plan_path.display(),
        &plan.plan_sha256[..16]
    ));
    let result = execute(ctx, &root.join("state"), &plan_path, &plan)?;
    report(ctx, project, &result, keep, say);
    Ok(())
}

/// `root/session.jsonl`: a question and its answer; the answer's entry id.
fn write_session(root: &Path, project: &Path) -> Result<(PathBuf, String), CliError> {
    let path = root.join("session.jsonl");
    let now = jiff::Timestamp::now().as_millisecond();
    let header = bh_protocol::SessionHeader::new(
        bh_session::new_session_id(),
        bh_session::now_iso(),
        project.display().to_string(),
        None,
    );
    let session_err = |e: bh_session::SessionError| CliError::internal(e);
    let mut w = bh_session::SessionWriter::create(&path, &header).map_err(session_err)?;
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
    Ok((path, entry))
}

/// The scripted model's turns (`root/turns.jsonl`) and a sealed plan
/// (`root/plan.json`) to continue `session` from `entry` at `HEAD`.
fn plan(
    ctx: &Ctx,
    root: &Path,
    project: &Path,
    session: &Path,
    entry: &str,
) -> Result<(PathBuf, bh_exec::Plan), CliError> {
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
            session: session.to_path_buf(),
            entry: entry.to_owned(),
            prompt: "Add a greeting function".into(),
            model: Some(format!("scripted/{}", turns.display())),
            limits: bh_exec::Limits::default(),
            allow_filters: false,
        },
        &bh_exec::PlanKey::open_or_create(&root.join("state")).map_err(exec_error)?,
    )
    .map_err(exec_error)?;
    bh_exec::write_plan(&plan_path, &plan, false).map_err(exec_error)?;
    Ok((plan_path, plan))
}

/// Runs the plan; Ctrl-C, SIGTERM and SIGHUP end it through its cancellation.
fn execute(
    ctx: &Ctx,
    state: &Path,
    plan_path: &Path,
    plan: &bh_exec::Plan,
) -> Result<bh_exec::RunResult, CliError> {
    let provider = crate::provider::build_provider(plan.model.as_deref(), None, None, ctx)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::internal)?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let setup = bh_exec::RunSetup::new(state.to_path_buf(), provider, cancel.clone())
        .map_err(exec_error)?;
    runtime
        .block_on(async {
            let signals = crate::signals::cancel_on_stop(cancel);
            let result = bh_exec::run_plan(&ctx.git(), plan_path, &setup).await;
            signals.abort();
            result
        })
        .map_err(exec_error)
}

/// The commit, its trailers, the forked session, and how to look at it.
fn report(
    ctx: &Ctx,
    project: &Path,
    result: &bh_exec::RunResult,
    keep: bool,
    say: &mut dyn FnMut(String),
) {
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
}
