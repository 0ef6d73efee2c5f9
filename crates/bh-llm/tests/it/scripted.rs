use std::time::Duration;

use bh_llm::{Api, ChatRequest, ModelCost, ModelSpec, Script, ScriptedProvider, StreamEvent};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use futures::StreamExt;

use crate::{json_no_ts, run};

const SCRIPT: &str = r#"
# a scripted demo
{"text": "I'll create the file first.", "toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "hi\n"}}], "usage": {"input": 100, "output": 10, "cacheRead": 50}, "timestamp": 1000}
{"thinking": "Check it.", "thinkingSignature": "reasoning_content", "toolCalls": [{"id": "call_x", "name": "read", "arguments": {"path": "a.txt"}}, {"name": "ls", "arguments": {}}]}
{"text": "Done.", "chunkChars": 2}
{"stopReason": "error", "errorMessage": "500 Scripted failure from fake server"}
"#;

fn model() -> ModelSpec {
    let mut m = ModelSpec::new("scripted", "demo", Api::Scripted);
    m.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    m
}

#[tokio::test]
async fn replays_turns_in_order() {
    let p = ScriptedProvider::from_str(SCRIPT, model()).unwrap();
    assert_eq!(p.remaining(), 4);
    let (events, m1) = run(&p, ChatRequest::default()).await;
    let (ci, co, cr) = ((3.0 / 1e6) * 100.0, (15.0 / 1e6) * 10.0, (0.3 / 1e6) * 50.0);
    assert_eq!(
        serde_json::to_value(&m1).unwrap(),
        json!({"role": "assistant",
            "content": [
                {"type": "text", "text": "I'll create the file first."},
                {"type": "toolCall", "id": "call_0_0", "name": "write", "arguments": {"path": "a.txt", "content": "hi\n"}}],
            "api": "scripted", "provider": "scripted", "model": "demo",
            "usage": {"input": 100, "output": 10, "cacheRead": 50, "cacheWrite": 0, "totalTokens": 160,
                "cost": {"input": ci, "output": co, "cacheRead": cr, "cacheWrite": 0, "total": ci + co + cr,
                    "totalFromProvider": false}},
            "stopReason": "toolUse", "timestamp": 1000})
    );
    assert!(matches!(events[0], StreamEvent::Start));

    let (_, m2) = run(&p, ChatRequest::default()).await;
    let v = json_no_ts(&m2);
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "Check it.", "thinkingSignature": "reasoning_content"})
    );
    assert_eq!(v["content"][1]["id"], "call_x");
    assert_eq!(v["content"][2]["id"], "call_1_1");
    assert_eq!(v["stopReason"], "toolUse");

    let (events, m3) = run(&p, ChatRequest::default()).await;
    assert_eq!(m3.stop_reason, "stop");
    let deltas: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Do", "ne", "."]);

    let (_, m4) = run(&p, ChatRequest::default()).await;
    assert_eq!(m4.stop_reason, "error");
    assert_eq!(
        m4.error_message.as_deref(),
        Some("500 Scripted failure from fake server")
    );
    assert!(m4.content.is_empty());

    let (_, m5) = run(&p, ChatRequest::default()).await;
    assert_eq!(m5.stop_reason, "error");
    assert_eq!(
        m5.error_message.as_deref(),
        Some("scripted provider: no turn left (script has 4 turns)")
    );
}

#[tokio::test]
async fn json_forms_and_identity_override() {
    let s = Script::parse(r#"{"provider": "fake", "model": "fake-model", "api": "openai-completions", "turns": [{"text": "a"}]}"#).unwrap();
    let p = ScriptedProvider::new(s, model());
    let (_, m) = run(&p, ChatRequest::default()).await;
    assert_eq!(
        (m.provider.as_str(), m.model.as_str(), m.api.as_str()),
        ("fake", "fake-model", "openai-completions")
    );
    let s = Script::parse(r#"[{"text": "a"}, {"text": "b"}]"#).unwrap();
    assert_eq!(s.turns.len(), 2);
    assert!(Script::parse(r#"{"txt": "typo"}"#).is_err());
}

#[tokio::test]
async fn cancellation_keeps_partial_text() {
    let p = ScriptedProvider::from_str(
        r#"{"text": "one two three four", "chunkChars": 4, "delayMs": 20}"#,
        model(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let mut s = bh_llm::Provider::stream(&p, ChatRequest::default(), cancel.clone());
    let mut done = None;
    while let Some(ev) = s.next().await {
        match ev {
            StreamEvent::TextDelta { .. } => cancel.cancel(),
            StreamEvent::Done(m) => done = Some(*m),
            _ => {}
        }
    }
    let m = done.unwrap();
    assert_eq!(m.stop_reason, "aborted");
    assert_eq!(m.error_message.as_deref(), Some("Request was aborted"));
    assert_eq!(json_no_ts(&m)["content"][0]["text"], "one ");
}

#[tokio::test]
async fn dropping_the_stream_stops_the_turn() {
    let p = ScriptedProvider::from_str(r#"{"text": "slow", "delayMs": 10000}"#, model()).unwrap();
    let s = bh_llm::Provider::stream(&p, ChatRequest::default(), CancellationToken::new());
    drop(s);
    // nothing to observe but that no task panics or blocks the runtime
    tokio::time::sleep(Duration::from_millis(20)).await;
}
