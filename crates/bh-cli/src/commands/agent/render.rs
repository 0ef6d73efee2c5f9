//! How the agent's events and results are shown: JSON lines for a machine,
//! streamed text for a person (answers on stdout, the rest on stderr).

use std::io::Write;
use std::path::Path;

use bh_core::{Event, RunOutcome, RunStop};
use bh_protocol::message::{ContentBlock, KnownBlock};
use bh_session::Session;

use crate::command_error::session_error;
use crate::display::style;
use crate::error::{CliError, ErrorKind};
use crate::ui::{errln, out, outln};

/// Where output goes: JSON lines or a person.
pub(super) struct Printer {
    pub(super) json: bool,
}

impl Printer {
    pub(super) fn line(&self, v: &impl serde::Serialize) {
        if let Ok(text) = serde_json::to_string(v) {
            // A closed stdout is noted (`ui::pipe_closed`); the run goes on.
            drop(crate::ui::outln!("{text}"));
        }
    }

    pub(super) fn event(&self, e: Event) {
        if self.json {
            self.line(&e);
            return;
        }
        match e {
            Event::ToolExecutionStart {
                tool_name, args, ..
            } => {
                let what = args
                    .get("path")
                    .or_else(|| args.get("command"))
                    .or_else(|| args.get("pattern"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("");
                errln!(
                    "{} {}",
                    paint(style::CYAN, &format!("→ {tool_name}")),
                    crate::display::escape(what)
                );
            }
            Event::ToolExecutionEnd {
                tool_name,
                is_error: true,
                result,
                ..
            } => {
                let text = result
                    .content
                    .iter()
                    .find_map(|b| match b {
                        ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                        _ => None,
                    })
                    .unwrap_or("");
                errln!(
                    "  {}: {}",
                    paint(style::RED, &format!("{tool_name} failed")),
                    crate::display::escape(text.lines().next().unwrap_or(""))
                );
            }
            Event::Checkpoint { id, .. } => {
                errln!("  {}", paint(style::MAGENTA, &format!("checkpoint {id}")));
            }
            Event::Warning { message } => errln!(
                "{} {}",
                paint(style::YELLOW, "bh: warning:"),
                crate::display::escape(&message)
            ),
            Event::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => {
                errln!(
                    "{} in {} ({attempt}/{max_attempts}): {}",
                    paint(style::YELLOW, "bh: retrying"),
                    crate::units::human_duration_ms(delay_ms),
                    crate::display::escape(&error_message)
                );
            }
            Event::AutoRetryEnd {
                success: false,
                final_error: Some(e),
                ..
            } => errln!(
                "{} {}",
                paint(style::RED, "bh: retry failed:"),
                crate::display::escape(&e)
            ),
            _ => {}
        }
    }
}

pub(super) fn final_text(out: &RunOutcome) -> String {
    out.last_assistant
        .as_ref()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub(super) fn outcome_error(out: &RunOutcome) -> Option<CliError> {
    let reason = out.reason.clone().unwrap_or_default();
    match out.stop {
        RunStop::Completed => None,
        RunStop::Error => Some(CliError::new(
            ErrorKind::WorkerFailed,
            format!("the model call failed: {reason}"),
        )),
        RunStop::Cancelled => Some(CliError::new(ErrorKind::Interrupted, reason)),
        RunStop::Limit => Some(CliError::new(
            ErrorKind::Limit,
            format!("{} limit: {reason}", out.limit.map_or("a", |l| l.as_str())),
        )),
        RunStop::Harness => Some(CliError::new(ErrorKind::Refused, reason)),
    }
}

/// Lines of a running tool's output shown as they arrive; past them the
/// output is folded to its last [`TAIL_LINES`] and a count (as Pi folds it).
const HEAD_LINES: usize = 20;
/// Lines shown at the end of a folded output.
const TAIL_LINES: usize = 5;

/// A running tool's output as printed so far (interactive mode).
#[derive(Default)]
pub(super) struct ToolOutput {
    call: String,
    /// The text of the last update.
    last: String,
    /// Output bytes seen (the whole output's count, not the tail's).
    printed: usize,
    /// Whether the last byte printed ended a line.
    mid_line: bool,
    /// Whole lines printed live.
    shown: usize,
    /// Once folding: the last lines (the final one possibly unfinished).
    tail: std::collections::VecDeque<String>,
    /// Lines neither shown live nor kept in `tail`.
    hidden: usize,
    /// A thinking block is being shown (its label printed, no newline yet).
    thinking: bool,
}

impl ToolOutput {
    /// Print what an update adds to the previous one. Updates carry the tail
    /// of the output so far; once it is truncated, the new part is the last
    /// `totalBytes - printed` bytes of the tail.
    fn update(&mut self, call: &str, partial: &bh_core::ToolExecutionResult) {
        if self.call != call {
            *self = ToolOutput {
                call: call.to_owned(),
                ..ToolOutput::default()
            };
        }
        let text: String = partial
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let total = partial
            .details
            .as_ref()
            .and_then(|d| d.pointer("/truncation/totalBytes"))
            .and_then(|v| v.as_u64())
            .map_or(text.len(), |n| usize::try_from(n).unwrap_or(usize::MAX));
        let new = if total <= text.len() && text.starts_with(&self.last) {
            text[self.last.len()..].to_owned()
        } else {
            let n = total.saturating_sub(self.printed).min(text.len());
            let mut start = text.len() - n;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text[start..].to_owned()
        };
        self.take(&new);
        self.printed = total;
        self.last = text;
    }

    /// Shows `new` live while the head lasts, then keeps only the tail.
    fn take(&mut self, new: &str) {
        let mut err = std::io::stderr().lock();
        for piece in new.split_inclusive('\n') {
            if self.shown < HEAD_LINES && self.tail.is_empty() {
                let _ = write!(err, "{}", crate::display::escape_keep_newlines(piece));
                self.mid_line = !piece.ends_with('\n');
                if !self.mid_line {
                    self.shown += 1;
                }
                continue;
            }
            // Folding: a piece continues the unfinished last line, if any.
            match self.tail.back_mut() {
                Some(last) if !last.ends_with('\n') => last.push_str(piece),
                _ => self.tail.push_back(piece.to_owned()),
            }
            while self.tail.len() > TAIL_LINES {
                self.tail.pop_front();
                self.hidden += 1;
            }
        }
        let _ = err.flush();
    }

    /// The tool ended: finish the line its output left open, and show a
    /// folded output's count and tail.
    fn end(&mut self, full_output: Option<&str>, total_lines: Option<usize>) {
        if self.mid_line {
            errln!();
        }
        if let Some(total) = total_lines {
            // The updates skip what a truncated output dropped: count from
            // the tool's own total.
            self.hidden = self
                .hidden
                .max(total.saturating_sub(self.shown + self.tail.len()));
        }
        if !self.tail.is_empty() {
            if self.hidden > 0 {
                let where_ = full_output.map_or_else(
                    || "; the session keeps what the model saw".to_owned(),
                    |p| format!("; full output in {}", crate::display::escape(p)),
                );
                errln!("  … ({} more lines{where_})", self.hidden);
            }
            let mut err = std::io::stderr().lock();
            for line in &self.tail {
                let _ = write!(err, "{}", crate::display::escape_keep_newlines(line));
            }
            if self.tail.back().is_some_and(|l| !l.ends_with('\n')) {
                let _ = writeln!(err);
            }
        }
        *self = ToolOutput {
            thinking: self.thinking,
            ..ToolOutput::default()
        };
    }

    /// Thinking text, set apart from the answer: on its own lines after a
    /// `thinking:` label, dim on a colour terminal.
    fn think(&mut self, delta: &str) {
        let mut err = std::io::stderr().lock();
        if !self.thinking {
            self.thinking = true;
            let _ = write!(err, "{}", paint(DIM, "thinking: "));
        }
        let _ = write!(
            err,
            "{}",
            paint(DIM, &crate::display::escape_keep_newlines(delta))
        );
        let _ = err.flush();
    }

    /// Ends a thinking block shown by [`think`](Self::think), if one is open.
    fn end_thinking(&mut self) {
        if std::mem::take(&mut self.thinking) {
            errln!();
        }
    }
}

const DIM: &str = crate::display::style::DIM;

/// `text` in SGR `code` when stderr is coloured (`--color`, `NO_COLOR`).
fn paint(code: &str, text: &str) -> String {
    crate::display::paint(crate::display::color_stderr(), code, text)
}

/// Streams an event to the terminal: answer text on stdout, the rest on stderr
/// (a running tool's output too, as it arrives).
pub(super) fn stream_event(e: Event, tool_output: &mut ToolOutput) -> std::io::Result<()> {
    match e {
        Event::ToolExecutionUpdate {
            tool_call_id,
            partial_result,
            ..
        } => tool_output.update(&tool_call_id, &partial_result),
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::TextDelta { delta, .. },
                    ..
                },
            ..
        } => {
            // The answer starts on a line of its own after thinking.
            tool_output.end_thinking();
            crate::ui::out!("{delta}")?;
        }
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::ThinkingDelta { delta, .. },
                    ..
                },
            ..
        } => tool_output.think(&delta),
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::ThinkingEnd { .. },
                    ..
                },
            ..
        } => tool_output.end_thinking(),
        other => {
            tool_output.end_thinking();
            if matches!(other, Event::ToolExecutionStart { .. }) {
                outln!()?;
            }
            if let Event::ToolExecutionEnd { result, .. } = &other {
                let details = result.details.as_ref();
                let full = details
                    .and_then(|d| d.get("fullOutputPath"))
                    .and_then(|v| v.as_str());
                let total = details
                    .and_then(|d| d.pointer("/truncation/totalLines"))
                    .and_then(|v| v.as_u64())
                    .and_then(|n| usize::try_from(n).ok());
                tool_output.end(full, total);
            }
            Printer { json: false }.event(other);
        }
    }
    Ok(())
}

/// `/tree`: the session drawn as `bh session tree` draws it, the agent's
/// leaf marked (it may not be the file's last entry after a branch move).
pub(super) fn print_tree(path: &Path, leaf: Option<&str>) -> Result<(), CliError> {
    let s = Session::load(path).map_err(session_error)?;
    out!(
        "{}",
        crate::commands::session::tree_text(&s, leaf, false, crate::display::stdout_width())
    )?;
    Ok(())
}
