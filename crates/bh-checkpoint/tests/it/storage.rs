//! What a snapshot stores: the work tree as the user sees it (their ignore
//! rules), byte for byte whatever git's filters and attributes say, with
//! symlinks and exec bits; what it cannot store it skips and records, and a
//! snapshot never fails for it.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn mode(f: &Fx, rel: &str, mode: u32) {
    fs::set_permissions(f.project.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn bytes_are_stored_exactly_despite_filters_and_attributes() {
    let f = git_fx();
    // A global clean filter that would rewrite content (and leave a trace).
    let trace = f.root.join("filter-ran");
    fs::write(
        f.home().join(".gitconfig"),
        format!(
            "[filter \"evil\"]\n\tclean = sh -c 'touch {0}; echo SECRET'\n\tsmudge = sh -c 'touch {0}; echo SMUDGED'\n[core]\n\tautocrlf = true\n",
            trace.display()
        ),
    )
    .unwrap();
    f.write(
        ".gitattributes",
        "*.dat filter=evil\n*.txt text eol=crlf\n*.id ident\n",
    );
    let crlf = "line1\r\nline2\nline3\r\n";
    f.write("data.dat", "raw data\n");
    f.write("mixed.txt", crlf);
    f.write("file.id", "$Id$\n");
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    assert!(!trace.exists(), "a clean filter ran");
    for rel in ["data.dat", "mixed.txt", "file.id"] {
        fs::remove_file(f.project.join(rel)).unwrap();
    }
    store.restore(&id, &[], RestoreMode::Additive).unwrap();
    assert!(!trace.exists(), "a smudge filter ran");
    assert_eq!(f.read("data.dat"), "raw data\n");
    assert_eq!(f.read("mixed.txt"), crlf);
    assert_eq!(f.read("file.id"), "$Id$\n");
}

#[test]
fn committed_files_with_conversions_are_stored_raw_when_seeding() {
    // The user's own index holds *converted* blobs; seeding must not trust them.
    let f = fx();
    f.write(".gitattributes", "*.txt text eol=lf\n");
    f.write("a.txt", "one\r\ntwo\r\n");
    f.git(&["init", "-q"]);
    f.git(&["add", "-A"]);
    f.git(&["commit", "-q", "-m", "i"]);
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    fs::remove_file(f.project.join("a.txt")).unwrap();
    store
        .restore(&id, &[b"a.txt".to_vec()], RestoreMode::Additive)
        .unwrap();
    assert_eq!(f.read("a.txt"), "one\r\ntwo\r\n");
}

#[test]
fn ignore_rules_of_the_user_apply() {
    let f = git_fx();
    f.write(".gitignore", "*.log\n");
    f.write("app.log", "log\n");
    fs::write(f.project.join(".git/info/exclude"), "secret.env\n").unwrap();
    f.write("secret.env", "KEY=1\n");
    let global_ignore = f.home().join("global-ignore");
    fs::write(&global_ignore, "*.tmp\n").unwrap();
    fs::write(
        f.home().join(".gitconfig"),
        format!("[core]\n\texcludesFile = {}\n", global_ignore.display()),
    )
    .unwrap();
    f.write("scratch.tmp", "t\n");
    f.write("kept.txt", "k\n");
    let snap = f.store().snapshot(&req("write")).unwrap();
    let changed: Vec<&str> = snap.changed.iter().map(|c| c.path.as_str()).collect();
    assert!(changed.contains(&"kept.txt"), "{changed:?}");
    for ignored in ["app.log", "secret.env", "scratch.tmp"] {
        assert!(
            !changed.contains(&ignored),
            "{ignored} captured: {changed:?}"
        );
    }
}

#[test]
fn symlinks_and_exec_bits_round_trip() {
    let f = fx();
    f.write("script.sh", "#!/bin/sh\necho hi\n");
    mode(&f, "script.sh", 0o755);
    f.write("target.txt", "t\n");
    symlink("target.txt", f.project.join("link")).unwrap();
    symlink("/etc/hostname", f.project.join("outside-link")).unwrap();
    symlink("missing", f.project.join("dangling")).unwrap();
    let before = tree_state(&f.project);
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    for rel in ["link", "dangling", "outside-link"] {
        fs::remove_file(f.project.join(rel)).unwrap();
    }
    mode(&f, "script.sh", 0o644);
    f.write("link", "now a file\n");
    store.restore(&id, &[], RestoreMode::Additive).unwrap();
    assert_eq!(tree_state(&f.project), before);
}

#[test]
fn nested_repos_and_large_files_never_fail_a_snapshot() {
    let f = git_fx();
    // an empty nested repository (no commit) and one with a commit
    let empty = f.project.join("empty-nested");
    fs::create_dir_all(&empty).unwrap();
    f.git_in(&empty, &["init", "-q"]);
    f.write("full-nested/f.txt", "x\n");
    let nested = f.project.join("full-nested");
    f.git_in(&nested, &["init", "-q"]);
    f.git_in(&nested, &["add", "-A"]);
    f.git_in(&nested, &["commit", "-qm", "x"]);
    f.write("big.bin", "x".repeat(3000));
    f.write("fine.txt", "fine\n");
    let store = f.store_capped(2048);
    let snap = store.snapshot(&req("write")).unwrap();
    assert!(snap.created);
    let skipped: Vec<(&str, &str)> = snap
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason.as_str()))
        .collect();
    for (path, why) in [
        ("empty-nested", "nested"),
        ("full-nested", "nested"),
        ("big.bin", "size cap"),
    ] {
        assert!(
            skipped.iter().any(|(p, r)| *p == path && r.contains(why)),
            "{path}: {skipped:?}"
        );
    }
    assert_eq!(snap.checkpoint.skipped, 3);
    let changed = changes(&snap.changed);
    assert!(changed.iter().any(|(_, p)| p == "fine.txt"), "{changed:?}");
    assert!(!changed.iter().any(|(_, p)| p == "big.bin"), "{changed:?}");
    // the nested repository itself is untouched
    assert!(nested.join(".git/HEAD").exists());
    // an exact restore never deletes what was skipped
    let out = store
        .restore(&snap.checkpoint.id, &[], RestoreMode::Exact)
        .unwrap();
    assert!(f.project.join("big.bin").exists(), "{:?}", out.deleted);
    assert!(nested.join("f.txt").exists());
}

#[test]
fn a_250_character_skipped_path_is_never_deleted_by_an_exact_restore() {
    let f = git_fx();
    let long = format!("{}.bin", "l".repeat(246));
    assert_eq!(long.len(), 250);
    f.write(&long, "x".repeat(3000));
    f.write("fine.txt", "fine\n");
    let snap = f.store_capped(2048).snapshot(&req("write")).unwrap();
    assert!(
        snap.skipped.iter().any(|s| s.path == long),
        "{:?}",
        snap.skipped
    );
    // restored with the default cap, the safety checkpoint captures the file,
    // so it shows as "created since": only the skip record protects it
    let out = f
        .store()
        .restore(&snap.checkpoint.id, &[], RestoreMode::Exact)
        .unwrap();
    assert!(f.project.join(&long).exists(), "deleted: {:?}", out.deleted);
    assert!(!out.deleted.iter().any(|d| d.contains("lll")), "{out:?}");
}

/// Root reads everything: the snapshot then runs as `nobody` in a child
/// process (this test binary, re-run), on files nobody owns.
#[test]
fn unreadable_file_is_skipped_and_recorded() {
    if let Some(project) = std::env::var_os("BH_IT_UNREADABLE_PROJECT") {
        let (project, state) = (
            PathBuf::from(project),
            std::env::var_os("BH_IT_STATE").unwrap(),
        );
        let home = std::env::var_os("BH_IT_HOME").unwrap();
        let store = Store::open(
            &runner(Path::new(&home)),
            &project,
            &StoreOptions::new(state),
        )
        .unwrap();
        let snap = store.snapshot(&req("write")).unwrap();
        let skipped = format!("{:?}", snap.skipped);
        assert!(
            skipped.contains("secret.txt") && skipped.contains("unreadable"),
            "{skipped}"
        );
        assert!(snap.changed.iter().any(|c| c.path == "ok.txt"));
        return;
    }
    let f = git_fx();
    f.write("secret.txt", "s\n");
    f.write("ok.txt", "ok\n");
    mode(&f, "secret.txt", 0o000);
    if !is_root() {
        let snap = f.store().snapshot(&req("write")).unwrap();
        let skipped = format!("{:?}", snap.skipped);
        assert!(
            skipped.contains("secret.txt") && skipped.contains("unreadable"),
            "{skipped}"
        );
        assert!(snap.changed.iter().any(|c| c.path == "ok.txt"));
        return;
    }
    // git refuses repositories owned by someone else unless told otherwise
    fs::write(f.home().join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    let bin = f.root.join("it-test");
    fs::copy(std::env::current_exe().unwrap(), &bin).unwrap();
    chown_r(&f.root);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args([
            "--exact",
            "storage::unreadable_file_is_skipped_and_recorded",
            "--test-threads=1",
        ])
        .env("BH_IT_UNREADABLE_PROJECT", &f.project)
        .env("BH_IT_STATE", f.state())
        .env("BH_IT_HOME", f.home())
        .current_dir(&f.project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");
}

fn chown_r(dir: &Path) {
    std::os::unix::fs::lchown(dir, Some(65534), Some(65534)).unwrap();
    if fs::symlink_metadata(dir).unwrap().is_dir() {
        for e in fs::read_dir(dir).unwrap() {
            chown_r(&e.unwrap().path());
        }
    }
}

#[test]
fn many_new_files_round_trip_byte_for_byte() {
    // Enough new files to take the parallel pre-hash path, plus one file above
    // the streaming threshold and some binary and empty files.
    let f = fx();
    for i in 0..700 {
        f.write(&format!("tree/{}/{i}.txt", i % 13), "line\n".repeat(i % 40));
    }
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    binary.extend_from_slice(b"\0\r\n\xff");
    f.write("blob.bin", &binary);
    let big: Vec<u8> = (0..9_500_000u32).map(|i| (i % 251) as u8).collect();
    f.write("big.dat", &big);
    let before = tree_state(&f.project);
    let store = f.store();
    let snap = store.snapshot(&req("write")).unwrap();
    assert_eq!(snap.changed.len(), 702);
    fs::remove_dir_all(f.project.join("tree")).unwrap();
    f.write("big.dat", b"truncated");
    fs::remove_file(f.project.join("blob.bin")).unwrap();
    store
        .restore(&snap.checkpoint.id, &[], RestoreMode::Additive)
        .unwrap();
    assert_eq!(tree_state(&f.project), before);
    assert_eq!(fs::read(f.project.join("big.dat")).unwrap(), big);
    f.fsck(&store);
}

#[test]
fn files_changed_match_the_trees() {
    // The change list a snapshot records must be exactly the difference
    // between the previous checkpoint's tree and the new one.
    let f = git_fx();
    f.write("keep.txt", "k\n");
    f.write("mod.txt", "1\n");
    f.write("del.txt", "d\n");
    f.write("to-link.txt", "l\n");
    f.write("to-dir", "file\n");
    f.write("exec.sh", "#!/bin/sh\n");
    f.write("grows.bin", "small\n");
    let store = f.store_capped(4096);
    let a = store.snapshot(&req("write")).unwrap().checkpoint.id;
    assert!(!store.snapshot(&req("write")).unwrap().created);
    f.write("mod.txt", "2\n");
    fs::remove_file(f.project.join("del.txt")).unwrap();
    fs::remove_file(f.project.join("to-link.txt")).unwrap();
    symlink("keep.txt", f.project.join("to-link.txt")).unwrap();
    fs::remove_file(f.project.join("to-dir")).unwrap();
    f.write("to-dir/inner.txt", "i\n");
    mode(&f, "exec.sh", 0o755);
    f.write("grows.bin", "x".repeat(5000));
    f.write("added.txt", "a\n");
    let snap = store.snapshot(&req("write")).unwrap();
    let recorded = changes(&snap.changed);
    let truth = changes(&store.diff(&a, &[], DiffText::None).unwrap().entries);
    assert_eq!(recorded, truth);
    assert!(
        truth.contains(&("D".into(), "grows.bin".into())),
        "{truth:?}"
    );
    assert!(
        truth.contains(&("T".into(), "to-link.txt".into())),
        "{truth:?}"
    );
    assert_eq!(snap.checkpoint.files_changed as usize, truth.len());
}

#[test]
fn checkpoints_survive_the_user_rewriting_history_and_gc() {
    let f = git_fx();
    f.write("data/keep.txt", "precious\n");
    f.git(&["add", "-A"]);
    f.git(&["commit", "-q", "-m", "second"]);
    f.git(&["gc", "-q"]); // everything packed: the seed hard-links the pack
    let store = f.store();
    let id = store.snapshot(&req("write")).unwrap().checkpoint.id;
    // rewrite history: drop the commit and collect everything unreachable
    f.git(&["reset", "-q", "--hard", "HEAD~1"]);
    f.git(&["reflog", "expire", "--expire=now", "--all"]);
    f.git(&["gc", "-q", "--prune=now"]);
    assert!(!f.project.join("data/keep.txt").exists());
    store.restore(&id, &[], RestoreMode::Additive).unwrap();
    assert_eq!(f.read("data/keep.txt"), "precious\n");
    f.fsck(&store);
}
