//! A stream that ends early is retried (Pi 1.6's auto-retry, issue 16): the partial content
//! of the failed attempt is dropped from the streamed message; the session keeps the failed
//! attempt as Pi 1.6 keeps it (the error message, then a `context_edit` that omits it from
//! the model's context, issue 27 item 16) before the retried answer.

use std::sync::Arc;
use std::time::Duration;

use bh_core::{Agent, Limits, RunStop};
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
    // Pi 1.6's `--mode json` retry events, by name and fields.
    let json: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let start = json
        .iter()
        .position(|v| v["type"] == "auto_retry_start")
        .expect("auto_retry_start");
    assert_eq!(
        json[start],
        json!({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 1,
            "errorMessage": "Stream ended without finish_reason"})
    );
    let end = json
        .iter()
        .position(|v| v["type"] == "auto_retry_end")
        .expect("auto_retry_end");
    assert_eq!(
        json[end],
        json!({"type": "auto_retry_end", "success": true, "attempt": 1})
    );
    // As Pi: the end follows the retried response's message_end.
    assert_eq!(json[end - 1]["type"], "message_end");
    assert_eq!(json[end - 1]["message"]["role"], "assistant");
    assert!(start < end);
    assert!(!json.iter().any(|v| v["type"] == "retry"));
    // Every streamed partial after the retry starts from the retried answer.
    let after_retry: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .skip_while(|v| v["type"] != "auto_retry_start")
        .filter(|v| v["type"] == "message_update")
        .collect();
    assert!(!after_retry.is_empty());
    for v in &after_retry {
        let text = v["message"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(!text.contains("Half"), "stale partial after the retry: {v}");
    }
    // The failed attempt's message_end comes before auto_retry_start, as in Pi.
    assert_eq!(json[start - 1]["type"], "message_end");
    assert_eq!(json[start - 1]["message"]["stopReason"], "error");
    let msgs = messages(agent.session_path());
    assert_eq!(
        msgs.len(),
        3,
        "user, the failed attempt, the retried answer"
    );
    assert_eq!(msgs[1]["stopReason"], "error");
    assert_eq!(
        msgs[1]["errorMessage"],
        "Stream ended without finish_reason"
    );
    assert_eq!(msgs[1]["content"][0]["text"], "Half an ans");
    assert_eq!(msgs[2]["content"][0]["text"], "The whole answer.");
    // The entries as Pi 1.6 writes them: message, context_edit(target, null), message.
    let entries: Vec<Value> = fs_err::read_to_string(agent.session_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = entries
        .iter()
        .position(|e| e["message"]["stopReason"] == "error")
        .unwrap();
    let edit = &entries[failed + 1];
    assert_eq!(edit["type"], "context_edit");
    assert_eq!(edit["targetId"], entries[failed]["id"]);
    assert_eq!(edit["parentId"], entries[failed]["id"]);
    assert!(edit["replacement"].is_null() && edit.get("replacement").is_some());
    assert_eq!(entries[failed + 2]["parentId"], edit["id"]);
    // The retried request did not carry the failed attempt, and the context
    // built from the file leaves it out.
    let second = seen.lock().unwrap()[1].1.to_string();
    assert!(!second.contains("Half an ans"), "{second}");
    let session = assert_valid(agent.session_path());
    let context = session.context(None).unwrap();
    assert_eq!(context.messages.len(), 2, "the failed attempt is omitted");
}

/// Every retry fails too: `auto_retry_end` says so with the last error, as Pi's does.
#[tokio::test]
async fn retries_that_all_fail_end_with_the_final_error() {
    let fx = fx();
    let cut = || chunk(json!({"role": "assistant", "content": "Half"}), None);
    let (base, seen) = serve(vec![cut(), cut(), cut()]);
    let mut spec = ModelSpec::new("mock", "mock-model", Api::OpenAiCompletions);
    spec.base_url = base;
    spec.api_key = Some("k".into());
    let retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(1),
        ..RetryPolicy::default()
    };
    let provider: Arc<dyn Provider> = Arc::new(HttpProvider::new(spec).unwrap().with_retry(retry));
    let mut agent =
        Agent::new(fx.config(provider, fx.new_session(), true, Limits::default())).unwrap();
    let mut events = Vec::new();
    agent
        .run("answer", &CancellationToken::new(), &mut |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
    let retry_events: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|v| {
            v["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("auto_retry"))
        })
        .collect();
    assert_eq!(
        retry_events,
        [
            json!({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 2, "delayMs": 1,
                "errorMessage": "Stream ended without finish_reason"}),
            json!({"type": "auto_retry_start", "attempt": 2, "maxAttempts": 2, "delayMs": 2,
                "errorMessage": "Stream ended without finish_reason"}),
            json!({"type": "auto_retry_end", "success": false, "attempt": 2,
                "finalError": "Stream ended without finish_reason"}),
        ]
    );
    assert_valid(agent.session_path());
}
