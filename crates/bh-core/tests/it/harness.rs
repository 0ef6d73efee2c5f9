//! A tool the harness cannot run ends the turn instead of becoming a result
//! the model reads and retries: the call's error result names why, the
//! calls after it are not run, and an aborted message closes the run
//! (`RunStop::Harness`). The model is not called again.

use std::sync::Arc;

use bh_core::{Agent, Limits, RunStop};
use bh_tools::{Profile, SandboxMode, Toolbox, ToolboxOptions};
use tokio_util::sync::CancellationToken;

use crate::support::{Fx, assert_valid, fx, messages, scripted};

const SCRIPT: &str = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}, {"name": "write", "arguments": {"path": "late.txt", "content": "x"}}]}
{"text": "never"}
"#;

fn agent_with(fx: &Fx, script: &str, opts: ToolboxOptions) -> Agent {
    let mut config = fx.config(scripted(script), fx.new_session(), false, Limits::default());
    config.toolbox = Arc::new(Toolbox::new(opts).unwrap());
    Agent::new(config).unwrap()
}

fn options(fx: &Fx) -> ToolboxOptions {
    ToolboxOptions::new(&fx.repo, Profile::Interactive, fx.root.join("out"))
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_built_ends_the_turn() {
    let fx = fx();
    // A protected path that does not exist inside the writable project:
    // the sandbox refuses to start (the command could plant it).
    let mut opts = options(&fx);
    opts.sandbox.protected = vec![fx.repo.join("planted-config")];
    let mut agent = agent_with(&fx, SCRIPT, opts);
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Harness);
    let reason = out.reason.clone().unwrap();
    assert!(
        reason.starts_with("The harness could not run bash: Cannot sandbox bash: cannot keep")
            && reason.contains("planted-config"),
        "{reason}"
    );
    assert_eq!(out.turns, 1, "the model is not asked again");
    assert!(!fx.repo.join("ran.txt").exists());
    assert!(
        !fx.repo.join("late.txt").exists(),
        "the next call did not run"
    );
    let msgs = messages(agent.session_path());
    assert_eq!(msgs.len(), 5, "{msgs:#?}");
    assert_eq!(msgs[2]["isError"], true);
    assert_eq!(msgs[2]["content"][0]["text"], reason.as_str());
    assert_eq!(
        msgs[3]["content"][0]["text"],
        format!("{reason}: tool call not executed")
    );
    let last = msgs.last().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(last["errorMessage"], reason.as_str());
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn a_project_folder_that_vanished_ends_the_turn() {
    let fx = fx();
    // Unsandboxed bash replaces the project folder with an empty one; the
    // write after it would land in a tree the agent never saw.
    let script = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "cd .. && rm -rf repo && mkdir repo"}}, {"name": "write", "arguments": {"path": "late.txt", "content": "x"}}]}
{"text": "never"}
"#;
    let mut opts = options(&fx);
    opts.sandbox.mode = SandboxMode::Off;
    let mut agent = agent_with(&fx, script, opts);
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Harness);
    let reason = out.reason.unwrap();
    assert!(
        reason.starts_with("The harness could not run write: the project folder")
            && reason.contains("is gone"),
        "{reason}"
    );
    assert!(!fx.repo.join("late.txt").exists());
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[2]["isError"], false, "the bash call itself ran");
    assert_eq!(msgs[3]["isError"], true);
    assert_eq!(msgs.last().unwrap()["stopReason"], "aborted");
}
