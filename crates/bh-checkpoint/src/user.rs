//! What the user's own repository looks like, asked of their git without
//! writing anything. Paths come back one per line from `rev-parse`, so a
//! path holding a newline is asked for on its own.

use fs_err as fs;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Repo, Scope};

/// What the user's own repository looks like, read without writing anything.
#[derive(Debug, Clone)]
pub(crate) struct UserRepo {
    pub repo: Repo,
    /// The project directory is the repository's top level.
    pub is_top: bool,
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
    pub index: PathBuf,
    pub exclude: PathBuf,
}

/// The enclosing repository and the user's `core.excludesFile`, asked of git
/// in parallel.
pub(crate) fn user_facts(
    runner: &GitRunner,
    dir: &Path,
) -> (Option<(PathBuf, UserRepo)>, Option<PathBuf>) {
    std::thread::scope(|scope| {
        let excludes = scope.spawn(|| user_excludes_file(runner, dir));
        let repo = user_repo(runner, dir);
        (repo, excludes.join().ok().flatten())
    })
}

/// The repository containing `dir`, as `(canonical top level, facts)`;
/// `is_top` says whether `dir` is that top level.
fn user_repo(runner: &GitRunner, dir: &Path) -> Option<(PathBuf, UserRepo)> {
    let repo = runner.repo(dir, Scope::User);
    const ASKED: [&str; 3] = ["--show-toplevel", "--git-dir", "--git-common-dir"];
    let out = repo
        .cmd(["rev-parse", "--path-format=absolute"])
        .args(ASKED)
        .run()
        .ok()?
        .stdout;
    let lines: Vec<&[u8]> = out
        .strip_suffix(b"\n")
        .unwrap_or(&out)
        .split(|b| *b == b'\n')
        .collect();
    let paths: Vec<PathBuf> = if lines.len() == ASKED.len() {
        lines.iter().map(|l| path(l)).collect()
    } else {
        // A newline inside a path: one question per call, each answer is
        // the whole output but git's final newline.
        ASKED
            .iter()
            .map(|q| {
                let out = repo.run(["rev-parse", "--path-format=absolute", q]).ok()?;
                Some(path(out.strip_suffix(b"\n")?))
            })
            .collect::<Option<_>>()?
    };
    let [top, git_dir, common_dir] = <[PathBuf; 3]>::try_from(paths).ok()?;
    let top = fs::canonicalize(top).ok()?;
    let is_top = top == dir;
    let repo = runner.repo(&top, Scope::User);
    Some((
        top,
        UserRepo {
            repo,
            is_top,
            // what `--git-path index` and `--git-path info/exclude` answer
            // (GIT_INDEX_FILE never reaches git through the runner)
            index: git_dir.join("index"),
            exclude: common_dir.join("info/exclude"),
            git_dir,
            common_dir,
        },
    ))
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// The user's `core.excludesFile`, as their own git resolves it (global and
/// repository config), so the shadow — which reads no global config — honours it.
fn user_excludes_file(runner: &GitRunner, project: &Path) -> Option<PathBuf> {
    let out = runner
        .repo(project, Scope::User)
        .cmd(["config", "-z", "--path", "--get", "core.excludesFile"])
        .ok_codes(&[0, 1])
        .run()
        .ok()?;
    let value = out.stdout.strip_suffix(b"\0").unwrap_or(&out.stdout);
    (!value.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(value)))
}
