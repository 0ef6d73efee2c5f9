//! `/rewind [ENTRY] [--both|--conversation|--files]` in the interactive
//! agent: the session's leaf back to ENTRY (a user message goes too, as Pi's
//! `/tree` does, so the next prompt replaces it) and/or the files back to the
//! checkpoint taken before the first mutating call at or after it. Without a
//! flag a terminal asks; without ENTRY the recent prompts are listed. Both
//! halves say how to undo them: the conversation's previous leaf stays in the
//! file (`/tree OLD`), the files get an undo point; `/redo` puts back the
//! files and the leaf of the last rewind. Only the paths the session's own
//! calls changed are rewound (the plan of `bh rewind`).

use bh_runtime::Live;
use bh_session::{Session, SummaryKind, summarize_entry};

use super::input::{Input, LineInput};
use crate::command_error::{checkpoint_error, rewind_error, session_error};
use crate::commands::checkpoint::rewind::{
    files_already_rewound, no_checkpoint, print_plan, rewind_files,
};
use crate::display::escape;
use crate::error::CliError;
use crate::ui::outln;

/// What a rewind puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rewind {
    Both,
    Conversation,
    Files,
}

impl Rewind {
    fn conversation(self) -> bool {
        self != Rewind::Files
    }
    fn files(self) -> bool {
        self != Rewind::Conversation
    }
}

const USAGE: &str = "usage: /rewind ENTRY [--both|--conversation|--files]";

/// How many recent prompts `/rewind` alone lists.
const RECENT: usize = 10;

/// The words after `/rewind`: the entry and the choice, if given.
fn parse(words: &[&str]) -> Result<(Option<String>, Option<Rewind>), CliError> {
    let mut entry = None;
    let mut mode = None;
    for w in words {
        let m = match *w {
            "--both" => Rewind::Both,
            "--conversation" => Rewind::Conversation,
            "--files" => Rewind::Files,
            flag if flag.starts_with("--") => {
                return Err(CliError::usage(format!("unknown option {flag}; {USAGE}")));
            }
            id if entry.is_none() => {
                entry = Some(id.to_owned());
                continue;
            }
            extra => {
                return Err(CliError::usage(format!("unexpected {extra:?}; {USAGE}")));
            }
        };
        if mode.replace(m).is_some_and(|old| old != m) {
            return Err(CliError::usage(format!(
                "choose one of --both, --conversation, --files; {USAGE}"
            )));
        }
    }
    Ok((entry, mode))
}

/// Runs one `/rewind …` line. `input` asks the choice when it is a line
/// editor (a terminal).
pub(super) async fn command(
    live: &mut Live,
    words: &[&str],
    input: &mut LineInput,
) -> Result<(), CliError> {
    let (entry, mode) = parse(words)?;
    let agent = live.agent_mut();
    let path = agent.session_path().to_path_buf();
    let session = Session::load(&path).map_err(session_error)?;
    let Some(entry) = entry else {
        list_recent(&session, agent.leaf())?;
        return Ok(());
    };
    let target = bh_runtime::resolve_entry(&session, &entry).map_err(rewind_error)?;
    let mode = match mode {
        Some(m) => m,
        None if input.is_editor() => match ask(input).await {
            Some(m) => m,
            None => {
                outln!("rewind cancelled; nothing changed")?;
                return Ok(());
            }
        },
        None => return Err(CliError::usage(format!("say what to rewind: {USAGE}"))),
    };
    let old_leaf = agent.leaf().map(str::to_owned);
    let mut files = None;
    if mode.files() {
        let Some(store) = agent.checkpoint_store() else {
            return Err(CliError::usage(
                "checkpoints are off, so files cannot be rewound (/rewind ENTRY --conversation)",
            ));
        };
        let context = serde_json::json!({
            "session": path,
            "leaf": old_leaf,
            "moved": mode.conversation(),
        });
        let force = bh_checkpoint::Force::None;
        match rewind_files(&session, store, target, &force, false, context)? {
            Some(r) => {
                print_plan(&r)?;
                outln!("undo: /redo")?;
                files = Some(r);
            }
            None if mode == Rewind::Files => {
                return Err(CliError::new(
                    crate::error::ErrorKind::NotFound,
                    format!("{}; nothing changed", no_checkpoint(&target.id)),
                ));
            }
            None => outln!("files unchanged: {}", no_checkpoint(&target.id))?,
        }
    }
    if mode.conversation() {
        // A failure now leaves the files rewound: the error says how to undo.
        let undone = |e: CliError| match &files {
            Some(done) => files_already_rewound(e, done, "/redo"),
            None => e,
        };
        let to = bh_runtime::conversation_leaf(&session, target);
        let appended = bh_runtime::move_leaf(&path, to.as_deref())
            .map_err(rewind_error)
            .map_err(undone)?;
        agent
            .branch(Some(&appended))
            .map_err(|e| CliError::internal(format!("cannot continue from {appended}: {e}")))
            .map_err(undone)?;
        let summary = summarize_entry(&session, target);
        if summary.kind == SummaryKind::User {
            outln!(
                "conversation rewound to before {} (your prompt: {}); undo: /tree {}",
                target.id,
                escape(summary.text.strip_prefix("user: ").unwrap_or(&summary.text)),
                old_leaf.as_deref().unwrap_or("-")
            )?;
        } else {
            outln!(
                "conversation rewound to {}; undo: /tree {}",
                target.id,
                old_leaf.as_deref().unwrap_or("-")
            )?;
        }
    }
    Ok(())
}

/// `/redo`: undoes the last rewind of the project — its files, and the
/// session's leaf when it moved it.
pub(super) fn redo(live: &mut Live) -> Result<(), CliError> {
    let agent = live.agent_mut();
    let Some(store) = agent.checkpoint_store() else {
        return Err(CliError::usage(
            "checkpoints are off, so there is no rewind to undo",
        ));
    };
    let Some(done) = store.undo_rewind().map_err(checkpoint_error)? else {
        return Err(CliError::new(
            crate::error::ErrorKind::NotFound,
            "no rewind to undo",
        ));
    };
    match &done.restore {
        Some(r) => outln!(
            "files put back: {} written, {} deleted",
            r.restored.len(),
            r.deleted.len()
        )?,
        None => outln!("files unchanged: the rewind had changed none")?,
    }
    let moved = done.context.get("moved").and_then(|v| v.as_bool()) == Some(true);
    let same =
        done.context.get("session").and_then(|v| v.as_str()) == agent.session_path().to_str();
    if moved && same {
        let leaf = done.context.get("leaf").and_then(|v| v.as_str());
        let path = agent.session_path().to_path_buf();
        let appended = bh_runtime::move_leaf(&path, leaf).map_err(rewind_error)?;
        agent
            .branch(Some(&appended))
            .map_err(|e| CliError::internal(format!("cannot continue from {appended}: {e}")))?;
        outln!("conversation back at {}", leaf.unwrap_or("the start"))?;
    }
    Ok(())
}

/// Asks which halves to rewind; `None` cancels.
async fn ask(input: &mut LineInput) -> Option<Rewind> {
    outln!(
        "rewind what? [b] conversation and files  [c] conversation only  [f] files only  (anything else cancels)"
    )
    // Nobody to ask: cancelled.
    .ok()?;
    match input.read("rewind [b/c/f]? ").await {
        Input::Line(l) => match l.trim().to_ascii_lowercase().as_str() {
            "b" | "both" => Some(Rewind::Both),
            "c" | "conversation" => Some(Rewind::Conversation),
            "f" | "files" => Some(Rewind::Files),
            _ => None,
        },
        Input::Interrupted | Input::Eof => None,
    }
}

/// The recent prompts on the active branch, to choose from.
fn list_recent(session: &Session, leaf: Option<&str>) -> std::io::Result<()> {
    let branch = leaf
        .and_then(|l| session.path_to_root(l).ok())
        .unwrap_or_default();
    let users: Vec<_> = branch
        .iter()
        .filter_map(|e| {
            let s = summarize_entry(session, e);
            (s.kind == SummaryKind::User).then_some((e.id.as_str(), s.text))
        })
        .collect();
    if users.is_empty() {
        outln!("(no prompts on this branch to rewind to)")?;
    }
    for (id, text) in users.iter().rev().take(RECENT).rev() {
        let text = text.strip_prefix("user: ").unwrap_or(text);
        outln!("{id}  {}", escape(text))?;
    }
    outln!("{USAGE}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_the_entry_and_one_choice() {
        assert_eq!(parse(&[]).unwrap(), (None, None));
        assert_eq!(
            parse(&["ab12", "--files"]).unwrap(),
            (Some("ab12".into()), Some(Rewind::Files))
        );
        assert_eq!(
            parse(&["--both", "ab12"]).unwrap(),
            (Some("ab12".into()), Some(Rewind::Both))
        );
        assert!(parse(&["ab12", "--files", "--both"]).is_err());
        assert!(parse(&["ab12", "--exact"]).is_err());
        assert!(parse(&["ab12", "cd34"]).is_err());
    }
}
