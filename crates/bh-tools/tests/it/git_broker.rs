//! Commits from the sandbox (issue 27 item 1), tried as the agent would
//! use them and as a prompt-injected agent would abuse them: `git add`,
//! `commit`, `commit --amend`, `branch`, `checkout -b` and `stash` reach
//! the real repository; a planted hook, `core.fsmonitor`, `refs/replace`,
//! another branch moved (directly or through `packed-refs`), a tag moved,
//! a user's stash entry dropped and another worktree's HEAD do not.

use std::path::{Path, PathBuf};

use bh_tools::{BashSandbox, Profile, Toolbox, ToolboxOptions};
use fs_err as fs;
use serde_json::json;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = bh_test_support::git_command()
        .args(["-c", "user.name=u", "-c", "user.email=u@x"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

struct World {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    repo: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let repo = base.join("project");
        fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "one"]);
        World {
            _tmp: tmp,
            base,
            repo,
        }
    }

    fn toolbox(&self, root: &Path) -> Toolbox {
        let mut o = ToolboxOptions::new(root, Profile::Interactive, self.base.join("out"));
        o.sandbox = BashSandbox {
            git_overlays: Some(self.base.join("state/bash-git")),
            ..BashSandbox::default()
        };
        Toolbox::new(o).unwrap()
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.repo, args)
    }
}

/// The command's output and the result's `details.git`.
fn bash(tb: &Toolbox, command: &str) -> (String, serde_json::Value) {
    let command = format!(
        "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=a@x GIT_CONFIG_GLOBAL=/dev/null; {command}"
    );
    let r = tb.call("bash", &json!({ "command": command, "timeout": 60 }));
    let git = r
        .details
        .as_ref()
        .and_then(|d| d.get("git"))
        .cloned()
        .unwrap_or_default();
    (r.text_content(), git)
}

fn fsck(dir: &Path) {
    git(dir, &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn add_commit_amend_branch_and_checkout_b_reach_the_repository() {
    let w = World::new();
    let tb = w.toolbox(&w.repo);
    let (out, details) = bash(
        &tb,
        "set -e; echo b > b.txt; git add b.txt; git commit -qm two; \
         git commit -q --amend -m two-amended; git branch side; \
         git checkout -q -b feature; echo c > c.txt; git add c.txt; git commit -qm three; \
         echo d > d.txt; git add d.txt; git log --format=%s",
    );
    assert!(out.contains("three\ntwo-amended\none"), "{out}");
    assert!(out.contains("[git: refs/heads/main "), "{out}");
    assert!(out.contains("[git: index updated]"), "{out}");
    assert!(!out.contains("refused"), "{out}");
    assert_eq!(w.git(&["log", "--format=%s", "main"]), "two-amended\none");
    assert_eq!(w.git(&["log", "--format=%s", "side"]), "two-amended\none");
    assert_eq!(
        w.git(&["log", "--format=%s", "feature"]),
        "three\ntwo-amended\none"
    );
    assert_eq!(w.git(&["symbolic-ref", "HEAD"]), "refs/heads/feature");
    // The staged d.txt is staged for real; the repository is sound.
    assert_eq!(w.git(&["diff", "--cached", "--name-only"]), "d.txt");
    assert_eq!(w.git(&["status", "--porcelain"]), "A  d.txt");
    fsck(&w.repo);
    // Each move is in the reflog, named for what did it, and in details.
    let log = w.git(&["reflog", "show", "--format=%gs", "main"]);
    assert!(
        log.starts_with("bh: the agent's bash (commit (amend): two-amended)"),
        "{log}"
    );
    let applied = details["applied"].as_array().unwrap();
    assert!(
        applied.iter().any(|a| a["ref"] == "refs/heads/main"),
        "{details}"
    );
    // A second call: the branch the agent created may move again, and
    // it may go back to the branch it came from.
    let (out, _) = bash(
        &tb,
        "set -e; git commit -qm four; git checkout -q main; git branch -f side feature; git log -1 --format=%s side",
    );
    assert!(!out.contains("refused"), "{out}");
    assert_eq!(w.git(&["log", "-1", "--format=%s", "side"]), "four");
    assert_eq!(w.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    // A plain command that leaves .git alone adds nothing to the output.
    let (out, details) = bash(&tb, "git status --short >/dev/null; echo plain");
    assert_eq!(out, "plain\n");
    assert!(details.is_null(), "{details}");
}

/// A branch the agent created and the user then adopted (committed on it
/// outside the sandbox) is the user's: the agent can no longer move, delete
/// or switch to it.
#[test]
fn a_branch_the_user_adopted_is_no_longer_the_agents() {
    let w = World::new();
    let tb = w.toolbox(&w.repo);
    let (out, _) = bash(&tb, "git branch side");
    assert!(!out.contains("refused"), "{out}");
    // The user commits on it (another worktree of theirs).
    let wt = w.base.join("user-wt");
    w.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "side"]);
    git(
        &wt,
        &["commit", "-q", "--allow-empty", "-m", "the user's work"],
    );
    w.git(&["worktree", "remove", wt.to_str().unwrap()]);
    let users = w.git(&["rev-parse", "side"]);
    for command in [
        "git branch -f side main",
        "git branch -D side",
        "git checkout -q side",
    ] {
        let (out, _) = bash(&tb, command);
        assert!(out.contains("refused"), "{command}: {out}");
        assert_eq!(w.git(&["rev-parse", "side"]), users, "{command}");
        assert_eq!(w.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    }
    let (out, _) = bash(&tb, "git branch -f side main");
    assert!(out.contains("changed since outside the sandbox"), "{out}");
    fsck(&w.repo);
}

#[test]
fn hooks_config_replace_refs_other_branches_tags_and_packed_refs_are_refused() {
    let w = World::new();
    w.git(&["branch", "other"]);
    w.git(&["tag", "v1"]);
    let config = fs::read(w.repo.join(".git/config")).unwrap();
    let other = w.git(&["rev-parse", "other"]);
    let tb = w.toolbox(&w.repo);
    let (out, details) = bash(
        &tb,
        "echo x > x.txt; git add x.txt; git commit -qm mine; \
         printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
         git config core.fsmonitor 'touch pwned-fsmonitor'; git config core.hooksPath /tmp; \
         echo '*.txt filter=evil' > .git/info/attributes; \
         git replace -f HEAD~1 HEAD; git branch -f other HEAD; git tag -f v1 HEAD; \
         git update-ref refs/notes/commits HEAD; echo done",
    );
    assert!(out.contains("done"), "{out}");
    // Its own branch moved; nothing else did.
    assert_eq!(w.git(&["log", "-1", "--format=%s", "main"]), "mine");
    assert_eq!(w.git(&["rev-parse", "other"]), other);
    assert_eq!(w.git(&["rev-parse", "v1"]), other);
    assert_eq!(w.git(&["for-each-ref", "refs/replace", "refs/notes"]), "");
    assert_eq!(fs::read(w.repo.join(".git/config")).unwrap(), config);
    assert!(!w.repo.join(".git/hooks/pre-commit").exists());
    assert!(!w.repo.join(".git/info/attributes").exists());
    for refused in [
        "refs/heads/other",
        "refs/tags/v1",
        "refs/replace/",
        "refs/notes/commits",
    ] {
        assert!(
            out.contains(&format!("[git: refused {refused}")),
            "{refused}: {out}"
        );
    }
    assert!(!details["refused"].as_array().unwrap().is_empty());
    // packed-refs rewritten by hand to move `other`: refused too.
    let head = w.git(&["rev-parse", "HEAD"]);
    let (out, _) = bash(
        &tb,
        &format!(
            "git pack-refs --all; sed -i 's#^[0-9a-f]* refs/heads/other$#{head} refs/heads/other#' .git/packed-refs; \
             git rev-parse other"
        ),
    );
    assert!(out.contains(&head), "the command saw its edit: {out}");
    assert!(out.contains("[git: refused refs/heads/other"), "{out}");
    assert_eq!(w.git(&["rev-parse", "other"]), other);
    // A later git in the real repository runs no planted hook or monitor.
    w.git(&["commit", "-q", "--allow-empty", "-m", "user"]);
    assert!(!w.repo.join("pwned-fsmonitor").exists());
    fsck(&w.repo);
}

#[test]
fn stash_push_and_pop_reach_the_repository_but_a_users_entry_stays() {
    let w = World::new();
    fs::write(w.repo.join("a.txt"), "users change\n").unwrap();
    w.git(&["stash", "push", "-q", "-m", "the user's"]);
    let tb = w.toolbox(&w.repo);
    let (out, _) = bash(
        &tb,
        "set -e; echo agent >> a.txt; git stash push -q -m wip; git stash list",
    );
    assert!(
        out.contains("[git: stash pushed [bh agent] On main: wip]"),
        "{out}"
    );
    let list = w.git(&["stash", "list", "--format=%gs"]);
    assert_eq!(
        list, "[bh agent] On main: wip\nOn main: the user's",
        "{list}"
    );
    assert_eq!(fs::read_to_string(w.repo.join("a.txt")).unwrap(), "a\n");
    let (out, _) = bash(&tb, "set -e; git stash pop -q; cat a.txt");
    assert!(out.contains("a\nagent\n"), "{out}");
    assert!(
        out.contains("[git: stash dropped [bh agent] On main: wip]"),
        "{out}"
    );
    assert_eq!(
        w.git(&["stash", "list", "--format=%gs"]),
        "On main: the user's"
    );
    // The user's own entry cannot be dropped from the sandbox.
    let (out, _) = bash(
        &tb,
        "git checkout -q -- a.txt; git stash drop -q; git stash list | wc -l",
    );
    assert!(
        out.contains("[git: refused stash entry On main: the user's"),
        "{out}"
    );
    assert_eq!(
        w.git(&["stash", "list", "--format=%gs"]),
        "On main: the user's"
    );
    fsck(&w.repo);
}

/// The user pushes a stash entry while the agent's command, which dropped
/// its own entry, still runs: the broker drops the agent's entry where it
/// now stands, not the position it had when the command started (which is
/// the user's new entry by then).
#[test]
fn a_stash_drop_finds_its_entry_again_after_the_user_pushed_one() {
    let w = World::new();
    fs::write(w.repo.join("a.txt"), "users change\n").unwrap();
    w.git(&["stash", "push", "-q", "-m", "the user's"]);
    let tb = w.toolbox(&w.repo);
    let (out, _) = bash(&tb, "set -e; echo agent >> a.txt; git stash push -q -m wip");
    assert!(out.contains("[git: stash pushed"), "{out}");
    let repo = w.repo.clone();
    let user = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(800));
        fs::write(repo.join("a.txt"), "the user again\n").unwrap();
        git(&repo, &["stash", "push", "-q", "-m", "user new"]);
    });
    let (out, _) = bash(&tb, "set -e; git stash drop -q; sleep 3");
    user.join().unwrap();
    assert!(
        out.contains("[git: stash dropped [bh agent] On main: wip]"),
        "{out}"
    );
    assert_eq!(
        w.git(&["stash", "list", "--format=%gs"]),
        "On main: user new\nOn main: the user's"
    );
    fsck(&w.repo);
}

#[test]
fn in_a_linked_worktree_commits_land_but_the_main_worktrees_state_does_not_change() {
    let w = World::new();
    let wt = w.base.join("wt");
    w.git(&["worktree", "add", "-q", "-b", "topic", wt.to_str().unwrap()]);
    let main_head = fs::read(w.repo.join(".git/HEAD")).unwrap();
    let main_index = fs::read(w.repo.join(".git/index")).unwrap();
    let tb = w.toolbox(&wt);
    let (out, _) = bash(
        &tb,
        "set -e; echo t > t.txt; git add t.txt; git commit -qm on-topic; \
         echo 'ref: refs/heads/evil' > \"$(git rev-parse --git-common-dir)/HEAD\"; \
         git -C \"$(git rev-parse --git-common-dir)/..\" branch -f main topic 2>&1 || true; echo done",
    );
    assert!(out.contains("done"), "{out}");
    assert_eq!(git(&wt, &["log", "-1", "--format=%s", "topic"]), "on-topic");
    assert_eq!(w.git(&["log", "-1", "--format=%s", "main"]), "one");
    assert_eq!(fs::read(w.repo.join(".git/HEAD")).unwrap(), main_head);
    assert_eq!(fs::read(w.repo.join(".git/index")).unwrap(), main_index);
    assert!(out.contains("[git: refused refs/heads/main"), "{out}");
    fsck(&w.repo);
}

#[test]
fn a_tree_holding_dot_git_or_an_object_from_a_planted_alternate_is_refused() {
    let w = World::new();
    let main = w.git(&["rev-parse", "main"]);
    let tb = w.toolbox(&w.repo);
    // A tree with a `.git` entry (what checks out as a hook).
    let (out, _) = bash(
        &tb,
        "set -e; blob=$(echo evil | git hash-object -w --stdin); \
         tree=$(printf '100644 blob %s\\t.git\\n' $blob | git mktree); \
         c=$(git commit-tree $tree -p HEAD -m evil); git update-ref refs/heads/main $c; git log -1 --format=%s",
    );
    assert!(out.contains("evil"), "the command made it: {out}");
    assert!(out.contains("[git: refused .git/objects"), "{out}");
    assert_eq!(w.git(&["rev-parse", "main"]), main);
    // An alternate planted in the overlay, naming another repository's
    // objects: the commit's objects are not carried over, so no ref moves.
    // Outside /tmp, so that the sandbox can read it (its /tmp is private).
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let other = outside.path().join("other");
    fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    fs::write(other.join("secret.txt"), "secret\n").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-qm", "secret"]);
    let secret = git(&other, &["rev-parse", "HEAD"]);
    let (out, _) = bash(
        &tb,
        &format!(
            "echo {}/.git/objects >> .git/objects/info/alternates; git cat-file -t {secret}; \
             git branch stolen {secret}; echo done",
            other.display()
        ),
    );
    assert!(out.contains("commit"), "the command could read it: {out}");
    assert!(out.contains("[git: refused refs/heads/stolen"), "{out}");
    assert!(!w.repo.join(".git/objects/info/alternates").exists());
    let has = bh_test_support::git_command()
        .args(["cat-file", "-e", &secret])
        .current_dir(&w.repo)
        .status()
        .unwrap();
    assert!(!has.success(), "the other repository's commit is not here");
    fsck(&w.repo);
}

/// The broker is not confined: a link the command leaves in the overlay
/// (its packs pointing at a repository the sandbox hides, say) must not be
/// followed out of the upper folder.
#[test]
fn links_left_in_the_overlay_are_not_followed_by_the_broker() {
    let w = World::new();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let other = outside.path().join("other");
    fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    fs::write(other.join("secret.txt"), "secret\n").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-qm", "secret"]);
    git(&other, &["repack", "-adq"]);
    let secret = git(&other, &["rev-parse", "HEAD"]);
    let tb = w.toolbox(&w.repo);
    let (out, _) = bash(
        &tb,
        &format!(
            "mv .git/objects/pack .git/objects/pack.old; ln -s {o}/.git/objects/pack .git/objects/pack; \
             mkdir -p .git/refs/x; rm -rf .git/refs/x; ln -s {o}/.git/refs .git/refs/x; \
             git commit -q --allow-empty -m mine; echo done",
            o = other.display()
        ),
    );
    assert!(out.contains("done"), "{out}");
    let has = bh_test_support::git_command()
        .args(["cat-file", "-e", &secret])
        .current_dir(&w.repo)
        .status()
        .unwrap();
    assert!(!has.success(), "no object came through the link: {out}");
    assert_eq!(
        w.git(&["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
    fsck(&w.repo);
}
