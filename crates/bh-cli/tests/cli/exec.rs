//! `bh exec plan/verify` and `harness-session-executor` through the CLI.
//!
//! Over 600 lines: one test binary per command family (each binary is a separate link); tests are independent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::Path;
use std::process::Command;

use bh_test_support::cli::World;

use serde_json::Value;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

#[test]
fn plan_then_verify_and_tamper() {
    let w = crate::world();
    let root = w.root.clone();
    let w = w.with_home(&root).with_agent(root.join("pi"));
    let repo = root.join("repo");
    fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| w.git(&repo, args);
    git(&["init", "-q", "-b", "main"]);
    fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    let session = root.join("s.jsonl");
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
        &session,
    )
    .unwrap();
    let refs_before = git(&["for-each-ref"]);
    // `scripted/demo`: a script file named `demo` next to the plan.
    fs::write(root.join("demo"), "{\"text\": \"Done.\"}\n").unwrap();
    let plan = root.join("plan.json");
    let out = w
        .bh(&root)
        .args([
            "--json",
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
        ])
        .args([
            "--entry",
            "188efa0e",
            "--prompt",
            "go on",
            "--model",
            "scripted/demo",
            "--out",
            "plan.json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["plan"]["base"]["commit"],
        git(&["rev-parse", "main"]).as_str()
    );
    assert_eq!(git(&["for-each-ref"]), refs_before);
    // refuses to overwrite
    let again = w
        .bh(&root)
        .args([
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
        ])
        .args([
            "--entry",
            "188efa0e",
            "--prompt",
            "go on",
            "--model",
            "scripted/demo",
            "--out",
            "plan.json",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    // the executor's own name runs the same program
    let verify = |name: &str| {
        w.command(assert_cmd::cargo::cargo_bin(name))
            .args(if name == "bh" { vec!["exec"] } else { vec![] })
            .args(["--json", "verify", "--plan"])
            .arg(&plan)
            .output()
            .unwrap()
    };
    assert!(verify("harness-session-executor").status.success());
    assert!(verify("bh").status.success());
    let text = fs::read_to_string(&plan).unwrap();
    fs::write(&plan, text.replace("go on", "go wild")).unwrap();
    let out = verify("harness-session-executor");
    assert_eq!(out.status.code(), Some(20));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("digest mismatch")
    );
}

/// HEAD, branches, the index file's bytes, and every top-level file's bytes.
type UserState = (String, String, Vec<u8>, Vec<(String, Vec<u8>)>);

/// A repository with one commit, a real Pi session beside it, and `bh`.
struct Exec {
    w: World,
    root: std::path::PathBuf,
    repo: std::path::PathBuf,
}

impl Exec {
    fn new() -> Exec {
        let w = crate::world();
        let root = w.root.clone();
        let repo = root.join("repo");
        fs::create_dir_all(&repo).unwrap();
        let e = Exec {
            w: w.with_home(&root).with_agent(root.join("pi")),
            root,
            repo,
        };
        e.git(&["init", "-q", "-b", "main"]);
        fs::write(e.repo.join("a.txt"), "a\n").unwrap();
        fs::write(e.repo.join(".gitignore"), "*.log\n").unwrap();
        e.git(&["add", "-A"]);
        e.git(&["commit", "-q", "-m", "base"]);
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
            e.root.join("s.jsonl"),
        )
        .unwrap();
        e
    }

    fn git(&self, args: &[&str]) -> String {
        self.w.git(&self.repo, args)
    }

    /// `bh` in the temp folder with its own HOME, state dir and Pi agent dir.
    fn bh_cmd(&self) -> Command {
        self.w.bh(&self.root)
    }

    fn bh(&self, args: &[&str]) -> std::process::Output {
        self.bh_cmd().args(args).output().unwrap()
    }

    /// `bh exec plan` of the fixture (repo at `main`, session entry
    /// `188efa0e`) with `prompt` and `model`, plus `extra`; must succeed.
    fn plan(&self, prompt: &str, model: &str, extra: &[&str]) {
        let mut args = vec![
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
            "--entry",
            "188efa0e",
            "--prompt",
            prompt,
            "--model",
            model,
        ];
        args.extend(extra);
        let out = self.bh(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Plans with a scripted model, then runs; returns (exit code, JSON).
    fn plan_and_run(&self, script: &str, extra: &[&str]) -> (i32, Value) {
        fs::write(self.root.join("turns.jsonl"), script).unwrap();
        let _ = fs::remove_file(self.root.join("plan.json"));
        let model = format!("scripted/{}", self.root.join("turns.jsonl").display());
        self.plan("Add a greeting file", &model, extra);
        let out = self.bh(&["--json", "exec", "run", "--plan", "plan.json", "--yes"]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), doc)
    }

    /// HEAD, branches, the index file and the working tree, byte for byte.
    fn user_state(&self) -> UserState {
        let mut files = Vec::new();
        for e in fs::read_dir(&self.repo).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                files.push((p.display().to_string(), fs::read(&p).unwrap()));
            }
        }
        files.sort();
        (
            self.git(&["rev-parse", "HEAD"]),
            self.git(&["for-each-ref", "refs/heads"]),
            fs::read(self.repo.join(".git/index")).unwrap(),
            files,
        )
    }
}

#[test]
fn run_commits_the_continuation_with_one_parent_and_trailers() {
    let e = Exec::new();
    let before = e.user_state();
    let (code, doc) = e.plan_and_run(
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\\n\"}}]}\n{\"text\": \"Done.\"}\n",
        &[],
    );
    assert_eq!(code, 0, "{doc}");
    let r = &doc["result"];
    assert_eq!(r["state"], "committed");
    let commit = r["commit"].as_str().unwrap();
    let output_ref = r["ref"].as_str().unwrap();
    assert_eq!(e.git(&["rev-parse", output_ref]), commit);
    assert_eq!(
        e.git(&["rev-list", "--parents", "-n", "1", commit])
            .split(' ')
            .count(),
        2,
        "one parent"
    );
    assert_eq!(
        e.git(&["rev-parse", &format!("{commit}^")]),
        e.git(&["rev-parse", "main"])
    );
    assert_eq!(e.git(&["show", &format!("{commit}:hello.txt")]), "hello");
    let trailers = e.git(&["log", "-1", "--format=%(trailers:only,unfold)", commit]);
    let keys: Vec<&str> = trailers
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        vec![
            "Better-Harness-Plan",
            "Better-Harness-Base",
            "Better-Harness-Session",
            "Better-Harness-Session-SHA256",
            "Better-Harness-Entry",
            "Better-Harness-Execution",
            "Better-Harness-Model"
        ]
    );
    assert!(trailers.contains("Better-Harness-Entry: 188efa0e"));
    assert_eq!(
        e.user_state(),
        before,
        "the user's HEAD, branches, index and files are untouched"
    );
    assert_eq!(
        e.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    // the forked session: new id, parentSession = source, cwd = the worktree
    let forked = fs::read_to_string(r["forked_session"].as_str().unwrap()).unwrap();
    let header: Value = serde_json::from_str(forked.lines().next().unwrap()).unwrap();
    assert_ne!(header["id"], "01a22bee-1340-7689-b93e-a75d86f1286e");
    assert_eq!(
        header["parentSession"],
        e.root.join("s.jsonl").display().to_string()
    );
    // The worktree is named for its execution (wt-<id> in the execution's folder).
    let cwd = std::path::Path::new(header["cwd"].as_str().unwrap());
    let name = cwd.file_name().unwrap().to_str().unwrap();
    let id = cwd.parent().unwrap().file_name().unwrap().to_str().unwrap();
    assert_eq!(name, format!("wt-{id}"), "{}", cwd.display());
    // the same plan never runs twice
    let out = e.bh(&["exec", "run", "--plan", "plan.json", "--yes"]);
    assert_eq!(out.status.code(), Some(25));
}

#[test]
fn no_changes_and_limits_commit_nothing() {
    let e = Exec::new();
    let before = e.user_state();
    let (code, doc) = e.plan_and_run("{\"text\": \"Nothing to do.\"}\n", &[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["result"]["state"], "no-changes");
    assert!(doc["result"]["ref"].is_null());
    let (code, doc) = e.plan_and_run(
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"one.txt\", \"content\": \"1\\n\"}}]}\n{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"two.txt\", \"content\": \"2\\n\"}}]}\n{\"text\": \"Done.\"}\n",
        &["--max-tool-calls", "1"],
    );
    let r = &doc["result"];
    assert_eq!(code, 7, "{doc}");
    assert_eq!(r["state"], "aborted");
    assert!(r["commit"].is_null());
    let patch = fs::read_to_string(r["patch"].as_str().unwrap()).unwrap();
    assert!(
        patch.contains("one.txt") && !patch.contains("two.txt"),
        "{patch}"
    );
    assert_eq!(e.user_state(), before);
    assert_eq!(e.git(&["for-each-ref", "refs/better-harness"]), "");
    // without --yes nothing runs: a dry run (exit 0) saying what would happen
    let out = e.bh(&["exec", "run", "--plan", "plan.json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--yes"));
    assert_eq!(e.git(&["for-each-ref", "refs/better-harness"]), "");
}

#[test]
fn the_65th_tool_call_and_a_slow_stream_abort() {
    let e = Exec::new();
    let before = e.user_state();
    let read = "{\"toolCalls\": [{\"name\": \"read\", \"arguments\": {\"path\": \"a.txt\"}}]}\n";
    let script = read.repeat(65) + "{\"text\": \"done\"}\n";
    let (code, doc) = e.plan_and_run(&script, &[]);
    assert_eq!(code, 7, "{doc}");
    assert_eq!(doc["result"]["tool_calls"], 64);
    assert!(
        doc["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("Tool call limit"),
        "{doc}"
    );
    let slow = "{\"text\": \"thinking slowly about it\", \"delayMs\": 400, \"chunkChars\": 2}\n";
    let (code, doc) = e.plan_and_run(slow, &["--timeout", "1s"]);
    assert_eq!(code, 7, "{doc}");
    assert!(
        doc["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("Time limit"),
        "{doc}"
    );
    assert_eq!(e.user_state(), before);
}

#[test]
fn a_killed_run_leaves_the_user_untouched_and_gc_cleans_up() {
    killed_run(true);
}

/// Without a checkout a killed run leaves no worktree at all.
#[test]
fn a_killed_run_without_a_checkout_leaves_no_worktree() {
    killed_run(false);
}

fn killed_run(checkout: bool) {
    let e = Exec::new();
    let before = e.user_state();
    fs::write(
        e.root.join("turns.jsonl"),
        "{\"text\": \"a very slow answer that never ends in time\", \"delayMs\": 2000, \"chunkChars\": 1}\n",
    )
    .unwrap();
    let model = format!("scripted/{}", e.root.join("turns.jsonl").display());
    e.plan("go", &model, &[]);
    let mut child = e
        .bh_cmd()
        .args(["exec", "run", "--plan", "plan.json", "--yes"])
        .args(checkout.then_some("--checkout"))
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let executions = e.root.join("state/executions");
    while started.elapsed() < std::time::Duration::from_secs(30) {
        let running = fs::read_dir(&executions)
            .map(|rd| {
                rd.flatten()
                    .any(|d| d.path().join("session.jsonl").exists())
            })
            .unwrap_or(false);
        if running {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        e.user_state(),
        before,
        "a crash leaves HEAD, branches, index and files as they were"
    );
    assert_eq!(
        e.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        if checkout { 2 } else { 1 }
    );
    let out = e.bh(&["--json", "exec", "gc", "--repo", "repo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["removed"].as_array().unwrap().len(),
        usize::from(checkout)
    );
    assert_eq!(
        e.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    assert_eq!(e.user_state(), before);
}

#[test]
fn sigterm_and_sighup_cancel_a_run_as_ctrl_c_does() {
    for signal in ["TERM", "HUP", "INT"] {
        let e = Exec::new();
        let before = e.user_state();
        fs::write(
            e.root.join("turns.jsonl"),
            "{\"text\": \"a very slow answer that never ends in time\", \"delayMs\": 2000, \"chunkChars\": 1}\n",
        )
        .unwrap();
        let model = format!("scripted/{}", e.root.join("turns.jsonl").display());
        e.plan("go", &model, &[]);
        let child = e
            .bh_cmd()
            .args(["--json", "exec", "run", "--plan", "plan.json", "--yes"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let executions = e.root.join("state/executions");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let running = fs::read_dir(&executions)
                .map(|rd| {
                    rd.flatten()
                        .any(|d| d.path().join("session.jsonl").exists())
                })
                .unwrap_or(false);
            if running {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the run never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The handlers are installed before the run forks its session.
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        // bh ended the run itself (an exit code, not death by the signal).
        assert!(out.status.code().is_some(), "SIG{signal}: {:?}", out.status);
        assert_ne!(out.status.code(), Some(0), "SIG{signal}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["result"]["state"], "aborted", "SIG{signal}: {doc}");
        assert_eq!(
            doc["result"]["stop_reason"], "cancelled",
            "SIG{signal}: {doc}"
        );
        assert!(doc["result"]["ref"].is_null(), "SIG{signal}: {doc}");
        // Cleaned up as after Ctrl-C: the user's state as it was, no worktree left.
        assert_eq!(e.user_state(), before, "SIG{signal}");
        assert_eq!(
            e.git(&["worktree", "list", "--porcelain"])
                .matches("worktree ")
                .count(),
            1,
            "SIG{signal}"
        );
    }
}

#[test]
fn run_against_a_mock_openai_compatible_server() {
    use bh_test_support::mock_openai::{chunk, serve, usage};
    use serde_json::json;
    let e = Exec::new();
    let before = e.user_state();
    let t1 = [
        chunk(json!({"role": "assistant", "content": "Writing."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "write", "arguments": "{\"path\": \"m.txt\", \"content\": \"mock\\n\"}"}}]}),
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
    e.plan("write m.txt", "openai/gpt-test", &[]);
    let plan = fs::read_to_string(e.root.join("plan.json")).unwrap();
    assert!(
        !plan.contains("127.0.0.1") && !plan.contains("sk-test"),
        "no endpoint or key in a plan"
    );
    let out = e
        .bh_cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "--json",
            "exec",
            "run",
            "--plan",
            "plan.json",
            "--yes",
            "--base-url",
            &base,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let commit = doc["result"]["commit"].as_str().unwrap();
    assert_eq!(e.git(&["show", &format!("{commit}:m.txt")]), "mock");
    assert!(
        e.git(&["log", "-1", "--format=%B", commit])
            .contains("Better-Harness-Model: openai/gpt-test")
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "Bearer sk-test");
    // the tool result is paired with its call in the second request
    let messages = seen[1].1["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_a")
    );
    let tools: Vec<&str> = seen[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec!["read", "ls", "edit", "write"],
        "exactly the executor's tools"
    );
    assert_eq!(e.user_state(), before);
}

#[test]
fn providers_come_from_the_toml_config() {
    use bh_test_support::mock_openai::{chunk, serve, usage};
    use serde_json::json;
    let e = Exec::new();
    let t1 = [
        chunk(
            json!({"role": "assistant", "content": "Nothing to do."}),
            None,
        ),
        chunk(json!({}), Some("stop")),
        usage(5, 2),
    ]
    .concat();
    let (base, seen) = serve(vec![t1]);
    let config = e.root.join("config.toml");
    fs::write(
        &config,
        format!("[providers.local]\napi = \"openai-completions\"\nbase_url = \"{base}\"\napi_key = \"local-secret\"\n[[providers.local.models]]\nid = \"tiny\"\n"),
    )
    .unwrap();
    // The provider is known from the config at plan time too.
    let out = e
        .bh_cmd()
        .env("BH_CONFIG", &config)
        .args([
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
        ])
        .args([
            "--entry",
            "188efa0e",
            "--prompt",
            "look",
            "--model",
            "local/tiny",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = e
        .bh_cmd()
        .env("BH_CONFIG", &config)
        .args(["--json", "exec", "run", "--plan", "plan.json", "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["result"]["state"], "no-changes");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0, "Bearer local-secret");
    assert_eq!(seen[0].1["model"], "tiny");
}

#[test]
fn a_provider_failure_commits_nothing_and_keeps_the_partial_change() {
    let e = Exec::new();
    let before = e.user_state();
    let (code, doc) = e.plan_and_run(
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"half.txt\", \"content\": \"half\\n\"}}]}\n{\"stopReason\": \"error\", \"errorMessage\": \"500 upstream exploded\"}\n",
        &[],
    );
    assert_eq!(code, 9, "{doc}");
    let r = &doc["result"];
    assert_eq!(r["state"], "failed");
    assert!(r["commit"].is_null() && r["ref"].is_null());
    assert!(r["reason"].as_str().unwrap().contains("upstream exploded"));
    assert!(
        fs::read_to_string(r["patch"].as_str().unwrap())
            .unwrap()
            .contains("half.txt")
    );
    let result_json: Value = serde_json::from_slice(
        &fs::read(Path::new(r["execution_dir"].as_str().unwrap()).join("result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result_json["state"], "failed");
    assert_eq!(e.user_state(), before);
}

#[test]
fn a_failed_tool_call_is_counted_and_the_summary_says_what_next() {
    let e = Exec::new();
    fs::write(
        e.root.join("turns.jsonl"),
        "{\"toolCalls\": [{\"name\": \"edit\", \"arguments\": {\"path\": \"missing.txt\", \"edits\": [{\"oldText\": \"a\", \"newText\": \"b\"}]}}]}\n\
         {\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\\n\"}}]}\n\
         {\"text\": \"Done.\"}\n",
    )
    .unwrap();
    let model = format!("scripted/{}", e.root.join("turns.jsonl").display());
    e.plan("Add a greeting file", &model, &[]);
    let out = e.bh(&["exec", "run", "--plan", "plan.json", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tools:   2 call(s), 1 failed;"), "{stdout}");
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("execution ")?.split(':').next())
        .unwrap()
        .to_owned();
    assert!(
        stdout.contains(&format!("next: bh exec show {id} --html -o run.html")),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("git merge --ff-only refs/better-harness/executions/"))
        .unwrap_or_else(|| panic!("{stdout}"));
    // The printed merge names the real ref.
    let r = line.split_whitespace().nth(3).unwrap();
    assert!(!e.git(&["rev-parse", "--verify", r]).is_empty(), "{line}");
    let result: Value = serde_json::from_slice(
        &fs::read(
            e.root
                .join("state/executions")
                .join(&id)
                .join("result.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(result["failed_tool_calls"], 1);
}

/// The executor offers no `bash` (read, ls, edit, write only), so nothing
/// it runs can read bh's provider keys: a model asking for bash gets "Tool
/// bash not found" and no command runs. (Should bash join the executor's
/// tools, the CLI already hands it the environment `bh agent`'s bash gets:
/// no provider keys.)
#[test]
fn the_executor_runs_no_command_that_could_read_the_provider_keys() {
    let e = Exec::new();
    fs::write(
        e.root.join("turns.jsonl"),
        "{\"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"echo A=$ANTHROPIC_API_KEY > keys.txt\"}}]}\n\
         {\"text\": \"Done.\"}\n",
    )
    .unwrap();
    let model = format!("scripted/{}", e.root.join("turns.jsonl").display());
    e.plan("Write the keys", &model, &[]);
    let out = e
        .bh_cmd()
        .env("ANTHROPIC_API_KEY", "sk-ant-secret")
        .args(["--json", "exec", "run", "--plan", "plan.json", "--yes"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(doc["result"]["state"], "no-changes", "{doc}");
    let session = fs::read_to_string(doc["result"]["forked_session"].as_str().unwrap()).unwrap();
    assert!(session.contains("Tool bash not found"), "{session}");
    assert!(!session.contains("sk-ant-secret"));
    assert!(!e.repo.join("keys.txt").exists());
}

/// The output ref taken while the run is in flight (here: by hand, while
/// the model answers): exit 25 as for a ref that existed before, the ref
/// left where the other writer put it, and no worktree kept.
#[test]
fn an_output_ref_taken_in_flight_exits_25() {
    use bh_test_support::mock_openai::{chunk, serve_by, usage};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let e = Exec::new();
    e.plan("write m.txt", "openai/gpt-test", &[]);
    let plan: Value =
        serde_json::from_str(&fs::read_to_string(e.root.join("plan.json")).unwrap()).unwrap();
    let output_ref = plan["output_ref"].as_str().unwrap().to_owned();
    let base = e.git(&["rev-parse", "main"]);
    let repo = e.repo.clone();
    let home = e.root.clone();
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let (taker_ref, taker_base) = (output_ref.clone(), base.clone());
    let url = serve_by(move |_| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            // Someone else takes the ref while the agent works.
            let ok = bh_test_support::git_command()
                .args(["update-ref", &taker_ref, &taker_base])
                .current_dir(&repo)
                .env("HOME", &home)
                .status()
                .unwrap()
                .success();
            assert!(ok);
            [
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                        "function": {"name": "write", "arguments": "{\"path\": \"m.txt\", \"content\": \"mock\\n\"}"}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
                usage(5, 5),
            ]
            .concat()
        } else {
            [
                chunk(json!({"role": "assistant", "content": "Done."}), None),
                chunk(json!({}), Some("stop")),
                usage(5, 5),
            ]
            .concat()
        }
    });
    for checkout in [false, true] {
        let _ = e.git(&["update-ref", "-d", &output_ref]);
        calls.store(0, Ordering::SeqCst);
        let mut args = vec![
            "--json",
            "exec",
            "run",
            "--plan",
            "plan.json",
            "--yes",
            "--base-url",
            &url,
        ];
        if checkout {
            args.push("--checkout");
        }
        let out = e
            .bh_cmd()
            .env("OPENAI_API_KEY", "sk-test")
            .args(&args)
            .output()
            .unwrap();
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|err| panic!("{err}: {out:?}"));
        assert_eq!(out.status.code(), Some(25), "checkout={checkout}: {doc:#}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains("already exists"), "{message}");
        assert!(message.contains(&output_ref), "{message}");
        assert_eq!(
            e.git(&["rev-parse", &output_ref]),
            base,
            "the other writer's ref stands"
        );
        let worktrees = e.git(&["worktree", "list", "--porcelain"]);
        assert_eq!(
            worktrees.matches("worktree ").count(),
            1,
            "no execution worktree kept: {worktrees}"
        );
    }
}
