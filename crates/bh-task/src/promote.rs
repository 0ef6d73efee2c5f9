//! Promotion by fast-forward, and the clean check it (and preflight) use.

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use bh_git::{GitRunner, Repo, Scope};

use crate::run::{Outcome, PreflightError, TaskOptions, TaskReport, io, sha256_hex};

/// Whether the checkout at `top` is clean, judged by a fresh temporary index
/// built from `HEAD` (so assume-unchanged/skip-worktree bits cannot hide a
/// change) and untracked files judged by `.gitignore` files alone (so
/// `info/exclude` cannot hide one).
pub(crate) fn clean_check(repo: &Repo, scratch: &Path) -> Result<Option<String>, PreflightError> {
    let index = repo.temp_index(scratch.join("clean-check.index"));
    index.read_tree("HEAD")?;
    // Refresh re-hashes files whose stat data the fresh index lacks; exit 1
    // means "needs update", i.e. changed.
    let refresh = index
        .cmd(["update-index", "-q", "--refresh"])
        .ok_codes(&[0, 1])
        .run()?;
    let changed = index.cmd(["diff-files", "--name-only", "-z"]).run()?;
    let untracked = index
        .cmd([
            "ls-files",
            "-z",
            "--others",
            "--exclude-per-directory=.gitignore",
        ])
        .run()?;
    drop(index);
    let mut dirty: Vec<String> = bh_git::parse::split_z(&changed.stdout)
        .chain(bh_git::parse::split_z(&untracked.stdout))
        .map(bh_git::parse::display_path)
        .collect();
    if dirty.is_empty() && refresh.code == 0 {
        return Ok(None);
    }
    dirty.truncate(10);
    Ok(Some(if dirty.is_empty() {
        "the index differs from HEAD".into()
    } else {
        dirty.join(", ")
    }))
}

/// Fast-forwards the source branch to `candidate` under a per-repository lock,
/// after re-checking that the source is the same checkout, on the same branch,
/// still at the base and clean. A source that moved is a rejection, never a
/// rebase.
pub(crate) fn promote(
    runner: &GitRunner,
    opts: &TaskOptions,
    repo: &Repo,
    source_admin: &Path,
    artifacts: &Path,
    report: &mut TaskReport,
    candidate: &str,
) -> Result<(), PreflightError> {
    bh_fs::create_dir_all_mode(&opts.lock_dir, 0o700)
        .map_err(io(format!("cannot create {}", opts.lock_dir.display())))?;
    let common = repo.run_line(["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    let lock_path = opts
        .lock_dir
        .join(format!("{}.lock", &sha256_hex(common.as_bytes())[..16]));
    let lock = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io(format!("cannot open {}", lock_path.display())))?;
    lock.lock()
        .map_err(io(format!("cannot lock {}", lock_path.display())))?;
    let fresh = runner.repo(&report.source, Scope::User);
    let branch_now = fresh
        .cmd(["symbolic-ref", "-q", "HEAD"])
        .ok_codes(&[0, 1])
        .run()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .ok();
    let mut moved = Vec::new();
    let admin_now = fresh.run_line(["rev-parse", "--absolute-git-dir"]).ok();
    if admin_now.as_deref().map(Path::new) != Some(source_admin) {
        moved.push("the source is no longer the same checkout".to_owned());
    }
    if branch_now.as_deref() != report.branch.as_deref() {
        moved.push("the source is no longer on the same branch".to_owned());
    }
    if fresh.resolve_commit("HEAD").ok().as_deref() != Some(report.base.as_str()) {
        moved.push("the source branch moved since the task started".to_owned());
    }
    if moved.is_empty()
        && let Some(why) = clean_check(&fresh, artifacts)?
    {
        moved.push(format!("the source checkout is no longer clean: {why}"));
    }
    if !moved.is_empty() {
        report.outcome = Outcome::Rejected;
        report.reasons.extend(moved);
        return Ok(());
    }
    fresh
        .cmd(["merge", "--ff-only", "--no-edit", "--quiet", candidate])
        .optional_locks(true)
        .run()?;
    if fresh.resolve_commit("HEAD")? == candidate {
        report.outcome = Outcome::Promoted;
    } else {
        report.outcome = Outcome::Rejected;
        report
            .reasons
            .push("after the fast-forward HEAD is not the candidate".into());
    }
    drop(lock);
    Ok(())
}
