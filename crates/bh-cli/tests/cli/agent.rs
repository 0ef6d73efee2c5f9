//! `bh agent` through the built binary: a scripted (or mock-HTTP) model edits a
//! real Git repository; the session file is valid and in Pi's shapes, a
//! checkpoint exists before each mutation, limits fire with their exit code,
//! and (when Node and Pi are available) the real Pi loads the file. The
//! interactive mode is fed through stdin with `-i`; `/worktree` moves of the
//! live session are tested end to end there.
//!
//! Over 600 lines: one test binary per command family (each binary is a separate link); tests are independent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bh_test_support::cli::World;
use bh_test_support::mock_openai::{chunk, serve, usage};

use serde_json::{Value, json};

struct Env {
    w: World,
    root: PathBuf,
    repo: PathBuf,
    state: PathBuf,
    agent_dir: PathBuf,
}

const SCRIPT: &str = r#"
# write, edit, read, then a final answer
{"text": "I'll create the file.", "toolCalls": [{"name": "write", "arguments": {"path": "notes/todo.txt", "content": "alpha\nbeta\n"}}], "usage": {"input": 100, "output": 10}}
{"toolCalls": [{"name": "edit", "arguments": {"path": "notes/todo.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}}]}
{"toolCalls": [{"name": "read", "arguments": {"path": "notes/todo.txt"}}]}
{"thinking": "All done.", "text": "Created and edited notes/todo.txt.", "usage": {"input": 200, "output": 12}}
"#;

fn env() -> Env {
    let w = crate::world();
    let root = w.root.clone();
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    fs_err::write(repo.join("README.md"), "hello\n").unwrap();
    w.git(&repo, &["add", "."]);
    w.git(&repo, &["commit", "-q", "-m", "init"]);
    fs_err::write(root.join("script.jsonl"), SCRIPT).unwrap();
    Env {
        state: w.state.clone(),
        agent_dir: w.agent.clone(),
        w,
        root,
        repo,
    }
}

impl Env {
    fn bh(&self) -> Command {
        self.w.bh(&self.repo)
    }

    /// `bh --json agent …`: exit code and the JSONL lines.
    fn agent_json(&self, args: &[&str]) -> (i32, Vec<Value>, String) {
        let out = self
            .bh()
            .arg("--json")
            .arg("agent")
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines = stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
            })
            .collect();
        (
            out.status.code().unwrap_or(-1),
            lines,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn runner(&self) -> bh_git::GitRunner {
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), self.root.join("home").into_os_string()),
        ];
        bh_git::GitRunner::new("git", env)
    }

    fn store(&self) -> bh_checkpoint::Store {
        bh_checkpoint::Store::open(
            &self.runner(),
            &self.repo,
            &bh_checkpoint::StoreOptions::new(&self.state),
        )
        .unwrap()
    }

    fn sessions(&self) -> Vec<PathBuf> {
        let dir = bh_session::session_dir_for_cwd(&self.agent_dir, self.repo.to_str().unwrap());
        let mut v: Vec<PathBuf> = fs_err::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn messages(path: &Path) -> Vec<Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "message")
        .map(|v| v["message"].clone())
        .collect()
}

fn assert_valid(path: &Path) -> bh_session::Session {
    let s = bh_session::Session::load(path).unwrap();
    assert!(s.is_valid(), "{:?}", s.problems());
    assert!(s.problems().is_empty(), "{:?}", s.problems());
    s
}

#[test]
fn headless_json_run_edits_the_repo_with_checkpoints_in_a_valid_session() {
    let env = env();
    let file = env.root.join("s/my-session.jsonl");
    let (code, lines, stderr) = env.agent_json(&[
        "--session",
        file.to_str().unwrap(),
        "--script",
        "../script.jsonl",
        "-p",
        "Create notes/todo.txt",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        fs_err::read_to_string(env.repo.join("notes/todo.txt")).unwrap(),
        "alpha\nBETA\n"
    );
    // Pi's JSON mode: the header first, then the events; bh says which
    // sandbox the bash tool runs under before the first.
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["cwd"], env.repo.to_str().unwrap());
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(&types[1..4], ["sandbox", "agent_start", "turn_start"]);
    assert!(types.contains(&"message_update"));
    assert!(types.contains(&"tool_execution_start"));
    assert!(types.contains(&"tool_execution_end"));
    assert_eq!(types.iter().filter(|t| **t == "checkpoint").count(), 2);
    assert_eq!(types[types.len() - 2], "agent_end");
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "run_end");
    assert_eq!(end["stop"], "completed");
    assert_eq!(end["toolCalls"], 3);
    // The loop's own time per executed tool call (no wall-clock bound asserted).
    assert_eq!(end["overhead"]["calls"], 3);
    assert!(end["overhead"]["medianUs"].is_u64(), "{end}");
    // message_update carries Pi's partial snapshot, also as `message`.
    let update = lines
        .iter()
        .find(|l| l["type"] == "message_update")
        .unwrap();
    assert_eq!(
        update["message"],
        update["assistantMessageEvent"]["partial"]
    );
    assert_eq!(update["message"]["role"], "assistant");
    // Messages in events keep Pi's key order.
    let user_start = lines.iter().find(|l| l["type"] == "message_start").unwrap();
    let raw = serde_json::to_string(user_start).unwrap();
    assert!(raw.contains("\"role\""), "{raw}");

    // The session file at exactly that path, in Pi's shapes.
    let s = assert_valid(&file);
    assert_eq!(s.header().unwrap().cwd.as_deref(), env.repo.to_str());
    let msgs = messages(&file);
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
            "assistant"
        ]
    );
    assert_eq!(msgs[1]["usage"]["input"], 100);
    assert_eq!(msgs[7]["content"][0]["type"], "thinking");

    // A checkpoint before each mutation, listed by bh-checkpoint.
    let cps: Vec<&str> = [&msgs[2], &msgs[4]]
        .iter()
        .map(|m| m["details"]["checkpoint"].as_str().unwrap())
        .collect();
    assert!(msgs[6]["details"].get("checkpoint").is_none());
    let store = env.store();
    let list = store.list().unwrap();
    let session_id = s.header().unwrap().id.clone();
    for (id, tool) in cps.iter().zip(["write", "edit"]) {
        let cp = list.iter().find(|c| c.id == *id).expect("listed");
        assert_eq!(cp.tool, tool);
        assert_eq!(cp.session.as_deref(), Some(session_id.as_str()));
    }
    // The checkpoint before the write does not have the file; before the edit it has "beta".
    let ls = |c: &str| {
        let out = env.w.git_output(
            &env.repo,
            &[
                "--git-dir",
                store.dir().join("git").to_str().unwrap(),
                "show",
                &format!("{c}:notes/todo.txt"),
            ],
        );
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let before_edit = store.resolve(cps[1]).unwrap();
    assert_eq!(ls(&before_edit.commit), "alpha\nbeta\n");
    let before_write = store.resolve(cps[0]).unwrap();
    let out = env
        .w
        .git_command(&env.root)
        .args(["--git-dir", store.dir().join("git").to_str().unwrap()])
        .args([
            "cat-file",
            "-e",
            &format!("{}:notes/todo.txt", before_write.commit),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());

    // `bh session validate` agrees.
    let out = env
        .bh()
        .args(["--json", "session", "validate"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn human_mode_prints_the_answer_and_new_sessions_go_to_the_cwd_folder() {
    let env = env();
    let out = env
        .bh()
        .args(["agent", "--model", "scripted/../script.jsonl", "-p", "go"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Created and edited notes/todo.txt.\n"
    );
    let sessions = env.sessions();
    assert_eq!(sessions.len(), 1);
    let name = sessions[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(name.ends_with(".jsonl") && name.contains('_'), "{name}");
    assert_valid(&sessions[0]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checkpoint"), "{stderr}");
}

#[test]
fn limits_exit_7_and_say_which() {
    let env = env();
    let (code, lines, _) = env.agent_json(&[
        "--script",
        "../script.jsonl",
        "--max-tool-calls",
        "1",
        "-p",
        "go",
    ]);
    assert_eq!(code, 7);
    let end = lines.last().unwrap();
    assert_eq!(end["stop"], "limit");
    assert_eq!(end["limit"], "tool_calls");
    assert_eq!(end["reason"], "Tool call limit reached (1 tool calls)");
    let file = &env.sessions()[0];
    assert_valid(file);
    let last = messages(file).pop().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(
        last["errorMessage"],
        "Tool call limit reached (1 tool calls)"
    );

    let (code, lines, _) = env.agent_json(&[
        "--script",
        "../script.jsonl",
        "--max-turns",
        "1",
        "-p",
        "go",
    ]);
    assert_eq!(code, 7);
    assert_eq!(lines.last().unwrap()["limit"], "turns");

    // Time: a slow stream and a 1s budget.
    fs_err::write(
        env.root.join("slow.jsonl"),
        r#"{"text": "abcdefghijklmnopqrstuvwxyz0123456789", "chunkChars": 1, "delayMs": 100}"#,
    )
    .unwrap();
    let (code, lines, _) =
        env.agent_json(&["--script", "../slow.jsonl", "--timeout", "1s", "-p", "go"]);
    assert_eq!(code, 7);
    assert_eq!(lines.last().unwrap()["limit"], "time");
    assert_eq!(lines.last().unwrap()["reason"], "Time limit reached (1s)");
}

#[test]
fn model_errors_exit_9_and_no_model_is_a_usage_error() {
    let env = env();
    fs_err::write(
        env.root.join("err.jsonl"),
        r#"{"stopReason": "error", "errorMessage": "500 boom"}"#,
    )
    .unwrap();
    let (code, lines, _) = env.agent_json(&["--script", "../err.jsonl", "-p", "go"]);
    assert_eq!(code, 9);
    assert_eq!(lines.last().unwrap()["stop"], "error");

    let out = env.bh().args(["agent", "-p", "go"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = env
        .bh()
        .args([
            "agent",
            "--script",
            "../script.jsonl",
            "--tools",
            "read,nope",
            "-p",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn resume_continue_and_fork_work_in_the_sessions_cwd() {
    let env = env();
    fs_err::write(
        env.root.join("chat.jsonl"),
        "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n",
    )
    .unwrap();
    let script = env.root.join("chat.jsonl");
    let script = script.to_str().unwrap();
    let file = env.root.join("resume.jsonl");
    let (code, _, err) = env.agent_json(&[
        "--session",
        file.to_str().unwrap(),
        "--script",
        script,
        "-p",
        "first",
    ]);
    assert_eq!(code, 0, "{err}");

    // Resumed from another directory: refused, naming both, nothing written;
    // the file's header never picks the tools' root by itself.
    let other = env.root.join("elsewhere");
    fs_err::create_dir_all(&other).unwrap();
    fs_err::write(
        env.root.join("w.jsonl"),
        r#"{"toolCalls": [{"name": "write", "arguments": {"path": "from-resume.txt", "content": "x"}}]}
{"text": "ok"}"#,
    )
    .unwrap();
    let before = fs_err::read(&file).unwrap();
    let out = env
        .bh()
        .current_dir(&other)
        .args(["--json", "agent", "--session"])
        .arg(&file)
        .args(["--script", script, "-p", "second"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "refused");
    let msg = doc["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(env.repo.to_str().unwrap()) && msg.contains(other.to_str().unwrap()),
        "{msg}"
    );
    assert_eq!(fs_err::read(&file).unwrap(), before);

    // With --cwd naming the root, it works there.
    let out = env
        .bh()
        .current_dir(&other)
        .args(["--json", "agent", "--cwd"])
        .arg(&env.repo)
        .arg("--session")
        .arg(&file)
        .args([
            "--script",
            env.root.join("w.jsonl").to_str().unwrap(),
            "-p",
            "second",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env.repo.join("from-resume.txt").exists());
    assert!(!other.join("from-resume.txt").exists());
    let s = assert_valid(&file);
    let ctx = s.context(None).unwrap();
    assert_eq!(ctx.messages.len(), 6, "both prompts in one conversation");

    // --continue picks the newest session of the cwd (none yet → a new one, then it).
    let (code, _, _) = env.agent_json(&["--continue", "--script", script, "-p", "a"]);
    assert_eq!(code, 0);
    let (code, _, _) = env.agent_json(&["--continue", "--script", script, "-p", "b"]);
    assert_eq!(code, 0);
    let sessions = env.sessions();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        messages(&sessions[0])
            .iter()
            .filter(|m| m["role"] == "user")
            .count(),
        2
    );

    // --fork copies into a new session of the cwd and continues there.
    let before = fs_err::read(&file).unwrap();
    let (code, lines, _) = env.agent_json(&[
        "--fork",
        file.to_str().unwrap(),
        "--script",
        script,
        "-p",
        "forked",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        fs_err::read(&file).unwrap(),
        before,
        "the source is untouched"
    );
    let forked: Vec<PathBuf> = env
        .sessions()
        .into_iter()
        .filter(|p| *p != sessions[0])
        .collect();
    assert_eq!(forked.len(), 1);
    let f = assert_valid(&forked[0]);
    assert_eq!(f.header().unwrap().parent_session.as_deref(), file.to_str());
    assert_eq!(lines[0]["id"], f.header().unwrap().id.as_str());
    assert_eq!(f.context(None).unwrap().messages.len(), 8);
}

#[test]
fn runs_against_a_mock_openai_server_with_the_key_from_the_environment() {
    let env = env();
    let t1 = [
        chunk(json!({"role": "assistant", "content": "Writing."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "write", "arguments": "{\"path\": \"m.txt\", "}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"content\": \"mock\\n\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage(50, 10),
    ]
    .concat();
    let t2 = [
        chunk(json!({"role": "assistant", "content": "Done."}), None),
        chunk(json!({}), Some("stop")),
        usage(70, 3),
    ]
    .concat();
    let (base, seen) = serve(vec![t1, t2]);
    let file = env.root.join("oa.jsonl");
    let out = env
        .bh()
        .env("OPENAI_API_KEY", "sk-test-123")
        .args([
            "--json",
            "agent",
            "--model",
            "openai/gpt-test",
            "--base-url",
            &base,
        ])
        .args(["--session", file.to_str().unwrap(), "-p", "write m.txt"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs_err::read_to_string(env.repo.join("m.txt")).unwrap(),
        "mock\n"
    );
    let msgs = messages(&file);
    assert_eq!(msgs[1]["provider"], "openai");
    assert_eq!(msgs[1]["api"], "openai-completions");
    assert_eq!(msgs[1]["model"], "gpt-test");
    assert_eq!(msgs[1]["stopReason"], "toolUse");
    assert!(msgs[2]["details"]["checkpoint"].is_string());
    assert_eq!(msgs[3]["content"][0]["text"], "Done.");
    assert_valid(&file);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "Bearer sk-test-123");
    assert_eq!(seen[1].1["messages"].as_array().unwrap().len(), 4);
}

// ----- the real Pi ------------------------------------------------------------

/// The real Pi 0.73.1 as `(node, dist/cli.js)`, installed by the shared
/// test support when Node and npm are present (`None`, reason printed, when not).
fn find_pi() -> Option<(PathBuf, PathBuf)> {
    bh_test_support::pi::real_pi(bh_test_support::pi::PiRelease::Legacy).map(|p| (p.node, p.cli))
}

/// Pi's messages for a copy of `file`, through RPC `get_messages`.
fn pi_messages(node: &Path, cli: &Path, file: &Path) -> (bool, Vec<Value>, String) {
    let w = crate::world();
    let root = w.root.clone();
    let w = w.with_home(&root);
    fs_err::create_dir_all(&w.agent).unwrap();
    let copy = root.join("s.jsonl");
    fs_err::copy(file, &copy).unwrap();
    let mut child = w
        .command(node)
        .arg(cli)
        .args(["--mode", "rpc", "--no-extensions", "--session"])
        .arg(&copy)
        .env("PI_OFFLINE", "1")
        .env("PI_TELEMETRY", "0")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        // Our own child, by its pid (harmless if it already exited and was reaped).
        let _ = Command::new("kill").arg(pid.to_string()).status();
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"id\":\"s\",\"type\":\"get_state\"}\n{\"id\":\"m\",\"type\":\"get_messages\"}\n",
        )
        .unwrap();
    stdin.flush().unwrap();
    let mut ok = false;
    let mut messages = Vec::new();
    let mut pending = 2;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["type"] != "response" {
            continue;
        }
        match v["id"].as_str() {
            Some("s") => ok = v["success"] == true,
            Some("m") => {
                messages = v["data"]["messages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            }
            _ => continue,
        }
        pending -= 1;
        if pending == 0 {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    (
        ok,
        messages,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_real_pi_loads_the_session_bh_agent_wrote() {
    let Some((node, cli)) = find_pi() else {
        return;
    };
    let env = env();
    let file = env.root.join("for-pi.jsonl");
    // A completed run, then one stopped by a limit (aborted message at the end).
    let (code, _, err) = env.agent_json(&[
        "--session",
        file.to_str().unwrap(),
        "--script",
        "../script.jsonl",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = env.agent_json(&[
        "--session",
        file.to_str().unwrap(),
        "--script",
        "../script.jsonl",
        "--max-tool-calls",
        "1",
        "-p",
        "again",
    ]);
    assert_eq!(code, 7);
    assert_valid(&file);

    let (ok, pi, stderr) = pi_messages(&node, &cli, &file);
    assert!(ok, "pi rpc failed: {stderr}");
    let out = env
        .bh()
        .args(["--json", "session", "context"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = ours["messages"].as_array().cloned().unwrap_or_default();
    assert!(pi.len() >= 10, "pi: {pi:?}");
    assert_eq!(pi.len(), ours.len(), "pi: {pi:?}");
    assert_eq!(pi, ours);
}

#[test]
fn ctrl_c_aborts_the_turn_and_exits_8_keeping_the_session() {
    // SIGTERM and SIGHUP do what Ctrl-C does.
    for signal in ["INT", "TERM", "HUP"] {
        interrupt_a_turn(signal);
    }
}

fn interrupt_a_turn(signal: &str) {
    let env = env();
    fs_err::write(
        env.root.join("slow.jsonl"),
        r#"{"text": "abcdefghijklmnopqrstuvwxyz0123456789", "chunkChars": 1, "delayMs": 100}"#,
    )
    .unwrap();
    let file = env.root.join("int.jsonl");
    let mut child = env
        .bh()
        .args(["--json", "agent", "--script", "../slow.jsonl", "--session"])
        .arg(&file)
        .args(["-p", "go"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for streaming to start, then SIGINT our own child by its pid.
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut sent = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        if !sent && line.contains("text_delta") {
            Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status()
                .unwrap();
            sent = true;
        }
        lines.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(8), "SIG{signal}");
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "run_end");
    assert_eq!(end["stop"], "cancelled");
    assert_valid(&file);
    let last = messages(&file).pop().unwrap();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(last["errorMessage"], "Request was aborted");
    assert!(!last["content"][0]["text"].as_str().unwrap().is_empty());
}

#[test]
fn sigterm_ends_the_interactive_agent_as_ctrl_c_twice_does() {
    let env = env();
    fs_err::write(
        env.root.join("slow.jsonl"),
        r#"{"text": "abcdefghijklmnopqrstuvwxyz0123456789", "chunkChars": 1, "delayMs": 100}"#,
    )
    .unwrap();
    let file = env.root.join("term.jsonl");
    let mut child = env
        .bh()
        .args(["agent", "-i", "--script", "../slow.jsonl", "--session"])
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    // Once the answer streams ("abc…" on stdout), the turn is running:
    // terminate bh.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    while !seen.windows(3).any(|w| w == b"abc") {
        let mut byte = [0u8; 1];
        std::io::Read::read_exact(&mut stdout, &mut byte).unwrap();
        seen.push(byte[0]);
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exited by itself (not killed by the signal), as interrupted, saying
    // where the session is; the aborted turn is in it.
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert_eq!(final_session(&stderr), file);
    assert_valid(&file);
    let last = messages(&file).pop().unwrap();
    assert_eq!(last["stopReason"], "aborted");
}

#[test]
fn interactive_mode_runs_prompts_and_commands_from_stdin() {
    let env = env();
    let file = env.root.join("repl.jsonl");
    let script = env.root.join("script.jsonl");
    let input = format!(
        "/help\nCreate notes/todo.txt\n/checkpoints\n/tree\n/fork\n/session\n/model scripted/{}\n/restore\n/bogus\n/quit\n",
        script.display()
    );
    let mut child = env
        .bh()
        .args(["agent", "-i", "--script", "../script.jsonl", "--session"])
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("/checkpoints"), "help: {stdout}");
    assert!(
        stdout.contains("Created and edited notes/todo.txt."),
        "{stdout}"
    );
    assert!(stdout.contains("write "), "checkpoint list: {stdout}");
    assert!(stdout.contains("← leaf"), "tree: {stdout}");
    assert!(stdout.contains("forked into "), "{stdout}");
    assert!(stdout.contains("model: scripted/"), "{stdout}");
    assert!(stderr.contains("unknown command /bogus"), "{stderr}");
    assert!(stderr.contains("usage: /restore ID"), "{stderr}");
    assert_eq!(
        fs_err::read_to_string(env.repo.join("notes/todo.txt")).unwrap(),
        "alpha\nBETA\n"
    );
    assert_valid(&file);
    // The fork is a new, valid session of the cwd holding the conversation, and
    // /model appended a model_change to it.
    let forks = env.sessions();
    assert_eq!(forks.len(), 1);
    let f = assert_valid(&forks[0]);
    assert_eq!(f.context(None).unwrap().messages.len(), 8);
    assert!(
        fs_err::read_to_string(&forks[0])
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .contains("model_change")
    );
}

#[test]
fn interactive_restore_brings_a_file_back() {
    let env = env();
    let file = env.root.join("r.jsonl");
    // Run once headless to make checkpoints.
    let (code, _, _) = env.agent_json(&[
        "--session",
        file.to_str().unwrap(),
        "--script",
        "../script.jsonl",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0);
    let msgs = messages(&file);
    let before_edit = msgs[4]["details"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut child = env
        .bh()
        .args(["agent", "-i", "--script", "../script.jsonl", "--session"])
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("/restore {before_edit} notes/todo.txt\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("restored 1 file(s)"));
    assert_eq!(
        fs_err::read_to_string(env.repo.join("notes/todo.txt")).unwrap(),
        "alpha\nbeta\n"
    );
}

#[test]
fn a_hosted_model_without_its_key_is_a_usage_error() {
    let env = env();
    let out = env
        .bh()
        .args(["agent", "--model", "anthropic/claude-x", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("set ANTHROPIC_API_KEY"));
    // Nothing was written.
    assert!(env.sessions().is_empty());
}

// ----- /worktree: moving the live session -------------------------------------

/// Feeds `input` to `cmd` (a `bh agent -i …`) and waits: (exit code, stdout, stderr).
fn run_repl(mut cmd: Command, input: &str) -> (i32, String, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `bh agent -i --cwd <repo> ARGS` standing in `<root>/elsewhere`: the
/// session's cwd is the repository, so nothing may depend on the process's
/// current directory.
fn repl_elsewhere(env: &Env, args: &[&str]) -> Command {
    let elsewhere = env.root.join("elsewhere");
    fs_err::create_dir_all(&elsewhere).unwrap();
    let mut cmd = env.bh();
    cmd.current_dir(&elsewhere)
        .args(["agent", "-i", "--cwd"])
        .arg(&env.repo)
        .args(args);
    cmd
}

/// The session the REPL ended in (its last `session:` line on stderr).
fn final_session(stderr: &str) -> PathBuf {
    PathBuf::from(
        stderr
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("session: "))
            .unwrap_or_else(|| panic!("no session line: {stderr}")),
    )
}

fn lines_of(path: &Path) -> Vec<Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

fn custom_count(path: &Path, custom_type: &str) -> usize {
    lines_of(path)
        .iter()
        .filter(|v| v["customType"] == custom_type)
        .count()
}

fn session_files(env: &Env, cwd: &Path) -> Vec<PathBuf> {
    let dir = bh_session::session_dir_for_cwd(&env.agent_dir, cwd.to_str().unwrap());
    let mut v: Vec<PathBuf> = fs_err::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "jsonl"));
    v.sort();
    v
}

fn text_turn(text: &str) -> String {
    [
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
        usage(10, 2),
    ]
    .concat()
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn worktree_create_edit_and_dispose_move_one_continuous_session() {
    let env = env();
    let wt = env.root.join("repo.worktrees/feat");
    let write_turn = [
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_w", "type": "function",
                "function": {"name": "write", "arguments": "{\"path\": \"notes/wt.txt\", \"content\": \"in the worktree\\n\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage(20, 5),
    ]
    .concat();
    let (base, seen) = serve(vec![
        text_turn("Hello."),
        write_turn,
        text_turn("Written."),
        text_turn("Back."),
    ]);
    let source = env.root.join("s.jsonl");
    let input = "hi\n/worktree create feat\nwrite it\n/worktree list\n/worktree dispose\n\
                 /worktree dispose --force\nafter\n/quit\n";
    let mut cmd = repl_elsewhere(
        &env,
        &[
            "--model",
            "openai/gpt-test",
            "--base-url",
            &base,
            "--session",
        ],
    );
    cmd.arg(&source).env("OPENAI_API_KEY", "sk-test");
    let (code, stdout, stderr) = run_repl(cmd, input);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("created worktree feat at {}", wt.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("session moved into the worktree {}", wt.display())),
        "{stdout}"
    );
    // The edit landed in the worktree: dirty there, not in the main checkout
    // nor in the process's own directory.
    let feat_row = stdout
        .lines()
        .find(|l| l.starts_with("feat "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(feat_row.split_whitespace().nth(3), Some("1"), "{feat_row}");
    let main_row = stdout.lines().find(|l| l.starts_with("(main)")).unwrap();
    assert_eq!(main_row.split_whitespace().nth(3), Some("0"), "{main_row}");
    assert!(!env.repo.join("notes").exists());
    assert!(!env.root.join("elsewhere/notes").exists());
    // The plain dispose refused before moving anything, naming the worktree.
    assert!(
        stderr.contains(&format!(
            "{} has 1 uncommitted or untracked file(s)",
            wt.display()
        )) && stderr.contains(&format!("the session stays in {}", wt.display())),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "session moved back to the main checkout {}",
            env.repo.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("disposed worktree feat"), "{stdout}");
    assert!(stdout.contains("branch feat deleted (merged)"), "{stdout}");
    assert!(!wt.exists());

    // The write was checkpointed in the worktree's own store, and the
    // disposal's checkpoint holds the file.
    let stores: Vec<PathBuf> = fs_err::read_dir(env.state.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("feat-")
        })
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let shown = env
        .w
        .git_command(&env.root)
        .arg("--git-dir")
        .arg(stores[0].join("git"))
        .args(["show", "refs/bh/last:notes/wt.txt"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "in the worktree\n");

    // One continuous session, ending in the main checkout's session folder.
    let last = final_session(&stderr);
    assert_eq!(session_files(&env, &env.repo), vec![last.clone()]);
    let s = assert_valid(&last);
    assert_eq!(
        s.header().unwrap().cwd.as_deref(),
        Some(env.repo.to_str().unwrap())
    );
    let in_wt = session_files(&env, &wt);
    assert_eq!(in_wt.len(), 1, "{in_wt:?}");
    assert_eq!(
        s.header().unwrap().parent_session.as_deref(),
        in_wt[0].to_str()
    );
    assert_eq!(custom_count(&last, bh_handoff::ORIENTATION_TYPE), 2);
    assert_eq!(custom_count(&last, bh_handoff::VERIFICATION_TYPE), 2);
    assert_eq!(custom_count(&in_wt[0], bh_handoff::ORIENTATION_TYPE), 1);
    // The source was never written by the moves.
    assert_eq!(custom_count(&source, bh_handoff::ORIENTATION_TYPE), 0);
    assert_eq!(messages(&source).len(), 2);
    // Every turn, in order, on the active path; no turn was added by a move.
    let roles: Vec<String> = s
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| {
            let v: Value = serde_json::from_str(m.message.get()).unwrap();
            v["role"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "custom",
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "custom",
            "user",
            "assistant"
        ]
    );
    let users: Vec<Value> = messages(&last)
        .into_iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    assert_eq!(users, [json!("hi"), json!("write it"), json!("after")]);

    // The next model request after each move saw its orientation, once, and
    // the system prompt names the new working directory.
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    let body = |i: usize| serde_json::to_string(&seen[i].1["messages"]).unwrap();
    let moved_in = "[better-harness] This session moved from";
    let came_back = "[better-harness] This session came back from the worktree";
    assert!(!body(0).contains("[better-harness]"));
    assert_eq!(body(1).matches(moved_in).count(), 1, "{}", body(1));
    assert!(body(1).contains(&format!("to the worktree {}", wt.display())));
    assert!(body(1).contains(&format!("Current working directory: {}", wt.display())));
    assert_eq!(body(3).matches(moved_in).count(), 1);
    assert_eq!(body(3).matches(came_back).count(), 1, "{}", body(3));
    assert!(body(3).contains(&format!(
        "Current working directory: {}",
        env.repo.display()
    )));

    // The real Pi loads it with the same context.
    let Some((node, cli)) = find_pi() else {
        return;
    };
    let (ok, pi, pi_err) = pi_messages(&node, &cli, &last);
    assert!(ok, "pi rpc failed: {pi_err}");
    let out = env
        .bh()
        .args(["--json", "session", "context"])
        .arg(&last)
        .output()
        .unwrap();
    assert!(out.status.success());
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pi.len(), 10, "pi: {pi:?}");
    assert_eq!(pi, ours["messages"].as_array().cloned().unwrap_or_default());
}

#[test]
fn worktree_moves_carry_a_session_without_turns_and_a_moved_leaf() {
    let env = env();
    fs_err::write(
        env.root.join("talk.jsonl"),
        "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n",
    )
    .unwrap();
    let source = env.root.join("t.jsonl");
    // No turns yet: the move carries the model entries and adds one orientation.
    let (code, stdout, stderr) = run_repl(
        repl_elsewhere(
            &env,
            &[
                "--script",
                "../talk.jsonl",
                "--session",
                source.to_str().unwrap(),
            ],
        ),
        "/worktree create z\nfirst\nsecond\n/quit\n",
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("(whole-tree, 2 entries carried)"),
        "{stdout}"
    );
    let z = final_session(&stderr);
    let s = assert_valid(&z);
    assert_eq!(s.context(None).unwrap().messages.len(), 5);
    assert_eq!(messages(&source).len(), 0);

    // Resume it, move the leaf back to the first answer with /tree (in memory
    // only), then move: what is carried is the conversation at that leaf.
    let first_answer = lines_of(&z)
        .into_iter()
        .find(|v| v["message"]["role"] == "assistant")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = env.bh().args(["worktree", "create", "y"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let before = fs_err::read(&z).unwrap();
    let mut cmd = env.bh();
    cmd.args(["agent", "-i", "--script", "../talk.jsonl", "--session"])
        .arg(&z)
        .arg("--cwd")
        .arg(env.root.join("repo.worktrees/z"));
    let (code, stdout, stderr) = run_repl(
        cmd,
        &format!("/tree {first_answer}\n/worktree enter y\n/quit\n"),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("(from-entry,"), "{stdout}");
    assert_eq!(
        fs_err::read(&z).unwrap(),
        before,
        "the source is never written"
    );
    let y = final_session(&stderr);
    assert_eq!(
        y.parent().unwrap(),
        bh_session::session_dir_for_cwd(
            &env.agent_dir,
            env.root.join("repo.worktrees/y").to_str().unwrap()
        )
    );
    let s = assert_valid(&y);
    let texts: Vec<String> = s
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    // orientation(z), first, one, orientation(y): "second"/"two" stay behind.
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(texts[1].contains("first") && texts[2].contains("one"));
    assert!(texts[3].contains("repo.worktrees/y"));
    assert!(!texts.iter().any(|t| t.contains("second")));
}

#[test]
fn failed_or_cancelled_worktree_moves_leave_the_session_as_it_was() {
    let env = env();
    let source = env.root.join("f.jsonl");
    // A session with a turn, written before the REPL starts.
    let (code, _, err) = env.agent_json(&[
        "--session",
        source.to_str().unwrap(),
        "--script",
        "../script.jsonl",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{err}");
    let before = fs_err::read(&source).unwrap();
    fs_err::create_dir_all(env.repo.join(".better-harness")).unwrap();
    fs_err::write(
        env.repo.join(".better-harness/worktree.toml"),
        "post_create = [\"exit 3\"]\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_repl(
        repl_elsewhere(
            &env,
            &[
                "--script",
                "../script.jsonl",
                "--session",
                source.to_str().unwrap(),
            ],
        ),
        "/worktree enter nope\n/worktree create bad\n/worktree dispose\n/worktree\n/session\n/quit\n",
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("no worktree named \"nope\""), "{stderr}");
    assert!(
        stderr.contains("post-create command 1 (\"exit 3\") failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "/worktree dispose works inside a managed worktree; {} is not one",
            env.repo.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Usage: /worktree <COMMAND>"), "{stderr}");
    assert_eq!(final_session(&stderr), source);
    assert!(stdout.contains(source.to_str().unwrap()), "{stdout}");
    assert_eq!(fs_err::read(&source).unwrap(), before);
    assert!(!env.root.join("repo.worktrees/bad").exists());
    assert!(walk(&env.agent_dir.join("sessions")).is_empty());

    // Ctrl-C while the worktree is being provisioned: it is created, the
    // session does not move, no prepared session is left.
    let out = interrupt_slow_create(&env, &source, "slow", 1, b"/session\n/quit\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("cancelled: worktree slow was created at")
            && stderr.contains(&format!("the session stays in {}", env.repo.display())),
        "{stderr}"
    );
    assert_eq!(final_session(&stderr), source);
    assert_eq!(fs_err::read(&source).unwrap(), before);
    assert!(env.root.join("repo.worktrees/slow").is_dir());
    assert!(walk(&env.agent_dir.join("sessions")).is_empty());

    // Ctrl-C twice during a move: it exits (8) only once the move is undone,
    // still leaving the source as it was and no prepared session behind.
    let out = interrupt_slow_create(&env, &source, "slow2", 2, b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("exiting once the move is undone"),
        "{stderr}"
    );
    // It says where the session is, as /quit does.
    assert_eq!(final_session(&stderr), source);
    assert_eq!(fs_err::read(&source).unwrap(), before);
    assert!(walk(&env.agent_dir.join("sessions")).is_empty());
}

/// `bh agent -i --session SOURCE`, `/worktree create NAME` with a post-create
/// command that sleeps; `presses` SIGINTs once it runs, then `after` on stdin.
fn interrupt_slow_create(
    env: &Env,
    source: &Path,
    name: &str,
    presses: usize,
    after: &[u8],
) -> std::process::Output {
    fs_err::write(
        env.repo.join(".better-harness/worktree.toml"),
        format!("post_create = [\"touch ../{name}.started; sleep 2\"]\n"),
    )
    .unwrap();
    let mut child = env
        .bh()
        .args(["agent", "-i", "--script", "../script.jsonl", "--session"])
        .arg(source)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("/worktree create {name}\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let marker = env.root.join(format!("repo.worktrees/{name}.started"));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "post-create never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..presses {
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    // The REPL may already have exited: a closed pipe is fine.
    let _ = stdin.write_all(after);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Every file under `dir` (none when it does not exist).
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

const BASH_SCRIPT: &str = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "printf a; while [ ! -e go ]; do sleep 0.01; done; printf b", "timeout": 60}}]}
{"text": "Printed ab."}
"#;

#[test]
fn json_mode_streams_bash_output_as_pi_does() {
    let env = env();
    fs_err::write(env.root.join("bash.jsonl"), BASH_SCRIPT).unwrap();
    let mut child = env
        .bh()
        .args(["--json", "agent", "--script", "../bash.jsonl", "-p", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command waits for a file this test creates only once it has read
    // the update carrying "a": the line must come while bash still runs.
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["type"] == "tool_execution_update" && v["partialResult"]["content"][0]["text"] == "a" {
            fs_err::write(env.repo.join("go"), "").unwrap();
        }
        lines.push(v);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let at = |t: &str| lines.iter().position(|l| l["type"] == t).unwrap();
    let (start, end) = (at("tool_execution_start"), at("tool_execution_end"));
    let updates: Vec<(usize, &Value)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l["type"] == "tool_execution_update")
        .collect();
    assert!(updates.iter().all(|(i, _)| start < *i && *i < end));
    // Pi's line: the call, its args, the partial result.
    assert_eq!(
        updates[0].1,
        &json!({"type": "tool_execution_update", "toolCallId": lines[start]["toolCallId"],
            "toolName": "bash", "args": lines[start]["args"], "partialResult": {"content": []}})
    );
    let texts: Vec<&Value> = updates[1..]
        .iter()
        .map(|(_, u)| &u["partialResult"]["content"][0]["text"])
        .collect();
    assert_eq!(texts.first(), Some(&&json!("a")), "{texts:?}");
    assert_eq!(texts.last(), Some(&&json!("ab")), "{texts:?}");
    assert_eq!(
        lines[end]["result"]["content"],
        json!([{"type": "text", "text": "ab"}])
    );
}

#[test]
fn interactive_mode_prints_bash_output_as_it_arrives() {
    let env = env();
    fs_err::write(env.root.join("bash.jsonl"), BASH_SCRIPT).unwrap();
    fs_err::write(env.repo.join("go"), "").unwrap();
    let out = env
        .bh()
        .args(["agent", "-i", "--script", "../bash.jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"print ab\n/quit\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The output once, on its own line after the call (and its checkpoint).
    let after = stderr.split("→ bash printf a").nth(1).unwrap();
    assert!(after.contains("\nab\n"), "{stderr}");
    // Once: whole lines, not substrings (ids and paths are random hex).
    assert_eq!(
        stderr.lines().filter(|l| l.trim() == "ab").count(),
        1,
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Printed ab."),
        "{stderr}"
    );
}

/// `--session ID`: a unique id prefix opens that session, this directory's
/// folder first, then every folder; an ambiguous or unknown prefix is refused
/// and creates nothing.
#[test]
fn session_by_id_prefix_as_pi_resolves_it() {
    let env = env();
    fs_err::write(
        env.root.join("chat.jsonl"),
        "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n",
    )
    .unwrap();
    let script = env.root.join("chat.jsonl");
    let script = script.to_str().unwrap();
    for _ in 0..2 {
        let (code, _, err) = env.agent_json(&["--script", script, "-p", "hi"]);
        assert_eq!(code, 0, "{err}");
    }
    let sessions = env.sessions();
    assert_eq!(sessions.len(), 2);
    let id_of = |p: &Path| {
        bh_session::Session::load(p)
            .unwrap()
            .header()
            .unwrap()
            .id
            .clone()
    };
    let (a, b) = (id_of(&sessions[0]), id_of(&sessions[1]));
    // The shortest prefix that tells them apart.
    let n = (1..a.len()).find(|&n| a[..n] != b[..n]).unwrap();
    let (code, lines, err) =
        env.agent_json(&["--session", &b[..n], "--script", script, "-p", "again"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines[0]["id"], b.as_str());
    assert_eq!(
        messages(&sessions[1])
            .iter()
            .filter(|m| m["role"] == "user")
            .count(),
        2
    );
    // UUIDv7 ids of one millisecond share a long prefix: "0" matches both.
    let before: Vec<Vec<u8>> = sessions.iter().map(|p| fs_err::read(p).unwrap()).collect();
    let code_of = |prefix: &str| {
        let out = env
            .bh()
            .args([
                "--json",
                "agent",
                "--session",
                prefix,
                "--script",
                script,
                "-p",
                "x",
            ])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            out.status.code(),
            doc["error"]["message"].as_str().unwrap().to_owned(),
        )
    };
    let (code, msg) = code_of(&a[..1]);
    assert_eq!(code, Some(10), "ambiguous: {msg}");
    assert!(msg.contains(sessions[0].to_str().unwrap()), "{msg}");
    assert_eq!(code_of("zzzz").0, Some(4), "unknown id");
    assert_eq!(env.sessions(), sessions, "nothing created");
    let after: Vec<Vec<u8>> = sessions.iter().map(|p| fs_err::read(p).unwrap()).collect();
    assert_eq!(after, before);

    // Another directory: found through every folder, then refused because it
    // belongs to the repository; with --cwd it opens.
    let other = env.root.join("elsewhere");
    fs_err::create_dir_all(&other).unwrap();
    let out = env
        .bh()
        .current_dir(&other)
        .args([
            "--json",
            "agent",
            "--session",
            &a,
            "--script",
            script,
            "-p",
            "y",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = env
        .bh()
        .current_dir(&other)
        .args(["--json", "agent", "--cwd"])
        .arg(&env.repo)
        .args(["--session", &a, "--script", script, "-p", "y"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `bh worktree enter` prepares a session in the worktree; `bh agent
/// --session <target>` run there consumes the handoff: the verification is
/// recorded exactly once, before the new turn, and never again.
#[test]
fn agent_on_an_entered_session_consumes_the_handoff_once() {
    let env = env();
    fs_err::write(
        env.root.join("chat.jsonl"),
        "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"text\": \"three\"}\n",
    )
    .unwrap();
    let script = env.root.join("chat.jsonl");
    let script = script.to_str().unwrap();
    let source = env.root.join("src.jsonl");
    let (code, _, err) = env.agent_json(&[
        "--session",
        source.to_str().unwrap(),
        "--script",
        script,
        "-p",
        "first",
    ]);
    assert_eq!(code, 0, "{err}");
    let out = env.bh().args(["worktree", "create", "h"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = env
        .bh()
        .args(["worktree", "enter", "h", "--session"])
        .arg(&source)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let target = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let handoff = bh_handoff::handoff_path(&target);
    assert!(handoff.exists());
    let wt = env.root.join("repo.worktrees/h");
    const VERIFIED: &str = "better-harness-transition-verification";

    for prompt in ["second", "third"] {
        let out = env
            .bh()
            .current_dir(&wt)
            .args(["--json", "agent", "--session"])
            .arg(&target)
            .args(["--script", script, "-p", prompt])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(custom_count(&target, VERIFIED), 1, "after {prompt}");
        assert!(!handoff.exists());
    }
    let lines = lines_of(&target);
    let verified = lines
        .iter()
        .position(|l| l["customType"] == VERIFIED)
        .unwrap();
    let second = lines
        .iter()
        .position(|l| {
            l["message"]["role"] == "user" && l["message"]["content"][0]["text"] == "second"
        })
        .unwrap();
    assert!(verified < second, "verified before the new turn");
    assert_eq!(lines[second]["parentId"], lines[verified]["id"]);
    assert_valid(&target);
}

/// The agent's bash is sandboxed by default: a prompt-injected command cannot
/// write the repository's `.git/config`, `~/.gitconfig` or outside the project
/// (the shell's own error comes back to the model), while a write in the
/// project lands; `--json` says which policy is in force; `--sandbox off`
/// is the explicit way out.
#[test]
fn bash_is_sandboxed_by_default_and_says_so() {
    let env = env();
    let home = env.root.join("home");
    fs_err::write(home.join(".gitconfig"), "[user]\n\tname = me\n").unwrap();
    let outside = env.root.join("outside.txt");
    let script = format!(
        r#"{{"toolCalls": [{{"name": "bash", "arguments": {{"command": "echo '[core]' >> .git/config; echo pwned >> {home}/.gitconfig; echo x > {outside}; echo ok > inside.txt; echo done"}}}}]}}
{{"text": "tried"}}
"#,
        home = home.display(),
        outside = outside.display()
    );
    fs_err::write(env.root.join("attack.jsonl"), script).unwrap();
    let config_before = fs_err::read(env.repo.join(".git/config")).unwrap();
    let (code, lines, err) = env.agent_json(&["--script", "../attack.jsonl", "-p", "go"]);
    assert_eq!(code, 0, "{err}");
    let sandbox = lines.iter().find(|l| l["type"] == "sandbox").unwrap();
    assert_eq!(sandbox["mode"], "workspace-write");
    assert_eq!(sandbox["network"], true);
    assert_eq!(
        fs_err::read(env.repo.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(
        fs_err::read_to_string(home.join(".gitconfig")).unwrap(),
        "[user]\n\tname = me\n"
    );
    assert!(!outside.exists());
    assert_eq!(
        fs_err::read_to_string(env.repo.join("inside.txt")).unwrap(),
        "ok\n"
    );
    let result = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap();
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Read-only file system") || text.contains("Permission denied"),
        "the shell's own error reaches the model: {text}"
    );

    // Off is explicit, said, and then the write lands.
    let (code, lines, err) = env.agent_json(&[
        "--sandbox",
        "off",
        "--script",
        "../attack.jsonl",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{err}");
    let sandbox = lines.iter().find(|l| l["type"] == "sandbox").unwrap();
    assert_eq!(sandbox["mode"], "off");
    assert!(outside.exists());
}

#[test]
fn worktree_dispose_by_name_moves_back_from_its_own_and_leaves_the_session_elsewhere() {
    let env = env();
    let (base, _seen) = serve(vec![]);
    let source = env.root.join("s.jsonl");
    let a = env.root.join("repo.worktrees/a");
    let b = env.root.join("repo.worktrees/b");
    let input = "/worktree create a\n/worktree create b\n/worktree dispose a\n\
                 /worktree dispose b\n/worktree dispose nope\n/quit\n";
    let mut cmd = repl_elsewhere(
        &env,
        &[
            "--model",
            "openai/gpt-test",
            "--base-url",
            &base,
            "--session",
        ],
    );
    cmd.arg(&source).env("OPENAI_API_KEY", "sk-test");
    let (code, stdout, stderr) = run_repl(cmd, input);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // `dispose a` from inside b: a goes, the session stays in b.
    assert!(
        stdout.contains(&format!("disposed worktree a ({})", a.display())),
        "{stdout}"
    );
    assert!(!a.exists());
    // `dispose b` from inside b: back to the main checkout first, then b goes.
    assert!(
        stdout.contains(&format!(
            "session moved back to the main checkout {}",
            env.repo.display()
        )),
        "{stdout}"
    );
    assert!(!b.exists());
    // An unknown name is an error of its own, not clap's usage text.
    assert!(stderr.contains("no worktree named \"nope\""), "{stderr}");
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    let last = final_session(&stderr);
    assert!(last.exists());
    assert_valid(&last);
}

#[test]
fn a_long_bash_output_is_folded_to_its_tail_in_the_repl() {
    let env = env();
    fs_err::write(
        env.root.join("long.jsonl"),
        "{\"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"seq 1 3000; printf '\\\\033]52;c;aGk=\\\\007done'\"}}]}\n{\"text\": \"ok\"}\n",
    )
    .unwrap();
    let mut cmd = env.bh();
    cmd.args(["agent", "-i", "--script", "../long.jsonl", "--session"])
        .arg(env.root.join("s.jsonl"));
    let (code, stdout, stderr) = run_repl(cmd, "go\n/quit\n");
    assert_eq!(code, 0, "{stdout}{stderr}");
    // At most 20 lines live (which ones depends on how fast the output
    // came: updates carry its tail), then a count and the last 5 lines.
    let numbers = stderr
        .lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .count();
    assert!(numbers <= 20 + 4, "{numbers} lines shown: {stderr}");
    // 3001 lines (the last unfinished): 20 live, 5 at the end.
    assert!(
        stderr.contains("… (2976 more lines; full output in "),
        "{stderr}"
    );
    assert!(stderr.contains("\n2999\n3000\n\\e]52"), "{stderr}");
    // What the command printed cannot drive the terminal (OSC 52 shown escaped).
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    assert!(stderr.contains("\\e]52;c;aGk=\\x07done"), "{stderr}");
}

#[test]
fn an_unknown_provider_says_where_providers_are_configured() {
    let env = env();
    let out = env
        .bh()
        .env("XDG_CONFIG_HOME", env.root.join("xdg"))
        .args(["agent", "--model", "nosuch/m", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown provider \"nosuch\""), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "bh reads {}",
            env.root.join("xdg/better-harness/config.toml").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("[providers.nosuch]"), "{stderr}");
}

#[test]
fn a_retry_says_how_long_it_waits() {
    let env = env();
    let (base, _seen) = serve(vec![
        bh_test_support::mock_openai::status(503, "overloaded"),
        text_turn("Hello."),
    ]);
    let out = env
        .bh()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["agent", "--model", "openai/gpt-test", "--base-url", &base])
        .args(["--max-retries", "1", "-p", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("bh: retrying in "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("(1/1)"), "{line}");
    let wait = line["bh: retrying in ".len()..].split(' ').next().unwrap();
    assert!(
        wait.ends_with("ms") || wait.ends_with('s'),
        "not a duration: {line}"
    );
}

/// A prompt-injected bash reads the plan key (to re-seal a plan with its own
/// prompt) and the user's ssh key: both are covered inside its sandbox.
#[test]
fn the_agents_bash_cannot_read_the_plan_key_or_credential_stores() {
    let env = env();
    // Outside /tmp: bash's private /tmp would hide a temp folder anyway.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let state = outside.path().join("state");
    let home = outside.path().join("home");
    let ssh = home.join(".ssh");
    fs_err::create_dir_all(&state).unwrap();
    fs_err::create_dir_all(&ssh).unwrap();
    fs_err::write(state.join("plan.key"), "PLAN-KEY-SECRET").unwrap();
    fs_err::write(ssh.join("id_ed25519"), "SSH-PRIVATE-KEY").unwrap();
    fs_err::write(home.join("visible.txt"), "NOT-A-SECRET").unwrap();
    let command = format!(
        "cat {}/plan.key; cat {}/id_ed25519; ls -A {}; cat {}/visible.txt; echo end",
        state.display(),
        ssh.display(),
        ssh.display(),
        home.display()
    );
    let script =
        serde_json::json!({"toolCalls": [{"name": "bash", "arguments": {"command": command}}]});
    fs_err::write(
        env.root.join("steal.jsonl"),
        format!("{script}\n{{\"text\": \"ok\"}}\n"),
    )
    .unwrap();
    let out = env
        .bh()
        .env("HOME", &home)
        .env("BH_STATE_DIR", &state)
        .args(["--json", "agent", "--script", "../steal.jsonl", "-p", "go"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("{stdout}"));
    let text = end["result"].to_string();
    assert!(
        text.contains("NOT-A-SECRET") && text.contains("end"),
        "{text}"
    );
    assert!(!text.contains("PLAN-KEY-SECRET"), "{text}");
    assert!(!text.contains("SSH-PRIVATE-KEY"), "{text}");
    // And the host's files are as they were.
    assert_eq!(
        fs_err::read_to_string(state.join("plan.key")).unwrap(),
        "PLAN-KEY-SECRET"
    );
}

/// Commits from the sandbox (issue 27 item 1): in the default
/// `workspace-write` sandbox the agent's `git add` + `git commit` land on the
/// branch it is on, while a hook it plants and another branch it moves do
/// not; the tool result says which is which.
#[test]
fn the_agent_commits_from_its_sandbox_but_cannot_plant_hooks_or_move_other_branches() {
    let env = env();
    env.w.git(&env.repo, &["branch", "release"]);
    let release = env.w.git(&env.repo, &["rev-parse", "release"]);
    let script = r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "echo new > new.txt && git add new.txt && git -c user.name=agent -c user.email=a@x commit -qm 'agent work' && echo '#!/bin/sh' > .git/hooks/post-commit && git branch -f release HEAD; echo done"}}]}
{"text": "committed"}
"#;
    fs_err::write(env.root.join("commit.jsonl"), script).unwrap();
    let (code, lines, err) = env.agent_json(&["--script", "../commit.jsonl", "-p", "go"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        env.w.git(&env.repo, &["log", "-1", "--format=%s"]),
        "agent work"
    );
    assert_eq!(env.w.git(&env.repo, &["status", "--porcelain"]), "");
    assert_eq!(env.w.git(&env.repo, &["rev-parse", "release"]), release);
    assert!(!env.repo.join(".git/hooks/post-commit").exists());
    let result = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap();
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("[git: refs/heads/"), "{text}");
    assert!(text.contains("[git: refused refs/heads/release"), "{text}");
}

/// The same as an unprivileged user (the overlay lives in the user's own
/// user namespace; CI runs as root, so bh runs as nobody there, on files
/// nobody owns, from a copy of the binary nobody can reach).
#[test]
fn an_unprivileged_agent_commits_from_its_sandbox_too() {
    if Command::new("id").arg("-u").output().unwrap().stdout != b"0\n" {
        // Not root: the test above already runs as an unprivileged user.
        return;
    }
    let env = env();
    let script = r#"{"toolCalls": [{"name": "bash", "arguments": {"command": "echo new > new.txt && git add new.txt && git -c user.name=agent -c user.email=a@x commit -qm 'agent work'; echo '[core]' >> .git/config"}}]}
{"text": "committed"}
"#;
    fs_err::write(env.root.join("commit.jsonl"), script).unwrap();
    let bin = env.root.join("bh");
    fs_err::copy(env.w.bin(), &bin).unwrap();
    fn chown_r(p: &Path) {
        std::os::unix::fs::lchown(p, Some(65534), Some(65534)).unwrap();
        if fs_err::symlink_metadata(p).unwrap().is_dir() {
            for e in fs_err::read_dir(p).unwrap() {
                chown_r(&e.unwrap().path());
            }
        }
    }
    chown_r(&env.root);
    let config = fs_err::read(env.repo.join(".git/config")).unwrap();
    let out = env
        .w
        .command("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["agent", "--script", "../commit.jsonl", "-p", "go"])
        .current_dir(&env.repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = env
        .w
        .git_command(&env.repo)
        .args(["-c", "safe.directory=*", "log", "-1", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "agent work\n",
        "{out:?}"
    );
    assert_eq!(fs_err::read(env.repo.join(".git/config")).unwrap(), config);
}

/// The user's servers listen on Unix sockets that neither read-only mounts
/// nor `--no-network` stop: the runtime folder's (`$XDG_RUNTIME_DIR`) and
/// the ssh agent's (`$SSH_AUTH_SOCK`) are covered inside the sandbox, so the
/// agent's bash cannot reach them (outside /tmp, which is private anyway).
#[test]
fn bash_cannot_reach_the_users_socket_servers() {
    let env = env();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let runtime = outside.path().join("run");
    fs_err::create_dir_all(&runtime).unwrap();
    let bus = runtime.join("bus");
    let agent_sock = outside.path().join("agent.sock");
    let listeners: Vec<_> = [&bus, &agent_sock]
        .iter()
        .map(|p| {
            let l = std::os::unix::net::UnixListener::bind(p).unwrap();
            l.set_nonblocking(true).unwrap();
            l
        })
        .collect();
    let probe = |p: &Path| {
        format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")' 2>/dev/null && echo reached-{n} || echo blocked-{n}",
            p.display(),
            n = p.file_name().unwrap().to_str().unwrap()
        )
    };
    let command = format!("{}; {}", probe(&bus), probe(&agent_sock));
    let script = format!(
        "{}\n{{\"text\": \"probed\"}}\n",
        serde_json::json!({"toolCalls": [{"name": "bash", "arguments": {"command": command}}]})
    );
    fs_err::write(env.root.join("probe.jsonl"), script).unwrap();
    // The probe works at all: unsandboxed, it reaches both.
    let direct = Command::new("bash")
        .args(["-c", &command])
        .output()
        .unwrap();
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    assert!(
        direct.contains("reached-bus") && direct.contains("reached-agent.sock"),
        "{direct}"
    );
    for l in &listeners {
        let _ = l.accept();
    }
    let out = env
        .bh()
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("SSH_AUTH_SOCK", &agent_sock)
        .args(["--json", "agent", "--script", "../probe.jsonl", "-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let end = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap();
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, "blocked-bus\nblocked-agent.sock\n");
    for l in &listeners {
        assert!(l.accept().is_err(), "a connection reached the server");
    }
}

/// A server's socket in no well-known place (an editor's, a dev server's in
/// the project itself) is covered too: every socket the host has bound when
/// bash starts is. `--allow-unix-socket PATH` lets bash reach one, shown on
/// the sandbox line; one inside the hidden runtime folder is carried
/// through its cover.
#[test]
fn bash_reaches_only_the_unix_sockets_it_is_allowed() {
    let env = env();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let runtime = outside.path().join("run");
    fs_err::create_dir_all(&runtime).unwrap();
    let editor = outside.path().join("editor.sock");
    let dev = env.root.join("dev.sock");
    let bus = runtime.join("bus");
    let socks = [&editor, &dev, &bus];
    let listeners: Vec<_> = socks
        .iter()
        .map(|p| {
            let l = std::os::unix::net::UnixListener::bind(p).unwrap();
            l.set_nonblocking(true).unwrap();
            l
        })
        .collect();
    let probe = |p: &Path| {
        format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")' 2>/dev/null && echo reached-{n} || echo blocked-{n}",
            p.display(),
            n = p.file_name().unwrap().to_str().unwrap()
        )
    };
    let command: Vec<String> = socks.iter().map(|p| probe(p)).collect();
    let command = command.join("; ");
    let script = format!(
        "{}\n{{\"text\": \"probed\"}}\n",
        serde_json::json!({"toolCalls": [{"name": "bash", "arguments": {"command": command}}]})
    );
    fs_err::write(env.root.join("probe.jsonl"), script).unwrap();
    let direct = Command::new("bash")
        .args(["-c", &command])
        .output()
        .unwrap();
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    assert_eq!(
        direct,
        "reached-editor.sock\nreached-dev.sock\nreached-bus\n"
    );
    for l in &listeners {
        let _ = l.accept();
    }
    let agent = |extra: &[&std::ffi::OsStr]| {
        let mut cmd = env.bh();
        cmd.env("XDG_RUNTIME_DIR", &runtime)
            .args(["--json", "agent", "--script", "../probe.jsonl", "-p", "go"])
            .args(extra);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        let end = lines
            .iter()
            .find(|l| l["type"] == "tool_execution_end")
            .unwrap();
        let sandbox = lines.iter().find(|l| l["type"] == "sandbox").unwrap();
        (
            end["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned(),
            sandbox.clone(),
        )
    };
    let (text, sandbox) = agent(&[]);
    assert_eq!(text, "blocked-editor.sock\nblocked-dev.sock\nblocked-bus\n");
    assert_eq!(sandbox["unix_sockets_allowed"], serde_json::json!([]));
    assert_eq!(sandbox["unix_sockets_denied"], false);
    assert_eq!(sandbox["unix_sockets"], "checked");
    for l in &listeners {
        assert!(l.accept().is_err(), "a connection reached a server");
    }
    let (text, sandbox) = agent(&[
        "--allow-unix-socket".as_ref(),
        editor.as_os_str(),
        "--allow-unix-socket".as_ref(),
        bus.as_os_str(),
    ]);
    assert_eq!(text, "reached-editor.sock\nblocked-dev.sock\nreached-bus\n");
    let allowed = &sandbox["unix_sockets_allowed"];
    assert_eq!(allowed.as_array().unwrap().len(), 2, "{allowed}");
    assert!(listeners[0].accept().is_ok() && listeners[2].accept().is_ok());
    assert!(listeners[1].accept().is_err(), "the dev server was reached");
    // --no-unix-sockets: bash can make no Unix socket at all.
    let (text, sandbox) = agent(&["--no-unix-sockets".as_ref()]);
    assert_eq!(text, "blocked-editor.sock\nblocked-dev.sock\nblocked-bus\n");
    assert_eq!(sandbox["unix_sockets_denied"], true);
    assert_eq!(sandbox["unix_sockets"], "denied");
    for l in &listeners {
        assert!(l.accept().is_err(), "a connection reached a server");
    }
    // Allowing what is no socket is refused, naming it.
    let out = env
        .bh()
        .args(["agent", "--script", "../probe.jsonl", "-p", "go"])
        .arg("--allow-unix-socket")
        .arg(env.root.join("probe.jsonl"))
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("is not a Unix socket"), "{all}");
    assert_eq!(out.status.code(), Some(2), "{all}");
}

/// A sandbox that cannot be built is not the model's to fix: under
/// `--allow-write ~` with no `~/.gitconfig` (the command could plant one)
/// the first bash call fails the run (exit 3, the reason named), nothing
/// runs, and the model is not asked again.
#[test]
fn a_sandbox_that_cannot_be_built_fails_the_run() {
    let env = env();
    let home = env.root.join("home");
    let script = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}]}
{"text": "never"}
"#;
    fs_err::write(env.root.join("harness.jsonl"), script).unwrap();
    let (code, lines, stderr) = env.agent_json(&[
        "--script",
        "../harness.jsonl",
        "--allow-write",
        home.to_str().unwrap(),
        "-p",
        "go",
    ]);
    assert_eq!(code, 3, "{stderr}{lines:#?}");
    let end = lines.iter().find(|l| l["type"] == "run_end").unwrap();
    assert_eq!(end["stop"], "harness", "{end}");
    let reason = end["reason"].as_str().unwrap();
    assert!(
        reason.contains("could not run bash") && reason.contains("cannot keep"),
        "{reason}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l["type"] != "message_end" || l["message"]["content"][0]["text"] != "never"),
        "the model was asked again"
    );
    assert!(!env.repo.join("ran.txt").exists());
}

/// `--deny-read PATH` adds to the hidden list: a folder outside the project
/// that bash could read before is empty inside, a file reads as empty.
#[test]
fn deny_read_hides_more_from_bash() {
    let env = env();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = outside.path().join("vault");
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(dir.join("token"), "TOP-SECRET\n").unwrap();
    let file = outside.path().join("key.pem");
    fs_err::write(&file, "PRIVATE-KEY\n").unwrap();
    let command = format!(
        "cat {d}/token; ls {d}; cat {f}; echo end",
        d = dir.display(),
        f = file.display()
    );
    let script = format!(
        "{}\n{{\"text\": \"read\"}}\n",
        serde_json::json!({"toolCalls": [{"name": "bash", "arguments": {"command": command}}]})
    );
    fs_err::write(env.root.join("read.jsonl"), script).unwrap();
    let result = |extra: &[&str]| {
        let mut args = vec!["--script", "../read.jsonl"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-p", "go"]);
        let (code, lines, err) = env.agent_json(&args);
        assert_eq!(code, 0, "{err}");
        let end = lines
            .iter()
            .find(|l| l["type"] == "tool_execution_end")
            .unwrap()
            .clone();
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let open = result(&[]);
    assert!(
        open.contains("TOP-SECRET") && open.contains("PRIVATE-KEY"),
        "{open}"
    );
    let (d, f) = (dir.display().to_string(), file.display().to_string());
    let hidden = result(&["--deny-read", &d, "--deny-read", &f]);
    assert!(
        !hidden.contains("TOP-SECRET") && !hidden.contains("PRIVATE-KEY"),
        "{hidden}"
    );
    assert!(hidden.contains("end"), "{hidden}");
}
