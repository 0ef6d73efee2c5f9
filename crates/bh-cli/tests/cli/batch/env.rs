//! The world of the batch tests: a repository, the Pi session fixture, a
//! state dir, plans made with `bh exec plan`, and a mock model on
//! 127.0.0.1 that answers by prompt (a write, then "Done."; HTTP 503 for a
//! prompt holding "transient" while `fail` is set).

#![allow(dead_code)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

pub const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";
/// The provider key the tests hand to workers (never to be found in a
/// plan, receipt or recipe).
pub const KEY: &str = "sk-batch-secret-0123456789";

pub struct World {
    /// The hermetic environment (`bh_test_support::cli`): HOME is `root`,
    /// the state dir `root/state`, Pi's agent dir `root/pi`.
    pub cli: bh_test_support::cli::World,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub plans: PathBuf,
    pub base_url: String,
    /// While set, prompts holding "transient" get HTTP 503.
    pub fail: Arc<AtomicBool>,
}

impl World {
    pub fn new() -> World {
        let cli = crate::world();
        let root = cli.root.clone();
        let cli = cli.with_home(&root).with_agent(root.join("pi"));
        let repo = root.join("repo");
        let plans = root.join("plans");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&plans).unwrap();
        let fail = Arc::new(AtomicBool::new(true));
        let flag = fail.clone();
        let base_url = bh_test_support::mock_openai::serve_by(move |body| respond(body, &flag));
        let w = World {
            cli,
            root,
            repo,
            plans,
            base_url,
            fail,
        };
        w.git(&["init", "-q", "-b", "main"]);
        fs::write(w.repo.join("a.txt"), "a\n").unwrap();
        w.git(&["add", "-A"]);
        w.git(&["commit", "-q", "-m", "base"]);
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
            w.root.join("s.jsonl"),
        )
        .unwrap();
        w
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.repo, args)
    }

    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        self.cli.git(dir, args)
    }

    /// `bh` with this world's HOME, state dir and provider key.
    pub fn bh(&self) -> Command {
        let mut cmd = self.cli.bh(&self.root);
        cmd.env("OPENAI_API_KEY", KEY);
        cmd
    }

    /// `bh exec plan` of the fixture with `prompt`, `model`, to `plans/<name>`.
    pub fn plan(&self, name: &str, prompt: &str, model: &str) -> PathBuf {
        let out_file = self.plans.join(name);
        let out = self
            .bh()
            .args(["exec", "plan", "--repo", "repo", "--base", "main"])
            .args(["--session", "s.jsonl", "--entry", "188efa0e"])
            .args(["--prompt", prompt, "--model", model, "--out"])
            .arg(&out_file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out_file
    }

    /// A plan of the scripted model writing `file` (after `delay_ms`).
    pub fn scripted_plan(&self, name: &str, file: &str, delay_ms: u64) -> PathBuf {
        let script = self.root.join(format!("{name}.script"));
        let call =
            json!({"name": "write", "arguments": {"path": file, "content": format!("{file}\n")}});
        fs::write(
            &script,
            format!(
                "{}\n{}\n",
                json!({"text": "Writing.", "toolCalls": [call], "delayMs": delay_ms}),
                json!({"text": "Done."})
            ),
        )
        .unwrap();
        self.plan(
            name,
            &format!("write {file}"),
            &format!("scripted/{}", script.display()),
        )
    }

    /// A plan of the mock model (`openai/gpt-test`) writing `file`.
    pub fn mock_plan(&self, name: &str, file: &str, transient: bool) -> PathBuf {
        let prompt = if transient {
            format!("write {file} transient")
        } else {
            format!("write {file}")
        };
        self.plan(name, &prompt, "openai/gpt-test")
    }

    /// Edits a plan's prompt in place (its digest no longer matches).
    pub fn tamper(&self, plan: &Path) {
        let text = fs::read_to_string(plan).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v["prompt"]["text"] = json!("rm -rf everything");
        fs::write(plan, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }

    pub fn read_ref(&self, name: &str) -> Option<String> {
        let out = self
            .cli
            .git_output(&self.repo, &["rev-parse", "--verify", "--quiet", name]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    pub fn plan_ref(&self, plan: &Path) -> String {
        let v: Value = serde_json::from_str(&fs::read_to_string(plan).unwrap()).unwrap();
        v["output_ref"].as_str().unwrap().to_owned()
    }

    pub fn receipt(&self, dir: &Path, index: usize) -> Value {
        let text = fs::read_to_string(dir.join(format!("{index}.json"))).unwrap();
        assert!(!text.contains(KEY), "a provider key in receipt {index}");
        serde_json::from_str(&text).unwrap()
    }

    /// Every execution folder of the state dir.
    pub fn executions(&self) -> usize {
        fs::read_dir(self.root.join("state/executions"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

/// The mock model: 503 for a "transient" prompt while `fail`; after a tool
/// result, "Done."; else a write of the file the prompt names.
fn respond(body: &Value, fail: &AtomicBool) -> String {
    use bh_test_support::mock_openai::{chunk, status, usage};
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let prompt = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    if prompt.contains("echokey") {
        // A provider that quotes the key it was sent, as some do on a 401.
        return status(401, &format!("Incorrect API key provided: {KEY}"));
    }
    if prompt.contains("transient") && fail.load(Ordering::SeqCst) {
        return status(503, "overloaded, try later");
    }
    if messages.iter().any(|m| m["role"] == "tool") {
        return [
            chunk(json!({"role": "assistant", "content": "Done."}), None),
            chunk(json!({}), Some("stop")),
            usage(10, 2),
        ]
        .concat();
    }
    let file = match prompt.find(".txt") {
        Some(end) => {
            let start = prompt[..end]
                .rfind(|c: char| !c.is_ascii_alphanumeric())
                .map_or(0, |i| i + 1);
            format!("{}.txt", &prompt[start..end])
        }
        None => "out.txt".to_owned(),
    };
    let args = json!({"path": file, "content": format!("{file}\n")}).to_string();
    [
        chunk(json!({"role": "assistant", "content": "Writing."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "write", "arguments": args}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage(10, 5),
    ]
    .concat()
}
