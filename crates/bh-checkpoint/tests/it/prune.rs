//! Prune: by count and age, then repack; `keep` counts snapshots, and the
//! undo points between them go with them.

use std::time::Duration;

use bh_checkpoint::{CheckpointKind, PrunePolicy};

use super::*;

fn keep(n: usize) -> PrunePolicy {
    PrunePolicy {
        keep: Some(n),
        older_than: None,
    }
}

#[test]
fn prune_by_count_and_age_then_repack() {
    let f = fx();
    let store = f.store();
    for i in 0..5 {
        f.write("f.txt", format!("v{i}\n"));
        store.snapshot(&req("write")).unwrap();
    }
    // no policy: refused, nothing removed
    let err = store.prune(&PrunePolicy::default()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Usage, "{err}");
    assert_eq!(store.list().unwrap().len(), 5);
    let out = store.prune(&keep(2)).unwrap();
    assert_eq!(out.removed.len(), 3);
    assert_eq!(out.kept, 2);
    let cps = store.list().unwrap();
    assert_eq!(cps.len(), 2);
    // the newest survive and stay restorable
    store
        .restore(&cps[1].id, &[], RestoreMode::Additive)
        .unwrap();
    assert_eq!(f.read("f.txt"), "v3\n");
    let out = store
        .prune(&PrunePolicy {
            keep: None,
            older_than: Some(Duration::from_secs(3600)),
        })
        .unwrap();
    assert!(out.removed.is_empty());
    let out = store.prune(&keep(0)).unwrap();
    assert!(!out.removed.is_empty());
    assert!(store.list().unwrap().is_empty());
    // and snapshots work again afterwards
    assert!(store.snapshot(&req("write")).unwrap().created);
    f.fsck(&store);
}

#[test]
fn prune_keep_counts_snapshots_and_undo_points_go_with_them() {
    let f = git_fx();
    let store = f.store();
    let mut ids = Vec::new();
    for i in 0..4 {
        f.write("f.txt", format!("v{i}\n"));
        ids.push(store.snapshot(&req("write")).unwrap().checkpoint.id);
    }
    // Three restores of an old snapshot from unsaved states: three undo points,
    // newer than every snapshot.
    for i in 0..3 {
        f.write("f.txt", format!("unsaved {i}\n"));
        store.restore(&ids[0], &[], RestoreMode::Additive).unwrap();
    }
    let kinds: Vec<CheckpointKind> = store
        .list()
        .unwrap()
        .iter()
        .map(|c| c.kind.clone())
        .collect();
    use CheckpointKind::{PreRestore as U, Snapshot as S};
    assert_eq!(kinds, [U, U, U, S, S, S, S]);
    // keep 2 keeps two snapshots (not the three undo points alone), and
    // the undo points newer than them.
    let out = store.prune(&keep(2)).unwrap();
    assert_eq!(out.removed.len(), 2);
    let list = store.list().unwrap();
    let left: Vec<&str> = list
        .iter()
        .filter(|c| c.kind == S)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(left, [ids[3].as_str(), ids[2].as_str()]);
    assert_eq!(list.iter().filter(|c| c.kind == U).count(), 3);
    // Pruning everything gives the space back (the shadow index no longer
    // holds the last state's blobs), and snapshots work again afterwards.
    let before = store.size();
    let out = store.prune(&keep(0)).unwrap();
    assert_eq!(out.size_before, before);
    assert!(
        out.size_after < before / 2,
        "store {before} -> {} bytes",
        out.size_after
    );
    assert!(store.snapshot(&req("write")).unwrap().created);
    f.fsck(&store);
}
