//! The real Claude Code CLI (npm's native 2.1 build, installed into the
//! target folder by `bh_test_support::claude`) with bh's hook in its
//! settings, run offline against an Anthropic-compatible mock on 127.0.0.1
//! (issue 23): every Write, Bash and Edit gets a checkpoint before it and an
//! after-record after it, tagged with Claude Code's session and tool-use ids;
//! `bh rewind --claude` finds the prompt in the transcript Claude Code wrote
//! and reverts exactly what the session changed — bash's file and deletion
//! included — leaving a commit made outside the session and a file the user
//! deleted as they are; its undo puts everything back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use bh_test_support::TestRepo;
use bh_test_support::cli::World;
use bh_test_support::mock_anthropic::{text, tool_use, turns_so_far};
use serde_json::{Value, json};

const MODEL: &str = "claude-mock";

struct Env {
    t: TestRepo,
    w: World,
}

impl Env {
    fn bh(&self) -> Command {
        self.w.bh(&self.t.dir)
    }

    fn json(&self, args: &[&str]) -> (i32, Value) {
        let out = self.bh().arg("--json").args(args).output().unwrap();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        (out.status.code().unwrap_or(-1), doc)
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.t.dir.join(rel)).unwrap_or_else(|_| "<gone>".into())
    }
}

/// Claude Code's project settings: bh's hook before and after every
/// mutating tool, exactly the block the README gives (with bh's path).
fn settings(dir: &Path, bh: &Path) {
    let command = format!("'{}' checkpoint hook claude-code", bh.display());
    let matcher = "Edit|Write|NotebookEdit|Bash|PowerShell|Monitor";
    let hook =
        json!([{ "matcher": matcher, "hooks": [{ "type": "command", "command": command }] }]);
    fs_err::create_dir_all(dir.join(".claude")).unwrap();
    fs_err::write(
        dir.join(".claude/settings.json"),
        json!({ "hooks": { "PreToolUse": hook, "PostToolUse": hook } }).to_string(),
    )
    .unwrap();
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn claude_code_with_bhs_hook_checkpoints_every_call_and_rewinds_only_the_session() {
    let Some(claude) = bh_test_support::claude::real_claude() else {
        return;
    };
    let t = TestRepo::new();
    for f in ["c.txt", "d.txt", "e.txt"] {
        t.write(f, format!("{f} base\n"));
    }
    let w = crate::world_at(&t.root);
    settings(&t.dir, w.bin());
    // Claude Code's settings are the user's, not the project's history.
    t.write(".git/info/exclude", ".claude/\n");
    t.commit_all("base");
    let env = Env { w, t };
    let dir = env.t.dir.clone();
    let a = dir.join("a.txt").display().to_string();
    let url = bh_test_support::mock_openai::serve_by(move |req| {
        // Side requests without tools (titles, summaries) get plain text.
        if req["tools"].as_array().is_none_or(Vec::is_empty) {
            return text(MODEL, "ok");
        }
        match turns_so_far(req) {
            0 => tool_use(
                MODEL,
                "toolu_w",
                "Write",
                &json!({"file_path": a, "content": "one\n"}),
            ),
            1 => tool_use(
                MODEL,
                "toolu_b",
                "Bash",
                &json!({"command": "echo made-by-bash > b.txt && rm c.txt", "description": "b, not c"}),
            ),
            2 => tool_use(
                MODEL,
                "toolu_e",
                "Edit",
                &json!({"file_path": a, "old_string": "one", "new_string": "two"}),
            ),
            _ => text(MODEL, "done"),
        }
    });
    let base = url.trim_end_matches("/v1").to_owned();
    let out = env
        .w
        .command(&claude)
        .current_dir(&dir)
        // Claude Code wants a POSIX shell named by SHELL for its Bash tool.
        .env("SHELL", "/bin/bash")
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_MODEL", MODEL)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .args(["-p", "change things", "--output-format", "json"])
        // As root Claude Code refuses to skip permissions: allow the tools.
        .args(["--allowedTools", "Write Edit Bash"])
        // A mock that went wrong ends, not loops.
        .args(["--max-turns", "8"])
        .output()
        .unwrap();
    let result: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(result["is_error"], false, "{result:#}");
    assert_eq!(result["result"], "done", "{result:#}");
    let session = result["session_id"].as_str().unwrap().to_owned();
    assert_eq!(env.read("a.txt"), "two\n");
    assert_eq!(env.read("b.txt"), "made-by-bash\n");
    assert_eq!(env.read("c.txt"), "<gone>");

    // Every call has its checkpoint before it and an after-record after it:
    // a rewind to before the prompt attributes all three.
    let (code, list) = env.json(&["checkpoint", "list"]);
    assert_eq!(code, 0, "{list:#}");
    let ours: Vec<&Value> = list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["session"] == json!(session))
        .collect();
    assert!(
        ours.iter()
            .any(|c| c["entry"] == "toolu_w" && c["kind"] == "snapshot"),
        "the first call's checkpoint, tagged: {list:#}"
    );
    assert_eq!(
        ours.iter().filter(|c| c["kind"] == "after").count(),
        3,
        "an after-state per call, named as such: {list:#}"
    );
    assert_eq!(list["skipped_snapshots"]["count"], 0, "{list:#}");

    // Meanwhile, outside the session: a commit changes d, the user deletes e.
    env.t.write("d.txt", "d changed outside\n");
    env.t.commit_all("outside change to d");
    fs_err::remove_file(dir.join("e.txt")).unwrap();

    // The prompts come from the transcript Claude Code wrote.
    let (code, doc) = env.json(&["rewind", "--claude"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["session"], json!(session));
    assert_eq!(doc["prompts"][0]["text"], "change things", "{doc:#}");
    let transcript = PathBuf::from(doc["transcript"].as_str().unwrap());
    assert!(transcript.starts_with(&env.t.home), "{transcript:?}");

    let (code, dry) = env.json(&["rewind", "--claude", &session, "--prompt", "1", "--dry-run"]);
    assert_eq!(code, 0, "{dry:#}");
    let plan = &dry["rewind"]["plan"];
    assert_eq!(plan["calls"], 3, "{dry:#}");
    assert_eq!(plan["revert"], json!(["c.txt"]), "{dry:#}");
    assert_eq!(plan["delete"], json!(["a.txt", "b.txt"]), "{dry:#}");
    assert_eq!(plan["conflicts"], json!([]), "{dry:#}");
    assert_eq!(env.read("a.txt"), "two\n", "a dry run changes nothing");

    let (code, done) = env.json(&["rewind", "--claude", &session, "--prompt", "1"]);
    assert_eq!(code, 0, "{done:#}");
    assert!(
        done["conversation"].as_str().unwrap().contains("/rewind"),
        "says how to rewind Claude Code's conversation: {done:#}"
    );
    assert_eq!(env.read("a.txt"), "<gone>");
    assert_eq!(env.read("b.txt"), "<gone>");
    assert_eq!(env.read("c.txt"), "c.txt base\n");
    assert_eq!(
        env.read("d.txt"),
        "d changed outside\n",
        "not the session's"
    );
    assert_eq!(env.read("e.txt"), "<gone>", "the user's deletion stands");

    let out = env.bh().args(["rewind", "--undo"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(env.read("a.txt"), "two\n");
    assert_eq!(env.read("b.txt"), "made-by-bash\n");
    assert_eq!(env.read("c.txt"), "<gone>");
    assert_eq!(env.read("d.txt"), "d changed outside\n");
}
