//! The repository a worktree belongs to: common dir, main checkout, config.

use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Repo, Scope};
use serde::Deserialize;

use crate::error::{Result, WorktreeError};

/// `.better-harness/worktree.toml` of the main checkout.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Shell commands run (`sh -c`) in a new worktree, in order, stopping at
    /// the first failure.
    #[serde(default)]
    pub post_create: Vec<String>,
    /// Folder that holds the worktrees (relative paths are relative to the
    /// main checkout). Default: `<main checkout>.worktrees`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

/// A repository seen from its main checkout.
#[derive(Debug, Clone)]
pub struct Project {
    runner: GitRunner,
    /// The main checkout (first entry of `git worktree list`).
    pub main: PathBuf,
    /// `git rev-parse --git-common-dir`, absolute.
    pub common_dir: PathBuf,
    pub config: Config,
}

/// Names are one path component: `[A-Za-z0-9._-]`, 1–100 bytes, not starting
/// with `.` or `-`, no `..`, not ending in `.lock`.
pub fn validate_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(WorktreeError::InvalidName {
            name: name.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if name.is_empty() || name.len() > 100 {
        return bad("must be 1 to 100 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("only letters, digits, '.', '_' and '-' are allowed");
    }
    if name.starts_with(['.', '-']) || name.contains("..") || name.ends_with(".lock") {
        return bad("must not start with '.' or '-', contain '..' or end in '.lock'");
    }
    Ok(())
}

pub(crate) fn config_path(main: &Path) -> PathBuf {
    main.join(".better-harness").join("worktree.toml")
}

impl Project {
    /// The repository containing `path` (any of its worktrees).
    pub fn discover(runner: &GitRunner, path: &Path) -> Result<Project> {
        let repo = runner.repo(path, Scope::User);
        let out = repo
            .cmd([
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--is-bare-repository",
            ])
            .ok_codes(&[0, 128])
            .run()?;
        if out.code != 0 {
            return Err(WorktreeError::NotARepository {
                path: path.to_path_buf(),
            });
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let common_dir = PathBuf::from(lines.next().unwrap_or_default());
        if lines.next() == Some("true") {
            return Err(WorktreeError::Refused(format!(
                "{} is a bare repository",
                path.display()
            )));
        }
        let worktrees = repo.worktrees()?;
        let main = worktrees
            .iter()
            .find(|w| !w.bare)
            .map(|w| w.path.clone())
            .ok_or_else(|| WorktreeError::NotARepository {
                path: path.to_path_buf(),
            })?;
        let cfg_path = config_path(&main);
        let config = match fs_err::read_to_string(&cfg_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| WorktreeError::Format {
                path: cfg_path.clone(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
            Err(e) => return Err(WorktreeError::io(cfg_path, e)),
        };
        Ok(Project {
            runner: runner.clone(),
            main,
            common_dir,
            config,
        })
    }

    pub fn runner(&self) -> &GitRunner {
        &self.runner
    }

    /// Git handle on the main checkout.
    pub fn repo(&self) -> Repo {
        self.runner.repo(&self.main, Scope::User)
    }

    /// Git handle on one worktree.
    pub fn repo_at(&self, path: &Path) -> Repo {
        self.runner.repo(path, Scope::User)
    }

    /// Where worktrees go unless a path is given.
    pub fn worktrees_root(&self) -> PathBuf {
        match &self.config.dir {
            Some(dir) if dir.is_absolute() => dir.clone(),
            Some(dir) => self.main.join(dir),
            None => {
                let mut name = self.main.as_os_str().to_owned();
                name.push(".worktrees");
                PathBuf::from(name)
            }
        }
    }

    /// `<common dir>/better-harness/worktrees`: receipts, claims, logs.
    pub fn admin_dir(&self) -> PathBuf {
        self.common_dir.join("better-harness").join("worktrees")
    }

    pub fn receipt_path(&self, name: &str) -> PathBuf {
        self.admin_dir().join(format!("{name}.json"))
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.admin_dir().join(format!("{name}.log"))
    }

    /// `<admin dir>/<name>.claim`: the [`crate::Claim`] every lifecycle
    /// operation on `name` holds (a session's move into or out of it too).
    pub fn claim_path(&self, name: &str) -> PathBuf {
        self.admin_dir().join(format!("{name}.claim"))
    }
}
