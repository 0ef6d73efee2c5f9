//! The Claude Code hook path, with events shaped as Claude Code writes them
//! (tests/fixtures/claude-code, source noted there): `PreToolUse` and
//! `PostToolUse` leave a checkpoint before and an after-record after each
//! call, tagged with the session and tool-use id (a reused checkpoint too);
//! `CLAUDE_PROJECT_DIR` wins over a `cwd` a `cd` moved; a skipped checkpoint
//! is said in the hook's JSON `systemMessage` and counted by `checkpoint list`;
//! `bh rewind --claude` lists the transcript's prompts and rewinds the files
//! the session's calls changed after one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const PRE: &str = include_str!("../fixtures/claude-code/pre_tool_use.json");
const POST: &str = include_str!("../fixtures/claude-code/post_tool_use.json");

struct Env {
    w: bh_test_support::cli::World,
    root: PathBuf,
    project: PathBuf,
}

impl Env {
    /// A plain folder (no Git) with a subfolder.
    fn new() -> Env {
        let w = crate::world();
        let root = w.root.clone();
        let project = root.join("proj");
        fs_err::create_dir_all(project.join("sub")).unwrap();
        fs_err::write(project.join("top.txt"), "top0\n").unwrap();
        fs_err::write(project.join("sub/inner.txt"), "inner0\n").unwrap();
        Env { w, root, project }
    }

    fn bh(&self) -> Command {
        let mut cmd = self.w.bh(&self.project);
        cmd.env("BH_CHECKPOINT_NO_SERVER", "1");
        cmd
    }

    /// One hook call: `event` (a fixture) filled in, run from `cwd`.
    fn hook(&self, event: &str, tool: &str, tool_use: &str, cwd: &Path) -> Output {
        let text = event
            .replace("@SESSION@", "sess-cc")
            .replace(
                "@TRANSCRIPT@",
                &self.root.join("t.jsonl").display().to_string(),
            )
            .replace("@CWD@", &cwd.display().to_string())
            .replace("@TOOL@", tool)
            .replace("@TOOL_USE@", tool_use)
            .replace("@COMMAND@", "true");
        let mut cmd = self.bh();
        cmd.current_dir(cwd)
            .env("CLAUDE_PROJECT_DIR", &self.project)
            .args(["checkpoint", "hook", "claude-code"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "the hook never fails: {out:?}");
        out
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.project.join(rel)).unwrap_or_else(|_| "<gone>".into())
    }

    fn journal(&self) -> Vec<Value> {
        let dir = self.root.join("state/serve");
        let mut out = Vec::new();
        for e in fs_err::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "calls") {
                for l in fs_err::read_to_string(&p).unwrap().lines() {
                    out.push(serde_json::from_str(l).unwrap());
                }
            }
        }
        out
    }

    fn list(&self) -> Value {
        let out = self
            .bh()
            .args(["--json", "checkpoint", "list", "--project"])
            .arg(&self.project)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn pre_and_post_tool_use_record_each_call_in_the_project_dir() {
    let env = Env::new();
    let sub = env.project.join("sub");
    // After a `cd sub`, Claude Code's events carry cwd = sub: the project
    // is still CLAUDE_PROJECT_DIR.
    let out = env.hook(PRE, "Bash", "toolu_01", &sub);
    assert!(out.stdout.is_empty(), "{out:?}");
    fs_err::write(env.project.join("top.txt"), "top1\n").unwrap();
    fs_err::write(sub.join("new.txt"), "n\n").unwrap();
    env.hook(POST, "Bash", "toolu_01", &sub);
    let list = env.list();
    assert_eq!(list["project"], env.project.display().to_string(), "{list}");
    // A call that changes nothing: its checkpoint is reused, and the
    // journal still names its tool-use id.
    env.hook(PRE, "Monitor", "toolu_02", &sub);
    env.hook(POST, "Monitor", "toolu_02", &sub);
    let lines = env.journal();
    let calls: Vec<&Value> = lines.iter().filter(|l| l.get("commit").is_some()).collect();
    let afters: Vec<&Value> = lines.iter().filter_map(|l| l.get("after")).collect();
    assert_eq!(calls.len(), 2, "{lines:?}");
    assert_eq!(calls[0]["entry"], "toolu_01");
    assert_eq!(calls[0]["created"], true);
    assert_eq!(calls[1]["entry"], "toolu_02");
    assert_eq!(calls[1]["tool"], "Monitor");
    assert_eq!(afters.len(), 2, "{lines:?}");
    assert_eq!(afters[0]["session"], "sess-cc");
    assert_eq!(afters[0]["entry"], "toolu_01");
    assert_eq!(afters[0]["before"], calls[0]["commit"]);
    assert_ne!(afters[0]["after"], afters[0]["before"]);
    assert!(
        afters[0]["transcript"]
            .as_str()
            .unwrap()
            .ends_with("t.jsonl")
    );
    // Nothing changed during the second call: after = before.
    assert_eq!(afters[1]["before"], afters[1]["after"]);
    // The after-record holds sub/new.txt and the top-level change.
    let cps = list["checkpoints"].as_array().unwrap();
    assert!(cps.iter().any(|c| c["kind"] == "after"), "{list}");
    // A tool outside the list is not checkpointed.
    env.hook(PRE, "Read", "toolu_03", &sub);
    assert_eq!(env.journal().len(), 4);
}

#[test]
fn a_skipped_checkpoint_says_so_in_a_system_message_and_is_counted() {
    let env = Env::new();
    env.hook(PRE, "Bash", "toolu_01", &env.project);
    // Break the store: its last-checkpoint ref names an object it lacks.
    let list = env.list();
    let store = PathBuf::from(list["store"].as_str().unwrap());
    fs_err::write(
        store.join("git/refs/bh/last"),
        "1234567890123456789012345678901234567890\n",
    )
    .unwrap();
    fs_err::write(env.project.join("top.txt"), "top2\n").unwrap();
    let out = env.hook(PRE, "Edit", "toolu_02", &env.project);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let message = doc["systemMessage"].as_str().unwrap();
    assert!(message.contains("no checkpoint around Edit"), "{message}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checkpoint skipped"),
        "{out:?}"
    );
    let list = env.list();
    assert_eq!(list["skipped_snapshots"]["count"], 1, "{list}");
    assert!(
        list["skipped_snapshots"]["last"]
            .as_str()
            .unwrap()
            .starts_with("Edit: "),
        "{list}"
    );
    let text = env
        .bh()
        .args(["checkpoint", "list", "--project"])
        .arg(&env.project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("1 checkpoint could not be taken"), "{text}");
}

const TRANSCRIPT: &str = include_str!("../fixtures/claude-code/transcript.jsonl");

/// The scenario through the hook path: Claude Code's Edit changes
/// `a`, its Bash creates `b` and deletes `c`; a commit outside changes `d`,
/// the user deletes `e`; `bh rewind --claude` to the prompt before them.
#[test]
fn rewind_claude_lists_prompts_and_rewinds_only_the_sessions_calls() {
    let env = Env::new();
    let p = &env.project;
    env.w.git(p, &["init", "-q", "-b", "main"]);
    for f in ["a", "c", "d", "e"] {
        fs_err::write(p.join(f), format!("{f}0\n")).unwrap();
    }
    env.w.git(p, &["add", "."]);
    env.w.git(p, &["commit", "-q", "-m", "init"]);
    let transcript = TRANSCRIPT
        .replace("@CWD@", &p.display().to_string())
        .replace("@SESSION@", "sess-cc")
        .replace("@TOOL_USE_A@", "toolu_A")
        .replace("@TOOL_USE_B@", "toolu_B");
    fs_err::write(env.root.join("t.jsonl"), transcript).unwrap();
    env.hook(PRE, "Edit", "toolu_A", p);
    fs_err::write(p.join("a"), "a1\n").unwrap();
    env.hook(POST, "Edit", "toolu_A", p);
    env.hook(PRE, "Bash", "toolu_B", p);
    fs_err::write(p.join("b"), "b1\n").unwrap();
    fs_err::remove_file(p.join("c")).unwrap();
    env.hook(POST, "Bash", "toolu_B", p);
    fs_err::write(p.join("d"), "d1\n").unwrap();
    env.w
        .git(p, &["commit", "-q", "-am", "outside change to d"]);
    fs_err::remove_file(p.join("e")).unwrap();

    let run = |args: &[&str]| {
        let out = env
            .bh()
            .args(["--json", "rewind", "--claude"])
            .args(args)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), doc)
    };
    // The prompts, from the transcript the hook recorded.
    let (code, doc) = run(&[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["session"], "sess-cc");
    let prompts = doc["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 2, "{doc}");
    assert_eq!(prompts[1]["text"], "now change things");
    // Dry run, then the rewind to before the second prompt.
    let (code, doc) = run(&["sess-cc", "--prompt", "2", "--dry-run"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        doc["rewind"]["plan"]["revert"],
        serde_json::json!(["a", "c"])
    );
    assert_eq!(doc["rewind"]["plan"]["delete"], serde_json::json!(["b"]));
    assert_eq!(env.read("a"), "a1\n");
    let (code, doc) = run(&["--prompt", "2"]);
    assert_eq!(code, 0, "{doc}");
    assert!(doc["conversation"].as_str().unwrap().contains("/rewind"));
    assert_eq!(env.read("a"), "a0\n");
    assert_eq!(env.read("b"), "<gone>");
    assert_eq!(env.read("c"), "c0\n");
    assert_eq!(env.read("d"), "d1\n");
    assert_eq!(env.read("e"), "<gone>");
    // Undo returns.
    let out = env.bh().args(["rewind", "--undo"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(env.read("a"), "a1\n");
    assert_eq!(env.read("b"), "b1\n");
    assert_eq!(env.read("c"), "<gone>");
}
