//! `bh session …` end to end (fixtures live in crates/bh-session/tests/fixtures).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bh-session/tests/fixtures")
}

fn scenario(name: &str) -> PathBuf {
    let dir = fixtures().join("pi-0.73.1").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.remove(0)
}

struct Env {
    state: tempfile::TempDir,
    agent: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            state: tempfile::tempdir().unwrap(),
            agent: tempfile::tempdir().unwrap(),
        }
    }
    fn bh(&self) -> Command {
        let mut c = Command::cargo_bin("bh").unwrap();
        c.arg("--state-dir")
            .arg(self.state.path())
            .env("PI_CODING_AGENT_DIR", self.agent.path())
            .env_remove("BH_STATE_DIR");
        c
    }
}

fn json_of(out: &[u8]) -> Value {
    let text = std::str::from_utf8(out).unwrap();
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not one JSON document ({e}): {text}"))
}

fn digest(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn show_human_and_json() {
    let env = Env::new();
    let f = scenario("s07-extension-entries");
    env.bh()
        .args(["session", "show"])
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains("leaf:      b9b28e92"))
        .stdout(predicate::str::contains(
            "name:      Corpus extension session",
        ))
        .stdout(predicate::str::contains("models:    fake/fake-model"))
        .stdout(predicate::str::contains("tokens:    4095"))
        .stdout(predicate::str::contains("problems:  none"));
    let out = env
        .bh()
        .args(["--json", "session", "show"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out.stdout);
    assert_eq!(v["entries"], 21);
    assert_eq!(v["messages"], 9);
    assert_eq!(v["leaf"], "b9b28e92");
    assert_eq!(v["totals"]["totalTokens"], 4095);
    assert_eq!(v["header"]["id"], "01a22bee-4233-74fe-bb39-34fe4cb4fe86");
    assert_eq!(v["valid"], true);
}

#[test]
fn show_reports_problems_with_lines() {
    let env = Env::new();
    let f = fixtures()
        .join("pi-0.73.1/s21-load-handcrafted-and-legacy/handmade-v3-with-junk.input.jsonl");
    env.bh()
        .args(["session", "show"])
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains("line 3: error: invalid JSON"))
        .stdout(predicate::str::contains(
            "line 5: warning: unknown entry type",
        ));
}

#[test]
fn tree_marks_labels_and_leaf() {
    let env = Env::new();
    let out = env
        .bh()
        .args(["session", "tree"])
        .arg(scenario("s07-extension-entries"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 21, "{text}");
    assert!(
        text.contains("59f3f2ac message:assistant fake/fake-model [checkpoint-1]"),
        "{text}"
    );
    assert!(
        text.contains("b9b28e92 message:assistant fake/fake-model  <- leaf"),
        "{text}"
    );
    assert!(text.contains("├─ a672eefc custom corpus-state"), "{text}");
    let out = env
        .bh()
        .args(["--json", "session", "tree"])
        .arg(scenario("s07-extension-entries"))
        .output()
        .unwrap();
    let v = json_of(&out.stdout);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 21);
    assert_eq!(v["leaf"], "b9b28e92");
}

#[test]
fn validate_exit_codes_and_lines() {
    let env = Env::new();
    let good = scenario("s01-plain-text");
    let broken = scenario("s23-clone-with-labels-on-path");
    env.bh()
        .args(["session", "validate"])
        .arg(&good)
        .arg(scenario("s07-extension-entries"))
        .assert()
        .success()
        .stdout(predicate::str::contains(": ok (0 error(s), 0 warning(s))"));
    env.bh()
        .args(["session", "validate"])
        .arg(&good)
        .arg(&broken)
        .assert()
        .code(6)
        .stdout(predicate::str::contains(":8: error: parentId a718cf02"))
        .stderr(predicate::str::contains("1 of 2 file(s) failed validation"));
    // --json: exactly one document, with the standard error object.
    let out = env
        .bh()
        .args(["--json", "session", "validate"])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let v = json_of(&out.stdout);
    assert_eq!(v["valid"], false);
    assert_eq!(v["error"]["kind"], "invalid");
    assert_eq!(v["files"][0]["problems"][0]["line"], 8);
    assert_eq!(v["files"][0]["problems"][0]["kind"], "dangling_parent");
    // Missing file.
    env.bh()
        .args(["session", "validate", "/nonexistent/x.jsonl"])
        .assert()
        .code(4);
    // Each kind of bad input, with its line.
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#;
    let e1 = r#"{"type":"custom","customType":"c","id":"aa","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#;
    let e2 = r#"{"type":"custom","customType":"c","id":"aa","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#;
    let torn = format!("{header}\n{e1}\n{{\"type\":\"cus");
    let cases = [
        (
            "torn.jsonl",
            torn.as_str(),
            ":3: error: last line is cut short",
        ),
        (
            "dup.jsonl",
            &format!("{header}\n{e1}\n{e2}\n"),
            ":3: error: id aa already used on line 2",
        ),
        (
            "nohdr.jsonl",
            &format!("{e1}\n"),
            ":1: error: first line is not a session header",
        ),
        (
            "bad.jsonl",
            &format!("{header}\n{{oops\n{e1}\n"),
            ":2: error: invalid JSON",
        ),
    ];
    for (name, text, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        env.bh()
            .args(["session", "validate"])
            .arg(&p)
            .assert()
            .code(6)
            .stdout(predicate::str::contains(want));
    }
}

#[test]
fn context_json_matches_pi_and_entry_selection() {
    let env = Env::new();
    let f = scenario("s08-auto-compaction");
    let out = env
        .bh()
        .args(["--json", "session", "context"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out.stdout);
    let expected: Value = serde_json::from_slice(
        &std::fs::read(
            fixtures()
                .join("expected/pi-0.73.1/s08-auto-compaction")
                .join(f.file_name().unwrap())
                .with_extension("json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(v["messages"], expected["messages"]);
    assert_eq!(v["messages"][0]["role"], "compactionSummary");

    env.bh()
        .args(["session", "context"])
        .arg(scenario("s07-extension-entries"))
        .args(["--entry", "825ff67b"])
        .assert()
        .success()
        .stdout(predicate::str::contains("leaf 825ff67b"))
        .stdout(predicate::str::contains(
            "] toolResult (825ff67b): echo: ping",
        ));
    env.bh()
        .args(["session", "context"])
        .arg(scenario("s07-extension-entries"))
        .args(["--entry", "zzzzzzzz"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("zzzzzzzz"));
    let out = env
        .bh()
        .args(["--json", "session", "context", "/nonexistent.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(json_of(&out.stdout)["error"]["kind"], "not_found");
}

#[test]
fn fork_forms_and_refusals() {
    let env = Env::new();
    let src = scenario("s07-extension-entries");
    let before = digest(&src);
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("f.jsonl");
    env.bh()
        .args(["session", "fork"])
        .arg(&src)
        .arg("--out")
        .arg(&out_path)
        .assert()
        .success()
        .stdout(format!("{}\n", out_path.display()));
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert!(text.contains(&format!("\"parentSession\":\"{}\"", src.display())));
    assert_eq!(text.lines().count(), 22);
    // Refuse to overwrite.
    env.bh()
        .args(["session", "fork"])
        .arg(&src)
        .arg("--out")
        .arg(&out_path)
        .assert()
        .code(3);
    // Path-only into another project's folder under PI_CODING_AGENT_DIR.
    let proj = tempfile::tempdir().unwrap();
    let out = env
        .bh()
        .args([
            "--json",
            "session",
            "fork",
            "--path-only",
            "--entry",
            "825ff67b",
            "--cwd",
        ])
        .arg(proj.path())
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out.stdout);
    let p = PathBuf::from(v["path"].as_str().unwrap());
    let enc = proj
        .path()
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .replace('/', "-");
    assert_eq!(
        p.parent().unwrap(),
        env.agent.path().join("sessions").join(format!("--{enc}--"))
    );
    env.bh()
        .args(["session", "validate"])
        .arg(&p)
        .assert()
        .success();
    env.bh()
        .args(["session", "context"])
        .arg(&p)
        .assert()
        .success()
        .stdout(predicate::str::contains("toolResult (825ff67b)"));
    // Unknown entry, missing file, bad flag.
    env.bh()
        .args(["session", "fork", "--entry", "nope"])
        .arg(&src)
        .arg("--out")
        .arg(dir.path().join("g.jsonl"))
        .assert()
        .code(4);
    env.bh()
        .args(["session", "fork", "/nonexistent.jsonl"])
        .assert()
        .code(4);
    env.bh()
        .args(["session", "fork", "--bogus"])
        .arg(&src)
        .assert()
        .code(2);
    // Not a session.
    env.bh()
        .args(["session", "fork"])
        .arg(
            fixtures().join(
                "pi-0.73.1/s21-load-handcrafted-and-legacy/garbage-not-a-session.input.jsonl",
            ),
        )
        .arg("--out")
        .arg(dir.path().join("h.jsonl"))
        .assert()
        .code(6);
    assert_eq!(digest(&src), before, "source unchanged");
}

#[test]
fn ls_lists_newest_first() {
    let env = Env::new();
    let proj = tempfile::tempdir().unwrap();
    let enc = proj
        .path()
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .replace('/', "-");
    let dir = env.agent.path().join("sessions").join(format!("--{enc}--"));
    std::fs::create_dir_all(&dir).unwrap();
    let old = scenario("s01-plain-text");
    let new = scenario("s07-extension-entries");
    std::fs::copy(&old, dir.join(old.file_name().unwrap())).unwrap();
    std::fs::copy(&new, dir.join(new.file_name().unwrap())).unwrap();
    std::fs::write(dir.join("junk.jsonl"), "nope\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    let out = env
        .bh()
        .args(["--json", "session", "ls", "--cwd"])
        .arg(proj.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json_of(&out.stdout);
    let s = v["sessions"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["name"], "Corpus extension session");
    assert_eq!(
        s[0]["firstMessage"],
        "Extension session, first turn [[scenario:hello]]"
    );
    assert_eq!(s[1]["id"], "01a22bed-fad1-75df-a44b-63166ec12902");
    assert!(s[0]["size"].as_u64().unwrap() > 1000);
    env.bh()
        .args(["session", "ls", "--cwd"])
        .arg(proj.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Corpus extension session — Extension session, first turn",
        ));
    // Empty project.
    env.bh()
        .args(["session", "ls", "--cwd", "/nowhere/at/all"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no sessions in"));
}
