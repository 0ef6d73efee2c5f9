//! OpenAI Chat Completions through a local mock server.
//!
//! Over 600 lines: every OpenAI-wire case against one mock server; tests are independent.

use std::time::Duration;

use bh_llm::{ChatRequest, Message, StreamEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::mock::{MockResponse, MockServer, oa, oa_done, oa_raw, oa_usage};
use crate::{
    assert_pi_eq, fake_model, fast_retry, fixture, http, json_no_ts, request, run, run_with,
};
use bh_test_support::mock_http::check_all;

/// The stream the Pi corpus fake server sent for `[[scenario:hello]]` (s01), with the
/// same usage numbers: the final message must equal what Pi stored.
fn hello_stream() -> Vec<String> {
    vec![
        oa(json!({"role": "assistant", "content": ""}), None),
        oa(json!({"reasoning_content": "The user greets me. "}), None),
        oa(
            json!({"reasoning_content": "I should greet back briefly."}),
            None,
        ),
        oa(
            json!({"content": "Hello! I am a scripted fake model. "}),
            None,
        ),
        oa(
            json!({"content": "How can I help with this repository?"}),
            None,
        ),
        oa(json!({}), Some("stop")),
        oa_usage(622, 30, 311),
        oa_done(),
    ]
}

#[tokio::test]
async fn text_and_thinking_match_pi_message() {
    let server = MockServer::start(vec![MockResponse::sse(hello_stream())]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (events, msg) = run(&p, request("hi [[scenario:hello]]")).await;

    let mut expected: Value = serde_json::from_str(&fixture("s01-hello.assistant.json")).unwrap();
    expected.as_object_mut().unwrap().remove("timestamp");
    expected["responseId"] = json!("chatcmpl-mock-1");
    pi16_fields(&mut expected);
    assert_pi_eq(json_no_ts(&msg), expected);

    assert_eq!(events[0], StreamEvent::Start);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::Start => "start",
            StreamEvent::ThinkingStart { .. } => "thinking_start",
            StreamEvent::ThinkingDelta { .. } => "thinking_delta",
            StreamEvent::ThinkingEnd { .. } => "thinking_end",
            StreamEvent::TextStart { .. } => "text_start",
            StreamEvent::TextDelta { .. } => "text_delta",
            StreamEvent::TextEnd { .. } => "text_end",
            StreamEvent::Done(_) => "done",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "text_start",
            "text_delta",
            "text_delta",
            "thinking_end",
            "text_end",
            "done"
        ]
    );
    assert!(events.contains(&StreamEvent::ThinkingEnd {
        index: 0,
        thinking: "The user greets me. I should greet back briefly.".into(),
        signature: Some("reasoning_content".into()),
    }));

    // What went on the wire: Pi's request shape for this provider.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], "Bearer fake-key");
    let b = &r.body;
    assert_eq!(b["model"], "fake-model");
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(b["store"], false);
    assert_eq!(b["max_completion_tokens"], 4096);
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "You are a test."})
    );
    assert_eq!(
        b["messages"][1],
        json!({"role": "user", "content": [{"type": "text", "text": "hi [[scenario:hello]]"}]})
    );
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["function"]["name"], "read");
    assert_eq!(b["tools"][0]["function"]["strict"], false);
    check_all(&reqs);
}

#[tokio::test]
async fn split_and_parallel_tool_calls() {
    let tc = |v: Value| oa(json!({"tool_calls": [v]}), None);
    let server = MockServer::start(vec![MockResponse::sse(vec![
        oa(json!({"role": "assistant", "content": ""}), None),
        oa(json!({"content": "Looking."}), None),
        tc(
            json!({"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}),
        ),
        tc(json!({"index": 0, "function": {"arguments": "{\"pa"}})),
        tc(
            json!({"index": 1, "id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{\"path\""}}),
        ),
        // interleaved: back to call 0
        tc(json!({"index": 0, "function": {"arguments": "th\":\"a.txt\"}"}})),
        tc(json!({"index": 1, "function": {"arguments": ":\"src\"}"}})),
        oa(json!({}), Some("tool_calls")),
        oa_usage(100, 20, 0),
        oa_done(),
    ])]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (events, msg) = run(&p, request("go")).await;
    assert_eq!(msg.stop_reason, "toolUse");
    let v = json_no_ts(&msg);
    assert_eq!(
        v["content"],
        json!([
            {"type": "text", "text": "Looking."},
            {"type": "toolCall", "id": "call_a", "name": "read", "arguments": {"path": "a.txt"}},
            {"type": "toolCall", "id": "call_b", "name": "ls", "arguments": {"path": "src"}},
        ])
    );
    assert_eq!(v["usage"]["input"], 100);
    assert_eq!(v["usage"]["totalTokens"], 120);
    let ends: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallEnd { index, id, .. } => Some((*index, id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [(1, "call_a".to_owned()), (2, "call_b".to_owned())]);
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallDelta { .. }))
        .count();
    assert_eq!(deltas, 4);
}

#[tokio::test]
async fn local_server_quirks_missing_ids_whole_args_no_usage() {
    // Ollama-like: no ids, arguments whole (as a string and as an object), no usage,
    // no `index`, `reasoning` field, no [DONE].
    let server = MockServer::start(vec![MockResponse::sse(vec![
        oa(json!({"reasoning": "think"}), None),
        oa(
            json!({"tool_calls": [{"function": {"name": "read", "arguments": "{\"path\":\"x\"}"}}]}),
            None,
        ),
        oa(
            json!({"tool_calls": [{"index": 1, "function": {"name": "ls", "arguments": {"path": "y"}}}]}),
            None,
        ),
        oa(json!({}), Some("tool_calls")),
    ])]);
    let mut model = fake_model(&server.base);
    model.quirks = bh_llm::Quirks::ollama();
    let p = http(model, fast_retry(0));
    let (_, msg) = run(&p, request("go")).await;
    assert_eq!(msg.stop_reason, "toolUse", "{msg:?}");
    let v = json_no_ts(&msg);
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "think", "thinkingSignature": "reasoning"})
    );
    assert_eq!(v["content"][1]["arguments"], json!({"path": "x"}));
    assert_eq!(v["content"][2]["arguments"], json!({"path": "y"}));
    let id1 = v["content"][1]["id"].as_str().unwrap();
    let id2 = v["content"][2]["id"].as_str().unwrap();
    assert!(id1.starts_with("call_") && id1.len() <= 40 && id1 != id2);
    assert_eq!(v["usage"]["totalTokens"], 0);
    // request: max_tokens, no store, system role
    let b = &server.requests()[0].body;
    assert_eq!(b["max_tokens"], 4096);
    assert!(b.get("max_completion_tokens").is_none());
    assert!(b.get("store").is_none());
    assert!(b["tools"][0]["function"].get("strict").is_none());
}

#[tokio::test]
async fn retry_after_429_then_success() {
    let server = MockServer::start(vec![
        MockResponse::json(429, json!({"error": {"message": "Rate limited"}}))
            .header("retry-after", "1"),
        MockResponse::sse(hello_stream()),
    ]);
    let p = http(fake_model(&server.base), fast_retry(3));
    let (events, msg) = run(&p, request("hi")).await;
    assert_eq!(msg.stop_reason, "stop");
    assert_eq!(server.requests().len(), 2);
    let retry = events
        .iter()
        .find_map(|e| match e {
            StreamEvent::Retry {
                attempt,
                max_retries,
                delay,
                reason,
                failed,
            } => Some((
                *attempt,
                *max_retries,
                *delay,
                reason.clone(),
                failed.clone(),
            )),
            _ => None,
        })
        .expect("a retry");
    assert_eq!(
        (retry.0, retry.1, retry.2, retry.3.as_str()),
        (1, 3, Duration::from_secs(1), "429 Rate limited")
    );
    // The failed attempt as the message it ended with (Pi keeps it in the session).
    assert_eq!(retry.4.stop_reason, "error");
    assert_eq!(retry.4.error_message.as_deref(), Some("429 Rate limited"));
    assert!(retry.4.content.is_empty());
    // both attempts sent the same body
    let reqs = server.requests();
    assert_eq!(reqs[0].body, reqs[1].body);
}

#[tokio::test]
async fn http_500_retried_then_error_message_as_pi() {
    let err = || {
        MockResponse::json(
            500,
            json!({"error": {"message": "Scripted failure from fake server",
            "type": "server_error", "code": 500}}),
        )
    };
    let server = MockServer::start(vec![err(), err(), err()]);
    let p = http(fake_model(&server.base), fast_retry(2));
    let (events, msg) = run(&p, request("fail")).await;
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Retry { .. }))
            .count(),
        2
    );
    let mut expected: Value = serde_json::from_str(&fixture("s09-error.assistant.json")).unwrap();
    expected.as_object_mut().unwrap().remove("timestamp");
    assert_eq!(json_no_ts(&msg), expected);
}

#[tokio::test]
async fn http_400_is_not_retried() {
    let server = MockServer::start(vec![MockResponse::json(
        400,
        json!({"error": {"message": "bad request"}}),
    )]);
    let p = http(fake_model(&server.base), fast_retry(3));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(server.requests().len(), 1);
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(msg.error_message.as_deref(), Some("400 bad request"));
}

#[tokio::test]
async fn stream_cut_mid_message_is_an_error_with_partial_content() {
    let cut = || {
        MockResponse::sse(vec![
            oa(json!({"content": "Partial "}), None),
            oa(json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "read", "arguments": "{\"path\":\"a"}}]}), None),
        ])
        .cut()
    };
    let server = MockServer::start(vec![cut(), cut(), cut()]);
    let p = http(fake_model(&server.base), fast_retry(2));
    let (events, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    // Pi 1.6's text (undici's) for a body closed before its end.
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: other side closed (UND_ERR_SOCKET)")
    );
    let v = json_no_ts(&msg);
    assert_eq!(v["content"][0]["text"], "Partial ");
    // The call never ended: its streaming preview, no argumentsError.
    assert_eq!(v["content"][1]["arguments"], json!({"path": "a"}));
    assert!(v["content"][1].get("argumentsError").is_none());
    // Retried as Pi's auto-retry retries an early end, also after content streamed.
    assert_eq!(server.requests().len(), 3);
    let retries = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retry { .. }))
        .count();
    assert_eq!(retries, 2);
}

#[tokio::test]
async fn stream_cut_mid_message_is_retried_and_the_retry_wins() {
    let server = MockServer::start(vec![
        MockResponse::sse(vec![oa(json!({"content": "Partial "}), None)]).cut(),
        MockResponse::sse(vec![
            oa(json!({"content": "Whole."}), None),
            oa(json!({}), Some("stop")),
            oa_done(),
        ]),
    ]);
    let p = http(fake_model(&server.base), fast_retry(3));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "stop", "{:?}", msg.error_message);
    let v = json_no_ts(&msg);
    assert_eq!(v["content"], json!([{"type": "text", "text": "Whole."}]));
    assert_eq!(server.requests().len(), 2);
}

/// The fixtures were written by Pi 0.73.1; Pi 1.6 adds `rawStopReason` (the provider's
/// `finish_reason`) and, whenever a usage chunk arrived, `usage.reasoning`.
fn pi16_fields(expected: &mut Value) {
    let raw = match expected["stopReason"].as_str() {
        Some("length") => "length",
        Some("toolUse") => "tool_calls",
        _ => "stop",
    };
    expected["rawStopReason"] = json!(raw);
    expected["usage"]["reasoning"] = json!(0);
}

#[tokio::test]
async fn clean_eof_without_finish_reason_is_an_error() {
    let server = MockServer::start(vec![MockResponse::sse(vec![oa(
        json!({"content": "Hi"}),
        None,
    )])]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Stream ended without finish_reason")
    );
}

#[tokio::test]
async fn finish_reasons_map_as_pi() {
    let server = MockServer::start(vec![
        MockResponse::sse(vec![
            oa(
                json!({"content": "This answer is cut off because the max token limit was"}),
                None,
            ),
            oa(json!({}), Some("length")),
            oa_usage(629, 14, 314),
            oa_done(),
        ]),
        MockResponse::sse(vec![oa(json!({}), Some("content_filter")), oa_done()]),
    ]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    let mut expected: Value = serde_json::from_str(&fixture("s10-length.assistant.json")).unwrap();
    expected.as_object_mut().unwrap().remove("timestamp");
    expected["responseId"] = json!("chatcmpl-mock-1");
    pi16_fields(&mut expected);
    assert_pi_eq(json_no_ts(&msg), expected);
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Provider finish_reason: content_filter")
    );
}

#[tokio::test]
async fn cancellation_mid_stream_gives_aborted_with_partial_text() {
    let server = MockServer::start(vec![
        MockResponse::sse(vec![
            oa(json!({"role": "assistant", "content": ""}), None),
            oa(json!({"content": "This is a slow answer. "}), None),
        ])
        .hang(),
    ]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let mut s = bh_llm::Provider::stream(&p, request("slow"), cancel);
    let mut done = None;
    use futures::StreamExt;
    while let Some(ev) = s.next().await {
        match ev {
            StreamEvent::TextDelta { .. } => c2.cancel(),
            StreamEvent::Done(m) => done = Some(*m),
            _ => {}
        }
    }
    let msg = done.unwrap();
    let mut expected: Value = serde_json::from_str(&fixture("s11-aborted.assistant.json")).unwrap();
    expected.as_object_mut().unwrap().remove("timestamp");
    expected["content"][0]["text"] = json!("This is a slow answer. ");
    expected["responseId"] = json!("chatcmpl-mock-1");
    assert_eq!(json_no_ts(&msg), expected);
}

#[tokio::test]
async fn cancellation_before_response() {
    let server = MockServer::start(vec![MockResponse::sse(vec![]).hang()]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c2.cancel();
    });
    let (_, msg) = run_with(&p, request("x"), cancel).await;
    assert_eq!(msg.stop_reason, "aborted");
    assert_eq!(msg.error_message.as_deref(), Some("Request was aborted"));
    assert!(msg.content.is_empty());
}

#[tokio::test]
async fn multi_turn_history_requests_keep_invariants() {
    // Turn 1: two tool calls. The loop then sends the history with results back.
    let tc = |v: Value| oa(json!({"tool_calls": [v]}), None);
    let server = MockServer::start(vec![
        MockResponse::sse(vec![
            tc(
                json!({"index": 0, "id": "call_1", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}),
            ),
            tc(json!({"index": 1, "id": "call_2", "function": {"name": "ls", "arguments": "{}"}})),
            oa(json!({}), Some("tool_calls")),
            oa_done(),
        ]),
        MockResponse::sse(hello_stream()),
    ]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let mut req = request("start");
    let (_, a1) = run(&p, req.clone()).await;
    req.messages.to_mut().push(Message::Assistant(Box::new(a1)));
    // only one result: the other must be synthesised
    req.messages.to_mut().push(
        Message::from_agent_message(&json!({"role": "toolResult", "toolCallId": "call_1",
            "toolName": "read", "content": [{"type": "text", "text": "A"}], "isError": false, "timestamp": 2}))
        .unwrap()
        .unwrap(),
    );
    let (_, a2) = run(&p, req).await;
    assert_eq!(a2.stop_reason, "stop");
    let reqs = server.requests();
    check_all(&reqs);
    let msgs = reqs[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(msgs[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "content": "A", "tool_call_id": "call_1"})
    );
    assert_eq!(
        msgs[4],
        json!({"role": "tool", "content": "No result provided", "tool_call_id": "call_2"})
    );
}

#[tokio::test]
async fn mid_stream_error_object() {
    let server = MockServer::start(vec![MockResponse::sse(vec![oa_raw(
        json!({"error": {"message": "model crashed"}}),
    )])]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, ChatRequest::default()).await;
    assert_eq!(msg.stop_reason, "error");
    assert_eq!(msg.error_message.as_deref(), Some("model crashed"));
}

#[tokio::test]
async fn retry_after_too_long_is_not_waited_for() {
    let server = MockServer::start(vec![
        MockResponse::json(429, json!({"error": {"message": "slow down"}}))
            .header("retry-after", "3600"),
    ]);
    let p = http(fake_model(&server.base), fast_retry(3));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(server.requests().len(), 1);
    assert_eq!(msg.error_message.as_deref(), Some("429 slow down"));
}

#[tokio::test]
async fn connection_refused_is_retried_then_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let p = http(fake_model(&format!("http://{addr}")), fast_retry(2));
    let (events, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    let error = msg.error_message.unwrap();
    assert!(error.starts_with("Connection error"), "{error}");
    // The cause chain, not just reqwest's "error sending request".
    assert!(
        error.to_ascii_lowercase().contains("connection refused"),
        "{error}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Retry { .. }))
            .count(),
        2
    );
}

#[tokio::test]
async fn idle_stream_times_out() {
    let server = MockServer::start(vec![
        MockResponse::sse(vec![oa(json!({"content": "Hi"}), None)]).hang(),
    ]);
    let mut retry = fast_retry(0);
    retry.idle_timeout = Duration::from_millis(200);
    let p = http(fake_model(&server.base), retry);
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    assert!(
        msg.error_message
            .as_deref()
            .unwrap()
            .starts_with("Stream idle")
    );
    assert_eq!(json_no_ts(&msg)["content"][0]["text"], "Hi");
}

#[test]
fn retry_after_header_forms() {
    use reqwest::header::{HeaderMap, HeaderValue};
    let mut h = HeaderMap::new();
    h.insert("retry-after", HeaderValue::from_static("2"));
    assert_eq!(bh_llm::retry_after(&h), Some(Duration::from_secs(2)));
    h.insert("retry-after-ms", HeaderValue::from_static("150"));
    assert_eq!(bh_llm::retry_after(&h), Some(Duration::from_millis(150)));
    let mut h = HeaderMap::new();
    h.insert(
        "retry-after",
        HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
    );
    assert_eq!(bh_llm::retry_after(&h), Some(Duration::ZERO));
    h.insert("retry-after", HeaderValue::from_static("soon"));
    assert_eq!(bh_llm::retry_after(&h), None);
}

#[test]
fn developer_role_and_reasoning_effort_for_openai() {
    let mut m = fake_model("http://x");
    m.quirks = bh_llm::Quirks::openai();
    let mut req = request("x");
    req.thinking = bh_llm::ThinkingLevel::High;
    let b = bh_llm::wire::openai::build_body(&m, &req);
    assert_eq!(b["messages"][0]["role"], "developer");
    assert_eq!(b["reasoning_effort"], "high");
    m.reasoning = false;
    let b = bh_llm::wire::openai::build_body(&m, &req);
    assert_eq!(b["messages"][0]["role"], "system");
    assert!(b.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn non_streaming_json_response_is_accepted() {
    let body = json!({"id": "chatcmpl-x", "object": "chat.completion", "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": "Reading.", "reasoning_content": "hmm",
            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}});
    let server = MockServer::start(vec![MockResponse::json(200, body)]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    let v = json_no_ts(&msg);
    assert_eq!(v["stopReason"], "toolUse");
    assert_eq!(
        v["content"],
        json!([
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "reasoning_content"},
            {"type": "text", "text": "Reading."},
            {"type": "toolCall", "id": "call_9", "name": "read", "arguments": {"path": "a"}},
        ])
    );
    assert_eq!(v["usage"]["totalTokens"], 15);
    assert_eq!(v["responseId"], "chatcmpl-x");
}

#[tokio::test]
async fn calls_all_numbered_index_zero_are_kept_apart() {
    let tc = |v: Value| oa(json!({"tool_calls": [v]}), None);
    let server = MockServer::start(vec![MockResponse::sse(vec![
        tc(
            json!({"index": 0, "id": "call_1", "function": {"name": "read", "arguments": "{\"path\":"}}),
        ),
        tc(json!({"index": 0, "function": {"arguments": "\"a\"}"}})),
        tc(json!({"index": 0, "id": "call_2", "function": {"name": "ls", "arguments": "{}"}})),
        oa(json!({}), Some("tool_calls")),
        oa_done(),
    ])]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    assert_eq!(
        json_no_ts(&msg)["content"],
        json!([
            {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a"}},
            {"type": "toolCall", "id": "call_2", "name": "ls", "arguments": {}},
        ])
    );
}

#[tokio::test]
async fn azure_empty_first_id_takes_the_later_one_and_reasoning_tokens_count() {
    // Azure's first chunk (prompt filter results) has `id: ""` and no choices.
    let server = MockServer::start(vec![MockResponse::sse(vec![
        oa_raw(
            json!({"id": "", "object": "", "created": 0, "model": "", "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}),
        ),
        oa(json!({"content": "Hi"}), None),
        oa(json!({}), Some("stop")),
        oa_raw(
            json!({"id": "chatcmpl-mock-1", "object": "chat.completion.chunk", "model": "fake-model",
            "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18,
            "completion_tokens_details": {"reasoning_tokens": 5}}}),
        ),
        oa_done(),
    ])]);
    let p = http(fake_model(&server.base), fast_retry(0));
    let (_, msg) = run(&p, request("x")).await;
    let v = json_no_ts(&msg);
    assert_eq!(v["responseId"], "chatcmpl-mock-1");
    assert_eq!(v["rawStopReason"], "stop");
    assert_eq!(v["usage"]["reasoning"], 5);
    assert_eq!(v["usage"]["output"], 8);
}
