//! `bh task` through the CLI: adversarial workers on real repositories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::PathBuf;
use std::process::Command;

use bh_test_support::TestRepo;
use serde_json::Value;

/// A repository with `src/`, a README and a `.gitignore` at its base, plus
/// a state folder for bh.
struct Env {
    t: TestRepo,
    w: bh_test_support::cli::World,
    repo: PathBuf,
    state: PathBuf,
}

impl std::ops::Deref for Env {
    type Target = TestRepo;
    fn deref(&self) -> &TestRepo {
        &self.t
    }
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.write("README.md", "# readme\n");
        t.write(".gitignore", "target/\n");
        t.commit_all("base");
        let w = crate::world_at(&t.root);
        Env {
            repo: t.dir.clone(),
            state: w.state.clone(),
            w,
            t,
        }
    }

    /// `bh` in the repository, in this test's world.
    fn bh(&self) -> Command {
        self.w.bh(&self.repo)
    }

    /// `bh --json task run <flags> -- sh -c SCRIPT`; returns (exit code, JSON).
    fn task(&self, flags: &[&str], script: &str) -> (i32, Value) {
        let out = self
            .bh()
            .env("SOURCE", &self.repo)
            .args(["--json", "task", "run"])
            .args(flags)
            .args(["--env", "SOURCE", "--", "sh", "-c", script])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), doc)
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }
}

fn task_doc(doc: &Value) -> &Value {
    doc.get("task").unwrap_or(doc)
}

#[test]
fn an_allowed_change_is_promoted_by_fast_forward() {
    let env = Env::new();
    let base = env.head();
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "echo 'pub fn b() {}' >> src/lib.rs && git commit -qam work",
    );
    let t = task_doc(&doc);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(t["outcome"], "promoted");
    let head = env.head();
    assert_ne!(head, base);
    assert_eq!(t["candidate"], head.as_str());
    // index and files moved with the branch; the worktree is gone
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert!(
        fs::read_to_string(env.repo.join("src/lib.rs"))
            .unwrap()
            .contains("fn b")
    );
    assert_eq!(
        env.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    let artifacts = PathBuf::from(t["artifacts"].as_str().unwrap());
    assert!(artifacts.join("state.json").exists() && artifacts.join("task.json").exists());
    assert!(artifacts.starts_with(&env.state));
}

#[test]
fn a_forbidden_change_is_rejected_and_kept_for_inspection() {
    let env = Env::new();
    let base = env.head();
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "echo hijack > README.md && git commit -qam sneak && git revert --no-edit HEAD >/dev/null",
    );
    let t = task_doc(&doc);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(t["outcome"], "rejected");
    assert_eq!(doc["error"]["kind"], "invalid");
    assert!(t["violations"].to_string().contains("README.md"));
    assert_eq!(env.head(), base, "the source is unchanged");
    let kept = t["kept_ref"].as_str().unwrap();
    assert!(kept.starts_with("refs/better-harness/tasks/"));
    assert_eq!(
        env.git(&["rev-parse", kept]),
        t["candidate"].as_str().unwrap()
    );
    let artifacts = PathBuf::from(t["artifacts"].as_str().unwrap());
    assert!(fs::metadata(artifacts.join("rejected.patch")).is_ok());
}

#[test]
fn uncommitted_work_protected_files_and_links_are_rejected() {
    let env = Env::new();
    let (head, status) = (env.head(), env.git(&["status", "--porcelain"]));
    for (script, needle) in [
        ("echo x >> src/lib.rs", "uncommitted change"),
        (
            "echo '*.log' >> src/.gitignore && git add -A && git commit -qm i",
            "protected",
        ),
        (
            "ln -s /etc/passwd src/leak && git add -A && git commit -qm l",
            "symbolic link",
        ),
        (
            "git mv src/lib.rs lib.rs && git commit -qm mv",
            "outside the granted scope",
        ),
        (
            "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),src/sub && git commit -qm g",
            "gitlink",
        ),
    ] {
        let (code, doc) = env.task(&["--module", "src", "--promote"], script);
        assert_eq!(code, 6, "{script}: {doc}");
        assert!(
            task_doc(&doc)["violations"].to_string().contains(needle),
            "{script}: {doc}"
        );
        assert_eq!(
            (env.head(), env.git(&["status", "--porcelain"])),
            (head.clone(), status.clone())
        );
    }
}

#[test]
fn failures_and_timeouts_have_their_own_outcomes() {
    let env = Env::new();
    let out = env
        .bh()
        .args([
            "--json",
            "task",
            "run",
            "--module",
            "src",
            "--",
            "no-such-command-xyz",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        task_doc(&doc)["reasons"]
            .to_string()
            .contains("no-such-command-xyz"),
        "{doc}"
    );
    assert_eq!(
        env.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    let (code, doc) = env.task(
        &["--module", "src"],
        "echo noise >&2; echo '*** Please tell me who you are.' >&2; exit 3",
    );
    assert_eq!(code, 9, "{doc}");
    assert_eq!(task_doc(&doc)["outcome"], "failed");
    assert!(
        task_doc(&doc)["reasons"]
            .to_string()
            .contains("exited with code 3: noise / *** Please tell me who you are."),
        "the failure says why: {doc}"
    );
    let (code, doc) = env.task(&["--module", "src", "--timeout", "1s"], "sleep 30");
    assert_eq!(code, 7, "{doc}");
    assert_eq!(task_doc(&doc)["outcome"], "timed-out");
}

#[test]
fn without_the_sandbox_the_second_line_still_catches_tampering() {
    let env = Env::new();
    let (code, doc) = env.task(
        &["--module", "src", "--no-sandbox"],
        "git -C \"$SOURCE\" config core.fsmonitor 'touch /tmp/pwned'",
    );
    let t = task_doc(&doc);
    assert_eq!(code, 5, "{doc}");
    assert_eq!(t["outcome"], "untrusted");
    assert_eq!(t["no_sandbox"], true);
    assert!(t["reasons"].to_string().contains("config changed"), "{doc}");
    assert!(
        PathBuf::from(t["worktree"].as_str().unwrap()).exists(),
        "kept for inspection"
    );
    let task_json =
        fs::read_to_string(PathBuf::from(t["artifacts"].as_str().unwrap()).join("task.json"))
            .unwrap();
    let task_json: Value = serde_json::from_str(&task_json).unwrap();
    assert_eq!(task_json["no_sandbox"], true, "{task_json}");
    env.git(&["config", "--unset", "core.fsmonitor"]);
    // the user's branch moved by the worker: untrusted, never promoted
    let (code, doc) = env.task(
        &["--module", "src", "--promote", "--no-sandbox"],
        "echo 'pub fn c() {}' >> src/lib.rs && git commit -qam work && \
         git -C \"$SOURCE\" commit -q --allow-empty -m 'user commit meanwhile'",
    );
    assert_eq!(code, 5, "{doc}");
    assert!(
        task_doc(&doc)["reasons"]
            .to_string()
            .contains("refs/heads/main"),
        "{doc}"
    );
    assert_eq!(
        env.git(&["log", "-1", "--format=%s"]),
        "user commit meanwhile"
    );
}

#[test]
fn preflight_refuses_dirty_sources_and_nested_sessions() {
    let env = Env::new();
    // hidden with assume-unchanged: still dirty (promotion needs HEAD)
    env.write("README.md", "# edited\n");
    env.git(&["update-index", "--assume-unchanged", "README.md"]);
    let (code, doc) = env.task(&["--module", "src", "--promote"], "true");
    assert_eq!(code, 3, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not clean")
    );
    env.git(&["update-index", "--no-assume-unchanged", "README.md"]);
    env.git(&["checkout", "--", "README.md"]);
    // an untracked file (even hidden with info/exclude) that no promotion
    // would overwrite: not the task's business (task_promote.rs has those
    // that would be)
    fs::write(env.repo.join(".git/info/exclude"), "stray.txt\n").unwrap();
    env.write("stray.txt", "x");
    let (code, doc) = env.task(&["--module", "src", "--promote"], "true");
    assert_eq!(code, 0, "{doc}");
    fs::remove_file(env.repo.join("stray.txt")).unwrap();
    // nested: marker set, and a worker starting a task from inside its worktree
    let out = env
        .bh()
        .env("BH_TASK_SESSION", "1")
        .args(["--json", "task", "run", "--module", "src", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // The worker sees a private /tmp: wherever the build put `bh` (CI may
    // build under /tmp), a copy in the state folder (visible, read-only to
    // the worker) is what it runs.
    let bin = env.state.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let bh = bin.join("bh");
    fs::copy(env.w.bin(), &bh).unwrap();
    let (code, doc) = env.task(
        &["--module", "src"],
        &format!(
            "env -u BH_TASK_SESSION {} --json task run --module src -- true; test $? -eq 3",
            bh.display()
        ),
    );
    assert_eq!(code, 0, "the inner task must be refused: {doc}");
    // unknown module and a path outside
    let (code, _) = env.task(&["--module", "nope"], "true");
    assert_eq!(code, 4);
    let (code, _) = env.task(&["--module", "../x"], "true");
    assert_eq!(code, 2);
}

#[test]
fn a_daemon_left_behind_never_writes_after_the_worker() {
    let env = Env::new();
    let marker = env.root.join("late-write");
    let (code, doc) = env.task(
        &["--module", "src"],
        &format!(
            "setsid sh -c 'sleep 1; echo late > {}' & exit 0",
            marker.display()
        ),
    );
    assert_eq!(code, 0, "{doc}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!marker.exists());
}

#[test]
fn show_reads_the_recorded_state() {
    let env = Env::new();
    let (_, doc) = env.task(&["--module", "src"], "exit 4");
    let t = task_doc(&doc);
    let dir = t["artifacts"].as_str().unwrap();
    assert!(
        dir.ends_with(t["id"].as_str().unwrap()),
        "the folder is named after the task"
    );
    let out = env.bh().args(["task", "show", dir]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("failed") && text.contains("exited with code 4"),
        "{text}"
    );
    let out = env
        .bh()
        .args(["task", "show", "/no/such/task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn moving_the_worktree_or_hiding_work_is_caught() {
    let env = Env::new();
    let (code, doc) = env.task(&["--module", "src"], r#"mv "$PWD" "$PWD-moved""#);
    assert_eq!(code, 9, "{doc}");
    assert!(
        task_doc(&doc)["reasons"]
            .to_string()
            .contains("Read-only file system"),
        "{doc}"
    );
    // its own repository replaced or its objects cut off: nothing to judge
    for script in [
        "rm -rf .git && git init -q",
        "echo /nowhere > .git/objects/info/alternates",
    ] {
        let (code, doc) = env.task(&["--module", "src"], script);
        assert_eq!(code, 6, "{script}: {doc}");
        assert!(
            task_doc(&doc)["reasons"]
                .to_string()
                .contains("cannot read the worker's repository"),
            "{script}: {doc}"
        );
    }
    let (code, doc) = env.task(
        &["--module", "src"],
        "echo hidden >> src/lib.rs && git update-index --assume-unchanged src/lib.rs",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(
        task_doc(&doc)["violations"]
            .to_string()
            .contains("uncommitted change"),
        "{doc}"
    );
    let (code, doc) = env.task(
        &["--module", "."],
        "git rm -q .gitignore && git commit -qm rm",
    );
    assert_eq!(code, 2, "`.` is not a literal module path: {doc}");
    let (code, doc) = env.task(
        &["--module", "src", "--allow-path", "README.md"],
        "git rm -q .gitignore && git commit -qm rm",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(
        task_doc(&doc)["violations"]
            .to_string()
            .contains("protected"),
        "{doc}"
    );
}

#[test]
fn an_interrupted_task_keeps_its_worktree() {
    let env = Env::new();
    let child = env
        .bh()
        .args([
            "--json", "task", "run", "--module", "src", "--", "sleep", "30",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // wait until the worker runs in its worktree
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(30) {
        let running = fs::read_dir(env.state.join("tasks"))
            .map(|rd| rd.flatten().any(|e| e.path().join("worktree/src").exists()))
            .unwrap_or(false);
        if running {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = task_doc(&doc);
    assert_eq!(t["outcome"], "interrupted");
    assert!(PathBuf::from(t["worktree"].as_str().unwrap()).exists());
    // Worded for people (issue 27.14 had "was interrupted: interrupted").
    let err = doc["error"]["message"].as_str().unwrap();
    assert!(
        err.contains("was interrupted: bh was asked to stop")
            && !err.contains("interrupted: interrupted"),
        "{doc}"
    );
    assert!(
        t["reasons"][0]
            .as_str()
            .unwrap()
            .contains("the worker's repository is kept"),
        "{doc}"
    );
}
