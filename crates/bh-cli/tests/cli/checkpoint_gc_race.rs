//! The first snapshot seeds the shadow from the user's objects while the
//! user's git may be running `gc` (git starts `gc --auto` in the background):
//! with a gc/repack/prune looping beside it, every checkpoint the snapshot
//! reports has all its objects, and restores.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use assert_cmd::prelude::*;
use serde_json::Value;

fn git(repo: &Path, args: &[&str]) -> std::process::Output {
    bh_test_support::git_command()
        .current_dir(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn bh(root: &Path, repo: &Path, state: &Path) -> Command {
    let mut cmd = Command::cargo_bin("bh").unwrap();
    cmd.current_dir(repo)
        .env("HOME", root.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("BH_STATE_DIR", state)
        .env_remove("XDG_STATE_HOME")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn a_gc_looping_beside_the_first_snapshot_never_leaves_a_checkpoint_without_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = fs_err::canonicalize(tmp.path()).unwrap();
    fs_err::create_dir_all(root.join("home")).unwrap();
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    assert!(git(&repo, &["init", "-q", "-b", "main"]).status.success());
    for round in 0..4 {
        // New loose objects for this round's gc to pack and delete.
        for i in 0..1500 {
            let dir = repo.join(format!("r{round}/d{}", i % 30));
            fs_err::create_dir_all(&dir).unwrap();
            fs_err::write(dir.join(format!("f{i}.txt")), format!("{round} {i}\n")).unwrap();
        }
        assert!(git(&repo, &["add", "-A"]).status.success());
        assert!(
            git(&repo, &["commit", "-q", "-m", &format!("round {round}")])
                .status
                .success()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let gc = {
            let (stop, repo) = (stop.clone(), repo.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    let args: &[&str] = match n % 3 {
                        0 => &["gc", "-q", "--prune=now"],
                        1 => &["repack", "-a", "-d", "-q"],
                        _ => &["prune", "--expire=now"],
                    };
                    let _ = git(&repo, args);
                    n += 1;
                }
                n
            })
        };
        let state = root.join(format!("state{round}"));
        let out = bh(&root, &repo, &state)
            .args(["--json", "checkpoint", "snapshot"])
            .output()
            .unwrap();
        stop.store(true, Ordering::SeqCst);
        let passes = gc.join().unwrap();
        assert!(passes > 0);
        if !out.status.success() {
            // Failing loudly is allowed; claiming a checkpoint is not.
            continue;
        }
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let tree = doc["snapshot"]["checkpoint"]["tree"].as_str().unwrap();
        let id = doc["snapshot"]["checkpoint"]["id"].as_str().unwrap();
        let list = bh(&root, &repo, &state)
            .args(["--json", "checkpoint", "list"])
            .output()
            .unwrap();
        let list: Value = serde_json::from_slice(&list.stdout).unwrap();
        let shadow = PathBuf::from(list["store"].as_str().unwrap()).join("git");
        let missing = git(
            &repo,
            &[
                "--git-dir",
                shadow.to_str().unwrap(),
                "rev-list",
                "--objects",
                "--missing=print",
                tree,
            ],
        );
        assert!(missing.status.success(), "{missing:?}");
        let lost = String::from_utf8_lossy(&missing.stdout)
            .lines()
            .filter(|l| l.starts_with('?'))
            .count();
        assert_eq!(
            lost, 0,
            "round {round}: checkpoint {id} lacks {lost} objects"
        );
        // And it restores.
        fs_err::remove_dir_all(repo.join(format!("r{round}"))).unwrap();
        let back = bh(&root, &repo, &state)
            .args(["checkpoint", "restore", id])
            .output()
            .unwrap();
        assert!(back.status.success(), "{back:?}");
        assert_eq!(
            fs_err::read_to_string(repo.join(format!("r{round}/d7/f7.txt"))).unwrap(),
            format!("{round} 7\n")
        );
    }
}
