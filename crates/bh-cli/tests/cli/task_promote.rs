//! `bh task run` validation, promotion and artifacts (issues 21 and 27):
//! retargeted links, bounded patches, the state written before cleanup,
//! untracked files judged only where promotion would overwrite them, the
//! user's identity on `--commit`, programs under `/tmp`, and outcomes worded
//! for people.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::PathBuf;
use std::process::{Command, Output};

use bh_test_support::TestRepo;
use serde_json::Value;

struct Env {
    t: TestRepo,
    w: bh_test_support::cli::World,
    state: PathBuf,
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.write("README.md", "# readme\n");
        t.write(".gitignore", "*.secret\n");
        t.commit_all("base");
        let w = crate::world_at(&t.root);
        Env {
            state: w.state.clone(),
            w,
            t,
        }
    }

    fn bh(&self, args: &[&str]) -> Output {
        self.w.bh(&self.t.dir).args(args).output().unwrap()
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

/// Issue 21: the state is written before the worker's repository is
/// removed; a tree that cannot be removed keeps the outcome and says so.
/// As root (an immutable file, outside the sandbox: chattr needs the
/// worker's own capabilities) and as an unprivileged user (a folder without
/// write permission, in the sandbox; as root, bh is re-run as nobody).
#[test]
fn an_undeletable_worker_repository_keeps_the_outcome() {
    if !nix::unistd::geteuid().is_root() {
        undeletable(false, false);
        return;
    }
    undeletable(false, true);
    undeletable(true, false);
}

fn undeletable(as_nobody: bool, immutable: bool) {
    let env = Env::new();
    if immutable {
        let probe = env.t.root.join("probe");
        fs::write(&probe, "x").unwrap();
        let ok = Command::new("chattr")
            .arg("+i")
            .arg(&probe)
            .status()
            .is_ok_and(|s| s.success());
        let _ = Command::new("chattr").arg("-i").arg(&probe).status();
        if !ok {
            eprintln!(
                "skipped: chattr +i does not work here (needed to make a tree undeletable as root)"
            );
            return;
        }
    }
    let (flags, lock): (&[&str], &str) = if immutable {
        (&["--module", "src", "--no-sandbox"], "chattr +i src/d/f")
    } else {
        (&["--module", "src"], "chmod a-w src/d")
    };
    let script =
        format!("mkdir src/d && echo x > src/d/f && git add -A && git commit -qm d && {lock}");
    let out = if as_nobody {
        // A copy of bh nobody can reach, on files nobody owns.
        let bin = env.t.root.join("bh");
        fs::copy(env.w.bin(), &bin).unwrap();
        chown_r(&env.t.root);
        env.w
            .command("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .current_dir(&env.t.dir)
            .args(["--json", "task", "run"])
            .args(flags)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap()
    } else {
        env.run(true, flags, &script)
    };
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let doc = doc.get("task").cloned().unwrap_or(doc);
    let worktree = PathBuf::from(doc["worktree"].as_str().unwrap_or_default());
    // Let the temporary folder go again.
    if immutable {
        let _ = Command::new("chattr")
            .arg("-i")
            .arg(worktree.join("src/d/f"))
            .status();
    } else {
        let _ = Command::new("chmod")
            .arg("u+w")
            .arg(worktree.join("src/d"))
            .status();
    }
    assert_eq!(out.status.code(), Some(0), "{doc}");
    assert_eq!(doc["outcome"], "succeeded", "the outcome is kept: {doc}");
    assert!(worktree.join("src/d").exists(), "{doc}");
    assert!(
        doc["notes"].to_string().contains("could not be removed"),
        "{doc}"
    );
    let artifacts = PathBuf::from(doc["artifacts"].as_str().unwrap());
    let state: Value =
        serde_json::from_str(&fs::read_to_string(artifacts.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["outcome"], "succeeded");
    assert_eq!(state["notes"], doc["notes"]);
}

fn chown_r(path: &std::path::Path) {
    fs::os::unix::fs::lchown(path, Some(65534), Some(65534)).unwrap();
    if fs::symlink_metadata(path).unwrap().is_dir() {
        for e in fs::read_dir(path).unwrap() {
            chown_r(&e.unwrap().path());
        }
    }
}

/// Issue 27.4: a promoted `--commit` task is by the user (their Git
/// configuration, not the repository's) and carries their `--message`.
#[test]
fn a_committed_task_is_by_the_user_with_their_message() {
    let env = Env::new();
    env.t.git(&["config", "--unset", "user.name"]);
    env.t.git(&["config", "--unset", "user.email"]);
    fs::write(
        env.t.home.join(".gitconfig"),
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n",
    )
    .unwrap();
    let (code, doc) = env.task(
        &[
            "--module",
            "src",
            "--commit",
            "--promote",
            "--message",
            "Add b\n\nWritten by the agent.",
        ],
        "echo 'pub fn b() {}' >> src/lib.rs",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["outcome"], "promoted", "{doc}");
    assert_eq!(
        env.t.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>|%B"]),
        "Ada Lovelace <ada@example.invalid>|Ada Lovelace <ada@example.invalid>|Add b\n\nWritten by the agent."
    );
    // Without --message the commit names the task and its command.
    let (code, doc) = env.task(
        &["--module", "src", "--commit", "--promote"],
        "echo 'pub fn c() {}' >> src/lib.rs",
    );
    assert_eq!(code, 0, "{doc}");
    let subject = env.t.git(&["log", "-1", "--format=%an|%s"]);
    assert!(
        subject.starts_with("Ada Lovelace|bh task ")
            && subject.contains(doc["id"].as_str().unwrap())
            && subject.contains("sh -c echo"),
        "{subject}"
    );
    // --message belongs to --commit.
    let out = env.run(true, &["--module", "src", "--message", "x"], "true");
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 27.3: untracked files are the user's business until promotion
/// would overwrite one; then the promotion is refused and names it.
#[test]
fn untracked_files_are_refused_only_where_promotion_would_overwrite_them() {
    let env = Env::new();
    let base = env.head();
    env.t.write("notes.txt", "mine\n");
    env.t.write("src/scratch.txt", "mine\n");
    env.t.write("src/gen.secret", "my secret\n");
    env.t.write("src/out.secret", "my other secret\n");
    // Without --promote nothing in the checkout matters.
    let (code, doc) = env.task(
        &["--module", "src"],
        "echo 'pub fn b() {}' >> src/lib.rs && git commit -qam b",
    );
    assert_eq!(code, 0, "{doc}");
    // An ignored file at a path the candidate adds, or a file where it
    // needs a folder: git would overwrite it; refused, named, nothing lost.
    for (script, path) in [
        (
            "echo theirs > src/gen.secret && git add -f src/gen.secret && git commit -qm s",
            "src/gen.secret",
        ),
        (
            "mkdir src/out.secret && echo x > src/out.secret/x.rs && git add -f src/out.secret && git commit -qm o",
            "src/out.secret",
        ),
    ] {
        let (code, doc) = env.task(&["--module", "src", "--promote"], script);
        assert_eq!(code, 6, "{script}: {doc}");
        assert_eq!(doc["outcome"], "rejected", "{doc}");
        let reasons = doc["reasons"].to_string();
        assert!(
            reasons.contains("would overwrite") && reasons.contains(path),
            "{doc}"
        );
        assert_eq!(env.head(), base);
    }
    assert_eq!(env.t.read("src/gen.secret"), "my secret\n");
    assert_eq!(env.t.read("src/out.secret"), "my other secret\n");
    // Untracked files elsewhere do not stop a promotion.
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "echo 'pub fn b() {}' >> src/lib.rs && echo new > src/new.rs && git add -A && git commit -qm b",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["outcome"], "promoted", "{doc}");
    assert_eq!(env.t.read("src/scratch.txt"), "mine\n");
    assert_eq!(env.t.read("notes.txt"), "mine\n");
    assert_eq!(env.t.read("src/new.rs"), "new\n");
    // A tracked file changed in the checkout is still refused under
    // --promote, and the refusal says why.
    env.t.write("README.md", "edited\n");
    let (code, doc) = env.task(&["--module", "src", "--promote"], "true");
    assert_eq!(code, 3, "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("README.md") && message.contains("--promote"),
        "{message}"
    );
    let (code, doc) = env.task(&["--module", "src"], "true");
    assert_eq!(code, 0, "without --promote a task starts from HEAD: {doc}");
}

/// Issue 21: a few KiB of objects (one compressible file) must not become a
/// patch of hundreds of MiB: both patches are cut at their limit, the
/// outcome says so, and the work stays whole under its ref.
#[test]
fn patches_are_cut_at_their_limit_and_the_outcome_says_so() {
    let env = Env::new();
    // 40 MB of one repeated line: about 40 KiB of objects.
    let (code, doc) = env.task(
        &["--module", "src"],
        "yes 'the same line again and again' | head -c 40000000 > src/big.txt && git add -A && git commit -qm big",
    );
    assert_eq!(code, 0, "{doc}");
    let artifacts = PathBuf::from(doc["artifacts"].as_str().unwrap());
    let patch = fs::metadata(artifacts.join("work.patch")).unwrap().len();
    assert!(patch <= (16 << 20) + 512, "work.patch is {patch} bytes");
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("work.patch was cut") && notes.contains(doc["kept_ref"].as_str().unwrap()),
        "{doc}"
    );
    let kept = doc["kept_ref"].as_str().unwrap();
    assert_eq!(
        env.t
            .git(&["cat-file", "-s", &format!("{kept}:src/big.txt")]),
        "40000000",
        "the work itself is whole"
    );
    // A rejected one, with a smaller limit: rejected.patch too.
    let (code, doc) = env.task(
        &["--module", "src", "--patch-limit", "64KiB"],
        "yes 'again' | head -c 1000000 > src/big.txt && echo x >> README.md && git add -A && git commit -qm big",
    );
    assert_eq!(code, 6, "{doc}");
    let artifacts = PathBuf::from(doc["artifacts"].as_str().unwrap());
    for name in ["work.patch", "rejected.patch"] {
        let text = fs::read_to_string(artifacts.join(name)).unwrap();
        assert!(text.len() <= (64 << 10) + 512, "{name}: {}", text.len());
        assert!(text.trim_end().ends_with(&format!(
            "# bh: cut at 65536 bytes; the whole diff: git diff --binary {} {}",
            doc["base"].as_str().unwrap(),
            doc["work"].as_str().unwrap()
        )));
        assert!(
            doc["notes"]
                .to_string()
                .contains(&format!("{name} was cut"))
        );
    }
    // A small diff is whole and says nothing about a cut.
    let (code, doc) = env.task(
        &["--module", "src"],
        "echo 'pub fn b() {}' >> src/lib.rs && git commit -qam b",
    );
    assert_eq!(code, 0, "{doc}");
    assert!(!doc["notes"].to_string().contains("cut"), "{doc}");
    let artifacts = PathBuf::from(doc["artifacts"].as_str().unwrap());
    let text = fs::read_to_string(artifacts.join("work.patch")).unwrap();
    assert!(text.ends_with("+pub fn b() {}\n"), "{text}");
}

/// Issue 27.5: a program kept under `/tmp` is hidden by the sandbox's
/// private `/tmp`; the failure says so and what to do, and `--allow-read`
/// carries its folder over.
#[test]
fn a_program_under_tmp_is_named_with_what_to_do() {
    let env = Env::new();
    let tools = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let tools = fs::canonicalize(tools.path()).unwrap();
    let prog = tools.join("mytool");
    fs::write(&prog, "#!/bin/sh\necho tool-ran\n").unwrap();
    Command::new("chmod").arg("+x").arg(&prog).status().unwrap();
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |cmd: &[&str], extra: &[&str]| -> (i32, Value) {
        let out = env
            .w
            .bh(&env.t.dir)
            .env("PATH", &path)
            .args(["--json", "task", "run", "--module", "src"])
            .args(extra)
            .arg("--")
            .args(cmd)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let doc = doc.get("task").cloned().unwrap_or(doc);
        (out.status.code().unwrap(), doc)
    };
    let prog_s = prog.to_str().unwrap();
    for cmd in [vec![prog_s], vec!["mytool"], vec!["sh", prog_s]] {
        let (code, doc) = run(&cmd, &[]);
        assert_eq!(code, 9, "{cmd:?}: {doc}");
        let reasons = doc["reasons"].to_string();
        assert!(
            reasons.contains(&format!(
                "{prog_s} lies under /tmp, which the sandbox replaces with a private one: pass --allow-read {} to carry it over read-only, or install it elsewhere",
                tools.display()
            )),
            "{cmd:?}: {doc}"
        );
    }
    let (code, doc) = run(&[prog_s], &["--allow-read", tools.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc}");
    let log = PathBuf::from(doc["artifacts"].as_str().unwrap()).join("stdout.log");
    assert_eq!(fs::read_to_string(log).unwrap(), "tool-ran\n");
    // A failure that has nothing to do with /tmp gets no such hint.
    let (code, doc) = run(&["sh", "-c", "exit 3"], &[]);
    assert_eq!(code, 9, "{doc}");
    assert!(!doc["reasons"].to_string().contains("/tmp"), "{doc}");
}

/// A file-system error names its path once: `fs_err` already names it, so
/// bh adds no "cannot open X: failed to open file `X`" of its own. Here the
/// promotion lock is a folder.
#[test]
fn a_file_system_error_names_its_path_once() {
    let env = Env::new();
    let common = env
        .t
        .git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    let hash = Command::new("sh")
        .arg("-c")
        .arg("printf %s \"$1\" | sha256sum")
        .arg("sh")
        .arg(common.trim())
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    let lock = env
        .state
        .join("locks")
        .join(format!("{}.lock", &hash[..16]));
    fs::create_dir_all(&lock).unwrap();
    let o = env.run(
        false,
        &["-q", "--module", "src", "--promote"],
        "echo 'pub fn b() {}' >> src/lib.rs && git commit -qam b",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    let named = lock.display().to_string();
    assert_eq!(err.matches(&named).count(), 1, "{err}");
    assert!(err.contains("failed to open file"), "{err}");
}

/// Issue 27.3: a folder the result turns into a file takes the ignored
/// files in it along; the promotion is refused, naming them.
#[test]
fn a_folder_turned_into_a_file_keeps_the_ignored_files_in_it() {
    let env = Env::new();
    env.t.write("src/cache/x.rs", "x\n");
    let base = env.t.commit_all("cache");
    env.t.write("src/cache/data.secret", "mine\n");
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "git rm -rq src/cache && echo file > src/cache && git add src/cache && git commit -qm f",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(
        doc["reasons"].to_string().contains("src/cache/data.secret"),
        "{doc}"
    );
    assert_eq!(env.head(), base);
    assert_eq!(env.t.read("src/cache/data.secret"), "mine\n");
    // Without the ignored file the same result is promoted.
    fs::remove_file(env.t.dir.join("src/cache/data.secret")).unwrap();
    let (code, doc) = env.task(
        &["--module", "src", "--promote"],
        "git rm -rq src/cache && echo file > src/cache && git add src/cache && git commit -qm f",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(env.t.read("src/cache"), "file\n");
}
