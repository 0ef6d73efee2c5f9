//! The entry tree laid out as `git log --graph` draws history, top-down from
//! the root: one lane per open branch instead of one indent per level, so the
//! width grows with the branches that are open at once, never with depth.
//!
//! At each branch point the child on the active leaf's path is visited last
//! and keeps its parent's lane, so the active conversation is the straight
//! line on the left, and every side branch is drawn (and closed) to its right
//! before it continues. Long runs of tool steps (assistant messages that only
//! call tools, and their results) can be folded into one row.
//!
//! ```text
//! ○ 0a1b2c3d model → openai/gpt-4.1
//! ● 1b2c3d4e user: fix the test
//! ● 2c3d4e5f assistant gpt-4.1: looking → read
//! ├─╮
//! │ ● 3d4e5f6a user: try another way
//! │ ● 4e5f6a7b assistant gpt-4.1: done
//! ┊ 6 tool steps: read ×2, edit, bash
//! ◉ 5f6a7b8c assistant gpt-4.1: fixed
//! ```

use std::collections::HashSet;

use crate::session::Session;
use crate::summary::{Summary, SummaryKind, tool_list};

/// How to lay a tree out.
#[derive(Clone, Copy, Debug)]
pub struct GraphOptions {
    /// Fold runs of at least this many tool steps into one row (`None`: never).
    pub fold_tool_runs: Option<usize>,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            fold_tool_runs: Some(4),
        }
    }
}

/// What one row of the graph shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// One entry (its index in [`Session::entries`]).
    Entry(usize),
    /// Several consecutive tool steps of one lane, folded (entry indexes in order).
    Folded(Vec<usize>),
    /// The connector drawn under a branch point.
    Fork,
}

/// One row: the lane drawing (node glyph included) and what it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub graph: String,
    pub kind: RowKind,
}

/// Where an entry was placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Its position in visiting order (the order of the rows).
    pub order: usize,
    /// Its lane (0 = leftmost).
    pub lane: usize,
    /// Its distance from its root.
    pub depth: usize,
}

/// A laid-out tree.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub rows: Vec<Row>,
    /// Per entry (indexed like [`Session::entries`]); `None` for entries not in
    /// the tree (duplicates shadowed by an earlier id, entries without an id).
    pub placements: Vec<Option<Placement>>,
    /// Entry indexes in visiting order.
    pub order: Vec<usize>,
    /// The most lanes open at once.
    pub lanes: usize,
}

const NODE: char = '●';
const META: char = '○';
const LEAF: char = '◉';
const FOLD: char = '┊';
const LANE: char = '│';

/// Lays out `session`'s tree; `summaries` (from [`crate::summary::summarize`])
/// decide the glyphs and which runs fold.
pub fn layout(session: &Session, summaries: &[Summary], options: GraphOptions) -> Graph {
    layout_at(
        session,
        summaries,
        options,
        session.leaf().map(|e| e.id.as_str()),
    )
}

/// [`layout`] with `leaf` as the active leaf (a writer's leaf after a branch
/// move may not be the file's last entry yet).
pub fn layout_at(
    session: &Session,
    summaries: &[Summary],
    options: GraphOptions,
    leaf: Option<&str>,
) -> Graph {
    let entries = session.entries();
    let (roots, mut children) = session.children_map();
    let leaf_ix = leaf.and_then(|id| session.index_of(id));
    let on_path: HashSet<usize> = leaf
        .and_then(|id| session.path_to_root(id).ok())
        .map(|p| p.iter().filter_map(|e| session.index_of(&e.id)).collect())
        .unwrap_or_default();
    // The child on the active path is visited last (stable: file order otherwise).
    for kids in &mut children {
        kids.sort_by_key(|k| on_path.contains(k));
    }
    let mut roots = roots;
    roots.sort_by_key(|k| on_path.contains(k));

    let mut g = Graph {
        placements: vec![None; entries.len()],
        ..Graph::default()
    };
    let mut lanes: Vec<Option<usize>> = Vec::new();
    let mut lane_of = vec![0usize; entries.len()];
    let mut depth_of = vec![0usize; entries.len()];
    // Roots: the last visited takes lane 0, the others the lanes to its right.
    for (i, &r) in roots.iter().rev().enumerate() {
        lanes.push(Some(r));
        lane_of[r] = i;
    }
    let mut stack: Vec<usize> = roots.clone();
    stack.reverse();
    while let Some(n) = stack.pop() {
        let k = lane_of[n];
        g.placements[n] = Some(Placement {
            order: g.order.len(),
            lane: k,
            depth: depth_of[n],
        });
        g.order.push(n);
        let glyph = if Some(n) == leaf_ix {
            LEAF
        } else if summaries
            .get(n)
            .is_some_and(|s| s.kind == SummaryKind::Meta)
        {
            META
        } else {
            NODE
        };
        g.rows.push(Row {
            graph: draw(&lanes, k, glyph),
            kind: RowKind::Entry(n),
        });
        let kids = &children[n];
        for &c in kids {
            depth_of[c] = depth_of[n] + 1;
        }
        match kids.split_last() {
            None => {
                lanes[k] = None;
                while lanes.last() == Some(&None) {
                    lanes.pop();
                }
            }
            Some((&last, others)) => {
                lanes[k] = Some(last);
                lane_of[last] = k;
                let mut new_lanes = Vec::new();
                for &c in others {
                    let j = match (k + 1..lanes.len()).find(|&j| lanes[j].is_none()) {
                        Some(j) => j,
                        None => {
                            lanes.push(None);
                            lanes.len() - 1
                        }
                    };
                    lanes[j] = Some(c);
                    lane_of[c] = j;
                    new_lanes.push(j);
                }
                if !new_lanes.is_empty() {
                    g.rows.push(Row {
                        graph: draw_fork(&lanes, k, &new_lanes),
                        kind: RowKind::Fork,
                    });
                }
            }
        }
        g.lanes = g.lanes.max(lanes.len());
        for &c in kids.iter().rev() {
            stack.push(c);
        }
    }
    if let Some(min) = options.fold_tool_runs {
        g.rows = fold(session, summaries, &children, leaf_ix, g.rows, min.max(2));
    }
    g
}

/// The lanes of an entry row: the node's glyph in lane `k`, `│` in open lanes.
fn draw(lanes: &[Option<usize>], k: usize, glyph: char) -> String {
    let mut s = String::with_capacity(lanes.len() * 4);
    for (j, lane) in lanes.iter().enumerate() {
        s.push(if j == k {
            glyph
        } else if lane.is_some() {
            LANE
        } else {
            ' '
        });
        s.push(' ');
    }
    if lanes.len() <= k {
        s.push(glyph);
        s.push(' ');
    }
    s
}

/// The connector under a branch point in lane `k` opening `new` lanes.
fn draw_fork(lanes: &[Option<usize>], k: usize, new: &[usize]) -> String {
    let far = new.iter().copied().max().unwrap_or(k);
    let mut s = String::with_capacity(lanes.len() * 4);
    for (j, lane) in lanes.iter().enumerate() {
        let (cell, fill) = if j < k || j > far {
            (if lane.is_some() { LANE } else { ' ' }, ' ')
        } else if j == k {
            ('├', '─')
        } else if j == far {
            ('╮', ' ')
        } else if new.contains(&j) {
            ('┬', '─')
        } else if lane.is_some() {
            ('┼', '─')
        } else {
            ('─', '─')
        };
        s.push(cell);
        s.push(fill);
    }
    s
}

/// Folds runs of at least `min` consecutive tool-step rows: entries with one
/// child (so the next row is that child, in the same lane), not the leaf, not
/// labelled and without a checkpoint of their own.
fn fold(
    session: &Session,
    summaries: &[Summary],
    children: &[Vec<usize>],
    leaf_ix: Option<usize>,
    rows: Vec<Row>,
    min: usize,
) -> Vec<Row> {
    let labelled: HashSet<&str> = session
        .labels()
        .iter()
        .map(|l| l.target_id.as_str())
        .collect();
    let foldable = |ix: usize| {
        let e = &session.entries()[ix];
        summaries
            .get(ix)
            .is_some_and(|s| s.is_tool_step() && s.checkpoint.is_none())
            && children[ix].len() == 1
            && Some(ix) != leaf_ix
            && !labelled.contains(e.id.as_str())
    };
    let mut out = Vec::with_capacity(rows.len());
    let mut run: Vec<Row> = Vec::new();
    let flush = |run: &mut Vec<Row>, out: &mut Vec<Row>| {
        if run.len() >= min {
            let ixs: Vec<usize> = run
                .iter()
                .filter_map(|r| match r.kind {
                    RowKind::Entry(ix) => Some(ix),
                    _ => None,
                })
                .collect();
            let graph = fold_glyph(&run[0].graph);
            out.push(Row {
                graph,
                kind: RowKind::Folded(ixs),
            });
            run.clear();
        } else {
            out.append(run);
        }
    };
    for row in rows {
        match row.kind {
            RowKind::Entry(ix) if foldable(ix) => run.push(row),
            _ => {
                flush(&mut run, &mut out);
                out.push(row);
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

fn fold_glyph(graph: &str) -> String {
    graph
        .chars()
        .map(|c| if c == NODE || c == META { FOLD } else { c })
        .collect()
}

/// `6 tool steps: read ×2, edit, bash (1 error)` for a folded row.
pub fn folded_summary(summaries: &[Summary], entries: &[usize]) -> String {
    let calls: Vec<String> = entries
        .iter()
        .filter_map(|&ix| summaries.get(ix))
        .flat_map(|s| s.tool_calls.iter().cloned())
        .collect();
    let errors = entries
        .iter()
        .filter_map(|&ix| summaries.get(ix))
        .filter(|s| s.kind == SummaryKind::ToolResult && s.is_error)
        .count();
    let mut text = format!("{} tool steps", entries.len());
    if !calls.is_empty() {
        text.push_str(": ");
        text.push_str(&tool_list(&calls));
    }
    if errors > 0 {
        text.push_str(&format!(
            " ({errors} error{})",
            if errors == 1 { "" } else { "s" }
        ));
    }
    text
}
