//! `bh checkpoint hook claude-code`: Claude Code's `PreToolUse` and
//! `PostToolUse` hooks. Before a mutating tool: a checkpoint, tagged with the
//! session and the tool-use id, and a line in the call journal (so a reused
//! checkpoint records this call too). After it: an after-record — the state
//! the call left and the checkpoint before it — which is what `bh rewind`
//! attributes paths with. The project is `CLAUDE_PROJECT_DIR` (Claude Code
//! sets it for hooks; a `cd` in Bash moves the event's `cwd`), else the
//! event's `cwd`. Always exit 0 so the tool proceeds; a skipped checkpoint is
//! said where the user sees it (the hook's JSON `systemMessage`) and counted
//! for `bh checkpoint list`.

use std::io::Read;
use std::path::{Path, PathBuf};

use bh_checkpoint::{AfterCall, Call, SnapshotRequest, Store};
use serde_json::{Value, json};

use super::{ProjectArg, open, serve};
use crate::command_error::checkpoint_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::ui::errln;
use crate::units::parse_duration;

/// Tools of Claude Code that change files or run commands, snapshotted by
/// the hook by default (`PowerShell` runs commands on Windows, `Monitor`
/// runs a command in the background).
const DEFAULT_HOOK_TOOLS: &str = "Edit,Write,NotebookEdit,Bash,PowerShell,Monitor";

/// One hook event, as Claude Code writes it on stdin.
struct Event {
    name: String,
    tool: String,
    session: Option<String>,
    tool_use: Option<String>,
    cwd: Option<PathBuf>,
    transcript: Option<String>,
}

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    agent: HookAgent,
}

#[derive(clap::Subcommand, Debug)]
pub enum HookAgent {
    /// A Claude Code `PreToolUse`/`PostToolUse` hook: reads the event on
    /// stdin, snapshots before mutating tools and records what they changed
    /// after them, always lets the tool proceed.
    ClaudeCode {
        #[command(flatten)]
        project: ProjectArg,
        /// Comma-separated tool names that trigger a snapshot.
        #[arg(long, value_name = "LIST", env = "BH_CHECKPOINT_TOOLS", default_value = DEFAULT_HOOK_TOOLS)]
        tools: String,
        /// Never use (or start) the project's checkpoint server; always take
        /// an ordinary snapshot.
        #[arg(
            long,
            env = "BH_CHECKPOINT_NO_SERVER",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        no_server: bool,
        /// How long a server started by the hook waits for the next call.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
        server_idle: std::time::Duration,
    },
}

/// `bh checkpoint hook …`: best effort, whatever happens the agent's tool
/// proceeds (exit 0).
pub(super) fn command(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let HookAgent::ClaudeCode {
        project,
        tools,
        no_server,
        server_idle,
    } = args.agent;
    run(ctx, &project, &tools, (!no_server).then_some(server_idle));
    Ok(())
}

/// Runs the hook; prints its JSON answer; never fails the tool.
fn run(ctx: &Ctx, project: &ProjectArg, tools: &str, server_idle: Option<std::time::Duration>) {
    let mut tool = String::new();
    let result = read_event().and_then(|event| {
        tool = event.tool.clone();
        handle(ctx, project, tools, server_idle, &event)
    });
    match result {
        Ok(Some(doc)) if ctx.json => {
            let _ = print_json(&doc);
        }
        Ok(_) => {}
        Err(err) => {
            errln!("bh: warning: checkpoint skipped: {}", err.message);
            let message = format!(
                "bh: no checkpoint{}: {} (`bh checkpoint list` counts skipped checkpoints)",
                if tool.is_empty() {
                    String::new()
                } else {
                    format!(" around {tool}")
                },
                err.message
            );
            let mut doc = json!({ "systemMessage": message });
            if ctx.json {
                doc["warning"] = json!({ "kind": err.kind.as_str(), "message": err.message });
            }
            let _ = print_json(&doc);
        }
    }
}

fn read_event() -> Result<Event, CliError> {
    let mut input = String::new();
    std::io::stdin()
        .take(16 << 20)
        .read_to_string(&mut input)
        .map_err(|e| CliError::usage(format!("cannot read the hook event on stdin: {e}")))?;
    let event: Value = serde_json::from_str(&input)
        .map_err(|e| CliError::usage(format!("the hook event on stdin is not JSON: {e}")))?;
    let field = |k: &str| event.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    Ok(Event {
        name: field("hook_event_name").unwrap_or_else(|| "PreToolUse".into()),
        tool: field("tool_name").unwrap_or_default(),
        session: field("session_id"),
        tool_use: field("tool_use_id"),
        cwd: field("cwd").map(PathBuf::from),
        transcript: field("transcript_path"),
    })
}

/// The project folder of the event: `CLAUDE_PROJECT_DIR`, else its `cwd`.
fn event_dir(ctx: &Ctx, event: &Event) -> Option<PathBuf> {
    std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| event.cwd.clone())
        .map(|d| ctx.abs(&d))
}

fn handle(
    ctx: &Ctx,
    project: &ProjectArg,
    tools: &str,
    server_idle: Option<std::time::Duration>,
    event: &Event,
) -> Result<Option<Value>, CliError> {
    if !tools.split(',').map(str::trim).any(|t| t == event.tool) {
        return Ok(None);
    }
    let dir = event_dir(ctx, event);
    match event.name.as_str() {
        "PreToolUse" => before(ctx, project, server_idle, event, dir.as_deref()).map(Some),
        "PostToolUse" => after(ctx, project, server_idle, event, dir.as_deref()).map(Some),
        _ => Ok(None),
    }
}

/// Counts a skipped checkpoint for `bh checkpoint list` (best effort).
fn count_skip(store: &Store, tool: &str, e: &CliError) {
    let _ = store.record_skipped(&format!("{tool}: {}", e.message));
}

fn before(
    ctx: &Ctx,
    project: &ProjectArg,
    server_idle: Option<std::time::Duration>,
    event: &Event,
    dir: Option<&Path>,
) -> Result<Value, CliError> {
    let request = SnapshotRequest {
        tool: event.tool.clone(),
        session: event.session.clone(),
        entry: event.tool_use.clone(),
    };
    let hook_dir = dir.map_or_else(|| ctx.cwd.clone(), Path::to_path_buf);
    let mut start_server = false;
    if let Some(idle) = server_idle {
        match serve::hook_snapshot(ctx, project, &hook_dir, &request, false) {
            // The server journals the call itself.
            Ok(doc) => return Ok(with_transcript(doc, event)),
            Err(serve::Fallback::NoServer) => start_server = idle > std::time::Duration::ZERO,
            Err(serve::Fallback::Failed(why)) => {
                errln!("bh: note: checkpoint server not used ({why}); taking an ordinary snapshot");
            }
        }
    }
    let store = open(ctx, project, dir)?;
    let outcome = match store.snapshot(&request) {
        Ok(o) => o,
        Err(e) => {
            let e = checkpoint_error(e);
            count_skip(&store, &event.tool, &e);
            return Err(e);
        }
    };
    for s in &outcome.skipped {
        errln!("bh: warning: not captured: {} ({})", s.path, s.reason);
    }
    // Journalled as the server would: a reused checkpoint then records
    // this call's tool-use id too.
    if let (Some(session), Some(entry)) = (&event.session, &event.tool_use) {
        store
            .call_journal()
            .append(&Call {
                commit: outcome.checkpoint.commit.clone(),
                session: session.clone(),
                entry: entry.clone(),
                tool: event.tool.clone(),
                created: outcome.created,
            })
            .map_err(checkpoint_error)?;
    }
    if start_server && let Some(idle) = server_idle {
        // After our own snapshot: the next call finds it listening.
        serve::spawn_server(ctx, project, &hook_dir, idle);
    }
    Ok(with_transcript(
        json!({ "project": store.project().to_string_lossy(), "snapshot": outcome, "server": false }),
        event,
    ))
}

fn after(
    ctx: &Ctx,
    project: &ProjectArg,
    server_idle: Option<std::time::Duration>,
    event: &Event,
    dir: Option<&Path>,
) -> Result<Value, CliError> {
    let (Some(session), Some(tool_use)) = (&event.session, &event.tool_use) else {
        return Err(CliError::usage(
            "a PostToolUse event without session_id and tool_use_id cannot be attributed",
        ));
    };
    let store = open(ctx, project, dir)?;
    let journal = store.call_journal();
    // The checkpoint before this call: its journal line (server or hook),
    // else its tags.
    let calls = journal.calls().map_err(checkpoint_error)?;
    let before = match calls
        .iter()
        .rev()
        .find(|c| &c.session == session && &c.entry == tool_use)
    {
        Some(c) => c.commit.clone(),
        None => store
            .list()
            .map_err(checkpoint_error)?
            .into_iter()
            .find(|c| c.session.as_deref() == Some(session) && c.entry.as_deref() == Some(tool_use))
            .map(|c| c.commit)
            .ok_or_else(|| {
                CliError::new(
                    crate::error::ErrorKind::NotFound,
                    format!(
                        "no checkpoint before {} call {tool_use} to pair an after-record with",
                        event.tool
                    ),
                )
            })?,
    };
    let request = SnapshotRequest {
        tool: event.tool.clone(),
        session: Some(session.clone()),
        entry: None,
    };
    let hook_dir = dir.map_or_else(|| ctx.cwd.clone(), Path::to_path_buf);
    // Through a running server (its live store stays warm; kind `after`,
    // untagged, so it journals nothing), else an ordinary after-record.
    let via_server = server_idle
        .and_then(|_| serve::hook_snapshot(ctx, project, &hook_dir, &request, true).ok())
        .and_then(|doc| {
            doc["snapshot"]["checkpoint"]["commit"]
                .as_str()
                .map(str::to_owned)
        });
    let after = match via_server {
        Some(commit) => commit,
        None => match store.snapshot_after(&request) {
            Ok(o) => o.checkpoint.commit,
            Err(e) => {
                let e = checkpoint_error(e);
                count_skip(&store, &event.tool, &e);
                return Err(e);
            }
        },
    };
    let record = AfterCall {
        session: session.clone(),
        entry: tool_use.clone(),
        call: None,
        tool: event.tool.clone(),
        before,
        after,
        transcript: event.transcript.clone(),
        // Claude Code's own bash writes the real git dir (no broker).
        refs: Vec::new(),
    };
    journal.append_after(&record).map_err(checkpoint_error)?;
    Ok(with_transcript(
        json!({ "project": store.project().to_string_lossy(), "after": record }),
        event,
    ))
}

/// Adds the event's transcript path (what `bh rewind --claude` reads).
fn with_transcript(mut doc: Value, event: &Event) -> Value {
    if let Some(t) = &event.transcript {
        doc["transcript_path"] = json!(t);
    }
    doc
}
