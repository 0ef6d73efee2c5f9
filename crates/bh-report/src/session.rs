//! The HTML report of a Pi session: header facts, the tree (drawn like
//! `bh session tree`, tool runs folded into expandable rows), then every
//! entry in the tree's order — the active path in the open, side branches in
//! expandable blocks — with tool calls, their diffs and checkpoint markers.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use bh_session::graph::{self, GraphOptions, RowKind};
use bh_session::{Session, Summary, SummaryKind, summarize};

use crate::entry::{CallCheckpoint, View};
use crate::html::{page, push_escaped};

/// What the report says about where the session came from.
#[derive(Clone, Debug, Default)]
pub struct SessionReportOptions {
    /// The session file as the user named it (shown, never opened).
    pub source: Option<String>,
    /// Checkpoints bh took before the session's tool calls (a Pi session's
    /// calls, found in the project's store by the caller): a badge on each.
    pub checkpoints: Vec<CallCheckpoint>,
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
    b.push_str("<header class=\"page\"><h1>");
    push_escaped(&mut b, &title);
    b.push_str("</h1>\n");
    facts(&mut b, s, &summaries, options, leaf);
    crate::html::toolbar(&mut b);
    b.push_str("</header>\n");

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
    let view = View::new(s, &summaries, &g.order, &options.checkpoints);
    conversation(&mut b, &view, &g, &active);
    b.push_str("</main>\n");
    page(&title, &b)
}

fn facts(
    b: &mut String,
    s: &Session,
    summaries: &[Summary],
    options: &SessionReportOptions,
    leaf: Option<&str>,
) {
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
    let calls: usize = summaries.iter().map(|x| x.tool_calls.len()).sum();
    if calls > 0 {
        let failed = summaries
            .iter()
            .filter(|x| x.kind == SummaryKind::ToolResult && x.is_error)
            .count();
        rows.push((
            "tool calls",
            if failed == 0 {
                format!("{calls}")
            } else {
                format!("{calls} ({failed} failed)")
            },
        ));
    }
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
    if !options.checkpoints.is_empty() {
        let n = options.checkpoints.len();
        rows.push((
            "checkpoints",
            format!(
                "{n} call{} with a checkpoint in the project's store (⚑ on the call)",
                if n == 1 { "" } else { "s" }
            ),
        ));
    }
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

/// The entries in the tree's order: the active path in the open, side
/// branches in closed blocks, runs of internal entries folded into one
/// closed block each, tool results inside their call's card.
fn conversation(b: &mut String, view: &View<'_>, g: &graph::Graph, active: &HashSet<usize>) {
    let s = view.s;
    let mut in_branch = false;
    let mut internal: Vec<usize> = Vec::new();
    for &ix in &g.order {
        if view.is_paired_result(ix) {
            continue;
        }
        let on_path = active.contains(&ix);
        let opens = !on_path && !in_branch;
        let closes = on_path && in_branch;
        if (opens || closes || !view.is_internal(ix)) && !internal.is_empty() {
            fold_internal(b, view, &std::mem::take(&mut internal));
        }
        if opens {
            let e = &s.entries()[ix];
            let n = g.order[g.placements[ix].map_or(0, |p| p.order)..]
                .iter()
                .take_while(|i| !active.contains(i))
                .count();
            b.push_str("<details class=\"branch\"><summary>Side branch");
            if let Some(p) = &e.parent_id {
                b.push_str(" from ");
                push_escaped(b, p);
            }
            let _ = write!(b, " ({n} entr{})", if n == 1 { "y" } else { "ies" });
            b.push_str("</summary>\n");
            in_branch = true;
        } else if closes {
            b.push_str("</details>\n");
            in_branch = false;
        }
        if view.is_internal(ix) {
            internal.push(ix);
        } else {
            view.section(b, ix);
        }
    }
    if !internal.is_empty() {
        fold_internal(b, view, &internal);
    }
    if in_branch {
        b.push_str("</details>\n");
    }
}

/// Entries of one path in order (an executor run's), internal runs folded
/// and tool results inside their calls.
pub(crate) fn path_entries(b: &mut String, view: &View<'_>, ixs: &[usize]) {
    let mut internal: Vec<usize> = Vec::new();
    for &ix in ixs {
        if view.is_paired_result(ix) {
            continue;
        }
        if view.is_internal(ix) {
            internal.push(ix);
            continue;
        }
        if !internal.is_empty() {
            fold_internal(b, view, &std::mem::take(&mut internal));
        }
        view.section(b, ix);
    }
    if !internal.is_empty() {
        fold_internal(b, view, &internal);
    }
}

/// A run of internal entries as one closed block: "N internal entries" and
/// what kinds they are.
fn fold_internal(b: &mut String, view: &View<'_>, ixs: &[usize]) {
    let mut kinds: Vec<String> = Vec::new();
    for &ix in ixs {
        let line = &view.lines[ix];
        let kind = line["customType"].as_str().map_or_else(
            || view.s.entries()[ix].kind.as_str().to_owned(),
            str::to_owned,
        );
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let n = ixs.len();
    let _ = write!(
        b,
        "<details class=\"internal\"><summary>{n} internal entr{}: ",
        if n == 1 { "y" } else { "ies" }
    );
    push_escaped(b, &kinds.join(", "));
    b.push_str("</summary>\n");
    for &ix in ixs {
        view.section(b, ix);
    }
    b.push_str("</details>\n");
}
