//! Seeding the first snapshot from the user's objects while their git runs
//! `gc`/`repack`/`prune` in a loop: a checkpoint the snapshot reports always
//! has every object it reaches. (The same scenario runs through the CLI in
//! crates/bh-cli/tests/checkpoint_gc_race.rs; this one links the library
//! into its own test binary, so it always tests this tree's code.)

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

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

#[test]
fn a_gc_loop_beside_seeding_never_leaves_a_checkpoint_without_objects() {
    let f = fx();
    assert!(
        git(&f.project, &["init", "-q", "-b", "main"])
            .status
            .success()
    );
    for round in 0..6 {
        for i in 0..1500 {
            let dir = f.project.join(format!("r{round}/d{}", i % 30));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(format!("f{i}.txt")), format!("{round} {i}\n")).unwrap();
        }
        assert!(git(&f.project, &["add", "-A"]).status.success());
        let msg = format!("round {round}");
        assert!(
            git(&f.project, &["commit", "-q", "-m", &msg])
                .status
                .success()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let gc = {
            let (stop, repo) = (stop.clone(), f.project.clone());
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
            })
        };
        let store = Store::open(
            &f.runner,
            &f.project,
            &StoreOptions::new(f.root.join(format!("state{round}"))),
        )
        .unwrap();
        let outcome = store.snapshot(&req("write"));
        stop.store(true, Ordering::SeqCst);
        gc.join().unwrap();
        // Failing loudly is allowed; claiming a checkpoint is not.
        let Ok(outcome) = outcome else { continue };
        let shadow = store.dir().join("git");
        let out = git(
            &f.project,
            &[
                "--git-dir",
                shadow.to_str().unwrap(),
                "rev-list",
                "--objects",
                "--missing=print",
                &outcome.checkpoint.tree,
            ],
        );
        assert!(out.status.success(), "{out:?}");
        let lost = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with('?'))
            .count();
        assert_eq!(
            lost, 0,
            "round {round} (seeded: {}): {lost} objects missing",
            outcome.seeded
        );
    }
}
