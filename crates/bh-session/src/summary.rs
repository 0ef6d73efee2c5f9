//! One-line summaries of entries for views (`bh session tree`, the REPL's
//! `/tree`, HTML reports): a user message's text, an assistant's model, text
//! and tool calls, a tool result's tool and outcome, and so on.
//!
//! Only the fields a summary shows are decoded from each line (strings are
//! borrowed where they hold no escapes), on several threads for large
//! sessions. Text is returned raw but on one line (whitespace runs become one
//! space) and cut to a length; escaping control characters for a terminal or
//! HTML is the caller's job.

use std::borrow::Cow;
use std::fmt;

use bh_protocol::EntryType;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};

use crate::session::{Entry, Session};

/// How many characters of text a summary keeps.
pub const PREVIEW_CHARS: usize = 120;

/// What kind of row an entry makes in a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryKind {
    User,
    Assistant,
    ToolResult,
    /// Other message roles (bashExecution, custom, summaries).
    OtherMessage,
    /// Entries that are not messages (model changes, labels, compactions…).
    Meta,
}

/// One entry, summarised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub kind: SummaryKind,
    /// The row's text, one line, at most [`PREVIEW_CHARS`] characters of content.
    pub text: String,
    /// Names of the tool calls of an assistant message, in order.
    pub tool_calls: Vec<String>,
    /// A tool result that is an error, or an assistant message that failed.
    pub is_error: bool,
    /// The message has text of its own (not only tool calls or thinking).
    pub has_text: bool,
    /// The checkpoint a tool result records in `details.checkpoint`.
    pub checkpoint: Option<String>,
}

impl Summary {
    /// An assistant message that only calls tools, or a tool result: the rows
    /// a view may fold into one.
    pub fn is_tool_step(&self) -> bool {
        match self.kind {
            SummaryKind::ToolResult => true,
            SummaryKind::Assistant => {
                !self.tool_calls.is_empty() && !self.has_text && !self.is_error
            }
            _ => false,
        }
    }
}

/// Summaries of every entry of `session`, in entry order.
pub fn summarize(session: &Session) -> Vec<Summary> {
    let entries = session.entries();
    let workers = if session.bytes().len() >= 4 << 20 {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    } else {
        1
    };
    if workers <= 1 || entries.len() < 2 * workers {
        return entries
            .iter()
            .map(|e| summarize_entry(session, e))
            .collect();
    }
    let chunk = entries.len().div_ceil(workers);
    std::thread::scope(|s| {
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|e| summarize_entry(session, e))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(entries.len());
        for h in handles {
            match h.join() {
                Ok(part) => out.extend(part),
                // A panic in a summary is a bug; fall back to the entry kinds.
                Err(_) => return entries.iter().map(meta_summary).collect(),
            }
        }
        out
    })
}

/// The summary of one entry.
pub fn summarize_entry(session: &Session, e: &Entry) -> Summary {
    let line: Option<LineView<'_>> = serde_json::from_slice(session.line_text(e)).ok();
    match (&e.kind, line) {
        (EntryType::Message, Some(line)) => match line.message {
            Some(m) => message_summary(e, m),
            None => meta_summary(e),
        },
        (EntryType::CustomMessage, Some(line)) => {
            let mut s = meta_summary(e);
            if let Some(c) = line.content {
                push_text(&mut s.text, ": ", &c.text);
            }
            s.kind = SummaryKind::OtherMessage;
            s
        }
        (EntryType::BranchSummary | EntryType::Compaction, Some(line)) => {
            let mut s = meta_summary(e);
            if let Some(text) = line.summary {
                push_text(&mut s.text, ": ", &text);
            }
            s
        }
        _ => meta_summary(e),
    }
}

fn message_summary(e: &Entry, m: MessageView<'_>) -> Summary {
    let role = m.role.as_deref().or(e.role.as_deref()).unwrap_or("?");
    let content = m.content.unwrap_or_default();
    let mut s = Summary {
        kind: SummaryKind::OtherMessage,
        text: String::new(),
        tool_calls: Vec::new(),
        is_error: false,
        has_text: !content.text.trim().is_empty(),
        checkpoint: m.details.and_then(|d| d.checkpoint).map(Cow::into_owned),
    };
    match role {
        "user" => {
            s.kind = SummaryKind::User;
            s.text.push_str("user");
            let mut text = content.text.clone();
            if content.images > 0 {
                text.push_str(&format!(" [{} image(s)]", content.images));
            }
            push_text(&mut s.text, ": ", &text);
        }
        "assistant" => {
            s.kind = SummaryKind::Assistant;
            s.text.push_str("assistant");
            let model = m.model.as_deref().or(e.model.as_deref());
            if let Some(model) = model {
                s.text.push(' ');
                s.text.push_str(model);
            }
            s.text.push(':');
            let mut body = String::new();
            if content.thinking {
                body.push_str("(thinking) ");
            }
            body.push_str(&content.text);
            push_text(&mut s.text, " ", &body);
            s.tool_calls = content.tool_calls;
            if !s.tool_calls.is_empty() {
                s.text.push_str(" → ");
                s.text.push_str(&tool_list(&s.tool_calls));
            }
            match m.stop_reason.as_deref() {
                Some(r @ ("error" | "aborted")) => {
                    s.is_error = true;
                    let why = m.error_message.as_deref().unwrap_or(r);
                    push_text(&mut s.text, " ", &format!("({r}: {why})"));
                }
                Some("length") => s.text.push_str(" (cut by the token limit)"),
                _ => {}
            }
        }
        "toolResult" => {
            s.kind = SummaryKind::ToolResult;
            s.is_error = m.is_error.unwrap_or(false);
            s.text.push_str(m.tool_name.as_deref().unwrap_or("tool"));
            s.text.push_str(if s.is_error { " ✗" } else { " ✓" });
            push_text(&mut s.text, " ", &content.text);
        }
        "bashExecution" => {
            s.text.push('$');
            push_text(&mut s.text, " ", m.command.as_deref().unwrap_or(""));
        }
        "custom" => {
            s.text.push_str(&format!(
                "[{}]",
                m.custom_type.as_deref().unwrap_or("custom")
            ));
            push_text(&mut s.text, " ", &content.text);
        }
        "branchSummary" | "compactionSummary" => {
            s.text.push_str(role);
            push_text(&mut s.text, ": ", m.summary.as_deref().unwrap_or(""));
        }
        other => {
            s.text.push_str(other);
            push_text(&mut s.text, ": ", &content.text);
        }
    }
    s
}

/// `read, edit ×2, bash`: tool names in first-seen order with counts.
pub fn tool_list(names: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for n in names {
        match counts.iter_mut().find(|(name, _)| name == n) {
            Some((_, c)) => *c += 1,
            None => counts.push((n, 1)),
        }
    }
    counts
        .iter()
        .map(|(n, c)| {
            if *c > 1 {
                format!("{n} ×{c}")
            } else {
                (*n).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn meta_summary(e: &Entry) -> Summary {
    let mut text = e.kind.as_str().to_owned();
    let field = |v: &Option<String>| v.as_deref().unwrap_or("?").to_owned();
    match &e.kind {
        EntryType::Message => {
            text = format!("message:{}", e.role.as_deref().unwrap_or("?"));
        }
        EntryType::ModelChange => {
            text = format!("model → {}/{}", field(&e.provider), field(&e.model));
        }
        EntryType::ThinkingLevelChange => {
            text = format!("thinking → {}", field(&e.thinking_level));
        }
        EntryType::Label => {
            text = format!(
                "label {} = {}",
                field(&e.target_id),
                one_line(e.text.as_deref().unwrap_or(""), PREVIEW_CHARS)
            );
        }
        EntryType::SessionInfo => {
            text = format!(
                "name: {}",
                one_line(e.text.as_deref().unwrap_or(""), PREVIEW_CHARS)
            );
        }
        EntryType::Custom | EntryType::CustomMessage => {
            text.push(' ');
            text.push_str(&field(&e.custom_type));
        }
        EntryType::Compaction => {
            text.push_str(&format!(" (keeps from {})", field(&e.first_kept_entry_id)));
        }
        EntryType::ContextEdit => {
            text.push_str(&format!(" on {}", field(&e.target_id)));
        }
        _ => {}
    }
    Summary {
        kind: SummaryKind::Meta,
        text,
        tool_calls: Vec::new(),
        is_error: false,
        has_text: false,
        checkpoint: None,
    }
}

fn push_text(out: &mut String, sep: &str, text: &str) {
    let t = one_line(text, PREVIEW_CHARS);
    if !t.is_empty() {
        out.push_str(sep);
        out.push_str(&t);
    }
}

/// `text` on one line: whitespace runs (newlines included) become one space,
/// cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut n = 0;
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            n += 1;
            space = false;
        }
        if n >= max {
            out.push('…');
            return out;
        }
        out.push(c);
        n += 1;
    }
    out
}

// ----- the decoded part of a line ---------------------------------------------

#[derive(Deserialize)]
struct LineView<'a> {
    #[serde(borrow, default)]
    message: Option<MessageView<'a>>,
    /// `custom_message` entries carry their content at the top level.
    #[serde(default)]
    content: Option<ContentView>,
    #[serde(borrow, default)]
    summary: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageView<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(default)]
    content: Option<ContentView>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_name: Option<Cow<'a, str>>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    error_message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    command: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    custom_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    summary: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    details: Option<DetailsView<'a>>,
}

#[derive(Deserialize)]
struct DetailsView<'a> {
    #[serde(borrow, default)]
    checkpoint: Option<Cow<'a, str>>,
}

/// A message's content (a string or an array of blocks), reduced to the text
/// of its text blocks (a bounded prefix), its tool calls and image count.
#[derive(Default, Clone)]
struct ContentView {
    text: String,
    tool_calls: Vec<String>,
    images: usize,
    thinking: bool,
}

impl ContentView {
    fn add_text(&mut self, t: &str) {
        // Keep a little more than a preview shows, so `one_line` can cut it.
        let room = (PREVIEW_CHARS * 4).saturating_sub(self.text.len());
        if room == 0 {
            return;
        }
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        let mut end = t.len().min(room);
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&t[..end]);
    }
}

#[derive(Deserialize)]
struct BlockView<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

impl<'de> Deserialize<'de> for ContentView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentView;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ContentView, E> {
                let mut c = ContentView::default();
                c.add_text(v);
                Ok(c)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContentView, A::Error> {
                let mut c = ContentView::default();
                while let Some(block) = seq.next_element::<Option<BlockView<'de>>>()? {
                    let Some(b) = block else { continue };
                    match b.kind.as_deref() {
                        Some("text") => c.add_text(b.text.as_deref().unwrap_or("")),
                        Some("toolCall") => {
                            c.tool_calls
                                .push(b.name.map_or_else(|| "?".to_owned(), Cow::into_owned));
                        }
                        Some("image") => c.images += 1,
                        Some("thinking" | "redactedThinking") => c.thinking = true,
                        _ => {}
                    }
                }
                Ok(c)
            }
            fn visit_unit<E: de::Error>(self) -> Result<ContentView, E> {
                Ok(ContentView::default())
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<ContentView, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ContentView::default())
            }
        }
        d.deserialize_any(V)
    }
}
