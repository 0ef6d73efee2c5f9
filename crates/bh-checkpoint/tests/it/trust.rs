//! What a store trusts and what it leaves alone: a private store outside the
//! project, refused when someone else can change it or the folders above it;
//! a restore never led outside the project by a swapped-in symlink; the
//! user's git dir and index never touched.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn open(f: &Fx) -> Result<Store, CheckpointError> {
    Store::open(&f.runner, &f.project, &StoreOptions::new(f.state()))
}

/// The read-only open (`bh checkpoint list`'s): refused alike.
fn open_existing(f: &Fx) -> Result<Option<Store>, CheckpointError> {
    Store::open_existing_in(&f.runner, &f.project, &StoreOptions::new(f.state()))
}

#[test]
fn store_is_private_and_outside_the_project() {
    let f = git_fx();
    let store = f.store();
    store.snapshot(&req("write")).unwrap();
    let dir = store.dir().to_path_buf();
    assert!(dir.starts_with(f.state().join("checkpoints")), "{dir:?}");
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("p-"), "{name}");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    // open to others: refused, and nothing is changed
    chmod(&dir, 0o755);
    let err = open(&f).unwrap_err();
    assert!(
        matches!(err, CheckpointError::StoreInsecure { .. }),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Refused);
    assert!(err.to_string().contains("open to group or others"), "{err}");
    assert_eq!(mode(&dir), 0o755);
    let err = open_existing(&f).unwrap_err();
    assert!(
        matches!(err, CheckpointError::StoreInsecure { .. }),
        "{err}"
    );
    chmod(&dir, 0o700);
    assert_eq!(open(&f).unwrap().list().unwrap().len(), 1);
    // a state dir inside the project: refused before anything is created
    let inside = f.project.join(".bh-state");
    let err = Store::open(&f.runner, &f.project, &StoreOptions::new(&inside)).unwrap_err();
    assert!(matches!(err, CheckpointError::Overlap { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Refused);
    assert!(!inside.exists());
    // a project inside the state dir: refused
    let inner = f.state().join("checkpoints/inner");
    fs::create_dir_all(&inner).unwrap();
    let err = Store::open(&f.runner, &inner, &StoreOptions::new(f.state())).unwrap_err();
    assert!(matches!(err, CheckpointError::Overlap { .. }), "{err}");
}

#[test]
fn store_owned_by_someone_else_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to chown a store to another user");
        return;
    }
    let f = git_fx();
    let store = f.store();
    store.snapshot(&req("write")).unwrap();
    std::os::unix::fs::chown(store.dir(), Some(65534), Some(65534)).unwrap();
    let err = open(&f).unwrap_err();
    assert!(
        matches!(err, CheckpointError::StoreNotOwned { .. }),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Refused);
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    let err = open_existing(&f).unwrap_err();
    assert!(
        matches!(err, CheckpointError::StoreNotOwned { .. }),
        "{err}"
    );
}

/// Every way the folders above a store can be handed to someone else.
#[test]
fn a_state_directory_another_user_can_change_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to chown a state directory to another user");
        return;
    }
    let refused = |f: &Fx, what: &str| {
        let err = open(f).expect_err(what);
        assert_eq!(err.class(), ErrorClass::Refused, "{what}: {err}");
        let err = open_existing(f).expect_err(what);
        assert_eq!(err.class(), ErrorClass::Refused, "{what}: {err}");
    };
    let snapshotted = || {
        let f = git_fx();
        f.store().snapshot(&req("write")).unwrap();
        f
    };
    // the state root owned by another user (they could rename `checkpoints`
    // away and put a look-alike store in its place)
    let f = snapshotted();
    std::os::unix::fs::chown(f.state(), Some(65534), Some(65534)).unwrap();
    refused(&f, "state root owned by uid 65534");
    // `checkpoints/` owned by another user
    let f = snapshotted();
    std::os::unix::fs::chown(f.state().join("checkpoints"), Some(65534), Some(65534)).unwrap();
    refused(&f, "checkpoints/ owned by uid 65534");
    // group- or world-writable on the way
    let f = snapshotted();
    chmod(&f.state(), 0o777);
    refused(&f, "state root mode 777");
    let f = snapshotted();
    chmod(&f.state().join("checkpoints"), 0o770);
    refused(&f, "checkpoints/ mode 770");
    // a symlink on the way (even to a folder the user owns)
    let f = git_fx();
    let elsewhere = f.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    chmod(&elsewhere, 0o700);
    fs::create_dir_all(f.state()).unwrap();
    symlink(&elsewhere, f.state().join("checkpoints")).unwrap();
    refused(&f, "checkpoints/ is a symlink");
    // and nothing was made through it
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// While an exact restore runs, another thread keeps exchanging the
/// directory `sub` with a symlink to a folder outside the project: nothing
/// may be written or deleted outside, whatever the interleaving.
#[test]
fn a_directory_swapped_for_a_symlink_during_restore_never_leads_outside() {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fx();
    let outside = f.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let decoys: Vec<String> = (0..50).map(|i| format!("new{i:03}")).collect();
    for d in &decoys {
        fs::write(outside.join(d), "decoy\n").unwrap();
    }
    let sub = f.project.join("sub");
    for i in 0..200 {
        f.write(&format!("sub/f{i:03}"), format!("content {i}\n"));
    }
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    let swap = f.project.join("swap");
    symlink(&outside, &swap).unwrap();
    let outside_state = || {
        let mut names: Vec<String> = fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let kind = |p: &Path| fs::symlink_metadata(p).ok().map(|m| m.is_symlink());
    for round in 0..12 {
        // The round's start: `sub` the real folder, `swap` the symlink to
        // `outside`. The last round's restore may have removed either one
        // (`swap` is not in the checkpoint, and exact deletes what is not).
        if kind(&sub) == Some(true) {
            fs::remove_file(&sub).unwrap();
        }
        if kind(&sub).is_none() {
            if kind(&swap) == Some(false) {
                fs::rename(&swap, &sub).unwrap();
            } else {
                fs::create_dir(&sub).unwrap();
            }
        }
        if kind(&swap) == Some(false) {
            fs::remove_dir_all(&swap).unwrap();
        }
        if kind(&swap).is_none() {
            symlink(&outside, &swap).unwrap();
        }
        // the state to restore from: the checkpoint's files gone, new ones made
        for e in fs::read_dir(&sub).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
        for d in &decoys {
            fs::write(sub.join(d), "made since\n").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (a, b) = (sub.clone(), swap.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE);
                }
            })
        };
        let out = store.restore(&id, &[], RestoreMode::Exact);
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(
            outside_state(),
            decoys,
            "round {round}: the folder outside the project changed ({out:?})"
        );
        for d in &decoys {
            assert_eq!(fs::read_to_string(outside.join(d)).unwrap(), "decoy\n");
        }
    }
}

#[test]
fn user_git_dir_is_byte_identical_after_every_operation() {
    let f = git_fx();
    f.write("staged.txt", "staged\n");
    f.git(&["add", "staged.txt"]);
    f.write("untracked.txt", "u\n");
    f.write("src/main.rs", "fn main() { changed() }\n");
    let before = tree_state(&f.project.join(".git"));
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    f.write("new.txt", "n\n");
    store.snapshot(&req("write")).unwrap();
    store.list().unwrap();
    store.diff(&id, &[], DiffText::Patch).unwrap();
    store
        .restore(&id, &[b"src/main.rs".to_vec()], RestoreMode::Additive)
        .unwrap();
    store.restore(&id, &[], RestoreMode::Exact).unwrap();
    store
        .prune(&bh_checkpoint::PrunePolicy {
            keep: Some(2),
            older_than: None,
        })
        .unwrap();
    assert_eq!(
        tree_state(&f.project.join(".git")),
        before,
        "the user's .git changed"
    );
}

/// `GIT_INDEX_FILE`, `GIT_DIR` and `GIT_WORK_TREE` in the environment a
/// store is given (as a hook inherits them) never reach the shadow's git.
#[test]
fn inherited_git_index_file_does_not_touch_the_users_index() {
    let f = git_fx();
    let index = f.project.join(".git/index");
    let before = fs::read(&index).unwrap();
    f.write("new.txt", "n\n");
    let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), f.home().into()),
        ("GIT_INDEX_FILE".into(), index.clone().into()),
        ("GIT_DIR".into(), f.project.join(".git").into()),
        ("GIT_WORK_TREE".into(), f.project.clone().into()),
    ];
    let runner = GitRunner::new("git", env);
    let store = Store::open(&runner, &f.project, &StoreOptions::new(f.state())).unwrap();
    let snap = store.snapshot(&req("write")).unwrap();
    assert!(snap.changed.iter().any(|c| c.path == "new.txt"));
    assert_eq!(fs::read(&index).unwrap(), before);
    assert!(!f.git(&["status", "--porcelain"]).contains("A  new.txt"));
}
