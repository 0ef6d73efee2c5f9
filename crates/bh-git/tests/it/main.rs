//! bh-git against plain git: the hardened runner sees what git sees, parses
//! `-z` output byte for byte, and ignores whatever the environment injects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_git::parse::{self, StatusEntry};
use bh_git::{GitError, GitRunner, Scope};
use bh_test_support::TestRepo;
use pretty_assertions::assert_eq;

mod object;

/// A repository in a temp dir ([`TestRepo`]) with byte-path helpers.
struct Fixture {
    t: TestRepo,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let t = TestRepo::new();
        Fixture {
            root: t.root.clone(),
            repo: t.dir.clone(),
            home: t.home.clone(),
            t,
        }
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        self.t.runner_env()
    }

    fn runner(&self) -> GitRunner {
        self.t.runner()
    }

    /// Plain git, the way a user runs it (same HOME, no system config).
    fn plain(&self, args: &[&str]) -> Vec<u8> {
        self.t.git_bytes(args)
    }

    fn write(&self, rel: &[u8], text: &str) -> PathBuf {
        self.t.write(std::ffi::OsStr::from_bytes(rel), text)
    }
}

/// Awkward names: spaces, quotes, newline, tab, backslash, invalid UTF-8, unicode.
const NAMES: &[&[u8]] = &[
    b"plain.txt",
    b"with space.txt",
    b"quote\"d.txt",
    b"new\nline.txt",
    b"tab\there.txt",
    b"back\\slash.txt",
    b"bad\xffutf8.txt",
    b"caf\xc3\xa9/na\xc3\xafve.txt",
    b"-leading-dash.txt",
];

#[test]
fn ls_files_parse_matches_plain_git() {
    let f = Fixture::new();
    for n in NAMES {
        f.write(n, "x\n");
    }
    f.plain(&["add", "-A"]);
    let ours = f
        .runner()
        .repo(&f.repo, Scope::User)
        .run(["ls-files", "-z"])
        .unwrap();
    let theirs = f.plain(&["ls-files", "-z"]);
    assert_eq!(ours, theirs);
    let mut parsed: Vec<&[u8]> = parse::split_z(&ours).collect();
    parsed.sort();
    let mut expected: Vec<&[u8]> = NAMES.to_vec();
    expected.sort();
    assert_eq!(parsed, expected);
}

#[test]
fn status_parse_matches_plain_porcelain_v1() {
    let f = Fixture::new();
    for n in NAMES {
        f.write(n, "x\n");
    }
    f.plain(&["add", "-A"]);
    f.plain(&["commit", "-q", "-m", "i"]);
    f.write(NAMES[1], "changed\n");
    fs::remove_file(f.repo.join(std::ffi::OsStr::from_bytes(NAMES[3]))).unwrap();
    f.write(b"untracked \xfe.txt", "u\n");
    f.write(NAMES[6], "staged\n");
    let out = f
        .runner()
        .repo(&f.repo, Scope::User)
        .run([
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ])
        .unwrap();
    let mut ours: Vec<(String, Vec<u8>)> = parse::status_v2(&out)
        .unwrap()
        .into_iter()
        .map(|e| match e {
            StatusEntry::Changed { x, y, path } => (
                format!("{}{}", x as char, y as char).replace('.', " "),
                path,
            ),
            StatusEntry::Untracked { path } => ("??".into(), path),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    ours.sort();
    // porcelain v1 -z: "XY path\0"
    let v1 = f.plain(&[
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--no-renames",
    ]);
    let mut theirs: Vec<(String, Vec<u8>)> = parse::split_z(&v1)
        .map(|r| {
            (
                String::from_utf8_lossy(&r[..2]).into_owned(),
                r[3..].to_vec(),
            )
        })
        .collect();
    theirs.sort();
    assert_eq!(ours, theirs);
}

#[test]
fn inherited_git_variables_are_scrubbed() {
    let f = Fixture::new();
    f.write(b"a.txt", "a\n");
    let decoy = f.root.join("decoy");
    fs::create_dir_all(&decoy).unwrap();
    bh_test_support::git_command()
        .args(["init", "-q"])
        .current_dir(&decoy)
        .status()
        .unwrap();
    let decoy_index = decoy.join(".git/index");
    let mut env = f.env();
    for (k, v) in [
        ("GIT_DIR", decoy.join(".git")),
        ("GIT_WORK_TREE", decoy.clone()),
        ("GIT_INDEX_FILE", decoy_index.clone()),
        ("GIT_OBJECT_DIRECTORY", decoy.join(".git/objects")),
        (
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            decoy.join(".git/objects"),
        ),
        (
            "GIT_CONFIG_PARAMETERS",
            PathBuf::from("'core.hooksPath'='/tmp/evil'"),
        ),
        ("GIT_CONFIG_COUNT", PathBuf::from("1")),
        ("GIT_NAMESPACE", PathBuf::from("evil")),
    ] {
        env.push((k.into(), v.into_os_string()));
    }
    let runner = GitRunner::new("git", env);
    assert!(
        runner
            .base_env()
            .iter()
            .all(|(k, _)| !k.as_bytes().starts_with(b"GIT_"))
    );
    let repo = runner.repo(&f.repo, Scope::User);
    repo.cmd(["add", "a.txt"])
        .optional_locks(true)
        .run()
        .unwrap();
    assert!(!decoy_index.exists(), "the decoy index was written");
    let listed = repo.run(["ls-files", "-z"]).unwrap();
    assert_eq!(listed, b"a.txt\0");
    let top = repo.run_line(["rev-parse", "--show-toplevel"]).unwrap();
    assert_eq!(Path::new(&top), f.repo);
}

#[test]
fn isolated_scope_ignores_global_config_user_scope_sees_it() {
    let f = Fixture::new();
    fs::write(f.home.join(".gitconfig"), "[bh]\n\tprobe = global\n").unwrap();
    let runner = f.runner();
    let user = runner.repo(&f.repo, Scope::User);
    assert_eq!(user.run_line(["config", "bh.probe"]).unwrap(), "global");
    let isolated = runner.repo(&f.repo, Scope::Isolated);
    let err = isolated.run(["config", "bh.probe"]).unwrap_err();
    assert_eq!(err.exit_code(), Some(1));
}

#[test]
fn hooks_never_run() {
    let f = Fixture::new();
    let marker = f.root.join("hook-ran");
    let hooks = f.repo.join(".git/hooks");
    fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("pre-commit");
    fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write(b"a.txt", "a\n");
    f.plain(&["add", "a.txt"]);
    // plain git runs the hook …
    f.plain(&["commit", "-q", "-m", "plain"]);
    assert!(marker.exists());
    fs::remove_file(&marker).unwrap();
    // … the runner does not
    f.write(b"a.txt", "b\n");
    let repo = f.runner().repo(&f.repo, Scope::User);
    repo.cmd(["commit", "-q", "-a", "-m", "harness"])
        .env("GIT_AUTHOR_NAME", "H")
        .env("GIT_AUTHOR_EMAIL", "h@example.invalid")
        .env("GIT_COMMITTER_NAME", "H")
        .env("GIT_COMMITTER_EMAIL", "h@example.invalid")
        .optional_locks(true)
        .run()
        .unwrap();
    assert!(!marker.exists(), "a hook ran");
}

#[test]
fn errors_carry_argv_exit_code_and_stderr() {
    let f = Fixture::new();
    let err = f
        .runner()
        .repo(&f.repo, Scope::User)
        .run(["rev-parse", "--verify", "no-such-ref"])
        .unwrap_err();
    match &err {
        GitError::Failed {
            argv, code, stderr, ..
        } => {
            assert!(argv.contains("rev-parse --verify no-such-ref"), "{argv}");
            assert_eq!(*code, Some(128));
            assert!(stderr.contains("Needed a single revision"), "{stderr}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("no-such-ref") && text.contains("128"),
        "{text}"
    );
    let missing = GitRunner::new("/no/such/git", f.env())
        .repo(&f.repo, Scope::User)
        .run(["status"])
        .unwrap_err();
    assert!(matches!(missing, GitError::Spawn { .. }));
}

#[test]
fn ls_tree_and_name_status_match_plain_git() {
    let f = Fixture::new();
    for n in NAMES {
        f.write(n, "x\n");
    }
    f.plain(&["add", "-A"]);
    f.plain(&["commit", "-q", "-m", "one"]);
    f.write(NAMES[0], "y\n");
    fs::remove_file(f.repo.join(std::ffi::OsStr::from_bytes(NAMES[2]))).unwrap();
    f.write(b"added.txt", "z\n");
    f.plain(&["add", "-A"]);
    f.plain(&["commit", "-q", "-m", "two"]);
    let repo = f.runner().repo(&f.repo, Scope::User);
    let tree = parse::ls_tree(&repo.run(["ls-tree", "-r", "-z", "HEAD"]).unwrap()).unwrap();
    let names = f.plain(&["ls-tree", "-r", "-z", "--name-only", "HEAD"]);
    let expected: Vec<&[u8]> = parse::split_z(&names).collect();
    assert_eq!(
        tree.iter().map(|e| e.path.as_slice()).collect::<Vec<_>>(),
        expected
    );
    assert!(
        tree.iter()
            .all(|e| e.mode == 0o100644 && e.kind == "blob" && e.oid.len() == 40)
    );
    let ns = parse::name_status(
        &repo
            .run([
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--name-status",
                "HEAD~1",
                "HEAD",
            ])
            .unwrap(),
    )
    .unwrap();
    let got: std::collections::BTreeSet<(char, Vec<u8>)> =
        ns.into_iter().map(|e| (e.status as char, e.path)).collect();
    let expected: std::collections::BTreeSet<(char, Vec<u8>)> = [
        ('A', b"added.txt".to_vec()),
        ('M', NAMES[0].to_vec()),
        ('D', NAMES[2].to_vec()),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn large_stdin_and_stdout_do_not_deadlock() {
    let f = Fixture::new();
    let repo = f.runner().repo(&f.repo, Scope::Isolated);
    // 4 MiB in, 4 MiB out through hash-object --stdin (object written)
    let blob = vec![b'x'; 4 << 20];
    let oid = repo
        .cmd(["hash-object", "-w", "--stdin"])
        .stdin(blob.clone())
        .run()
        .unwrap();
    let oid = String::from_utf8(oid.stdout).unwrap();
    let back = repo.run(["cat-file", "blob", oid.trim()]).unwrap();
    assert_eq!(back.len(), blob.len());
}

mod ops {
    use super::{Fixture, Scope, fs};
    use pretty_assertions::assert_eq;

    fn committed(f: &Fixture) -> String {
        f.write(b"a.txt", "a\n");
        f.plain(&["add", "-A"]);
        f.plain(&["commit", "-q", "-m", "one"]);
        String::from_utf8(f.plain(&["rev-parse", "HEAD"]))
            .unwrap()
            .trim()
            .to_owned()
    }

    #[test]
    fn revisions_resolve_to_full_ids_like_plain_git() {
        let f = Fixture::new();
        let head = committed(&f);
        let repo = f.runner().repo(&f.repo, Scope::User);
        assert_eq!(repo.resolve_commit("HEAD").unwrap(), head);
        assert_eq!(repo.resolve_commit(&head[..8]).unwrap(), head);
        let tree = String::from_utf8(f.plain(&["rev-parse", "HEAD^{tree}"])).unwrap();
        assert_eq!(repo.tree_of(&head).unwrap(), tree.trim());
        assert!(repo.resolve_commit("no-such-branch").is_err());
        // never taken as an option
        assert!(repo.resolve_commit("--all").is_err());
    }

    #[test]
    fn refs_are_created_once_and_moved_only_from_the_expected_value() {
        let f = Fixture::new();
        let one = committed(&f);
        f.write(b"a.txt", "b\n");
        f.plain(&["commit", "-q", "-am", "two"]);
        let two = String::from_utf8(f.plain(&["rev-parse", "HEAD"]))
            .unwrap()
            .trim()
            .to_owned();
        let repo = f.runner().repo(&f.repo, Scope::User);
        let name = "refs/better-harness/test/x";
        assert_eq!(repo.read_ref(name).unwrap(), None);
        repo.create_ref(name, &one).unwrap();
        assert_eq!(repo.read_ref(name).unwrap().as_deref(), Some(one.as_str()));
        // create-only: a second create fails and changes nothing
        let err = repo.create_ref(name, &two).unwrap_err();
        assert!(
            err.stderr().contains("already exists") || err.stderr().contains("cannot lock"),
            "{err}"
        );
        // CAS with a wrong old value fails
        assert!(repo.update_ref_cas(name, &two, &two).is_err());
        assert_eq!(repo.read_ref(name).unwrap().as_deref(), Some(one.as_str()));
        repo.update_ref_cas(name, &two, &one).unwrap();
        let plain = String::from_utf8(f.plain(&["rev-parse", name])).unwrap();
        assert_eq!(plain.trim(), two);
        assert!(repo.delete_ref_cas(name, &one).is_err());
        repo.delete_ref_cas(name, &two).unwrap();
        assert_eq!(repo.read_ref(name).unwrap(), None);
    }

    #[test]
    fn ancestry_and_commit_ranges() {
        let f = Fixture::new();
        let one = committed(&f);
        f.write(b"b.txt", "b\n");
        f.plain(&["add", "-A"]);
        f.plain(&["commit", "-q", "-m", "two"]);
        f.write(b"a.txt", "changed\n");
        fs::remove_file(f.repo.join("b.txt")).unwrap();
        f.write(b"c d.txt", "c\n");
        f.plain(&["add", "-A"]);
        f.plain(&["commit", "-q", "-m", "three"]);
        let repo = f.runner().repo(&f.repo, Scope::User);
        let head = repo.resolve_commit("HEAD").unwrap();
        assert!(repo.is_ancestor(&one, &head).unwrap());
        assert!(!repo.is_ancestor(&head, &one).unwrap());
        let range = repo.commits_between(&one, &head).unwrap();
        assert_eq!(range.len(), 2);
        assert_eq!(range[1], head);
        let changed: Vec<(char, Vec<u8>)> = repo
            .commit_name_status(&head)
            .unwrap()
            .into_iter()
            .map(|e| (e.status as char, e.path))
            .collect();
        assert_eq!(
            changed,
            vec![
                ('M', b"a.txt".to_vec()),
                ('D', b"b.txt".to_vec()),
                ('A', b"c d.txt".to_vec())
            ]
        );
        let root: Vec<Vec<u8>> = repo
            .commit_name_status(&one)
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(root, vec![b"a.txt".to_vec()]);
        assert_eq!(repo.name_status(&one, &head).unwrap().len(), 2);
    }

    #[test]
    fn detached_locked_worktrees_round_trip() {
        let f = Fixture::new();
        let head = committed(&f);
        let repo = f.runner().repo(&f.repo, Scope::User);
        let wt = f.root.join("wt one");
        repo.worktree_add_detached(&wt, &head, "task t1").unwrap();
        assert_eq!(fs::read_to_string(wt.join("a.txt")).unwrap(), "a\n");
        let list = repo.worktrees().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].path, f.repo);
        assert!(
            list[0]
                .branch
                .as_deref()
                .is_some_and(|b| b.starts_with(b"refs/heads/"))
        );
        let added = &list[1];
        assert_eq!(added.path, wt);
        assert!(added.detached);
        assert_eq!(added.head.as_deref(), Some(head.as_str()));
        assert_eq!(added.locked.as_deref(), Some("task t1"));
        // a locked worktree survives a normal remove and prune
        assert!(repo.worktree_remove(&wt, false).is_err());
        f.plain(&["worktree", "prune"]);
        assert_eq!(repo.worktrees().unwrap().len(), 2);
        repo.worktree_unlock(&wt).unwrap();
        assert_eq!(repo.worktrees().unwrap()[1].locked, None);
        repo.worktree_remove(&wt, true).unwrap();
        assert!(!wt.exists());
        assert_eq!(repo.worktrees().unwrap().len(), 1);
    }

    #[test]
    fn worktree_porcelain_parser_handles_every_field() {
        let out = b"worktree /r\0HEAD abc\0branch refs/heads/main\0\0worktree /r/wt\0HEAD def\0detached\0locked\0prunable gitdir file points to non-existent location\0\0worktree /bare\0bare\0\0";
        let list = bh_git::ops::parse_worktrees(out).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].branch.as_deref(), Some(&b"refs/heads/main"[..]));
        assert_eq!(list[1].locked.as_deref(), Some(""));
        assert!(
            list[1]
                .prunable
                .as_deref()
                .unwrap()
                .contains("non-existent")
        );
        assert!(list[2].bare);
    }
}

/// A private index stages the work tree (edits, additions, deletions, no
/// ignored files) without touching the user's index, and is removed on drop.
#[test]
fn temp_index_stages_the_work_tree_and_leaves_the_users_index_alone() {
    let t = TestRepo::new();
    t.write("a.txt", "a\n");
    t.write("gone.txt", "g\n");
    t.write(".gitignore", "ignored.txt\n");
    let base = t.commit_all("base");
    t.write("a.txt", "changed\n");
    t.write("new.txt", "n\n");
    t.write("ignored.txt", "secret\n");
    fs::remove_file(t.dir.join("gone.txt")).unwrap();
    t.git(&["add", "a.txt"]);
    let index_before = fs::read(t.dir.join(".git/index")).unwrap();
    let repo = t.runner().repo(&t.dir, Scope::User);
    let path = t.root.join("private.index");
    let tree = {
        let index = repo.temp_index(&path);
        let tree = index.stage_work_tree(&base).unwrap();
        assert!(path.exists());
        tree
    };
    assert!(!path.exists(), "removed on drop");
    assert_eq!(fs::read(t.dir.join(".git/index")).unwrap(), index_before);
    let names = t.git(&["ls-tree", "--name-only", &tree]);
    assert_eq!(names, ".gitignore\na.txt\nnew.txt");
    assert_eq!(
        t.git(&["cat-file", "-p", &format!("{tree}:a.txt")]),
        "changed"
    );
}
