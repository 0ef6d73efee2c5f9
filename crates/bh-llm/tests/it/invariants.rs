//! Request-body invariants checked on every recorded request (after codex's
//! `validate_request_body_invariants`): each tool call has exactly one result right
//! after it, and no result exists without its call.

use std::collections::HashSet;

use serde_json::Value;

use crate::mock::Recorded;

pub fn check_openai(body: &Value) {
    let msgs = body["messages"].as_array().expect("messages");
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match m["role"].as_str() {
            Some("assistant") => {
                let calls: Vec<String> = m["tool_calls"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|c| c["id"].as_str().unwrap().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                let mut j = i + 1;
                while j < msgs.len() && msgs[j]["role"] == "tool" {
                    let id = msgs[j]["tool_call_id"].as_str().unwrap().to_owned();
                    assert!(calls.contains(&id), "orphan tool result {id} in {body}");
                    assert!(seen.insert(id.clone()), "duplicate result {id}");
                    j += 1;
                }
                for c in &calls {
                    assert!(seen.contains(c), "tool call {c} without result in {body}");
                }
                i = j;
            }
            Some("tool") => panic!("tool result without a preceding assistant: {m}"),
            _ => i += 1,
        }
    }
}

pub fn check_anthropic(body: &Value) {
    let msgs = body["messages"].as_array().expect("messages");
    for (i, m) in msgs.iter().enumerate() {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        let results: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap().to_owned())
            .collect();
        if !results.is_empty() {
            assert_eq!(m["role"], "user");
            let prev = i.checked_sub(1).map(|p| &msgs[p]).expect("results first");
            let calls: Vec<String> = prev["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap().to_owned())
                .collect();
            let mut a = results.clone();
            a.sort();
            let mut b = calls.clone();
            b.sort();
            assert_eq!(a, b, "tool_use/tool_result mismatch at message {i}");
        }
        if m["role"] == "assistant" {
            let calls = blocks.iter().filter(|b| b["type"] == "tool_use").count();
            if calls > 0 {
                let next = msgs
                    .get(i + 1)
                    .expect("tool_use must be followed by results");
                let n = next["content"]
                    .as_array()
                    .map(|a| a.iter().filter(|b| b["type"] == "tool_result").count())
                    .unwrap_or(0);
                assert_eq!(n, calls, "every tool_use needs a result");
            }
        }
        for b in &blocks {
            if let Some(id) = b["id"].as_str().or(b["tool_use_id"].as_str()) {
                assert!(
                    !id.is_empty()
                        && id.len() <= 64
                        && id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                    "invalid anthropic id {id}"
                );
            }
        }
    }
}

pub fn check_all(reqs: &[Recorded]) {
    for r in reqs {
        if r.path.ends_with("/chat/completions") {
            check_openai(&r.body);
        } else if r.path.ends_with("/v1/messages") {
            check_anthropic(&r.body);
        }
    }
}

#[test]
#[should_panic(expected = "without result")]
fn openai_check_catches_missing_result() {
    check_openai(&serde_json::json!({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "y"},
    ]}));
}

#[test]
#[should_panic(expected = "orphan")]
fn openai_check_catches_orphan_result() {
    check_openai(&serde_json::json!({"messages": [
        {"role": "assistant", "content": "hi"},
        {"role": "tool", "content": "r", "tool_call_id": "zz"},
    ]}));
}

#[test]
#[should_panic(expected = "mismatch")]
fn anthropic_check_catches_mismatch() {
    check_anthropic(&serde_json::json!({"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": ""}]},
    ]}));
}
