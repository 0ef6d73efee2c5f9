//! Sessions written as Pi writes them (no `details.checkpoint`), whose calls
//! were checkpointed by the checkpoint server (`bh checkpoint serve`, as the
//! Pi extension drives it): the server's call journal is what says which
//! checkpoint stood before a call whose snapshot reused an older one.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use super::Env;

const SESSION: &str = "5e551011-0000-4000-8000-000000000001";

/// One Pi entry line: `kind` is `user`, `assistant` (one `write` call) or
/// `toolResult`.
fn entry(id: &str, parent: Option<&str>, kind: &str) -> Value {
    let message = match kind {
        "user" => {
            json!({"role": "user", "content": [{"type": "text", "text": format!("prompt {id}")}], "timestamp": 1})
        }
        "assistant" => json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": format!("call-{id}"), "name": "write", "arguments": {"path": "x.txt", "content": "x"}}],
            "api": "openai-completions", "provider": "mock", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 1
        }),
        _ => {
            json!({"role": "toolResult", "toolCallId": format!("call-{parent:?}"), "toolName": "write",
                    "content": [{"type": "text", "text": "ok"}], "isError": false, "timestamp": 1})
        }
    };
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
}

impl Env {
    /// An empty repository (README.md only) and a Pi session file over it.
    fn pi(entries: &[Value]) -> Env {
        let env = Env::with_script("{\"text\": \"a\"}\n{\"text\": \"b\"}\n");
        let header = json!({"type": "session", "version": 3, "id": SESSION,
                            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": env.repo});
        let mut text = format!("{header}\n");
        for e in entries {
            text.push_str(&format!("{e}\n"));
        }
        fs_err::write(&env.session, text).unwrap();
        env
    }

    /// Asks `bh checkpoint serve` (stdio, as the Pi extension does) for
    /// one snapshot tagged with `entry`; the answer's `snapshot`.
    fn serve_snapshot(&self, entry: &str) -> Value {
        let mut child = self
            .bh()
            .args(["checkpoint", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let request =
            json!({"id": 1, "op": "snapshot", "tool": "write", "session": SESSION, "entry": entry});
        writeln!(stdin, "{request}").unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        drop(stdin);
        assert!(child.wait().unwrap().success());
        let v: Value = serde_json::from_str(&line).unwrap();
        v["ok"]["snapshot"].clone()
    }

    fn write(&self, rel: &str, text: &str) {
        fs_err::write(self.repo.join(rel), text).unwrap();
    }
}

/// Three prompts: the first call writes a.txt; the second prompt's call
/// changes nothing; the third prompt's call finds nothing changed either, so
/// its snapshot reuses the second's checkpoint (tagged with the second
/// prompt's assistant entry) and only the journal says it stood before the
/// third prompt's call; that call writes b.txt, and the fourth's call edits
/// a.txt in a new checkpoint tagged with an entry after the third prompt.
#[test]
fn a_checkpoint_reused_by_a_pi_call_is_found_through_the_server_journal() {
    let entries = [
        entry("aaaa0001", None, "user"),
        entry("aaaa0002", Some("aaaa0001"), "assistant"),
        entry("aaaa0003", Some("aaaa0002"), "toolResult"),
        entry("bbbb0001", Some("aaaa0003"), "user"),
        entry("bbbb0002", Some("bbbb0001"), "assistant"),
        entry("bbbb0003", Some("bbbb0002"), "toolResult"),
        entry("cccc0001", Some("bbbb0003"), "user"),
        entry("cccc0002", Some("cccc0001"), "assistant"),
        entry("cccc0003", Some("cccc0002"), "toolResult"),
        entry("dddd0001", Some("cccc0003"), "user"),
        entry("dddd0002", Some("dddd0001"), "assistant"),
        entry("dddd0003", Some("dddd0002"), "toolResult"),
    ];
    let env = Env::pi(&entries);
    env.serve_snapshot("aaaa0002");
    env.write("a.txt", "one\n");
    let second = env.serve_snapshot("bbbb0002");
    assert_eq!(second["created"], true, "{second}");
    let third = env.serve_snapshot("cccc0002");
    assert_eq!(third["created"], false, "{third}");
    assert_eq!(
        third["checkpoint"]["commit"],
        second["checkpoint"]["commit"]
    );
    env.write("b.txt", "two\n");
    let fourth = env.serve_snapshot("dddd0002");
    assert_eq!(fourth["created"], true, "{fourth}");
    env.write("a.txt", "ONE\n");

    let out = env
        .bh()
        .args(["--json", "checkpoint", "restore", "--session"])
        .arg(&env.session)
        .args(["--entry", "cccc0001"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["checkpoint"]["commit"], second["checkpoint"]["commit"],
        "{doc:#}"
    );
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.repo.join("b.txt").exists());
}

/// A session kept inside the project, written after its calls' checkpoints
/// and recorded without after-records (the server's journal): the fallback
/// attributes every change since the last call's checkpoint to it, so the
/// rewind deletes the session file, and moving its leaf then fails.
/// The error says the files were rewound and names the undo, as text and
/// under `--json`; the undo brings the session back.
#[test]
fn a_leaf_move_failing_after_the_files_names_their_undo() {
    let entries = [
        entry("aaaa0001", None, "user"),
        entry("aaaa0002", Some("aaaa0001"), "assistant"),
        entry("aaaa0003", Some("aaaa0002"), "toolResult"),
    ];
    for json_out in [false, true] {
        let env = Env::pi(&entries);
        env.serve_snapshot("aaaa0002");
        env.write("a.txt", "one\n");
        let inside = env.repo.join("pi-session.jsonl");
        fs_err::rename(&env.session, &inside).unwrap();
        let mut cmd = env.bh();
        if json_out {
            cmd.arg("--json");
        }
        let out = cmd
            .args(["checkpoint", "restore", "--session"])
            .arg(&inside)
            .args(["--entry", "aaaa0002", "--rewind-session"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{out:?}");
        assert!(!inside.exists(), "the rewind deleted the session file");
        assert!(!env.repo.join("a.txt").exists());
        if json_out {
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let message = doc["error"]["message"].as_str().unwrap();
            assert!(message.contains("already rewound"), "{doc:#}");
            assert_eq!(doc["undo"], "bh rewind --undo", "{doc:#}");
            assert!(message.contains("undo with: bh rewind --undo"), "{doc:#}");
            assert!(doc["rewind"]["undo"]["id"].is_string(), "{doc:#}");
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("the files were already rewound"), "{err}");
            assert!(err.contains("undo with: bh rewind --undo"), "{err}");
        }
        let back = env.bh().args(["rewind", "--undo"]).output().unwrap();
        assert!(back.status.success(), "{back:?}");
        assert!(inside.exists(), "the undo brings the session back");
        assert_eq!(env.read("a.txt"), "one\n");
    }
}
