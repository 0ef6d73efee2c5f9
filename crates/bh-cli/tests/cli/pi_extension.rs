//! The Pi extension (`integrations/pi/`) inside the real Pi, 1.6.0 and
//! 0.73.1 (installed from npm by `bh_test_support::pi`), driven in RPC mode
//! by the mock OpenAI-compatible server on 127.0.0.1: checkpoints before
//! every mutating call tagged with the calling entry, and `/tree` back to an
//! entry with "conversation and files" reverting exactly what the session's
//! calls after it changed (issue 23): paths changed outside the session are
//! left alone, the hint comes after Pi's own navigation notice, `/redo`
//! undoes it, `pi --continue` reopens at the rewound leaf, and a path the
//! user changed since is a conflict asked about in Pi's dialog.
//! The other commands are in `pi_extension_cmds.rs`; the shared driver in
//! `support/pi_rpc.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fs_err as fs;
use std::collections::BTreeMap;
use std::path::PathBuf;

use bh_test_support::pi::PiRelease;
use serde_json::{Value, json};

use crate::pi_rpc;
use pi_rpc::*;

#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn scripted_run_and_tree(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
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
    ];
    // A file the user will delete while the session runs.
    run.repo.write("e.txt", "the user's\n");
    run.repo.commit_all("e");
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    // Meanwhile, outside the session: the user writes d.txt, deletes e.txt.
    run.repo.write("d.txt", "the user's own\n");
    fs::remove_file(run.repo.dir.join("e.txt")).unwrap();
    assert_eq!(
        run.repo.read("a.txt"),
        "two\n",
        "notes: {:?}; session: {}",
        rpc.notes,
        fs::read_to_string(run.session_file()).unwrap_or_default()
    );
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
    assert!(!run.repo.dir.join("keep.txt").exists());

    // One checkpoint per mutating call, tagged with the assistant entry that
    // made it.
    let file = run.session_file();
    let all = entries(&file);
    let session_id = all[0]["id"].as_str().unwrap().to_owned();
    let mut caller: BTreeMap<String, String> = BTreeMap::new(); // tool call id -> entry id
    let mut result_of: BTreeMap<String, String> = BTreeMap::new(); // tool call id -> result entry id
    for e in &all {
        let m = &e["message"];
        if m["role"] == "assistant" {
            for c in m["content"].as_array().unwrap() {
                if c["type"] == "toolCall" {
                    caller.insert(
                        c["id"].as_str().unwrap().into(),
                        e["id"].as_str().unwrap().into(),
                    );
                }
            }
        }
        if m["role"] == "toolResult" {
            result_of.insert(
                m["toolCallId"].as_str().unwrap().into(),
                e["id"].as_str().unwrap().into(),
            );
        }
    }
    let mut cps: Vec<Value> = run
        .checkpoints()
        .into_iter()
        .filter(|c| c["session"] == json!(session_id) && c["kind"] == "snapshot")
        .collect();
    cps.sort_by_key(|c| c["seq"].as_u64());
    let tagged: Vec<(String, String)> = cps
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap().into(),
                c["entry"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        tagged,
        vec![
            ("write".to_owned(), caller["call_w"].clone()),
            ("bash".to_owned(), caller["call_b"].clone()),
            ("edit".to_owned(), caller["call_e"].clone()),
        ],
        "notes: {:?}",
        rpc.notes
    );

    // The HTML report shows each call's checkpoint on its card: bh finds the
    // store from the session's cwd (issue 27).
    let o = run
        .bh()
        .args(["session", "export", "--html"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = String::from_utf8(o.stdout).unwrap();
    assert_eq!(html.matches("class=\"badge cp\"").count(), 3, "{html}");
    for c in &cps {
        let id = c["id"].as_str().unwrap();
        assert!(
            html.contains(&format!("\u{2691} {id}</span>")),
            "{id}: {html}"
        );
    }

    // /tree back to the write's result: "conversation and files" reverts
    // what the session did after it — a.txt as written, no bash changes —
    // and leaves the user's d.txt and deleted e.txt as they are.
    let target = result_of["call_w"].clone();
    rpc.send(json!({"id": "t1", "type": "prompt", "message": format!("/test-tree {target}")}));
    rpc.until("Conversation and files", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("files "))
    });
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("navigated cancelled=false")),
        "{:?}",
        rpc.notes
    );
    assert_eq!(run.repo.read("a.txt"), "one\n", "notes: {:?}", rpc.notes);
    assert!(!run.repo.dir.join("b.txt").exists(), "bash's file survived");
    assert_eq!(
        run.repo.read("keep.txt"),
        "base\n",
        "bash's deletion not undone"
    );
    assert_eq!(
        run.repo.read("d.txt"),
        "the user's own\n",
        "{:?}",
        rpc.notes
    );
    assert!(
        !run.repo.dir.join("e.txt").exists(),
        "the user's deletion undone"
    );
    let hint = rpc
        .notes
        .iter()
        .position(|n| n.contains("undo with: /redo"))
        .unwrap_or_else(|| panic!("no undo hint: {:?}", rpc.notes));
    assert!(
        rpc.notes[hint].contains("left alone") && rpc.notes[hint].contains("d.txt"),
        "{:?}",
        rpc.notes
    );
    // Said after Pi's navigation is done (after the tree driver's note,
    // which follows Pi's own; on Pi's screen: `pi_extension_tui.rs`).
    let navigated = rpc
        .notes
        .iter()
        .position(|n| n.starts_with("navigated"))
        .unwrap();
    assert!(navigated < hint, "{:?}", rpc.notes);

    // The rewound leaf is the file's last word: `pi --continue` reopens there.
    let last = entries(&file).pop().unwrap();
    assert_eq!(last["type"], "custom", "{last}");
    assert_eq!(last["customType"], "better-harness.set-leaf");
    assert_eq!(last["parentId"], json!(target));
    drop(rpc.stdin);
    let _ = rpc.child.wait();
    let (mut cmd, _) = run.pi_cmd(Vec::new());
    cmd.args(["--mode", "rpc", "--continue"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut rpc = Rpc::spawned(cmd);
    rpc.send(json!({"id": "m", "type": "get_messages"}));
    let mut messages = Value::Null;
    rpc.until("", |v| {
        if v["type"] == "response" && v["id"] == "m" {
            messages = v["data"]["messages"].clone();
            true
        } else {
            false
        }
    });
    let last_message = messages.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last_message["role"], "toolResult", "{messages:#}");
    assert_eq!(last_message["toolCallId"], "call_w", "{messages:#}");

    // /redo: the files as before the rewind.
    rpc.send(json!({"id": "u1", "type": "prompt", "message": "/redo"}));
    rpc.until("", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("rewind undone") || m.starts_with("redo failed"))
    });
    assert_eq!(run.repo.read("a.txt"), "two\n", "{:?}", rpc.notes);
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
    assert_eq!(run.repo.read("d.txt"), "the user's own\n");
    assert!(!run.repo.dir.join("e.txt").exists());

    // /fork from the first prompt with "conversation and files": the files
    // go back to before the first call.
    let first_user = all.iter().find(|e| e["message"]["role"] == "user").unwrap()["id"].clone();
    rpc.send(json!({"id": "f1", "type": "fork", "entryId": first_user}));
    rpc.until("Conversation and files", |v| {
        v["type"] == "response" && v["command"] == "fork"
    });
    assert!(!run.repo.dir.join("a.txt").exists(), "{:?}", rpc.notes);
    assert!(!run.repo.dir.join("b.txt").exists());
    assert_eq!(run.repo.read("keep.txt"), "base\n");
    assert_eq!(run.repo.read("d.txt"), "the user's own\n");
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_checkpoints_every_mutating_call_and_rewinds_files_on_tree() {
    scripted_run_and_tree(PiRelease::Current);
}

#[test]
fn pi_0_73_checkpoints_every_mutating_call_and_rewinds_files_on_tree() {
    scripted_run_and_tree(PiRelease::Legacy);
}

/// A file the session wrote and the user changed since is a conflict for
/// `/tree` "Conversation and files": asked about in Pi's dialog; "Cancel"
/// (any other answer) keeps the user's bytes and cancels the navigation,
/// "Overwrite them" rewinds it, and `/redo` brings the user's bytes back.
fn tree_conflict(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    assert_eq!(run.repo.read("a.txt"), "one\n");
    run.repo.write("a.txt", "the user's edit\n");
    let file = run.session_file();
    let first_user = entries(&file)
        .into_iter()
        .find(|e| e["message"]["role"] == "user")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let navigated = |v: &Value| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("navigated"))
    };

    // The conflict dialog gets an answer that is not "Overwrite them".
    rpc.send(json!({"id": "t1", "type": "prompt", "message": format!("/test-tree {first_user}")}));
    rpc.until("Conversation and files", navigated);
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("navigated cancelled=true")),
        "{:?}",
        rpc.notes
    );
    assert_eq!(
        run.repo.read("a.txt"),
        "the user's edit\n",
        "{:?}",
        rpc.notes
    );

    // "Overwrite them": the session's write is undone.
    rpc.also_select = vec!["Overwrite them".to_owned()];
    rpc.notes.clear();
    rpc.send(json!({"id": "t2", "type": "prompt", "message": format!("/test-tree {first_user}")}));
    rpc.until("Conversation and files", |v| {
        v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("files "))
    });
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("navigated cancelled=false")),
        "{:?}",
        rpc.notes
    );
    assert!(!run.repo.dir.join("a.txt").exists(), "{:?}", rpc.notes);
    assert!(
        rpc.notes.iter().any(|n| n.contains("undo with: /redo")),
        "{:?}",
        rpc.notes
    );

    // /redo: nothing was lost, the user's bytes are back.
    rpc.send(json!({"id": "u1", "type": "prompt", "message": "/redo"}));
    rpc.until("", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("rewind undone") || m.starts_with("redo failed"))
    });
    assert_eq!(
        run.repo.read("a.txt"),
        "the user's edit\n",
        "{:?}",
        rpc.notes
    );
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_tree_asks_about_a_conflict_and_keeps_the_users_bytes() {
    tree_conflict(PiRelease::Current);
}

#[test]
fn pi_0_73_tree_asks_about_a_conflict_and_keeps_the_users_bytes() {
    tree_conflict(PiRelease::Legacy);
}

fn worktree_enter(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        text("hello"),
        tool_call(
            "call_w",
            "write",
            json!({"path": "w.txt", "content": "in the worktree\n"}),
        ),
        text("done"),
    ];
    let (mut rpc, seen) = run.start_seen(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    rpc.until("", settled(release));
    rpc.send(json!({"id": "c1", "type": "prompt", "message": "/worktree create feat"}));
    rpc.until("", notified("feat"));
    let wt_path = run.repo.dir.parent().unwrap().join(format!(
        "{}.worktrees/feat",
        run.repo.dir.file_name().unwrap().to_str().unwrap()
    ));
    assert!(
        rpc.notes
            .last()
            .unwrap()
            .contains(&format!("created at {}", wt_path.display())),
        "{:?}",
        rpc.notes
    );
    rpc.send(json!({"id": "e1", "type": "prompt", "message": "/worktree enter feat"}));
    rpc.until("", notified("arrived in worktree"));
    let note = rpc.notes.last().unwrap().clone();
    let worktree = PathBuf::from(
        note.trim_start_matches("arrived in worktree ")
            .split(" (")
            .next()
            .unwrap(),
    );
    assert!(worktree.join(".git").exists(), "{note}");
    assert_ne!(worktree, run.repo.dir);
    // The next tool call lands in the worktree.
    rpc.send(json!({"id": "p2", "type": "prompt", "message": "write it"}));
    rpc.until("", settled(release));
    assert_eq!(
        fs::read_to_string(worktree.join("w.txt")).unwrap(),
        "in the worktree\n",
        "{:?}",
        rpc.notes
    );
    assert!(!run.repo.dir.join("w.txt").exists());
    // Disposing the worktree this Pi runs in is refused (its files would go
    // from under the session), and says how to move out first.
    rpc.send(json!({"id": "d1", "type": "prompt", "message": "/worktree dispose feat --force"}));
    rpc.until("", notified("this session runs in worktree feat"));
    assert!(worktree.join("w.txt").exists(), "{:?}", rpc.notes);
    let requests = seen.lock().unwrap().clone();
    let next = &requests[1].1;
    let orientations = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m.to_string()
                .contains("[better-harness] This session moved")
        })
        .count();
    assert_eq!(orientations, 1, "{next:#}");
    // The handoff was consumed once, by the new runtime.
    let target = run
        .session_files()
        .into_iter()
        .find(|f| {
            fs::read_to_string(f)
                .unwrap()
                .contains("better-harness-transition")
        })
        .unwrap();
    let out = run
        .bh()
        .args(["--json", "worktree", "consume"])
        .arg(&target)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "notPending", "{v}");
    let verified = fs::read_to_string(&target)
        .unwrap()
        .matches("better-harness-transition-verification")
        .count();
    assert_eq!(verified, 1);
    // /worktree leave carries the session back; then the dispose works.
    rpc.send(json!({"id": "l1", "type": "prompt", "message": "/worktree leave"}));
    rpc.until(
        "",
        notified(format!("arrived in worktree {}", run.repo.dir.display())),
    );
    rpc.send(json!({"id": "d2", "type": "prompt", "message": "/worktree dispose feat --force"}));
    rpc.until("", notified("worktree feat disposed"));
    assert!(!worktree.exists());
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

fn exec_from_pi(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        text("hello"),
        // The execution's own agent (bh exec run), same mock endpoint.
        tool_call(
            "call_x",
            "write",
            json!({"path": "x.txt", "content": "executed\n"}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    rpc.until("", settled(release));
    rpc.send(json!({"id": "x1", "type": "prompt", "message": "/exec add x.txt"}));
    rpc.until("", notified("execution"));
    let note = rpc.notes.last().unwrap().clone();
    assert!(
        note.contains("refs/better-harness/executions/"),
        "{:?}",
        rpc.notes
    );
    let refs = run.repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/better-harness/executions/",
    ]);
    let (name, commit) = refs
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("no ref: {refs:?} {:?}", rpc.notes));
    assert!(
        note.contains(name) && note.contains(commit),
        "{note} vs {refs}"
    );
    assert_eq!(
        run.repo.git(&["show", &format!("{commit}:x.txt")]),
        "executed"
    );
    assert!(
        !run.repo.dir.join("x.txt").exists(),
        "the execution ran elsewhere"
    );
    // It says what next, and its plan file is gone after the run.
    assert!(note.contains("report: bh exec show "), "{note}");
    assert!(
        note.contains(&format!("git merge --ff-only {name}")),
        "{note}"
    );
    let left: Vec<_> = fs::read_dir(&run.tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("bh-exec-"))
        .collect();
    assert!(left.is_empty(), "plan folders left: {left:?}");
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_worktree_enter_moves_the_session_and_consumes_the_handoff_once() {
    worktree_enter(PiRelease::Current);
}

#[test]
fn pi_0_73_worktree_enter_moves_the_session_and_consumes_the_handoff_once() {
    worktree_enter(PiRelease::Legacy);
}

#[test]
fn pi_1_6_exec_commits_under_the_executions_namespace() {
    exec_from_pi(PiRelease::Current);
}

#[test]
fn pi_0_73_exec_commits_under_the_executions_namespace() {
    exec_from_pi(PiRelease::Legacy);
}

fn broken_bh_never_blocks_a_tool(release: PiRelease) {
    let Some(mut run) = Run::new(release) else {
        return;
    };
    run.bh_bin = run.repo.root.join("no-such-bh");
    let responses = vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "written\n"}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    assert_eq!(run.repo.read("a.txt"), "written\n", "the tool was blocked");
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("checkpoint before write failed")),
        "no visible warning: {:?}",
        rpc.notes
    );
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_a_failing_checkpoint_warns_and_never_blocks() {
    broken_bh_never_blocks_a_tool(PiRelease::Current);
}

#[test]
fn pi_0_73_a_failing_checkpoint_warns_and_never_blocks() {
    broken_bh_never_blocks_a_tool(PiRelease::Legacy);
}
