//! `bh rewind --claude [SESSION] [--prompt N|UUID]`: a Claude Code session's
//! prompts, from the transcript its hook events named (`transcript_path`,
//! kept with the after-records), and the files back to before the first
//! mutating call after the chosen prompt — the same plan, conflicts, dry run
//! and undo as `bh rewind`. Claude Code's own conversation is rewound with its
//! `/rewind` ("conversation only"), which the output says.

use std::collections::HashSet;
use std::io::BufRead;

use bh_checkpoint::{AfterCall, CallSpan, CheckpointError, Force, Store};
use serde_json::{Value, json};

use crate::command_error::checkpoint_error;
use crate::commands::checkpoint::rewind::print_plan;
use crate::context::Ctx;
use crate::display::escape;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;

/// One prompt of a transcript and the tool-use ids of the calls after it.
struct Prompt {
    uuid: String,
    text: String,
    /// Tool-use ids of this prompt's turn and every later one.
    calls_from: HashSet<String>,
}

/// The prompts of a Claude Code transcript (JSON lines: `type` `user` with
/// a string `message.content`, or text blocks and no `tool_result`; `isMeta`
/// lines are not prompts), each with the tool uses from it on.
fn prompts(path: &str) -> Result<Vec<Prompt>, CliError> {
    let file = fs_err::File::open(path).map_err(|e| {
        CliError::new(
            ErrorKind::NotFound,
            format!("cannot read the Claude Code transcript: {e}"),
        )
    })?;
    let mut prompts: Vec<Prompt> = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| CliError::internal(format!("cannot read {path}: {e}")))?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let content = &v["message"]["content"];
        match v["type"].as_str() {
            Some("user") if v["isMeta"] != true => {
                let text = match content {
                    Value::String(s) => Some(s.clone()),
                    Value::Array(blocks) if !blocks.iter().any(|b| b["type"] == "tool_result") => {
                        let t: Vec<&str> = blocks
                            .iter()
                            .filter(|b| b["type"] == "text")
                            .filter_map(|b| b["text"].as_str())
                            .collect();
                        (!t.is_empty()).then(|| t.join(" "))
                    }
                    _ => None,
                };
                if let (Some(text), Some(uuid)) = (text, v["uuid"].as_str()) {
                    prompts.push(Prompt {
                        uuid: uuid.to_owned(),
                        text,
                        calls_from: HashSet::new(),
                    });
                }
            }
            Some("assistant") => {
                for b in content.as_array().into_iter().flatten() {
                    if b["type"] == "tool_use"
                        && let Some(id) = b["id"].as_str()
                    {
                        for p in &mut prompts {
                            p.calls_from.insert(id.to_owned());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(prompts)
}

pub(super) fn run(
    ctx: &Ctx,
    store: &Store,
    session: Option<&str>,
    prompt: Option<&str>,
    force: &Force,
    dry_run: bool,
) -> Result<(), CliError> {
    let afters: Vec<AfterCall> = store.call_journal().afters().map_err(checkpoint_error)?;
    let session = match session {
        Some(s) => s.to_owned(),
        None => afters
            .iter()
            .rev()
            .find(|a| a.transcript.is_some())
            .map(|a| a.session.clone())
            .ok_or_else(|| {
                CliError::new(
                    ErrorKind::NotFound,
                    "no Claude Code session recorded in this project (the hook's PostToolUse records them)",
                )
            })?,
    };
    let mine: Vec<&AfterCall> = afters.iter().filter(|a| a.session == session).collect();
    let Some(transcript) = mine.iter().rev().find_map(|a| a.transcript.clone()) else {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!("no transcript recorded for Claude Code session {session}"),
        ));
    };
    let prompts = prompts(&transcript)?;
    let Some(chosen) = prompt else {
        if ctx.json {
            let list: Vec<Value> = prompts
                .iter()
                .enumerate()
                .map(|(i, p)| json!({ "n": i + 1, "uuid": p.uuid, "text": p.text }))
                .collect();
            return print_json(
                &json!({ "session": session, "transcript": transcript, "prompts": list }),
            );
        }
        for (i, p) in prompts.iter().enumerate() {
            outln!("{:>3}  {}  {}", i + 1, p.uuid, escape(&p.text))?;
        }
        outln!("rewind the files to before a prompt: bh rewind --claude {session} --prompt N")?;
        return Ok(());
    };
    let found = match chosen.parse::<usize>() {
        Ok(n) if n >= 1 => prompts.get(n - 1),
        _ => prompts.iter().find(|p| p.uuid.starts_with(chosen)),
    };
    let Some(p) = found else {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "no prompt {chosen:?} in {transcript} ({} prompts)",
                prompts.len()
            ),
        ));
    };
    let spans: Vec<CallSpan> = mine
        .iter()
        .filter(|a| p.calls_from.contains(&a.entry))
        .map(|a| CallSpan {
            tool: a.tool.clone(),
            call: Some(a.entry.clone()),
            before: a.before.clone(),
            after: Some(a.after.clone()),
            refs: a.refs.clone(),
        })
        .collect();
    if spans.is_empty() {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!("no recorded mutating call after prompt {chosen}; nothing changed"),
        ));
    }
    let context = json!({ "claude_session": session });
    let outcome = match store.rewind(&spans, force, dry_run, context) {
        Ok(o) => o,
        Err(e @ CheckpointError::RewindConflict { .. }) => {
            let plan = store.rewind_plan(&spans, force).ok();
            return Err(checkpoint_error(e).with_details(json!({ "plan": plan })));
        }
        Err(e) => return Err(checkpoint_error(e)),
    };
    let hint = "to rewind Claude Code's conversation to match: /rewind in Claude Code, choose the same prompt, and restore the conversation only (bh restored the code)";
    if ctx.json {
        return print_json(&json!({
            "project": store.project().to_string_lossy(),
            "session": session,
            "prompt": { "uuid": p.uuid, "text": p.text },
            "dry_run": dry_run,
            "rewind": outcome,
            "conversation": hint,
        }));
    }
    print_plan(&outcome)?;
    if dry_run {
        outln!("dry run: nothing was changed")?;
    } else {
        outln!("undo with: bh rewind --undo")?;
        outln!("{hint}")?;
    }
    Ok(())
}
