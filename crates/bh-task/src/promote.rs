//! Promotion by fast-forward, and the clean check it (and preflight) use.

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bh_git::{GitRunner, Repo, Scope};

use crate::error::{PreflightError, io};
use crate::options::TaskOptions;
use crate::report::{Outcome, TaskReport, sha256_hex};

/// Whether the tracked files of the checkout match `HEAD`, judged by a
/// fresh temporary index built from `HEAD` (so assume-unchanged and
/// skip-worktree bits cannot hide a change). Untracked files are not judged
/// here: only those a promotion would overwrite matter, see
/// [`overwritten_untracked`].
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
    drop(index);
    let mut dirty: Vec<String> = bh_git::parse::split_z(&changed.stdout)
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

/// Files of the checkout at `top` that fast-forwarding from `base` to
/// `candidate` would overwrite or delete although they are not tracked:
/// Git refuses to overwrite untracked files but silently replaces *ignored*
/// ones (a `.env`, a key), so every one is judged — a file at a path the
/// candidate adds, a file where it needs a folder, untracked files in a
/// folder it turns into a file. At most ten, shown git-style.
pub(crate) fn overwritten_untracked(
    user: &Repo,
    isolated: &Repo,
    top: &Path,
    base: &str,
    candidate: &str,
) -> Result<Vec<String>, PreflightError> {
    let names = |filter: &str| -> Result<Vec<Vec<u8>>, PreflightError> {
        let out = isolated.run([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            filter,
            base,
            candidate,
            "--",
        ])?;
        Ok(bh_git::parse::split_z(&out).map(<[u8]>::to_vec).collect())
    };
    let added = names("--diff-filter=A")?;
    if added.is_empty() {
        return Ok(Vec::new());
    }
    let deleted: std::collections::BTreeSet<Vec<u8>> =
        names("--diff-filter=D")?.into_iter().collect();
    let on_disk = |rel: &[u8]| fs::symlink_metadata(top.join(std::ffi::OsStr::from_bytes(rel)));
    let mut found = std::collections::BTreeSet::new();
    let mut prefixes = std::collections::BTreeSet::new();
    for path in &added {
        match on_disk(path) {
            Ok(m) if m.is_dir() => {
                // The candidate replaces a folder with a file: whatever is
                // untracked (ignored included) in it would go.
                let out = user
                    .cmd(["ls-files", "-z", "--others", "--"])
                    .env("GIT_LITERAL_PATHSPECS", "1")
                    .arg(std::ffi::OsStr::from_bytes(path))
                    .run()?;
                found.extend(
                    bh_git::parse::split_z(&out.stdout)
                        .take(10)
                        .map(<[u8]>::to_vec),
                );
            }
            Ok(_) => {
                found.insert(path.clone());
            }
            Err(_) => {}
        }
        let mut at = 0;
        while let Some(i) = path[at..].iter().position(|b| *b == b'/') {
            prefixes.insert(path[..at + i].to_vec());
            at += i + 1;
        }
    }
    for prefix in prefixes {
        // A file (or link) where the candidate needs a folder, unless the
        // candidate removes that tracked file itself.
        if on_disk(&prefix).is_ok_and(|m| !m.is_dir()) && !deleted.contains(&prefix) {
            found.insert(prefix);
        }
    }
    Ok(found
        .iter()
        .take(10)
        .map(|p| bh_git::parse::display_path(p))
        .collect())
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
        .map_err(PreflightError::Fs)?;
    lock.lock().map_err(PreflightError::Fs)?;
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
        moved.push(format!(
            "tracked files changed in the source checkout since the task started: {why}"
        ));
    }
    if moved.is_empty() {
        let isolated = runner.repo(&report.source, Scope::Isolated);
        let overwritten =
            overwritten_untracked(&fresh, &isolated, &report.source, &report.base, candidate)?;
        if !overwritten.is_empty() {
            moved.push(format!(
                "promotion would overwrite files of your checkout that Git does not track: {} \
                 (move them away, then take the result with `git merge --ff-only {}`)",
                overwritten.join(", "),
                report.kept_ref.as_deref().unwrap_or(candidate)
            ));
        }
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
