//! The agent's bash under its sandbox, tried as a prompt-injected model
//! would: the git metadata (found by git, whatever its name), a protected
//! `~/.gitconfig` and everything outside the project stay out of reach, while
//! ordinary edits and a build in the project work.

use std::path::{Path, PathBuf};

use bh_tools::{BashSandbox, Profile, SandboxMode, Toolbox, ToolboxOptions};
use serde_json::json;

fn git(dir: &Path, args: &[&str]) {
    let st = bh_test_support::git_command()
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@e")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@e")
        .output()
        .unwrap();
    assert!(st.status.success(), "git {args:?}: {st:?}");
}

struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs_err::canonicalize(tmp.path()).unwrap();
        Fixture { _tmp: tmp, base }
    }

    /// A repository with one commit at `base/name`.
    fn repo(&self, name: &str) -> PathBuf {
        let p = self.base.join(name);
        fs_err::create_dir_all(&p).unwrap();
        git(&p, &["init", "-q", "-b", "main"]);
        fs_err::write(p.join("a.txt"), "a\n").unwrap();
        git(&p, &["add", "."]);
        git(&p, &["commit", "-qm", "one"]);
        p
    }

    fn toolbox(&self, root: &Path, sandbox: BashSandbox) -> Toolbox {
        let mut o = ToolboxOptions::new(root, Profile::Interactive, self.base.join("out"));
        o.sandbox = sandbox;
        Toolbox::new(o).unwrap()
    }
}

fn bash(tb: &Toolbox, command: &str) -> String {
    let r = tb.call("bash", &json!({ "command": command, "timeout": 60 }));
    r.text_content()
}

#[test]
fn git_config_is_read_only_while_edits_and_builds_work() {
    let f = Fixture::new();
    let p = f.repo("project");
    let before = fs_err::read(p.join(".git/config")).unwrap();
    let tb = f.toolbox(&p, BashSandbox::default());
    let out = bash(
        &tb,
        "git config core.fsmonitor 'touch pwned'; echo x >> .git/config; \
         mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; \
         echo b > a.txt; printf '#!/bin/sh\\necho built\\n' > build.sh; chmod +x build.sh; ./build.sh",
    );
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(out.contains("built"), "{out}");
    assert_eq!(fs_err::read(p.join(".git/config")).unwrap(), before);
    assert!(!p.join(".git/hooks/pre-commit").exists());
    assert_eq!(fs_err::read_to_string(p.join("a.txt")).unwrap(), "b\n");
}

#[test]
fn writes_outside_the_project_are_refused() {
    let f = Fixture::new();
    let p = f.repo("project");
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = outside.path().join("planted");
    let tb = f.toolbox(&p, BashSandbox::default());
    let out = bash(&tb, &format!("echo x > {}; echo done", target.display()));
    // Refused by Landlock, or hidden by the private /tmp when the build dir
    // lies under /tmp; either way nothing is written.
    assert!(
        out.contains("Permission denied")
            || (outside.path().starts_with("/tmp") && out.contains("No such file or directory")),
        "{out}"
    );
    assert!(!target.exists());
}

#[test]
fn the_resolved_git_dir_of_a_linked_worktree_is_read_only() {
    let f = Fixture::new();
    let main = f.repo("main");
    let wt = f.base.join("wt");
    git(
        &main,
        &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()],
    );
    let admin = main.join(".git/worktrees/wt");
    let head = fs_err::read(admin.join("HEAD")).unwrap();
    let config = fs_err::read(main.join(".git/config")).unwrap();
    let dot_git = fs_err::read(wt.join(".git")).unwrap();
    let tb = f.toolbox(&wt, BashSandbox::default());
    let out = bash(
        &tb,
        &format!(
            "echo 0000 > {}/HEAD; echo x >> {}/.git/config; echo 'gitdir: /tmp/x' > .git; echo b > a.txt",
            admin.display(),
            main.display()
        ),
    );
    assert!(
        out.contains("Read-only file system") || out.contains("Permission denied"),
        "{out}"
    );
    assert_eq!(fs_err::read(admin.join("HEAD")).unwrap(), head);
    assert_eq!(fs_err::read(main.join(".git/config")).unwrap(), config);
    assert_eq!(fs_err::read(wt.join(".git")).unwrap(), dot_git);
    assert_eq!(fs_err::read_to_string(wt.join("a.txt")).unwrap(), "b\n");
}

#[test]
fn a_git_dir_not_named_dot_git_is_found_and_kept_read_only() {
    // The bare-plus-worktrees layout: project/.bare and project/.git =
    // "gitdir: ./.bare"; the tool root is the project.
    let f = Fixture::new();
    let src = f.repo("src");
    let project = f.base.join("project");
    fs_err::create_dir_all(&project).unwrap();
    git(
        &f.base,
        &[
            "clone",
            "-q",
            "--bare",
            src.to_str().unwrap(),
            project.join(".bare").to_str().unwrap(),
        ],
    );
    fs_err::write(project.join(".git"), "gitdir: ./.bare\n").unwrap();
    let config = fs_err::read(project.join(".bare/config")).unwrap();
    let tb = f.toolbox(&project, BashSandbox::default());
    let out = bash(
        &tb,
        "echo '[core]' >> .bare/config; mkdir .bare/hooks 2>&1; echo x > .bare/hooks/post-checkout; echo ok > notes.txt",
    );
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(fs_err::read(project.join(".bare/config")).unwrap(), config);
    assert!(!project.join(".bare/hooks/post-checkout").exists());
    assert_eq!(
        fs_err::read_to_string(project.join("notes.txt")).unwrap(),
        "ok\n"
    );
}

#[test]
fn a_protected_gitconfig_stays_read_only_even_inside_the_project() {
    let f = Fixture::new();
    let p = f.repo("project");
    // A fake home inside the project (the worst case) and one outside.
    let inner = p.join("home/.gitconfig");
    fs_err::create_dir_all(inner.parent().unwrap()).unwrap();
    fs_err::write(&inner, "[user]\n").unwrap();
    let outer_home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let outer = outer_home.path().join(".gitconfig");
    fs_err::write(&outer, "[user]\n").unwrap();
    let sb = BashSandbox {
        protected: vec![inner.clone(), outer.clone()],
        ..BashSandbox::default()
    };
    let tb = f.toolbox(&p, sb);
    let out = bash(
        &tb,
        &format!(
            "printf '[filter \"x\"]\\nclean=evil\\n' >> {}; printf '[filter \"x\"]\\n' >> {}; echo done",
            inner.display(),
            outer.display()
        ),
    );
    assert!(out.contains("done"), "{out}");
    assert_eq!(fs_err::read_to_string(&inner).unwrap(), "[user]\n");
    assert_eq!(fs_err::read_to_string(&outer).unwrap(), "[user]\n");
}

#[test]
fn read_only_mode_refuses_project_edits_but_allow_write_dirs_work() {
    let f = Fixture::new();
    let p = f.repo("project");
    let cache = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sb = BashSandbox {
        mode: SandboxMode::ReadOnly,
        allow_write: vec![cache.path().to_owned()],
        ..BashSandbox::default()
    };
    let tb = f.toolbox(&p, sb);
    let out = bash(
        &tb,
        &format!(
            "echo b > a.txt; echo c > {}/c; cat a.txt",
            cache.path().display()
        ),
    );
    assert!(
        out.contains("a.txt: Permission denied") || out.contains("a.txt: Read-only file system"),
        "{out}"
    );
    assert_eq!(fs_err::read_to_string(p.join("a.txt")).unwrap(), "a\n");
    assert_eq!(
        fs_err::read_to_string(cache.path().join("c")).unwrap(),
        "c\n"
    );
}

#[test]
fn sandbox_off_is_really_off() {
    // The control: without the sandbox the same write lands (so the tests
    // above can fail).
    let f = Fixture::new();
    let p = f.repo("project");
    let sb = BashSandbox {
        mode: SandboxMode::Off,
        ..BashSandbox::default()
    };
    let tb = f.toolbox(&p, sb);
    bash(&tb, "echo '# off' >> .git/config");
    assert!(
        fs_err::read_to_string(p.join(".git/config"))
            .unwrap()
            .ends_with("# off\n")
    );
}

#[test]
fn a_nested_repositorys_git_dir_is_read_only_too() {
    let f = Fixture::new();
    let p = f.repo("project");
    let nested = p.join("vendor/lib");
    fs_err::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q", "-b", "main"]);
    // A submodule-style pointer whose git dir lives elsewhere in the root.
    let sub = p.join("sub");
    let sub_git = p.join("modules-store/sub");
    fs_err::create_dir_all(&sub).unwrap();
    fs_err::create_dir_all(sub_git.parent().unwrap()).unwrap();
    git(&p, &["init", "-q", "--bare", sub_git.to_str().unwrap()]);
    fs_err::write(sub.join(".git"), "gitdir: ../modules-store/sub\n").unwrap();
    let before = fs_err::read(nested.join(".git/config")).unwrap();
    let before_sub = fs_err::read(sub_git.join("config")).unwrap();
    let tb = f.toolbox(&p, BashSandbox::default());
    let out = bash(
        &tb,
        "echo '[core]fsmonitor=x' >> vendor/lib/.git/config; mkdir vendor/lib/.git/hooks/x; \
         echo x >> modules-store/sub/config; echo x > sub/.git; echo ok > vendor/lib/file; echo done",
    );
    assert!(out.contains("done"), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(fs_err::read(nested.join(".git/config")).unwrap(), before);
    assert_eq!(fs_err::read(sub_git.join("config")).unwrap(), before_sub);
    assert!(!nested.join(".git/hooks/x").exists());
    assert_eq!(
        fs_err::read_to_string(sub.join(".git")).unwrap(),
        "gitdir: ../modules-store/sub\n"
    );
    assert!(nested.join("file").exists(), "the work tree stays writable");
}

#[test]
fn a_git_dir_git_will_not_resolve_is_still_found_by_its_pointer() {
    // The `.bare` layout, with a runner that cannot resolve it (as git
    // refusing another user's repository does): the `.git` file is read.
    let f = Fixture::new();
    let p = f.base.join("project");
    fs_err::create_dir_all(&p).unwrap();
    git(&p, &["init", "-q", "--bare", ".bare"]);
    fs_err::write(p.join(".git"), "gitdir: ./.bare\n").unwrap();
    let before = fs_err::read(p.join(".bare/config")).unwrap();
    let mut o = ToolboxOptions::new(&p, Profile::Interactive, f.base.join("out"));
    o.git = Some(bh_git::GitRunner::new("false", Vec::new()));
    let tb = Toolbox::new(o).unwrap();
    let out = bash(&tb, "echo x >> .bare/config; echo done");
    assert!(out.contains("done") && out.contains("Read-only"), "{out}");
    assert_eq!(fs_err::read(p.join(".bare/config")).unwrap(), before);
}

#[test]
fn bash_refuses_to_run_when_a_dot_git_cannot_be_resolved() {
    let f = Fixture::new();
    let p = f.repo("project");
    fs_err::create_dir_all(p.join("inner")).unwrap();
    fs_err::write(p.join("inner/.git"), "gitdir: ../nowhere\n").unwrap();
    let tb = f.toolbox(&p, BashSandbox::default());
    let out = bash(&tb, "touch ran");
    assert!(out.contains("cannot be kept read-only"), "{out}");
    assert!(out.contains("inner/.git"), "{out}");
    assert!(!p.join("ran").exists());
}

/// `kill -STOP 0` from the command (before the command had a session of its
/// own this also stopped the sandbox's intermediate, and the timeout then
/// waited forever), and a program waiting for `/dev/tty`: the bash call's
/// timeout still returns, with the command's output so far.
#[test]
fn kill_stop_0_or_a_tty_prompt_cannot_outlast_the_timeout() {
    let f = Fixture::new();
    let root = f.repo("p");
    let tb = f.toolbox(&root, BashSandbox::default());
    let commands = [
        "echo before; kill -STOP 0; echo after",
        "echo before; read -r x < /dev/tty || sleep 600",
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    // Not scoped: a hung call must fail the test, not hang it.
    std::thread::spawn(move || {
        for command in commands {
            let r = tb.call("bash", &json!({ "command": command, "timeout": 1 }));
            let _ = tx.send(r.text_content());
        }
    });
    for command in commands {
        // A hang guard, not a timing assertion.
        let text = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("bash never returned: {command}"));
        assert!(text.contains("before"), "{command}: {text}");
        assert!(text.contains("timed out"), "{command}: {text}");
    }
}
