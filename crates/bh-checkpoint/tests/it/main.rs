//! The library API the agent runtime calls before every mutating tool:
//! `Store::open`, `snapshot`, `list`, `diff`, `restore`, and path checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use fs_err::os::unix::fs::symlink;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use bh_checkpoint::{
    CheckpointError, DiffText, ErrorClass, RestoreMode, SnapshotRequest, Store, StoreOptions,
    project_relative,
};
use bh_git::GitRunner;

fn runner(home: &Path) -> GitRunner {
    let env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), home.as_os_str().to_owned()),
    ];
    GitRunner::new("git", env)
}

struct Fx {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    runner: GitRunner,
}

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let project = root.join("p");
    fs::create_dir_all(&project).unwrap();
    fs::create_dir_all(root.join("home")).unwrap();
    let runner = runner(&root.join("home"));
    Fx {
        _tmp: tmp,
        root,
        project,
        runner,
    }
}

impl Fx {
    fn store(&self) -> Store {
        Store::open(
            &self.runner,
            &self.project,
            &StoreOptions::new(self.root.join("state")),
        )
        .unwrap()
    }

    /// The store with a file-size cap of `max` bytes.
    fn store_capped(&self, max: u64) -> Store {
        let mut options = StoreOptions::new(self.root.join("state"));
        options.max_file_size = max;
        Store::open(&self.runner, &self.project, &options).unwrap()
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
        let path = self.project.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.project.join(rel)).unwrap()
    }

    /// Plain git in `dir`, as the user runs it (their `$HOME`).
    fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = bh_test_support::git_command()
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.project, args)
    }

    /// `git fsck --strict` of the store's shadow repository passes.
    fn fsck(&self, store: &Store) {
        let out = bh_test_support::git_command()
            .arg("--git-dir")
            .arg(store.dir().join("git"))
            .args(["fsck", "--strict", "--no-dangling"])
            .env("HOME", self.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "fsck: {out:?}");
    }
}

/// A project that is a git repository with one commit (two files).
fn git_fx() -> Fx {
    let f = fx();
    f.write("src/main.rs", "fn main() {}\n");
    f.write("README.md", "# readme\n");
    f.git(&["init", "-q"]);
    f.git(&["add", "-A"]);
    f.git(&["commit", "-q", "-m", "initial"]);
    f
}

/// `(status, path)` of each change.
fn changes(entries: &[bh_checkpoint::DiffEntry]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|e| (e.status.clone(), e.path.clone()))
        .collect()
}

/// Every file under `dir` (relative path → bytes, plus a marker for links/modes).
fn tree_state(dir: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.is_symlink() {
                let to = fs::read_link(&p).unwrap();
                out.insert(rel, format!("link:{}", to.display()));
            } else if meta.is_dir() {
                walk(base, &p, out);
            } else {
                let bytes = fs::read(&p).unwrap();
                let mode = meta.permissions().mode() & 0o777;
                out.insert(rel, format!("{mode:o}:{}", String::from_utf8_lossy(&bytes)));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn req(tool: &str) -> SnapshotRequest {
    SnapshotRequest {
        tool: tool.into(),
        session: Some("sess".into()),
        entry: Some("e1".into()),
    }
}

#[test]
fn snapshot_before_each_tool_then_undo_the_damage() {
    let f = fx();
    fs::write(f.project.join("a.txt"), "one\n").unwrap();
    let store = f.store();
    let first = store.snapshot(&req("write")).unwrap();
    assert!(first.created);
    assert_eq!(first.checkpoint.tool, "write");
    assert_eq!(first.checkpoint.session.as_deref(), Some("sess"));
    let again = store.snapshot(&req("edit")).unwrap();
    assert!(!again.created, "debounced");
    assert_eq!(again.checkpoint.commit, first.checkpoint.commit);

    fs::write(f.project.join("a.txt"), "two\n").unwrap();
    fs::write(f.project.join("b.txt"), "new\n").unwrap();
    let diff = store
        .diff(&first.checkpoint.id, &[], DiffText::None)
        .unwrap();
    let summary: Vec<(String, String)> = diff
        .entries
        .iter()
        .map(|e| (e.status.clone(), e.path.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![("M".into(), "a.txt".into()), ("A".into(), "b.txt".into())]
    );
    let out = store
        .restore(&first.checkpoint.commit, &[], RestoreMode::Exact)
        .unwrap();
    assert_eq!(out.restored, vec!["a.txt"]);
    assert_eq!(out.deleted, vec!["b.txt"]);
    assert_eq!(
        fs::read_to_string(f.project.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(!f.project.join("b.txt").exists());
    let list = store.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].kind, bh_checkpoint::CheckpointKind::PreRestore);
    assert_eq!(list[0].commit, out.safety.commit);
    assert!(list[0].seq > list[1].seq);
}

#[test]
fn errors_name_what_is_at_fault() {
    let f = fx();
    fs::write(f.project.join("a.txt"), "a").unwrap();
    let store = f.store();
    let cp = store.snapshot(&req("write")).unwrap().checkpoint;
    let err = store
        .restore("abcdef12", &[], RestoreMode::Additive)
        .unwrap_err();
    assert!(
        matches!(&err, CheckpointError::Id(e) if e.fault() == bh_protocol::prefix::PrefixFault::NotFound),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::NotFound);
    for bad in [
        &b"../x"[..],
        b"/etc/passwd",
        b"a/../../x",
        b".git/config",
        b"",
        b"x\0y",
    ] {
        let err = store
            .restore(&cp.id, &[bad.to_vec()], RestoreMode::Additive)
            .unwrap_err();
        assert!(
            matches!(err, CheckpointError::PathOutside { .. }),
            "{bad:?}: {err}"
        );
        assert_eq!(err.class(), ErrorClass::Refused);
    }
    let err = store
        .restore(&cp.id, &[b"missing.txt".to_vec()], RestoreMode::Additive)
        .unwrap_err();
    assert!(err.to_string().contains("missing.txt"), "{err}");
    let err = Store::open(
        &f.runner,
        &f.project,
        &StoreOptions::new(f.project.join("s")),
    )
    .unwrap_err();
    assert!(matches!(err, CheckpointError::Overlap { .. }));
    assert!(!f.project.join("s").exists());
    let err = Store::open(
        &f.runner,
        &f.root.join("nope"),
        &StoreOptions::new(f.root.join("state")),
    )
    .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn person_given_paths_are_confined_to_the_project() {
    let f = fx();
    fs::create_dir_all(f.project.join("sub")).unwrap();
    let outside = f.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    symlink(&outside, f.project.join("escape")).unwrap();
    symlink("sub", f.project.join("inner-link")).unwrap();
    let p = &f.project;
    assert_eq!(
        project_relative(p, p, Path::new("sub/x.txt")).unwrap(),
        b"sub/x.txt"
    );
    assert_eq!(
        project_relative(p, &p.join("sub"), Path::new("../y")).unwrap(),
        b"y"
    );
    assert_eq!(project_relative(p, p, Path::new(".")).unwrap(), b"");
    assert_eq!(project_relative(p, p, &p.join("sub")).unwrap(), b"sub");
    // the link itself is a path in the project …
    assert_eq!(
        project_relative(p, p, Path::new("escape")).unwrap(),
        b"escape"
    );
    // … but nothing through it
    assert!(project_relative(p, p, Path::new("escape/file")).is_err());
    assert_eq!(
        project_relative(p, p, Path::new("inner-link/f")).unwrap(),
        b"sub/f"
    );
    assert!(project_relative(p, p, Path::new("../p2/x")).is_err());
    assert!(project_relative(p, p, Path::new("/tmp")).is_err());
    assert!(project_relative(p, p, Path::new(".git/HEAD")).is_err());
}

#[test]
fn restore_does_not_follow_a_symlink_swapped_in_for_a_directory() {
    let f = fx();
    fs::create_dir_all(f.project.join("dir")).unwrap();
    fs::write(f.project.join("dir/f.txt"), "inside\n").unwrap();
    let store = f.store();
    let cp = store.snapshot(&req("write")).unwrap().checkpoint;
    let outside = f.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::remove_dir_all(f.project.join("dir")).unwrap();
    symlink(&outside, f.project.join("dir")).unwrap();
    store
        .restore(&cp.id, &[b"dir/f.txt".to_vec()], RestoreMode::Additive)
        .unwrap();
    assert!(!outside.join("f.txt").exists(), "wrote through the symlink");
    assert!(f.project.join("dir").is_dir());
    assert_eq!(
        fs::read_to_string(f.project.join("dir/f.txt")).unwrap(),
        "inside\n"
    );
}

/// A project whose own path holds a newline, a tab and a byte that is not
/// UTF-8 (a git repository, opened from a subfolder), with files named alike.
#[test]
fn a_project_path_of_any_bytes_works_everywhere() {
    use std::os::unix::ffi::OsStrExt;
    let f = fx();
    let project = f.root.join(std::ffi::OsStr::from_bytes(b"odd\nna\tme\xff"));
    fs::create_dir_all(project.join("sub")).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"f\nile\xfe");
    fs::write(project.join("sub").join(name), "one\n").unwrap();
    let git = |args: &[&str]| {
        let ok = bh_test_support::git_command()
            .args(["-c", "user.name=u", "-c", "user.email=u@x"])
            .args(args)
            .current_dir(&project)
            .env("HOME", f.root.join("home"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "x"]);
    let options = StoreOptions::new(f.root.join("state"));
    let store = Store::open_in(&f.runner, &project.join("sub"), &options).unwrap();
    assert_eq!(store.project(), project.as_path());
    let first = store.snapshot(&req("write")).unwrap().checkpoint;
    fs::write(project.join("sub").join(name), "two\n").unwrap();
    let second = store.snapshot(&req("write")).unwrap();
    assert_eq!(second.changed.len(), 1);
    let diff = store.diff(&first.id, &[], DiffText::None).unwrap();
    assert_eq!(diff.entries.len(), 1);
    assert_eq!(store.list().unwrap().len(), 2);
    store.restore(&first.id, &[], RestoreMode::Exact).unwrap();
    assert_eq!(
        fs::read_to_string(project.join("sub").join(name)).unwrap(),
        "one\n"
    );
}

/// Once open, a store is reached through the folder it checked: renaming it
/// away and putting a look-alike in its place changes nothing for the open
/// store (git is given the descriptor's `/proc` link, not the path).
#[test]
fn an_open_store_cannot_be_swapped_by_rename() {
    let f = fx();
    fs::write(f.project.join("a.txt"), "1\n").unwrap();
    let store = f.store();
    store.snapshot(&req("write")).unwrap();
    let real = store.dir().to_path_buf();
    let moved = real.with_file_name("moved-away");
    fs::rename(&real, &moved).unwrap();
    fs::create_dir(&real).unwrap();
    fs::write(f.project.join("a.txt"), "2\n").unwrap();
    let second = store.snapshot(&req("write")).unwrap();
    assert!(second.created);
    assert_eq!(store.list().unwrap().len(), 2);
    assert_eq!(
        fs::read_dir(&real).unwrap().count(),
        0,
        "the look-alike was used"
    );
    // put back, a store opened afresh finds both checkpoints
    fs::remove_dir(&real).unwrap();
    fs::rename(&moved, &real).unwrap();
    assert_eq!(f.store().list().unwrap().len(), 2);
}

/// A file where the checkpoint has a folder, a folder where it has a file, a
/// symlink where it has a file: every restore mode puts the checkpoint's
/// shape back (what it replaces is held by the safety checkpoint).
#[test]
fn restore_replaces_files_folders_and_symlinks_in_every_mode() {
    use std::os::unix::fs::PermissionsExt;
    for mode in [RestoreMode::Additive, RestoreMode::Exact] {
        let f = fx();
        let p = &f.project;
        fs::create_dir_all(p.join("was-dir")).unwrap();
        fs::write(p.join("was-dir/inner.txt"), "inner\n").unwrap();
        fs::write(p.join("was-file"), "file\n").unwrap();
        fs::write(p.join("tool.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(p.join("tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        symlink("tool.sh", p.join("link")).unwrap();
        let store = f.store();
        let cp = store.snapshot(&req("write")).unwrap().checkpoint;
        fs::remove_dir_all(p.join("was-dir")).unwrap();
        fs::write(p.join("was-dir"), "now a file\n").unwrap();
        fs::remove_file(p.join("was-file")).unwrap();
        fs::create_dir_all(p.join("was-file/sub")).unwrap();
        fs::write(p.join("was-file/sub/x"), "x\n").unwrap();
        fs::remove_file(p.join("link")).unwrap();
        fs::write(p.join("link"), "plain\n").unwrap();
        fs::remove_file(p.join("tool.sh")).unwrap();
        store.restore(&cp.id, &[], mode).unwrap();
        assert_eq!(
            fs::read_to_string(p.join("was-dir/inner.txt")).unwrap(),
            "inner\n"
        );
        assert_eq!(fs::read_to_string(p.join("was-file")).unwrap(), "file\n");
        assert_eq!(fs::read_link(p.join("link")).unwrap(), Path::new("tool.sh"));
        let m = fs::metadata(p.join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o111, 0o111, "exec bit");
        // named paths too
        fs::remove_file(p.join("was-file")).unwrap();
        fs::create_dir_all(p.join("was-file/sub")).unwrap();
        fs::write(p.join("was-file/sub/x"), "x\n").unwrap();
        store
            .restore(&cp.id, &[b"was-file".to_vec()], mode)
            .unwrap();
        assert_eq!(fs::read_to_string(p.join("was-file")).unwrap(), "file\n");
    }
}

mod concurrency;
mod gc_race;
mod live;
mod prune;
mod restore;
mod storage;
mod trust;

#[test]
fn seeding_is_reported_only_when_the_shadow_is_seeded() {
    let seeded = |autocrlf: &str| {
        let f = fx();
        let git = |args: &[&str]| {
            let out = bh_test_support::git_command()
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&f.project)
                .env("HOME", f.root.join("home"))
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        git(&["config", "core.autocrlf", autocrlf]);
        fs::write(f.project.join("a.txt"), "one\n").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-q", "-m", "base"]);
        let steps = std::sync::Mutex::new(Vec::new());
        f.store()
            .snapshot_with_progress(&req("write"), &|p| steps.lock().unwrap().push(p))
            .unwrap();
        let steps = steps.into_inner().unwrap();
        steps.contains(&bh_checkpoint::SnapshotProgress::Seeding)
    };
    assert!(seeded("false"));
    // autocrlf declines seeding (the index holds converted blobs): not said.
    assert!(!seeded("true"));
}
