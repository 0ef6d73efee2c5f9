use bh_llm::{Api, Message, ModelCost, ModelSpec, StreamEvent, ThinkingLevel};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::mock::{MockResponse, MockServer, an};
use crate::{fast_retry, http, json_no_ts, request, run};
use bh_test_support::mock_http::check_all;

fn model(base: &str) -> ModelSpec {
    let mut m = ModelSpec::new("anthropic", "claude-sonnet-4-5", Api::AnthropicMessages);
    m.base_url = base.to_owned();
    m.api_key = Some("sk-ant-test".into());
    m.reasoning = true;
    m.max_tokens = 64_000;
    m.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
    };
    m
}

fn thinking_tool_stream() -> Vec<String> {
    vec![
        an(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_01", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 50, "output_tokens": 1, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 20}}}),
        ),
        an("ping", json!({"type": "ping"})),
        an(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me read "}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "the file."}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}}),
        ),
        an(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        an(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading."}}),
        ),
        an(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        an(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ".txt\"}"}}),
        ),
        an(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        an(
            "content_block_start",
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_02", "name": "ls", "input": {}}}),
        ),
        an(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ),
        an(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 3}),
        ),
        an(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 40}}),
        ),
        an("message_stop", json!({"type": "message_stop"})),
    ]
}

#[tokio::test]
async fn thinking_signature_text_parallel_tools_usage() {
    let server = MockServer::start(vec![MockResponse::sse(thinking_tool_stream())]);
    let p = http(model(&server.base), fast_retry(0));
    let mut req = request("read it");
    req.thinking = ThinkingLevel::Medium;
    let (events, msg) = run(&p, req).await;
    let v = json_no_ts(&msg);
    let (ci, co, cr, cw) = (
        (3.0 / 1e6) * 50.0,
        (15.0 / 1e6) * 40.0,
        (0.3 / 1e6) * 1000.0,
        // Pi 1.6's formula for cache writes (5-minute and 1-hour writes priced apart).
        (3.75 * 20.0 + 3.0 * 2.0 * 0.0) / 1e6,
    );
    assert_eq!(
        v,
        json!({
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Let me read the file.", "thinkingSignature": "EqQBCgIYAh"},
                {"type": "text", "text": "Reading."},
                {"type": "toolCall", "id": "toolu_01", "name": "read", "arguments": {"path": "a.txt"}},
                {"type": "toolCall", "id": "toolu_02", "name": "ls", "arguments": {}},
            ],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 50, "output": 40, "cacheRead": 1000, "cacheWrite": 20, "totalTokens": 1110,
                "cost": {"input": ci, "output": co, "cacheRead": cr, "cacheWrite": cw,
                    "total": ci + co + cr + cw, "totalFromProvider": false}, "cacheWrite1h": 0},
            "stopReason": "toolUse",
            "responseId": "msg_01",
            "rawStopReason": "tool_use",
        })
    );
    assert!(events.contains(&StreamEvent::ThinkingEnd {
        index: 0,
        thinking: "Let me read the file.".into(),
        signature: Some("EqQBCgIYAh".into())
    }));

    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.headers["x-api-key"], "sk-ant-test");
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert!(!r.headers.contains_key("authorization"));
    let b = &r.body;
    assert_eq!(b["stream"], true);
    assert_eq!(b["model"], "claude-sonnet-4-5");
    assert_eq!(b["thinking"]["type"], "enabled");
    assert_eq!(b["system"][0]["text"], "You are a test.");
    assert_eq!(b["tools"][0]["input_schema"]["required"], json!(["path"]));
    assert_eq!(b["tools"][1]["input_schema"]["required"], json!([]));
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "read it", "cache_control": {"type": "ephemeral"}}]}])
    );
}

#[tokio::test]
async fn history_round_trip_and_invariants() {
    let server = MockServer::start(vec![
        MockResponse::sse(thinking_tool_stream()),
        MockResponse::sse(vec![
            an(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_02", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            ),
            an(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            an(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}}),
            ),
            an(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            an(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            ),
            an("message_stop", json!({"type": "message_stop"})),
        ]),
    ]);
    let p = http(model(&server.base), fast_retry(0));
    let mut req = request("read it");
    req.thinking = ThinkingLevel::Medium;
    let (_, a1) = run(&p, req.clone()).await;
    req.messages.to_mut().push(Message::Assistant(Box::new(a1)));
    req.messages.to_mut().push(
        Message::from_agent_message(&json!({"role": "toolResult", "toolCallId": "toolu_02",
            "toolName": "ls", "content": [{"type": "text", "text": "a.txt"}], "isError": false, "timestamp": 3}))
        .unwrap()
        .unwrap(),
    );
    let (_, a2) = run(&p, req).await;
    assert_eq!(a2.stop_reason, "stop");
    assert_eq!(a2.usage.output, 3);
    assert_eq!(a2.usage.input, 5);
    let reqs = server.requests();
    check_all(&reqs);
    let msgs = reqs[1].body["messages"].as_array().unwrap().clone();
    // same-model thinking is replayed with its signature
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "thinking", "thinking": "Let me read the file.", "signature": "EqQBCgIYAh"})
    );
    // results in call order in one user message; the missing one synthesised
    assert_eq!(msgs[2]["role"], "user");
    let results: Vec<(&str, &Value)> = msgs[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["tool_use_id"].as_str().unwrap(), &b["is_error"]))
        .collect();
    assert_eq!(
        results,
        [("toolu_02", &json!(false)), ("toolu_01", &json!(true))]
    );
}

#[tokio::test]
async fn overloaded_529_then_stream_error_then_success() {
    let server = MockServer::start(vec![
        MockResponse::json(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        MockResponse::sse(vec![an(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )]),
        MockResponse::sse(thinking_tool_stream()),
    ]);
    let p = http(model(&server.base), fast_retry(3));
    let (events, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "toolUse");
    assert_eq!(server.requests().len(), 3);
    let reasons: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons[0],
        r#"529 {"error":{"message":"Overloaded","type":"overloaded_error"},"type":"error"}"#
    );
    assert!(reasons[1].contains("overloaded_error"));
}

#[tokio::test]
async fn stream_ended_before_message_stop() {
    let mut s = thinking_tool_stream();
    s.truncate(9);
    let server = MockServer::start(vec![MockResponse::sse(s)]);
    let p = http(model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Anthropic stream ended before message_stop")
    );
    let v = json_no_ts(&msg);
    assert_eq!(v["content"][1]["text"], "Reading.");
    assert_eq!(v["usage"]["input"], 50);
}

#[tokio::test]
async fn stream_cut_is_error() {
    let mut s = thinking_tool_stream();
    s.truncate(13);
    let server = MockServer::start(vec![MockResponse::sse(s).cut()]);
    let p = http(model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: other side closed (UND_ERR_SOCKET)")
    );
    assert_eq!(msg.content.len(), 3);
}

#[tokio::test]
async fn http_400_message_as_sdk() {
    let body =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
    let server = MockServer::start(vec![MockResponse::json(400, body)]);
    let p = http(model(&server.base), fast_retry(2));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        msg.error_message.as_deref(),
        Some(r#"400 {"error":{"message":"bad","type":"invalid_request_error"},"type":"error"}"#)
    );
}

#[tokio::test]
async fn redacted_thinking_and_refusal() {
    let server = MockServer::start(vec![MockResponse::sse(vec![
        an(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}}),
        ),
        an(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "OPAQUE"}}),
        ),
        an(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        an(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 1}}),
        ),
        an("message_stop", json!({"type": "message_stop"})),
    ])]);
    let p = http(model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    let v = json_no_ts(&msg);
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "[Reasoning redacted]", "thinkingSignature": "OPAQUE", "redacted": true})
    );
    assert_eq!(v["stopReason"], "error");
}

fn start_event(model: &str) -> String {
    an(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_r", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null,
            "usage": {"input_tokens": 5, "output_tokens": 1,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 7}}}}),
    )
}

#[tokio::test]
async fn refusal_carries_the_providers_explanation() {
    let refusal = |details: Value| {
        vec![
            start_event("claude-sonnet-4-5"),
            an(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_details": details},
                    "usage": {"output_tokens": 3, "output_tokens_details": {"thinking_tokens": 2}}}),
            ),
            an("message_stop", json!({"type": "message_stop"})),
        ]
    };
    let server = MockServer::start(vec![
        MockResponse::sse(refusal(
            json!({"type": "refusal", "category": "cyber", "explanation": "This request asks for malware."}),
        )),
        MockResponse::sse(refusal(Value::Null)),
    ]);
    let p = http(model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    let v = json_no_ts(&msg);
    assert_eq!(v["stopReason"], "error");
    assert_eq!(v["rawStopReason"], "refusal");
    assert_eq!(v["errorMessage"], "This request asks for malware.");
    assert_eq!(v["usage"]["cacheWrite1h"], 7);
    assert_eq!(v["usage"]["reasoning"], 2);
    assert!(v.get("responseModel").is_none(), "same model as asked");
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("The model refused to complete the request")
    );
    assert_eq!(server.requests().len(), 2, "a refusal is not retried");
}

#[tokio::test]
async fn early_ends_have_pis_texts_and_are_retried() {
    let server = MockServer::start(vec![
        // Cut after message_start.
        MockResponse::sse(vec![start_event("claude-sonnet-4-5-20250929")]),
        // message_stop without a stop reason.
        MockResponse::sse(vec![
            start_event("claude-sonnet-4-5-20250929"),
            an("message_stop", json!({"type": "message_stop"})),
        ]),
        MockResponse::sse(vec![start_event("claude-sonnet-4-5-20250929")]),
        MockResponse::sse(vec![start_event("claude-sonnet-4-5-20250929")]),
    ]);
    let p = http(model(&server.base), fast_retry(3));
    let (events, msg) = run(&p, request("x")).await;
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "Anthropic stream ended before message_stop",
            "Anthropic stream ended without a stop reason",
            "Anthropic stream ended before message_stop",
        ]
    );
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Anthropic stream ended before message_stop")
    );
    // A fallback model answered: Pi 1.6 records it.
    let v = json_no_ts(&msg);
    assert_eq!(v["responseModel"], "claude-sonnet-4-5-20250929");
    assert_eq!(server.requests().len(), 4);
}
