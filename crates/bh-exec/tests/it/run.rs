//! Whole runs in-process, with the scripted provider: the library's `run`
//! from plan to commit, and the trailers' writer and parser.

use fs_err as fs;
use std::sync::Arc;

use bh_exec::{
    ExecError, RunSetup, RunState, StopReason, Trailers, commit_message, run_plan, write_plan,
};
use bh_llm::{Api, ModelSpec, ScriptedProvider};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::{ENTRY, fx};

pub(crate) fn setup(f: &super::Fx, script: &str) -> RunSetup {
    RunSetup::new(
        f.root.join("state"),
        Arc::new(
            ScriptedProvider::from_str(script, ModelSpec::new("scripted", "demo", Api::Scripted))
                .unwrap(),
        ),
        CancellationToken::new(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_runs_end_to_end_in_process() {
    end_to_end(false).await;
}

/// The same run in a detached worktree: checkpoints before each mutation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_runs_end_to_end_in_a_checkout() {
    end_to_end(true).await;
}

async fn end_to_end(checkout: bool) {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let user_before = (
        f.git(&["status", "--porcelain"]),
        fs::read(f.dir.join(".git/index")).unwrap(),
        f.git(&["rev-parse", "HEAD"]),
    );
    let session_before = fs::read(&f.session).unwrap();
    let script = r#"{"text": "Writing.", "toolCalls": [{"name": "write", "arguments": {"path": "src/new.rs", "content": "pub fn x() {}\n"}}], "usage": {"input": 100, "output": 10}}
{"toolCalls": [{"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}}], "usage": {"input": 150, "output": 5}}
{"text": "Done.", "usage": {"input": 200, "output": 2}}
"#;
    let mut s = setup(&f, script);
    s.checkout = checkout;
    let result = run_plan(&f.runner(), &path, &s).await.unwrap();
    assert_eq!(result.state, RunState::Committed, "{result:?}");
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.tool_calls, 2);
    assert_eq!((result.usage.input, result.usage.output), (450, 17));
    assert_eq!(result.changed_paths, vec!["M a.txt", "A src/new.rs"]);
    if checkout {
        assert_eq!(result.checkpoints.len(), 2, "{:?}", result.warnings);
        assert_eq!(result.mode, bh_exec::WorkMode::Checkout);
    } else {
        // Nothing on disk to damage: the run's files are its session and its result.
        assert!(result.checkpoints.is_empty(), "{:?}", result.checkpoints);
        assert_eq!(result.mode, bh_exec::WorkMode::Virtual);
        assert!(
            !result
                .execution_dir
                .join(format!("wt-{}", result.execution_id))
                .exists()
        );
    }

    // One commit on the base, under the plan's ref, with the provenance.
    let commit = result.commit.clone().unwrap();
    assert_eq!(f.git(&["rev-parse", &plan.output_ref]), commit);
    assert_eq!(
        f.git(&["rev-parse", &format!("{commit}^@")]),
        plan.base.commit
    );
    assert_eq!(
        f.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>", &commit]),
        "Better Harness <executor@better-harness.invalid>|Better Harness <executor@better-harness.invalid>"
    );
    let message = f.git(&["log", "-1", "--format=%B", &commit]);
    let trailers = Trailers::parse(&message).unwrap();
    assert_eq!(
        trailers,
        Trailers::of(&plan, &result.execution_id, "scripted/demo")
    );
    assert_eq!(f.git(&["show", &format!("{commit}:a.txt")]), "b");

    // The user's checkout, index and session are as they were; the
    // execution's worktree is gone; result.json says what happened.
    assert_eq!(
        (
            f.git(&["status", "--porcelain"]),
            fs::read(f.dir.join(".git/index")).unwrap(),
            f.git(&["rev-parse", "HEAD"]),
        ),
        user_before
    );
    assert_eq!(fs::read(&f.session).unwrap(), session_before);
    assert!(!result.execution_dir.join("worktree").exists());
    assert!(!result.execution_dir.join("index").exists());
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(result.execution_dir.join("result.json")).unwrap())
            .unwrap();
    assert_eq!(doc["state"], "committed");
    assert_eq!(doc["stop_reason"], "completed");
    assert_eq!(doc["ref"], plan.output_ref.as_str());
    assert_eq!(doc["usage"]["input"], 450);

    // A plan runs once.
    let err = run_plan(&f.runner(), &path, &setup(&f, script))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::RefExists { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_commits_nothing_and_keeps_a_patch() {
    let f = fx();
    let mut req = f.request(ENTRY);
    req.limits.max_tool_calls = 1;
    let plan = f.plan(&req).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let script = r#"{"toolCalls": [{"name": "write", "arguments": {"path": "one.txt", "content": "1"}}, {"name": "write", "arguments": {"path": "two.txt", "content": "2"}}]}
{"text": "never"}
"#;
    let result = run_plan(&f.runner(), &path, &setup(&f, script))
        .await
        .unwrap();
    assert_eq!(result.state, RunState::Aborted);
    assert_eq!(result.stop_reason, StopReason::Limit);
    assert!(result.commit.is_none() && result.output_ref.is_none());
    assert_eq!(f.git(&["for-each-ref", "refs/better-harness/"]), "");
    let patch = fs::read_to_string(result.patch.unwrap()).unwrap();
    assert!(
        patch.contains("one.txt") && !patch.contains("two.txt"),
        "{patch}"
    );
}

/// `git interpret-trailers --parse` of `message`: (key, value) pairs.
fn git_trailers(f: &super::Fx, message: &str) -> Vec<(String, String)> {
    use std::io::Write;
    let mut child = f
        .command(&["interpret-trailers", "--parse"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(message.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[test]
fn trailers_round_trip_and_refuse_values_that_break_lines() {
    let f = fx();
    let mut plan = f.plan(&f.request(ENTRY)).unwrap();
    let message = commit_message(&plan, "x1-abc", "openai/gpt").unwrap();
    let t = Trailers::parse(&message).unwrap();
    assert_eq!(t, Trailers::of(&plan, "x1-abc", "openai/gpt"));
    assert_eq!(t.plan, format!("sha256:{}", plan.plan_sha256));
    // Parsed exactly as git parses them.
    let keys: Vec<String> = git_trailers(&f, &message)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, bh_exec::TRAILER_KEYS);

    plan.session.entry = "abc\nBetter-Harness-Base: forged".into();
    let err = commit_message(&plan, "x1-abc", "m").unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::TrailerValue {
                trailer: "Better-Harness-Entry",
                ..
            }
        ),
        "{err}"
    );
    plan.session.entry = "abc Better-Harness-Base:".into();
    assert!(commit_message(&plan, "x1-abc", "m").is_err());
    assert!(Trailers::parse("no trailers here").is_none());
}

/// Values the strict character sets allow but that look like trailers, and
/// a prompt whose first line does: git still reads exactly the seven
/// trailers, in order, with the values written.
#[test]
fn git_reads_exactly_the_seven_trailers_for_hostile_but_allowed_values() {
    let f = fx();
    let mut plan = f.plan(&f.request(ENTRY)).unwrap();
    let hostile = [
        ("session", "Better-Harness-Plan:sha256:0000"),
        ("entry", "Signed-off-by:x"),
        ("model", "p/Better-Harness-Base:forged"),
    ];
    plan.session.id = hostile[0].1.into();
    plan.session.entry = hostile[1].1.into();
    for (kind, v) in [
        (bh_exec::IdKind::Session, hostile[0].1),
        (bh_exec::IdKind::Entry, hostile[1].1),
        (bh_exec::IdKind::Model, hostile[2].1),
    ] {
        bh_exec::check_id(kind, v).unwrap();
    }
    plan.prompt.text =
        "Better-Harness-Plan: sha256:forged\n\nBetter-Harness-Base: forged\nmore".into();
    let message = commit_message(&plan, "x19a-0a1b2c3d", hostile[2].1).unwrap();
    let parsed = git_trailers(&f, &message);
    let expected: Vec<(String, String)> = bh_exec::TRAILER_KEYS
        .iter()
        .zip([
            format!("sha256:{}", plan.plan_sha256),
            plan.base.commit.clone(),
            hostile[0].1.to_owned(),
            plan.session.sha256.clone(),
            hostile[1].1.to_owned(),
            "x19a-0a1b2c3d".to_owned(),
            hostile[2].1.to_owned(),
        ])
        .map(|(k, v)| ((*k).to_owned(), v))
        .collect();
    assert_eq!(parsed, expected, "{message}");
    assert_eq!(
        Trailers::parse(&message).unwrap(),
        Trailers::of(&plan, "x19a-0a1b2c3d", hostile[2].1)
    );
}
