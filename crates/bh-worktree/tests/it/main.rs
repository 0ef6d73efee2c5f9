//! `bh-worktree` on real repositories in temp dirs with real git.
//!
//! Over 600 lines: the crate's one integration binary; tests are independent and share the helpers at the top.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use bh_checkpoint::{RestoreMode, Store, StoreOptions};
use bh_test_support::worktree_repo::{WorktreeRepo, write};
use bh_worktree::{
    CreateOptions, DisposeOptions, Stage, State, WorktreeError, check_dispose, create, dispose,
    list,
};
use serde_json::json;

/// The shared repository ([`bh_test_support::worktree_repo`]) and this
/// crate's own helpers.
struct Fx(WorktreeRepo);

impl std::ops::Deref for Fx {
    type Target = WorktreeRepo;
    fn deref(&self) -> &WorktreeRepo {
        &self.0
    }
}

fn fx() -> Fx {
    Fx(WorktreeRepo::new())
}

impl Fx {
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

fn commit_in(f: &Fx, dir: &Path, msg: &str) -> String {
    f.commit_in(dir, msg)
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
    // (`enter` is refused alike: bh-handoff's tests.)
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
