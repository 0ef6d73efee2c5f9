use std::time::Duration;

use bh_core::{LimitKind, Limits, RunStop};
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, command_gone, fx, messages};

#[tokio::test]
async fn tool_call_limit_fires_and_says_so() {
    let fx = fx();
    let script = r#"
{"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a"}}, {"name": "write", "arguments": {"path": "b.txt", "content": "b"}}, {"name": "write", "arguments": {"path": "c.txt", "content": "c"}}]}
{"text": "never"}
"#;
    let mut agent = fx.agent(
        script,
        Limits {
            max_tool_calls: Some(2),
            ..Limits::default()
        },
    );
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Limit);
    assert_eq!(out.limit, Some(LimitKind::ToolCalls));
    assert_eq!(out.tool_calls, 2);
    assert_eq!(
        out.reason.as_deref(),
        Some("Tool call limit reached (2 tool calls)")
    );
    assert!(fx.repo.join("a.txt").exists());
    assert!(fx.repo.join("b.txt").exists());
    assert!(!fx.repo.join("c.txt").exists());
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[4]["isError"], true);
    assert_eq!(
        msgs[4]["content"][0]["text"],
        "Tool call limit reached (2 tool calls): tool call not executed"
    );
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(
        last["errorMessage"],
        "Tool call limit reached (2 tool calls)"
    );
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn turn_limit_fires_before_the_next_model_call() {
    let fx = fx();
    let script = r#"
{"toolCalls": [{"name": "ls", "arguments": {}}]}
{"toolCalls": [{"name": "ls", "arguments": {}}]}
{"text": "never"}
"#;
    let mut agent = fx.agent(
        script,
        Limits {
            max_turns: Some(2),
            ..Limits::default()
        },
    );
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Limit);
    assert_eq!(out.limit, Some(LimitKind::Turns));
    assert_eq!(out.turns, 2);
    let msgs = messages(agent.session_path());
    let last = msgs.last().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(last["errorMessage"], "Turn limit reached (2 turns)");
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn time_limit_aborts_a_streaming_turn_keeping_partial_text() {
    let fx = fx();
    let script = r#"
{"text": "abcdefghijklmnopqrstuvwxyz", "chunkChars": 1, "delayMs": 50}
"#;
    let mut agent = fx.agent(
        script,
        Limits {
            timeout: Some(Duration::from_millis(300)),
            ..Limits::default()
        },
    );
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Limit);
    assert_eq!(out.limit, Some(LimitKind::Time));
    let msgs = messages(agent.session_path());
    let last = msgs.last().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(last["errorMessage"], "Time limit reached (300ms)");
    let partial = last["content"][0]["text"].as_str().unwrap_or("");
    assert!(partial.len() < 26, "partial text kept: {partial:?}");
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn time_limit_kills_a_running_bash_and_closes_the_turn() {
    let fx = fx();
    let script = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo $$ > sleep.pid; exec sleep 30"}}, {"name": "write", "arguments": {"path": "late.txt", "content": "x"}}]}
{"text": "never"}
"#;
    let mut agent = fx.agent(
        script,
        Limits {
            timeout: Some(Duration::from_millis(500)),
            ..Limits::default()
        },
    );
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.limit, Some(LimitKind::Time));
    // The command was killed, not waited for.
    assert!(command_gone(&fx.repo, "sleep.pid"));
    assert!(!fx.repo.join("late.txt").exists());
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[2]["isError"], true);
    assert_eq!(
        msgs[3]["content"][0]["text"],
        "Time limit reached (500ms): tool call not executed"
    );
    assert_eq!(
        msgs.last().unwrap()["errorMessage"],
        "Time limit reached (500ms)"
    );
    assert_valid(agent.session_path());
}
