//! One run against a mock OpenAI Chat Completions server on 127.0.0.1.

use std::sync::Arc;

use bh_core::{Agent, Limits, RunStop};
use bh_llm::{Api, HttpProvider, ModelSpec, Provider, RetryPolicy};
use bh_test_support::mock_openai::{chunk, serve, usage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, fx, messages};

pub fn two_turns() -> Vec<String> {
    let t1 = [
        chunk(json!({"role": "assistant", "content": "Writing."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "write", "arguments": "{\"path\": \"m.txt\", "}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"content\": \"mock\\n\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage(50, 10),
    ]
    .concat();
    let t2 = [
        chunk(json!({"role": "assistant", "content": "Done."}), None),
        chunk(json!({}), Some("stop")),
        usage(70, 3),
    ]
    .concat();
    vec![t1, t2]
}

#[tokio::test]
async fn runs_against_a_mock_openai_server() {
    let fx = fx();
    let (base, seen) = serve(two_turns());
    let mut spec = ModelSpec::new("mock", "mock-model", Api::OpenAiCompletions);
    spec.base_url = base;
    spec.api_key = Some("test-key".into());
    let provider: Arc<dyn Provider> = Arc::new(
        HttpProvider::new(spec)
            .unwrap()
            .with_retry(RetryPolicy::default()),
    );
    let mut agent =
        Agent::new(fx.config(provider, fx.new_session(), true, Limits::default())).unwrap();
    let out = agent
        .run("write m.txt", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed, "{out:?}");
    assert_eq!(
        fs_err::read_to_string(fx.repo.join("m.txt")).unwrap(),
        "mock\n"
    );
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[1]["api"], "openai-completions");
    assert_eq!(msgs[1]["provider"], "mock");
    assert_eq!(msgs[1]["stopReason"], "toolUse");
    assert_eq!(msgs[1]["usage"]["input"], 50);
    // The run's totals are the sum of its assistant messages' usage.
    assert_eq!((out.usage.input, out.usage.output), (120, 13));
    let stats = bh_session::Session::load(agent.session_path())
        .unwrap()
        .stats();
    assert_eq!(
        out.usage, stats.totals,
        "the same rules as bh session stats"
    );
    assert!(msgs[2]["details"]["checkpoint"].is_string());
    assert_eq!(msgs[3]["content"][0]["text"], "Done.");
    assert_valid(agent.session_path());

    // The second request carried the tool call and its result.
    let seen: Vec<serde_json::Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, body)| body.clone())
        .collect();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["tools"].as_array().unwrap().len(), 7);
    assert_eq!(seen[0]["messages"][0]["role"], "system");
    let second: Vec<&str> = seen[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(second, ["system", "user", "assistant", "tool"]);
    assert_eq!(seen[1]["messages"][3]["tool_call_id"], "call_a");
}
