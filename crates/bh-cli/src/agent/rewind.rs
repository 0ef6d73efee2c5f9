//! `/rewind [ENTRY] [--both|--conversation|--files]` in the interactive
//! agent: the session's leaf back to ENTRY (a user message goes too, as Pi's
//! `/tree` does, so the next prompt replaces it) and/or the files back to the
//! checkpoint taken before the first mutating call at or after it. Without a
//! flag a terminal asks; without ENTRY the recent prompts are listed. Both
//! halves say how to undo them: the conversation's previous leaf stays in the
//! file (`/tree OLD`), the files get an undo point (`/restore ID --exact`).

use bh_runtime::Live;
use bh_session::{Session, SummaryKind, summarize_entry};

use super::input::{Input, LineInput};
use super::session_error;
use crate::checkpoint::rewind::{
    files_already_rewound, no_checkpoint, restore_files, rewind_error,
};
use crate::display::escape;
use crate::error::CliError;

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
        list_recent(&session, agent.leaf());
        return Ok(());
    };
    let target = bh_runtime::resolve_entry(&session, &entry).map_err(rewind_error)?;
    let mode = match mode {
        Some(m) => m,
        None if input.is_editor() => match ask(input).await {
            Some(m) => m,
            None => {
                println!("rewind cancelled; nothing changed");
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
        match restore_files(&session, store, target)? {
            Some((cp, r)) => {
                println!(
                    "files rewound to checkpoint {} ({} written, {} deleted); undo: /restore {} --exact",
                    cp.id,
                    r.restored.len(),
                    r.deleted.len(),
                    r.safety.id
                );
                files = Some((cp, r));
            }
            None if mode == Rewind::Files => {
                return Err(CliError::new(
                    crate::error::ErrorKind::NotFound,
                    format!("{}; nothing changed", no_checkpoint(&target.id)),
                ));
            }
            None => println!("files unchanged: {}", no_checkpoint(&target.id)),
        }
    }
    if mode.conversation() {
        // A failure now leaves the files rewound: the error says how to undo.
        let undone = |e: CliError| match &files {
            Some(done) => {
                files_already_rewound(e, done, &format!("/restore {} --exact", done.1.safety.id))
            }
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
            println!(
                "conversation rewound to before {} (your prompt: {}); undo: /tree {}",
                target.id,
                escape(summary.text.strip_prefix("user: ").unwrap_or(&summary.text)),
                old_leaf.as_deref().unwrap_or("-")
            );
        } else {
            println!(
                "conversation rewound to {}; undo: /tree {}",
                target.id,
                old_leaf.as_deref().unwrap_or("-")
            );
        }
    }
    Ok(())
}

/// Asks which halves to rewind; `None` cancels.
async fn ask(input: &mut LineInput) -> Option<Rewind> {
    println!(
        "rewind what? [b] conversation and files  [c] conversation only  [f] files only  (anything else cancels)"
    );
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
fn list_recent(session: &Session, leaf: Option<&str>) {
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
        println!("(no prompts on this branch to rewind to)");
    }
    for (id, text) in users.iter().rev().take(RECENT).rev() {
        let text = text.strip_prefix("user: ").unwrap_or(text);
        println!("{id}  {}", escape(text));
    }
    println!("{USAGE}");
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
