//! The safety rule of issue 16: a tool call from a response cut by the output token limit
//! (Anthropic `max_tokens`, OpenAI `finish_reason: "length"`) or with arguments that are not a
//! JSON object is never executed; like Pi 1.6 it gets an error result telling the model why.
//! Proved with `write`: no file appears, whatever the arguments parse to.

use std::sync::Arc;

use bh_core::{Agent, Limits, RunStop};
use bh_llm::{Api, HttpProvider, ModelSpec, Provider, RetryPolicy};
use bh_test_support::mock_openai::{chunk, serve, usage};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, fx, messages};

const TRUNCATED: &str = "Tool call \"write\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.";

fn done_turn() -> String {
    [
        chunk(json!({"role": "assistant", "content": "Done."}), None),
        chunk(json!({}), Some("stop")),
        usage(70, 3),
    ]
    .concat()
}

fn openai_write(args: &[&str], finish: &str) -> String {
    let mut out = vec![chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_w", "type": "function",
            "function": {"name": "write", "arguments": ""}}]}),
        None,
    )];
    for a in args {
        out.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            None,
        ));
    }
    out.push(chunk(json!({}), Some(finish)));
    out.push(usage(50, 4096));
    out.concat()
}

fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_write_cut() -> String {
    [
        anthropic_event(
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
        ),
        anthropic_event(
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write","input":{}}}),
        ),
        anthropic_event(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"cut.txt\", \"content\": \"first half"}}),
        ),
        anthropic_event(
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        anthropic_event(
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4096}}),
        ),
        anthropic_event("message_stop", json!({"type":"message_stop"})),
    ]
    .concat()
}

fn anthropic_done() -> String {
    [
        anthropic_event(
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}),
        ),
        anthropic_event(
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        anthropic_event(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}),
        ),
        anthropic_event(
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        anthropic_event(
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}),
        ),
        anthropic_event("message_stop", json!({"type":"message_stop"})),
    ]
    .concat()
}

/// Runs one prompt against the mock; returns the session's messages.
async fn run(api: Api, responses: Vec<String>) -> (crate::support::Fx, Vec<Value>) {
    let (fx, msgs, _) = run_events(api, responses).await;
    (fx, msgs)
}

/// [`run`], also returning the events as JSON.
async fn run_events(
    api: Api,
    responses: Vec<String>,
) -> (crate::support::Fx, Vec<Value>, Vec<Value>) {
    let fx = fx();
    let (base, _seen) = serve(responses);
    let mut spec = ModelSpec::new("mock", "mock-model", api);
    spec.base_url = base;
    spec.api_key = Some("test-key".into());
    let provider: Arc<dyn Provider> = Arc::new(
        HttpProvider::new(spec)
            .unwrap()
            .with_retry(RetryPolicy::default()),
    );
    let mut agent =
        Agent::new(fx.config(provider, fx.new_session(), true, Limits::default())).unwrap();
    let mut events = Vec::new();
    let out = agent
        .run("write the file", &CancellationToken::new(), &mut |e| {
            events.push(serde_json::to_value(e).unwrap())
        })
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed, "{out:?}");
    assert_eq!(out.tool_calls, 0, "no tool ran");
    assert_valid(agent.session_path());
    let msgs = messages(agent.session_path());
    (fx, msgs, events)
}

fn result_text(m: &Value) -> &str {
    assert_eq!(m["role"], "toolResult");
    assert_eq!(m["isError"], true);
    m["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn openai_length_mid_tool_call_is_not_executed() {
    let (fx, msgs) = run(
        Api::OpenAiCompletions,
        vec![
            openai_write(
                &["{\"path\": \"cut.txt\", ", "\"content\": \"first hal"],
                "length",
            ),
            done_turn(),
        ],
    )
    .await;
    assert!(!fx.repo.join("cut.txt").exists(), "truncated file written");
    assert_eq!(msgs[1]["stopReason"], "length");
    assert_eq!(msgs[1]["content"][0]["arguments"], json!({}));
    assert_eq!(
        msgs[1]["content"][0]["argumentsError"],
        "Unterminated string in JSON at position 41 (line 1 column 42)\n\nReceived arguments:\n{\"path\": \"cut.txt\", \"content\": \"first hal"
    );
    assert_eq!(result_text(&msgs[2]), TRUNCATED);
    assert_eq!(msgs[3]["content"][0]["text"], "Done.");
}

#[tokio::test]
async fn length_with_arguments_that_parse_is_still_not_executed() {
    // The cut happened to fall after a closing brace: the arguments are valid JSON and
    // would pass the tool's schema, but may be incomplete.
    let (fx, msgs) = run(
        Api::OpenAiCompletions,
        vec![
            openai_write(
                &["{\"path\": \"cut.txt\", \"content\": \"first\"}"],
                "length",
            ),
            done_turn(),
        ],
    )
    .await;
    assert!(!fx.repo.join("cut.txt").exists(), "truncated file written");
    assert_eq!(
        msgs[1]["content"][0]["arguments"],
        json!({"path": "cut.txt", "content": "first"})
    );
    assert!(msgs[1]["content"][0].get("argumentsError").is_none());
    assert_eq!(result_text(&msgs[2]), TRUNCATED);
}

#[tokio::test]
async fn anthropic_max_tokens_mid_tool_use_is_not_executed() {
    let (fx, msgs) = run(
        Api::AnthropicMessages,
        vec![anthropic_write_cut(), anthropic_done()],
    )
    .await;
    assert!(!fx.repo.join("cut.txt").exists(), "truncated file written");
    assert_eq!(msgs[1]["stopReason"], "length");
    assert_eq!(msgs[1]["rawStopReason"], "max_tokens");
    assert_eq!(msgs[1]["content"][0]["arguments"], json!({}));
    assert!(
        msgs[1]["content"][0]["argumentsError"]
            .as_str()
            .unwrap()
            .starts_with("Unterminated string in JSON at position 42 (line 1 column 43)\n\nReceived arguments:\n")
    );
    assert_eq!(result_text(&msgs[2]), TRUNCATED);
    assert_eq!(msgs[3]["content"][0]["text"], "Done.");
}

#[tokio::test]
async fn unparseable_arguments_are_refused_not_salvaged() {
    // A finished call (finish_reason tool_calls) whose text is not JSON: bh used to run the
    // valid-looking prefix `{"path":"cut.txt","content":"abc"}`.
    let (fx, msgs, events) = run_events(
        Api::OpenAiCompletions,
        vec![
            openai_write(
                &["{\"path\": \"cut.txt\", \"content\": \"abc\" \"x\"}"],
                "tool_calls",
            ),
            done_turn(),
        ],
    )
    .await;
    assert!(!fx.repo.join("cut.txt").exists(), "salvaged arguments ran");
    let err = "Expected ',' or '}' after property value in JSON at position 37 (line 1 column 38)\n\nReceived arguments:\n{\"path\": \"cut.txt\", \"content\": \"abc\" \"x\"}";
    assert_eq!(msgs[1]["content"][0]["arguments"], json!({}));
    assert_eq!(msgs[1]["content"][0]["argumentsError"], err);
    assert_eq!(
        result_text(&msgs[2]),
        format!("Invalid arguments for tool \"write\": {err}")
    );
    // Pi's `toolcall_end` event and its partial carry the error too.
    let end = events
        .iter()
        .find(|e| e["assistantMessageEvent"]["type"] == "toolcall_end")
        .unwrap();
    assert_eq!(
        end["assistantMessageEvent"]["toolCall"]["argumentsError"],
        err
    );
    assert_eq!(end["message"]["content"][0]["argumentsError"], err);
    let start = events
        .iter()
        .find(|e| e["type"] == "tool_execution_start")
        .unwrap();
    assert_eq!(start["args"], json!({}));
}

#[tokio::test]
async fn arguments_pi_repairs_run_repaired() {
    // A raw newline inside a string and a `\d` escape: Pi's repairJson fixes both.
    let (fx, msgs) = {
        let fx = fx();
        let (base, _seen) = serve(vec![
            openai_write(
                &["{\"path\": \"ok.txt\", \"content\": \"a\nb \\d\"}"],
                "tool_calls",
            ),
            done_turn(),
        ]);
        let mut spec = ModelSpec::new("mock", "mock-model", Api::OpenAiCompletions);
        spec.base_url = base;
        spec.api_key = Some("k".into());
        let provider: Arc<dyn Provider> = Arc::new(HttpProvider::new(spec).unwrap());
        let mut agent =
            Agent::new(fx.config(provider, fx.new_session(), true, Limits::default())).unwrap();
        let out = agent
            .run("write", &CancellationToken::new(), &mut |_| {})
            .await
            .unwrap();
        assert_eq!(out.tool_calls, 1);
        let msgs = messages(agent.session_path());
        (fx, msgs)
    };
    assert_eq!(
        fs_err::read_to_string(fx.repo.join("ok.txt")).unwrap(),
        "a\nb \\d"
    );
    assert_eq!(
        msgs[1]["content"][0]["arguments"],
        json!({"path": "ok.txt", "content": "a\nb \\d"})
    );
}
