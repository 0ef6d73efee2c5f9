//! The graph layout and entry summaries behind `bh session tree` and reports.

use bh_session::graph::{self, GraphOptions, RowKind};
use bh_session::{Session, SummaryKind, summarize};

fn session(lines: &[String]) -> Session {
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"g1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}"#,
    );
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    Session::parse(text.into_bytes(), None)
}

fn user(id: &str, parent: Option<&str>, text: &str) -> String {
    let p = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{p},"timestamp":"t","message":{{"role":"user","content":{},"timestamp":1}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

fn tool_step(id: &str, parent: &str, result: bool) -> String {
    if result {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"t","message":{{"role":"toolResult","toolCallId":"c","toolName":"read","content":[{{"type":"text","text":"ok\nmore"}}],"isError":false,"timestamp":1}}}}"#
        )
    } else {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"t","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c","name":"read","arguments":{{"path":"a"}}}}],"model":"m","stopReason":"toolUse","timestamp":1}}}}"#
        )
    }
}

#[test]
fn summaries_say_what_each_entry_is() {
    let s = session(&[
        user("u1", None, "fix\n\n  the   test"),
        tool_step("a1", "u1", false),
        tool_step("r1", "a1", true),
        r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":[],"model":"m","stopReason":"error","errorMessage":"boom","timestamp":1}}"#.to_owned(),
        r#"{"type":"model_change","id":"m1","parentId":"a2","timestamp":"t","provider":"p","modelId":"x"}"#.to_owned(),
    ]);
    let sums = summarize(&s);
    assert_eq!(sums[0].text, "user: fix the test");
    assert_eq!(sums[0].kind, SummaryKind::User);
    assert_eq!(sums[1].text, "assistant m: → read");
    assert!(sums[1].is_tool_step());
    assert_eq!(sums[2].text, "read ✓ ok more");
    assert!(sums[2].is_tool_step());
    assert!(sums[3].is_error);
    assert!(!sums[3].is_tool_step());
    assert!(sums[3].text.ends_with("(error: boom)"), "{}", sums[3].text);
    assert_eq!(sums[4].kind, SummaryKind::Meta);
    assert_eq!(sums[4].text, "model → p/x");
}

/// Lanes are reused once a side branch ends, so three successive side
/// branches need two lanes, and the active path stays in lane 0.
#[test]
fn lanes_are_reused_and_the_active_path_is_lane_zero() {
    let s = session(&[
        user("r0000001", None, "root"),
        user("b1000001", Some("r0000001"), "side 1"),
        user("m1000001", Some("r0000001"), "main 1"),
        user("b2000001", Some("m1000001"), "side 2"),
        user("b2000002", Some("b2000001"), "side 2 more"),
        user("m2000001", Some("m1000001"), "main 2"),
    ]);
    let sums = summarize(&s);
    let g = graph::layout(&s, &sums, GraphOptions::default());
    assert_eq!(g.lanes, 2);
    let lane = |id: &str| g.placements[s.index_of(id).unwrap()].unwrap().lane;
    assert_eq!(lane("r0000001"), 0);
    assert_eq!(lane("m1000001"), 0);
    assert_eq!(lane("m2000001"), 0);
    assert_eq!(lane("b1000001"), 1);
    assert_eq!(lane("b2000001"), 1);
    let drawn: Vec<&str> = g.rows.iter().map(|r| r.graph.trim_end()).collect();
    assert_eq!(drawn, ["●", "├─╮", "│ ●", "●", "├─╮", "│ ●", "│ ●", "◉"]);
    // The side branch is visited before the active child.
    let order: Vec<&str> = g
        .order
        .iter()
        .map(|&i| s.entries()[i].id.as_str())
        .collect();
    assert_eq!(
        order,
        [
            "r0000001", "b1000001", "m1000001", "b2000001", "b2000002", "m2000001"
        ]
    );
}

#[test]
fn tool_runs_fold_but_never_the_leaf_or_a_branch_point() {
    let mut lines = vec![user("u0000001", None, "go")];
    let mut parent = "u0000001".to_owned();
    for i in 0..6 {
        let a = format!("a000000{i}");
        let r = format!("r000000{i}");
        lines.push(tool_step(&a, &parent, false));
        lines.push(tool_step(&r, &a, true));
        parent = r;
    }
    let s = session(&lines);
    let sums = summarize(&s);
    let g = graph::layout(&s, &sums, GraphOptions::default());
    // u, then 11 folded steps, then the leaf (the last result) on its own.
    assert_eq!(g.rows.len(), 3, "{:?}", g.rows);
    match &g.rows[1].kind {
        RowKind::Folded(ixs) => {
            assert_eq!(ixs.len(), 11);
            assert_eq!(graph::folded_summary(&sums, ixs), "11 tool steps: read ×6");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        g.rows[2].kind,
        RowKind::Entry(s.index_of("r0000005").unwrap())
    );
    let full = graph::layout(
        &s,
        &sums,
        GraphOptions {
            fold_tool_runs: None,
        },
    );
    assert_eq!(full.rows.len(), 13);
}
