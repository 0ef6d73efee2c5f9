//! The first snapshot seeds the shadow from the user's objects while the
//! user's git may be running `gc` (git starts `gc --auto` in the background):
//! with a gc/repack/prune looping beside it, every checkpoint the snapshot
//! reports has all its objects, and restores.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

#[test]
fn a_gc_looping_beside_the_first_snapshot_never_leaves_a_checkpoint_without_objects() {
    let w = Arc::new(crate::world());
    let root = w.root.clone();
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    assert!(
        w.git_output(&repo, &["init", "-q", "-b", "main"])
            .status
            .success()
    );
    for round in 0..4 {
        // New loose objects for this round's gc to pack and delete.
        for i in 0..1500 {
            let dir = repo.join(format!("r{round}/d{}", i % 30));
            fs_err::create_dir_all(&dir).unwrap();
            fs_err::write(dir.join(format!("f{i}.txt")), format!("{round} {i}\n")).unwrap();
        }
        assert!(w.git_output(&repo, &["add", "-A"]).status.success());
        assert!(
            w.git_output(&repo, &["commit", "-q", "-m", &format!("round {round}")])
                .status
                .success()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let gc = {
            let (stop, repo, w) = (stop.clone(), repo.clone(), w.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    let args: &[&str] = match n % 3 {
                        0 => &["gc", "-q", "--prune=now"],
                        1 => &["repack", "-a", "-d", "-q"],
                        _ => &["prune", "--expire=now"],
                    };
                    let _ = w.git_output(&repo, args);
                    n += 1;
                }
                n
            })
        };
        let state = root.join(format!("state{round}"));
        let out = w
            .bh(&repo)
            .env("BH_STATE_DIR", &state)
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
        let list = w
            .bh(&repo)
            .env("BH_STATE_DIR", &state)
            .args(["--json", "checkpoint", "list"])
            .output()
            .unwrap();
        let list: Value = serde_json::from_slice(&list.stdout).unwrap();
        let shadow = PathBuf::from(list["store"].as_str().unwrap()).join("git");
        let missing = w.git_output(
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
        let back = w
            .bh(&repo)
            .env("BH_STATE_DIR", &state)
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
