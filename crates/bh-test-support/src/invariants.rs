//! Request-body invariants of the tool-call wires, checked on every request a
//! mock server records (after codex's `validate_request_body_invariants`):
//! each tool call has exactly one result right after it, no result exists
//! without its call, and Anthropic ids keep the API's charset. A history the
//! harness sends that breaks them is one the real API refuses with a 400.

use std::collections::HashSet;

use serde_json::Value;

/// What is wrong with an OpenAI Chat Completions body, if anything.
pub fn openai_violation(body: &Value) -> Option<String> {
    let Some(msgs) = body["messages"].as_array() else {
        return Some(format!("no messages array in {body}"));
    };
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match m["role"].as_str() {
            Some("assistant") => {
                let calls: Vec<&str> = m["tool_calls"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                let mut j = i + 1;
                while j < msgs.len() && msgs[j]["role"] == "tool" {
                    let id = msgs[j]["tool_call_id"].as_str().unwrap_or_default();
                    if !calls.contains(&id) {
                        return Some(format!("orphan tool result {id} in {body}"));
                    }
                    if !seen.insert(id) {
                        return Some(format!("duplicate result {id} in {body}"));
                    }
                    j += 1;
                }
                if let Some(c) = calls.iter().find(|c| !seen.contains(*c)) {
                    return Some(format!("tool call {c} without result in {body}"));
                }
                i = j;
            }
            Some("tool") => return Some(format!("tool result without a preceding assistant: {m}")),
            _ => i += 1,
        }
    }
    None
}

/// What is wrong with an Anthropic Messages body, if anything.
pub fn anthropic_violation(body: &Value) -> Option<String> {
    let Some(msgs) = body["messages"].as_array() else {
        return Some(format!("no messages array in {body}"));
    };
    let blocks_of = |m: &Value, kind: &str, field: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|b| b["type"] == kind)
                    .map(|b| b[field].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (i, m) in msgs.iter().enumerate() {
        let mut results = blocks_of(m, "tool_result", "tool_use_id");
        if !results.is_empty() {
            if m["role"] != "user" {
                return Some(format!("tool results in a {} message at {i}", m["role"]));
            }
            let Some(prev) = i.checked_sub(1).map(|p| &msgs[p]) else {
                return Some("tool results in the first message".to_owned());
            };
            let mut calls = blocks_of(prev, "tool_use", "id");
            results.sort();
            calls.sort();
            if results != calls {
                return Some(format!(
                    "tool_use/tool_result mismatch at message {i}: {calls:?} vs {results:?}"
                ));
            }
        }
        if m["role"] == "assistant" {
            let calls = blocks_of(m, "tool_use", "id").len();
            let answered = msgs.get(i + 1).map_or(0, |next| {
                blocks_of(next, "tool_result", "tool_use_id").len()
            });
            if calls > 0 && answered != calls {
                return Some(format!(
                    "every tool_use needs a result: {calls} calls, {answered} results after message {i}"
                ));
            }
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if let Some(id) = b["id"].as_str().or(b["tool_use_id"].as_str()) {
                let ok = !id.is_empty()
                    && id.len() <= 64
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Some(format!("invalid anthropic id {id}"));
                }
            }
        }
    }
    None
}

/// What is wrong with a request to `path` (the wire is told by its path);
/// `None` for paths of neither wire.
pub fn violation(path: &str, body: &Value) -> Option<String> {
    // `/v1/messages?beta=true` (Claude Code) is the messages path too.
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        openai_violation(body)
    } else if path.ends_with("/v1/messages") || path.ends_with("/messages") {
        anthropic_violation(body)
    } else {
        None
    }
}

/// Panics with what is wrong with an OpenAI body.
pub fn check_openai(body: &Value) {
    if let Some(v) = openai_violation(body) {
        panic!("request breaks the tool-call invariants: {v}");
    }
}

/// Panics with what is wrong with an Anthropic body.
pub fn check_anthropic(body: &Value) {
    if let Some(v) = anthropic_violation(body) {
        panic!("request breaks the tool-call invariants: {v}");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_call_without_its_result_is_caught() {
        let v = openai_violation(&json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "y"},
        ]}));
        assert!(v.unwrap().contains("without result"));
    }

    #[test]
    fn an_orphan_result_is_caught() {
        let v = openai_violation(&json!({"messages": [
            {"role": "assistant", "content": "hi"},
            {"role": "tool", "content": "r", "tool_call_id": "zz"},
        ]}));
        assert!(v.unwrap().contains("orphan"));
    }

    #[test]
    fn an_anthropic_mismatch_is_caught() {
        let v = anthropic_violation(&json!({"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": ""}]},
        ]}));
        assert!(v.unwrap().contains("mismatch"));
    }

    #[test]
    fn a_well_formed_history_passes_both_wires() {
        let oa = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "r", "tool_call_id": "a"},
        ]});
        assert_eq!(openai_violation(&oa), None);
        let an = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}]},
        ]});
        assert_eq!(anthropic_violation(&an), None);
    }
}
