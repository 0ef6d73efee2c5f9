//! The hermetic world of the CLI tests: a temp folder with its own `$HOME`,
//! state dir and Pi agent dir, and `bh` (or any program, or
//! `git`) run there with a **cleared environment** plus an explicit
//! allow-list ([`World::env`]).
//!
//! Why cleared: a test's result must never depend on the developer's shell.
//! An inherited `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` turns a "no key"
//! test into a real provider call; `GIT_DIR` or `GIT_WORK_TREE` (set by a
//! hook, `git rebase -x`, `git bisect run`) aims git at the developer's own
//! repository; `XDG_CONFIG_HOME` or `BH_CONFIG` loads their config; `BH_*`
//! (`BH_STATE_DIR`, `BH_TASK_SESSION`, `BH_CHECKPOINT_NO_SERVER`, …),
//! `PI_*`, `CLAUDE_PROJECT_DIR`, `NO_COLOR`, `TERM` or `CI` change what `bh`
//! does or prints. So nothing is inherited but `PATH` (to find `git`,
//! `node`, `setsid`); `bh` gets this world's `HOME`, `BH_STATE_DIR` and
//! `PI_CODING_AGENT_DIR`, and `GIT_CONFIG_NOSYSTEM=1`. The `XDG_*` folders
//! and `GIT_CONFIG_GLOBAL` are left unset on purpose: `bh`, git and Pi then
//! default them under `$HOME` (`~/.config`, `~/.local/state`,
//! `~/.gitconfig`), which is the world's, and a test that moves `HOME` with
//! `.env("HOME", …)` moves them too (a set `XDG_CONFIG_HOME` would keep
//! pointing at the old home). A test that needs more says so with `.env(..)`
//! on the command it gets.

use fs_err as fs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The identity of the fixtures' own commits (never `bh`'s).
pub const GIT_NAME: &str = "U";
pub const GIT_EMAIL: &str = "u@example.invalid";

/// A temp folder (or a given one) and where `bh` keeps things in it.
pub struct World {
    _tmp: Option<tempfile::TempDir>,
    bin: PathBuf,
    /// The canonical root folder.
    pub root: PathBuf,
    /// `$HOME` (default `root/home`, created); XDG and git default under it.
    pub home: PathBuf,
    /// `$BH_STATE_DIR` (default `root/state`, not created).
    pub state: PathBuf,
    /// `$PI_CODING_AGENT_DIR` (default `root/agent`, not created).
    pub agent: PathBuf,
}

impl World {
    /// A fresh temp folder; `bin` is the `bh` binary (`env!("CARGO_BIN_EXE_bh")`
    /// of the test crate: this crate cannot name it).
    pub fn new(bin: impl Into<PathBuf>) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let mut w = World::at(&root, bin);
        w._tmp = Some(tmp);
        w
    }

    /// The same layout on a folder the caller owns (e.g. a
    /// [`crate::TestRepo`]'s root, whose `home` is `root/home` too).
    pub fn at(root: &Path, bin: impl Into<PathBuf>) -> World {
        let root = fs::canonicalize(root).unwrap();
        let w = World {
            _tmp: None,
            bin: bin.into(),
            home: root.join("home"),
            state: root.join("state"),
            agent: root.join("agent"),
            root,
        };
        fs::create_dir_all(&w.home).unwrap();
        w
    }

    /// Another `$HOME` (created), for a fixture with its own layout.
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> World {
        self.home = home.into();
        fs::create_dir_all(&self.home).unwrap();
        self
    }

    /// Another `$BH_STATE_DIR`.
    pub fn with_state(mut self, state: impl Into<PathBuf>) -> World {
        self.state = state.into();
        self
    }

    /// Another `$PI_CODING_AGENT_DIR`.
    pub fn with_agent(mut self, agent: impl Into<PathBuf>) -> World {
        self.agent = agent.into();
        self
    }

    /// The `bh` binary this world runs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Every variable a command of this world gets, and nothing else.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("PATH", std::env::var_os("PATH").unwrap_or_default()),
            ("HOME", self.home.clone().into_os_string()),
            ("BH_STATE_DIR", self.state.clone().into_os_string()),
            ("PI_CODING_AGENT_DIR", self.agent.clone().into_os_string()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ]
    }

    /// `program` with the cleared environment plus [`World::env`], in
    /// `root`, stdin null.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .envs(self.env())
            .current_dir(&self.root)
            .stdin(Stdio::null());
        cmd
    }

    /// The built `bh` in `cwd`, with [`World::command`]'s environment.
    pub fn bh(&self, cwd: impl AsRef<Path>) -> Command {
        let mut cmd = self.command(&self.bin);
        cmd.current_dir(cwd);
        cmd
    }

    /// Plain `git` in `dir` for a fixture: this world's environment and a
    /// fixed identity ([`GIT_NAME`]), through [`crate::git_command`].
    pub fn git_command(&self, dir: impl AsRef<Path>) -> Command {
        let mut cmd = crate::git_command();
        cmd.env_clear()
            .envs(self.env())
            .env("GIT_AUTHOR_NAME", GIT_NAME)
            .env("GIT_AUTHOR_EMAIL", GIT_EMAIL)
            .env("GIT_COMMITTER_NAME", GIT_NAME)
            .env("GIT_COMMITTER_EMAIL", GIT_EMAIL)
            .current_dir(dir)
            .stdin(Stdio::null());
        cmd
    }

    /// `git args` in `dir`, whatever its exit.
    pub fn git_output(&self, dir: impl AsRef<Path>, args: &[&str]) -> Output {
        self.git_command(dir).args(args).output().unwrap()
    }

    /// `git args` in `dir`; panics with git's stderr on failure; stdout
    /// trimmed.
    pub fn git(&self, dir: impl AsRef<Path>, args: &[&str]) -> String {
        self.git_stdout(dir, args).trim().to_owned()
    }

    /// [`World::git`]'s stdout as git wrote it (trailing newline kept).
    pub fn git_stdout(&self, dir: impl AsRef<Path>, args: &[&str]) -> String {
        let dir = dir.as_ref();
        let out = self.git_output(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `env` prints under `cmd`: the names it saw.
    fn names(mut cmd: Command) -> Vec<String> {
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let mut names: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('=').next().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }

    /// A command of the world sees the allow-list and nothing else; its git
    /// sees the allow-list and the identity (plus the `GIT_*` git itself
    /// sets for an alias's shell, such as `GIT_PREFIX`, left out here: the
    /// leaky-parent test below catches an inherited one by its value).
    #[test]
    fn a_world_command_sees_only_the_allow_list() {
        let w = World::new("/nonexistent/bh");
        // Spelled out: a name added to the allow-list is a decision this
        // test makes visible, not a silent widening.
        let want: Vec<String> = [
            "BH_STATE_DIR",
            "GIT_CONFIG_NOSYSTEM",
            "HOME",
            "PATH",
            "PI_CODING_AGENT_DIR",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut listed: Vec<String> = w.env().iter().map(|(k, _)| (*k).to_owned()).collect();
        listed.sort();
        assert_eq!(listed, want);
        assert_eq!(names(w.command("env")), want);

        let mut git = w.git_command(&w.root);
        git.args(["-c", "alias.e=!env", "e"]);
        let mut got = names(git);
        // The alias's shell may export its own PWD, SHLVL or `_`.
        got.retain(|n| {
            let shell = ["PWD", "OLDPWD", "SHLVL", "_"].contains(&n.as_str());
            !shell
                && (!n.starts_with("GIT_")
                    || want.contains(n)
                    || n.contains("_NAME")
                    || n.contains("_EMAIL"))
        });
        let mut git_want = want.clone();
        git_want.extend(
            [
                "GIT_AUTHOR_EMAIL",
                "GIT_AUTHOR_NAME",
                "GIT_COMMITTER_EMAIL",
                "GIT_COMMITTER_NAME",
            ]
            .map(str::to_owned),
        );
        git_want.sort();
        assert_eq!(got, git_want);
    }

    /// The inherited variables a developer or CI may have are really gone:
    /// a child of this test run with them set sees none of them through the
    /// world (the test re-runs itself as that child).
    #[test]
    fn a_leaky_parent_changes_nothing() {
        const CHILD: &str = "BH_TEST_SUPPORT_LEAK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let w = World::new("/nonexistent/bh");
            let out = w.command("env").output().unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            for leak in ["LEAKED-7f3e", CHILD] {
                assert!(!text.contains(leak), "{leak} leaked into {text}");
            }
            assert!(text.contains(&format!("BH_STATE_DIR={}", w.state.display())));
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .args([
                "--exact",
                "cli::tests::a_leaky_parent_changes_nothing",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("OPENAI_API_KEY", "LEAKED-7f3e")
            .env("ANTHROPIC_API_KEY", "LEAKED-7f3e")
            .env("GIT_DIR", "/nonexistent-LEAKED-7f3e")
            .env("GIT_WORK_TREE", "/nonexistent-LEAKED-7f3e")
            .env("BH_STATE_DIR", "/nonexistent-LEAKED-7f3e")
            .env("BH_CONFIG", "/nonexistent-LEAKED-7f3e")
            .env("XDG_CONFIG_HOME", "/nonexistent-LEAKED-7f3e")
            .env("NO_COLOR", "LEAKED-7f3e")
            .env("TERM", "LEAKED-7f3e")
            .env("CI", "LEAKED-7f3e")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child run: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
