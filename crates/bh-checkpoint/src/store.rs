//! Opening, locking and querying a checkpoint store.

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use fs_err::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Repo, Scope};
use bh_protocol::prefix::{self, Named, PrefixError, Shape};
use sha2::{Digest, Sha256};

use crate::error::{CheckpointError, Result};
use crate::meta::{self, Checkpoint, CheckpointKind};
use crate::user::{UserRepo, user_facts};

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

/// One project's checkpoint store.
#[derive(Debug)]
pub struct Store {
    pub(crate) project: PathBuf,
    /// The store folder's real path, for people.
    pub(crate) dir: PathBuf,
    /// The path every file of the store is reached by: the checked folder's
    /// descriptor (see `trust`).
    pub(crate) root: PathBuf,
    pub(crate) git_dir: PathBuf,
    /// The state directory the store was opened under (absolute).
    pub(crate) state_dir: PathBuf,
    _trusted: crate::trust::TrustedDir,
    pub(crate) runner: GitRunner,
    pub(crate) user: Option<UserRepo>,
    pub(crate) excludes_file: Option<PathBuf>,
    pub(crate) max_file_size: u64,
    /// Told the progress of snapshots taken without a callback of their own
    /// (those of an agent's `LiveStore`), when set.
    pub(crate) observer: Observer,
}

/// A progress callback shared with a store (see [`Store::set_progress`]).
pub type ProgressFn = std::sync::Arc<dyn Fn(crate::SnapshotProgress) + Send + Sync>;

#[derive(Default)]
pub(crate) struct Observer(std::sync::Mutex<Option<ProgressFn>>);

impl Observer {
    pub(crate) fn get(&self) -> Option<ProgressFn> {
        self.0.lock().ok().and_then(|f| f.clone())
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() {
            "Observer(set)"
        } else {
            "Observer(none)"
        })
    }
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
    format!("{base}-{}", project_key(project))
}

/// The key naming one project's files under the state directory: the first
/// 16 hex digits of the SHA-256 of its canonical path (its store folder's
/// suffix, and `<state>/serve/<key>.*` of its checkpoint server).
pub fn project_key(project: &Path) -> String {
    let digest = Sha256::digest(project.as_os_str().as_bytes());
    hex::encode(digest)[..16].to_owned()
}

/// The call journal of `project`'s checkpoint server:
/// `<state>/serve/<key>.calls` ([`project_key`]).
pub fn call_journal_path(state_dir: &Path, project: &Path) -> PathBuf {
    state_dir
        .join("serve")
        .join(format!("{}.calls", project_key(project)))
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

    /// The project [`open_in`](Self::open_in) would open for `dir`: the
    /// enclosing Git repository's top level, else `dir` itself (canonical).
    pub fn project_of(runner: &GitRunner, dir: &Path) -> Result<PathBuf> {
        let real = fs::canonicalize(dir).map_err(|e| CheckpointError::BadProject {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(match user_facts(runner, &real) {
            (Some((top, _)), _) => top,
            (None, _) => real,
        })
    }

    /// Like [`open_in`](Self::open_in), but only a store that already exists:
    /// `Ok(None)` when the project has none (nothing is created). For readers
    /// such as completion that must not leave a store behind.
    pub fn open_existing_in(
        runner: &GitRunner,
        dir: &Path,
        options: &StoreOptions,
    ) -> Result<Option<Store>> {
        let real = fs::canonicalize(dir).map_err(|e| CheckpointError::BadProject {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        let (found, excludes) = user_facts(runner, &real);
        let project = found.as_ref().map_or(real.clone(), |(top, _)| top.clone());
        let checkpoints =
            crate::paths::resolve_existing_prefix(&options.state_dir.join("checkpoints"));
        if !checkpoints.join(store_name(&project)).is_dir() {
            // No store; but a `checkpoints` folder someone else could change
            // (or a symlink in its place) is still refused, not read past.
            let folder = options.state_dir.join("checkpoints");
            if options.state_dir.is_absolute() && fs::symlink_metadata(&folder).is_ok() {
                crate::trust::open_trusted(&options.state_dir, &["checkpoints"])?;
            }
            return Ok(None);
        }
        let user = found.map(|(_, user)| UserRepo {
            is_top: true,
            ..user
        });
        Store::open_with(runner, project, user, excludes, options).map(Some)
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
        let name = store_name(&project);
        let trusted = crate::trust::open_trusted(&state_dir, &["checkpoints", &name])?;
        // Re-check overlap on the real path (a symlinked state root).
        let real = &trusted.path;
        if real.starts_with(&project) || project.starts_with(real) {
            return Err(CheckpointError::Overlap {
                store: real.clone(),
                project,
            });
        }
        let store = Store {
            git_dir: trusted.access.join("git"),
            root: trusted.access.clone(),
            dir: trusted.path.clone(),
            state_dir,
            _trusted: trusted,
            project,
            runner: runner.clone(),
            user,
            excludes_file,
            max_file_size: options.max_file_size,
            observer: Observer::default(),
        };
        {
            let _lock = store.lock()?;
            store.ensure_initialised()?;
        }
        Ok(store)
    }

    /// Reports the progress of every later snapshot that has no callback of
    /// its own (an agent's, through its `LiveStore`) to `progress`; `None`
    /// stops that.
    pub fn set_progress(&self, progress: Option<ProgressFn>) {
        if let Ok(mut f) = self.observer.0.lock() {
            *f = progress;
        }
    }

    pub fn project(&self) -> &Path {
        &self.project
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The project's call journal (written by its checkpoint server; read by
    /// every rewind, see [`Store::checkpoint_at_entry`]).
    pub fn call_journal(&self) -> crate::Journal {
        crate::Journal::new(call_journal_path(&self.state_dir, &self.project))
    }

    /// Counts a checkpoint that could not be taken (a hook's failed
    /// snapshot), with why: one line in `<state>/serve/<key>.skipped`.
    pub fn record_skipped(&self, why: &str) -> Result<()> {
        let path = self.skipped_path();
        if let Some(dir) = path.parent() {
            bh_fs::create_dir_all_mode(dir, 0o700)
                .map_err(|e| CheckpointError::io(format!("cannot create {}", dir.display()), e))?;
        }
        let line: String = why
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(500)
            .collect();
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| CheckpointError::io(format!("cannot open {}", path.display()), e))?;
        std::io::Write::write_all(&mut file, format!("{} {line}\n", now_ms()).as_bytes())
            .map_err(|e| CheckpointError::io(format!("cannot append to {}", path.display()), e))
    }

    /// How many checkpoints could not be taken, and the last reason.
    pub fn skipped_snapshots(&self) -> (u64, Option<String>) {
        let Ok(text) = fs::read_to_string(self.skipped_path()) else {
            return (0, None);
        };
        let last = text
            .lines()
            .last()
            .map(|l| l.split_once(' ').map_or(l, |(_, why)| why).to_owned());
        (text.lines().count() as u64, last)
    }

    fn skipped_path(&self) -> PathBuf {
        call_journal_path(&self.state_dir, &self.project).with_extension("skipped")
    }

    /// Takes the store lock, waiting for other processes.
    pub(crate) fn lock(&self) -> Result<StoreLock> {
        let path = self.root.join("lock");
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
        let project_file = self.root.join("project");
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
        let tmp = self.root.join(format!("git.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        let _ = fs::remove_dir_all(&self.git_dir);
        let init = self.runner.repo(&self.root, Scope::Isolated);
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

    /// Finds a checkpoint by id prefix (at least 4 hex digits, the one
    /// rule of `bh_protocol::prefix`) or `latest`/`last`, which name the
    /// newest checkpoint that is not a restore's undo point (a pre-restore
    /// checkpoint is named by its id).
    pub fn resolve(&self, id: &str) -> Result<Checkpoint> {
        let list = self.list()?;
        if id == "latest" || id == "last" {
            return list
                .into_iter()
                .find(|c| c.kind != CheckpointKind::PreRestore)
                .ok_or_else(|| {
                    PrefixError::NotFound {
                        what: Named::Checkpoint,
                        query: id.to_owned(),
                    }
                    .into()
                });
        }
        Ok(prefix::resolve(
            Named::Checkpoint,
            Shape::Hex,
            id,
            list,
            |c| &c.commit,
        )?)
    }

    /// The store's size on disk, in bytes.
    pub fn size(&self) -> u64 {
        dir_size(&self.root)
    }
}

pub(crate) use bh_fs::now_ms;

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
