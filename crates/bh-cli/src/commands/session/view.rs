//! `bh session tree` and `bh session export`: the views of a session (the
//! lane graph of `bh_session::graph`, the HTML report of `bh-report`).

use std::collections::HashMap;
use std::path::Path;

use bh_session::graph::{self, GraphOptions, RowKind};
use bh_session::{Session, summarize};
use serde_json::{Value, json};

use super::{load, out, problem_line, problems_json, require_session};
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::errln;
use crate::units::human_size;

// ----- tree ------------------------------------------------------------------

pub(super) fn tree(ctx: &Ctx, file: &Path, full: bool) -> Result<(), CliError> {
    let s = load(ctx, file)?;
    require_session(&s, file)?;
    let summaries = summarize(&s);
    let options = GraphOptions {
        fold_tool_runs: if full || ctx.json { None } else { Some(4) },
    };
    let g = graph::layout(&s, &summaries, options);
    let leaf = s.leaf().map(|e| e.id.clone());
    let labels: HashMap<&str, &str> = s
        .labels()
        .iter()
        .map(|l| (l.target_id.as_str(), l.label.as_str()))
        .collect();
    let (_, children) = s.children_map();
    if ctx.json {
        let nodes: Vec<Value> = g
            .order
            .iter()
            .map(|&ix| {
                let e = &s.entries()[ix];
                let place = g.placements[ix].unwrap_or_default();
                let sum = &summaries[ix];
                json!({
                    "id": e.id,
                    "parentId": e.parent_id,
                    "type": e.kind.as_str(),
                    "role": e.role,
                    "line": e.line,
                    "depth": place.depth,
                    "lane": place.lane,
                    "label": labels.get(e.id.as_str()),
                    "leaf": leaf.as_deref() == Some(e.id.as_str()),
                    "summary": sum.text,
                    "toolCalls": sum.tool_calls,
                    "isError": sum.is_error,
                    "checkpoint": sum.checkpoint,
                    "children": children[ix].iter().map(|c| s.entries()[*c].id.clone()).collect::<Vec<_>>(),
                })
            })
            .collect();
        return print_json(&json!({
            "file": file.display().to_string(),
            "leaf": leaf,
            "lanes": g.lanes,
            "nodes": nodes,
            "problems": problems_json(s.problems()),
        }));
    }
    let t = tree_lines(
        &s,
        &summaries,
        &g,
        &labels,
        leaf.as_deref(),
        display::stdout_width(),
    );
    // Escaped part by part already (colours are not).
    crate::ui::write_bytes(t.as_bytes())?;
    for p in s.problems() {
        errln!("{}:{}", file.display(), display::escape(&problem_line(p)));
    }
    Ok(())
}

/// The human tree (one row per line, control characters escaped, cut to
/// `width` columns when given): `bh session tree` and the agent's `/tree`.
pub(crate) fn tree_text(
    s: &Session,
    leaf: Option<&str>,
    full: bool,
    width: Option<usize>,
) -> String {
    let summaries = summarize(s);
    let options = GraphOptions {
        fold_tool_runs: if full { None } else { Some(4) },
    };
    let g = graph::layout_at(s, &summaries, options, leaf);
    let labels: HashMap<&str, &str> = s
        .labels()
        .iter()
        .map(|l| (l.target_id.as_str(), l.label.as_str()))
        .collect();
    tree_lines(s, &summaries, &g, &labels, leaf, width)
}

fn tree_lines(
    s: &Session,
    summaries: &[bh_session::Summary],
    g: &graph::Graph,
    labels: &HashMap<&str, &str>,
    leaf: Option<&str>,
    width: Option<usize>,
) -> String {
    use display::style;
    let color = display::color_stdout(false);
    let mut t = String::new();
    for row in &g.rows {
        let mut line = display::Styled::new();
        line.push(None, &row.graph);
        match &row.kind {
            RowKind::Fork => {}
            RowKind::Folded(ixs) => {
                let mut text = graph::folded_summary(summaries, ixs);
                if let (Some(first), Some(last)) = (ixs.first(), ixs.last()) {
                    text.push_str(&format!(
                        " [{}..{}]",
                        s.entries()[*first].id,
                        s.entries()[*last].id
                    ));
                }
                line.push(Some(style::DIM), &text);
            }
            RowKind::Entry(ix) => {
                let e = &s.entries()[*ix];
                let sum = &summaries[*ix];
                line.push(Some(style::YELLOW), &e.id);
                line.push(None, " ");
                line.push(summary_style(sum), &sum.text);
                if let Some(l) = labels.get(e.id.as_str()) {
                    line.push(Some(style::CYAN), &format!(" [{l}]"));
                }
                if let Some(cp) = &sum.checkpoint {
                    line.push(Some(style::MAGENTA), &format!(" ⚑ checkpoint {cp}"));
                }
                if leaf == Some(e.id.as_str()) {
                    line.tail(Some(style::BOLD_GREEN), "  ← leaf");
                }
            }
        }
        t.push_str(&line.render(width, color));
        t.push('\n');
    }
    if g.rows.is_empty() {
        t.push_str("(no entries)\n");
    }
    t
}

/// A row's colour: errors red, the user's words bold, tool results and
/// bookkeeping dim, the assistant's words plain.
fn summary_style(sum: &bh_session::Summary) -> Option<&'static str> {
    use bh_session::SummaryKind;
    use display::style;
    if sum.is_error {
        return Some(style::RED);
    }
    match sum.kind {
        SummaryKind::User => Some(style::BOLD),
        SummaryKind::ToolResult | SummaryKind::Meta => Some(style::DIM),
        SummaryKind::Assistant | SummaryKind::OtherMessage => None,
    }
}

// ----- export ----------------------------------------------------------------

/// The checkpoints bh took before the session's tool calls, from the store of
/// the project the session ran in (its header's `cwd`), when that folder is
/// here and has a store (never created): the call journal first (exact, also
/// for a debounced call), then the store's own session/entry tags for calls
/// the journal no longer names. Nothing when there is no store to read.
fn call_checkpoints(ctx: &Ctx, s: &Session) -> Vec<bh_report::CallCheckpoint> {
    let Some(h) = s.header() else {
        return Vec::new();
    };
    let Some(cwd) = h.cwd.as_deref().map(Path::new).filter(|p| p.is_dir()) else {
        return Vec::new();
    };
    let options = bh_checkpoint::StoreOptions::new(&ctx.state_dir);
    let Ok(Some(store)) = bh_checkpoint::Store::open_existing_in(&ctx.git(), cwd, &options) else {
        return Vec::new();
    };
    let short = |c: &str| c.chars().take(12).collect::<String>();
    let mut out: Vec<bh_report::CallCheckpoint> = store
        .call_journal()
        .calls()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.session == h.id)
        .map(|c| bh_report::CallCheckpoint {
            id: short(&c.commit),
            entry: c.entry,
            tool: c.tool,
        })
        .collect();
    let journalled: std::collections::HashSet<(String, String)> = out
        .iter()
        .map(|c| (c.entry.clone(), c.tool.clone()))
        .collect();
    let mut tagged: Vec<bh_checkpoint::Checkpoint> = store
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.kind == bh_checkpoint::CheckpointKind::Snapshot)
        .filter(|c| c.session.as_deref() == Some(h.id.as_str()))
        .collect();
    tagged.sort_by_key(|c| c.seq);
    for c in tagged {
        let Some(entry) = c.entry else { continue };
        if !journalled.contains(&(entry.clone(), c.tool.clone())) {
            out.push(bh_report::CallCheckpoint {
                entry,
                tool: c.tool,
                id: c.id,
            });
        }
    }
    out
}

pub(super) fn export(
    ctx: &Ctx,
    file: &Path,
    out_path: Option<&Path>,
    force: bool,
) -> Result<(), CliError> {
    let s = load(ctx, file)?;
    require_session(&s, file)?;
    let html = bh_report::session_html(
        &s,
        &bh_report::SessionReportOptions {
            source: Some(file.display().to_string()),
            checkpoints: call_checkpoints(ctx, &s),
        },
    );
    let Some(dest) = out_path else {
        if ctx.json {
            return Err(CliError::new(
                ErrorKind::Usage,
                "--json needs --out FILE (the report itself is not JSON)",
            ));
        }
        crate::ui::write_bytes(html.as_bytes())?;
        return Ok(());
    };
    let dest = ctx.abs(dest);
    if dest.is_dir() {
        return Err(CliError::new(
            ErrorKind::Usage,
            format!("{}: is a directory, not a file", dest.display()),
        ));
    }
    if dest.exists() && !force {
        return Err(CliError::new(
            ErrorKind::Refused,
            format!("{}: exists (use --force to replace it)", dest.display()),
        ));
    }
    bh_fs::write_atomic(&dest, html.as_bytes(), 0o600).map_err(|e| {
        CliError::new(
            ErrorKind::Internal,
            format!("cannot write {}: {e}", dest.display()),
        )
    })?;
    if ctx.json {
        return print_json(&json!({
            "file": file.display().to_string(),
            "out": dest.display().to_string(),
            "bytes": html.len(),
        }));
    }
    out(&format!(
        "wrote {} ({})\n",
        dest.display(),
        human_size(html.len() as u64)
    ))
}
