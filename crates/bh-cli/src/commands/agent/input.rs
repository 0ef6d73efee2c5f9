//! Reading the interactive agent's input.
//!
//! On a terminal: a real line editor (rustyline) — history kept per user
//! across sessions, arrow keys and Ctrl-R, **bracketed paste** (a pasted
//! multi-line text is one prompt, submitted by Enter), multi-line input
//! (Alt-Enter or Ctrl-J inserts a newline; a line ending in `\` continues),
//! and completion of slash commands and their arguments (worktree names,
//! checkpoint ids) from a callback. Elsewhere (`-i` with a pipe, the tests):
//! one prompt per line of stdin.
//!
//! The editor runs on its own thread and reads only when asked, so while a
//! turn runs the terminal is in its normal mode and Ctrl-C is a signal; at the
//! prompt Ctrl-C is [`Input::Interrupted`].

use std::borrow::Cow;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, Config, Context, Editor, EventHandler, Helper, Highlighter, Hinter, KeyCode, KeyEvent,
    Modifiers,
};
use tokio::sync::mpsc;

/// One thing the user gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A prompt or a command (possibly several lines).
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D, or the end of the input.
    Eof,
}

/// Candidates for completing the word under the cursor, given the words
/// before it (`["/worktree", "enter"]` → worktree names).
pub type Completions = Arc<dyn Fn(&[&str]) -> Vec<String> + Send + Sync>;

/// The source of the REPL's input.
pub struct LineInput {
    ask: Option<std_mpsc::Sender<String>>,
    answers: mpsc::UnboundedReceiver<Input>,
}

impl LineInput {
    /// A line editor on the terminal; history in `history` (created on first
    /// save, 0600); `commands` are the slash commands offered for completion.
    pub fn editor(
        history: Option<PathBuf>,
        commands: &'static [&'static str],
        complete: Completions,
    ) -> std::io::Result<LineInput> {
        let config = Config::builder()
            .auto_add_history(false)
            .history_ignore_dups(true)
            .map_err(std::io::Error::other)?
            .max_history_size(5000)
            .map_err(std::io::Error::other)?
            .bracketed_paste(true)
            .build();
        let mut rl: Editor<ReplHelper, DefaultHistory> =
            Editor::with_config(config).map_err(std::io::Error::other)?;
        rl.set_helper(Some(ReplHelper { commands, complete }));
        for key in [
            KeyEvent(KeyCode::Enter, Modifiers::ALT),
            KeyEvent(KeyCode::Char('j'), Modifiers::CTRL),
        ] {
            rl.bind_sequence(key, EventHandler::Simple(Cmd::Newline));
        }
        if let Some(h) = &history {
            // A missing file is a first run; an unreadable one just starts empty.
            let _ = rl.load_history(h);
        }
        let (ask, asked) = std_mpsc::channel::<String>();
        let (tx, answers) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            while let Ok(prompt) = asked.recv() {
                let answer = match rl.readline(&prompt) {
                    Ok(line) => {
                        let line = join_continuations(&line);
                        if !line.trim().is_empty() {
                            let _ = rl.add_history_entry(line.as_str());
                            if let Some(h) = &history {
                                save_history(&mut rl, h);
                            }
                        }
                        Input::Line(line)
                    }
                    Err(ReadlineError::Interrupted) => Input::Interrupted,
                    Err(_) => Input::Eof,
                };
                let eof = answer == Input::Eof;
                if tx.send(answer).is_err() || eof {
                    break;
                }
            }
        });
        Ok(LineInput {
            ask: Some(ask),
            answers,
        })
    }

    /// One prompt per line of stdin (not a terminal).
    pub fn lines() -> LineInput {
        let (tx, answers) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(Input::Line(line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(Input::Eof);
        });
        LineInput { ask: None, answers }
    }

    /// A line editor on a terminal (not lines of a pipe).
    pub fn is_editor(&self) -> bool {
        self.ask.is_some()
    }

    /// The next input, showing `prompt`.
    pub async fn read(&mut self, prompt: &str) -> Input {
        match &self.ask {
            Some(ask) => {
                if ask.send(prompt.to_owned()).is_err() {
                    return Input::Eof;
                }
            }
            None => {
                // Nobody to prompt: noted (`ui::pipe_closed`), the read goes on.
                drop(crate::ui::out!("{prompt}"));
            }
        }
        self.answers.recv().await.unwrap_or(Input::Eof)
    }
}

/// Saves the history; rustyline creates the file 0600 (umask 077, then
/// `fchmod`), since it holds what the user typed.
fn save_history(rl: &mut Editor<ReplHelper, DefaultHistory>, path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        let _ = fs_err::create_dir_all(dir);
    }
    let _ = rl.save_history(path);
}

/// Lines ending in `\` continue on the next one: the backslash goes, the
/// newline stays.
fn join_continuations(text: &str) -> String {
    text.replace("\\\n", "\n")
}

#[derive(Helper, Hinter, Highlighter)]
struct ReplHelper {
    commands: &'static [&'static str],
    complete: Completions,
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        Ok(complete_line(self.commands, &self.complete, line, pos))
    }
}

/// Where the word under the cursor starts and what may replace it.
fn complete_line(
    commands: &[&str],
    complete: &Completions,
    line: &str,
    pos: usize,
) -> (usize, Vec<Pair>) {
    let before = &line[..pos.min(line.len())];
    if !before.starts_with('/') {
        return (pos, Vec::new());
    }
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let word = &before[start..];
    let words: Vec<&str> = before[..start].split_whitespace().collect();
    let candidates: Vec<String> = if words.is_empty() {
        commands.iter().map(|c| (*c).to_owned()).collect()
    } else {
        complete(&words)
    };
    let pairs = candidates
        .into_iter()
        .filter(|c| c.starts_with(word))
        .map(|c| Pair {
            display: display_of(&c).into_owned(),
            replacement: c,
        })
        .collect();
    (start, pairs)
}

fn display_of(candidate: &str) -> Cow<'_, str> {
    crate::display::escape(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pairs: &[Pair]) -> Vec<&str> {
        pairs.iter().map(|p| p.replacement.as_str()).collect()
    }

    #[test]
    fn completes_commands_then_their_arguments() {
        let complete: Completions = Arc::new(|words: &[&str]| match words {
            ["/worktree"] => vec!["create".into(), "enter".into(), "list".into()],
            ["/worktree", "enter"] => vec!["feat-a".into(), "feat-b".into(), "fix".into()],
            _ => Vec::new(),
        });
        let cmds = &["/tree", "/worktree", "/quit"];
        let (start, p) = complete_line(cmds, &complete, "/w", 2);
        assert_eq!((start, names(&p)), (0, vec!["/worktree"]));
        let (start, p) = complete_line(cmds, &complete, "/worktree e", 11);
        assert_eq!((start, names(&p)), (10, vec!["enter"]));
        let (start, p) = complete_line(cmds, &complete, "/worktree enter feat", 20);
        assert_eq!((start, names(&p)), (16, vec!["feat-a", "feat-b"]));
        // Plain prompts are not completed.
        let (_, p) = complete_line(cmds, &complete, "fix the /w", 10);
        assert!(p.is_empty());
    }

    #[test]
    fn a_trailing_backslash_continues_the_line() {
        assert_eq!(join_continuations("one \\\ntwo"), "one \ntwo");
        assert_eq!(join_continuations("pasted\nlines"), "pasted\nlines");
    }
}
