//! The Pi extension in the real Pi's interactive TUI (1.6.0 and 0.73.1) on a
//! pseudo-terminal, its screen kept by a terminal emulator
//! (`bh_test_support::tui`), issue 23: after a tree navigation with
//! "Conversation and files", the undo hint is on the screen — Pi clears its
//! chat and shows "Navigated to selected point" after the extension's
//! `session_tree` handler returns, which wiped a hint said from inside it —
//! and `/redo` typed at Pi's prompt puts the files back. The navigation is
//! the test-only `/test-tree ID` (the same `navigateTree` of Pi's TUI that
//! `/tree`'s selector ends in), so no tree selector is steered by keys.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bh_test_support::pi::PiRelease;
use bh_test_support::tui::Tui;
use serde_json::json;

use crate::pi_rpc;
use pi_rpc::*;

fn undo_hint_on_screen(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    // A session with one write, made in RPC mode.
    let mut rpc = run.start(vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        ),
        text("all done"),
    ]);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "write a"}));
    rpc.until("", settled(release));
    drop(rpc.stdin);
    let _ = rpc.child.wait();
    assert_eq!(run.repo.read("a.txt"), "one\n", "{:?}", rpc.notes);
    let file = run.session_file();
    let first_user = entries(&file)
        .into_iter()
        .find(|e| e["message"]["role"] == "user")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The same session in Pi's TUI.
    let (mut cmd, _) = run.pi_cmd(Vec::new());
    cmd.arg("--session").arg(&file);
    let mut tui = Tui::spawn_cleared(&cmd);
    tui.wait_for("all done");
    tui.settle(Duration::from_millis(500));
    tui.keys(&format!("/test-tree {first_user}"));
    tui.settle(Duration::from_millis(300));
    tui.keys("\r");
    // The extension's question; its first option is "Conversation and files".
    tui.wait_for("rewind what?");
    tui.keys("\r");
    let screen = tui.wait_for("undo with: /redo");
    assert!(
        screen.contains("files rewound: 0 reverted, 1 deleted"),
        "{screen}"
    );
    assert!(!run.repo.dir.join("a.txt").exists(), "{screen}");
    // Nothing Pi draws after it covers it.
    let screen = tui.settle(Duration::from_secs(1));
    assert!(screen.contains("undo with: /redo"), "{screen}");

    // /redo at Pi's prompt (Ctrl+C first clears the prompt Pi put back in
    // the editor): the files as before.
    tui.keys("\x03");
    tui.settle(Duration::from_millis(300));
    tui.keys("/redo");
    tui.settle(Duration::from_millis(300));
    tui.keys("\r");
    let screen = tui.wait_for("rewind undone");
    assert_eq!(run.repo.read("a.txt"), "one\n", "{screen}");
}

#[test]
fn pi_1_6_shows_the_undo_hint_after_its_own_tree_navigation() {
    undo_hint_on_screen(PiRelease::Current);
}

#[test]
fn pi_0_73_shows_the_undo_hint_after_its_own_tree_navigation() {
    undo_hint_on_screen(PiRelease::Legacy);
}
