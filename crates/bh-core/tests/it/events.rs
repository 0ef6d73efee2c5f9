//! Our events against what Pi 0.73.1 printed in `--mode json` for the same
//! kind of run (fixture from the Pi corpus, scenario s02): same event types in
//! the same order, same keys per event (also of Pi's `partial` snapshots).

use std::collections::{BTreeMap, BTreeSet};

use bh_core::{Event, Limits};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::support::fx;

const PI_EVENTS: &str = include_str!("../fixtures/pi-0.73.1-s02-json-events.jsonl");

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Event type (and assistantMessageEvent type) → keys, first occurrence.
fn shapes(lines: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for v in lines {
        let mut t = v["type"].as_str().unwrap().to_owned();
        let mut k = keys(v);
        if t == "message_update" {
            out.entry(t.clone()).or_insert(k);
            let e = &v["assistantMessageEvent"];
            t = format!("message_update/{}", e["type"].as_str().unwrap());
            k = keys(e);
            // Our stream reports the response id only with the final message.
            let mut pk = keys(&e["partial"]);
            pk.remove("responseId");
            out.entry(format!("{t}/partial")).or_insert(pk);
        }
        if t == "tool_execution_end" {
            k.extend(
                keys(&v["result"])
                    .into_iter()
                    .map(|r| format!("result.{r}")),
            );
            k.remove("result.details");
        }
        out.entry(t).or_insert(k);
    }
    out
}

#[tokio::test]
async fn events_have_pis_json_mode_shapes_and_order() {
    let pi: Vec<Value> = PI_EVENTS
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Pi's scenario: write, read, edit (with thinking), ls + bash, final text.
    let script = r#"
{"text": "I'll create the file first.", "toolCalls": [{"name": "write", "arguments": {"path": "notes/todo.txt", "content": "alpha\nbeta\ngamma\n"}}]}
{"toolCalls": [{"name": "read", "arguments": {"path": "notes/todo.txt"}}]}
{"thinking": "Replace beta with BETA using the edit tool.", "thinkingSignature": "reasoning_content", "toolCalls": [{"name": "edit", "arguments": {"path": "notes/todo.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}]}
{"toolCalls": [{"name": "ls", "arguments": {"path": "notes"}}, {"name": "bash", "arguments": {"command": "git status --short"}}]}
{"text": "Done: created notes/todo.txt, replaced `beta` with `BETA`, and checked git status."}
"#;
    let fx = fx();
    let mut agent = fx.agent(script, Limits::default());
    let mut events = Vec::new();
    agent
        .run(
            "Create notes/todo.txt, edit it and check it",
            &CancellationToken::new(),
            &mut |e| events.push(e),
        )
        .await
        .unwrap();
    let ours: Vec<Value> = events
        .iter()
        .filter(|e| {
            !matches!(
                e,
                Event::Checkpoint { .. } | Event::RunEnd { .. } | Event::Warning { .. }
            )
        })
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();

    // The same sequence of event types, deltas collapsed (chunking differs).
    let seq = |lines: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for l in lines {
            let t = l["type"].as_str().unwrap().to_owned();
            // Pi streams bash output as tool_execution_update; we do not.
            if t == "session" || t == "message_update" || t == "tool_execution_update" {
                continue;
            }
            v.push(t);
        }
        v
    };
    assert_eq!(seq(&ours), seq(&pi));

    // The same keys per event type.
    let theirs = shapes(&pi);
    let mine = shapes(&ours);
    for (t, k) in &mine {
        if let Some(pk) = theirs.get(t) {
            assert_eq!(k, pk, "keys of {t}");
        }
    }
    // Each update's `partial` is the message so far and equals its `message`;
    // the last one of a message holds its final content.
    let mut last_partial: Option<&Value> = None;
    for l in &ours {
        match l["type"].as_str().unwrap() {
            "message_update" => {
                let p = &l["assistantMessageEvent"]["partial"];
                assert_eq!(p, &l["message"]);
                assert_eq!(p["role"], "assistant");
                last_partial = Some(p);
            }
            "message_end" if l["message"]["role"] == "assistant" => {
                let p = last_partial.take().expect("updates before the end");
                assert_eq!(p["content"], l["message"]["content"]);
            }
            _ => {}
        }
    }

    // The header line is the CLI's; bash output is not streamed.
    for t in theirs
        .keys()
        .filter(|t| *t != "session" && *t != "tool_execution_update")
    {
        assert!(mine.contains_key(t), "we never emit {t}");
    }
}
