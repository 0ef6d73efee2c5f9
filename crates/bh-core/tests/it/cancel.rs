use std::time::Duration;

use bh_core::{Event, Limits, RunStop};
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, command_gone, fx, messages};

#[tokio::test]
async fn cancelling_aborts_the_streaming_turn_and_keeps_what_arrived() {
    let fx = fx();
    let script = r#"
{"text": "abcdefghijklmnopqrstuvwxyz", "chunkChars": 1, "delayMs": 40}
{"text": "second prompt answered"}
"#;
    let mut agent = fx.agent(script, Limits::default());
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let mut deltas = 0;
    let out = agent
        .run("go", &cancel, &mut |e| {
            if matches!(e, Event::MessageUpdate { .. }) {
                deltas += 1;
                if deltas == 3 {
                    c.cancel();
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Cancelled);
    assert_eq!(out.limit, None);
    assert_eq!(out.reason.as_deref(), Some("Request was aborted"));
    let msgs = messages(agent.session_path());
    let last = msgs.last().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert!(!last["content"][0]["text"].as_str().unwrap().is_empty());
    assert_valid(agent.session_path());

    // The agent keeps working with a fresh token.
    let out = agent
        .run("again", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn cancelling_kills_a_running_bash() {
    let fx = fx();
    let script = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo $$ > sleep.pid; exec sleep 30"}}]}
{"text": "never"}
"#;
    let mut agent = fx.agent(script, Limits::default());
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let pid_file = fx.repo.join("sleep.pid");
    let out = agent
        .run("go", &cancel, &mut |e| {
            if matches!(e, Event::ToolExecutionStart { .. }) {
                let (c, pid_file) = (c.clone(), pid_file.clone());
                // Cancel once the command runs (it has written its pid).
                tokio::spawn(async move {
                    while fs_err::read_to_string(&pid_file).map_or(true, |t| t.trim().is_empty()) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    c.cancel();
                });
            }
        })
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Cancelled);
    // The running command was killed, not waited for.
    assert!(fx.repo.join("sleep.pid").exists());
    assert!(command_gone(&fx.repo, "sleep.pid"));
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[2]["role"], "toolResult");
    assert_eq!(msgs[2]["isError"], true);
    assert_eq!(msgs.last().unwrap()["stopReason"], "aborted");
    assert_valid(agent.session_path());
}
