//! Context building for Pi 1.x entries (no real 1.x files in the corpus; built
//! from the format description in [P16] `docs/session-format.md`).

use bh_session::Session;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::HEADER;

fn parse(lines: &[Value]) -> Session {
    let mut text = format!("{HEADER}\n");
    for l in lines {
        text.push_str(&serde_json::to_string(l).unwrap());
        text.push('\n');
    }
    Session::parse(text.into_bytes(), None)
}

fn msg(id: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:00.000Z","message":message})
}

fn roles(s: &Session, leaf: Option<&str>) -> Vec<String> {
    s.context(leaf)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.role().unwrap_or_default())
        .collect()
}

fn messages(s: &Session, leaf: Option<&str>) -> Vec<Value> {
    s.context(leaf)
        .unwrap()
        .messages
        .iter()
        .map(|m| serde_json::from_str(m.message.get()).unwrap())
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1})
}

fn assistant(text: &str) -> Value {
    json!({"role":"assistant","content":[{"type":"text","text":text}],"api":"x","provider":"p","model":"m",
           "usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.5}},
           "stopReason":"stop","timestamp":2})
}

#[test]
fn context_edit_omits_and_replaces() {
    let s = parse(&[
        msg("a1", None, user("one")),
        msg("a2", Some("a1"), assistant("first try")),
        json!({"type":"context_edit","id":"e1","parentId":"a2","timestamp":"2026-01-01T00:00:01.000Z","targetId":"a2","replacement":null}),
        msg("a3", Some("e1"), user("two")),
        json!({"type":"context_edit","id":"e2","parentId":"a3","timestamp":"2026-01-01T00:00:01.000Z","targetId":"a3","replacement":{"content":"edited"}}),
        msg("a4", Some("e2"), assistant("reply")),
        json!({"type":"context_edit","id":"e3","parentId":"a4","timestamp":"2026-01-01T00:00:01.000Z","targetId":"a4","replacement":{"content":"short"}}),
    ]);
    let m = messages(&s, None);
    assert_eq!(m.len(), 3);
    assert_eq!(m[0]["content"][0]["text"], "one");
    // user: content replaced as given (a string stays a string)
    assert_eq!(m[1]["content"], json!("edited"));
    // assistant: a string becomes one text block
    assert_eq!(m[2]["content"], json!([{"type":"text","text":"short"}]));
    assert_eq!(m[2]["stopReason"], "stop");
    // Edits are branch-relative: before e1 the original shows.
    assert_eq!(roles(&s, Some("a2")), vec!["user", "assistant"]);
}

#[test]
fn latest_edit_on_the_path_wins() {
    let s = parse(&[
        msg("a1", None, user("one")),
        json!({"type":"context_edit","id":"e1","parentId":"a1","timestamp":"2026-01-01T00:00:01.000Z","targetId":"a1","replacement":null}),
        json!({"type":"context_edit","id":"e2","parentId":"e1","timestamp":"2026-01-01T00:00:01.000Z","targetId":"a1","replacement":{"content":[{"type":"text","text":"back"}]}}),
    ]);
    let m = messages(&s, None);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0]["content"][0]["text"], "back");
}

#[test]
fn system_sections_and_compaction_checkpoint() {
    let sys1 = json!({"role":"system","content":"","sections":{"preamble":"P","tools":"T","cwd":"/x"},
                      "toolsAdded":[{"name":"read","description":"r","parameters":{}},{"name":"write","description":"w","parameters":{}}],"timestamp":1});
    let sys2 = json!({"role":"system","content":"","sections":{"tools":null,"skills":"S"},"toolsRemoved":[{"name":"write"}],"timestamp":2});
    let s = parse(&[
        msg("s1", None, sys1.clone()),
        msg("u1", Some("s1"), user("one")),
        msg("a1", Some("u1"), assistant("r1")),
        msg("s2", Some("a1"), sys2),
        msg("u2", Some("s2"), user("two")),
    ]);
    let ctx = s.context(None).unwrap();
    let sys = ctx.system.unwrap();
    assert_eq!(
        sys.sections,
        // (serde_json::json! sorts keys, so the file has cwd, preamble, tools)
        vec![
            ("cwd".to_owned(), "/x".to_owned()),
            ("preamble".to_owned(), "P".to_owned()),
            ("skills".to_owned(), "S".to_owned())
        ]
    );
    assert_eq!(sys.tools, vec!["read".to_owned()]);
    assert_eq!(
        roles(&s, None),
        vec!["system", "user", "assistant", "system", "user"]
    );

    // A 1.x compaction with a systemMessage: checkpoint first, then the summary,
    // kept entries without their system messages, then the rest.
    let s = parse(&[
        msg("s1", None, sys1),
        msg("u1", Some("s1"), user("one")),
        msg("a1", Some("u1"), assistant("r1")),
        json!({"type":"compaction","id":"c1","parentId":"a1","timestamp":"2026-01-01T00:00:05.000Z","summary":"S","firstKeptEntryId":"s1","tokensBefore":10,
               "systemMessage":{"role":"system","content":"CK","toolsAdded":[],"timestamp":5}}),
        msg("u2", Some("c1"), user("two")),
    ]);
    let m = messages(&s, None);
    let r: Vec<&str> = m.iter().map(|v| v["role"].as_str().unwrap()).collect();
    assert_eq!(
        r,
        vec!["system", "compactionSummary", "user", "assistant", "user"]
    );
    assert_eq!(m[0]["content"], "CK");
    assert_eq!(
        m[1],
        json!({"role":"compactionSummary","summary":"S","tokensBefore":10,"timestamp":1767225605000_i64})
    );
}

#[test]
fn retain_none_compaction_and_usage_entries() {
    let s = parse(&[
        msg("u1", None, user("one")),
        msg("a1", Some("u1"), assistant("r1")),
        json!({"type":"compaction","id":"c1","parentId":"a1","timestamp":"2026-01-01T00:00:05.000Z","summary":"S","firstKeptEntryId":"c1","tokensBefore":10,
               "usage":{"input":5,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":10,"cost":{"total":0.25}}}),
        json!({"type":"usage","id":"w1","parentId":"c1","timestamp":"2026-01-01T00:00:06.000Z","kind":"cache_warm","provider":"anthropic","model":"claude","usage":{"input":0,"output":0,"cacheRead":100,"cacheWrite":0,"totalTokens":100,"cost":{"total":0.01}}}),
        msg("u2", Some("w1"), user("two")),
    ]);
    assert_eq!(roles(&s, None), vec!["compactionSummary", "user"]);
    let st = s.stats();
    assert_eq!(st.totals.total_tokens, 3 + 10 + 100);
    assert!((st.totals.cost - 0.76).abs() < 1e-9);
    assert!(st.models.contains(&"anthropic/claude".to_owned()));
}

#[test]
fn custom_message_branch_summary_and_skipped_entries() {
    let s = parse(&[
        json!({"type":"model_change","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"m"}),
        json!({"type":"custom","customType":"state","data":{"x":1},"id":"c0","parentId":"m1","timestamp":"2026-01-01T00:00:00.000Z"}),
        json!({"type":"custom_message","customType":"note","content":"hello","display":false,"details":{"d":1},"id":"cm","parentId":"c0","timestamp":"2026-01-01T00:00:00.001Z"}),
        json!({"type":"branch_summary","id":"b1","parentId":"cm","timestamp":"2026-01-01T00:00:00.002Z","fromId":"cm","summary":"went elsewhere"}),
        json!({"type":"branch_summary","id":"b2","parentId":"b1","timestamp":"2026-01-01T00:00:00.002Z","fromId":"b1","summary":""}),
        json!({"type":"session_info","id":"i1","parentId":"b2","timestamp":"2026-01-01T00:00:00.003Z","name":"  N  "}),
    ]);
    let m = messages(&s, None);
    assert_eq!(
        m,
        vec![
            json!({"role":"custom","customType":"note","content":"hello","display":false,"details":{"d":1},"timestamp":1767225600001_i64}),
            json!({"role":"branchSummary","summary":"went elsewhere","fromId":"cm","timestamp":1767225600002_i64}),
        ]
    );
    assert_eq!(s.name(), Some("N"));
}

#[test]
fn null_content_is_normalised_like_pi_1x() {
    let s = parse(&[msg("u1", None, json!({"role":"user","timestamp":1}))]);
    assert_eq!(messages(&s, None)[0]["content"], json!([]));
}
