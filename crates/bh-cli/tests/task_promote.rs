//! `bh task run` validation, promotion and artifacts (issues 21 and 27):
//! retargeted links, bounded patches, the state written before cleanup,
//! untracked files judged only where promotion would overwrite them, the
//! user's identity on `--commit`, programs under `/tmp`, and outcomes worded
//! for people.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use assert_cmd::prelude::*;
use bh_test_support::TestRepo;
use serde_json::Value;

struct Env {
    t: TestRepo,
    state: PathBuf,
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.write("README.md", "# readme\n");
        t.write(".gitignore", "*.secret\n");
        t.commit_all("base");
        Env {
            state: t.root.join("state"),
            t,
        }
    }

    fn bh(&self, args: &[&str]) -> Output {
        Command::cargo_bin("bh")
            .unwrap()
            .current_dir(&self.t.dir)
            .env("HOME", &self.t.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("BH_STATE_DIR", &self.state)
            .env_remove("BH_TASK_SESSION")
            .env_remove("XDG_CONFIG_HOME")
            .args(args)
            .output()
            .unwrap()
    }

    /// `bh [--json] task run <flags> -- sh -c SCRIPT`.
    fn run(&self, json: bool, flags: &[&str], script: &str) -> Output {
        let mut args = Vec::new();
        if json {
            args.push("--json");
        }
        args.extend(["task", "run"]);
        args.extend(flags);
        args.extend(["--", "sh", "-c", script]);
        self.bh(&args)
    }

    /// `bh --json task run <flags> -- sh -c SCRIPT`: (exit code, the task).
    fn task(&self, flags: &[&str], script: &str) -> (i32, Value) {
        let out = self.run(true, flags, script);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let doc = doc.get("task").cloned().unwrap_or(doc);
        (out.status.code().unwrap(), doc)
    }

    fn head(&self) -> String {
        self.t.git(&["rev-parse", "HEAD"])
    }
}

/// Issue 21: a tracked link retargeted at the user's hooks is judged like a
/// new link, never promoted.
#[test]
fn a_retargeted_link_is_judged_like_a_new_one() {
    let env = Env::new();
    fs::os::unix::fs::symlink("lib.rs", env.t.dir.join("src/link")).unwrap();
    let base = env.t.commit_all("a link");
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "ln -sfn ../.git/hooks/pre-commit src/link && git commit -qam retarget",
    );
    assert_eq!(code, 6, "{doc}");
    assert_eq!(doc["outcome"], "rejected", "{doc}");
    assert!(
        doc["violations"].to_string().contains("symbolic link"),
        "{doc}"
    );
    assert_eq!(env.head(), base, "nothing promoted");
    assert_eq!(
        fs::read_link(env.t.dir.join("src/link")).unwrap(),
        PathBuf::from("lib.rs")
    );
}
