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
    let mut files: Vec<PathBuf> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.remove(0)
}

struct Env {
    w: bh_test_support::cli::World,
    agent: PathBuf,
}

impl Env {
    fn new() -> Env {
        let w = crate::world();
        fs_err::create_dir_all(&w.state).unwrap();
        fs_err::create_dir_all(&w.agent).unwrap();
        Env {
            agent: w.agent.clone(),
            w,
        }
    }
    fn bh(&self) -> Command {
        Command::from_std(self.w.bh(&self.w.root))
    }
}

fn json_of(out: &[u8]) -> Value {
    let text = std::str::from_utf8(out).unwrap();
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not one JSON document ({e}): {text}"))
}

fn digest(p: &Path) -> Vec<u8> {
    fs_err::read(p).unwrap()
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
    // 21 entries and the connector under the one branch point.
    assert_eq!(text.lines().count(), 22, "{text}");
    assert!(
        text.contains("● 59f3f2ac assistant fake-model: (thinking) Hello!"),
        "{text}"
    );
    assert!(text.contains("[checkpoint-1]\n├─╮\n"), "{text}");
    // The side branch is drawn in lane 1 and closed before the active path goes on.
    assert!(
        text.contains("\n│ ○ a672eefc custom corpus-state\n"),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with("◉ b9b28e92 assistant fake-model: (thinking) Hello! I am a scripted fake model. How can I help with this repository?  ← leaf"),
        "{text}"
    );
    let out = env
        .bh()
        .args(["--json", "session", "tree"])
        .arg(scenario("s07-extension-entries"))
        .output()
        .unwrap();
    let v = json_of(&out.stdout);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 21);
    assert_eq!(v["leaf"], "b9b28e92");
    assert_eq!(v["lanes"], 2);
    // Every entry on the active path is in lane 0.
    let ctx = json_of(
        &env.bh()
            .args(["--json", "session", "context"])
            .arg(scenario("s07-extension-entries"))
            .output()
            .unwrap()
            .stdout,
    );
    assert!(ctx.is_object());
    let leaf = nodes.iter().find(|n| n["leaf"] == true).unwrap();
    assert_eq!(leaf["lane"], 0);
    let side = nodes.iter().find(|n| n["id"] == "a672eefc").unwrap();
    assert_eq!(side["lane"], 1);
    assert_eq!(side["summary"], "custom corpus-state");
}

#[test]
fn tree_folds_tool_runs_unless_full() {
    let env = Env::new();
    let f = scenario("s02-tools-json-mode");
    let folded = env.bh().args(["session", "tree"]).arg(&f).output().unwrap();
    let text = String::from_utf8(folded.stdout).unwrap();
    assert!(
        text.contains("┊ 8 tool steps: read, edit, ls, bash (1 error) [5e40c0e5..545769db]"),
        "{text}"
    );
    let full = env
        .bh()
        .args(["session", "tree", "--full"])
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8(full.stdout).unwrap();
    assert!(!text.contains('┊'), "{text}");
    assert!(text.contains("● 4385c5de ls ✗ Tool ls not found"), "{text}");
    assert!(
        text.contains("● 064b6fc1 assistant fake-model: → ls, bash"),
        "{text}"
    );
}

/// A session with 1,200 entries that branches at every user turn: the
/// width stays that of the lanes open at once (two), not of the depth, and
/// every entry is drawn exactly once.
#[test]
fn tree_width_does_not_grow_with_depth() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("deep.jsonl");
    let mut lines = vec![r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}"#.to_owned()];
    let mut parent = "null".to_owned();
    let mut ids = Vec::new();
    for i in 0..300 {
        let u = format!("{i:04x}aaaa");
        let a = format!("{i:04x}bbbb");
        let dead = format!("{i:04x}cccc");
        let dead_reply = format!("{i:04x}dddd");
        lines.push(format!(r#"{{"type":"message","id":"{u}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"turn {i}","timestamp":1}}}}"#));
        // An abandoned reply first (a branch), then the one that goes on.
        lines.push(format!(r#"{{"type":"message","id":"{dead}","parentId":"{u}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"abandoned {i}"}}],"model":"m","timestamp":1}}}}"#));
        lines.push(format!(r#"{{"type":"message","id":"{dead_reply}","parentId":"{dead}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"never mind","timestamp":1}}}}"#));
        lines.push(format!(r#"{{"type":"message","id":"{a}","parentId":"{u}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"reply {i}"}}],"model":"m","timestamp":1}}}}"#));
        ids.extend([u, dead, dead_reply, a.clone()]);
        parent = format!("\"{a}\"");
    }
    fs_err::write(&f, lines.join("\n") + "\n").unwrap();
    let out = env.bh().args(["session", "tree"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 60, "widest line {widest} columns");
    for id in &ids {
        assert_eq!(text.matches(id.as_str()).count(), 1, "{id}");
    }
    assert!(text.trim_end().ends_with("← leaf"));
    let v = json_of(
        &env.bh()
            .args(["--json", "session", "tree"])
            .arg(&f)
            .output()
            .unwrap()
            .stdout,
    );
    assert_eq!(v["lanes"], 2);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 1200);
}

/// Escape sequences stored in a session never reach the terminal.
#[test]
fn session_text_is_printed_with_control_characters_escaped() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("esc.jsonl");
    fs_err::write(
        &f,
        concat!(
            r#"{"type":"session","version":3,"id":"s\u001b]0;pwned\u0007","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/\u001b[2J"}"#,
            "\n",
            r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi \u001b[31mred\u009b2J","timestamp":1}}"#,
            "\n",
            r#"{"type":"session_info","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:00.000Z","name":"n\u001b[5m"}"#,
            "\n"
        ),
    )
    .unwrap();
    for args in [
        &["session", "tree"][..],
        &["session", "show"],
        &["session", "context"],
    ] {
        let out = env.bh().args(args).arg(&f).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8(all).unwrap();
        assert!(!text.contains('\u{1b}'), "{args:?}: {text:?}");
        assert!(!text.contains('\u{9b}'), "{args:?}: {text:?}");
        assert!(!text.contains('\u{7}'), "{args:?}: {text:?}");
    }
    let out = env.bh().args(["session", "tree"]).arg(&f).output().unwrap();
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("user: hi \\e[31mred\\x9b2J")
    );
}

#[test]
fn show_and_tree_refuse_a_file_that_is_not_a_session() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("notes.txt");
    let text: String = (0..103).map(|i| format!("line {i}\n")).collect();
    fs_err::write(&f, text).unwrap();
    for cmd in ["show", "tree"] {
        let out = env.bh().args(["session", cmd]).arg(&f).output().unwrap();
        assert_eq!(out.status.code(), Some(6), "{cmd}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("notes.txt"), "{cmd}: {err}");
        assert!(
            err.lines().count() <= 2,
            "{cmd}: one error, not one per line: {err}"
        );
    }
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
        fs_err::write(&p, text).unwrap();
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
        &fs_err::read(
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
        .args(["--entry", "ffff0000"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("ffff0000"));
    // Not an entry id at all: a usage error, as everywhere (issue 26).
    env.bh()
        .args(["session", "context"])
        .arg(scenario("s07-extension-entries"))
        .args(["--entry", "zzzzzzzz"])
        .assert()
        .code(2)
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
    let text = fs_err::read_to_string(&out_path).unwrap();
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
        env.agent
            .as_path()
            .join("sessions")
            .join(format!("--{enc}--"))
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
        .args(["session", "fork", "--entry", "ffff0000"])
        .arg(&src)
        .arg("--out")
        .arg(dir.path().join("g.jsonl"))
        .assert()
        .code(4);
    env.bh()
        .args(["session", "fork", "--entry", "nope"])
        .arg(&src)
        .arg("--out")
        .arg(dir.path().join("g.jsonl"))
        .assert()
        .code(2);
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
    let dir = env
        .agent
        .as_path()
        .join("sessions")
        .join(format!("--{enc}--"));
    fs_err::create_dir_all(&dir).unwrap();
    let old = scenario("s01-plain-text");
    let new = scenario("s07-extension-entries");
    fs_err::copy(&old, dir.join(old.file_name().unwrap())).unwrap();
    fs_err::copy(&new, dir.join(new.file_name().unwrap())).unwrap();
    fs_err::write(dir.join("junk.jsonl"), "nope\n").unwrap();
    fs_err::write(dir.join("notes.txt"), "x").unwrap();
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
    // `list` is the command, `ls` its alias: the same output.
    let listed = env
        .bh()
        .args(["--json", "session", "list", "--cwd"])
        .arg(proj.path())
        .output()
        .unwrap();
    assert_eq!(json_of(&listed.stdout), v);
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

#[test]
fn a_directory_where_a_session_file_is_expected_is_a_usage_error() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    for cmd in ["show", "tree", "context", "validate", "export"] {
        let out = env
            .bh()
            .args(["session", cmd])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("is a directory"), "{cmd}: {err}");
    }
}

#[test]
fn show_by_id_prints_the_file_it_resolved_to() {
    let env = Env::new();
    let proj = tempfile::tempdir().unwrap();
    let enc = proj
        .path()
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .replace('/', "-");
    let dir = env
        .agent
        .as_path()
        .join("sessions")
        .join(format!("--{enc}--"));
    fs_err::create_dir_all(&dir).unwrap();
    let src = scenario("s01-plain-text");
    let copy = dir.join(src.file_name().unwrap());
    fs_err::copy(&src, &copy).unwrap();
    let out = env
        .bh()
        .current_dir(proj.path())
        .args(["session", "show", "01a22bed"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(first, format!("file:      {}", copy.display()));
    let out = env
        .bh()
        .current_dir(proj.path())
        .args(["--json", "session", "show", "01a22bed"])
        .output()
        .unwrap();
    assert_eq!(json_of(&out.stdout)["file"], copy.display().to_string());
}

#[test]
fn validate_of_a_file_that_is_not_a_session_lists_a_few_problems_then_counts() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("page.html");
    let body: String = (0..300).map(|i| format!("<p>line {i}</p>\n")).collect();
    fs_err::write(&html, format!("<html>\n{body}")).unwrap();
    let out = env
        .bh()
        .args(["session", "validate"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() <= 22, "{} lines", lines.len());
    assert!(
        lines.last().unwrap().contains("282 more problem(s)"),
        "{text}"
    );
    // --all lists every one; --json always does.
    let all = env
        .bh()
        .args(["session", "validate", "--all"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(all.stdout).unwrap().lines().count(), 303);
    let json = env
        .bh()
        .args(["--json", "session", "validate"])
        .arg(&html)
        .output()
        .unwrap();
    let v = json_of(&json.stdout);
    assert_eq!(v["files"][0]["problems"].as_array().unwrap().len(), 302);
}
