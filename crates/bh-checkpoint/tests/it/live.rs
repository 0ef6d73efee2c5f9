//! `LiveStore`: snapshots built from watched changes must be exactly the
//! snapshots an ordinary store takes of the same work tree.

use std::os::unix::fs::PermissionsExt;

use bh_checkpoint::LiveStore;
use std::sync::Arc;

use super::*;

/// A second, independent store of the same project (ordinary snapshots only).
fn reference(f: &Fx) -> Store {
    Store::open(
        &f.runner,
        &f.project,
        &StoreOptions::new(f.root.join("reference-state")),
    )
    .unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let out = bh_test_support::git_command()
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Both stores snapshot; their trees and change lists must agree.
fn check(live: &LiveStore, reference: &Store, step: &str) {
    let a = live.snapshot(&req("edit")).unwrap();
    let b = reference.snapshot(&req("edit")).unwrap();
    if a.checkpoint.tree != b.checkpoint.tree {
        let ls = |store: &Store, tree: &str| {
            let out = bh_test_support::git_command()
                .arg(format!("--git-dir={}", store.dir().join("git").display()))
                .args(["ls-tree", "-r", tree])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        panic!(
            "tree after {step} ({:?}):\nlive:\n{}\nordinary:\n{}",
            live.stats(),
            ls(live.store(), &a.checkpoint.tree),
            ls(reference, &b.checkpoint.tree)
        );
    }
    assert_eq!(a.created, b.created, "created after {step}");
    let changes = |o: &bh_checkpoint::SnapshotOutcome| {
        let mut v: Vec<(String, String)> = o
            .changed
            .iter()
            .map(|e| (e.status.clone(), e.path.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(changes(&a), changes(&b), "changes after {step}");
    assert_eq!(a.checkpoint.files_changed, b.checkpoint.files_changed);
    // The live checkpoint is listed and resolvable like any other.
    let listed = live.store().resolve(&a.checkpoint.id).unwrap();
    assert_eq!(listed, a.checkpoint, "listed checkpoint after {step}");
}

/// A small deterministic generator (no dependency on `rand`).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn live_snapshots_equal_ordinary_ones_through_random_work() {
    random_work(7, 160);
}

#[test]
fn live_snapshots_equal_ordinary_ones_through_other_random_work() {
    random_work(20261130, 120);
}

fn random_work(seed: u64, steps: usize) {
    let f = fx();
    let p = &f.project;
    git(p, &["init", "-q", "-b", "main"]);
    fs::create_dir_all(p.join("src/deep")).unwrap();
    fs::create_dir_all(p.join("build")).unwrap();
    fs::write(p.join(".gitignore"), "build/\n*.log\n").unwrap();
    fs::write(p.join("src/lib.rs"), "fn main() {}\n").unwrap();
    fs::write(p.join("src/deep/x.txt"), "x\n").unwrap();
    fs::write(p.join("build/kept.txt"), "tracked in an ignored dir\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["add", "-f", "build/kept.txt"]);
    git(p, &["commit", "-qm", "base"]);

    let live = LiveStore::new(Arc::new(f.store()));
    let reference = reference(&f);
    check(&live, &reference, "start");
    check(&live, &reference, "nothing");

    let dirs = ["", "src", "src/deep", "build", "fresh"];
    let mut rng = Lcg(seed);
    for step in 0..steps {
        let dir = dirs[rng.next(dirs.len())];
        let name = format!("f{}.txt", rng.next(6));
        let rel = if dir.is_empty() {
            name.clone()
        } else {
            format!("{dir}/{name}")
        };
        let path = p.join(&rel);
        let what = match rng.next(12) {
            0..=3 => {
                if path.parent().unwrap().exists() {
                    fs::write(&path, format!("step {step}\n")).unwrap();
                }
                "write"
            }
            4 => {
                if path.exists() {
                    let mut text = fs::read(&path).unwrap();
                    text.extend_from_slice(b"more\n");
                    fs::write(&path, text).unwrap();
                }
                "append"
            }
            5 => {
                let _ = fs::remove_file(&path);
                "delete"
            }
            6 => {
                if path.exists() {
                    let mode = fs::metadata(&path).unwrap().permissions().mode() ^ 0o111;
                    fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                "chmod"
            }
            7 => {
                if path.exists() {
                    let _ = fs::rename(&path, p.join(format!("src/renamed{step}.txt")));
                }
                "rename"
            }
            8 => {
                if rng.next(2) == 0 {
                    fs::create_dir_all(p.join("fresh")).unwrap();
                    fs::write(p.join("fresh/new.txt"), "new\n").unwrap();
                } else {
                    let _ = fs::remove_dir_all(p.join("fresh"));
                }
                "directory"
            }
            9 => {
                fs::write(p.join(format!("{step}.log")), "ignored\n").unwrap();
                "ignored file"
            }
            10 => {
                if path.parent().unwrap().exists() {
                    fs::write(&path, "").unwrap();
                }
                "truncate"
            }
            _ => {
                if rng.next(4) == 0 {
                    let _ = fs::remove_file(p.join("link"));
                    symlink("src/lib.rs", p.join("link")).unwrap();
                    "symlink"
                } else {
                    fs::write(p.join("build/kept.txt"), format!("kept {step}\n")).unwrap();
                    "tracked file in an ignored directory"
                }
            }
        };
        check(&live, &reference, &format!("step {step}: {what} {rel}"));
    }
    let stats = live.stats();
    assert!(
        stats.fast > stats.full,
        "most snapshots should take the fast path: {stats:?}"
    );
    // The ignore rules change: both agree again.
    fs::write(p.join(".gitignore"), "build/\n").unwrap();
    check(&live, &reference, ".gitignore changed");
    fs::write(p.join("src/after.txt"), "after\n").unwrap();
    check(&live, &reference, "after the ignore change");

    let fsck = bh_test_support::git_command()
        .arg(format!(
            "--git-dir={}",
            live.store().dir().join("git").display()
        ))
        .args(["fsck", "--strict", "--no-dangling"])
        .output()
        .unwrap();
    assert!(fsck.status.success(), "{fsck:?}");
}

#[test]
fn live_store_notices_other_processes_and_nested_repositories() {
    let f = fx();
    let p = &f.project;
    fs::write(p.join("a.txt"), "a\n").unwrap();
    let live = LiveStore::new(Arc::new(f.store()));
    let reference = reference(&f);
    for _ in 0..3 {
        check(&live, &reference, "warm up");
    }
    // Another process (another Store on the same state) checkpoints and
    // restores behind the live store's back.
    fs::write(p.join("a.txt"), "b\n").unwrap();
    let other = f.store();
    let cp = other.snapshot(&req("manual")).unwrap().checkpoint;
    fs::write(p.join("a.txt"), "c\n").unwrap();
    check(&live, &reference, "after another snapshot");
    other.restore(&cp.id, &[], RestoreMode::Exact).unwrap();
    check(&live, &reference, "after another restore");
    // A directory turns into a nested repository, then back.
    fs::create_dir_all(p.join("sub")).unwrap();
    fs::write(p.join("sub/file.txt"), "in sub\n").unwrap();
    check(&live, &reference, "sub created");
    fs::write(p.join("sub/file.txt"), "in sub, changed\n").unwrap();
    check(&live, &reference, "sub changed");
    git(&p.join("sub"), &["init", "-q"]);
    check(&live, &reference, "sub is a repository");
    fs::write(p.join("sub/file.txt"), "inside the nested repository\n").unwrap();
    check(&live, &reference, "file in nested repository changed");
    fs::remove_dir_all(p.join("sub/.git")).unwrap();
    check(&live, &reference, "sub is a plain directory again");
    // A file over the size cap and an unreadable one: ordinary snapshots
    // record them as skipped, and so does the live store.
    let big = Store::open(
        &f.runner,
        p,
        &StoreOptions {
            state_dir: f.root.join("small-cap"),
            max_file_size: 4,
        },
    )
    .unwrap();
    let live_small = LiveStore::new(Arc::new(big));
    live_small.snapshot(&req("write")).unwrap();
    live_small.snapshot(&req("write")).unwrap();
    fs::write(p.join("large.txt"), "more than four bytes\n").unwrap();
    let out = live_small.snapshot(&req("write")).unwrap();
    assert!(
        out.skipped.iter().any(|s| s.path == "large.txt"),
        "{:?}",
        out.skipped
    );
    // … and the next snapshots go on recording it.
    fs::write(p.join("a.txt"), "d\n").unwrap();
    let out = live_small.snapshot(&req("write")).unwrap();
    assert!(out.created);
    assert!(out.skipped.iter().any(|s| s.path == "large.txt"));
}

#[test]
fn an_agent_like_sequence_takes_the_fast_path() {
    let f = fx();
    let p = &f.project;
    fs::create_dir_all(p.join("work")).unwrap();
    fs::write(p.join("README.md"), "hello\n").unwrap();
    let live = LiveStore::new(Arc::new(f.store()));
    let reference = reference(&f);
    check(&live, &reference, "first");
    check(&live, &reference, "second");
    let before = live.stats();
    for k in 0..20 {
        fs::write(p.join(format!("work/g{k}.txt")), "value 0\n").unwrap();
        check(&live, &reference, "write");
        fs::write(p.join(format!("work/g{k}.txt")), "value 1\n").unwrap();
        check(&live, &reference, "edit");
    }
    let after = live.stats();
    assert_eq!(after.full, before.full, "{before:?} → {after:?}");
    assert_eq!(after.fast, before.fast + 40);
    // Deep paths, several directories at once, a directory emptied by deletes.
    fs::create_dir_all(p.join("a/b/c/d")).unwrap();
    fs::create_dir_all(p.join("a/x")).unwrap();
    check(&live, &reference, "deep directories made");
    check(&live, &reference, "deep directories made (re-armed)");
    // Names around "a/" in git's tree order ("a.txt" < "a/" < "a0").
    for (k, rel) in [
        "a/b/c/d/e.txt",
        "a/b/f.txt",
        "a/x/g.txt",
        "top.txt",
        "a.txt",
        "a-b",
        "a0",
        "a/b.txt",
        "a/b-",
    ]
    .iter()
    .enumerate()
    {
        fs::write(p.join(rel), format!("{k}\n")).unwrap();
    }
    check(&live, &reference, "files in four directories");
    fs::write(p.join("a/b/c/d/e.txt"), "changed\n").unwrap();
    fs::remove_file(p.join("a/x/g.txt")).unwrap();
    check(&live, &reference, "one changed deep, one directory emptied");

    let fast = live.stats().fast;
    for k in 0..20 {
        fs::remove_file(p.join(format!("work/g{k}.txt"))).unwrap();
    }
    check(&live, &reference, "work/ emptied");
    assert_eq!(live.stats().fast, fast + 1);
    // Each live checkpoint restores like any other.
    let list = live.store().list().unwrap();
    let last_write = list.iter().find(|c| c.seq == 40).unwrap();
    live.store()
        .restore(&last_write.id, &[], RestoreMode::Exact)
        .unwrap();
    assert_eq!(
        fs::read_to_string(p.join("work/g19.txt")).unwrap(),
        "value 0\n"
    );
}

#[test]
fn ignore_rules_changed_between_ordinary_snapshots_are_seen() {
    let f = fx();
    let p = &f.project;
    fs::create_dir_all(p.join("gen")).unwrap();
    fs::write(p.join("gen/out.txt"), "gen\n").unwrap();
    fs::write(p.join(".gitignore"), "gen/\n").unwrap();
    fs::write(p.join("big.bin"), "more than the cap\n").unwrap();
    let options = StoreOptions {
        state_dir: f.root.join("capped"),
        max_file_size: 12,
    };
    let live = LiveStore::new(Arc::new(Store::open(&f.runner, p, &options).unwrap()));
    let reference = Store::open(
        &f.runner,
        p,
        &StoreOptions {
            state_dir: f.root.join("capped-reference"),
            max_file_size: 12,
        },
    )
    .unwrap();
    // A skipped file keeps every snapshot ordinary (and armed anew).
    check(&live, &reference, "first");
    check(&live, &reference, "second, armed");
    // The rules change while no fast snapshot looks: gen/ is no longer ignored.
    fs::remove_file(p.join("big.bin")).unwrap();
    fs::write(p.join(".gitignore"), "*.log\n").unwrap();
    check(&live, &reference, "gen/ un-ignored");
    // gen/ must now be watched: a change in it is seen.
    fs::write(p.join("gen/out.txt"), "gen 2\n").unwrap();
    let fast = live.stats().fast;
    check(&live, &reference, "gen/out.txt changed");
    assert_eq!(live.stats().fast, fast + 1, "{:?}", live.stats());
}

#[test]
fn uncached_deep_directories_with_spaces_are_read_in_one_go_and_agree() {
    let f = fx();
    let p = &f.project;
    fs::create_dir_all(p.join("dir one/sub two/deep three")).unwrap();
    fs::write(p.join("dir one/sub two/deep three/f.txt"), "f\n").unwrap();
    fs::write(p.join("dir one/sub two/g.txt"), "g\n").unwrap();
    fs::write(p.join("dir one/plain"), "a file\n").unwrap();
    fs::write(p.join("dir one/x: y"), "colon\n").unwrap();
    // Empty folders: watched, but not in any tree yet.
    fs::create_dir_all(p.join("dir one/new dir/x")).unwrap();
    let live = LiveStore::new(Arc::new(f.store()));
    let reference = reference(&f);
    check(&live, &reference, "first");
    check(&live, &reference, "armed");
    // Nothing cached yet: every level is read from the base at once.
    let fast = live.stats().fast;
    fs::write(p.join("dir one/sub two/deep three/f.txt"), "f2\n").unwrap();
    fs::write(p.join("dir one/sub two/g.txt"), "g2\n").unwrap();
    fs::write(p.join("dir one/new dir/x/y.txt"), "y\n").unwrap();
    fs::write(p.join("dir one/x: y"), "colon 2\n").unwrap();
    check(&live, &reference, "deep edits, a new nested directory");
    assert_eq!(live.stats().fast, fast + 1, "{:?}", live.stats());
    // Cached now; a sibling not cached.
    fs::remove_file(p.join("dir one/sub two/deep three/f.txt")).unwrap();
    check(&live, &reference, "a directory emptied");
    assert_eq!(live.stats().fast, fast + 2, "{:?}", live.stats());
    // A file that became a directory: the slow way, same result.
    fs::remove_file(p.join("dir one/plain")).unwrap();
    fs::create_dir(p.join("dir one/plain")).unwrap();
    fs::write(p.join("dir one/plain/inside.txt"), "in\n").unwrap();
    check(&live, &reference, "a file became a directory");
    check(&live, &reference, "after");
}

#[test]
fn a_directory_named_with_a_newline_never_desynchronises_the_batch_read() {
    let f = fx();
    let p = &f.project;
    // `<base>:x\nrefs/bh/last` would be two requests to `cat-file --batch`.
    let evil = p.join("x\nrefs/bh/last");
    fs::create_dir_all(&evil).unwrap();
    fs::write(evil.join("f.txt"), "f\n").unwrap();
    fs::create_dir_all(p.join("plain")).unwrap();
    fs::write(p.join("plain/g.txt"), "g\n").unwrap();
    let live = LiveStore::new(Arc::new(f.store()));
    let reference = reference(&f);
    check(&live, &reference, "first");
    check(&live, &reference, "armed");
    // A removal inside it reaches the base-tree read: the live store steps
    // aside (an ordinary snapshot) instead of asking git for two trees.
    let before = live.stats();
    fs::remove_file(evil.join("f.txt")).unwrap();
    fs::write(p.join("plain/g.txt"), "g2\n").unwrap();
    check(&live, &reference, "a removal under the newline directory");
    assert_eq!(live.stats().fast, before.fast, "{:?}", live.stats());
    // Every later snapshot still agrees.
    for step in 0..3 {
        fs::write(p.join("plain/g.txt"), format!("g{step}\n")).unwrap();
        check(&live, &reference, &format!("after, step {step}"));
    }
}
