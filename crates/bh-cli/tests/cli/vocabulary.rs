//! One vocabulary across commands, through the built `bh`: the global `-C DIR`
//! (git's chdir, several compose) beside `--project`/`--repo`, relative paths
//! given with `--project` from outside the project, ids by unique prefix
//! everywhere (sessions by path or id, entries by prefix; ambiguous → 10,
//! unknown → 4), help text, and bad input refused with the right exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Env {
    w: bh_test_support::cli::World,
    root: PathBuf,
    project: PathBuf,
    agent_dir: PathBuf,
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const HEADER_TIME: &str = "2026-01-01T00:00:00.000Z";

impl Env {
    /// `root/p`: a repository with `sub/file` committed; `root/out`: a
    /// directory outside it.
    fn new() -> Env {
        let w = crate::world();
        let root = w.root.clone();
        let project = root.join("p");
        fs::create_dir_all(project.join("sub")).unwrap();
        fs::create_dir_all(root.join("out")).unwrap();
        w.git(&project, &["init", "-q", "-b", "main"]);
        fs::write(project.join("sub/file"), "one\n").unwrap();
        fs::write(project.join("top"), "top\n").unwrap();
        w.git(&project, &["add", "."]);
        w.git(&project, &["commit", "-q", "-m", "init"]);
        Env {
            agent_dir: w.agent.clone(),
            project,
            root,
            w,
        }
    }

    fn bh_in(&self, dir: &Path) -> Command {
        self.w.bh(dir)
    }

    fn run_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.bh_in(dir).args(args).output().unwrap()
    }

    fn ok_json(&self, dir: &Path, args: &[&str]) -> Value {
        let out = self.bh_in(dir).arg("--json").args(args).output().unwrap();
        assert!(out.status.success(), "bh {args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn snapshot(&self) -> String {
        let doc = self.ok_json(&self.project, &["checkpoint", "snapshot"]);
        doc["snapshot"]["checkpoint"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.project.join(rel)).unwrap()
    }

    /// A Pi session of `cwd` in the agent dir's session folder, with the
    /// given entry ids as a chain of user/assistant messages.
    fn session(&self, id: &str, cwd: &Path, entries: &[&str]) -> PathBuf {
        let dir = bh_session::session_dir_for_cwd(&self.agent_dir, cwd.to_str().unwrap());
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl"));
        let mut lines = vec![format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"{HEADER_TIME}","cwd":"{}"}}"#,
            cwd.display()
        )];
        let mut parent = "null".to_owned();
        for (i, e) in entries.iter().enumerate() {
            let message = if i % 2 == 0 {
                format!(r#"{{"role":"user","content":"turn {i}","timestamp":1}}"#)
            } else {
                format!(
                    r#"{{"role":"assistant","content":[{{"type":"text","text":"reply {i}"}}],"model":"m","provider":"p","api":"openai-completions","stopReason":"stop","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"timestamp":1}}"#
                )
            };
            lines.push(format!(
                r#"{{"type":"message","id":"{e}","parentId":{parent},"timestamp":"{HEADER_TIME}","message":{message}}}"#
            ));
            parent = format!("\"{e}\"");
        }
        fs::write(&file, lines.join("\n") + "\n").unwrap();
        file
    }
}

// ----- 1. -C DIR and --project/--repo ----------------------------------------

#[test]
fn dash_c_runs_as_if_started_there_and_several_compose() {
    let env = Env::new();
    let id = env.snapshot();
    // From outside: `-C p` finds the project as if run inside it.
    let doc = env.ok_json(&env.root, &["-C", "p", "checkpoint", "list"]);
    assert_eq!(doc["project"], env.project.to_str().unwrap());
    assert_eq!(doc["checkpoints"][0]["id"], id.as_str());
    // After the subcommand too (a global option), and `-C a -C b` is a/b.
    let doc = env.ok_json(&env.root, &["checkpoint", "list", "-C", "p", "-C", "sub"]);
    assert_eq!(doc["project"], env.project.to_str().unwrap());
    // Before and after the subcommand: all of them, in order (clap alone
    // keeps only the ones after it).
    let doc = env.ok_json(&env.root, &["-C", "p", "checkpoint", "list", "-C", "sub"]);
    assert_eq!(doc["project"], env.project.to_str().unwrap());
    let doc = env.ok_json(&env.root, &["-Cp", "checkpoint", "list", "-C", "sub"]);
    assert_eq!(doc["project"], env.project.to_str().unwrap());
    // An absolute DIR replaces what came before (as git).
    let doc = env.ok_json(
        &env.root,
        &[
            "-C",
            "out",
            "-C",
            env.project.to_str().unwrap(),
            "checkpoint",
            "list",
        ],
    );
    assert_eq!(doc["project"], env.project.to_str().unwrap());

    // Paths after -C resolve against DIR, as git's pathspecs do.
    fs::write(env.project.join("sub/file"), "damaged\n").unwrap();
    let out = env.run_in(
        &env.root,
        &["-C", "p", "-C", "sub", "checkpoint", "restore", &id, "file"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.read("sub/file"), "one\n");
}

#[test]
fn dash_c_to_a_missing_or_non_directory_names_it() {
    let env = Env::new();
    let out = env.run_in(&env.root, &["-C", "nowhere", "checkpoint", "list"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(stderr(&out).contains("nowhere"), "{}", text(&out));
    let out = env.run_in(&env.root, &["-C", "p/top", "checkpoint", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("p/top"), "{}", text(&out));
    let out = env
        .bh_in(&env.root)
        .args(["--json", "-C", "nowhere", "checkpoint", "list"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "not_found");
}

/// `--project DIR` given from outside the project: relative paths resolve
/// against the project's top (git's rule for a work tree the cwd is not
/// in); from inside the project they resolve against the cwd.
#[test]
fn project_paths_from_outside_resolve_against_the_project() {
    let env = Env::new();
    let id = env.snapshot();
    fs::write(env.project.join("sub/file"), "damaged\n").unwrap();
    let out = env.run_in(
        &env.root.join("out"),
        &[
            "checkpoint",
            "restore",
            "--project",
            "../p",
            &id,
            "--",
            "sub/file",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.read("sub/file"), "one\n");

    // `--repo` is the same option.
    fs::write(env.project.join("sub/file"), "damaged again\n").unwrap();
    let out = env.run_in(
        &env.root.join("out"),
        &[
            "checkpoint",
            "diff",
            "--repo",
            "../p",
            &id,
            "--stat",
            "sub/file",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sub/file"));

    // From inside the project (p/sub), a relative path is relative to the cwd.
    let out = env.run_in(
        &env.project.join("sub"),
        &["checkpoint", "restore", "--project", "..", &id, "file"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.read("sub/file"), "one\n");

    // A path leaving the project is still refused, naming it.
    let out = env.run_in(
        &env.root.join("out"),
        &[
            "checkpoint",
            "restore",
            "--project",
            "../p",
            &id,
            "--",
            "../out",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(stderr(&out).contains("../out"), "{}", text(&out));
}

#[test]
fn repo_commands_take_project_and_dash_c() {
    let env = Env::new();
    let doc = env.ok_json(&env.root, &["worktree", "list", "--project", "p"]);
    assert!(
        doc.to_string().contains(env.project.to_str().unwrap()),
        "{doc}"
    );
    let doc = env.ok_json(&env.root, &["-C", "p", "worktree", "list"]);
    assert!(
        doc.to_string().contains(env.project.to_str().unwrap()),
        "{doc}"
    );
}

// ----- 2. ids the same way everywhere ----------------------------------------

#[test]
fn sessions_by_path_or_id_and_entries_by_prefix() {
    let env = Env::new();
    let sid = "01a22fdd-1111-7000-8000-000000000001";
    let file = env.session(sid, &env.project, &["abcd1234", "abcd5678", "ef012345"]);

    // By id prefix (no file of that name): the same session as by path.
    let by_path = env.ok_json(&env.project, &["session", "show", file.to_str().unwrap()]);
    let by_id = env.ok_json(&env.project, &["session", "show", "01a22fdd"]);
    assert_eq!(by_path["header"], by_id["header"]);
    assert!(!env.project.join("01a22fdd").exists());

    // Unknown session id: not found (4), naming it.
    let out = env.run_in(&env.project, &["session", "show", "deadbeef"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(stderr(&out).contains("deadbeef"));

    // Entries by unique prefix; an ambiguous one lists the candidates (10).
    let doc = env.ok_json(
        &env.project,
        &["session", "context", "01a22fdd", "--entry", "abcd5"],
    );
    assert_eq!(doc["leaf"], "abcd5678");
    let out = env.run_in(
        &env.project,
        &["session", "context", "01a22fdd", "--entry", "abcd"],
    );
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    assert!(stderr(&out).contains("abcd1234") && stderr(&out).contains("abcd5678"));
    let out = env.run_in(
        &env.project,
        &["session", "context", "01a22fdd", "--entry", "9999"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let out = env.run_in(
        &env.project,
        &["session", "context", "01a22fdd", "--entry", "ab"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // fork --entry by prefix.
    let fork = env.root.join("fork.jsonl");
    let doc = env.ok_json(
        &env.project,
        &[
            "session",
            "fork",
            sid,
            "--entry",
            "abcd12",
            "--path-only",
            "--out",
            fork.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["leaf"], "abcd1234");

    // exec plan: session by id, entry by prefix, repo from -C.
    let script = env.root.join("s.jsonl");
    fs::write(&script, "{\"text\": \"ok\"}\n").unwrap();
    let plan = env.root.join("plan.json");
    let model = format!("scripted/{}", script.display());
    let doc = env.ok_json(
        &env.root,
        &[
            "-C",
            "p",
            "exec",
            "plan",
            "--base",
            "HEAD",
            "--session",
            "01a22fdd",
            "--entry",
            "ef01",
            "--prompt",
            "go on",
            "--model",
            &model,
            "--out",
            plan.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["plan"]["session"]["entry"], "ef012345", "{doc}");
    let out = env.run_in(
        &env.project,
        &[
            "exec",
            "plan",
            "--base",
            "HEAD",
            "--session",
            sid,
            "--entry",
            "abcd",
            "--prompt",
            "x",
            "--model",
            &model,
            "--out",
            "p2.json",
        ],
    );
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    assert!(!env.project.join("p2.json").exists());
}

/// One prefix rule everywhere (issue 26): the same bad id fails the same
/// way whatever it names — not hex or too short 2, unknown 4, ambiguous 10
/// (the candidates listed) — and `--json` says the same kind.
#[test]
fn a_bad_id_prefix_fails_alike_in_every_command() {
    let env = Env::new();
    env.snapshot();
    let sid = "01a22fdd-2222-7000-8000-000000000002";
    let file = env.session(sid, &env.project, &["abcd1234", "abcd5678", "ef012345"]);
    let file = file.to_str().unwrap().to_owned();
    let commands: Vec<Vec<String>> = [
        vec!["checkpoint", "show"],
        vec!["checkpoint", "restore"],
        vec!["exec", "show"],
        vec!["task", "show"],
        vec!["session", "context", &file, "--entry"],
        vec!["rewind", "--session", &file, "--dry-run", "--entry"],
        vec!["session", "fork", &file, "--path-only", "--entry"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect();
    for (bad, code, kind, says) in [
        ("zz12", 2, "usage", "is not a"),
        ("ab1", 2, "usage", "too short"),
        ("fedcba98", 4, "not_found", "matches"),
    ] {
        for command in &commands {
            let mut args = command.clone();
            args.push(bad.to_owned());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = env.run_in(&env.project, &args);
            assert_eq!(out.status.code(), Some(code), "bh {args:?}: {}", text(&out));
            assert!(stderr(&out).contains(says), "bh {args:?}: {}", text(&out));
            assert!(
                stderr(&out).contains(bad),
                "names the query: {}",
                text(&out)
            );
            let out = env
                .bh_in(&env.project)
                .arg("--json")
                .args(&args)
                .output()
                .unwrap();
            let doc: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("bh --json {args:?}: {e}: {}", text(&out)));
            assert_eq!(doc["error"]["kind"], kind, "bh --json {args:?}");
        }
    }
    // Ambiguous, with the candidates, for the entry commands.
    for command in &commands[4..] {
        let mut args = command.clone();
        args.push("abcd".to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = env.run_in(&env.project, &args);
        assert_eq!(out.status.code(), Some(10), "bh {args:?}: {}", text(&out));
        assert!(
            stderr(&out).contains("abcd1234") && stderr(&out).contains("abcd5678"),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn unknown_ids_and_missing_files_are_not_found() {
    let env = Env::new();
    env.snapshot();
    let cases: &[&[&str]] = &[
        &["checkpoint", "show", "ffffff"],
        &["checkpoint", "restore", "ffffff"],
        &["checkpoint", "diff", "ffffff"],
        &["exec", "show", "ffffffff"],
        &["task", "show", "ffffffff"],
        &["session", "show", "missing.jsonl"],
        &["session", "tree", "no/such/file.jsonl"],
        &["session", "show", "0badc0de"],
        &["agent", "--script", "missing.jsonl", "-p", "hi"],
        &["exec", "verify", "--plan", "missing-plan.json"],
        &["exec", "run", "--plan", "missing-plan.json"],
        &["session", "context", "missing.jsonl", "--entry", "abcd"],
        &["session", "fork", "missing.jsonl"],
        &["worktree", "enter", "w", "--session", "missing.jsonl"],
        &["worktree", "consume", "missing.jsonl"],
        &["worktree", "list", "--repo", "/no/such/dir"],
        &["task", "gc", "--repo", "/no/such/dir"],
        &["exec", "gc", "--project", "/no/such/dir"],
        &["checkpoint", "list", "--project", "/no/such/dir"],
        &["-C", "/no/such/dir", "session", "list"],
        &[
            "exec",
            "plan",
            "--base",
            "HEAD",
            "--session",
            "missing.jsonl",
            "--entry",
            "abcd",
            "--prompt",
            "x",
            "--model",
            "openai/gpt-4o",
        ],
        &[
            "exec",
            "plan",
            "--base",
            "HEAD",
            "--session",
            "missing.jsonl",
            "--entry",
            "abcd",
            "--prompt-file",
            "missing.txt",
            "--model",
            "openai/gpt-4o",
        ],
    ];
    for args in cases {
        let out = env.run_in(&env.project, args);
        assert_eq!(out.status.code(), Some(4), "bh {args:?}: {}", text(&out));
        let out = env
            .bh_in(&env.project)
            .arg("--json")
            .args(*args)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("bh --json {args:?}: {e}: {}", text(&out)));
        assert_eq!(doc["error"]["kind"], "not_found", "bh {args:?}");
    }
}

// ----- 3. help ----------------------------------------------------------------

#[test]
fn help_lists_exit_codes_and_the_scripted_format() {
    let env = Env::new();
    for args in [
        &["checkpoint", "restore", "--help"][..],
        &["session", "show", "-h"],
        &["task", "run", "--help"],
        &["--help"],
    ] {
        let out = env.run_in(&env.root, args);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Exit codes:"), "{args:?}: {help}");
        assert!(help.contains(" 10  ambiguous:"), "{args:?}: {help}");
        assert!(!help.contains(" 25  tampered:"), "{args:?}: {help}");
    }
    let out = env.run_in(&env.root, &["exec", "run", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(" 25  tampered:"));
    for args in [&["agent", "--help"][..], &["exec", "plan", "--help"]] {
        let out = env.run_in(&env.root, args);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Scripted model file"), "{args:?}: {help}");
        assert!(help.contains("toolCalls") && help.contains("Exit codes:"));
    }
}

// ----- 4. bad input -------------------------------------------------------------

#[test]
fn agent_refuses_an_empty_prompt_before_creating_a_session() {
    let env = Env::new();
    let script = env.root.join("s.jsonl");
    fs::write(&script, "{\"text\": \"ok\"}\n").unwrap();
    for args in [
        &["agent", "-p", "", "--script", script.to_str().unwrap()][..],
        &["agent", "-p", "  \n", "--script", script.to_str().unwrap()],
        &[
            "agent",
            "-p",
            "hi",
            "",
            "--script",
            script.to_str().unwrap(),
        ],
    ] {
        let out = env.run_in(&env.project, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(stderr(&out).contains("empty"), "{}", text(&out));
    }
    assert!(
        !env.agent_dir.join("sessions").exists(),
        "no session may be created"
    );
}

#[test]
fn a_connection_error_prints_its_cause() {
    let env = Env::new();
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = env
        .bh_in(&env.project)
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "agent",
            "-p",
            "hi",
            "--model",
            "openai/gpt-test",
            "--base-url",
            &base,
            "--max-retries",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", text(&out));
    let err = stderr(&out).to_ascii_lowercase();
    assert!(err.contains("connection refused"), "{}", text(&out));
}
