//! `bh checkpoint restore --session FILE --entry ID [--rewind-session]` on a
//! real repository with a session the scripted agent wrote: bad input first
//! (unknown, ambiguous and malformed entries, an entry with nothing after it,
//! a session of another project), then the files back to how they were at a
//! prompt, the undo point, and the leaf moved.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[path = "rewind/pi.rs"]
mod pi;

/// Two prompts, each changing files: a.txt written, then b.txt written and a.txt edited.
const SCRIPT: &str = r#"
{"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]}
{"text": "wrote a"}
{"toolCalls": [{"name": "write", "arguments": {"path": "b.txt", "content": "two\n"}}, {"name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "one", "newText": "ONE"}]}}]}
{"text": "wrote b"}
"#;

struct Env {
    w: bh_test_support::cli::World,
    root: PathBuf,
    repo: PathBuf,
    session: PathBuf,
}

impl Env {
    fn new() -> Env {
        let env = Env::with_script(SCRIPT);
        assert_eq!(env.read("a.txt"), "ONE\n");
        assert_eq!(env.read("b.txt"), "two\n");
        env
    }

    /// A repository, and a session of two prompts answered by `script`.
    fn with_script(script_text: &str) -> Env {
        let w = crate::world();
        let root = w.root.clone();
        let repo = root.join("repo");
        fs_err::create_dir_all(&repo).unwrap();
        w.git(&repo, &["init", "-q", "-b", "main"]);
        fs_err::write(repo.join("README.md"), "hello\n").unwrap();
        w.git(&repo, &["add", "."]);
        w.git(&repo, &["commit", "-q", "-m", "init"]);
        fs_err::write(root.join("script.jsonl"), script_text).unwrap();
        let session = root.join("s.jsonl");
        let env = Env {
            w,
            root,
            repo,
            session,
        };
        let script = env.root.join("script.jsonl");
        let session = env.session.display().to_string();
        let out = env
            .bh()
            .args(["agent", "--script", script.to_str().unwrap()])
            .args(["--session", &session, "-p", "first prompt", "second prompt"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        env
    }

    fn bh(&self) -> Command {
        self.w.bh(&self.repo)
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.repo.join(rel)).unwrap_or_default()
    }

    fn lines(&self) -> Vec<Value> {
        fs_err::read_to_string(&self.session)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Ids of the user messages, in order.
    fn users(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter(|v| v["message"]["role"] == "user")
            .map(|v| v["id"].as_str().unwrap().to_owned())
            .collect()
    }

    fn restore(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .bh()
            .args(["checkpoint", "restore", "--session"])
            .arg(&self.session)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn bad_entries_are_named_and_change_nothing() {
    let env = Env::new();
    let before = fs_err::read(&env.session).unwrap();
    // Unknown: not found (4).
    let (code, _, err) = env.restore(&["--entry", "ffffffff"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("no entry matches \"ffffffff\""), "{err}");
    // Not an id: usage (2).
    let (code, _, err) = env.restore(&["--entry", "zz"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not an entry id"), "{err}");
    // A session file that does not exist: not found.
    let out = env
        .bh()
        .args([
            "checkpoint",
            "restore",
            "--session",
            "missing.jsonl",
            "--entry",
            "abcd",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    // --entry without --session, and an id with --session: usage.
    let out = env
        .bh()
        .args(["checkpoint", "restore", "--entry", "abcd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The last entry: no mutating call after it; nothing changes.
    let last = env.lines().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = env.restore(&["--entry", &last]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("no checkpoint after entry"), "{err}");
    assert_eq!(fs_err::read(&env.session).unwrap(), before);
    assert_eq!(env.read("a.txt"), "ONE\n");
}

#[test]
fn a_session_of_another_project_is_refused() {
    let env = Env::new();
    let other = env.root.join("other");
    fs_err::create_dir_all(&other).unwrap();
    env.w.git(&other, &["init", "-q", "-b", "main"]);
    let first = env.users()[0].clone();
    let out = env
        .bh()
        .current_dir(&other)
        .args(["checkpoint", "restore", "--session"])
        .arg(&env.session)
        .args(["--entry", &first])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("is not in project"), "{err}");
    assert_eq!(env.read("a.txt"), "ONE\n");
}

#[test]
fn files_go_back_to_a_prompt_with_an_undo_point_and_the_leaf_can_follow() {
    let env = Env::new();
    let users = env.users();
    // The second prompt, by a 4-digit prefix: a.txt as the first turn left it, b.txt gone.
    let (code, out, err) = env.restore(&["--entry", &users[1][..4]]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.repo.join("b.txt").exists());
    assert!(out.contains("revert   a.txt"), "{out}");
    assert!(out.contains("delete   b.txt"), "{out}");
    assert!(out.contains("undo with: bh rewind --undo"), "{out}");
    // The undo puts everything back.
    let back = env.bh().args(["rewind", "--undo"]).output().unwrap();
    assert!(back.status.success(), "{back:?}");
    assert_eq!(env.read("a.txt"), "ONE\n");
    assert_eq!(env.read("b.txt"), "two\n");

    // The first prompt, with the leaf: files as before the session, and the
    // conversation continues from before that prompt.
    let out = env
        .bh()
        .args(["--json", "checkpoint", "restore", "--session"])
        .arg(&env.session)
        .args(["--entry", &users[0], "--rewind-session"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!env.repo.join("a.txt").exists());
    assert!(!env.repo.join("b.txt").exists());
    assert_eq!(env.read("README.md"), "hello\n");
    let lines = env.lines();
    let first = lines.iter().find(|v| v["id"] == users[0].as_str()).unwrap();
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "custom");
    assert_eq!(last["parentId"], first["parentId"]);
    assert_eq!(doc["leaf"]["appended"], last["id"]);
    assert_eq!(doc["leaf"]["to"], first["parentId"]);
}

#[test]
fn repl_restore_reads_exact_as_the_flag() {
    let env = Env::new();
    let out = env
        .bh()
        .args(["--json", "checkpoint", "list"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let oldest = doc["checkpoints"].as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let script = env.root.join("script.jsonl");
    let mut child = env
        .bh()
        .args([
            "agent",
            "-i",
            "--script",
            script.to_str().unwrap(),
            "--session",
        ])
        .arg(&env.session)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "/restore {oldest} --exact\n/quit").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(!stderr.contains("--exact"), "{stderr}");
    assert!(stdout.contains("deleted 2"), "{stdout}");
    assert!(!env.repo.join("a.txt").exists());
    assert!(!env.repo.join("b.txt").exists());
}

/// `bh agent -i` with `lines` on stdin: (stdout, stderr).
fn repl(env: &Env, lines: &str) -> (String, String) {
    let script = env.root.join("script.jsonl");
    let mut child = env
        .bh()
        .args([
            "agent",
            "-i",
            "--script",
            script.to_str().unwrap(),
            "--session",
        ])
        .arg(&env.session)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(lines.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

#[test]
fn repl_rewind_lists_prompts_needs_a_choice_without_a_terminal_and_rewinds_files_only() {
    let env = Env::new();
    let users = env.users();
    let lines_before = env.lines().len();
    // Alone: the prompts to choose from. Without a choice and no terminal to
    // ask on: a usage error, nothing changed. A bad id: named.
    let (stdout, stderr) = repl(
        &env,
        &format!("/rewind\n/rewind {}\n/rewind zz --files\n/quit\n", users[1]),
    );
    assert!(
        stdout.contains(&format!("{}  first prompt", users[0])),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{}  second prompt", users[1])),
        "{stdout}"
    );
    assert!(stdout.contains("usage: /rewind ENTRY"), "{stdout}");
    assert!(stderr.contains("say what to rewind"), "{stderr}");
    assert!(stderr.contains("is not an entry id"), "{stderr}");
    assert_eq!(env.read("a.txt"), "ONE\n");
    assert_eq!(env.lines().len(), lines_before, "the session is unchanged");
    // Files only: the files go back, the conversation stays.
    let (stdout, stderr) = repl(&env, &format!("/rewind {} --files\n/quit\n", users[1]));
    assert!(stdout.contains("rewound 2 calls"), "{stdout}{stderr}");
    assert!(stdout.contains("undo: /redo"), "{stdout}");
    assert!(!stdout.contains("conversation rewound"), "{stdout}");
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.repo.join("b.txt").exists());
    assert_eq!(env.lines().len(), lines_before, "the session is unchanged");
    // /redo puts the files back; the conversation did not move, so stays.
    let (stdout, stderr) = repl(&env, "/redo\n/redo\n/quit\n");
    assert!(stdout.contains("files put back"), "{stdout}{stderr}");
    assert!(stderr.contains("no rewind to undo"), "{stderr}");
    assert_eq!(env.read("a.txt"), "ONE\n");
    assert_eq!(env.read("b.txt"), "two\n");
    assert_eq!(env.lines().len(), lines_before, "the session is unchanged");
}

#[test]
fn the_session_may_be_named_by_its_id_as_pi_does() {
    let env = Env::new();
    let users = env.users();
    let header = env.lines()[0].clone();
    let id = header["id"].as_str().unwrap();
    let dir = bh_session::session_dir_for_cwd(&env.root.join("agent"), env.repo.to_str().unwrap());
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::copy(&env.session, dir.join(format!("2026_{id}.jsonl"))).unwrap();
    // An id nobody has: not found, and no file of that name appears.
    let out = env
        .bh()
        .args([
            "checkpoint",
            "restore",
            "--session",
            "deadbeef",
            "--entry",
            &users[1],
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(!env.repo.join("deadbeef").exists());
    let out = env
        .bh()
        .args([
            "checkpoint",
            "restore",
            "--session",
            &id[..8],
            "--entry",
            &users[1],
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(env.read("a.txt"), "one\n");
}

#[test]
fn repl_tree_takes_an_entry_prefix() {
    let env = Env::new();
    let users = env.users();
    let (stdout, stderr) = repl(
        &env,
        &format!("/tree {}\n/tree ab\n/quit\n", &users[1][..5]),
    );
    assert!(
        stdout.contains(&format!("continuing from {}", users[1])),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("too short"), "{stderr}");
}

/// Nothing changed between the first prompt's last call (a failed edit) and
/// the second prompt's first call, so that call's snapshot reuses the
/// checkpoint tagged with the first prompt's entry. Only the tool result's
/// `details.checkpoint` names the state at the second prompt; the first
/// checkpoint tagged with a later entry already holds b.txt.
#[test]
fn a_reused_checkpoint_is_found_through_the_tool_result() {
    let env = Env::with_script(concat!(
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}, {"name": "edit", "arguments": {"path": "none.txt", "edits": [{"oldText": "x", "newText": "y"}]}}]}"#,
        "\n",
        r#"{"text": "first done"}"#,
        "\n",
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "b.txt", "content": "two\n"}}]}"#,
        "\n",
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "a.txt", "content": "changed later\n"}}]}"#,
        "\n",
        r#"{"text": "second done"}"#,
        "\n",
    ));
    assert_eq!(env.read("a.txt"), "changed later\n");
    let reused: Vec<Value> = env
        .lines()
        .into_iter()
        .filter(|v| v["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(reused.len(), 4);
    assert_eq!(
        reused[1]["message"]["details"]["checkpoint"],
        reused[2]["message"]["details"]["checkpoint"],
        "the second prompt's first snapshot reused the checkpoint before it"
    );
    let users = env.users();
    let (code, out, err) = env.restore(&["--entry", &users[1]]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.repo.join("b.txt").exists(), "{out}");
}

/// Rewinding to a tool result keeps its own call's effect (its
/// `details.checkpoint` was taken before that call, so it does not count);
/// rewinding to the assistant entry that made the calls undoes them all.
#[test]
fn a_tool_result_keeps_its_own_call_and_its_assistant_entry_does_not() {
    let env = Env::new();
    let lines = env.lines();
    let results: Vec<&Value> = lines
        .iter()
        .filter(|v| v["message"]["role"] == "toolResult")
        .collect();
    // The second prompt's results: write b.txt, then edit a.txt.
    let wrote_b = results[1]["id"].as_str().unwrap();
    let assistant = results[1]["parentId"].as_str().unwrap();
    let (code, out, err) = env.restore(&["--entry", wrote_b]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        env.read("b.txt"),
        "two\n",
        "the write of entry {wrote_b} stays"
    );
    assert_eq!(env.read("a.txt"), "one\n", "the later edit is undone");
    let (code, out, err) = env.restore(&["--entry", assistant]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(env.read("a.txt"), "one\n");
    assert!(!env.repo.join("b.txt").exists(), "{out}");
}

/// A checkpoint id read from the session file is matched exactly: `latest`
/// (or a prefix) there is not taken as the store's newest checkpoint but
/// refused by name, and nothing changes.
#[test]
fn a_recorded_checkpoint_named_latest_is_not_the_newest() {
    let env = Env::new();
    let last = env.lines().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let forged = serde_json::json!({
        "type": "message", "id": "feed0001", "parentId": last,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "toolResult", "toolCallId": "x", "toolName": "write",
                    "content": [{"type": "text", "text": "ok"}], "isError": false,
                    "details": {"checkpoint": "latest"}, "timestamp": 1}
    });
    let mut text = fs_err::read_to_string(&env.session).unwrap();
    text.push_str(&format!("{forged}\n"));
    fs_err::write(&env.session, text).unwrap();
    let (code, out, err) = env.restore(&["--entry", &last]);
    assert_eq!(code, 4, "{out}{err}");
    assert!(
        err.contains(
            "the checkpoint latest taken before the call whose result is entry feed0001 is gone"
        ),
        "{err}"
    );
    assert_eq!(env.read("a.txt"), "ONE\n");
    assert_eq!(env.read("b.txt"), "two\n");
}
