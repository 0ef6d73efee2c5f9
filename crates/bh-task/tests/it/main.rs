//! Adversarial histories on real repositories against the task boundary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bh_git::{Repo, Scope};
use bh_task::{FrozenScope, ScopeSpec, TaskError, Verdict, validate_candidate, validate_worktree};
use bh_test_support::TestRepo;
use fs_err as fs;
use pretty_assertions::assert_eq;

/// A repository with `src/`, docs, a lock file, CI and tool folders at its base.
struct Fx(TestRepo);

fn fx() -> Fx {
    let repo = TestRepo::new();
    repo.write("src/lib.rs", "pub fn a() {}\n");
    repo.write("src/.gitignore", "target\n");
    repo.write("docs/guide.md", "# guide\n");
    repo.write("README.md", "# readme\n");
    repo.write("Cargo.lock", "# lock\n");
    repo.write(".github/dependabot.yml", "version: 2\n");
    repo.write("tools/run.sh", "#!/bin/sh\n");
    repo.commit_all("base");
    Fx(repo)
}

impl std::ops::Deref for Fx {
    type Target = TestRepo;
    fn deref(&self) -> &TestRepo {
        &self.0
    }
}

impl Fx {
    fn commit(&self, msg: &str) -> String {
        self.commit_all(msg)
    }

    fn handle(&self) -> Repo {
        self.runner().repo(&self.dir, Scope::User)
    }

    fn scope(&self, base: &str, modules: &[&str]) -> FrozenScope {
        let spec = ScopeSpec {
            modules: modules.iter().map(|m| m.as_bytes().to_vec()).collect(),
            ..Default::default()
        };
        FrozenScope::freeze(&self.handle(), base, &spec, Some(b"tools/hooks")).unwrap()
    }
}

fn reasons(v: &[bh_task::Violation]) -> Vec<(Option<String>, String)> {
    v.iter()
        .map(|x| (x.path.clone(), x.reason.clone()))
        .collect()
}

#[test]
fn changes_inside_the_scope_pass() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    f.write("src/lib.rs", "pub fn b() {}\n");
    f.write("src/new.rs", "pub fn c() {}\n");
    let head = f.commit("work");
    let scope = f.scope(&base, &["src"]);
    assert_eq!(
        validate_candidate(&f.handle(), &scope, &head).unwrap(),
        vec![]
    );
    assert_eq!(validate_worktree(&f.handle(), &scope).unwrap(), vec![]);
}

#[test]
fn a_forbidden_change_committed_then_reverted_is_caught() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    f.write("README.md", "# hijacked\n");
    let bad = f.commit("sneak");
    f.write("README.md", "# readme\n");
    let revert = f.commit("unsneak");
    let scope = f.scope(&base, &["src"]);
    let v = validate_candidate(&f.handle(), &scope, &revert).unwrap();
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(v[0].commit.as_deref(), Some(bad.as_str()));
    assert_eq!(v[0].path.as_deref(), Some("README.md"));
    assert_eq!(v[0].reason, "outside the granted scope");
}

#[test]
fn both_sides_of_a_rename_count() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    f.git(&["mv", "src/lib.rs", "docs/lib.rs"]);
    let head = f.commit("move out");
    let v = validate_candidate(&f.handle(), &f.scope(&base, &["src"]), &head).unwrap();
    assert_eq!(
        reasons(&v),
        vec![(
            Some("docs/lib.rs".into()),
            "outside the granted scope".into()
        )]
    );
}

#[test]
fn protected_paths_lose_whatever_the_scope_says() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    fs::remove_file(f.dir.join("src/.gitignore")).unwrap();
    f.write("src/Cargo.lock", "x\n");
    f.write(".github/workflows/ci.yml", "on: push\n");
    f.write("tools/hooks/pre-commit", "#!/bin/sh\n");
    let head = f.commit("tamper");
    let scope = f.scope(&base, &["src", ".github", "tools"]);
    let v = reasons(&validate_candidate(&f.handle(), &scope, &head).unwrap());
    assert_eq!(
        v,
        vec![
            (
                Some(".github/workflows/ci.yml".into()),
                "protected (CI definition)".into()
            ),
            (
                Some("src/.gitignore".into()),
                "protected (Git control file)".into()
            ),
            (
                Some("src/Cargo.lock".into()),
                "protected (lock file)".into()
            ),
            (
                Some("tools/hooks/pre-commit".into()),
                "protected (hook folder (core.hooksPath))".into()
            ),
        ]
    );
}

#[test]
fn symlinks_gitlinks_and_merges_are_refused() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    fs_err::os::unix::fs::symlink("/etc/passwd", f.dir.join("src/escape")).unwrap();
    f.commit("symlink");
    let sub = f.commit("empty");
    f.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{sub},src/vendored"),
    ]);
    f.git(&["commit", "-q", "-m", "gitlink"]);
    f.git(&["checkout", "-q", "-b", "side", &base]);
    f.write("src/side.rs", "x\n");
    f.commit("side");
    f.git(&["checkout", "-q", "main"]);
    f.git(&["merge", "-q", "--no-ff", "-m", "merge", "side"]);
    let head = f.git(&["rev-parse", "HEAD"]);
    let v = reasons(&validate_candidate(&f.handle(), &f.scope(&base, &["src"]), &head).unwrap());
    assert!(
        v.contains(&(Some("src/escape".into()), "adds a symbolic link".into())),
        "{v:?}"
    );
    assert!(
        v.contains(&(
            Some("src/vendored".into()),
            "adds a gitlink (submodule)".into()
        )),
        "{v:?}"
    );
    assert!(v.contains(&(None, "merge commit".into())), "{v:?}");
}

#[test]
fn a_candidate_that_does_not_descend_from_the_base_is_refused() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    f.git(&["checkout", "-q", "--orphan", "elsewhere"]);
    f.write("src/lib.rs", "unrelated\n");
    let head = f.commit("orphan");
    let v = validate_candidate(&f.handle(), &f.scope(&base, &["src"]), &head).unwrap();
    assert_eq!(v.len(), 1);
    assert!(
        v[0].reason.contains("does not descend from the base"),
        "{v:?}"
    );
}

#[test]
fn uncommitted_work_is_reported_with_its_scope() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    f.write("src/lib.rs", "dirty\n");
    f.write("notes.txt", "stray\n");
    let v = reasons(&validate_worktree(&f.handle(), &f.scope(&base, &["src"])).unwrap());
    assert_eq!(
        v,
        vec![
            (Some("src/lib.rs".into()), "uncommitted change".into()),
            (Some("notes.txt".into()), "uncommitted change".into()),
            (Some("notes.txt".into()), "outside the granted scope".into()),
        ]
    );
}

#[test]
fn freezing_checks_every_grant_against_the_base() {
    let f = fx();
    let base = f.git(&["rev-parse", "HEAD"]);
    let repo = f.handle();
    let freeze = |m: &[&str], a: &[&str], n: &[&str]| {
        let bytes = |l: &[&str]| l.iter().map(|p| p.as_bytes().to_vec()).collect();
        FrozenScope::freeze(
            &repo,
            &base,
            &ScopeSpec {
                modules: bytes(m),
                allow_paths: bytes(a),
                allow_new_paths: bytes(n),
            },
            None,
        )
    };
    assert!(matches!(freeze(&[], &[], &[]), Err(TaskError::NoModule)));
    assert!(matches!(
        freeze(&["nope"], &[], &[]),
        Err(TaskError::ModuleNotTracked { .. })
    ));
    assert!(matches!(
        freeze(&["src/*"], &[], &[]),
        Err(TaskError::ModuleNotTracked { .. })
    ));
    assert!(matches!(
        freeze(&["../x"], &[], &[]),
        Err(TaskError::BadPath { .. })
    ));
    assert!(matches!(
        freeze(&["src"], &["docs"], &[]),
        Err(TaskError::AllowPathNotTracked { .. })
    ));
    assert!(matches!(
        freeze(&["src"], &[], &["README.md"]),
        Err(TaskError::AllowNewPathExists { .. })
    ));
    let scope = freeze(&["src"], &["README.md"], &["docs/new.md"]).unwrap();
    assert_eq!(scope.verdict(b"README.md"), Verdict::Allowed);
    assert_eq!(scope.verdict(b"docs/new.md"), Verdict::Allowed);
    assert_eq!(scope.verdict(b"docs/guide.md"), Verdict::OutOfScope);
    assert_eq!(scope.verdict(b"srcx/a.rs"), Verdict::OutOfScope);
    assert_eq!(scope.verdict(b"src/deep/a.rs"), Verdict::Allowed);
    let err = freeze(&["nope"], &[], &[]).unwrap_err().to_string();
    assert!(err.contains("nope") && err.contains(&base), "{err}");
}
