//! `bh exec list|ls`, `bh exec show ID` (human, `--json`, `--html`): ids by
//! unique prefix, the facts of a run read back, and a self-contained report
//! that a real headless browser renders without fetching anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use bh_test_support::cli::World;
use serde_json::Value;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";
const WRITE_HELLO: &str = "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello <b>\\n\"}}]}\n{\"text\": \"Done <script>fetch('http://127.0.0.1:9/')</script>\"}\n";

struct Env {
    w: World,
    root: PathBuf,
    repo: PathBuf,
}

impl Env {
    fn new() -> Env {
        let w = crate::world();
        let root = w.root.clone();
        let repo = root.join("repo");
        fs::create_dir_all(&repo).unwrap();
        let e = Env {
            w: w.with_home(&root).with_agent(root.join("pi")),
            root,
            repo,
        };
        e.git(&["init", "-q", "-b", "main"]);
        fs::write(e.repo.join("a.txt"), "a\n").unwrap();
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

    fn bh(&self, args: &[&str]) -> Output {
        self.w.bh(&self.root).args(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> (i32, Value) {
        let mut all = vec!["--json"];
        all.extend(args);
        let out = self.bh(&all);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), doc)
    }

    /// Plans (prompt `prompt`) with a scripted model and runs; returns the
    /// execution id.
    fn run(&self, prompt: &str, script: &str) -> String {
        self.run_with(prompt, script, &[])["execution_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// [`Env::run`] with more `exec run` arguments; returns the result.
    fn run_with(&self, prompt: &str, script: &str, extra: &[&str]) -> Value {
        let turns = self.root.join(format!("turns-{prompt}.jsonl"));
        fs::write(&turns, script).unwrap();
        let plan = format!("plan-{prompt}.json");
        let model = format!("scripted/{}", turns.display());
        let out = self.bh(&[
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
            &model,
            "--out",
            &plan,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut args = vec!["exec", "run", "--plan", &plan, "--yes"];
        args.extend(extra);
        let (code, doc) = self.json(&args);
        assert_eq!(code, 0, "{doc}");
        doc["result"].clone()
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn list_is_empty_before_any_run() {
    let e = Env::new();
    let (code, doc) = e.json(&["exec", "list"]);
    assert_eq!(code, 0);
    assert_eq!(doc["executions"], serde_json::json!([]));
    let o = e.bh(&["exec", "ls"]);
    assert!(o.status.success());
    assert!(text(&o).contains("no executions"));
    // Nothing to show: not found.
    let o = e.bh(&["exec", "show", "x0123456"]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn list_and_show_a_committed_run() {
    let e = Env::new();
    let id = e.run("greet", WRITE_HELLO);
    let (code, doc) = e.json(&["exec", "ls"]);
    assert_eq!(code, 0);
    let list = doc["executions"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["state"], "committed");
    assert_eq!(list[0]["entry"], "188efa0e");
    let commit = list[0]["commit"].as_str().unwrap().to_owned();
    assert_eq!(
        e.git(&["rev-parse", list[0]["ref"].as_str().unwrap()]),
        commit
    );

    let human = text(&e.bh(&["exec", "list"]));
    assert!(
        human.contains(&id) && human.contains("committed") && human.contains("greet"),
        "{human}"
    );

    // By a prefix without the leading letter.
    let prefix = &id[1..id.len() - 2];
    let (code, doc) = e.json(&["exec", "show", prefix]);
    assert_eq!(code, 0, "{doc}");
    let x = &doc["execution"];
    assert_eq!(x["id"], id.as_str());
    assert_eq!(x["state"], "committed");
    assert_eq!(x["commit"], commit.as_str());
    assert_eq!(x["trailers"]["Better-Harness-Entry"], "188efa0e");
    assert_eq!(x["trailers"]["Better-Harness-Execution"], id.as_str());
    assert_eq!(
        x["trailers"]["Better-Harness-Plan"],
        format!("sha256:{}", x["plan"]["plan_sha256"].as_str().unwrap()).as_str()
    );
    assert_eq!(x["diffstat"][0]["path"], "hello.txt");
    assert_eq!(x["diffstat"][0]["added"], 1);
    assert_eq!(x["diffstat"][0]["deleted"], 0);
    assert_eq!(x["ref_now"], commit.as_str());
    assert_eq!(x["result"]["state"], "committed");

    // By a prefix of the random part after the `-`.
    let random = id.rsplit_once('-').unwrap().1;
    let (code, doc) = e.json(&["exec", "show", &random[..5]]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["execution"]["id"], id.as_str());

    // By its output ref; a ref no execution made is not found.
    let output_ref = list[0]["ref"].as_str().unwrap().to_owned();
    let (code, doc) = e.json(&["exec", "show", &output_ref]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["execution"]["id"], id.as_str());
    let o = e.bh(&["exec", "show", "refs/better-harness/executions/0000"]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no execution here made or tried"));

    let o = e.bh(&["exec", "show", &id]);
    assert!(o.status.success());
    let human = text(&o);
    for want in [
        "committed",
        "Better-Harness-Model: scripted/",
        "hello.txt",
        "+1",
        &commit,
        "plan:       sha256:",
    ] {
        assert!(human.contains(want), "{want:?} missing from:\n{human}");
    }
}

#[test]
fn ids_ambiguous_unknown_and_malformed() {
    let e = Env::new();
    let a = e.run("one", "{\"text\": \"Nothing.\"}\n");
    let b = e.run("two", "{\"text\": \"Nothing.\"}\n");
    // Ids start with their random part (issue 26): made at once, they
    // differ from the first character on, so 4 of them name one.
    assert_ne!(a[1..5], b[1..5], "{a} {b}");
    let o = e.bh(&["exec", "show", &a[1..5]]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Their time parts (after the `-`) share a prefix: ambiguous.
    let time = |id: &str| id.split_once('-').unwrap().1.to_owned();
    let common: String = time(&a)
        .chars()
        .zip(time(&b).chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    assert!(common.len() >= 4, "{a} {b}");
    let o = e.bh(&["exec", "show", &common]);
    assert_eq!(o.status.code(), Some(10));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ambiguous") && err.contains(&a) && err.contains(&b),
        "{err}"
    );
    let (code, doc) = e.json(&["exec", "show", &common]);
    assert_eq!(code, 10);
    assert_eq!(doc["error"]["kind"], "ambiguous");

    let o = e.bh(&["exec", "show", "xffffffffffff"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no execution matches"));
    let o = e.bh(&["exec", "show", "x1a"]);
    assert_eq!(o.status.code(), Some(2));
    let o = e.bh(&["exec", "show", "../../etc"]);
    assert_eq!(o.status.code(), Some(2));
    // A run without changes has no commit, no trailers, no diffstat.
    let (code, doc) = e.json(&["exec", "show", &a]);
    assert_eq!(code, 0);
    assert_eq!(doc["execution"]["state"], "no-changes");
    assert_eq!(doc["execution"]["trailers"], Value::Null);
    assert_eq!(doc["execution"]["diffstat"], serde_json::json!([]));
}

const SCRIPT: &str = r#"
import { chromium } from 'playwright-core';
const [, , file] = process.argv;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const requests = [];
page.on('request', r => requests.push(r.url()));
const errors = [];
page.on('pageerror', e => errors.push(String(e)));
page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
await page.goto('file://' + file);
const out = { title: await page.title(), h1: await page.textContent('h1'),
  state: await page.textContent('#state'),
  sections: await page.locator('#conversation [id^="e-"]').count(),
  trailers: await page.textContent('#trailers pre'),
  added: await page.locator('#changes .diff .add').count(),
  visiblePatch: await page.locator('#changes details.patch pre').isVisible() };
out.requests = requests;
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
"#;

#[test]
fn html_report_renders_and_fetches_nothing() {
    let e = Env::new();
    let id = e.run("greet", WRITE_HELLO);
    let out = e.root.join("x.html");
    let o = e.bh(&[
        "exec",
        "show",
        &id,
        "--html",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("default-src 'none'"));
    assert!(html.contains("Conversation continued"));
    assert!(html.contains("Better-Harness-Entry: 188efa0e"));
    assert!(html.contains("+hello &lt;b&gt;"), "the patch, escaped");
    assert!(!html.contains("<script>fetch"), "model text is escaped");
    assert!(
        !html.contains("id=\"e-188efa0e\""),
        "the planned entry is history, not the run"
    );
    // To stdout, the same document; --out refuses to overwrite; --json needs --out.
    let o = e.bh(&["exec", "show", &id, "--html"]);
    assert!(o.status.success());
    assert!(text(&o).starts_with("<!doctype html>"));
    let o = e.bh(&[
        "exec",
        "show",
        &id,
        "--html",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let o = e.bh(&[
        "exec",
        "show",
        &id,
        "--html",
        "--out",
        e.root.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let (code, _) = e.json(&["exec", "show", &id, "--html"]);
    assert_eq!(code, 2);
    let (code, doc) = e.json(&[
        "exec",
        "show",
        &id,
        "--html",
        "--force",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["html"], out.to_str().unwrap());

    let Some(browser) = bh_test_support::browser::browser() else {
        return;
    };
    let v: Value =
        serde_json::from_str(browser.run_script(SCRIPT, &[out.to_str().unwrap()]).trim()).unwrap();
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(
        v["requests"].as_array().unwrap().len(),
        1,
        "only the file itself: {v}"
    );
    assert!(v["h1"].as_str().unwrap().contains(&id), "{v}");
    assert_eq!(v["state"], "committed");
    // Every entry the run appended after the planned one (the model and
    // thinking changes, the prompt, the tool call, its result, the answer):
    // counted from the forked session's leaf back to the planned entry (a
    // card each, or an anchor in its call's card for a tool result).
    assert_eq!(v["sections"], appended_entries(&e, &id), "{v}");
    assert!(
        v["trailers"]
            .as_str()
            .unwrap()
            .contains("Better-Harness-Execution")
    );
    assert_eq!(v["added"], 1, "{v}");
    assert_eq!(v["visiblePatch"], true, "{v}");
}

/// A run in a checkout takes a checkpoint before each mutating call; its
/// report badges the call with it. Over the base tree (no checkout) the
/// base commit is the before-state and no badge is drawn.
#[test]
fn a_checkout_runs_report_badges_its_calls_checkpoints() {
    let e = Env::new();
    let result = e.run_with("greet", WRITE_HELLO, &["--checkout"]);
    let id = result["execution_id"].as_str().unwrap();
    let cp = result["checkpoints"][0]
        .as_str()
        .expect("a checkpoint")
        .to_owned();
    let o = e.bh(&["exec", "show", id, "--html"]);
    assert!(o.status.success(), "{o:?}");
    let html = text(&o);
    assert!(
        html.contains(&format!("(bh checkpoint restore {cp})")),
        "{cp} badged"
    );
    let virtual_run = e.run_with("greet2", WRITE_HELLO, &[]);
    assert_eq!(virtual_run["checkpoints"], serde_json::json!([]));
    let o = e.bh(&[
        "exec",
        "show",
        virtual_run["execution_id"].as_str().unwrap(),
        "--html",
    ]);
    assert!(!text(&o).contains("badge cp"));
}

/// Entries on the forked session's path from its last entry back to (not
/// including) the planned entry `188efa0e`.
fn appended_entries(e: &Env, id: &str) -> usize {
    let (_, doc) = e.json(&["exec", "show", id]);
    let file = doc["execution"]["result"]["forked_session"]
        .as_str()
        .unwrap();
    let entries: Vec<Value> = fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let parent_of = |id: &str| -> Option<String> {
        let e = entries.iter().find(|e| e["id"] == id)?;
        e["parentId"].as_str().map(str::to_owned)
    };
    let mut at = entries.last().unwrap()["id"].as_str().unwrap().to_owned();
    let mut n = 0;
    while at != "188efa0e" {
        n += 1;
        at = parent_of(&at).unwrap();
    }
    assert!(n >= 4, "at least the prompt, call, result and answer");
    n
}
