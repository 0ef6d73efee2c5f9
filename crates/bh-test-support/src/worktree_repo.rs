//! The repository the worktree and handoff tests share: `repo/` on branch
//! `main` with a committed `.gitignore` (ignoring `.env`, `.env.*` but
//! `.env.example`, and `target/`), `.env.example` and `src/lib.rs`, plus
//! ignored `.env`, `.env.production` and `.env.local` files; `home/` as
//! its `$HOME`. Worktrees go to `repo.worktrees/<name>`, the state folder
//! is `state/`.

use fs_err as fs;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use bh_git::GitRunner;

pub struct WorktreeRepo {
    _tmp: tempfile::TempDir,
    /// The canonical temp folder.
    pub root: PathBuf,
    /// The main checkout (`root/repo`).
    pub repo: PathBuf,
    /// `$HOME` of every git call (`root/home`).
    pub home: PathBuf,
}

impl WorktreeRepo {
    /// The repository described in the module docs.
    pub fn new() -> WorktreeRepo {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let repo = root.join("repo");
        let home = root.join("home");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&home).unwrap();
        let f = WorktreeRepo {
            _tmp: tmp,
            root,
            repo,
            home,
        };
        f.git(&["init", "-q", "-b", "main"]);
        f.write(".gitignore", ".env\n.env.*\n!.env.example\ntarget/\n");
        f.write(".env.example", "EXAMPLE=1\n");
        f.write("src/lib.rs", "pub fn a() {}\n");
        f.commit("base");
        f.write(".env", "SECRET=1\n");
        f.write(".env.production", "PROD=1\n");
        f.write(".env.local", "LOCAL=1\n");
        f
    }

    /// `git args` in `dir` with a fixed identity; panics with git's stderr
    /// on failure; stdout trimmed.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = crate::git_command()
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "W")
            .env("GIT_AUTHOR_EMAIL", "w@example.invalid")
            .env("GIT_COMMITTER_NAME", "W")
            .env("GIT_COMMITTER_EMAIL", "w@example.invalid")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// [`WorktreeRepo::git_in`] the main checkout.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.repo, args)
    }

    /// Writes `text` to `rel` in the main checkout (folders made).
    pub fn write(&self, rel: &str, text: &str) {
        write(&self.repo.join(rel), text);
    }

    /// Commits everything in the main checkout; the new commit.
    pub fn commit(&self, msg: &str) -> String {
        self.commit_in(&self.repo, msg)
    }

    /// Commits everything in `dir` (a worktree); the new commit.
    pub fn commit_in(&self, dir: &Path, msg: &str) -> String {
        self.git_in(dir, &["add", "-A"]);
        self.git_in(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
        self.git_in(dir, &["rev-parse", "HEAD"])
    }

    /// The libraries' runner: `PATH` and this `$HOME` only.
    pub fn runner(&self) -> GitRunner {
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), self.home.clone().into_os_string()),
        ];
        GitRunner::new("git", env)
    }

    /// Where worktree `name` goes by default.
    pub fn wt(&self, name: &str) -> PathBuf {
        self.root.join("repo.worktrees").join(name)
    }

    /// The state folder.
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    /// Writes the project's `.better-harness/worktree.toml`.
    pub fn config(&self, toml: &str) {
        self.write(".better-harness/worktree.toml", toml);
    }
}

impl Default for WorktreeRepo {
    fn default() -> WorktreeRepo {
        WorktreeRepo::new()
    }
}

/// Writes `text` to `p`, making its folders.
pub fn write(p: &Path, text: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}
