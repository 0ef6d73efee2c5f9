//! What a `bash` call tells the model: the (tail of the) output with Pi's
//! truncation notice, the status line of a failure (exit code, timeout,
//! abort), the broker's note on the command's git writes, and the details
//! (`truncation`, `fullOutputPath`, `git`, `withheldEnv`).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::Outcome;
use crate::ContentBlock;
use crate::ToolResult;
use crate::git_broker::Brokered;
use crate::truncate::{DEFAULT_MAX_BYTES, Truncation, format_size};

/// A finished call, as [`tool_result`] needs it.
pub(super) struct Finished {
    pub(super) outcome: Outcome,
    pub(super) truncation: Truncation,
    /// Where the whole output was saved, when it was cut.
    pub(super) full_path: Option<PathBuf>,
    pub(super) last_line_bytes: usize,
    /// The command's git writes the broker carried over (none: no overlay or
    /// nothing written).
    pub(super) brokered: Option<Brokered>,
    /// The timeout as the model gave it (for "timed out after N seconds").
    pub(super) timeout_label: String,
}

impl Finished {
    /// The output (or `empty`), with Pi's notice when it was cut, and the
    /// truncation details.
    fn output(&self, empty: &str) -> (String, Option<Value>) {
        let tr = &self.truncation;
        let mut text = if tr.content.is_empty() {
            empty.to_string()
        } else {
            tr.content.clone()
        };
        if !tr.truncated {
            return (text, None);
        }
        let shown = self
            .full_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(not saved)".to_string());
        let start_line = tr.total_lines - tr.output_lines + 1;
        let end_line = tr.total_lines;
        if tr.last_line_partial {
            text.push_str(&format!(
                "\n\n[Showing last {} of line {end_line} (line is {}). Full output: {shown}]",
                format_size(tr.output_bytes),
                format_size(self.last_line_bytes)
            ));
        } else if tr.truncated_by == Some("lines") {
            text.push_str(&format!(
                "\n\n[Showing lines {start_line}-{end_line} of {}. Full output: {shown}]",
                tr.total_lines
            ));
        } else {
            text.push_str(&format!(
                "\n\n[Showing lines {start_line}-{end_line} of {} ({} limit). Full output: {shown}]",
                tr.total_lines,
                format_size(DEFAULT_MAX_BYTES)
            ));
        }
        let mut details = json!({ "truncation": tr.to_value() });
        if let (Some(p), Some(obj)) = (&self.full_path, details.as_object_mut()) {
            obj.insert("fullOutputPath".into(), json!(p.display().to_string()));
        }
        (text, Some(details))
    }

    /// `text` with the broker's note appended, if it carried anything.
    fn with_git(&self, text: String) -> String {
        match &self.brokered {
            Some(b) => append(text, b.note()),
            None => text,
        }
    }
}

fn append(text: String, status: String) -> String {
    if text.is_empty() {
        status
    } else {
        format!("{text}\n\n{status}")
    }
}

/// The tool's result: `Ok` for an exit of 0, else the error text the model
/// sees; what the broker carried over in `details.git` (failed commands
/// included: the after-record takes it from there for rewinds), the
/// variables the command did not get in `details.withheldEnv`.
pub(super) fn tool_result(f: &Finished, withheld: &[String]) -> Result<ToolResult, String> {
    let result = match f.outcome {
        Outcome::Aborted => Err(append(
            f.with_git(f.output("").0),
            "Command aborted".to_string(),
        )),
        Outcome::TimedOut => Err(append(
            f.with_git(f.output("").0),
            format!("Command timed out after {} seconds", f.timeout_label),
        )),
        Outcome::Exited(code) => {
            let (text, details) = f.output("(no output)");
            let text = f.with_git(text);
            match code {
                Some(c) if c != 0 => Err(append(text, format!("Command exited with code {c}"))),
                _ => Ok(ToolResult {
                    content: vec![ContentBlock::Text { text }],
                    details,
                    is_error: false,
                }),
            }
        }
    };
    if f.brokered.is_none() && withheld.is_empty() {
        return result;
    }
    let mut r = result.unwrap_or_else(ToolResult::error);
    let d = r.details.get_or_insert_with(|| json!({}));
    if let Some(obj) = d.as_object_mut() {
        if let Some(b) = &f.brokered {
            obj.insert("git".into(), b.to_value());
        }
        if !withheld.is_empty() {
            obj.insert("withheldEnv".into(), json!(withheld));
        }
    }
    Ok(r)
}
