#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Integration tests for bh-llm: both wires against a mock server on 127.0.0.1, history
//! conversion against requests real Pi 0.73.1 sent, the scripted provider, config.

mod anthropic;
mod config;
mod convert;
mod dropped;
mod mock;
mod openai;
mod scripted;

use std::time::Duration;

use bh_llm::{
    Api, ChatRequest, HttpProvider, Message, ModelCost, ModelSpec, Provider, Quirks, RetryPolicy,
    StreamEvent, ToolSpec,
};
use bh_protocol::message::AssistantMessage;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fs_err::read_to_string(p).unwrap()
}

/// The model of the Pi corpus (`models.json` "fake" provider).
pub fn fake_model(base: &str) -> ModelSpec {
    let mut m = ModelSpec::new("fake", "fake-model", Api::OpenAiCompletions);
    m.base_url = format!("{base}/v1");
    m.api_key = Some("fake-key".into());
    m.reasoning = true;
    m.input_images = true;
    m.max_tokens = 4096;
    m.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    m.quirks = Quirks {
        supports_developer_role: false,
        supports_reasoning_effort: false,
        ..Quirks::openai()
    };
    m
}

pub fn fast_retry(max: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries: max,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(10),
    }
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "read",
            "Read a file",
            &json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}),
            false,
        ),
        ToolSpec::new(
            "ls",
            "List a directory",
            &json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            false,
        ),
    ]
}

pub fn request(text: &str) -> ChatRequest<'static> {
    ChatRequest {
        system_prompt: Some("You are a test.".into()),
        messages: vec![Message::user_text(text, 1)].into(),
        tools: tools().into(),
        ..ChatRequest::default()
    }
}

pub async fn run_with(
    p: &dyn Provider,
    req: ChatRequest<'_>,
    cancel: CancellationToken,
) -> (Vec<StreamEvent>, AssistantMessage) {
    let mut s = p.stream(req, cancel);
    let mut events = Vec::new();
    while let Some(ev) = s.next().await {
        events.push(ev);
    }
    let last = match events.last() {
        Some(StreamEvent::Done(m)) => (**m).clone(),
        other => panic!("stream did not end with Done: {other:?}"),
    };
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Done(_)))
            .count(),
        1
    );
    (events, last)
}

pub async fn run(p: &dyn Provider, req: ChatRequest<'_>) -> (Vec<StreamEvent>, AssistantMessage) {
    run_with(p, req, CancellationToken::new()).await
}

pub fn http(model: ModelSpec, retry: RetryPolicy) -> HttpProvider {
    HttpProvider::new(model).unwrap().with_retry(retry)
}

/// The message as JSON without the clock-dependent `timestamp` and `durationMs` (present).
pub fn json_no_ts(m: &AssistantMessage) -> Value {
    let mut v = serde_json::to_value(m).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("timestamp");
    assert!(
        o.remove("durationMs").is_some_and(|d| d.is_u64()),
        "Pi 1.6 times every streamed response"
    );
    v
}

/// Compare two Pi messages; `usage.cost` numbers are compared to 1e-12 relative, since
/// serde_json (without `float_roundtrip`) may parse JavaScript's shortest float text to
/// a neighbouring f64.
pub fn assert_pi_eq(mut got: Value, mut expected: Value) {
    let gc = got["usage"]
        .as_object_mut()
        .and_then(|u| u.remove("cost"))
        .unwrap_or(Value::Null);
    let ec = expected["usage"]
        .as_object_mut()
        .and_then(|u| u.remove("cost"))
        .unwrap_or(Value::Null);
    pretty_assertions::assert_eq!(got, expected);
    for k in ["input", "output", "cacheRead", "cacheWrite", "total"] {
        let (a, b) = (gc[k].as_f64().unwrap(), ec[k].as_f64().unwrap());
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(1e-300),
            "cost.{k}: {a} vs {b}"
        );
    }
}

/// Replace each `function.arguments` JSON string by its parsed value, so that key
/// order (serde_json sorts keys; JavaScript keeps insertion order) does not matter.
pub fn parse_arguments(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(s)) = o.get("arguments")
                && let Ok(parsed) = serde_json::from_str::<Value>(s)
            {
                o.insert("arguments".into(), parsed);
            }
            for (_, x) in o.iter_mut() {
                parse_arguments(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(parse_arguments),
        _ => {}
    }
}
