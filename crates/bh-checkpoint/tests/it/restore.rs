//! Restore: additive by default, exact on request, never destroying what no
//! checkpoint holds, refusing bad input; diff against the current tree.

use super::*;

#[test]
fn restore_is_additive_by_default_and_exact_on_request() {
    let f = fx();
    f.write("a.txt", "a1\n");
    f.write("dir/b.txt", "b1\n");
    f.write("dir/c.txt", "c1\n");
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    f.write("a.txt", "a2\n");
    f.write("dir/b.txt", "b2\n");
    fs::remove_file(f.project.join("dir/c.txt")).unwrap();
    f.write("dir/new.txt", "new\n");
    f.write("other-new.txt", "new\n");

    // path-scoped restore: only dir/b.txt
    let out = store
        .restore(&id, &[b"dir/b.txt".to_vec()], RestoreMode::Additive)
        .unwrap();
    assert_eq!(out.restored, ["dir/b.txt"]);
    assert_eq!(f.read("dir/b.txt"), "b1\n");
    assert_eq!(f.read("a.txt"), "a2\n");
    assert!(!f.project.join("dir/c.txt").exists());

    // a directory
    store
        .restore(&id, &[b"dir".to_vec()], RestoreMode::Additive)
        .unwrap();
    assert_eq!(f.read("dir/c.txt"), "c1\n");
    assert!(
        f.project.join("dir/new.txt").exists(),
        "additive keeps new files"
    );
    assert_eq!(f.read("a.txt"), "a2\n");

    // no path = everything, still additive
    let out = store.restore(&id, &[], RestoreMode::Additive).unwrap();
    assert_eq!(f.read("a.txt"), "a1\n");
    assert!(f.project.join("other-new.txt").exists());
    assert!(out.kept.iter().any(|k| k == "other-new.txt"), "{out:?}");
    assert!(out.deleted.is_empty(), "{out:?}");

    // exact removes files created since, but never ignored ones
    f.write(".gitignore", "*.log\n");
    f.write("debug.log", "keep me\n");
    let out = store.restore(&id, &[], RestoreMode::Exact).unwrap();
    for gone in ["other-new.txt", "dir/new.txt"] {
        assert!(out.deleted.iter().any(|d| d == gone), "{:?}", out.deleted);
    }
    assert!(!f.project.join("other-new.txt").exists());
    assert!(!f.project.join(".gitignore").exists());
    assert_eq!(f.read("debug.log"), "keep me\n");
    assert_eq!(out.mode, RestoreMode::Exact);

    // every restore is undoable: the safety checkpoint brings the state back
    store
        .restore(&out.safety.id, &[], RestoreMode::Exact)
        .unwrap();
    assert!(f.project.join("other-new.txt").exists());
    assert!(f.project.join(".gitignore").exists());
}

#[test]
fn restore_refuses_bad_input() {
    let f = fx();
    f.write("a.txt", "a\n");
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    let restore = |id: &str, path: &[u8]| {
        let paths = if path.is_empty() {
            vec![]
        } else {
            vec![path.to_vec()]
        };
        store
            .restore(id, &paths, RestoreMode::Additive)
            .unwrap_err()
    };
    for outside in [&b"../outside.txt"[..], b"/etc/passwd"] {
        let err = restore(&id, outside);
        assert_eq!(err.class(), ErrorClass::Refused, "{err}");
        assert!(err.to_string().contains("outside the project"), "{err}");
    }
    let err = restore(&id, b"no-such-file");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    assert!(err.to_string().contains("not in checkpoint"), "{err}");
    let err = restore("deadbeef", b"");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    assert!(err.to_string().contains("no checkpoint matches"), "{err}");
    // not an id at all
    let err = restore("zz", b"");
    assert_eq!(err.class(), ErrorClass::Usage, "{err}");
    // too short to be an id prefix
    let err = restore("abc", b"");
    assert_eq!(err.class(), ErrorClass::Usage, "{err}");
    // `latest` names the newest snapshot
    let out = store.restore("latest", &[], RestoreMode::Additive).unwrap();
    assert_eq!(out.checkpoint.id, id);
}

#[test]
fn restore_never_destroys_what_no_checkpoint_holds() {
    let f = fx();
    f.write("thing", "was a file\n");
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    fs::remove_file(f.project.join("thing")).unwrap();
    // now a directory holding an ignored file the store cannot have
    f.write(".gitignore", "*.secret\n");
    f.write("thing/data.secret", "precious\n");
    let err = store
        .restore(&id, &[b"thing".to_vec()], RestoreMode::Additive)
        .unwrap_err();
    assert!(
        matches!(err, CheckpointError::DirectoryConflict { .. }),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Refused);
    assert!(err.to_string().contains("thing/data.secret"), "{err}");
    assert_eq!(f.read("thing/data.secret"), "precious\n");
    // a directory whose files are all captured can be replaced (undoable)
    fs::remove_file(f.project.join("thing/data.secret")).unwrap();
    f.write("thing/plain.txt", "captured\n");
    let out = store
        .restore(&id, &[b"thing".to_vec()], RestoreMode::Additive)
        .unwrap();
    assert_eq!(f.read("thing"), "was a file\n");
    fs::remove_file(f.project.join("thing")).unwrap();
    store
        .restore(
            &out.safety.id,
            &[b"thing/plain.txt".to_vec()],
            RestoreMode::Additive,
        )
        .unwrap();
    assert_eq!(f.read("thing/plain.txt"), "captured\n");
}

#[test]
fn diff_against_the_current_tree() {
    let f = fx();
    f.write("a.txt", "one\n");
    f.write("b.txt", "bee\n");
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    f.write("a.txt", "two\n");
    f.write("c.txt", "new\n");
    fs::remove_file(f.project.join("b.txt")).unwrap();
    let out = store.diff(&id, &[], DiffText::None).unwrap();
    assert_eq!(
        changes(&out.entries),
        vec![
            ("M".into(), "a.txt".into()),
            ("D".into(), "b.txt".into()),
            ("A".into(), "c.txt".into())
        ]
    );
    assert!(out.text.is_none());
    let patch = store
        .diff(&id, &[b"a.txt".to_vec()], DiffText::Patch)
        .unwrap();
    assert_eq!(changes(&patch.entries), vec![("M".into(), "a.txt".into())]);
    let text = String::from_utf8(patch.text.unwrap()).unwrap();
    assert!(text.contains("-one") && text.contains("+two"), "{text}");
    assert!(!text.contains("c.txt"), "{text}");
    let stat = store.diff(&id, &[], DiffText::Stat).unwrap();
    let text = String::from_utf8(stat.text.unwrap()).unwrap();
    assert!(text.contains("3 files changed"), "{text}");
    // diff creates no checkpoint
    assert_eq!(store.list().unwrap().len(), 1);
}
