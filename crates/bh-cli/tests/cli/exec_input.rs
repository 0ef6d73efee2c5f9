//! Bad input to `bh exec plan` is refused before anything is written (an
//! empty prompt, no model, a malformed model, an unknown provider, a script
//! that is missing or not a script), and `bh exec run` without `--yes` is a
//! dry run that exits 0 and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use bh_test_support::cli::World;
use serde_json::Value;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

struct Env {
    w: World,
    root: PathBuf,
}

impl Env {
    fn new() -> Env {
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
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
            root.join("s.jsonl"),
        )
        .unwrap();
        fs::write(root.join("turns.jsonl"), "{\"text\": \"Done.\"}\n").unwrap();
        Env { w, root }
    }

    fn bh(&self, args: &[&str]) -> Output {
        self.w.bh(&self.root).args(args).output().unwrap()
    }

    /// `bh exec plan` of the fixture with `extra` (prompt, model…).
    fn plan(&self, extra: &[&str]) -> Output {
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
        ];
        args.extend(extra);
        self.bh(&args)
    }

    fn plan_written(&self) -> bool {
        self.root.join("plan.json").exists()
    }
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_empty_prompt_is_refused_before_anything_is_written() {
    let e = Env::new();
    for prompt in ["", "  \n\t"] {
        let o = e.plan(&["--prompt", prompt, "--model", "scripted/turns.jsonl"]);
        assert_eq!(o.status.code(), Some(2), "{prompt:?}: {}", err(&o));
        assert!(err(&o).contains("--prompt is empty"), "{}", err(&o));
        assert!(!e.plan_written());
    }
    fs::write(e.root.join("p.txt"), "\n").unwrap();
    let o = e.plan(&["--prompt-file", "p.txt", "--model", "scripted/turns.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("p.txt is empty"), "{}", err(&o));
    assert!(!e.plan_written());
}

#[test]
fn the_model_is_required_well_formed_and_known() {
    let e = Env::new();
    let refused = |model: Option<&str>, code: i32, says: &str| {
        let mut args = vec!["--prompt", "go on"];
        if let Some(m) = model {
            args.extend(["--model", m]);
        }
        let o = e.plan(&args);
        assert_eq!(o.status.code(), Some(code), "{model:?}: {}", err(&o));
        assert!(err(&o).contains(says), "{model:?}: {}", err(&o));
        assert!(!e.plan_written(), "{model:?}");
    };
    refused(None, 2, "needs --model");
    refused(Some(""), 2, "needs --model");
    refused(Some("gpt-4o"), 2, "not of the form PROVIDER/MODEL");
    refused(Some("openai:gpt-4o"), 2, "did you mean openai/gpt-4o");
    refused(Some("openai/"), 2, "not of the form");
    refused(Some("nosuch/model"), 2, "unknown provider \"nosuch\"");
    // ... saying where a provider is added.
    refused(
        Some("nosuch/model"),
        2,
        "config.toml or in Pi's models.json",
    );
    refused(Some("scripted/missing.jsonl"), 4, "missing.jsonl");
    fs::write(e.root.join("junk.jsonl"), "this is not a script\n").unwrap();
    refused(Some("scripted/junk.jsonl"), 2, "is not a script");
    let o = e.bh(&[
        "--json",
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
        "go",
        "--model",
        "nosuch/m",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "usage");

    // Built-in providers need no key at plan time; Pi's models.json adds its own.
    let o = e.plan(&[
        "--prompt",
        "go",
        "--model",
        "anthropic/claude-x",
        "--out",
        "a.json",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    fs::create_dir_all(e.root.join("pi")).unwrap();
    fs::write(
        e.root.join("pi/models.json"),
        r#"{"providers": {"mine": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1", "models": [{"id": "m"}]}}}"#,
    )
    .unwrap();
    let o = e.plan(&["--prompt", "go", "--model", "mine/m", "--out", "b.json"]);
    assert!(o.status.success(), "{}", err(&o));
}

#[test]
fn run_without_yes_is_a_dry_run_that_exits_0() {
    let e = Env::new();
    let o = e.plan(&["--prompt", "go on", "--model", "scripted/turns.jsonl"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = e.bh(&["exec", "run", "--plan", "plan.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("dry run") && out.contains("188efa0e") && out.contains("--yes"),
        "{out}"
    );
    let o = e.bh(&["--json", "exec", "run", "--plan", "plan.json"]);
    assert_eq!(o.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["would"]["entry"], "188efa0e");
    assert!(
        doc["would"]["ref"]
            .as_str()
            .unwrap()
            .starts_with("refs/better-harness/executions/")
    );
    // Nothing ran: no execution folder, no ref.
    assert!(!e.root.join("state/executions").exists());
    let (code, list) = {
        let o = e.bh(&["--json", "exec", "list"]);
        (
            o.status.code(),
            serde_json::from_slice::<Value>(&o.stdout).unwrap(),
        )
    };
    assert_eq!(code, Some(0));
    assert_eq!(list["executions"], serde_json::json!([]));
    // A dry run still verifies: a tampered plan is refused as before.
    let text = fs::read_to_string(e.root.join("plan.json")).unwrap();
    fs::write(e.root.join("plan.json"), text.replace("go on", "go wild")).unwrap();
    let o = e.bh(&["exec", "run", "--plan", "plan.json"]);
    assert_eq!(o.status.code(), Some(20), "{}", err(&o));
}

/// `exec plan --session` naming a FIFO or a device is refused with the
/// path, before anything is read (a FIFO used to hang the open, `/dev/zero`
/// to be read without end).
#[test]
fn a_session_that_is_not_a_regular_file_is_refused_without_waiting() {
    let e = Env::new();
    let fifo = e.root.join("s.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for session in [fifo.to_str().unwrap(), "/dev/zero"] {
        let o = assert_cmd::Command::from_std(e.w.bh(&e.root))
            .args(["exec", "plan", "--repo", "repo", "--base", "main"])
            .args(["--session", session, "--entry", "188efa0e"])
            .args(["--prompt", "go on", "--model", "scripted/turns.jsonl"])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(6), "{session}: {}", err(&o));
        assert!(
            err(&o).contains(session) && err(&o).contains("is not a regular file"),
            "{}",
            err(&o)
        );
        assert!(!e.plan_written());
    }
}
