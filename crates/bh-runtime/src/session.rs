//! Which session an agent works on, chosen as Pi chooses it
//! (`dist/main.js` `resolveSessionPath` / `createSessionManager` of Pi 0.73.1):
//!
//! * `--session ARG`: an argument containing `/` or `\`, or ending in
//!   `.jsonl`, is a path — opened when it exists, else a new session created at
//!   exactly that path. Anything else is a session id prefix, searched in the
//!   working directory's session folder first, then in every session folder
//!   of the agent dir. Pi takes the newest match; we refuse an ambiguous
//!   prefix and name the candidates (a script must not guess).
//! * `--continue`: the newest session of the working directory's folder (a
//!   new one when there is none).
//! * `--fork ARG` (path or id): a copy into a new session of the working
//!   directory, continued there; the source is never written.
//! * otherwise: a new session in `<agent dir>/sessions/--<cwd>--/`.
//!
//! The working directory is `cwd` when the caller gives one (`--cwd`), else
//! the directory the command runs in. A resumed session whose header names
//! another directory is refused, naming both, unless `cwd` is given: the
//! tools are never confined to a directory chosen by a file's contents.
//!
//! Opening an existing session consumes a pending worktree handoff
//! (`bh_handoff::consume`): the arrival is verified and recorded once, before
//! the writer reads the file, so the writer's leaf is that record.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_git::GitRunner;
use bh_handoff::ConsumeOutcome;
use bh_protocol::SessionHeader;
use bh_session::{
    ForkOptions, ForkTarget, Session, SessionWriter, list_sessions, new_session_id, now_iso,
    session_dir_for_cwd,
};

use crate::error::{Result, RuntimeError};

/// How the caller names the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    /// A new session in the working directory's folder.
    New,
    /// `--session ARG`: a path or an id prefix.
    Open(PathBuf),
    /// `--continue`.
    Continue,
    /// `--fork ARG`: a path or an id prefix.
    Fork(PathBuf),
}

/// Everything session choice needs; nothing is read from the environment.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub choice: SessionChoice,
    /// Pi's agent dir (`PI_CODING_AGENT_DIR` or `~/.pi/agent`), when known.
    pub agent_dir: Option<PathBuf>,
    /// The directory the command runs in (absolute); relative paths resolve
    /// against it.
    pub run_dir: PathBuf,
    /// An explicit working directory (`--cwd`), absolute or relative to `run_dir`.
    pub cwd: Option<PathBuf>,
    /// bh's state directory: its key tells a handoff record bh wrote from a
    /// planted one.
    pub state_dir: PathBuf,
}

/// An opened session: its writer, the directory the agent works in, and what
/// opening did with a pending worktree handoff.
#[derive(Debug)]
pub struct OpenedSession {
    pub writer: SessionWriter,
    pub cwd: PathBuf,
    pub handoff: ConsumeOutcome,
}

/// `p` made absolute, canonical, and checked to be a directory.
pub fn canonical_dir(p: &Path) -> Result<PathBuf> {
    let dir = fs_err::canonicalize(p).map_err(|source| RuntimeError::Dir {
        path: p.to_path_buf(),
        source,
    })?;
    if !dir.is_dir() {
        return Err(RuntimeError::NotADirectory { path: dir });
    }
    Ok(dir)
}

/// The directory as the UTF-8 string Pi records.
pub fn dir_str(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| RuntimeError::NotUtf8 {
            path: p.to_path_buf(),
        })
}

/// Pi's rule: containing `/` or `\`, or ending in `.jsonl`, makes a path.
fn is_path(arg: &Path) -> bool {
    let b = arg.as_os_str().as_bytes();
    b.contains(&b'/') || b.contains(&b'\\') || b.ends_with(b".jsonl")
}

impl SessionRequest {
    /// An existing session named as Pi names one: a path (containing `/` or
    /// `\`, or ending in `.jsonl`) made absolute against `run_dir`, else a
    /// session id prefix searched in the working directory's session folder
    /// first, then every folder; ambiguous or unknown prefixes are errors
    /// ([`RuntimeError::AmbiguousSession`], [`RuntimeError::NoSuchSession`]).
    /// The `choice` is not used.
    pub fn find(&self, arg: &Path) -> Result<PathBuf> {
        self.resolve(arg)
    }

    fn abs(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.run_dir.join(p)
        }
    }

    fn agent_dir(&self, need: &'static str) -> Result<&Path> {
        self.agent_dir
            .as_deref()
            .ok_or(RuntimeError::NoAgentDir { need })
    }

    /// `--cwd` when given, else the directory the command runs in.
    fn work_dir(&self) -> Result<PathBuf> {
        match &self.cwd {
            Some(c) => canonical_dir(&self.abs(c)),
            None => canonical_dir(&self.run_dir),
        }
    }

    /// A path argument as given, an id prefix resolved as Pi does.
    fn resolve(&self, arg: &Path) -> Result<PathBuf> {
        if is_path(arg) {
            return Ok(self.abs(arg));
        }
        let prefix = arg.to_string_lossy().into_owned();
        let agent_dir = self.agent_dir("find a session by id")?;
        let local = session_dir_for_cwd(agent_dir, &dir_str(&self.work_dir()?)?);
        let matching = |dir: &Path| -> Result<Vec<PathBuf>> {
            Ok(list_sessions(dir)?
                .into_iter()
                .filter(|s| s.id.starts_with(&prefix))
                .map(|s| s.path)
                .collect())
        };
        let mut found = matching(&local)?;
        if found.is_empty() {
            let all = agent_dir.join("sessions");
            let dirs = match fs_err::read_dir(&all) {
                Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
                Err(_) => Vec::new(),
            };
            for dir in dirs.iter().filter(|d| d.is_dir()) {
                found.extend(matching(dir)?);
            }
        }
        match found.len() {
            0 => Err(RuntimeError::NoSuchSession {
                arg: prefix,
                searched: agent_dir.join("sessions").display().to_string(),
            }),
            1 => Ok(found.remove(0)),
            _ => {
                found.sort();
                Err(RuntimeError::AmbiguousSession {
                    arg: prefix,
                    matches: found,
                })
            }
        }
    }

    /// The working directory of an existing session: `--cwd`, else the
    /// directory the command runs in, which must be the one the header names.
    fn resumed_dir(&self, file: &Path, session: &Session) -> Result<PathBuf> {
        if self.cwd.is_some() {
            return self.work_dir();
        }
        let here = canonical_dir(&self.run_dir)?;
        match session.header().and_then(|h| h.cwd.as_deref()) {
            None => Ok(here),
            Some(recorded) => {
                let recorded = PathBuf::from(recorded);
                match fs_err::canonicalize(&recorded) {
                    Ok(r) if r == here => Ok(here),
                    _ => Err(RuntimeError::CwdMismatch {
                        file: file.to_path_buf(),
                        recorded,
                        here,
                    }),
                }
            }
        }
    }
}

/// An existing session named as Pi names one (a path, or an id prefix looked
/// up in `run_dir`'s session folder, then every folder of `agent_dir`);
/// nothing is opened or created. A path is returned as given (resolved
/// against `run_dir`), whether or not it exists.
pub fn find_session(agent_dir: Option<&Path>, run_dir: &Path, arg: &Path) -> Result<PathBuf> {
    SessionRequest {
        choice: SessionChoice::Open(arg.to_path_buf()),
        agent_dir: agent_dir.map(Path::to_path_buf),
        run_dir: run_dir.to_path_buf(),
        cwd: None,
        // Finding opens nothing, so no key is read.
        state_dir: PathBuf::new(),
    }
    .resolve(arg)
}

/// Opens an existing session file: consumes a pending handoff first.
fn open_existing(
    runner: &GitRunner,
    state_dir: &Path,
    file: &Path,
    cwd: PathBuf,
) -> Result<OpenedSession> {
    let handoff = bh_handoff::consume(runner, state_dir, file)?;
    let writer = SessionWriter::open(file)?;
    Ok(OpenedSession {
        writer,
        cwd,
        handoff,
    })
}

fn created(writer: SessionWriter, cwd: PathBuf) -> OpenedSession {
    OpenedSession {
        writer,
        cwd,
        handoff: ConsumeOutcome::NotPending,
    }
}

/// Chooses and opens the session of a request (see the module docs).
pub fn open_session(runner: &GitRunner, req: &SessionRequest) -> Result<OpenedSession> {
    match &req.choice {
        SessionChoice::Open(arg) => {
            let file = req.resolve(arg)?;
            if file.exists() {
                let session = Session::load(&file)?;
                let cwd = req.resumed_dir(&file, &session)?;
                return open_existing(runner, &req.state_dir, &file, cwd);
            }
            let cwd = req.work_dir()?;
            let header = SessionHeader::new(new_session_id(), now_iso(), dir_str(&cwd)?, None);
            Ok(created(SessionWriter::create(&file, &header)?, cwd))
        }
        SessionChoice::Fork(arg) => {
            let src = req.resolve(arg)?;
            let session = Session::load(&src)?;
            let cwd = req.work_dir()?;
            let cwd_s = dir_str(&cwd)?;
            let agent_dir = req.agent_dir("place the forked session")?;
            let target = ForkTarget::Dir(session_dir_for_cwd(agent_dir, &cwd_s));
            let opts = ForkOptions {
                cwd: Some(cwd_s),
                ..ForkOptions::default()
            };
            let forked = bh_session::fork(&session, &target, &opts)?;
            Ok(created(SessionWriter::open(&forked.path)?, cwd))
        }
        SessionChoice::Continue => {
            let cwd = req.work_dir()?;
            let cwd_s = dir_str(&cwd)?;
            let agent_dir = req.agent_dir("find the sessions of the working directory")?;
            let newest = list_sessions(&session_dir_for_cwd(agent_dir, &cwd_s))?
                .into_iter()
                .max_by_key(|s| s.modified_ms);
            match newest {
                Some(s) => open_existing(runner, &req.state_dir, &s.path, cwd),
                None => Ok(created(
                    SessionWriter::create_for_cwd(agent_dir, &cwd_s)?,
                    cwd,
                )),
            }
        }
        SessionChoice::New => {
            let cwd = req.work_dir()?;
            let agent_dir = req.agent_dir("place a new session")?;
            let writer = SessionWriter::create_for_cwd(agent_dir, &dir_str(&cwd)?)?;
            Ok(created(writer, cwd))
        }
    }
}
