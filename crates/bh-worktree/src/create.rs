//! `create`: claim → receipt (provisioning) → `git worktree add` → `.env*`
//! links → post-create commands → receipt (ready). Any failure rolls back the
//! worktree and a branch this call created, and leaves a `failed` receipt.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bh_git::Repo;

use crate::claim::Claim;
use crate::error::{Result, WorktreeError};
use crate::project::{Project, validate_name};
use crate::receipt::{Receipt, Stage, State};

#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    pub name: String,
    /// Start commit (default: `HEAD` of `cwd`).
    pub from: Option<String>,
    /// Branch to check out or create (default: `name`).
    pub branch: Option<String>,
    pub detach: bool,
    /// Exact worktree path (default: `<worktrees root>/<name>`).
    pub path: Option<PathBuf>,
    /// The Pi session asking for it (recorded in the receipt).
    pub session: Option<String>,
    /// Where the caller stands (any worktree of the repository).
    pub cwd: PathBuf,
    /// The complete environment of post-create commands.
    pub command_env: Vec<(OsString, OsString)>,
}

#[derive(Debug, Clone)]
pub struct CreateOutcome {
    pub receipt: Receipt,
    pub receipt_path: PathBuf,
    pub log: PathBuf,
}

fn lexical_absolute(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// How far a [`create_with_progress`] has come, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateProgress<'a> {
    /// `git worktree add` is running.
    AddWorktree,
    /// Linking the main checkout's ignored `.env` files.
    LinkEnv,
    /// Post-create command `index` (1-based) of `total` started.
    PostCreate {
        index: usize,
        total: usize,
        command: &'a str,
    },
}

pub fn create(runner: &bh_git::GitRunner, opts: &CreateOptions) -> Result<CreateOutcome> {
    create_with_progress(runner, opts, &mut |_| {})
}

/// [`create`], telling `progress` as each stage starts.
pub fn create_with_progress(
    runner: &bh_git::GitRunner,
    opts: &CreateOptions,
    progress: &mut dyn FnMut(CreateProgress<'_>),
) -> Result<CreateOutcome> {
    validate_name(&opts.name)?;
    if opts.detach && opts.branch.is_some() {
        return Err(WorktreeError::Usage(
            "--branch and --detach exclude each other".into(),
        ));
    }
    let project = Project::discover(runner, &opts.cwd)?;
    let claim = Claim::acquire(&project.claim_path(&opts.name), &opts.name, "create")?;
    let result = create_claimed(&project, opts, progress);
    drop(claim);
    result
}

/// Where the worktree starts: its commit and branch.
struct Start {
    base: String,
    /// `None`: detached.
    branch: Option<String>,
    /// The branch is new (created from `base`), so a rollback deletes it.
    created_branch: bool,
}

/// Under the claim: an interrupted earlier create rolled back, the name and
/// path checked free, the start resolved, then provisioning with a receipt
/// at each stage (rolled back and `failed` on error).
fn create_claimed(
    project: &Project,
    opts: &CreateOptions,
    progress: &mut dyn FnMut(CreateProgress<'_>),
) -> Result<CreateOutcome> {
    let receipt_path = project.receipt_path(&opts.name);
    recover_interrupted(project, &receipt_path)?;
    let path = free_path(project, opts, &receipt_path)?;
    let start = resolve_start(project, opts)?;
    let now = jiff::Timestamp::now().to_string();
    let mut receipt = Receipt {
        version: 1,
        name: opts.name.clone(),
        path: path.clone(),
        state: State::Provisioning,
        stage: Stage::GitWorktreeAdd,
        branch: start.branch.clone(),
        created_branch: start.created_branch,
        base: start.base.clone(),
        from: opts.from.clone(),
        env_links: Vec::new(),
        post_create: project.config.post_create.clone(),
        session: opts.session.clone(),
        created_at: now.clone(),
        updated_at: now,
        error: None,
        hash: String::new(),
    };
    receipt.store(&receipt_path)?;
    let mut p = Provisioning {
        receipt,
        receipt_path,
        log: project.log_path(&opts.name),
        added: false,
    };
    if let Err(err) = provision(project, opts, &start, &mut p, progress) {
        rollback(
            &project.repo(),
            &path,
            p.added,
            start.branch.as_deref(),
            start.created_branch,
        );
        p.receipt.state = State::Failed;
        p.receipt.error = Some(err.to_string());
        let _ = p.receipt.store(&p.receipt_path);
        return Err(err);
    }
    Ok(CreateOutcome {
        receipt: p.receipt,
        receipt_path: p.receipt_path,
        log: p.log,
    })
}

/// A receipt still `provisioning` under our claim means whoever wrote it
/// died mid-way: its work is undone (its path did not exist when it
/// started, under its claim) and the receipt marked failed.
fn recover_interrupted(project: &Project, receipt_path: &Path) -> Result<()> {
    if let Some(mut old) = Receipt::load(receipt_path)?
        && old.state == State::Provisioning
    {
        rollback(
            &project.repo(),
            &old.path,
            true,
            old.branch.as_deref(),
            old.created_branch,
        );
        old.state = State::Failed;
        old.error = Some(format!(
            "interrupted at stage {:?}; rolled back by a later create",
            old.stage
        ));
        old.store(receipt_path)?;
    }
    Ok(())
}

/// The new worktree's path, refused when the name is taken (a receipt not
/// failed) or the path exists.
fn free_path(project: &Project, opts: &CreateOptions, receipt_path: &Path) -> Result<PathBuf> {
    if let Some(old) = Receipt::load(receipt_path)?
        && old.state != State::Failed
    {
        return Err(WorktreeError::Refused(format!(
            "worktree {:?} already exists ({}, {})",
            opts.name,
            old.path.display(),
            old.state.as_str()
        )));
    }
    let path = match &opts.path {
        Some(p) => lexical_absolute(&opts.cwd, p),
        None => project.worktrees_root().join(&opts.name),
    };
    if fs_err::symlink_metadata(&path).is_ok() {
        return Err(WorktreeError::Refused(format!(
            "{} already exists",
            path.display()
        )));
    }
    Ok(path)
}

/// The start commit (`--from`, else `HEAD` where the caller is) and branch
/// (`--branch`, else the name; an existing branch is checked out at its tip
/// and cannot take `--from`).
fn resolve_start(project: &Project, opts: &CreateOptions) -> Result<Start> {
    let main = project.repo();
    let here = project.repo_at(&opts.cwd);
    let base = match &opts.from {
        Some(rev) => here
            .resolve_commit(rev)
            .map_err(|_| WorktreeError::Missing {
                what: "revision".into(),
                detail: rev.clone(),
            })?,
        None => here
            .resolve_commit("HEAD")
            .map_err(|_| WorktreeError::Missing {
                what: "revision".into(),
                detail: "HEAD (an unborn branch has no commit to start from)".into(),
            })?,
    };
    if opts.detach {
        return Ok(Start {
            base,
            branch: None,
            created_branch: false,
        });
    }
    let b = opts.branch.clone().unwrap_or_else(|| opts.name.clone());
    let ok = main
        .cmd(["check-ref-format", "--branch", &b])
        .ok_codes(&[0, 1, 128])
        .run()?;
    if ok.code != 0 || b.starts_with('-') {
        return Err(WorktreeError::Usage(format!("invalid branch name {b:?}")));
    }
    let exists = main.read_ref(&format!("refs/heads/{b}"))?.is_some();
    if exists && opts.from.is_some() {
        return Err(WorktreeError::Refused(format!(
            "branch {b:?} already exists; omit --from to check it out"
        )));
    }
    let base = if exists {
        main.resolve_commit(&format!("refs/heads/{b}"))?
    } else {
        base
    };
    Ok(Start {
        base,
        branch: Some(b),
        created_branch: !exists,
    })
}

/// A create under way: its receipt (stored at each stage), the log of its
/// post-create commands, and whether the worktree was added yet (what a
/// rollback removes).
struct Provisioning {
    receipt: Receipt,
    receipt_path: PathBuf,
    log: PathBuf,
    added: bool,
}

/// `git worktree add`, the `.env*` links, the post-create commands, the
/// receipt stored at each stage.
fn provision(
    project: &Project,
    opts: &CreateOptions,
    start: &Start,
    p: &mut Provisioning,
    progress: &mut dyn FnMut(CreateProgress<'_>),
) -> Result<()> {
    let main = project.repo();
    let path = p.receipt.path.clone();
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(|e| WorktreeError::io(parent, e))?;
    }
    progress(CreateProgress::AddWorktree);
    let mut cmd = main.cmd(["worktree", "add", "--quiet"]);
    cmd = match (&start.branch, start.created_branch) {
        (None, _) => cmd.arg("--detach").arg("--").arg(&path).arg(&start.base),
        (Some(b), true) => cmd.arg("-b").arg(b).arg("--").arg(&path).arg(&start.base),
        (Some(b), false) => cmd.arg("--").arg(&path).arg(b),
    };
    cmd.optional_locks(true).run()?;
    p.added = true;
    p.receipt.stage = Stage::LinkEnv;
    p.receipt.store(&p.receipt_path)?;
    progress(CreateProgress::LinkEnv);
    p.receipt.env_links = link_env_files(&main, &project.main, &path)?;
    p.receipt.stage = Stage::PostCreate;
    p.receipt.store(&p.receipt_path)?;
    run_post_create(project, opts, &path, &p.log, progress)?;
    p.receipt.stage = Stage::Complete;
    p.receipt.state = State::Ready;
    p.receipt.store(&p.receipt_path)
}

fn rollback(main: &Repo, path: &Path, added: bool, branch: Option<&str>, created: bool) {
    if added {
        let _ = main.worktree_remove(path, true);
        if fs_err::symlink_metadata(path).is_ok() {
            let _ = fs_err::remove_dir_all(path);
        }
        let _ = main.cmd(["worktree", "prune"]).optional_locks(true).run();
    }
    if let (Some(b), true) = (branch, created) {
        let name = format!("refs/heads/{b}");
        if let Ok(Some(value)) = main.read_ref(&name) {
            let _ = main.delete_ref_cas(&name, &value);
        }
    }
}

/// Symlinks every git-ignored top-level `.env*` file of the main checkout
/// (except `.env.local`, which stays per checkout) into the new worktree.
fn link_env_files(main: &Repo, main_dir: &Path, target: &Path) -> Result<Vec<String>> {
    let mut candidates = Vec::new();
    let entries = fs_err::read_dir(main_dir).map_err(|e| WorktreeError::io(main_dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| WorktreeError::io(main_dir, e))?;
        let Some(file) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !file.starts_with(".env") || file == ".env.local" {
            continue;
        }
        let meta = fs_err::metadata(entry.path()).map_err(|e| WorktreeError::io(entry.path(), e));
        if meta.map(|m| m.is_file()).unwrap_or(false) {
            candidates.push(file);
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    candidates.sort();
    let mut input = Vec::new();
    for c in &candidates {
        input.extend_from_slice(c.as_bytes());
        input.push(0);
    }
    let out = main
        .cmd(["check-ignore", "-z", "--stdin"])
        .stdin(input)
        .ok_codes(&[0, 1])
        .run()?;
    let ignored: Vec<String> = bh_git::parse::split_z(&out.stdout)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut linked = Vec::new();
    for file in candidates.into_iter().filter(|c| ignored.contains(c)) {
        let link = target.join(&file);
        if fs_err::symlink_metadata(&link).is_ok() {
            continue;
        }
        fs_err::os::unix::fs::symlink(main_dir.join(&file), &link)
            .map_err(|e| WorktreeError::io(&link, e))?;
        linked.push(file);
    }
    Ok(linked)
}

fn run_post_create(
    project: &Project,
    opts: &CreateOptions,
    path: &Path,
    log: &Path,
    progress: &mut dyn FnMut(CreateProgress<'_>),
) -> Result<()> {
    let commands = &project.config.post_create;
    if let Some(dir) = log.parent() {
        fs_err::create_dir_all(dir).map_err(|e| WorktreeError::io(dir, e))?;
    }
    let file = fs_err::File::create(log).map_err(|e| WorktreeError::io(log, e))?;
    for (index, command) in commands.iter().enumerate() {
        progress(CreateProgress::PostCreate {
            index: index + 1,
            total: commands.len(),
            command,
        });
        let out = file.try_clone().map_err(|e| WorktreeError::io(log, e))?;
        let err = file.try_clone().map_err(|e| WorktreeError::io(log, e))?;
        let status = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(path)
            .env_clear()
            .envs(opts.command_env.iter().map(|(k, v)| (k, v)))
            .env("BH_WORKTREE_NAME", &opts.name)
            .env("BH_WORKTREE_PATH", path)
            .env("BH_MAIN_CHECKOUT", &project.main)
            .stdin(Stdio::null())
            .stdout(out.into_file())
            .stderr(err.into_file())
            .status()
            .map_err(|e| WorktreeError::io(path, e))?;
        if !status.success() {
            return Err(WorktreeError::PostCreateFailed {
                index: index + 1,
                command: command.clone(),
                status: status.to_string(),
                log: log.to_path_buf(),
            });
        }
    }
    Ok(())
}
