//! A stream that ends early is retried (Pi 1.6's auto-retry, issue 16): the partial content
//! of the failed attempt is dropped from the streamed message, and the session holds only the
//! retried answer.

use std::sync::Arc;
use std::time::Duration;

use bh_core::{Agent, Event, Limits, RunStop};
use bh_llm::{Api, HttpProvider, ModelSpec, Provider, RetryPolicy};
use bh_test_support::mock_openai::{chunk, serve, usage};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, fx, messages};

#[tokio::test]
async fn an_early_end_is_retried_and_its_partial_text_dropped() {
    let fx = fx();
    // Ends without finish_reason: the connection closed early.
    let cut = chunk(json!({"role": "assistant", "content": "Half an ans"}), None);
    let whole = [
        chunk(
            json!({"role": "assistant", "content": "The whole answer."}),
            None,
        ),
        chunk(json!({}), Some("stop")),
        usage(10, 4),
    ]
    .concat();
    let (base, seen) = serve(vec![cut, whole]);
    let mut spec = ModelSpec::new("mock", "mock-model", Api::OpenAiCompletions);
    spec.base_url = base;
    spec.api_key = Some("k".into());
    // Pi's delays are 2 s, 4 s, 8 s; scaled down here, nothing measures time.
    let retry = RetryPolicy {
        base_delay: Duration::from_millis(1),
        ..RetryPolicy::default()
    };
    let provider: Arc<dyn Provider> = Arc::new(HttpProvider::new(spec).unwrap().with_retry(retry));
    let mut agent =
        Agent::new(fx.config(provider, fx.new_session(), true, Limits::default())).unwrap();
    let mut events = Vec::new();
    let out = agent
        .run("answer", &CancellationToken::new(), &mut |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed, "{out:?}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    let retries: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Retry { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries, ["Stream ended without finish_reason"]);
    // Every streamed partial after the retry starts from the retried answer.
    let after_retry: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .skip_while(|v| v["type"] != "retry")
        .filter(|v| v["type"] == "message_update")
        .collect();
    assert!(!after_retry.is_empty());
    for v in &after_retry {
        let text = v["message"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(!text.contains("Half"), "stale partial after the retry: {v}");
    }
    let msgs = messages(agent.session_path());
    assert_eq!(msgs.len(), 2, "user and the retried answer only");
    assert_eq!(msgs[1]["content"][0]["text"], "The whole answer.");
    assert_valid(agent.session_path());
}
