//! One entry of a session as a card: its header (role, id, time, model,
//! label, badges) and body. A tool call and its result are one card: the
//! result's entry is drawn inside the call that made it (its anchor kept),
//! and an edit shows one diff — the result's own (`details.diff`, with Pi's
//! line numbers) when it has one, else the call's arguments as a diff.

use std::collections::HashMap;
use std::fmt::Write as _;

use bh_protocol::EntryType;
use bh_session::{Session, Summary, SummaryKind};
use serde_json::Value;

use crate::html::push_escaped;
pub(crate) use crate::text::unified;
use crate::text::{diff, pre, text};

/// Outputs longer than this many lines can be folded (an open `<details>`
/// saying how long they are); every output sits in a scroll box (`pre.out`).
const SHORT_OUTPUT_LINES: usize = 40;

/// A checkpoint bh took before a tool call of a session it did not write
/// (Pi's): the store tags it with the assistant entry that made the call and
/// the tool's name (the call journal, in call order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallCheckpoint {
    /// The assistant entry that made the call.
    pub entry: String,
    /// The tool's name (`edit`, `write`, `bash` …).
    pub tool: String,
    /// The checkpoint's short id.
    pub id: String,
}

/// What rendering an entry needs to know about the rest of the session.
pub(crate) struct View<'a> {
    pub s: &'a Session,
    pub summaries: &'a [Summary],
    /// Each entry's line, parsed (`Null` when it cannot be read).
    pub lines: Vec<Value>,
    pub labels: HashMap<&'a str, &'a str>,
    pub leaf: Option<&'a str>,
    /// Tool-call id → the index of the result entry drawn inside its call.
    pub results: HashMap<String, usize>,
    /// (assistant entry, tool) → checkpoint ids, in call order.
    pub badges: HashMap<(String, String), Vec<String>>,
}

impl<'a> View<'a> {
    /// The view of the entries `shown` (indices in the session), pairing
    /// each tool result with a call among them.
    pub fn new(
        s: &'a Session,
        summaries: &'a [Summary],
        shown: &[usize],
        checkpoints: &[CallCheckpoint],
    ) -> View<'a> {
        let lines: Vec<Value> = s
            .entries()
            .iter()
            .map(|e| {
                s.entry_line(e)
                    .ok()
                    .and_then(|l| serde_json::from_slice(&l).ok())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let mut calls = std::collections::HashSet::new();
        for &ix in shown {
            for block in lines[ix]["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if block["type"] == "toolCall"
                    && let Some(id) = block["id"].as_str()
                {
                    calls.insert(id.to_owned());
                }
            }
        }
        let mut results = HashMap::new();
        for &ix in shown {
            let msg = &lines[ix]["message"];
            if msg["role"] == "toolResult"
                && let Some(id) = msg["toolCallId"].as_str()
                && calls.contains(id)
            {
                results.entry(id.to_owned()).or_insert(ix);
            }
        }
        let mut badges: HashMap<(String, String), Vec<String>> = HashMap::new();
        for c in checkpoints {
            badges
                .entry((c.entry.clone(), c.tool.clone()))
                .or_default()
                .push(c.id.clone());
        }
        View {
            s,
            summaries,
            lines,
            labels: s
                .labels()
                .iter()
                .map(|l| (l.target_id.as_str(), l.label.as_str()))
                .collect(),
            leaf: s.leaf().map(|e| e.id.as_str()),
            results,
            badges,
        }
    }

    /// A tool result drawn inside its call's card.
    pub fn is_paired_result(&self, ix: usize) -> bool {
        let msg = &self.lines[ix]["message"];
        msg["role"] == "toolResult"
            && msg["toolCallId"]
                .as_str()
                .is_some_and(|id| self.results.get(id) == Some(&ix))
    }

    /// Bookkeeping a reader does not need: model and thinking-level changes,
    /// labels, session info, usage, extension state (`custom`, such as
    /// `better-harness.set-leaf`), hidden extension messages, and messages
    /// with nothing to show.
    pub fn is_internal(&self, ix: usize) -> bool {
        let e = &self.s.entries()[ix];
        let line = &self.lines[ix];
        match &e.kind {
            EntryType::Message => {
                let msg = &line["message"];
                let sum = &self.summaries[ix];
                !sum.is_error
                    && msg["errorMessage"].as_str().is_none_or(str::is_empty)
                    && match msg["role"].as_str() {
                        Some("user" | "assistant" | "custom") => is_empty(&msg["content"]),
                        _ => false,
                    }
            }
            EntryType::CustomMessage => line["display"] == false || is_empty(&line["content"]),
            EntryType::Compaction | EntryType::BranchSummary => false,
            _ => true,
        }
    }

    /// The entry's card.
    pub fn section(&self, b: &mut String, ix: usize) {
        let e = &self.s.entries()[ix];
        let sum = &self.summaries[ix];
        let line = &self.lines[ix];
        let msg = &line["message"];
        let role = msg["role"].as_str().unwrap_or(e.kind.as_str());
        let mut class = format!("entry role-{}", css_word(role));
        if sum.kind == SummaryKind::Meta {
            class.push_str(" meta");
        }
        if sum.is_error {
            class.push_str(" error");
        }
        let is_leaf = self.leaf == Some(e.id.as_str());
        if is_leaf {
            class.push_str(" active-leaf");
        }
        if self.labels.contains_key(e.id.as_str()) {
            class.push_str(" labeled");
        }
        let _ = write!(b, "<section class=\"{class}\" id=\"e-");
        push_escaped(b, &e.id);
        b.push_str("\"><header><span class=\"role\">");
        push_escaped(b, role);
        b.push_str("</span><code>");
        push_escaped(b, &e.id);
        b.push_str("</code>");
        for t in [e.timestamp.as_deref(), msg["model"].as_str()]
            .into_iter()
            .flatten()
        {
            b.push_str("<span>");
            push_escaped(b, t);
            b.push_str("</span>");
        }
        if let Some(l) = self.labels.get(e.id.as_str()) {
            b.push_str("<span class=\"badge\">");
            push_escaped(b, l);
            b.push_str("</span>");
        }
        if let Some(cp) = &sum.checkpoint {
            checkpoint_badge(b, cp);
        }
        if sum.is_error {
            b.push_str("<span class=\"badge err\">error</span>");
        }
        if is_leaf {
            b.push_str("<span class=\"badge\">active leaf</span>");
        }
        b.push_str("</header>\n");
        self.body(b, ix, role);
        b.push_str("</section>\n");
    }

    fn body(&self, b: &mut String, ix: usize, role: &str) {
        let e = &self.s.entries()[ix];
        let sum = &self.summaries[ix];
        let line = &self.lines[ix];
        let msg = &line["message"];
        match (&e.kind, role) {
            (EntryType::Message, "toolResult") => self.result(b, ix, None),
            (EntryType::Message, "bashExecution") => {
                pre(
                    b,
                    &format!("$ {}", msg["command"].as_str().unwrap_or("")),
                    "",
                );
                output(b, msg["output"].as_str().unwrap_or(""), false);
            }
            (EntryType::Message, "branchSummary" | "compactionSummary") => {
                text(b, msg["summary"].as_str().unwrap_or(""), "text");
            }
            (EntryType::Message, _) => {
                self.content(b, &e.id, &msg["content"]);
                if let Some(err) = msg["errorMessage"].as_str().filter(|t| !t.is_empty()) {
                    text(b, err, "error-text");
                }
            }
            (EntryType::CustomMessage, _) => self.content(b, &e.id, &line["content"]),
            (EntryType::Compaction | EntryType::BranchSummary, _) => {
                b.push_str("<details><summary>");
                push_escaped(b, &sum.text);
                b.push_str("</summary>");
                text(b, line["summary"].as_str().unwrap_or(""), "text");
                b.push_str("</details>");
            }
            _ => text(b, &sum.text, "text"),
        }
    }

    fn content(&self, b: &mut String, entry: &str, c: &Value) {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        match c {
            Value::String(t) => text(b, t, "text"),
            Value::Array(blocks) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => text(b, block["text"].as_str().unwrap_or(""), "text"),
                        Some("thinking") => thinking(b, block["thinking"].as_str().unwrap_or("")),
                        Some("redactedThinking") => thinking(b, "(redacted thinking)"),
                        Some("image") => image(b, block),
                        Some("toolCall") => {
                            let name = block["name"].as_str().unwrap_or("?");
                            let n = taken.entry(name).or_default();
                            let badge = self
                                .badges
                                .get(&(entry.to_owned(), name.to_owned()))
                                .and_then(|ids| ids.get(*n));
                            *n += 1;
                            self.tool_call(b, block, badge.map(String::as_str));
                        }
                        Some(other) => text(b, &format!("({other} block)"), "text thinking"),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// A tool call and, when it is among the entries shown, its result.
    fn tool_call(&self, b: &mut String, block: &Value, checkpoint: Option<&str>) {
        let name = block["name"].as_str().unwrap_or("?");
        let args = &block["arguments"];
        let result = block["id"]
            .as_str()
            .and_then(|id| self.results.get(id))
            .copied();
        let failed = result.is_some_and(|ix| self.summaries[ix].is_error);
        // bh's own agent (and the executor's, in a checkout) records the
        // checkpoint in the result's details; a Pi session's comes from the
        // store (`checkpoint`).
        let recorded = result.and_then(|ix| {
            self.lines[ix]["message"]["details"]["checkpoint"]
                .as_str()
                .map(|c| c.chars().take(12).collect::<String>())
        });
        let checkpoint = checkpoint.or(recorded.as_deref());
        b.push_str("<div class=\"tool");
        if failed {
            b.push_str(" error");
        }
        b.push_str("\" data-tool=\"");
        push_escaped(b, name);
        b.push_str("\"><div class=\"head\"><span class=\"name\">");
        push_escaped(b, name);
        b.push_str("</span>");
        if let Some(p) = args["path"].as_str() {
            b.push_str("<code>");
            push_escaped(b, p);
            b.push_str("</code>");
        }
        if let Some(cp) = checkpoint {
            checkpoint_badge(b, cp);
        }
        if failed {
            b.push_str("<span class=\"badge err\">error</span>");
        }
        b.push_str("</div><div class=\"body\">");
        let result_diff =
            result.and_then(|ix| self.lines[ix]["message"]["details"]["diff"].as_str());
        match name {
            "edit" if result_diff.is_none() => {
                for (old, new) in edits(args) {
                    diff(b, old, new);
                }
            }
            "edit" => {}
            "write" => {
                let content = args["content"].as_str().unwrap_or("");
                let n = content.lines().count();
                let _ = write!(
                    b,
                    "<details class=\"content\"{}><summary>content ({n} line{})</summary>",
                    if n <= SHORT_OUTPUT_LINES { " open" } else { "" },
                    if n == 1 { "" } else { "s" }
                );
                pre(b, content, "out");
                b.push_str("</details>");
            }
            "bash" => pre(
                b,
                &format!("$ {}", args["command"].as_str().unwrap_or("")),
                "",
            ),
            _ if scalar_args(args) => inline_args(b, args),
            _ => pre(
                b,
                &serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string()),
                "",
            ),
        }
        if let Some(ix) = result {
            self.result(b, ix, Some(name));
        }
        b.push_str("</div></div>\n");
    }

    /// A tool result's diff and output; `call` names the tool when it is drawn
    /// inside its call's card.
    fn result(&self, b: &mut String, ix: usize, call: Option<&str>) {
        let e = &self.s.entries()[ix];
        let msg = &self.lines[ix]["message"];
        let sum = &self.summaries[ix];
        let mut body = String::new();
        let mut images = Vec::new();
        if let Some(blocks) = msg["content"].as_array() {
            for block in blocks {
                match block["type"].as_str() {
                    Some("text") => body.push_str(block["text"].as_str().unwrap_or("")),
                    Some("image") => images.push(block),
                    _ => {}
                }
            }
        } else if let Some(t) = msg["content"].as_str() {
            body.push_str(t);
        }
        if call.is_some() {
            b.push_str("<div class=\"result\" id=\"e-");
            push_escaped(b, &e.id);
            b.push_str("\"><div class=\"result-head\">");
            b.push_str(if sum.is_error { "error" } else { "result" });
            if let Some(cp) = &sum.checkpoint {
                b.push(' ');
                checkpoint_badge(b, cp);
            }
            b.push_str("</div>");
        }
        if let Some(d) = msg["details"]["diff"].as_str() {
            unified(b, d);
        }
        for block in images {
            image(b, block);
        }
        output(b, &body, sum.is_error);
        if call.is_some() {
            b.push_str("</div>");
        }
    }
}

fn is_empty(c: &Value) -> bool {
    match c {
        Value::Null => true,
        Value::String(t) => t.trim().is_empty(),
        Value::Array(blocks) => blocks.iter().all(|bl| match bl["type"].as_str() {
            Some("text") => bl["text"].as_str().is_none_or(|t| t.trim().is_empty()),
            Some("thinking") => bl["thinking"].as_str().is_none_or(|t| t.trim().is_empty()),
            _ => false,
        }),
        _ => false,
    }
}

/// The `(oldText, newText)` pairs of an edit call (`edits`, or the legacy
/// single pair).
fn edits(args: &Value) -> Vec<(&str, &str)> {
    match args["edits"].as_array() {
        Some(list) => list
            .iter()
            .map(|e| {
                (
                    e["oldText"].as_str().unwrap_or(""),
                    e["newText"].as_str().unwrap_or(""),
                )
            })
            .collect(),
        None => vec![(
            args["oldText"].as_str().unwrap_or(""),
            args["newText"].as_str().unwrap_or(""),
        )],
    }
}

/// Arguments that are all short scalars (a `read`, `grep`, `ls` …).
fn scalar_args(args: &Value) -> bool {
    args.as_object().is_some_and(|o| {
        o.values().all(|v| match v {
            Value::String(t) => t.len() <= 200 && !t.contains('\n'),
            Value::Number(_) | Value::Bool(_) => true,
            _ => false,
        })
    })
}

/// Scalar arguments as one line of `name value` pairs (`path` is in the
/// card's head already).
fn inline_args(b: &mut String, args: &Value) {
    let Some(o) = args.as_object() else { return };
    let rest: Vec<_> = o.iter().filter(|(k, _)| k.as_str() != "path").collect();
    if rest.is_empty() {
        return;
    }
    b.push_str("<div class=\"args\">");
    for (k, v) in rest {
        b.push_str("<span class=\"arg\"><span class=\"k\">");
        push_escaped(b, k);
        b.push_str("</span> <code>");
        match v {
            Value::String(t) => push_escaped(b, t),
            other => push_escaped(b, &other.to_string()),
        }
        b.push_str("</code></span>");
    }
    b.push_str("</div>");
}

fn checkpoint_badge(b: &mut String, id: &str) {
    b.push_str(
        "<span class=\"badge cp\" title=\"checkpoint before this call (bh checkpoint restore ",
    );
    push_escaped(b, id);
    b.push_str(")\">⚑ ");
    push_escaped(b, id);
    b.push_str("</span>");
}

/// Tool output in a scroll box; a long one says how long it is and folds.
fn output(b: &mut String, body: &str, is_error: bool) {
    if body.is_empty() {
        return;
    }
    let n = body.lines().count();
    if n > SHORT_OUTPUT_LINES && !is_error {
        let _ = write!(
            b,
            "<details class=\"output\" open><summary>output, {n} lines</summary>"
        );
        pre(b, body, "out");
        b.push_str("</details>");
    } else {
        pre(b, body, "out");
    }
}

fn thinking(b: &mut String, t: &str) {
    if t.trim().is_empty() {
        return;
    }
    b.push_str("<details class=\"thinking\"><summary>thinking</summary>");
    text(b, t, "text");
    b.push_str("</details>\n");
}

fn image(b: &mut String, block: &Value) {
    let (Some(mime), Some(data)) = (block["mimeType"].as_str(), block["data"].as_str()) else {
        return text(b, "(image)", "text thinking");
    };
    // Only image types, and only base64 characters, go into the data URI.
    let safe_mime = mime.starts_with("image/")
        && mime[6..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let safe_data = data
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c));
    if safe_mime && safe_data {
        let _ = write!(
            b,
            "<img class=\"inline\" alt=\"image\" src=\"data:{mime};base64,{data}\">"
        );
    } else {
        text(b, "(image that is not valid base64)", "text thinking");
    }
}

/// A role or type as a CSS class word (letters, digits, `-`, `_` only).
fn css_word(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}
