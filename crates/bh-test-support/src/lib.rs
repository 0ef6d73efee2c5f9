//! Test helpers (dev-only): a real Git repository in a temp dir, driven with
//! plain `git` as a user would, isolated from the machine's configuration.
//! Panics are the point here: a failing helper fails the test that used it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use bh_git::GitRunner;

pub mod bench_session;
pub mod bench_tree;
pub mod browser;
pub mod claude;
pub mod cli;
pub mod invariants;
pub mod mock_anthropic;
pub mod mock_http;
pub mod mock_openai;
pub mod pi;
pub mod tui;
pub mod worktree_repo;

/// Plain `git` for a test's or a benchmark's own fixtures, with no inherited
/// `GIT_*` variable: tests run from a hook, `git rebase -x` or `git bisect run`
/// inherit `GIT_DIR` (and friends), which would point a fixture's `git init` or
/// `git commit` at the developer's own repository. Callers add what they need.
pub fn git_command() -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(|k| k.starts_with("GIT_")) {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A temp folder holding `repo/` (the repository) and `home/` (its `$HOME`).
pub struct TestRepo {
    _tmp: tempfile::TempDir,
    /// The canonical temp folder.
    pub root: PathBuf,
    /// The repository (`root/repo`).
    pub dir: PathBuf,
    /// `$HOME` for every git call (`root/home`), so no user config leaks in.
    pub home: PathBuf,
}

impl TestRepo {
    /// An initialised, empty repository on branch `main` with a committer.
    pub fn new() -> TestRepo {
        let repo = TestRepo::empty_dirs();
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.invalid"]);
        repo
    }

    /// The folders only, no repository yet.
    pub fn empty_dirs() -> TestRepo {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let dir = root.join("repo");
        let home = root.join("home");
        fs::create_dir_all(&dir).unwrap();
        fs::create_dir_all(&home).unwrap();
        TestRepo {
            _tmp: tmp,
            root,
            dir,
            home,
        }
    }

    /// Plain git in the repository; panics with git's stderr on failure.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(&self.dir, &self.home, args)
    }

    /// Raw stdout of plain git (for byte-level comparisons).
    pub fn git_bytes(&self, args: &[&str]) -> Vec<u8> {
        let out = self.command(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// A `git` command set up like [`TestRepo::git`], to adjust and run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid");
        cmd
    }

    /// Writes a file (creating folders), relative to the repository.
    pub fn write(&self, rel: impl AsRef<Path>, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        fs::read_to_string(self.dir.join(rel)).unwrap()
    }

    /// `git add -A && git commit`; returns the new `HEAD`.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// The environment the harness would hand its git runner.
    pub fn runner_env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), self.home.clone().into_os_string()),
        ]
    }

    /// The hardened runner, with this test's `$HOME`.
    pub fn runner(&self) -> GitRunner {
        GitRunner::new("git", self.runner_env())
    }
}

impl Default for TestRepo {
    fn default() -> Self {
        TestRepo::new()
    }
}

/// Plain git in `dir` with `home` as `$HOME`; panics on failure.
pub fn git_in(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = git_command()
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// For benchmarks: the hardened runner with this process's `PATH`, `HOME`
/// and `TMPDIR` (what the CLI would hand it).
pub fn process_runner() -> GitRunner {
    let env = ["PATH", "HOME", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v)))
        .collect();
    GitRunner::new("git", env)
}

/// For benchmarks: plain git in `dir` with no system or global config and a
/// fixed identity; a failure is an error carrying git's stderr.
pub fn git_isolated(dir: &Path, args: &[&str]) -> std::io::Result<String> {
    let out = git_command()
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `text` without its SGR sequences (`ESC [ … m`, colours and styles): what
/// a person reads on a terminal, for assertions about words, not colours.
pub fn strip_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("\u{1b}[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let params = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            out.push_str("\u{1b}[");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether this run is CI's (`CI=true` or `CI=1`, as CI services and
/// `.ci/run` set it): there a tool a test needs must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A test part that needs `what` skips, saying `why`, outside CI; in CI the
/// missing tool fails the test (a skip there would hide a suite that never ran).
pub fn skip_or_fail_in_ci(what: &str, why: &str) {
    assert!(
        !in_ci(),
        "CI=true but {what} is missing: {why} (.ci/run installs it; a skip would hide the suite)"
    );
    eprintln!("skipped the {what} part: {why}");
}
