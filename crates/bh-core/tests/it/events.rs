//! Our events against what Pi 0.73.1 printed in `--mode json` for the same
//! kind of run (fixture from the Pi corpus, scenario s02): same event types in
//! the same order, same keys per event (also of Pi's `partial` snapshots).

use std::collections::{BTreeMap, BTreeSet};

use bh_core::{Event, Limits};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{fx, messages};

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

    // The same sequence of event types, deltas collapsed (chunking differs),
    // and runs of bash output updates collapsed (their number depends on timing).
    let seq = |lines: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for l in lines {
            let t = l["type"].as_str().unwrap().to_owned();
            if t == "session" || t == "message_update" {
                continue;
            }
            if t == "tool_execution_update" && v.last() == Some(&t) {
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

    // The header line is the CLI's.
    for t in theirs.keys().filter(|t| *t != "session") {
        assert!(mine.contains_key(t), "we never emit {t}");
    }
}

#[tokio::test]
async fn bash_output_streams_as_tool_execution_updates_before_the_tool_ends() {
    // The command waits for a file that only the sink creates, on seeing the
    // update that carries "a": the update must arrive while bash still runs.
    let script = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "printf a; while [ ! -e go ]; do sleep 0.01; done; printf b", "timeout": 60}}]}
{"text": "done"}
"#;
    let fx = fx();
    let go = fx.repo.join("go");
    let mut agent = fx.agent(script, Limits::default());
    let mut events = Vec::new();
    agent
        .run("run it", &CancellationToken::new(), &mut |e| {
            if let Event::ToolExecutionUpdate { partial_result, .. } = &e
                && partial_result.content.len() == 1
                && serde_json::to_value(&partial_result.content[0]).unwrap()["text"] == "a"
            {
                fs_err::write(&go, "").unwrap();
            }
            events.push(serde_json::to_value(&e).unwrap());
        })
        .await
        .unwrap();
    let index = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let start = index(&|e| e["type"] == "tool_execution_start");
    let end = index(&|e| e["type"] == "tool_execution_end");
    let updates: Vec<(usize, &Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "tool_execution_update")
        .collect();
    // Pi's shape, between the start and the end of the call.
    let (first_at, first) = updates[0];
    assert_eq!(
        first,
        &json!({
            "type": "tool_execution_update",
            "toolCallId": events[start]["toolCallId"],
            "toolName": "bash",
            "args": events[start]["args"],
            "partialResult": {"content": []}
        })
    );
    assert!(start < first_at && updates.iter().all(|(i, _)| *i < end));
    let texts: Vec<&Value> = updates[1..]
        .iter()
        .map(|(_, u)| &u["partialResult"]["content"][0]["text"])
        .collect();
    assert_eq!(texts.first(), Some(&&json!("a")), "{texts:?}");
    assert_eq!(texts.last(), Some(&&json!("ab")), "{texts:?}");
    assert_eq!(
        updates.last().unwrap().1["partialResult"]["details"],
        json!({})
    );
    // The result is unchanged: the whole output, no details but the
    // checkpoints before and after the call.
    let ab = json!([{"type": "text", "text": "ab"}]);
    assert_eq!(events[end]["result"]["content"], ab);
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[2]["content"], ab);
    for details in [&events[end]["result"]["details"], &msgs[2]["details"]] {
        let keys: Vec<&String> = details.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["checkpoint", "checkpointAfter"]);
    }
}
