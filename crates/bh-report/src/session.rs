//! The HTML report of a Pi session: header facts, the tree (drawn like
//! `bh session tree`, tool runs folded into expandable rows), then every
//! entry in the tree's order — the active path in the open, side branches in
//! expandable blocks — with tool calls, their diffs and checkpoint markers.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use bh_protocol::EntryType;
use bh_session::graph::{self, GraphOptions, RowKind};
use bh_session::{Session, Summary, SummaryKind, summarize};
use serde_json::Value;

use crate::html::{page, push_escaped};

/// What the report says about where the session came from.
#[derive(Clone, Debug, Default)]
pub struct SessionReportOptions {
    /// The session file as the user named it (shown, never opened).
    pub source: Option<String>,
}

/// The whole report, one self-contained HTML document.
pub fn session_html(s: &Session, options: &SessionReportOptions) -> String {
    let summaries = summarize(s);
    let g = graph::layout(s, &summaries, GraphOptions::default());
    let leaf = s.leaf().map(|e| e.id.as_str());
    let labels: HashMap<&str, &str> = s
        .labels()
        .iter()
        .map(|l| (l.target_id.as_str(), l.label.as_str()))
        .collect();
    let active: HashSet<usize> = leaf
        .and_then(|id| s.path_to_root(id).ok())
        .map(|p| p.iter().filter_map(|e| s.index_of(&e.id)).collect())
        .unwrap_or_default();

    let title = match (s.name(), s.header()) {
        (Some(name), _) => format!("Session {name}"),
        (None, Some(h)) => format!("Session {}", h.id),
        (None, None) => "Session".to_owned(),
    };
    let mut b = String::with_capacity(s.bytes().len() + 64 * 1024);
    b.push_str("<header><h1>");
    push_escaped(&mut b, &title);
    b.push_str("</h1>\n");
    facts(&mut b, s, options, leaf);
    b.push_str(
        "<p class=\"toolbar\"><button type=\"button\" data-toggle=\"open\">Expand all</button>\
         <button type=\"button\" data-toggle=\"close\">Collapse all</button></p></header>\n",
    );

    b.push_str("<nav id=\"tree\"><h2>Tree</h2>\n<ol class=\"graph\">\n");
    for row in &g.rows {
        match &row.kind {
            RowKind::Fork => {
                b.push_str("<li><span class=\"g\">");
                push_escaped(&mut b, &row.graph);
                b.push_str("</span></li>\n");
            }
            RowKind::Entry(ix) => tree_row(&mut b, s, &summaries, &labels, leaf, &row.graph, *ix),
            RowKind::Folded(ixs) => {
                b.push_str("<li><details class=\"fold\"><summary><span class=\"g\">");
                push_escaped(&mut b, &row.graph);
                b.push_str("</span>");
                push_escaped(&mut b, &graph::folded_summary(&summaries, ixs));
                b.push_str("</summary><ol class=\"graph\">\n");
                let lane = row.graph.replace('┊', "●");
                for &ix in ixs {
                    tree_row(&mut b, s, &summaries, &labels, leaf, &lane, ix);
                }
                b.push_str("</ol></details></li>\n");
            }
        }
    }
    if g.rows.is_empty() {
        b.push_str("<li>(no entries)</li>\n");
    }
    b.push_str("</ol></nav>\n");

    b.push_str("<main id=\"conversation\"><h2>Conversation</h2>\n");
    let mut in_branch = false;
    for &ix in &g.order {
        let on_path = active.contains(&ix);
        if !on_path && !in_branch {
            let e = &s.entries()[ix];
            let n = g.order[g.placements[ix].map_or(0, |p| p.order)..]
                .iter()
                .take_while(|i| !active.contains(i))
                .count();
            b.push_str("<details class=\"branch\"><summary>Side branch");
            if let Some(p) = &e.parent_id {
                b.push_str(" from ");
                push_escaped(&mut b, p);
            }
            let _ = write!(b, " ({n} entr{})", if n == 1 { "y" } else { "ies" });
            b.push_str("</summary>\n");
            in_branch = true;
        } else if on_path && in_branch {
            b.push_str("</details>\n");
            in_branch = false;
        }
        entry_section(&mut b, s, &summaries[ix], &labels, leaf, ix);
    }
    if in_branch {
        b.push_str("</details>\n");
    }
    b.push_str("</main>\n");
    page(&title, &b)
}

fn facts(b: &mut String, s: &Session, options: &SessionReportOptions, leaf: Option<&str>) {
    let stats = s.stats();
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(src) = &options.source {
        rows.push(("file", src.clone()));
    }
    if let Some(h) = s.header() {
        rows.push(("session", h.id.clone()));
        if let Some(cwd) = &h.cwd {
            rows.push(("cwd", cwd.clone()));
        }
        if let Some(ts) = &h.timestamp {
            rows.push(("created", ts.clone()));
        }
        if let Some(p) = &h.parent_session {
            rows.push(("parent", p.clone()));
        }
    }
    rows.push((
        "entries",
        format!("{} ({} messages)", stats.entries, stats.messages),
    ));
    rows.push(("leaf", leaf.unwrap_or("(none)").to_owned()));
    if !stats.models.is_empty() {
        rows.push(("models", stats.models.join(", ")));
    }
    let t = stats.totals;
    rows.push((
        "tokens",
        format!(
            "{} (input {}, output {}, cache read {}, cache write {}), ${:.4}",
            t.total_tokens, t.input, t.output, t.cache_read, t.cache_write, t.cost
        ),
    ));
    if !s.problems().is_empty() {
        rows.push(("problems", format!("{}", s.problems().len())));
    }
    b.push_str("<dl class=\"meta\">\n");
    for (k, v) in rows {
        let _ = write!(b, "<dt>{k}</dt><dd>");
        push_escaped(b, &v);
        b.push_str("</dd>\n");
    }
    b.push_str("</dl>\n");
}

fn tree_row(
    b: &mut String,
    s: &Session,
    summaries: &[Summary],
    labels: &HashMap<&str, &str>,
    leaf: Option<&str>,
    graph_text: &str,
    ix: usize,
) {
    let e = &s.entries()[ix];
    let is_leaf = leaf == Some(e.id.as_str());
    b.push_str("<li");
    if is_leaf {
        b.push_str(" class=\"leaf\"");
    }
    b.push_str("><a href=\"#e-");
    push_escaped(b, &e.id);
    b.push_str("\"><span class=\"g\">");
    push_escaped(b, graph_text);
    b.push_str("</span><code>");
    push_escaped(b, &e.id);
    b.push_str("</code> ");
    push_escaped(b, &summaries[ix].text);
    if let Some(l) = labels.get(e.id.as_str()) {
        b.push_str(" [");
        push_escaped(b, l);
        b.push(']');
    }
    if let Some(cp) = &summaries[ix].checkpoint {
        b.push_str(" ⚑ ");
        push_escaped(b, cp);
    }
    if is_leaf {
        b.push_str(" ← leaf");
    }
    b.push_str("</a></li>\n");
}

pub(crate) fn entry_section(
    b: &mut String,
    s: &Session,
    sum: &Summary,
    labels: &HashMap<&str, &str>,
    leaf: Option<&str>,
    ix: usize,
) {
    let e = &s.entries()[ix];
    let line: Value = s
        .entry_line(e)
        .ok()
        .and_then(|l| serde_json::from_slice(&l).ok())
        .unwrap_or(Value::Null);
    let msg = &line["message"];
    let role = msg["role"].as_str().unwrap_or(e.kind.as_str());
    let mut class = format!("entry role-{}", css_word(role));
    if sum.kind == SummaryKind::Meta {
        class.push_str(" meta");
    }
    if sum.is_error {
        class.push_str(" error");
    }
    if leaf == Some(e.id.as_str()) {
        class.push_str(" active-leaf");
    }
    let _ = write!(b, "<section class=\"{class}\" id=\"e-");
    push_escaped(b, &e.id);
    b.push_str("\"><header><span class=\"role\">");
    push_escaped(b, role);
    b.push_str("</span><code>");
    push_escaped(b, &e.id);
    b.push_str("</code>");
    if let Some(ts) = &e.timestamp {
        b.push_str("<span>");
        push_escaped(b, ts);
        b.push_str("</span>");
    }
    if let Some(m) = msg["model"].as_str() {
        b.push_str("<span>");
        push_escaped(b, m);
        b.push_str("</span>");
    }
    if let Some(l) = labels.get(e.id.as_str()) {
        b.push_str("<span class=\"badge\">");
        push_escaped(b, l);
        b.push_str("</span>");
    }
    if let Some(cp) = &sum.checkpoint {
        b.push_str("<span class=\"badge cp\">checkpoint ");
        push_escaped(b, cp);
        b.push_str("</span>");
    }
    if sum.is_error {
        b.push_str("<span class=\"badge err\">error</span>");
    }
    if leaf == Some(e.id.as_str()) {
        b.push_str("<span class=\"badge\">active leaf</span>");
    }
    b.push_str("</header>\n");
    match (&e.kind, role) {
        (EntryType::Message, "toolResult") => tool_result(b, msg, sum),
        (EntryType::Message, "bashExecution") => {
            pre(b, &format!("$ {}", msg["command"].as_str().unwrap_or("")));
            pre(b, msg["output"].as_str().unwrap_or(""));
        }
        (EntryType::Message, "branchSummary" | "compactionSummary") => {
            text(b, msg["summary"].as_str().unwrap_or(""), "text");
        }
        (EntryType::Message, _) => content(b, &msg["content"]),
        (EntryType::CustomMessage, _) => content(b, &line["content"]),
        (EntryType::Compaction | EntryType::BranchSummary, _) => {
            b.push_str("<details><summary>");
            push_escaped(b, &sum.text);
            b.push_str("</summary>");
            text(b, line["summary"].as_str().unwrap_or(""), "text");
            b.push_str("</details>");
        }
        _ => text(b, &sum.text, "text"),
    }
    b.push_str("</section>\n");
}

fn content(b: &mut String, c: &Value) {
    match c {
        Value::String(t) => text(b, t, "text"),
        Value::Array(blocks) => {
            for block in blocks {
                match block["type"].as_str() {
                    Some("text") => text(b, block["text"].as_str().unwrap_or(""), "text"),
                    Some("thinking") => {
                        text(b, block["thinking"].as_str().unwrap_or(""), "text thinking")
                    }
                    Some("redactedThinking") => text(b, "(redacted thinking)", "text thinking"),
                    Some("image") => image(b, block),
                    Some("toolCall") => tool_call(b, block),
                    Some(other) => text(b, &format!("({other} block)"), "text thinking"),
                    None => {}
                }
            }
        }
        _ => {}
    }
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

fn tool_call(b: &mut String, block: &Value) {
    let name = block["name"].as_str().unwrap_or("?");
    let args = &block["arguments"];
    b.push_str("<details class=\"call\" open><summary>tool call <b>");
    push_escaped(b, name);
    b.push_str("</b>");
    if let Some(p) = args["path"].as_str() {
        b.push(' ');
        push_escaped(b, p);
    }
    b.push_str("</summary>");
    match name {
        "edit" => {
            let edits: Vec<(&str, &str)> = match args["edits"].as_array() {
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
            };
            for (old, new) in edits {
                diff(b, old, new);
            }
        }
        "write" => pre(b, args["content"].as_str().unwrap_or("")),
        "bash" => pre(b, &format!("$ {}", args["command"].as_str().unwrap_or(""))),
        _ => pre(
            b,
            &serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string()),
        ),
    }
    b.push_str("</details>\n");
}

fn tool_result(b: &mut String, msg: &Value, sum: &Summary) {
    b.push_str("<details class=\"result\"");
    if sum.is_error {
        b.push_str(" open");
    }
    b.push_str("><summary>");
    push_escaped(b, &sum.text);
    b.push_str("</summary>");
    let mut body = String::new();
    if let Some(blocks) = msg["content"].as_array() {
        for block in blocks {
            match block["type"].as_str() {
                Some("text") => body.push_str(block["text"].as_str().unwrap_or("")),
                Some("image") => image(b, block),
                _ => {}
            }
        }
    } else if let Some(t) = msg["content"].as_str() {
        body.push_str(t);
    }
    if let Some(d) = msg["details"]["diff"].as_str() {
        unified(b, d);
    }
    pre(b, &body);
    b.push_str("</details>\n");
}

fn text(b: &mut String, t: &str, class: &str) {
    if t.is_empty() {
        return;
    }
    let _ = write!(b, "<div class=\"{class}\">");
    push_escaped(b, t);
    b.push_str("</div>\n");
}

fn pre(b: &mut String, t: &str) {
    b.push_str("<pre>");
    push_escaped(b, t);
    b.push_str("</pre>\n");
}

/// A line diff of `old` → `new` with three lines of context.
fn diff(b: &mut String, old: &str, new: &str) {
    let d = similar::TextDiff::from_lines(old, new);
    let text = d.unified_diff().context_radius(3).to_string();
    unified(b, &text);
}

/// A unified diff, its lines coloured by their first character.
pub(crate) fn unified(b: &mut String, text: &str) {
    b.push_str("<pre class=\"diff\">");
    for line in text.lines() {
        let class = match line.as_bytes().first() {
            Some(b'+') if !line.starts_with("+++") => "add",
            Some(b'-') if !line.starts_with("---") => "del",
            Some(b'@') => "hunk",
            _ => "",
        };
        if class.is_empty() {
            push_escaped(b, line);
            b.push('\n');
        } else {
            let _ = write!(b, "<span class=\"{class}\">");
            push_escaped(b, line);
            b.push_str("</span>");
        }
    }
    b.push_str("</pre>\n");
}

/// A role or type as a CSS class word (letters, digits, `-`, `_` only).
fn css_word(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}
