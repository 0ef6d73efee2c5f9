//! The Pi extension's commands inside the real Pi, 1.6.0 and 0.73.1, in RPC
//! mode with the mock model server (`support/pi_rpc.rs`): `/checkpoints`,
//! `/restore ID [PATH…]`, `/undo`, `/worktree list|dispose`, `/exec`
//! cancelled at its confirmation, and — in print mode, where there is no UI
//! to ask — `BH_PI_REWIND` deciding what `/tree` rewinds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fs_err as fs;
use std::path::Path;
use std::process::Command;

use bh_test_support::pi::PiRelease;
use serde_json::{Value, json};

use crate::pi_rpc;
use pi_rpc::*;

/// Sends `text` as a prompt and returns the next notification (each command
/// says exactly one thing).
fn command(rpc: &mut Rpc, text: &str) -> String {
    let before = rpc.notes.len();
    rpc.send(json!({"id": "cmd", "type": "prompt", "message": text}));
    let mut seen = 0;
    rpc.until("", |v| {
        if v["type"] == "extension_ui_request" && v["method"] == "notify" {
            seen += 1;
        }
        seen > 0
    });
    assert_eq!(rpc.notes.len(), before + 1, "{:?}", rpc.notes);
    rpc.notes.last().unwrap().clone()
}

/// write a.txt, bash (b.txt, keep.txt deleted), edit a.txt: one → two.
fn three_calls() -> Vec<String> {
    vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        ),
        tool_call(
            "call_b",
            "bash",
            json!({"command": "echo made-by-bash > b.txt && rm keep.txt"}),
        ),
        tool_call(
            "call_e",
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]}),
        ),
        text("done"),
    ]
}

/// This session's checkpoints, oldest first.
fn session_checkpoints(run: &Run, session_id: &str) -> Vec<Value> {
    let mut cps: Vec<Value> = run
        .checkpoints()
        .into_iter()
        .filter(|c| c["session"] == json!(session_id) && c["kind"] == "snapshot")
        .collect();
    cps.sort_by_key(|c| c["seq"].as_u64());
    cps
}

fn listing_restore_and_undo(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let mut rpc = run.start(three_calls());
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    assert_eq!(run.repo.read("a.txt"), "two\n", "{:?}", rpc.notes);
    let session_id = entries(&run.session_file())[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cps = session_checkpoints(&run, &session_id);
    assert_eq!(cps.len(), 3, "{cps:?}");

    // /checkpoints: one line per checkpoint of this session, with its tool.
    let listing = command(&mut rpc, "/checkpoints");
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 3, "{listing}");
    for cp in &cps {
        let id = cp["id"].as_str().unwrap();
        let tool = cp["tool"].as_str().unwrap();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(id) && l.contains(&format!("  {tool}"))),
            "{id} ({tool}) missing from:\n{listing}"
        );
    }

    // /undo: back to before the last mutating call (the edit), exactly —
    // bash's work stays, the edit is gone.
    let note = command(&mut rpc, "/undo");
    assert!(note.starts_with("restored "), "{note}");
    assert!(note.contains(cps[2]["id"].as_str().unwrap()), "{note}");
    assert_eq!(run.repo.read("a.txt"), "one\n");
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
    assert!(!run.repo.dir.join("keep.txt").exists());

    // /restore ID PATH: only that path, from the checkpoint before the write.
    let first = cps[0]["id"].as_str().unwrap();
    let note = command(&mut rpc, &format!("/restore {first} keep.txt"));
    assert!(note.starts_with(&format!("restored {first}")), "{note}");
    assert_eq!(run.repo.read("keep.txt"), "base\n");
    assert_eq!(run.repo.read("a.txt"), "one\n", "other paths untouched");
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");

    // Its undo hint puts keep.txt back as it was (absent).
    let hint = note.split("undo with: ").nth(1).unwrap().to_owned();
    let note = command(&mut rpc, &hint);
    assert!(note.starts_with("restored "), "{note}");
    assert!(!run.repo.dir.join("keep.txt").exists(), "{note}");
    assert_eq!(run.repo.read("a.txt"), "one\n");

    // A bad id changes nothing and says so.
    let note = command(&mut rpc, "/restore ffffffffffff");
    assert!(note.starts_with("restore failed"), "{note}");
    assert_eq!(run.repo.read("a.txt"), "one\n");
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_checkpoints_restore_and_undo() {
    listing_restore_and_undo(PiRelease::Current);
}

#[test]
fn pi_0_73_checkpoints_restore_and_undo() {
    listing_restore_and_undo(PiRelease::Legacy);
}

fn worktrees(run: &Run) -> Vec<Value> {
    let out = run
        .bh()
        .args(["--json", "worktree", "list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["worktrees"].as_array().unwrap().clone()
}

fn worktree_list_and_dispose(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let mut rpc = run.start(Vec::new());
    let note = command(&mut rpc, "/worktree create feat");
    assert!(note.contains("created"), "{note}");
    let listed = worktrees(&run);
    let feat = listed
        .iter()
        .find(|w| w["name"] == "feat")
        .unwrap_or_else(|| panic!("{listed:?}"));
    let path = feat["path"].as_str().unwrap().to_owned();
    assert!(Path::new(&path).join(".git").exists());

    // /worktree list: one line per worktree `bh worktree list` knows.
    let note = command(&mut rpc, "/worktree list");
    assert_eq!(note.lines().count(), listed.len(), "{note}");
    let line = note
        .lines()
        .find(|l| l.starts_with("feat  "))
        .unwrap_or_else(|| panic!("{note}"));
    assert!(line.ends_with(&path) && line.contains("ready"), "{line}");
    assert!(note.lines().any(|l| l.starts_with("(main)")), "{note}");

    // /worktree dispose removes it (clean and merged: nothing refused).
    let note = command(&mut rpc, "/worktree dispose feat");
    assert!(note.contains("worktree feat disposed"), "{note}");
    let id = note
        .split("(checkpoint ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("no checkpoint named: {note}"));
    assert!(
        !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
        "{note}"
    );
    assert!(!Path::new(&path).exists(), "{path} survived");
    assert!(
        !worktrees(&run).iter().any(|w| w["name"] == "feat"),
        "{:?}",
        worktrees(&run)
    );
    // Disposing it again fails visibly.
    let note = command(&mut rpc, "/worktree dispose feat");
    assert!(note.contains("failed"), "{note}");
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_worktree_list_and_dispose() {
    worktree_list_and_dispose(PiRelease::Current);
}

#[test]
fn pi_0_73_worktree_list_and_dispose() {
    worktree_list_and_dispose(PiRelease::Legacy);
}

fn exec_cancelled(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        text("hello"),
        // What the execution's agent would get, were it run.
        tool_call(
            "call_x",
            "write",
            json!({"path": "x.txt", "content": "executed\n"}),
        ),
        text("done"),
    ];
    let (mut rpc, seen) = run.start_seen(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    rpc.until("", settled(release));
    rpc.confirm = false;
    let note = command(&mut rpc, "/exec add x.txt");
    assert!(note.contains("execution cancelled"), "{note}");
    let refs = run.repo.git(&["for-each-ref", "refs/better-harness/"]);
    assert_eq!(refs.trim(), "", "a ref was written");
    assert_eq!(seen.lock().unwrap().len(), 1, "the execution's agent ran");
    assert!(!run.repo.dir.join("x.txt").exists());
    let left: Vec<_> = fs::read_dir(&run.tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("bh-exec-"))
        .collect();
    assert!(left.is_empty(), "the plan was left behind: {left:?}");
    let out = run.bh().args(["--json", "exec", "list"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["executions"].as_array().map(Vec::len),
        Some(0),
        "an execution was recorded: {v}"
    );
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_exec_cancelled_at_confirmation_writes_nothing() {
    exec_cancelled(PiRelease::Current);
}

#[test]
fn pi_0_73_exec_cancelled_at_confirmation_writes_nothing() {
    exec_cancelled(PiRelease::Legacy);
}

/// Pi in print mode (no UI): `message`, optionally in `session`, with
/// `BH_PI_REWIND` set to `rewind`; returns its stderr.
fn print(
    run: &Run,
    responses: Vec<String>,
    session: Option<&Path>,
    rewind: Option<&str>,
    message: &str,
) -> String {
    let (mut cmd, _seen): (Command, _) = run.pi_cmd(responses);
    cmd.arg("-p");
    if let Some(s) = session {
        cmd.arg("--session").arg(s);
    }
    if let Some(r) = rewind {
        cmd.env("BH_PI_REWIND", r);
    }
    let out = cmd.arg(message).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn rewind_setting_without_ui(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    print(&run, three_calls(), None, None, "go");
    assert_eq!(run.repo.read("a.txt"), "two\n");
    let file = run.session_file();
    let target = entries(&file)
        .iter()
        .find(|e| e["message"]["role"] == "toolResult" && e["message"]["toolCallId"] == "call_w")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tree = format!("/test-tree {target}");

    // Unset (and anything but `files`): conversation only.
    for rewind in [None, Some("conversation")] {
        let err = print(&run, Vec::new(), Some(&file), rewind, &tree);
        assert_eq!(run.repo.read("a.txt"), "two\n", "{rewind:?}: {err}");
        assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
        assert!(!run.repo.dir.join("keep.txt").exists());
    }

    // `files`: the files of that point — a.txt as written, bash undone.
    let err = print(&run, Vec::new(), Some(&file), Some("files"), &tree);
    assert!(
        err.contains("files rewound: 2 reverted, 1 deleted; undo with: /redo"),
        "{err}"
    );
    assert_eq!(run.repo.read("a.txt"), "one\n", "{err}");
    assert!(!run.repo.dir.join("b.txt").exists());
    assert_eq!(run.repo.read("keep.txt"), "base\n");
}

#[test]
fn pi_1_6_without_ui_bh_pi_rewind_decides_what_tree_rewinds() {
    rewind_setting_without_ui(PiRelease::Current);
}

#[test]
fn pi_0_73_without_ui_bh_pi_rewind_decides_what_tree_rewinds() {
    rewind_setting_without_ui(PiRelease::Legacy);
}
