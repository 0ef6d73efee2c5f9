//! Concurrent writers, each with its own `Store` (threads, and processes:
//! this test binary re-run as a child), lose nothing; a snapshot killed
//! half-way never blocks the next one.

use std::process::{Child, Command, Stdio};

use super::*;

/// Not a test of its own: the body of a child process, run (with
/// `--ignored`) when `BH_IT_CHILD_PROJECT` is set.
#[test]
#[ignore = "the body of a child process of the tests below"]
fn child_snapshot() {
    let Some(project) = std::env::var_os("BH_IT_CHILD_PROJECT") else {
        return;
    };
    let state = std::env::var_os("BH_IT_STATE").unwrap();
    let home = std::env::var_os("BH_IT_HOME").unwrap();
    let tool = std::env::var("BH_IT_TOOL").unwrap();
    let store = Store::open(
        &runner(Path::new(&home)),
        Path::new(&project),
        &StoreOptions::new(state),
    )
    .unwrap();
    store.snapshot(&req(&tool)).unwrap();
}

/// A child process taking one snapshot of `f`'s project with its own store.
fn spawn_snapshot(f: &Fx, tool: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "concurrency::child_snapshot",
            "--ignored",
            "--test-threads=1",
        ])
        .env("BH_IT_CHILD_PROJECT", &f.project)
        .env("BH_IT_STATE", f.state())
        .env("BH_IT_HOME", f.home())
        .env("BH_IT_TOOL", tool)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// After the writers: one more snapshot captures everything, sequence
/// numbers are unique, the store is sound and the last checkpoint restores.
fn check_nothing_lost(f: &Fx) {
    let store = f.store();
    store.snapshot(&req("final")).unwrap();
    let cps = store.list().unwrap();
    let mut seqs: Vec<u64> = cps.iter().map(|c| c.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), cps.len(), "sequence numbers are unique");
    f.fsck(&store);
    fs::remove_dir_all(f.project.join("files")).unwrap();
    store
        .restore(&cps[0].id, &[], RestoreMode::Additive)
        .unwrap();
    assert_eq!(f.read("files/199.txt"), "199\n");
    for p in 0..8 {
        for round in 0..3 {
            assert_eq!(f.read(&format!("proc{p}/round{round}.txt")), "x\n");
        }
    }
}

fn prepare(f: &Fx) {
    for i in 0..200 {
        f.write(&format!("files/{i}.txt"), format!("{i}\n"));
    }
}

#[test]
fn eight_concurrent_processes_lose_nothing() {
    let f = git_fx();
    prepare(&f);
    let mut children = Vec::new();
    for p in 0..8 {
        for round in 0..3 {
            f.write(&format!("proc{p}/round{round}.txt"), "x\n");
        }
        children.push(spawn_snapshot(&f, &format!("p{p}")));
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
    }
    check_nothing_lost(&f);
}

#[test]
fn eight_concurrent_threads_each_with_its_own_store_lose_nothing() {
    let f = git_fx();
    prepare(&f);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..8)
            .map(|p| {
                for round in 0..3 {
                    f.write(&format!("proc{p}/round{round}.txt"), "x\n");
                }
                s.spawn(move || {
                    let store = f.store();
                    store.snapshot(&req(&format!("t{p}"))).unwrap()
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    check_nothing_lost(&f);
}

#[test]
fn killed_snapshot_never_blocks_the_next() {
    let f = fx();
    for i in 0..3000 {
        f.write(&format!("d{}/f{i}.txt", i % 30), format!("{i}\n"));
    }
    for delay in [5u64, 40, 120] {
        let mut child = spawn_snapshot(&f, "killed");
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        f.write("after-kill.txt", format!("{delay}\n"));
        let snap = f.store().snapshot(&req("write")).unwrap();
        assert!(snap.created);
    }
    f.fsck(&f.store());
}
