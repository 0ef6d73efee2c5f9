//! `dispose`: refuse dirty or unmerged work unless forced, checkpoint every
//! file (non-ignored through `bh-checkpoint`, ignored ones copied into the
//! state dir), remove the worktree, delete the branch only if this tool created
//! it and it is merged.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_checkpoint::{Checkpoint, SnapshotRequest, Store, StoreOptions};
use bh_git::{GitRunner, Repo};
use serde::Serialize;

use crate::claim::Claim;
use crate::error::{Result, WorktreeError};
use crate::list::{dirty_count, same_path, short_branch};
use crate::project::{Project, validate_name};
use crate::receipt::Receipt;

#[derive(Debug, Clone)]
pub struct DisposeOptions {
    pub name: String,
    pub cwd: PathBuf,
    pub force: bool,
    /// Better Harness state dir (checkpoint stores, captured ignored files).
    pub state_dir: PathBuf,
    /// Ignored files larger than this are not copied (recorded as skipped).
    pub max_file_size: u64,
}

/// Ignored files copied out of the worktree before removal.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnoredCapture {
    /// Folder holding `manifest.json` and `files/<path>`.
    pub dir: PathBuf,
    pub files: Vec<String>,
    /// (path, reason) of ignored files not copied.
    pub skipped: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposeOutcome {
    pub name: String,
    pub path: PathBuf,
    pub branch: Option<String>,
    pub head: Option<String>,
    pub dirty: u64,
    /// Refs (other than the worktree's own branch) that contain its `HEAD`.
    pub merged_into: Vec<String>,
    pub forced: bool,
    pub checkpoint: Checkpoint,
    pub checkpoint_store: PathBuf,
    pub ignored: IgnoredCapture,
    pub branch_deleted: bool,
    /// Why the branch was kept, when it was.
    pub branch_kept: Option<String>,
}

/// Local branches and remote-tracking branches, except `own`, that contain `commit`.
pub(crate) fn merged_into(repo: &Repo, commit: &str, own: Option<&str>) -> Result<Vec<String>> {
    let out = repo.run([
        "for-each-ref",
        "--format=%(refname)",
        "--contains",
        commit,
        "refs/heads/",
        "refs/remotes/",
    ])?;
    let own = own.map(|b| format!("refs/heads/{b}"));
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter(|r| Some(*r) != own.as_deref() && !r.ends_with("/HEAD"))
        .map(str::to_owned)
        .collect())
}

/// Branches (as [`merged_into`]) holding `commit`'s whole change as one
/// squash commit: some commit in `merge-base..branch` has the same
/// `patch-id --stable` as `diff merge-base commit`. Named `REF (squashed)`.
/// Read-only (no object is written). Branches already containing `commit`
/// are not listed; at most 32 branches are examined.
pub(crate) fn squash_merged_into(
    repo: &Repo,
    commit: &str,
    own: Option<&str>,
) -> Result<Vec<String>> {
    let out = repo.run([
        "for-each-ref",
        "--format=%(refname)",
        "--no-contains",
        commit,
        "--sort=-committerdate",
        "--count=32",
        "refs/heads/",
        "refs/remotes/",
    ])?;
    let own = own.map(|b| format!("refs/heads/{b}"));
    let patch_id = |diff: Vec<u8>| -> Result<Vec<String>> {
        let out = repo.cmd(["patch-id", "--stable"]).stdin(diff).run()?.stdout;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.split(' ').next().map(str::to_owned))
            .collect())
    };
    let mut found = Vec::new();
    for r in String::from_utf8_lossy(&out).lines() {
        if Some(r) == own.as_deref() || r.ends_with("/HEAD") {
            continue;
        }
        let Ok(base) = repo.run_line(["merge-base", commit, r]) else {
            continue;
        };
        let whole = repo.run([
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--binary",
            &base,
            commit,
            "--",
        ])?;
        let Some(want) = patch_id(whole)?.into_iter().next() else {
            // No change at all since the fork point: nothing to lose.
            found.push(format!("{r} (no changes)"));
            continue;
        };
        let range = format!("{base}..{r}");
        let log = repo.run([
            "log",
            "-p",
            "--no-ext-diff",
            "--no-textconv",
            "--binary",
            "--no-merges",
            "--format=commit %H",
            &range,
            "--",
        ])?;
        if patch_id(log)?.contains(&want) {
            found.push(format!("{r} (squashed)"));
        }
    }
    Ok(found)
}

pub fn dispose(runner: &GitRunner, opts: &DisposeOptions) -> Result<DisposeOutcome> {
    validate_name(&opts.name)?;
    let project = Project::discover(runner, &opts.cwd)?;
    let claim = Claim::acquire(&project.claim_path(&opts.name), &opts.name, "dispose")?;
    let result = preflight(&project, opts).and_then(|p| dispose_claimed(&project, opts, p));
    drop(claim);
    result
}

/// The refusals of [`dispose`] (unknown, main, locked, dirty, unmerged, each
/// unless forced where `dispose` allows it), without changing anything: lets
/// a caller refuse before it moves a live session out of the worktree. The
/// state can still change before `dispose` runs, which checks again.
pub fn check_dispose(runner: &GitRunner, opts: &DisposeOptions) -> Result<()> {
    validate_name(&opts.name)?;
    let project = Project::discover(runner, &opts.cwd)?;
    preflight(&project, opts).map(|_| ())
}

/// What [`preflight`] found about the worktree to dispose.
struct Preflight {
    receipt_path: PathBuf,
    receipt: Option<Receipt>,
    path: PathBuf,
    branch: Option<String>,
    head: Option<String>,
    dirty: u64,
    merged: Vec<String>,
}

fn preflight(project: &Project, opts: &DisposeOptions) -> Result<Preflight> {
    let name = &opts.name;
    let receipt_path = project.receipt_path(name);
    let receipt = Receipt::load(&receipt_path)?;
    let main = project.repo();
    let worktrees = main.worktrees()?;
    let wanted = receipt
        .as_ref()
        .map(|r| r.path.clone())
        .unwrap_or_else(|| project.worktrees_root().join(name));
    let Some((index, wt)) = worktrees
        .iter()
        .enumerate()
        .find(|(_, w)| same_path(&w.path, &wanted))
    else {
        return Err(WorktreeError::NotFound { name: name.clone() });
    };
    if index == 0 {
        return Err(WorktreeError::Refused(
            "the main checkout cannot be disposed".into(),
        ));
    }
    if let Some(reason) = &wt.locked
        && !opts.force
    {
        return Err(WorktreeError::Refused(format!(
            "{} is locked ({reason}); use --force",
            wt.path.display()
        )));
    }
    let path = wt.path.clone();
    let branch = wt.branch.as_deref().map(short_branch);
    let head = wt.head.clone();
    let repo = project.repo_at(&path);
    let dirty = dirty_count(&repo)?;
    let mut merged = match &head {
        Some(h) => merged_into(&main, h, branch.as_deref())?,
        None => Vec::new(),
    };
    if merged.is_empty()
        && let Some(h) = &head
    {
        // Squash merges leave no ancestry; a failed check counts as unmerged.
        merged = squash_merged_into(&main, h, branch.as_deref()).unwrap_or_default();
    }
    if !opts.force {
        if dirty > 0 {
            return Err(WorktreeError::Refused(format!(
                "{} has {dirty} uncommitted or untracked file(s); commit them or use --force",
                path.display()
            )));
        }
        if merged.is_empty() {
            return Err(WorktreeError::Refused(format!(
                "{} is not merged into any other branch or remote-tracking branch (unknown counts as unmerged); use --force",
                branch.as_deref().unwrap_or("its HEAD")
            )));
        }
    }
    Ok(Preflight {
        receipt_path,
        receipt,
        path,
        branch,
        head,
        dirty,
        merged,
    })
}

fn dispose_claimed(
    project: &Project,
    opts: &DisposeOptions,
    pre: Preflight,
) -> Result<DisposeOutcome> {
    let name = &opts.name;
    let Preflight {
        receipt_path,
        receipt,
        path,
        branch,
        head,
        dirty,
        merged,
    } = pre;
    let main = project.repo();
    let repo = project.repo_at(&path);

    // Checkpoint first: non-ignored files into the shadow store, ignored ones copied.
    let store = Store::open(project.runner(), &path, &StoreOptions::new(&opts.state_dir))?;
    let snap = store.snapshot(&SnapshotRequest {
        tool: "worktree-dispose".into(),
        session: None,
        entry: None,
    })?;
    let ignored = capture_ignored(&repo, &path, opts, name, &snap.checkpoint)?;

    main.worktree_remove(&path, opts.force)?;
    let _ = fs_err::remove_file(&receipt_path);

    let (branch_deleted, branch_kept) =
        match (&branch, receipt.as_ref().filter(|r| r.branch == branch)) {
            (None, _) => (false, None),
            (Some(_), None) => (false, Some("not created by bh worktree".to_owned())),
            (Some(_), Some(r)) if !r.created_branch => {
                (false, Some("not created by bh worktree".to_owned()))
            }
            (Some(b), Some(_)) => {
                let refname = format!("refs/heads/{b}");
                match main.read_ref(&refname)? {
                    None => (false, Some("already gone".to_owned())),
                    Some(tip) => {
                        if merged_into(&main, &tip, Some(b))?.is_empty() {
                            let squashed =
                                squash_merged_into(&main, &tip, Some(b)).unwrap_or_default();
                            let reason = match squashed.first() {
                                // Its commits exist nowhere else: keep them.
                                Some(into) => format!(
                                    "merged as a squash ({into}); its own commits are kept \
                                     (git branch -D {b} deletes them)"
                                ),
                                None => "not merged".to_owned(),
                            };
                            (false, Some(reason))
                        } else {
                            main.delete_ref_cas(&refname, &tip)?;
                            (true, None)
                        }
                    }
                }
            }
        };
    Ok(DisposeOutcome {
        name: name.clone(),
        path,
        branch,
        head,
        dirty,
        merged_into: merged,
        forced: opts.force,
        checkpoint: snap.checkpoint,
        checkpoint_store: store.dir().to_path_buf(),
        ignored,
        branch_deleted,
        branch_kept,
    })
}

fn capture_ignored(
    repo: &Repo,
    root: &Path,
    opts: &DisposeOptions,
    name: &str,
    checkpoint: &Checkpoint,
) -> Result<IgnoredCapture> {
    let out = repo.run([
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
    ])?;
    let stamp = jiff::Timestamp::now().as_millisecond();
    let dir = opts
        .state_dir
        .join("worktrees")
        .join("disposed")
        .join(format!(
            "{name}-{stamp}-{}",
            &uuid::Uuid::now_v7().simple().to_string()[24..]
        ));
    let files_dir = dir.join("files");
    bh_fs::create_dir_all_mode(&files_dir, 0o700).map_err(|e| WorktreeError::io(&files_dir, e))?;
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for rel in bh_git::parse::split_z(&out).filter(|p| !p.is_empty()) {
        let shown = String::from_utf8_lossy(rel).into_owned();
        let rel_path = Path::new(std::ffi::OsStr::from_bytes(rel));
        let src = root.join(rel_path);
        let dst = files_dir.join(rel_path);
        let meta = match fs_err::symlink_metadata(&src) {
            Ok(m) => m,
            Err(e) => {
                skipped.push((shown, e.to_string()));
                continue;
            }
        };
        if let Some(parent) = dst.parent() {
            fs_err::create_dir_all(parent).map_err(|e| WorktreeError::io(parent, e))?;
        }
        if meta.file_type().is_symlink() {
            let target = fs_err::read_link(&src).map_err(|e| WorktreeError::io(&src, e))?;
            fs_err::os::unix::fs::symlink(&target, &dst).map_err(|e| WorktreeError::io(&dst, e))?;
        } else if !meta.is_file() {
            skipped.push((shown, "not a regular file".into()));
            continue;
        } else if meta.len() > opts.max_file_size {
            skipped.push((shown, format!("larger than {} bytes", opts.max_file_size)));
            continue;
        } else {
            fs_err::copy(&src, &dst).map_err(|e| WorktreeError::io(&src, e))?;
        }
        files.push(shown);
    }
    let manifest = serde_json::json!({
        "version": 1,
        "name": name,
        "worktree": root,
        "checkpoint": checkpoint.id,
        "checkpointCommit": checkpoint.commit,
        "files": files,
        "skipped": skipped,
    });
    crate::receipt::write_atomic(
        &dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    Ok(IgnoredCapture {
        dir,
        files,
        skipped,
    })
}
