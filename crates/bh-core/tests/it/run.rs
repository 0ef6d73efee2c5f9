use bh_core::{Agent, Event, Limits, RunStop};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::support::{assert_valid, event_types, fx, git, messages, scripted};

const EDIT_SCRIPT: &str = r#"
{"text": "I'll create the file.", "toolCalls": [{"name": "write", "arguments": {"path": "notes/todo.txt", "content": "alpha\nbeta\n"}}]}
{"toolCalls": [{"name": "edit", "arguments": {"path": "notes/todo.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}]}
{"toolCalls": [{"name": "read", "arguments": {"path": "notes/todo.txt"}}, {"name": "bash", "arguments": {"command": "git status --short"}}]}
{"thinking": "Done.", "text": "Created and edited notes/todo.txt.", "usage": {"input": 120, "output": 8}}
"#;

/// Paths in a checkpoint (through the shadow repository).
fn checkpoint_files(store: &bh_checkpoint::Store, commit: &str) -> Vec<String> {
    git(
        store.dir(),
        &[
            "--git-dir",
            store.dir().join("git").to_str().unwrap(),
            "ls-tree",
            "-r",
            "--name-only",
            commit,
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

#[tokio::test]
async fn edits_a_repository_persisting_every_message_with_checkpoints() {
    let fx = fx();
    let mut agent = fx.agent(EDIT_SCRIPT, Limits::default());
    let mut events = Vec::new();
    let out = agent
        .run(
            "Create notes/todo.txt",
            &CancellationToken::new(),
            &mut |e| events.push(e),
        )
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    assert_eq!(out.limit, None);
    assert_eq!(out.turns, 4);
    assert_eq!(out.tool_calls, 4);
    assert_eq!(
        fs_err::read_to_string(fx.repo.join("notes/todo.txt")).unwrap(),
        "alpha\nBETA\n"
    );

    // The session: Pi's shapes, chained, every call answered.
    let path = agent.session_path().to_path_buf();
    let session = assert_valid(&path);
    let kinds: Vec<String> = fs_err::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        &kinds[..3],
        ["session", "model_change", "thinking_level_change"]
    );
    let msgs = messages(&path);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "toolResult",
            "assistant"
        ]
    );
    assert_eq!(msgs[0]["content"][0]["text"], "Create notes/todo.txt");
    assert_eq!(msgs[1]["stopReason"], "toolUse");
    assert_eq!(msgs[8]["stopReason"], "stop");
    assert!(msgs[4]["details"]["diff"].as_str().is_some());
    // The context Pi would build holds all of it.
    assert_eq!(session.context(None).unwrap().messages.len(), 9);
    assert_eq!(out.leaf.as_deref(), session.leaf().map(|e| e.id.as_str()));

    // Checkpoints: one before each mutating call (write, edit, bash), ids in details.
    let cp_write = msgs[2]["details"]["checkpoint"].as_str().unwrap();
    let cp_edit = msgs[4]["details"]["checkpoint"].as_str().unwrap();
    let cp_bash = msgs[7]["details"]["checkpoint"].as_str().unwrap();
    assert!(
        msgs[6]["details"].get("checkpoint").is_none(),
        "read is not checkpointed"
    );
    assert_eq!(out.checkpoints, [cp_write, cp_edit, cp_bash]);
    let store = fx.store();
    let list = store.list().unwrap();
    for id in [cp_write, cp_edit, cp_bash] {
        let cp = list.iter().find(|c| c.id == id).expect("checkpoint listed");
        assert_eq!(cp.session.as_deref(), Some(agent.session_id()));
        // Recorded against the assistant entry that asked for the tool.
        let entry = session.entry(cp.entry.as_deref().unwrap()).unwrap();
        assert_eq!(entry.role.as_deref(), Some("assistant"));
    }
    let write = store.resolve(cp_write).unwrap();
    assert_eq!(write.tool, "write");
    assert!(!checkpoint_files(&store, &write.commit).contains(&"notes/todo.txt".to_owned()));
    let edit = store.resolve(cp_edit).unwrap();
    assert_eq!(edit.tool, "edit");
    assert!(checkpoint_files(&store, &edit.commit).contains(&"notes/todo.txt".to_owned()));
    // Nothing changed between edit and bash's checkpoint except the edit itself.
    assert_ne!(cp_edit, cp_bash);

    // Events in Pi's JSON-mode order.
    let types = event_types(&events);
    assert_eq!(
        &types[..6],
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_update"
        ]
    );
    assert_eq!(types[types.len() - 2], "agent_end");
    assert_eq!(types[types.len() - 1], "run_end");
    assert_eq!(types.iter().filter(|t| *t == "turn_start").count(), 4);
    assert_eq!(types.iter().filter(|t| *t == "turn_end").count(), 4);
    assert_eq!(types.iter().filter(|t| *t == "checkpoint").count(), 3);
    let tool_end = events
        .iter()
        .find_map(|e| match e {
            Event::ToolExecutionEnd {
                tool_name, result, ..
            } if tool_name == "write" => Some(serde_json::to_value(result).unwrap()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        tool_end["content"][0]["text"],
        "Successfully wrote 11 bytes to notes/todo.txt"
    );
    let Event::AgentEnd { messages: ended } = &events[events.len() - 2] else {
        panic!("agent_end expected");
    };
    assert_eq!(ended.len(), 9);
}

#[tokio::test]
async fn checkpoints_can_be_turned_off() {
    let fx = fx();
    let cfg = fx.config(
        scripted(EDIT_SCRIPT),
        fx.new_session(),
        false,
        Limits::default(),
    );
    let mut agent = Agent::new(cfg).unwrap();
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    assert!(out.checkpoints.is_empty());
    for m in messages(agent.session_path()) {
        if m["role"] == "toolResult" {
            assert!(m["details"].get("checkpoint").is_none());
        }
    }
    assert!(fx.store().list().unwrap().is_empty());
}

#[tokio::test]
async fn a_failed_checkpoint_is_a_warning_and_the_tool_still_runs() {
    let fx = fx();
    let cfg = fx.config(
        scripted(EDIT_SCRIPT),
        fx.new_session(),
        true,
        Limits::default(),
    );
    // Break the store after opening it.
    let dir = cfg.checkpoints.as_ref().unwrap().dir().to_path_buf();
    fs_err::remove_dir_all(dir.join("git")).unwrap();
    let mut agent = Agent::new(cfg).unwrap();
    let mut warnings = Vec::new();
    let out = agent
        .run("go", &CancellationToken::new(), &mut |e| {
            if let Event::Warning { message } = e {
                warnings.push(message);
            }
        })
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("checkpoint before write"));
    assert_eq!(
        fs_err::read_to_string(fx.repo.join("notes/todo.txt")).unwrap(),
        "alpha\nBETA\n"
    );
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn a_resumed_session_continues_with_its_history() {
    let fx = fx();
    let script = r#"
{"text": "first answer"}
{"text": "second answer"}
"#;
    let provider = scripted(script);
    let mut agent =
        Agent::new(fx.config(provider.clone(), fx.new_session(), true, Limits::default())).unwrap();
    agent
        .run("one", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    let path = agent.session_path().to_path_buf();
    drop(agent);
    let lines_before = fs_err::read_to_string(&path).unwrap().lines().count();

    let writer = bh_session::SessionWriter::open(&path).unwrap();
    let mut agent = Agent::new(fx.config(provider, writer, true, Limits::default())).unwrap();
    // Same model and thinking level: nothing appended on open.
    assert_eq!(
        fs_err::read_to_string(&path).unwrap().lines().count(),
        lines_before
    );
    assert_eq!(agent.history().len(), 2);
    let out = agent
        .run("two", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    assert_eq!(agent.history().len(), 4);
    let s = assert_valid(&path);
    assert_eq!(s.context(None).unwrap().messages.len(), 4);
}

#[tokio::test]
async fn a_model_error_ends_the_run_as_error() {
    let fx = fx();
    let mut agent = fx.agent(
        r#"{"stopReason": "error", "errorMessage": "500 boom"}"#,
        Limits::default(),
    );
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Error);
    assert_eq!(out.reason.as_deref(), Some("500 boom"));
    assert_valid(agent.session_path());
}

#[tokio::test]
async fn unknown_or_unoffered_tools_are_error_results() {
    let fx = fx();
    let mut cfg = fx.config(
        scripted(
            r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "touch x"}}, {"name": "nope", "arguments": {}}]}
{"text": "ok"}
"#,
        ),
        fx.new_session(),
        true,
        Limits::default(),
    );
    cfg.tools = Some(bh_tools::Profile::Executor.specs().to_vec());
    let mut agent = Agent::new(cfg).unwrap();
    let out = agent
        .run("go", &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Completed);
    let msgs = messages(agent.session_path());
    assert_eq!(msgs[2]["isError"], true);
    assert_eq!(msgs[2]["content"][0]["text"], "Tool bash not found");
    assert_eq!(msgs[3]["content"][0]["text"], "Tool nope not found");
    assert!(!fx.repo.join("x").exists());
    assert!(out.checkpoints.is_empty());
}

#[tokio::test]
async fn branching_continues_from_an_earlier_entry_and_switching_follows_a_fork() {
    let fx = fx();
    let script = "{\"text\": \"a1\"}\n{\"text\": \"a2\"}\n{\"text\": \"a3\"}\n{\"text\": \"a4\"}\n";
    let mut agent = fx.agent(script, Limits::default());
    let c = CancellationToken::new();
    let first = agent.run("one", &c, &mut |_| {}).await.unwrap();
    let a1 = first.leaf.clone().unwrap();
    agent.run("two", &c, &mut |_| {}).await.unwrap();
    assert_eq!(agent.history().len(), 4);

    agent.branch(Some(&a1)).unwrap();
    assert_eq!(agent.history().len(), 2);
    let out = agent.run("three", &c, &mut |_| {}).await.unwrap();
    let s = bh_session::Session::load(agent.session_path()).unwrap();
    assert!(s.problems().is_empty(), "{:?}", s.problems());
    let ctx = s.context(None).unwrap();
    assert_eq!(ctx.messages.len(), 4);
    assert_eq!(s.leaf().map(|e| e.id.clone()), out.leaf);
    // The new user message hangs under a1.
    let user3 = s.entries().iter().rev().nth(1).unwrap();
    assert_eq!(user3.parent_id.as_deref(), Some(a1.as_str()));

    // Fork the session and continue in the fork; the source stays as it was.
    let src = agent.session_path().to_path_buf();
    let before = fs_err::read(&src).unwrap();
    let forked = bh_session::fork(
        &s,
        &bh_session::ForkTarget::Dir(fx.root.join("forks")),
        &bh_session::ForkOptions {
            path_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    agent
        .switch_session(bh_session::SessionWriter::open(&forked.path).unwrap())
        .unwrap();
    assert_eq!(agent.history().len(), 4);
    agent.run("four", &c, &mut |_| {}).await.unwrap();
    assert_eq!(fs_err::read(&src).unwrap(), before);
    let f = assert_valid(&forked.path);
    assert_eq!(f.context(None).unwrap().messages.len(), 6);
}
