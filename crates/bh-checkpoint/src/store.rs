//! Opening, locking and querying a checkpoint store.

use std::ffi::OsStr;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bh_git::{GitRunner, Repo, Scope};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint};
use crate::paths::check_relative;

/// Default cap on the size of a file a snapshot captures.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 50 * 1024 * 1024;

/// The tree with no entries.
pub(crate) const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Neutralises every byte conversion git could apply between work tree and
/// objects, whatever the project's `.gitattributes` or the user's config say.
const NEUTRAL_ATTRIBUTES: &str = "* -text -eol -crlf -filter -ident -working-tree-encoding\n";

const SHADOW_CONFIG: &str = "[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tlogAllRefUpdates = false
\tautocrlf = false
\tsafecrlf = false
\tuntrackedCache = true
\tlooseCompression = 1
\tbigFileThreshold = 8m
\tpreloadIndex = true
\tsplitIndex = true
[index]
\tversion = 4
[splitIndex]
\tmaxPercentChange = 20
[pack]
\tcompression = 1
[fastimport]
\tunpackLimit = 0
[gc]
\tauto = 0
[status]
\trenames = false
\tshowUntrackedFiles = all
";

/// Where stores live and what they capture.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The Better Harness state directory; stores go to `<state>/checkpoints/`.
    pub state_dir: PathBuf,
    /// Files larger than this are not captured (recorded as skipped).
    pub max_file_size: u64,
}

impl StoreOptions {
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        StoreOptions {
            state_dir: state_dir.into(),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
        }
    }
}

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

/// One project's checkpoint store.
#[derive(Debug)]
pub struct Store {
    pub(crate) project: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) git_dir: PathBuf,
    pub(crate) runner: GitRunner,
    pub(crate) user: Option<UserRepo>,
    pub(crate) excludes_file: Option<PathBuf>,
    pub(crate) max_file_size: u64,
}

/// The store lock; released when dropped (or by the kernel if the process dies).
pub(crate) struct StoreLock {
    _file: File,
}

pub(crate) fn trim_line(out: &[u8]) -> &[u8] {
    let mut s = out;
    while let Some(rest) = s.strip_suffix(b"\n") {
        s = rest;
    }
    s
}

fn store_name(project: &Path) -> String {
    let base: String = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let base = base.trim_start_matches('.');
    let base = if base.is_empty() { "project" } else { base };
    let digest = Sha256::digest(project.as_os_str().as_bytes());
    format!("{base}-{}", &hex::encode(digest)[..16])
}

fn mkdir_private(path: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| CheckpointError::io(format!("cannot create {}", path.display()), e))
}

fn check_private(path: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(path)
        .map_err(|e| CheckpointError::io(format!("cannot inspect {}", path.display()), e))?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me {
        return Err(CheckpointError::StoreNotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if !meta.is_dir() || meta.mode() & 0o077 != 0 {
        return Err(CheckpointError::StoreInsecure {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

/// Writes `data` to `path` atomically, private to the user (`bh_fs`).
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    bh_fs::write_atomic(path, data, 0o600)
        .map_err(|e| CheckpointError::io(format!("cannot write {}", path.display()), e))
}

impl Store {
    /// Opens (creating when needed) the store of `project`. Refuses a store that
    /// is not owned by the current user, is open to others, overlaps the project
    /// or belongs to another project.
    pub fn open(runner: &GitRunner, project: &Path, options: &StoreOptions) -> Result<Store> {
        let project = fs::canonicalize(project).map_err(|e| CheckpointError::BadProject {
            path: project.to_path_buf(),
            reason: e.to_string(),
        })?;
        let (user, excludes) = user_facts(runner, &project);
        let user = user.map(|(_, user)| user);
        Store::open_with(runner, project, user, excludes, options)
    }

    /// Opens the store of the project containing `dir`: the enclosing Git
    /// repository's top level, else `dir` itself (git is asked once, in parallel with
    /// the user's `core.excludesFile`).
    pub fn open_in(runner: &GitRunner, dir: &Path, options: &StoreOptions) -> Result<Store> {
        let dir = fs::canonicalize(dir).map_err(|e| CheckpointError::BadProject {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        match user_facts(runner, &dir) {
            (Some((top, user)), excludes) => {
                let user = UserRepo {
                    is_top: true,
                    ..user
                };
                Store::open_with(runner, top, Some(user), excludes, options)
            }
            (None, excludes) => Store::open_with(runner, dir, None, excludes, options),
        }
    }

    fn open_with(
        runner: &GitRunner,
        project: PathBuf,
        user: Option<UserRepo>,
        excludes_file: Option<PathBuf>,
        options: &StoreOptions,
    ) -> Result<Store> {
        if !project.is_dir() {
            return Err(CheckpointError::BadProject {
                path: project,
                reason: "not a directory".into(),
            });
        }
        let state_dir = if options.state_dir.is_absolute() {
            options.state_dir.clone()
        } else {
            return Err(CheckpointError::InvalidArgument(format!(
                "state directory {} must be absolute",
                options.state_dir.display()
            )));
        };
        let checkpoints = crate::paths::resolve_existing_prefix(&state_dir.join("checkpoints"));
        let dir = checkpoints.join(store_name(&project));
        if dir.starts_with(&project) || project.starts_with(&dir) {
            return Err(CheckpointError::Overlap {
                store: dir,
                project,
            });
        }
        // No store (of any project) is ever itself a project.
        if project.starts_with(&checkpoints) {
            return Err(CheckpointError::Overlap {
                store: checkpoints,
                project,
            });
        }
        mkdir_private(&checkpoints)?;
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CheckpointError::io(
                    format!("cannot create {}", dir.display()),
                    e,
                ));
            }
        }
        check_private(&dir)?;
        // After creation, re-check overlap on the real path (a symlinked state dir).
        let real = fs::canonicalize(&dir)
            .map_err(|e| CheckpointError::io(format!("cannot resolve {}", dir.display()), e))?;
        if real.starts_with(&project) || project.starts_with(&real) {
            return Err(CheckpointError::Overlap {
                store: real,
                project,
            });
        }
        let store = Store {
            git_dir: dir.join("git"),
            dir,
            project,
            runner: runner.clone(),
            user,
            excludes_file,
            max_file_size: options.max_file_size,
        };
        {
            let _lock = store.lock()?;
            store.ensure_initialised()?;
        }
        Ok(store)
    }

    pub fn project(&self) -> &Path {
        &self.project
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the store lock, waiting for other processes.
    pub(crate) fn lock(&self) -> Result<StoreLock> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| CheckpointError::io(format!("cannot open {}", path.display()), e))?;
        file.lock()
            .map_err(|e| CheckpointError::io(format!("cannot lock {}", path.display()), e))?;
        Ok(StoreLock { _file: file })
    }

    fn ensure_initialised(&self) -> Result<()> {
        let project_file = self.dir.join("project");
        match fs::read(&project_file) {
            Ok(recorded) => {
                if recorded != self.project.as_os_str().as_bytes() {
                    return Err(CheckpointError::StoreMismatch {
                        store: self.dir.clone(),
                        recorded: String::from_utf8_lossy(&recorded).into_owned(),
                        project: self.project.clone(),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CheckpointError::io(
                    format!("cannot read {}", project_file.display()),
                    e,
                ));
            }
        }
        if self.git_dir.join("bh-initialised").exists() {
            return self.clean_stale_locks();
        }
        // (Re)create the shadow repository in a temporary folder, then rename it
        // into place: a process killed half-way leaves only a temp folder.
        let tmp = self.dir.join(format!("git.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        let _ = fs::remove_dir_all(&self.git_dir);
        let init = self.runner.repo(&self.dir, Scope::Isolated);
        init.cmd(["init", "--quiet", "--bare", "--template="])
            .arg(&tmp)
            .run()?;
        let io = |what: &str, e| {
            CheckpointError::io(format!("cannot write {what} in {}", tmp.display()), e)
        };
        fs::write(tmp.join("config"), SHADOW_CONFIG).map_err(|e| io("config", e))?;
        fs::create_dir_all(tmp.join("info")).map_err(|e| io("info/", e))?;
        fs::write(tmp.join("info/attributes"), NEUTRAL_ATTRIBUTES)
            .map_err(|e| io("info/attributes", e))?;
        fs::write(tmp.join("info/exclude"), b"").map_err(|e| io("info/exclude", e))?;
        fs::write(tmp.join("HEAD"), b"ref: refs/heads/bh-base\n").map_err(|e| io("HEAD", e))?;
        fs::write(tmp.join("bh-initialised"), b"1\n").map_err(|e| io("marker", e))?;
        fs::rename(&tmp, &self.git_dir).map_err(|e| {
            CheckpointError::io(format!("cannot move {} into place", tmp.display()), e)
        })?;
        write_atomic(&project_file, self.project.as_os_str().as_bytes())
    }

    /// Removes lock files a killed git left behind. Only called with the store
    /// lock held, so no live harness process can own them; git children die with
    /// their harness process (PR_SET_PDEATHSIG), so no orphan owns them either.
    pub(crate) fn clean_stale_locks(&self) -> Result<()> {
        for name in [
            "index.lock",
            "HEAD.lock",
            "packed-refs.lock",
            "shallow.lock",
        ] {
            let _ = fs::remove_file(self.git_dir.join(name));
        }
        remove_lock_files(&self.git_dir.join("refs"));
        Ok(())
    }

    /// The shadow repository, with the work tree set to the project.
    pub(crate) fn shadow(&self) -> Repo {
        let repo = self
            .runner
            .repo(&self.project, Scope::Isolated)
            .with_git_dir(&self.git_dir)
            .with_work_tree(&self.project);
        match &self.excludes_file {
            Some(path) => repo.with_config("core.excludesFile", path.as_os_str()),
            None => repo,
        }
    }

    /// All checkpoints, newest first.
    pub fn list(&self) -> Result<Vec<Checkpoint>> {
        let out = self.shadow().run([
            "for-each-ref",
            "--format=%(objectname)%00%(tree)%00%(trailers:only,unfold)%00",
            "refs/bh/checkpoints/",
        ])?;
        let mut fields = bh_git::parse::split_z(&out);
        let mut list = Vec::new();
        while let Some(commit) = fields.next() {
            let commit = String::from_utf8_lossy(commit).trim().to_owned();
            if commit.is_empty() {
                break;
            }
            let tree = fields
                .next()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let trailers = fields
                .next()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            match meta::parse(&commit, &tree, &trailers) {
                Some(cp) => list.push(cp),
                None => {
                    return Err(CheckpointError::Corrupt {
                        store: self.dir.clone(),
                        detail: format!("commit {commit} has no checkpoint trailers"),
                    });
                }
            }
        }
        list.sort_by(|a, b| b.seq.cmp(&a.seq).then(b.time_ms.cmp(&a.time_ms)));
        Ok(list)
    }

    /// Finds a checkpoint by id prefix (at least 4 hex digits) or `latest`.
    pub fn resolve(&self, id: &str) -> Result<Checkpoint> {
        let list = self.list()?;
        if id == "latest" || id == "last" {
            return list
                .into_iter()
                .next()
                .ok_or_else(|| CheckpointError::UnknownCheckpoint { id: id.to_owned() });
        }
        let wanted = id.to_ascii_lowercase();
        if wanted.len() < 4 || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CheckpointError::UnknownCheckpoint { id: id.to_owned() });
        }
        let mut matches: Vec<Checkpoint> = list
            .into_iter()
            .filter(|cp| cp.commit.starts_with(&wanted))
            .collect();
        match matches.len() {
            0 => Err(CheckpointError::UnknownCheckpoint { id: id.to_owned() }),
            1 => Ok(matches.remove(0)),
            _ => Err(CheckpointError::AmbiguousCheckpoint {
                id: id.to_owned(),
                candidates: matches
                    .iter()
                    .map(|c| c.id.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The store's size on disk, in bytes.
    pub fn size(&self) -> u64 {
        dir_size(&self.dir)
    }

    /// Differences between a checkpoint and the current working tree, limited
    /// to `paths` (project-relative; empty = everything).
    pub fn diff(&self, id: &str, paths: &[Vec<u8>], patch: DiffText) -> Result<DiffOutcome> {
        for p in paths {
            check_relative(&self.project, p)?;
        }
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let target = self.resolve(id)?;
        let current = self.stage_current()?;
        let shadow = self.shadow();
        let pathspec = |cmd: bh_git::GitCommand| {
            let cmd = cmd.env("GIT_LITERAL_PATHSPECS", "1").arg("--");
            paths
                .iter()
                .fold(cmd, |cmd, p| cmd.arg(OsStr::from_bytes(p)))
        };
        let names = pathspec(shadow.cmd([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            &target.tree,
            &current.tree,
        ]))
        .run()?;
        let names = bh_git::parse::name_status(&names.stdout).map_err(|detail| {
            CheckpointError::Corrupt {
                store: self.dir.clone(),
                detail,
            }
        })?;
        let nums = pathspec(shadow.cmd([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--numstat",
            &target.tree,
            &current.tree,
        ]))
        .run()?;
        let nums = bh_git::parse::numstat(&nums.stdout).unwrap_or_default();
        let entries = names
            .into_iter()
            .map(|n| {
                let stat = nums.iter().find(|s| s.path == n.path);
                DiffEntry {
                    status: (n.status as char).to_string(),
                    path: bh_git::parse::display_path(&n.path),
                    added: stat.and_then(|s| s.added),
                    deleted: stat.and_then(|s| s.deleted),
                }
            })
            .collect();
        let text = match patch {
            DiffText::None => None,
            DiffText::Patch | DiffText::Stat => {
                let flag = if patch == DiffText::Stat {
                    "--stat"
                } else {
                    "-p"
                };
                let out = pathspec(shadow.cmd([
                    "diff-tree",
                    "-r",
                    "--no-renames",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    "--no-commit-id",
                    flag,
                    &target.tree,
                    &current.tree,
                ]))
                .run()?;
                Some(out.stdout)
            }
        };
        Ok(DiffOutcome {
            checkpoint: target,
            current_tree: current.tree,
            skipped: current.skipped,
            entries,
            text,
        })
    }

    /// Drops checkpoints by count and/or age, then repacks the store.
    pub fn prune(&self, policy: &PrunePolicy) -> Result<PruneOutcome> {
        if policy.keep.is_none() && policy.older_than.is_none() {
            return Err(CheckpointError::InvalidArgument(
                "prune needs --keep N and/or --older-than DURATION".into(),
            ));
        }
        let _lock = self.lock()?;
        self.clean_stale_locks()?;
        let before = self.size();
        let list = self.list()?;
        let now_ms = now_ms();
        let mut removed = Vec::new();
        let mut kept = Vec::new();
        for (i, cp) in list.into_iter().enumerate() {
            let by_count = policy.keep.is_none_or(|k| i >= k);
            let by_age = policy.older_than.is_none_or(|age| {
                now_ms.saturating_sub(cp.time_ms)
                    > i64::try_from(age.as_millis()).unwrap_or(i64::MAX)
            });
            if by_count && by_age {
                removed.push(cp);
            } else {
                kept.push(cp);
            }
        }
        if !removed.is_empty() {
            let mut tx = String::from("start\n");
            for cp in &removed {
                tx.push_str(&format!(
                    "delete refs/bh/checkpoints/{} {}\n",
                    cp.commit, cp.commit
                ));
            }
            match kept.first() {
                Some(newest) => {
                    tx.push_str(&format!("update refs/bh/last {}\n", newest.commit));
                    tx.push_str(&format!("update refs/heads/bh-base {}\n", newest.commit));
                }
                None => {
                    tx.push_str("delete refs/bh/last\n");
                    tx.push_str("delete refs/heads/bh-base\n");
                }
            }
            tx.push_str("commit\n");
            self.shadow()
                .cmd(["update-ref", "--stdin"])
                .stdin(tx.into_bytes())
                .run()?;
        }
        let shadow = self.shadow();
        shadow.run(["pack-refs", "--all", "--prune"])?;
        shadow.run(["repack", "-a", "-d", "-q", "--no-write-bitmap-index"])?;
        shadow.run(["prune", "--expire=now"])?;
        Ok(PruneOutcome {
            removed,
            kept: kept.len(),
            size_before: before,
            size_after: self.size(),
        })
    }
}

/// Which text `diff` renders besides the structured entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffText {
    None,
    Patch,
    Stat,
}

/// One changed path between a checkpoint and the current tree.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DiffEntry {
    /// `A` (exists now, not in the checkpoint), `D` (in the checkpoint, gone
    /// now), `M` (content or mode changed), `T` (type changed).
    pub status: String,
    pub path: String,
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

impl DiffEntry {
    /// A change without line counts (`status` as git prints it).
    pub(crate) fn name_only(status: u8, path: &[u8]) -> DiffEntry {
        DiffEntry {
            status: (status as char).to_string(),
            path: bh_git::parse::display_path(path),
            added: None,
            deleted: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffOutcome {
    pub checkpoint: Checkpoint,
    pub current_tree: String,
    pub skipped: Vec<meta::Skipped>,
    pub entries: Vec<DiffEntry>,
    #[serde(skip)]
    pub text: Option<Vec<u8>>,
}

/// Which checkpoints `prune` drops: those beyond the newest `keep` and/or older
/// than `older_than` (both must hold when both are given).
#[derive(Debug, Clone, Default)]
pub struct PrunePolicy {
    pub keep: Option<usize>,
    pub older_than: Option<Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PruneOutcome {
    pub removed: Vec<Checkpoint>,
    pub kept: usize,
    pub size_before: u64,
    pub size_after: u64,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn remove_lock_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => remove_lock_files(&path),
            Ok(_) if path.extension().is_some_and(|e| e == "lock") => {
                let _ = fs::remove_file(&path);
            }
            _ => {}
        }
    }
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// The enclosing repository and the user's `core.excludesFile`, asked of git
/// in parallel.
fn user_facts(runner: &GitRunner, dir: &Path) -> (Option<(PathBuf, UserRepo)>, Option<PathBuf>) {
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
    let out = repo
        .run([
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
            "--git-path",
            "index",
            "--git-path",
            "info/exclude",
        ])
        .ok()?;
    let lines: Vec<&[u8]> = trim_line(&out).split(|b| *b == b'\n').collect();
    let [top, git_dir, common, index, exclude] = lines.as_slice() else {
        return None;
    };
    let path = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
    let top = fs::canonicalize(path(top)).ok()?;
    let is_top = top == dir;
    let repo = runner.repo(&top, Scope::User);
    Some((
        top,
        UserRepo {
            repo,
            is_top,
            git_dir: path(git_dir),
            common_dir: path(common),
            index: path(index),
            exclude: path(exclude),
        },
    ))
}

/// The user's `core.excludesFile`, as their own git resolves it (global and
/// repository config), so the shadow — which reads no global config — honours it.
fn user_excludes_file(runner: &GitRunner, project: &Path) -> Option<PathBuf> {
    let out = runner
        .repo(project, Scope::User)
        .cmd(["config", "--path", "--get", "core.excludesFile"])
        .ok_codes(&[0, 1])
        .run()
        .ok()?;
    let value = trim_line(&out.stdout);
    (!value.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(value)))
}
