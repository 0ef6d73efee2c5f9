//! One-line summaries of entries for views (`bh session tree`, the REPL's
//! `/tree`, HTML reports): a user message's text, an assistant's model, text
//! and tool calls, a tool result's tool and outcome, and so on.
//!
//! Only the fields a summary shows are decoded from each line, found by
//! [`crate::skim`] without decoding the rest (long strings are jumped over,
//! only a prefix of each shown text is unescaped), on several threads for
//! large sessions. Text is returned raw but on one line (whitespace runs become one
//! space) and cut to a length; escaping control characters for a terminal or
//! HTML is the caller's job.

use bh_protocol::EntryType;

use crate::session::{Entry, Session};
use crate::skim::{self, Cursor};

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
    let line = session.line_text(e);
    match &e.kind {
        EntryType::Message => {
            let mut message = None;
            let _ = Cursor::new(line).object(|key, c| {
                if key == b"message" {
                    message = MessageView::walk(c);
                    message.as_ref().map(|_| ())
                } else {
                    c.raw().map(|_| ())
                }
            });
            match message {
                Some(m) => message_summary(e, &m),
                None => meta_summary(e),
            }
        }
        EntryType::CustomMessage => {
            let mut s = meta_summary(e);
            if let Some(c) = skim::field(line, "content") {
                push_text(&mut s.text, ": ", &ContentView::of(c).text);
            }
            s.kind = SummaryKind::OtherMessage;
            s
        }
        EntryType::BranchSummary | EntryType::Compaction => {
            let mut s = meta_summary(e);
            if let Some(text) = skim::field(line, "summary").and_then(prefix) {
                push_text(&mut s.text, ": ", &text);
            }
            s
        }
        _ => meta_summary(e),
    }
}

fn message_summary(e: &Entry, m: &MessageView) -> Summary {
    let role = m.role.as_deref().or(e.role.as_deref()).unwrap_or("?");
    let content = &m.content;
    let mut s = Summary {
        kind: SummaryKind::OtherMessage,
        text: String::new(),
        tool_calls: Vec::new(),
        is_error: false,
        has_text: !content.text.trim().is_empty(),
        checkpoint: m.checkpoint.clone(),
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
            s.tool_calls = content.tool_calls.clone();
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

/// How many bytes of a long string a summary decodes.
const PREFIX_BYTES: usize = PREVIEW_CHARS * 4;

/// The decoded start of a raw JSON string value (`None` for other values).
fn prefix(raw: &[u8]) -> Option<String> {
    (raw.first() == Some(&b'"')).then(|| json_string_prefix(raw, PREFIX_BYTES))
}

/// The fields of a message a summary shows, found in one walk over it.
#[derive(Default)]
struct MessageView {
    role: Option<String>,
    content: ContentView,
    model: Option<String>,
    tool_name: Option<String>,
    is_error: Option<bool>,
    stop_reason: Option<String>,
    error_message: Option<String>,
    command: Option<String>,
    custom_type: Option<String>,
    summary: Option<String>,
    checkpoint: Option<String>,
}

impl MessageView {
    /// The message object at `c`, walked once (its content descended into,
    /// everything else skipped).
    fn walk(c: &mut Cursor<'_>) -> Option<MessageView> {
        let mut v = MessageView::default();
        c.object(|key, c| {
            match key {
                b"content" => v.content = ContentView::walk(c)?,
                b"details" => {
                    let raw = c.raw()?;
                    v.checkpoint = skim::field(raw, "checkpoint").and_then(prefix);
                }
                _ => {
                    let raw = c.raw()?;
                    match key {
                        b"role" => v.role = prefix(raw),
                        b"model" => v.model = prefix(raw),
                        b"toolName" => v.tool_name = prefix(raw),
                        b"isError" => v.is_error = Some(raw == b"true"),
                        b"stopReason" => v.stop_reason = prefix(raw),
                        b"errorMessage" => v.error_message = prefix(raw),
                        b"command" => v.command = prefix(raw),
                        b"customType" => v.custom_type = prefix(raw),
                        b"summary" => v.summary = prefix(raw),
                        _ => {}
                    }
                }
            }
            Some(())
        })?;
        Some(v)
    }
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
    fn of(raw: &[u8]) -> ContentView {
        ContentView::walk(&mut Cursor::new(raw)).unwrap_or_default()
    }

    /// The content at `c` (a string or an array of blocks), walked once.
    fn walk(c: &mut Cursor<'_>) -> Option<ContentView> {
        let mut view = ContentView::default();
        if c.peek() == Some(b'"') {
            if let Some(t) = c.raw().and_then(prefix) {
                view.add_text(&t);
            }
            return Some(view);
        }
        if c.peek() != Some(b'[') {
            c.raw()?;
            return Some(view);
        }
        c.array(|c| {
            let mut kind = None;
            let mut text = None;
            let mut name = None;
            if c.peek() != Some(b'{') {
                return c.raw().map(|_| ());
            }
            c.object(|key, c| {
                let raw = c.raw()?;
                match key {
                    b"type" => kind = prefix(raw),
                    b"text" => text = prefix(raw),
                    b"name" => name = prefix(raw),
                    _ => {}
                }
                Some(())
            })?;
            match kind.as_deref() {
                Some("text") => {
                    if let Some(t) = text {
                        view.add_text(&t);
                    }
                }
                Some("toolCall") => view.tool_calls.push(name.unwrap_or_else(|| "?".to_owned())),
                Some("image") => view.images += 1,
                Some("thinking" | "redactedThinking") => view.thinking = true,
                _ => {}
            }
            Some(())
        })?;
        Some(view)
    }

    fn add_text(&mut self, t: &str) {
        // Keep a little more than a preview shows, so `one_line` can cut it.
        let room = PREFIX_BYTES.saturating_sub(self.text.len());
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

/// The decoded start (at most `max` bytes, cut at a character boundary) of
/// the JSON string literal `raw`; empty for anything that is not a string.
/// The work is proportional to what is decoded, not to the string's length.
fn json_string_prefix(raw: &[u8], max: usize) -> String {
    let Some(body) = raw.strip_prefix(b"\"") else {
        return String::new();
    };
    let mut out: Vec<u8> = Vec::with_capacity(max.min(body.len()) + 4);
    let mut i = 0;
    while out.len() < max && i < body.len() {
        match body[i] {
            b'"' => break,
            b'\\' => {
                let (c, used) = unescape(&body[i..]);
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i += used;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out.truncate(max);
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            // A character cut at the end is dropped; invalid bytes inside are replaced.
            if bytes.len() - valid < 4 && std::str::from_utf8(&bytes[valid..]).is_err() {
                bytes.truncate(valid);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}

/// The character of the escape at the start of `b` (`\n`, `\uXXXX`, a
/// surrogate pair) and how many bytes it took.
fn unescape(b: &[u8]) -> (char, usize) {
    let hex = |at: usize| {
        b.get(at..at + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    match b.get(1) {
        Some(b'n') => ('\n', 2),
        Some(b't') => ('\t', 2),
        Some(b'r') => ('\r', 2),
        Some(b'b') => ('\u{8}', 2),
        Some(b'f') => ('\u{c}', 2),
        Some(b'u') => match hex(2) {
            Some(high @ 0xd800..=0xdbff) => match (b.get(6..8), hex(8)) {
                (Some(b"\\u"), Some(low @ 0xdc00..=0xdfff)) => (
                    char::from_u32(0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00))
                        .unwrap_or('\u{fffd}'),
                    12,
                ),
                _ => ('\u{fffd}', 6),
            },
            Some(unit) => (char::from_u32(unit).unwrap_or('\u{fffd}'), 6),
            None => ('\u{fffd}', 2),
        },
        Some(&other) if other.is_ascii() => (char::from(other), 2),
        _ => ('\u{fffd}', 2),
    }
}

#[cfg(test)]
mod tests {
    use super::json_string_prefix;

    #[test]
    fn string_prefixes_decode_escapes() {
        assert_eq!(json_string_prefix(br#""a\nb\t\"c\\""#, 100), "a\nb\t\"c\\");
        assert_eq!(json_string_prefix(br#""\u00e9\ud83d\ude00x""#, 100), "é😀x");
        assert_eq!(json_string_prefix(br#""abcdef""#, 3), "abc");
        assert_eq!(json_string_prefix(b"null", 3), "");
        // A character cut by the limit is dropped, not half-kept.
        assert_eq!(json_string_prefix("\"aé\"".as_bytes(), 2), "a");
    }
}
