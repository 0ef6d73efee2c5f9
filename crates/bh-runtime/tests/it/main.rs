//! bh-runtime on real repositories with real `git` and the scripted provider:
//! session choice, the store policy, and in-process moves between worktrees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_handoff::ConsumeOutcome;
use bh_llm::{Api, ModelSpec, Provider, ScriptedProvider};
use bh_runtime::{
    Live, RelocateError, Runtime, RuntimeError, RuntimeOptions, SessionChoice, SessionRequest,
    open_session,
};
use bh_test_support::TestRepo;
use bh_tools::Profile;
use bh_worktree::CreateOptions;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const VERIFIED: &str = "better-harness-transition-verification";

struct Fixture {
    t: TestRepo,
    agent_dir: PathBuf,
    state: PathBuf,
}

fn fixture() -> Fixture {
    let t = TestRepo::new();
    t.write("README.md", "hello\n");
    t.commit_all("base");
    Fixture {
        agent_dir: t.root.join("agent"),
        state: t.root.join("state"),
        t,
    }
}

fn scripted(src: &str) -> Arc<dyn Provider> {
    Arc::new(
        ScriptedProvider::from_str(src, ModelSpec::new("scripted", "s", Api::Scripted)).unwrap(),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(path: &Path, custom_type: &str) -> usize {
    lines(path)
        .iter()
        .filter(|l| l["customType"] == custom_type)
        .count()
}

impl Fixture {
    fn request(&self, choice: SessionChoice, run_dir: &Path) -> SessionRequest {
        SessionRequest {
            choice,
            agent_dir: Some(self.agent_dir.clone()),
            run_dir: run_dir.to_path_buf(),
            cwd: None,
            state_dir: self.state.clone(),
        }
    }

    fn create(&self, name: &str) -> PathBuf {
        let out = bh_worktree::create(
            &self.t.runner(),
            &CreateOptions {
                name: name.into(),
                from: None,
                branch: None,
                detach: false,
                path: None,
                session: None,
                cwd: self.t.dir.clone(),
                command_env: Vec::new(),
            },
        )
        .unwrap();
        out.receipt.path
    }

    /// A live agent on a new session in the main checkout.
    fn live(&self, script: &str) -> Live {
        let runner = self.t.runner();
        let opened = open_session(&runner, &self.request(SessionChoice::New, &self.t.dir)).unwrap();
        let opts = RuntimeOptions::new(&self.state, Profile::Interactive);
        let rt = Runtime::open(&runner, &opened.cwd, &opts).unwrap();
        assert!(rt.warnings.is_empty(), "{:?}", rt.warnings);
        let agent = rt.agent(&opts, scripted(script), opened.writer).unwrap();
        Live::new(agent, opened.cwd, runner, opts, self.agent_dir.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_agent_moves_into_a_worktree_works_there_and_comes_back() {
    let f = fixture();
    let wt = f.create("feat");
    let mut live = f.live(
        r#"{"text": "hello"}
{"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "x"}}]}
{"text": "wrote it"}
"#,
    );
    let cancel = CancellationToken::new();
    let out = live
        .agent_mut()
        .run("hi", &cancel, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, bh_core::RunStop::Completed);
    let source = live.agent().session_path().to_path_buf();
    let before = fs_err::read(&source).unwrap();

    let moved = live.enter_worktree("feat", &cancel).await.unwrap();
    assert!(matches!(moved.consumed, ConsumeOutcome::Verified { .. }));
    assert_eq!(live.cwd(), fs_err::canonicalize(&wt).unwrap());
    let target = live.agent().session_path().to_path_buf();
    assert_ne!(target, source);
    assert_eq!(fs_err::read(&source).unwrap(), before, "source untouched");
    assert_eq!(count(&target, VERIFIED), 1);
    assert_eq!(lines(&target)[0]["cwd"], wt.to_str().unwrap());

    // The tools follow: the write lands in the worktree, and a checkpoint is
    // taken in the worktree's store.
    let out = live
        .agent_mut()
        .run("write", &cancel, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(out.stop, bh_core::RunStop::Completed);
    assert_eq!(out.checkpoints.len(), 1);
    assert!(wt.join("new.txt").is_file());
    assert!(!f.t.dir.join("new.txt").exists());
    assert_eq!(count(&target, VERIFIED), 1, "recorded once");

    // Already there: refused, nothing changes.
    let err = live.enter_worktree("feat", &cancel).await.unwrap_err();
    assert!(matches!(err, RelocateError::AlreadyThere { .. }), "{err}");
    assert_eq!(live.agent().session_path(), target);

    // Dispose: dirty work is refused before anything moves.
    let err = live.dispose_worktree(false, &cancel).await.unwrap_err();
    assert!(matches!(err, RelocateError::DisposeRefused { .. }), "{err}");
    assert_eq!(live.cwd(), fs_err::canonicalize(&wt).unwrap());
    assert_eq!(live.agent().session_path(), target);

    // Forced: back in the main checkout, the worktree gone.
    let done = live.dispose_worktree(true, &cancel).await.unwrap();
    assert_eq!(live.cwd(), f.t.dir);
    assert!(!wt.exists());
    assert_eq!(done.disposed.name, "feat");
    let back = live.agent().session_path().to_path_buf();
    assert_eq!(lines(&back)[0]["cwd"], f.t.dir.to_str().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_or_failed_move_changes_nothing() {
    let f = fixture();
    f.create("w");
    let mut live = f.live("{\"text\": \"hello\"}\n");
    let ok = CancellationToken::new();
    live.agent_mut().run("hi", &ok, &mut |_| {}).await.unwrap();
    let source = live.agent().session_path().to_path_buf();
    let before = fs_err::read(&source).unwrap();
    let sessions = f.agent_dir.join("sessions");
    let count_files = || walk(&sessions).len();
    let files = count_files();

    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let err = live.enter_worktree("w", &cancelled).await.unwrap_err();
    assert!(
        matches!(err, RelocateError::Cancelled { discard: None, .. }),
        "{err}"
    );
    assert_eq!(live.cwd(), f.t.dir);
    assert_eq!(live.agent().session_path(), source);
    assert_eq!(fs_err::read(&source).unwrap(), before);
    assert_eq!(count_files(), files, "the prepared session was deleted");

    let err = live.enter_worktree("nope", &ok).await.unwrap_err();
    assert!(matches!(err, RelocateError::Failed { .. }), "{err}");
    assert_eq!(live.agent().session_path(), source);
    assert_eq!(count_files(), files);

    let err = live.dispose_worktree(false, &ok).await.unwrap_err();
    assert!(matches!(err, RelocateError::NotInWorktree { .. }), "{err}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs_err::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_session_of_another_directory_needs_an_explicit_cwd() {
    let f = fixture();
    let runner = f.t.runner();
    let file = f.t.root.join("s.jsonl");
    let opened = open_session(
        &runner,
        &f.request(SessionChoice::Open(file.clone()), &f.t.dir),
    )
    .unwrap();
    assert_eq!(opened.cwd, f.t.dir);
    drop(opened);
    let before = fs_err::read(&file).unwrap();
    let other = f.t.root.join("other");
    fs_err::create_dir_all(&other).unwrap();
    let err = open_session(
        &runner,
        &f.request(SessionChoice::Open(file.clone()), &other),
    )
    .unwrap_err();
    match &err {
        RuntimeError::CwdMismatch { recorded, here, .. } => {
            assert_eq!(recorded, &f.t.dir);
            assert_eq!(here, &other);
        }
        e => panic!("{e}"),
    }
    assert_eq!(fs_err::read(&file).unwrap(), before);
    let mut req = f.request(SessionChoice::Open(file.clone()), &other);
    req.cwd = Some(f.t.dir.clone());
    assert_eq!(open_session(&runner, &req).unwrap().cwd, f.t.dir);
    // A header cwd that no longer exists is refused the same way.
    let gone = f.t.root.join("gone.jsonl");
    fs_err::write(
        &gone,
        "{\"type\":\"session\",\"version\":3,\"id\":\"g\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/nonexistent/dir\"}\n",
    )
    .unwrap();
    let err = open_session(&runner, &f.request(SessionChoice::Open(gone), &f.t.dir)).unwrap_err();
    assert!(matches!(err, RuntimeError::CwdMismatch { .. }), "{err}");
}

#[test]
fn a_store_that_cannot_be_opened_turns_checkpoints_off_with_a_warning() {
    let f = fixture();
    // The state dir is a file: the store cannot be created.
    fs_err::write(&f.state, "not a folder").unwrap();
    let opts = RuntimeOptions::new(&f.state, Profile::Interactive);
    let rt = Runtime::open(&f.t.runner(), &f.t.dir, &opts).unwrap();
    assert!(rt.checkpoints.is_none());
    assert_eq!(rt.warnings.len(), 1);
    assert!(
        rt.warnings[0].contains("checkpoints are off"),
        "{:?}",
        rt.warnings
    );
    // Off by request: no warning.
    let mut off = opts.clone();
    off.checkpoints = false;
    let rt = Runtime::open(&f.t.runner(), &f.t.dir, &off).unwrap();
    assert!(rt.checkpoints.is_none() && rt.warnings.is_empty());
    // Tools that cannot be confined are an error.
    let err = Runtime::open(&f.t.runner(), &f.t.root.join("missing"), &opts)
        .err()
        .unwrap();
    assert!(matches!(err, RuntimeError::Tools { .. }), "{err}");
}
