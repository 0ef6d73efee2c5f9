//! Git dirs are refused by identity, not only by the name `.git`: the
//! bare-repo + worktrees layout and a dotfiles layout, whose git dirs have
//! other names, are as closed to the tools as `.git` is.

use std::path::Path;

use bh_tools::{Profile, Toolbox, ToolboxOptions};
use serde_json::{Value, json};

use crate::common::snapshot;

fn git(dir: &Path, args: &[&str]) {
    let out = bh_test_support::git_command()
        .args([
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every path-taking tool on `path` fails, and `git_dir` is left unchanged.
fn all_refuse(tb: &Toolbox, git_dir: &Path, path: &str) {
    let before = snapshot(git_dir);
    let calls: Vec<(&str, Value)> = vec![
        ("read", json!({"path": path})),
        ("ls", json!({"path": path})),
        (
            "write",
            json!({"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}),
        ),
        (
            "edit",
            json!({"path": path, "edits": [{"oldText": "[core]", "newText": "[core]\n\tfsmonitor = x"}]}),
        ),
        ("grep", json!({"pattern": "core", "path": path})),
    ];
    for (name, args) in calls {
        let r = tb.call(name, &args);
        assert!(
            r.is_error,
            "{name} {path:?} succeeded: {}",
            serde_json::to_string(&r).unwrap()
        );
    }
    assert_eq!(snapshot(git_dir), before, "{path:?} changed the git dir");
}

fn check_both_modes(root: &Path, out: &Path, git_dir: &Path, paths: &[String], allowed: &str) {
    for walk in [false, true] {
        let tb = Toolbox::new(ToolboxOptions::new(root, Profile::Interactive, out)).unwrap();
        if walk {
            tb.confined_root().unwrap().disable_openat2();
        }
        for p in paths {
            all_refuse(&tb, git_dir, p);
        }
        // the work tree itself stays usable
        let r = tb.call("read", &json!({"path": allowed}));
        assert!(!r.is_error, "{}", r.text_content());
        let r = tb.call("write", &json!({"path": "new-file.txt", "content": "ok\n"}));
        assert!(!r.is_error, "{}", r.text_content());
    }
}

#[test]
fn bare_repository_with_worktrees_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs_err::canonicalize(tmp.path()).unwrap();
    let project = base.join("project");
    fs_err::create_dir_all(&project).unwrap();
    git(&project, &["init", "-q", "--bare", ".bare"]);
    fs_err::write(project.join(".git"), "gitdir: ./.bare\n").unwrap();
    fs_err::write(project.join("README.md"), "readme\n").unwrap();
    git(&project, &["config", "core.bare", "false"]);
    git(&project, &["add", "README.md"]);
    git(&project, &["commit", "-qm", "x"]);
    git(&project, &["worktree", "add", "-q", "feature"]);
    let bare = project.join(".bare");
    assert!(bare.join("worktrees/feature").is_dir());
    let paths: Vec<String> = [
        ".bare",
        ".bare/config",
        ".bare/HEAD",
        ".bare/hooks/pre-commit",
        ".bare/info/attributes",
        ".bare/worktrees/feature/HEAD",
        "feature/../.bare/config",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([bare.join("config").display().to_string()])
    .collect();
    check_both_modes(&project, &base.join("out"), &bare, &paths, "README.md");
    // renamed after the tools started, it is still the same directory
    let tb = Toolbox::new(ToolboxOptions::new(
        &project,
        Profile::Interactive,
        base.join("out"),
    ))
    .unwrap();
    fs_err::rename(&bare, project.join("renamed")).unwrap();
    all_refuse(&tb, &project.join("renamed"), "renamed/config");
}

#[test]
fn dotfiles_layout_with_the_git_dir_inside_the_work_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs_err::canonicalize(tmp.path()).unwrap();
    let home = base.join("home");
    fs_err::create_dir_all(&home).unwrap();
    fs_err::write(home.join(".bashrc"), "alias ll='ls -l'\n").unwrap();
    git(&home, &["init", "-q", "--bare", ".dotfiles"]);
    let dotfiles = home.join(".dotfiles");
    let with_tree = |args: &[&str]| {
        let mut all = vec!["--git-dir", ".dotfiles", "--work-tree", "."];
        all.extend_from_slice(args);
        git(&home, &all);
    };
    with_tree(&["config", "status.showUntrackedFiles", "no"]);
    with_tree(&["add", ".bashrc"]);
    with_tree(&["commit", "-qm", "dotfiles"]);
    let paths: Vec<String> = [
        ".dotfiles",
        ".dotfiles/config",
        ".dotfiles/HEAD",
        ".dotfiles/hooks/post-checkout",
        ".dotfiles/refs/heads/main",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    check_both_modes(&home, &base.join("out"), &dotfiles, &paths, ".bashrc");
}
