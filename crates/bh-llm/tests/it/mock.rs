//! The SSE bodies of both wires, for the workspace's one scripted model
//! server ([`bh_test_support::mock_http`], which also checks every request
//! against the tool-call invariants).

use serde_json::{Value, json};

pub use bh_test_support::mock_http::{MockResponse, MockServer};

// ---- SSE builders ------------------------------------------------------------------

/// An OpenAI chunk in the shape the fake server (and OpenAI) sends.
pub fn oa(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-mock-1", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

pub fn oa_raw(v: Value) -> String {
    format!("data: {v}\n\n")
}

pub fn oa_usage(prompt: u64, completion: u64, cached: u64) -> String {
    let c = json!({"id": "chatcmpl-mock-1", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}}});
    format!("data: {c}\n\n")
}

pub fn oa_done() -> String {
    "data: [DONE]\n\n".to_owned()
}

/// An Anthropic SSE event.
pub fn an(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}
