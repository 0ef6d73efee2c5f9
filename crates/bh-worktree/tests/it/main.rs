//! `bh-worktree` on real repositories in temp dirs with real git.
//!
//! Over 600 lines: the crate's one integration binary; tests are independent and share the helpers at the top.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use bh_checkpoint::{RestoreMode, Store, StoreOptions};
use bh_git::GitRunner;
use bh_session::{Session, SessionWriter};
use bh_worktree::{
    ConsumeOutcome, CreateOptions, DisposeOptions, EnterOptions, ORIENTATION_TYPE, Stage, State,
    VERIFICATION_TYPE, WorktreeError, check_dispose, consume, create, discard, dispose, enter,
    enter_main, handoff_path, list,
};
use serde_json::json;

mod consume;

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
}

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let repo = root.join("repo");
    let home = root.join("home");
    fs::create_dir_all(&repo).unwrap();
    fs::create_dir_all(&home).unwrap();
    let f = Fx {
        _tmp: tmp,
        root,
        repo,
        home,
    };
    f.git(&["init", "-q", "-b", "main"]);
    f.write(".gitignore", ".env\n.env.*\n!.env.example\ntarget/\n");
    f.write(".env.example", "EXAMPLE=1\n");
    f.write("src/lib.rs", "pub fn a() {}\n");
    f.commit("base");
    f.write(".env", "SECRET=1\n");
    f.write(".env.production", "PROD=1\n");
    f.write(".env.local", "LOCAL=1\n");
    f
}

impl Fx {
    fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = bh_test_support::git_command()
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "W")
            .env("GIT_AUTHOR_EMAIL", "w@example.invalid")
            .env("GIT_COMMITTER_NAME", "W")
            .env("GIT_COMMITTER_EMAIL", "w@example.invalid")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.repo, args)
    }

    fn write(&self, rel: &str, text: &str) {
        write(&self.repo.join(rel), text);
    }

    fn commit(&self, msg: &str) -> String {
        commit_in(self, &self.repo, msg)
    }

    fn runner(&self) -> GitRunner {
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), self.home.clone().into_os_string()),
        ];
        GitRunner::new("git", env)
    }

    fn wt(&self, name: &str) -> PathBuf {
        self.root.join("repo.worktrees").join(name)
    }

    fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    fn agent(&self) -> PathBuf {
        self.root.join("agent")
    }

    fn create_opts(&self, name: &str) -> CreateOptions {
        CreateOptions {
            name: name.into(),
            cwd: self.repo.clone(),
            command_env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
            ..CreateOptions::default()
        }
    }

    fn dispose_opts(&self, name: &str, force: bool) -> DisposeOptions {
        DisposeOptions {
            name: name.into(),
            cwd: self.repo.clone(),
            force,
            state_dir: self.state(),
            max_file_size: 1 << 20,
        }
    }

    fn config(&self, toml: &str) {
        self.write(".better-harness/worktree.toml", toml);
    }

    fn receipt(&self, name: &str) -> serde_json::Value {
        let common = self.repo.join(".git/better-harness/worktrees");
        serde_json::from_slice(&fs::read(common.join(format!("{name}.json"))).unwrap()).unwrap()
    }

    fn branch_exists(&self, b: &str) -> bool {
        bh_test_support::git_command()
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{b}"),
            ])
            .current_dir(&self.repo)
            .output()
            .unwrap()
            .status
            .success()
    }

    fn registered(&self, path: &Path) -> bool {
        self.git(&["worktree", "list", "--porcelain"])
            .lines()
            .any(|l| l == format!("worktree {}", path.display()))
    }
}

fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn commit_in(f: &Fx, dir: &Path, msg: &str) -> String {
    f.git_in(dir, &["add", "-A"]);
    f.git_in(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
    f.git_in(dir, &["rev-parse", "HEAD"])
}

// ---------------------------------------------------------------- create

#[test]
fn create_makes_a_branch_links_env_files_and_records_a_ready_receipt() {
    let f = fx();
    let out = create(&f.runner(), &f.create_opts("feat")).unwrap();
    let wt = f.wt("feat");
    assert_eq!(out.receipt.path, wt);
    assert_eq!(out.receipt.state, State::Ready);
    assert_eq!(out.receipt.stage, Stage::Complete);
    assert_eq!(out.receipt.branch.as_deref(), Some("feat"));
    assert!(out.receipt.created_branch);
    assert_eq!(out.receipt.base, f.git(&["rev-parse", "HEAD"]));
    assert_eq!(out.receipt.env_links, vec![".env", ".env.production"]);
    assert!(f.registered(&wt));
    assert_eq!(f.git_in(&wt, &["symbolic-ref", "--short", "HEAD"]), "feat");
    for link in [".env", ".env.production"] {
        let meta = fs::symlink_metadata(wt.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link}");
        assert_eq!(fs::read_link(wt.join(link)).unwrap(), f.repo.join(link));
    }
    assert!(
        !wt.join(".env.local").exists(),
        ".env.local stays per checkout"
    );
    assert!(
        !fs::symlink_metadata(wt.join(".env.example"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "a tracked .env file is checked out, not linked"
    );
    let r = f.receipt("feat");
    assert_eq!(r["state"], "ready");
    assert_eq!(r["stage"], "complete");
    assert_eq!(r["createdBranch"], true);
    assert_eq!(r["hash"].as_str().unwrap().len(), 64);
    // The worktree is clean: linked .env files are ignored.
    assert_eq!(f.git_in(&wt, &["status", "--porcelain"]), "");

    // A second create of the same name is refused, not half-made.
    let again = create(&f.runner(), &f.create_opts("feat")).unwrap_err();
    assert!(matches!(again, WorktreeError::Refused(_)), "{again}");
}

#[test]
fn create_detached_and_on_an_existing_branch() {
    let f = fx();
    let first = f.git(&["rev-parse", "HEAD"]);
    f.write("b.txt", "b\n");
    f.commit("second");
    let mut o = f.create_opts("det");
    o.detach = true;
    o.from = Some("HEAD~1".into());
    let out = create(&f.runner(), &o).unwrap();
    assert_eq!(out.receipt.branch, None);
    assert!(!out.receipt.created_branch);
    assert_eq!(out.receipt.base, first);
    assert_eq!(f.git_in(&f.wt("det"), &["rev-parse", "HEAD"]), first);

    f.git(&["branch", "topic", &first]);
    let mut o = f.create_opts("t");
    o.branch = Some("topic".into());
    let out = create(&f.runner(), &o).unwrap();
    assert_eq!(out.receipt.branch.as_deref(), Some("topic"));
    assert!(!out.receipt.created_branch);
    assert_eq!(out.receipt.base, first);

    // --from with an existing branch is ambiguous: refused, nothing made.
    f.git(&["branch", "other"]);
    let mut o = f.create_opts("o");
    o.branch = Some("other".into());
    o.from = Some("HEAD~1".into());
    assert!(matches!(
        create(&f.runner(), &o).unwrap_err(),
        WorktreeError::Refused(_)
    ));
    assert!(!f.wt("o").exists());

    // Names are one safe path component.
    for bad in ["../x", "a/b", ".hidden", "-x", "x.lock", ""] {
        assert!(matches!(
            create(&f.runner(), &f.create_opts(bad)).unwrap_err(),
            WorktreeError::InvalidName { .. }
        ));
    }
}

#[test]
fn post_create_commands_run_in_order_in_the_worktree() {
    let f = fx();
    f.config(
        "post_create = [\"echo one > one.txt\", \"cat one.txt > two.txt; echo $BH_WORKTREE_NAME >> two.txt\"]\n",
    );
    f.commit("config");
    create(&f.runner(), &f.create_opts("p")).unwrap();
    let wt = f.wt("p");
    assert_eq!(fs::read_to_string(wt.join("two.txt")).unwrap(), "one\np\n");
    assert!(!f.repo.join("one.txt").exists());
}

#[test]
fn a_failing_post_create_command_stops_and_rolls_back() {
    let f = fx();
    f.config("post_create = [\"touch first\", \"echo boom >&2; exit 3\", \"touch never\"]\n");
    let err = create(&f.runner(), &f.create_opts("bad")).unwrap_err();
    let WorktreeError::PostCreateFailed {
        index,
        log,
        command,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(*index, 2);
    assert!(command.contains("exit 3"));
    assert!(fs::read_to_string(log).unwrap().contains("boom"));
    // Rolled back: no directory, not registered, the created branch is gone.
    assert!(!f.wt("bad").exists());
    assert!(!f.registered(&f.wt("bad")));
    assert!(!f.branch_exists("bad"));
    let r = f.receipt("bad");
    assert_eq!(r["state"], "failed");
    assert_eq!(r["stage"], "post-create");
    assert!(r["error"].as_str().unwrap().contains("exit 3"));
    // The claim was released; after fixing the config the name can be reused.
    f.config("post_create = [\"touch first\"]\n");
    let out = create(&f.runner(), &f.create_opts("bad")).unwrap();
    assert_eq!(out.receipt.state, State::Ready);
    assert!(f.wt("bad").join("first").exists());
}

#[test]
fn a_failed_rollback_keeps_a_branch_it_did_not_create() {
    let f = fx();
    f.git(&["branch", "keep"]);
    f.config("post_create = [\"exit 1\"]\n");
    let mut o = f.create_opts("k");
    o.branch = Some("keep".into());
    create(&f.runner(), &o).unwrap_err();
    assert!(f.branch_exists("keep"));
    assert!(!f.wt("k").exists());
}

#[test]
fn racing_creates_of_one_target_one_wins_the_other_is_busy() {
    let f = fx();
    f.config("post_create = [\"sleep 1\"]\n");
    let barrier = Arc::new(Barrier::new(2));
    let results: Vec<_> = (0..2)
        .map(|_| {
            let b = barrier.clone();
            let runner = f.runner();
            let o = f.create_opts("race");
            std::thread::spawn(move || {
                b.wait();
                create(&runner, &o)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let busy = results
        .iter()
        .filter(|r| matches!(r, Err(WorktreeError::Busy { .. })))
        .count();
    assert_eq!((ok, busy), (1, 1), "{results:?}");
    assert_eq!(f.receipt("race")["state"], "ready");
}

// ---------------------------------------------------------------- list

#[test]
fn list_shows_managed_and_unmanaged_with_dirty_and_unpushed() {
    let f = fx();
    let remote = f.root.join("remote.git");
    f.git(&["init", "-q", "--bare", remote.to_str().unwrap()]);
    f.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    f.git(&["push", "-q", "-u", "origin", "main"]);

    create(&f.runner(), &f.create_opts("a")).unwrap();
    let a = f.wt("a");
    f.git_in(&a, &["push", "-q", "-u", "origin", "a"]);
    write(&a.join("n1.txt"), "1");
    commit_in(&f, &a, "one");
    write(&a.join("n2.txt"), "2");
    commit_in(&f, &a, "two");
    write(&a.join("dirty.txt"), "d");
    write(&a.join("src/lib.rs"), "changed");

    let hand = f.root.join("hand");
    f.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "hand",
        hand.to_str().unwrap(),
    ]);

    f.write("main-dirty.txt", "m");

    let all = list(&f.runner(), &f.repo).unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let main = &all[0];
    assert!(main.main);
    assert_eq!(main.branch.as_deref(), Some("main"));
    assert_eq!(main.unpushed, Some(0));
    assert_eq!(main.dirty, Some(1), "the .env files are ignored");
    let a_info = all.iter().find(|w| w.path == a).unwrap();
    assert_eq!(a_info.name.as_deref(), Some("a"));
    assert_eq!(a_info.state, Some(State::Ready));
    assert_eq!(a_info.dirty, Some(2));
    assert_eq!(a_info.unpushed, Some(2));
    let h = all.iter().find(|w| w.path == hand).unwrap();
    assert_eq!(h.name, None);
    assert_eq!(h.state, None, "hand-made worktrees are unmanaged");
    assert_eq!(h.unpushed, None, "no upstream: unknown");
    assert_eq!(h.dirty, Some(0));
}

// ---------------------------------------------------------------- dispose

#[test]
fn dispose_refuses_dirty_and_unmerged_work_without_force() {
    let f = fx();
    create(&f.runner(), &f.create_opts("w")).unwrap();
    let wt = f.wt("w");
    write(&wt.join("new.txt"), "x");
    let err = dispose(&f.runner(), &f.dispose_opts("w", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("uncommitted")),
        "{err}"
    );
    commit_in(&f, &wt, "work");
    let err = dispose(&f.runner(), &f.dispose_opts("w", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("not merged")),
        "{err}"
    );
    assert!(wt.exists() && f.registered(&wt));
    assert!(
        !f.state().join("checkpoints").exists(),
        "refusals take nothing"
    );

    // Forced: removed, and the unmerged branch it created is kept.
    let out = dispose(&f.runner(), &f.dispose_opts("w", true)).unwrap();
    assert!(!wt.exists());
    assert!(!f.registered(&wt));
    assert!(!out.branch_deleted);
    assert_eq!(out.branch_kept.as_deref(), Some("not merged"));
    assert!(f.branch_exists("w"));

    let err = dispose(&f.runner(), &f.dispose_opts("w", false)).unwrap_err();
    assert!(matches!(err, WorktreeError::NotFound { .. }));
}

#[test]
fn dispose_counts_a_squash_merge_as_merged_but_keeps_the_branch() {
    let f = fx();
    create(&f.runner(), &f.create_opts("sq")).unwrap();
    let wt = f.wt("sq");
    write(&wt.join("one.txt"), "one\n");
    commit_in(&f, &wt, "one");
    write(&wt.join("two.txt"), "two\n");
    commit_in(&f, &wt, "two");
    let err = dispose(&f.runner(), &f.dispose_opts("sq", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("not merged")),
        "{err}"
    );
    // main takes both commits as one squash commit (and moves on).
    f.git(&["merge", "-q", "--squash", "sq"]);
    f.git(&["commit", "-q", "-m", "squashed sq"]);
    write(&f.repo.join("later.txt"), "later\n");
    f.git(&["add", "later.txt"]);
    f.git(&["commit", "-q", "-m", "later"]);
    let out = dispose(&f.runner(), &f.dispose_opts("sq", false)).unwrap();
    assert_eq!(
        out.merged_into,
        vec!["refs/heads/main (squashed)".to_owned()]
    );
    assert!(!wt.exists());
    // Its own commits exist nowhere else: the branch is kept, and says why.
    assert!(!out.branch_deleted);
    assert!(
        out.branch_kept
            .as_deref()
            .is_some_and(|r| r.contains("squash")),
        "{:?}",
        out.branch_kept
    );
    assert!(f.branch_exists("sq"));
}

#[test]
fn dispose_checkpoints_everything_first_and_it_can_be_restored() {
    let f = fx();
    create(&f.runner(), &f.create_opts("c")).unwrap();
    let wt = f.wt("c");
    write(&wt.join("src/lib.rs"), "pub fn changed() {}\n");
    write(&wt.join("untracked.txt"), "untracked\n");
    write(&wt.join("target/debug/out.bin"), "ignored build output\n");
    write(&wt.join(".env.local"), "WT_LOCAL=1\n");
    let head = f.git_in(&wt, &["rev-parse", "HEAD"]);

    let out = dispose(&f.runner(), &f.dispose_opts("c", true)).unwrap();
    assert!(!wt.exists());
    assert_eq!(out.dirty, 2);
    assert!(out.checkpoint.files_changed >= 1);
    let mut ignored = out.ignored.files.clone();
    ignored.sort();
    assert_eq!(
        ignored,
        vec![
            ".env",
            ".env.local",
            ".env.production",
            "target/debug/out.bin"
        ]
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(out.ignored.dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["checkpoint"], out.checkpoint.id.as_str());
    // Created branch, merged (main contains its HEAD): deleted.
    assert!(out.branch_deleted);
    assert!(!f.branch_exists("c"));

    // Restore: the same path again, then the checkpoint, then the ignored files.
    f.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        &head,
    ]);
    let store = Store::open(&f.runner(), &wt, &StoreOptions::new(f.state())).unwrap();
    store
        .restore(&out.checkpoint.id, &[], RestoreMode::Additive)
        .unwrap();
    for rel in &out.ignored.files {
        let src = out.ignored.dir.join("files").join(rel);
        let dst = wt.join(rel);
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        if fs::symlink_metadata(&src).unwrap().file_type().is_symlink() {
            fs_err::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
    assert_eq!(
        fs::read_to_string(wt.join("src/lib.rs")).unwrap(),
        "pub fn changed() {}\n"
    );
    assert_eq!(
        fs::read_to_string(wt.join("untracked.txt")).unwrap(),
        "untracked\n"
    );
    assert_eq!(
        fs::read_to_string(wt.join("target/debug/out.bin")).unwrap(),
        "ignored build output\n"
    );
    assert_eq!(
        fs::read_to_string(wt.join(".env.local")).unwrap(),
        "WT_LOCAL=1\n"
    );
    assert_eq!(fs::read_to_string(wt.join(".env")).unwrap(), "SECRET=1\n");
}

#[test]
fn dispose_deletes_only_branches_it_created_and_only_when_merged() {
    let f = fx();
    // Created and merged (no new commits): deleted without --force.
    create(&f.runner(), &f.create_opts("m")).unwrap();
    let out = dispose(&f.runner(), &f.dispose_opts("m", false)).unwrap();
    assert!(out.branch_deleted);
    assert!(!f.branch_exists("m"));

    // Existing branch checked out: merged, removed, but the branch is kept.
    f.git(&["branch", "topic"]);
    let mut o = f.create_opts("t");
    o.branch = Some("topic".into());
    create(&f.runner(), &o).unwrap();
    let out = dispose(&f.runner(), &f.dispose_opts("t", false)).unwrap();
    assert!(!out.branch_deleted);
    assert_eq!(
        out.branch_kept.as_deref(),
        Some("not created by bh worktree")
    );
    assert!(f.branch_exists("topic"));

    // Created, with a commit merged into main afterwards: deleted.
    create(&f.runner(), &f.create_opts("g")).unwrap();
    write(&f.wt("g").join("g.txt"), "g");
    commit_in(&f, &f.wt("g"), "g work");
    f.git(&["merge", "-q", "--ff-only", "g"]);
    let out = dispose(&f.runner(), &f.dispose_opts("g", false)).unwrap();
    assert!(out.branch_deleted);

    // Hand-made worktree at the default location: disposable, branch kept.
    let hand = f.wt("hand");
    f.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "hand",
        hand.to_str().unwrap(),
    ]);
    let out = dispose(&f.runner(), &f.dispose_opts("hand", false)).unwrap();
    assert!(!out.branch_deleted);
    assert!(f.branch_exists("hand"));

    // The main checkout is never disposed; locked worktrees need --force.
    let locked = f.wt("locked");
    f.git(&[
        "worktree",
        "add",
        "-q",
        "--lock",
        "--detach",
        locked.to_str().unwrap(),
    ]);
    let err = dispose(&f.runner(), &f.dispose_opts("locked", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("locked")),
        "{err}"
    );
    dispose(&f.runner(), &f.dispose_opts("locked", true)).unwrap();
    assert!(!locked.exists());
}

// ---------------------------------------------------------------- enter

fn source_session(f: &Fx, n: usize) -> (PathBuf, Vec<String>) {
    let mut w = SessionWriter::create_for_cwd(&f.agent(), &f.repo.display().to_string()).unwrap();
    let mut ids = Vec::new();
    for i in 0..n {
        let msg = if i % 2 == 0 {
            json!({"role": "user", "content": format!("turn {i}"), "timestamp": 1_700_000_000_000u64 + i as u64})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("reply {i}")}],
                   "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                   "stopReason": "stop", "timestamp": 1_700_000_000_000u64 + i as u64})
        };
        ids.push(w.append_message(&msg).unwrap());
    }
    (w.path().to_path_buf(), ids)
}

fn enter_opts(f: &Fx, name: &str, session: &Path, entry: Option<&str>) -> EnterOptions {
    EnterOptions {
        name: name.into(),
        cwd: f.repo.clone(),
        session: session.to_path_buf(),
        entry: entry.map(str::to_owned),
        agent_dir: f.agent(),
        unflushed: Vec::new(),
        state_dir: f.state(),
    }
}

fn orientations(s: &Session) -> usize {
    s.entries()
        .iter()
        .filter(|e| e.custom_type.as_deref() == Some(ORIENTATION_TYPE))
        .count()
}

#[test]
fn enter_carries_a_complete_session_and_ends_in_one_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("e")).unwrap();
    write(&f.repo.join("left.txt"), "left behind\n");
    let (src, ids) = source_session(&f, 4);
    let before = fs::read(&src).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "e", &src, None)).unwrap();
    assert_eq!(
        fs::read(&src).unwrap(),
        before,
        "the source is never written"
    );
    assert_eq!(out.carry, bh_worktree::Carry::WholeTree);
    assert_eq!(out.left_behind_count, Some(1));
    assert_eq!(out.left_behind, vec!["left.txt"]);
    let wt = f.wt("e");
    assert!(out.target.starts_with(bh_session::session_dir_for_cwd(
        &f.agent(),
        &wt.display().to_string()
    )));
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(
        s.header().unwrap().cwd.as_deref(),
        Some(wt.to_str().unwrap())
    );
    assert_eq!(
        s.header().unwrap().parent_session.as_deref(),
        Some(src.to_str().unwrap())
    );
    assert_eq!(s.entries().len(), 5);
    assert_eq!(orientations(&s), 1);
    let leaf = s.leaf().unwrap();
    assert_eq!(leaf.id, out.orientation_id);
    assert_eq!(leaf.parent_id.as_deref(), Some(ids[3].as_str()));
    let line: serde_json::Value = serde_json::from_slice(s.line_text(leaf)).unwrap();
    assert_eq!(line["type"], "custom_message");
    assert_eq!(line["display"], true);
    let text = line["content"].as_str().unwrap();
    assert!(text.contains(wt.to_str().unwrap()));
    assert!(text.contains("off-limits"));
    assert!(text.contains("Branch: e"));
    assert!(text.contains("left.txt"));
    // The orientation is in the model's context.
    let ctx = s.context(None).unwrap();
    assert_eq!(ctx.messages.len(), 5);
    assert!(handoff_path(&out.target).exists());
}

#[test]
fn enter_from_an_entry_carries_the_path_to_it() {
    let f = fx();
    create(&f.runner(), &f.create_opts("p")).unwrap();
    let (src, ids) = source_session(&f, 4);
    let before = fs::read(&src).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "p", &src, Some(&ids[1]))).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
    assert_eq!(out.carry, bh_worktree::Carry::FromEntry);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 3);
    assert_eq!(orientations(&s), 1);
    assert_eq!(
        s.leaf().unwrap().parent_id.as_deref(),
        Some(ids[1].as_str())
    );

    // The file's own leaf given as the entry is the complete case.
    let out = enter(&f.runner(), &enter_opts(&f, "p", &src, Some(&ids[3]))).unwrap();
    assert_eq!(out.carry, bh_worktree::Carry::WholeTree);

    let err = enter(&f.runner(), &enter_opts(&f, "p", &src, Some("nope0000"))).unwrap_err();
    assert!(matches!(err, WorktreeError::Session(_)), "{err}");
}

#[test]
fn enter_carries_unflushed_entries_without_writing_the_source() {
    let f = fx();
    create(&f.runner(), &f.create_opts("u")).unwrap();
    let (src, ids) = source_session(&f, 2);
    let before = fs::read(&src).unwrap();
    let mut o = enter_opts(&f, "u", &src, None);
    o.unflushed = vec![
        json!({"type": "message", "id": "beef0001", "parentId": ids[1], "timestamp": "2026-01-01T00:00:00.000Z",
               "message": {"role": "user", "content": "not flushed yet", "timestamp": 1_767_225_600_000u64}}),
        json!({"type": "custom", "customType": "ext", "data": {}, "id": "beef0002", "parentId": "beef0001",
               "timestamp": "2026-01-01T00:00:01.000Z"}),
    ];
    let out = enter(&f.runner(), &o).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 5);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("beef0002"));
    assert_eq!(s.context(None).unwrap().messages.len(), 4);

    // Nothing on disk yet at all: the unflushed entries alone.
    let missing = f.root.join("unwritten.jsonl");
    let mut o = enter_opts(&f, "u", &missing, None);
    o.unflushed = vec![
        json!({"type": "message", "id": "cafe0001", "parentId": null,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "first", "timestamp": 1_767_225_600_000u64}}),
    ];
    let out = enter(&f.runner(), &o).unwrap();
    assert!(!missing.exists());
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("cafe0001"));
}

#[test]
fn enter_with_no_entries_makes_a_valid_session_with_only_the_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("z")).unwrap();
    // Header only.
    let (src, _) = source_session(&f, 0);
    let out = enter(&f.runner(), &enter_opts(&f, "z", &src, None)).unwrap();
    assert_eq!(out.carry, bh_worktree::Carry::Empty);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 1);
    assert_eq!(s.leaf().unwrap().parent_id, None);
    assert_eq!(orientations(&s), 1);
    // Not written yet at all (Pi writes lazily).
    let missing = f.root.join("never-written.jsonl");
    let out = enter(&f.runner(), &enter_opts(&f, "z", &missing, None)).unwrap();
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 1);
    assert!(!missing.exists());
}

#[test]
fn enter_refuses_unknown_and_unready_worktrees() {
    let f = fx();
    let (src, _) = source_session(&f, 2);
    let err = enter(&f.runner(), &enter_opts(&f, "ghost", &src, None)).unwrap_err();
    assert!(matches!(err, WorktreeError::NotFound { .. }));
    f.config("post_create = [\"exit 1\"]\n");
    create(&f.runner(), &f.create_opts("f")).unwrap_err();
    let err = enter(&f.runner(), &enter_opts(&f, "f", &src, None)).unwrap_err();
    assert!(matches!(err, WorktreeError::Refused(_)), "{err}");
}

/// A pid that belonged to a process which has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn with_suffix(target: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = target.file_name().unwrap().to_owned();
    name.push(suffix);
    target.with_file_name(name)
}

#[test]
fn a_handoff_claimed_by_a_process_that_died_is_recovered_once() {
    let f = fx();
    create(&f.runner(), &f.create_opts("d")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    let verdicts = |target: &std::path::Path| {
        Session::load(target)
            .unwrap()
            .entries()
            .iter()
            .filter(|e| e.custom_type.as_deref() == Some(VERIFICATION_TYPE))
            .count()
    };
    // It claimed the record and died before appending the verdict.
    let pid = dead_pid();
    let abandoned = with_suffix(&out.target, &format!(".handoff.claimed-{pid}-x.json"));
    fs_err::rename(handoff_path(&out.target), &abandoned).unwrap();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    assert!(!abandoned.exists());
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert_eq!(verdicts(&out.target), 1);

    // It appended the verdict and died before marking the record consumed:
    // recovering finishes the bookkeeping without a second verdict.
    let consumed = with_suffix(&out.target, ".handoff.consumed.json");
    fs_err::rename(&consumed, &abandoned).unwrap();
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert_eq!(verdicts(&out.target), 1);
    assert!(consumed.exists() && !abandoned.exists());

    // A claimer that is alive (this process) is left alone.
    let live = with_suffix(
        &out.target,
        &format!(".handoff.claimed-{}-y.json", std::process::id()),
    );
    fs_err::rename(&consumed, &live).unwrap();
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert!(live.exists());
    assert!(Session::load(&out.target).unwrap().is_valid());
}

#[test]
fn a_handoff_is_consumed_exactly_once_by_racing_threads() {
    let f = fx();
    create(&f.runner(), &f.create_opts("h")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "h", &src, None)).unwrap();
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let results: Vec<ConsumeOutcome> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            let runner = f.runner();
            let state = f.state();
            let target = out.target.clone();
            std::thread::spawn(move || {
                b.wait();
                consume(&runner, &state, &target).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let verified = results
        .iter()
        .filter(|r| matches!(r, ConsumeOutcome::Verified { .. }))
        .count();
    assert_eq!(verified, 1, "{results:?}");
    assert_eq!(
        results
            .iter()
            .filter(|r| **r == ConsumeOutcome::NotPending)
            .count(),
        n - 1
    );
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    let v: Vec<_> = s
        .entries()
        .iter()
        .filter(|e| e.custom_type.as_deref() == Some(VERIFICATION_TYPE))
        .collect();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, bh_protocol::EntryType::Custom);
    // Not in the model's context: still the carried turns plus the orientation.
    assert_eq!(s.context(None).unwrap().messages.len(), 3);
}

#[test]
fn a_handoff_whose_receipt_changed_leaves_a_visible_caveat() {
    let f = fx();
    create(&f.runner(), &f.create_opts("v")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "v", &src, None)).unwrap();
    let rp = f.repo.join(".git/better-harness/worktrees/v.json");
    let mut r: serde_json::Value = serde_json::from_slice(&fs::read(&rp).unwrap()).unwrap();
    r["base"] = json!("0000000000000000000000000000000000000000");
    fs::write(&rp, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    let ConsumeOutcome::Caveat { problems, entry_id } =
        consume(&f.runner(), &f.state(), &out.target).unwrap()
    else {
        panic!("expected a caveat");
    };
    assert!(
        problems.iter().any(|p| p.contains("changed")),
        "{problems:?}"
    );
    let s = Session::load(&out.target).unwrap();
    let e = s.entry(&entry_id).unwrap();
    assert_eq!(e.kind, bh_protocol::EntryType::CustomMessage);
    assert_eq!(
        s.context(None).unwrap().messages.len(),
        4,
        "the caveat is in context"
    );
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
}

#[test]
fn enter_main_carries_the_session_back_with_its_own_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("b")).unwrap();
    let wt = f.wt("b");
    let (src, _) = source_session(&f, 2);
    let into = enter(&f.runner(), &enter_opts(&f, "b", &src, None)).unwrap();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &into.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    write(&wt.join("wip.txt"), "work in progress\n");
    let before = fs::read(&into.target).unwrap();

    let mut o = enter_opts(&f, "b", &into.target, None);
    o.cwd = wt.clone();
    let back = enter_main(&f.runner(), &o, true).unwrap();
    assert_eq!(
        fs::read(&into.target).unwrap(),
        before,
        "the source is never written"
    );
    assert_eq!(back.worktree, f.repo);
    assert_eq!(back.source_cwd, wt.display().to_string());
    // The session's earlier file in the main checkout holds a prefix of it:
    // extended, not copied again.
    assert_eq!(back.carry, bh_worktree::Carry::Resumed);
    assert_eq!(back.target, src);
    assert_eq!(back.left_behind, vec!["wip.txt"]);
    assert!(back.target.starts_with(bh_session::session_dir_for_cwd(
        &f.agent(),
        &f.repo.display().to_string()
    )));
    let s = Session::load(&back.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(
        s.header().unwrap().cwd.as_deref(),
        Some(f.repo.to_str().unwrap())
    );
    assert_eq!(s.header().unwrap().parent_session, None, "its own header");
    // One orientation per move: the way in (carried) and the way back.
    assert_eq!(orientations(&s), 2);
    let leaf = s.leaf().unwrap();
    assert_eq!(leaf.id, back.orientation_id);
    let line: serde_json::Value = serde_json::from_slice(s.line_text(leaf)).unwrap();
    let text = line["content"].as_str().unwrap();
    assert!(text.contains("came back from the worktree"), "{text}");
    assert!(text.contains("main checkout"), "{text}");
    assert!(text.contains("being disposed"), "{text}");
    assert!(text.contains("Branch: main."), "{text}");
    assert!(text.contains("wip.txt"), "{text}");
    assert_eq!(line["details"]["disposing"], true);
    assert_eq!(line["details"]["from"]["name"], "b");
    // The handoff verifies against the main checkout.
    let h: bh_worktree::Handoff =
        serde_json::from_slice(&fs::read(handoff_path(&back.target)).unwrap()).unwrap();
    assert_eq!(h.worktree, f.repo);
    assert_eq!(h.receipt, None);
    assert!(matches!(
        consume(&f.runner(), &f.state(), &back.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    // Carried with in-memory entries, the source file untouched.
    let leaf_id = Session::load(&into.target)
        .unwrap()
        .leaf()
        .unwrap()
        .id
        .clone();
    o.unflushed = vec![
        json!({"type": "message", "id": "beef0101", "parentId": leaf_id, "timestamp": "2026-01-01T00:00:00.000Z",
               "message": {"role": "user", "content": "not flushed yet", "timestamp": 1_767_225_600_000u64}}),
    ];
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(fs::read(&into.target).unwrap(), before);
    let s = Session::load(&back.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("beef0101"));
    let line: serde_json::Value = serde_json::from_slice(s.line_text(s.leaf().unwrap())).unwrap();
    assert!(!line["content"].as_str().unwrap().contains("being disposed"));
}

#[test]
fn enter_main_refuses_from_the_main_checkout_and_bad_names() {
    let f = fx();
    create(&f.runner(), &f.create_opts("r")).unwrap();
    let (src, _) = source_session(&f, 2);
    let err = enter_main(&f.runner(), &enter_opts(&f, "r", &src, None), false).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("main checkout")),
        "{err}"
    );
    let err = enter_main(&f.runner(), &enter_opts(&f, "../x", &src, None), false).unwrap_err();
    assert!(matches!(err, WorktreeError::InvalidName { .. }), "{err}");
    let dir = bh_session::session_dir_for_cwd(&f.agent(), &f.repo.display().to_string());
    assert_eq!(
        fs::read_dir(dir).unwrap().count(),
        1,
        "only the source session"
    );
}

#[test]
fn check_dispose_refuses_as_dispose_does_and_changes_nothing() {
    let f = fx();
    create(&f.runner(), &f.create_opts("k")).unwrap();
    let wt = f.wt("k");
    check_dispose(&f.runner(), &f.dispose_opts("k", false)).unwrap();
    write(&wt.join("new.txt"), "x");
    let err = check_dispose(&f.runner(), &f.dispose_opts("k", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("uncommitted")),
        "{err}"
    );
    check_dispose(&f.runner(), &f.dispose_opts("k", true)).unwrap();
    commit_in(&f, &wt, "work");
    let err = check_dispose(&f.runner(), &f.dispose_opts("k", false)).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Refused(m) if m.contains("not merged")),
        "{err}"
    );
    let err = check_dispose(&f.runner(), &f.dispose_opts("nope", true)).unwrap_err();
    assert!(matches!(err, WorktreeError::NotFound { .. }), "{err}");
    assert!(wt.exists() && f.registered(&wt));
    assert!(f.receipt("k")["state"] == "ready");
    assert!(
        !f.state().join("checkpoints").exists(),
        "checks take nothing"
    );
}

#[test]
fn discard_deletes_a_prepared_target_and_its_handoff_records() {
    let f = fx();
    create(&f.runner(), &f.create_opts("d")).unwrap();
    let (src, _) = source_session(&f, 2);
    let before = fs::read(&src).unwrap();
    let dir = bh_session::session_dir_for_cwd(&f.agent(), &f.wt("d").display().to_string());

    // Pending handoff.
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    assert!(handoff_path(&out.target).exists());
    discard(&f.state(), &out.target).unwrap();
    assert!(!out.target.exists() && !handoff_path(&out.target).exists());
    assert!(!dir.exists(), "the emptied session folder goes too");

    // Consumed handoff; another session of the folder stays.
    let keep = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    consume(&f.runner(), &f.state(), &out.target).unwrap();
    discard(&f.state(), &out.target).unwrap();
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&keep.target) && left.contains(&keep.handoff));
    // Idempotent, and the source was never touched.
    discard(&f.state(), &out.target).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
}

// ---------------------------------------------------------------- claims

fn proc_start(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_owned()
}

#[test]
fn a_live_claim_is_busy_and_a_dead_creators_half_made_worktree_is_rolled_back() {
    let f = fx();
    let admin = f.repo.join(".git/better-harness/worktrees");
    let claim = admin.join("x.claim");
    fs::create_dir_all(&claim).unwrap();
    // Live owner (this process): busy, whatever the operation.
    let me = std::process::id();
    fs::write(
        claim.join("owner"),
        format!("{me} {} create since now\n", proc_start(me)),
    )
    .unwrap();
    let err = create(&f.runner(), &f.create_opts("x")).unwrap_err();
    assert!(
        matches!(&err, WorktreeError::Busy { detail, .. } if detail.contains(&me.to_string())),
        "{err}"
    );
    let (src, _) = source_session(&f, 1);
    assert!(matches!(
        enter(&f.runner(), &enter_opts(&f, "x", &src, None)).unwrap_err(),
        WorktreeError::Busy { .. }
    ));
    assert!(matches!(
        dispose(&f.runner(), &f.dispose_opts("x", true)).unwrap_err(),
        WorktreeError::Busy { .. }
    ));

    // A creator that died mid-way: its claim names a finished process, its
    // receipt says provisioning, its worktree and branch exist.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    fs::write(claim.join("owner"), format!("{dead} 1 create since then\n")).unwrap();
    let wt = f.wt("x");
    f.git(&["worktree", "add", "-q", "-b", "x", wt.to_str().unwrap()]);
    fs::write(wt.join("half.txt"), "half-made").unwrap();
    let base = f.git(&["rev-parse", "HEAD"]);
    let receipt = json!({
        "version": 1, "name": "x", "path": wt, "state": "provisioning", "stage": "post-create",
        "branch": "x", "createdBranch": true, "base": base, "from": null, "envLinks": [],
        "postCreate": [], "session": null, "createdAt": "t", "updatedAt": "t", "error": null,
        "hash": ""
    });
    fs::write(admin.join("x.json"), receipt.to_string()).unwrap();
    let out = create(&f.runner(), &f.create_opts("x")).unwrap();
    assert_eq!(out.receipt.state, State::Ready);
    assert!(
        !wt.join("half.txt").exists(),
        "the half-made worktree was rolled back"
    );
    assert!(!claim.exists(), "the claim is released");
}

#[test]
fn round_trips_extend_the_earlier_files_instead_of_copying_the_session() {
    let f = fx();
    create(&f.runner(), &f.create_opts("rt")).unwrap();
    let wt = f.wt("rt");
    let (src, _) = source_session(&f, 2);
    let main_dir = bh_session::session_dir_for_cwd(&f.agent(), &f.repo.display().to_string());
    let wt_dir = bh_session::session_dir_for_cwd(&f.agent(), &wt.display().to_string());
    let sessions = || {
        let mut v: Vec<PathBuf> = [&main_dir, &wt_dir]
            .iter()
            .flat_map(|d| fs::read_dir(d).into_iter().flatten())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        v.sort();
        v
    };
    let mut here = src.clone();
    let mut files_after_first = None;
    for round in 0..3 {
        let into = enter(&f.runner(), &enter_opts(&f, "rt", &here, None)).unwrap();
        consume(&f.runner(), &f.state(), &into.target).unwrap();
        SessionWriter::open(&into.target)
            .unwrap()
            .append_message(&json!({"role": "user", "content": format!("in the worktree {round}"), "timestamp": 1_700_000_001_000u64}))
            .unwrap();
        let mut o = enter_opts(&f, "rt", &into.target, None);
        o.cwd = wt.clone();
        let back = enter_main(&f.runner(), &o, false).unwrap();
        consume(&f.runner(), &f.state(), &back.target).unwrap();
        assert_eq!(back.target, src, "round {round}: back into the first file");
        assert_eq!(back.carry, bh_worktree::Carry::Resumed);
        if round == 0 {
            files_after_first = Some(sessions());
        } else {
            assert_eq!(into.carry, bh_worktree::Carry::Resumed, "round {round}");
            assert_eq!(
                Some(sessions()),
                files_after_first,
                "round {round}: no new file"
            );
        }
        here = back.target;
    }
    // One file per checkout, each a valid session whose leaf is the last move.
    assert_eq!(files_after_first.unwrap().len(), 2);
    let s = Session::load(&src).unwrap();
    assert!(s.is_valid());
    assert_eq!(orientations(&s), 6, "three round trips, two moves each");
    let ctx = s.context(None).unwrap();
    let texts: Vec<String> = ctx.messages.iter().map(|m| format!("{m:?}")).collect();
    assert!(
        texts.iter().any(|t| t.contains("in the worktree 2")),
        "{texts:?}"
    );
}

#[test]
fn an_earlier_file_written_since_is_not_extended_and_a_discard_cuts_back() {
    let f = fx();
    create(&f.runner(), &f.create_opts("w")).unwrap();
    let wt = f.wt("w");
    let (src, _) = source_session(&f, 2);
    let into = enter(&f.runner(), &enter_opts(&f, "w", &src, None)).unwrap();
    consume(&f.runner(), &f.state(), &into.target).unwrap();
    let mut o = enter_opts(&f, "w", &into.target, None);
    o.cwd = wt.clone();

    // A resumed move that is discarded leaves the earlier file as it was and
    // keeps nothing of the move.
    let before = fs::read(&src).unwrap();
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(back.target, src);
    assert!(fs::read(&src).unwrap().len() > before.len());
    discard(&f.state(), &back.target).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before, "cut back to what it was");
    assert!(!handoff_path(&src).exists());
    assert!(src.exists(), "never deleted");

    // Someone wrote to the earlier file after the session left it: it is not
    // a prefix any more, so the move makes a new file and leaves it alone.
    SessionWriter::open(&src)
        .unwrap()
        .append_message(&json!({"role": "user", "content": "another Pi went on here", "timestamp": 1_700_000_002_000u64}))
        .unwrap();
    let written = fs::read(&src).unwrap();
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(back.carry, bh_worktree::Carry::WholeTree);
    assert_ne!(back.target, src);
    assert_eq!(fs::read(&src).unwrap(), written);
}
