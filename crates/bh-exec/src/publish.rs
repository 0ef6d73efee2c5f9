//! Whether a plan's output ref holds this plan's result, here or on a
//! remote, and publishing it create-only: `git push REMOTE
//! <commit>:<ref> --force-with-lease=<ref>:` (an empty expected value: the
//! push fails if the ref exists there with another value; an identical
//! retry is "up to date"). "This plan's result" is a commit whose only
//! parent is the plan's base and whose provenance trailers name the plan's
//! digest (`Better-Harness-Plan: sha256:<plan_sha256>`) and base.

use bh_git::{GitError, Repo};

use crate::batch_error::BatchError;
use crate::commit::Trailers;
use crate::plan::Plan;

/// What a ref holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefHolds {
    Absent,
    /// This plan's result.
    ThisPlan(String),
    /// Anything else (another plan's commit, a user's commit, a tag).
    Other(String),
}

/// Whether `commit` is `plan`'s result.
pub fn is_plan_result(repo: &Repo, plan: &Plan, commit: &str) -> Result<bool, GitError> {
    let out = repo
        .cmd(["cat-file", "commit", commit])
        .ok_codes(&[0, 128])
        .run()?;
    if out.code != 0 {
        return Ok(false);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let Some((head, message)) = text.split_once("\n\n") else {
        return Ok(false);
    };
    let parents: Vec<&str> = head
        .lines()
        .filter_map(|l| l.strip_prefix("parent "))
        .collect();
    if parents != [plan.base.commit.as_str()] {
        return Ok(false);
    }
    Ok(Trailers::parse(message).is_some_and(|t| {
        t.plan == format!("sha256:{}", plan.plan_sha256) && t.base == plan.base.commit
    }))
}

/// What the plan's output ref holds in the repository of `repo`.
pub fn local_ref(repo: &Repo, plan: &Plan) -> Result<RefHolds, GitError> {
    match repo.read_ref(&plan.output_ref)? {
        None => Ok(RefHolds::Absent),
        Some(c) if is_plan_result(repo, plan, &c)? => Ok(RefHolds::ThisPlan(c)),
        Some(c) => Ok(RefHolds::Other(c)),
    }
}

fn check_remote(remote: &str) -> Result<(), BatchError> {
    if remote.starts_with('-') || remote.is_empty() {
        return Err(BatchError::RemoteName {
            remote: remote.to_owned(),
        });
    }
    Ok(())
}

/// What the plan's output ref holds on `remote` (a remote name or URL). A
/// commit not yet here is fetched (objects only: no ref, no FETCH_HEAD) to
/// read its trailers.
pub fn remote_ref(repo: &Repo, remote: &str, plan: &Plan) -> Result<RefHolds, BatchError> {
    check_remote(remote)?;
    let name = &plan.output_ref;
    let failed = |source| BatchError::Publish {
        remote: remote.to_owned(),
        name: name.clone(),
        source: Box::new(source),
    };
    let out = repo
        .cmd(["ls-remote", "--refs", remote, name])
        .run()
        .map_err(failed)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(commit) = text.lines().find_map(|l| {
        let (oid, r) = l.split_once('\t')?;
        (r == name).then(|| oid.to_owned())
    }) else {
        return Ok(RefHolds::Absent);
    };
    let have = repo
        .cmd(["cat-file", "-e", &format!("{commit}^{{commit}}")])
        .ok_codes(&[0, 1, 128])
        .run()?
        .code
        == 0;
    if !have {
        repo.cmd([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            remote,
            name,
        ])
        .run()
        .map_err(failed)?;
    }
    if is_plan_result(repo, plan, &commit)? {
        Ok(RefHolds::ThisPlan(commit))
    } else {
        Ok(RefHolds::Other(commit))
    }
}

/// Pushes `commit` to the plan's ref on `remote`, create-only. `Ok` when the
/// remote now holds this plan's result (created now, or found there: a
/// retry after a lost reply); [`BatchError::RefTaken`] when it holds another
/// commit; [`BatchError::Publish`] when the push failed otherwise (worth
/// retrying).
pub fn publish(repo: &Repo, remote: &str, plan: &Plan, commit: &str) -> Result<(), BatchError> {
    check_remote(remote)?;
    let name = &plan.output_ref;
    let lease = format!("--force-with-lease={name}:");
    let pushed = repo
        .cmd([
            "push",
            "--quiet",
            "--no-verify",
            "--no-recurse-submodules",
            &lease,
            "--",
            remote,
            &format!("{commit}:{name}"),
        ])
        .run();
    let err = match pushed {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    // Rejected (the ref exists there) or lost: what is there decides.
    match remote_ref(repo, remote, plan) {
        Ok(RefHolds::ThisPlan(_)) => Ok(()),
        Ok(RefHolds::Other(c)) => Err(BatchError::RefTaken {
            name: name.clone(),
            place: format!("on {remote}"),
            commit: c,
        }),
        Ok(RefHolds::Absent) | Err(_) => Err(BatchError::Publish {
            remote: remote.to_owned(),
            name: name.clone(),
            source: Box::new(err),
        }),
    }
}
