//! `bh checkpoint show`, `bh checkpoint diff A B [-- PATH…]`, coloured diffs,
//! and `latest` after a restore, through the CLI on real repositories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

struct Env {
    w: bh_test_support::cli::World,
    project: PathBuf,
}

impl Env {
    fn new() -> Env {
        let w = crate::world();
        let env = Env {
            project: w.root.join("project"),
            w,
        };
        fs::create_dir_all(&env.project).unwrap();
        env
    }

    fn write(&self, rel: &str, text: &str) {
        fs::write(self.project.join(rel), text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.project.join(rel)).unwrap()
    }

    fn bh(&self) -> Command {
        self.w.bh(&self.project)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.bh().args(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.bh().arg("--json").args(args).output().unwrap();
        assert!(out.status.success(), "bh {args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn json_err(&self, args: &[&str], code: i32) -> Value {
        let out = self.bh().arg("--json").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "bh {args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn snapshot_id(&self) -> String {
        let doc = self.json(&["checkpoint", "snapshot"]);
        doc["snapshot"]["checkpoint"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

fn text(out: &Output) -> String {
    format!(
        "[{}] {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn paths(entries: &Value) -> Vec<(String, String)> {
    entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap().to_owned(),
                e["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[test]
fn show_names_the_checkpoint_and_what_changed_since_the_one_before() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    env.write("b.txt", "bee\n");
    let first = env.snapshot_id();
    env.write("a.txt", "two\n");
    env.write("c.txt", "sea\n");
    let second = env.snapshot_id();

    let doc = env.json(&["checkpoint", "show", &second[..6]]);
    assert_eq!(doc["show"]["to"]["id"], second.as_str());
    assert_eq!(doc["show"]["from"]["id"], first.as_str());
    assert_eq!(
        paths(&doc["show"]["entries"]),
        vec![pair("M", "a.txt"), pair("A", "c.txt")]
    );
    // The first checkpoint: everything it holds, against the empty tree.
    let doc = env.json(&["checkpoint", "show", &first]);
    assert!(doc["show"]["from"].is_null());
    assert_eq!(
        paths(&doc["show"]["entries"]),
        vec![pair("A", "a.txt"), pair("A", "b.txt")]
    );

    let out = env.run(&["checkpoint", "show", &second]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("checkpoint {second} (snapshot)")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("changes since checkpoint {first}")),
        "{shown}"
    );
    assert!(shown.contains("2 files changed"), "diffstat: {shown}");
    let taken = shown.lines().find(|l| l.starts_with("taken")).unwrap();
    assert!(
        taken.ends_with("s ago, before tool manual") && !taken.contains("ago ago"),
        "{taken}"
    );
    let out = env.run(&["checkpoint", "show", &second, "--patch"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("-one") && shown.contains("+two"), "{shown}");

    env.json_err(&["checkpoint", "show", "deadbeef"], 4);
    env.json_err(&["checkpoint", "show", "zz"], 2);
}

#[test]
fn diff_between_two_checkpoints_and_paths_after_the_separator() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    env.write("b.txt", "bee\n");
    let first = env.snapshot_id();
    env.write("a.txt", "two\n");
    env.write("b.txt", "bumble\n");
    let second = env.snapshot_id();
    env.write("a.txt", "three\n");

    let doc = env.json(&["checkpoint", "diff", &first, &second]);
    assert_eq!(doc["diff"]["from"]["id"], first.as_str());
    assert_eq!(doc["diff"]["to"]["id"], second.as_str());
    assert_eq!(
        paths(&doc["diff"]["entries"]),
        vec![pair("M", "a.txt"), pair("M", "b.txt")]
    );
    let out = env.run(&["checkpoint", "diff", &first, &second, "--", "b.txt"]);
    let patch = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        patch.contains("+bumble") && !patch.contains("a.txt"),
        "{patch}"
    );
    // One id and a path: the working tree, as before.
    let doc = env.json(&["checkpoint", "diff", &second, "a.txt"]);
    assert_eq!(paths(&doc["diff"]["entries"]), vec![pair("M", "a.txt")]);
    assert_eq!(doc["diff"]["checkpoint"]["id"], second.as_str());
    // A gone path goes after `--`; unnamed it is neither id nor path.
    fs::remove_file(env.project.join("b.txt")).unwrap();
    let err = env.json_err(&["checkpoint", "diff", &second, "b.txt"], 4);
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(msg.contains("b.txt") && msg.contains("--"), "{msg}");
    let doc = env.json(&["checkpoint", "diff", &second, "--", "b.txt"]);
    assert_eq!(paths(&doc["diff"]["entries"]), vec![pair("D", "b.txt")]);
    // Before the fix, a second id that matched nothing was a path and the
    // command said nothing with exit 0.
    let err = env.json_err(&["checkpoint", "diff", &first, "deadbeef"], 4);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadbeef")
    );
}

#[test]
fn diffs_are_coloured_only_when_asked_or_on_a_terminal() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    let id = env.snapshot_id();
    env.write("a.txt", "two\n");
    let plain = env.run(&["checkpoint", "diff", &id]);
    assert!(!plain.stdout.contains(&0x1b), "a pipe gets no colour");
    let always = env.run(&["checkpoint", "diff", &id, "--color=always"]);
    let coloured = String::from_utf8_lossy(&always.stdout);
    assert!(coloured.contains("\x1b[31m-one\x1b[m"), "{coloured}");
    assert!(coloured.contains("\x1b[32m+two\x1b[m"), "{coloured}");
    let never = env.run(&["checkpoint", "diff", &id, "--color", "never"]);
    assert_eq!(never.stdout, plain.stdout);
    let json = env.run(&["--json", "checkpoint", "diff", &id, "--color=always"]);
    assert!(!json.stdout.contains(&0x1b), "never in --json");
    let bad = env.run(&["checkpoint", "diff", &id, "--color=sometimes"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

#[test]
fn latest_after_a_restore_skips_the_pre_restore_checkpoint() {
    let env = Env::new();
    env.write("a.txt", "good\n");
    let good = env.snapshot_id();
    env.write("a.txt", "damage\n");
    env.write("junk.txt", "junk\n");
    let restore = env.json(&["checkpoint", "restore", &good, "--exact"]);
    let safety = restore["restore"]["safety"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(env.read("a.txt"), "good\n");
    // The trap: `latest` used to name the pre-restore checkpoint, so this
    // re-applied the damage.
    let out = env.run(&["checkpoint", "restore", "latest", "--exact"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.read("a.txt"), "good\n");
    assert!(!env.project.join("junk.txt").exists());
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains(&safety) && note.contains("pre-restore"),
        "{note}"
    );
    let doc = env.json(&["checkpoint", "show", "latest"]);
    assert_eq!(doc["show"]["to"]["id"], good.as_str());
    // The undo point is still there, by id.
    env.json(&["checkpoint", "restore", &safety, "--exact"]);
    assert_eq!(env.read("a.txt"), "damage\n");
    assert_eq!(env.read("junk.txt"), "junk\n");
}
