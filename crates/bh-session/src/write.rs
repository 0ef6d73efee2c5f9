//! Writing sessions the way Pi does: file naming, per-cwd directories, 8-hex
//! ids, O_EXCL creation and appends under an exclusive file lock.

use fs_err::os::unix::fs::FileExt;
use fs_err::{File, OpenOptions};
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bh_protocol::entry::{
    ContextEditEntry, CustomEntry, CustomMessageEntry, LabelEntry, MessageEntry, ModelChangeEntry,
    SessionInfoEntry, ThinkingLevelChangeEntry,
};
use bh_protocol::{EntryHead, SessionHeader};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::session::Session;

/// `customType` of the entry appended to make another entry the active leaf.
pub const SET_LEAF_CUSTOM_TYPE: &str = "better-harness.set-leaf";

/// The current time as JavaScript's `Date.prototype.toISOString` writes it.
pub fn now_iso() -> String {
    timestamp_iso(jiff::Timestamp::now())
}

pub fn timestamp_iso(ts: jiff::Timestamp) -> String {
    let ms = ts.as_millisecond();
    let whole = jiff::Timestamp::from_millisecond(ms - ms.rem_euclid(1000)).unwrap_or(ts);
    format!(
        "{}.{:03}Z",
        whole.strftime("%Y-%m-%dT%H:%M:%S"),
        ms.rem_euclid(1000)
    )
}

/// A new session id: UUIDv7 ([P73] `createSessionId`).
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Pi's session file name: `<timestamp with : and . as ->_<sessionId>.jsonl`.
pub fn session_file_name(timestamp_iso: &str, session_id: &str) -> String {
    format!(
        "{}_{session_id}.jsonl",
        timestamp_iso.replace([':', '.'], "-")
    )
}

/// `<agentDir>/sessions/--<cwd without leading / and with / \ : as ->--/`
/// ([P73] `getDefaultSessionDir`).
pub fn session_dir_for_cwd(agent_dir: &Path, cwd: &str) -> PathBuf {
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    let safe = trimmed.replace(['/', '\\', ':'], "-");
    agent_dir.join("sessions").join(format!("--{safe}--"))
}

/// A new 8-hex entry id not in `taken` (a full UUID after 100 collisions, as Pi).
pub fn new_entry_id(taken: &HashSet<String>) -> String {
    for _ in 0..100 {
        let mut h = std::hash::RandomState::new().build_hasher();
        h.write(uuid::Uuid::now_v7().as_bytes());
        let id = format!("{:08x}", h.finish() as u32);
        if !taken.contains(&id) {
            return id;
        }
    }
    uuid::Uuid::now_v7().to_string()
}

fn enc(path: &Path) -> impl Fn(serde_json::Error) -> SessionError + '_ {
    move |source| SessionError::Serialize {
        file: path.display().to_string(),
        source,
    }
}

/// Create `path` with O_EXCL and write `content`; refuses to overwrite.
pub fn create_new_file(path: &Path, content: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        fs_err::create_dir_all(dir).map_err(|e| SessionError::io(dir, e))?;
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                SessionError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                SessionError::io(path, e)
            }
        })?;
    f.write_all(content)
        .map_err(|e| SessionError::io(path, e))?;
    f.sync_all().map_err(|e| SessionError::io(path, e))?;
    Ok(())
}

/// Appends entries to one session file.
///
/// Every append takes an exclusive lock on the file (`File::lock`), first
/// reads whatever other writers appended since (so new ids stay unique in the
/// file), adds a newline if the file ends in a torn line, then writes one line.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    ids: HashSet<String>,
    leaf: Option<String>,
    known_len: u64,
}

impl SessionWriter {
    /// Create a new session file at `path` (O_EXCL) holding only `header`.
    pub fn create(path: impl Into<PathBuf>, header: &SessionHeader) -> Result<SessionWriter> {
        let path = path.into();
        let mut line = serde_json::to_vec(header).map_err(enc(&path))?;
        line.push(b'\n');
        create_new_file(&path, &line)?;
        Ok(SessionWriter {
            path,
            ids: HashSet::new(),
            leaf: None,
            known_len: line.len() as u64,
        })
    }

    /// Create a new session in `dir` with Pi's file name for `header`.
    pub fn create_in_dir(dir: &Path, header: &SessionHeader) -> Result<SessionWriter> {
        let ts = header.timestamp.clone().unwrap_or_else(now_iso);
        let path = dir.join(session_file_name(&ts, &header.id));
        SessionWriter::create(path, header)
    }

    /// Start a new session for `cwd` under `agent_dir` (Pi's default layout).
    pub fn create_for_cwd(agent_dir: &Path, cwd: &str) -> Result<SessionWriter> {
        let header = SessionHeader::new(new_session_id(), now_iso(), cwd, None);
        SessionWriter::create_in_dir(&session_dir_for_cwd(agent_dir, cwd), &header)
    }

    /// Open an existing session to append to it; the leaf is its last entry.
    pub fn open(path: impl Into<PathBuf>) -> Result<SessionWriter> {
        let path = path.into();
        let session = Session::load(&path)?;
        session.require_header("cannot append")?;
        Ok(SessionWriter::from_session(&session, path))
    }

    /// A writer for the file `session` was loaded from.
    pub fn from_session(session: &Session, path: PathBuf) -> SessionWriter {
        SessionWriter {
            ids: session.entries().iter().map(|e| e.id.clone()).collect(),
            leaf: session.leaf().map(|e| e.id.clone()),
            known_len: session.bytes().len() as u64,
            path,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the file to stable storage (`fdatasync`), so what was
    /// appended survives a power loss, not only a killed process. The agent
    /// calls it at the end of every run.
    pub fn sync(&self) -> Result<()> {
        let f = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| SessionError::io(&self.path, e))?;
        f.sync_data().map_err(|e| SessionError::io(&self.path, e))
    }

    pub fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Move the leaf without writing (Pi's `branch`/`resetLeaf`); the next
    /// append becomes a child of `id` (or a new root for `None`).
    pub fn branch(&mut self, id: Option<&str>) -> Result<()> {
        if let Some(id) = id
            && !self.ids.contains(id)
        {
            return Err(SessionError::EntryNotFound {
                file: self.path.display().to_string(),
                id: id.to_owned(),
            });
        }
        self.leaf = id.map(str::to_owned);
        Ok(())
    }

    /// Append one entry built by `build(id, parentId, timestamp)` as a child
    /// of the leaf; it becomes the new leaf. Returns its id.
    pub fn append_with(
        &mut self,
        build: impl FnOnce(&str, Option<&str>, &str) -> serde_json::Result<Vec<u8>>,
    ) -> Result<String> {
        let path = self.path.clone();
        let io = |e| SessionError::io(&path, e);
        let mut f = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        f.lock().map_err(io)?;
        let result = self.append_locked(&mut f, build);
        let unlock = f.unlock().map_err(io);
        let id = result?;
        unlock?;
        Ok(id)
    }

    fn append_locked(
        &mut self,
        f: &mut File,
        build: impl FnOnce(&str, Option<&str>, &str) -> serde_json::Result<Vec<u8>>,
    ) -> Result<String> {
        let path = self.path.clone();
        let io = |e| SessionError::io(&path, e);
        let len = f.metadata().map_err(io)?.len();
        if len > self.known_len {
            // Learn the ids other writers appended meanwhile.
            let mut tail = Vec::new();
            f.seek(SeekFrom::Start(self.known_len)).map_err(io)?;
            f.read_to_end(&mut tail).map_err(io)?;
            for line in tail.split(|&b| b == b'\n') {
                if let Ok(h) = EntryHead::parse(line)
                    && let Some(id) = h.id.as_str()
                {
                    self.ids.insert(id.to_owned());
                }
            }
        }
        let mut last = [0u8; 1];
        let needs_nl = len > 0 && {
            f.read_exact_at(&mut last, len - 1).map_err(io)?;
            last[0] != b'\n'
        };
        let id = new_entry_id(&self.ids);
        let ts = now_iso();
        let mut line = build(&id, self.leaf.as_deref(), &ts).map_err(enc(&self.path))?;
        if line.contains(&b'\n') {
            return Err(SessionError::Argument(
                "an entry must serialise to a single line".to_owned(),
            ));
        }
        let mut buf = Vec::with_capacity(line.len() + 2);
        if needs_nl {
            buf.push(b'\n');
        }
        buf.append(&mut line);
        buf.push(b'\n');
        // One write(2): once it returns, a killed process loses nothing. Like
        // Pi, no fsync per entry; `sync` makes the file durable on demand.
        f.write_all(&buf).map_err(io)?;
        self.known_len = len + buf.len() as u64;
        self.ids.insert(id.clone());
        self.leaf = Some(id.clone());
        Ok(id)
    }

    /// `appendMessage`: `message` is any AgentMessage (typed or raw JSON).
    pub fn append_message<M: Serialize>(&mut self, message: &M) -> Result<String> {
        let raw = serde_json::value::to_raw_value(message).map_err(enc(&self.path))?;
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&MessageEntry {
                kind: "message".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
                message: raw,
            })
        })
    }

    pub fn append_model_change(&mut self, provider: &str, model_id: &str) -> Result<String> {
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&ModelChangeEntry {
                kind: "model_change".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
                provider: provider.into(),
                model_id: model_id.into(),
            })
        })
    }

    pub fn append_thinking_level_change(&mut self, level: &str) -> Result<String> {
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&ThinkingLevelChangeEntry {
                kind: "thinking_level_change".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
                thinking_level: level.into(),
            })
        })
    }

    /// `appendSessionInfo` (the name is trimmed, as Pi does).
    pub fn append_session_info(&mut self, name: &str) -> Result<String> {
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&SessionInfoEntry {
                kind: "session_info".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
                name: name.trim().into(),
            })
        })
    }

    /// `appendLabelChange`: `None` clears the label.
    pub fn append_label(&mut self, target_id: &str, label: Option<&str>) -> Result<String> {
        if !self.ids.contains(target_id) {
            return Err(SessionError::EntryNotFound {
                file: self.path.display().to_string(),
                id: target_id.to_owned(),
            });
        }
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&LabelEntry {
                kind: "label".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: Some(ts.into()),
                target_id: target_id.into(),
                label: label.map(Into::into),
            })
        })
    }

    /// `appendContextEdit` (Pi 1.x): `None` omits the target from the model's
    /// context, `Some({"content": …})` replaces its content. The target must be
    /// an entry of this file.
    pub fn append_context_edit(
        &mut self,
        target_id: &str,
        replacement: Option<serde_json::Value>,
    ) -> Result<String> {
        if !self.ids.contains(target_id) {
            return Err(SessionError::EntryNotFound {
                file: self.path.display().to_string(),
                id: target_id.to_owned(),
            });
        }
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&ContextEditEntry {
                kind: "context_edit".into(),
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
                target_id: target_id.into(),
                replacement: replacement.clone(),
            })
        })
    }

    /// `appendCustomEntry` (not in the model's context).
    pub fn append_custom(&mut self, custom_type: &str, data: Option<Value>) -> Result<String> {
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&CustomEntry {
                kind: "custom".into(),
                custom_type: custom_type.into(),
                data,
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
            })
        })
    }

    /// `appendCustomMessageEntry` (sent to the model as user content).
    pub fn append_custom_message(
        &mut self,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
    ) -> Result<String> {
        self.append_with(|id, parent, ts| {
            serde_json::to_vec(&CustomMessageEntry {
                kind: "custom_message".into(),
                custom_type: custom_type.into(),
                content,
                display,
                details,
                id: id.into(),
                parent_id: parent.map(Into::into),
                timestamp: ts.into(),
            })
        })
    }

    /// Make `target_id` the active leaf for Pi by appending, under it, an
    /// entry that adds nothing to the context (a `custom` entry). Pi takes the
    /// last entry in the file as the leaf, so the context becomes `target_id`'s.
    pub fn select_leaf(&mut self, target_id: &str) -> Result<String> {
        self.branch(Some(target_id))?;
        self.append_custom(
            SET_LEAF_CUSTOM_TYPE,
            Some(serde_json::json!({ "targetId": target_id })),
        )
    }
}

/// Make `target_id` the active leaf of the session file at `path` (appends
/// one entry under it; see [`SessionWriter::select_leaf`]).
pub fn select_leaf(path: &Path, target_id: &str) -> Result<String> {
    SessionWriter::open(path)?.select_leaf(target_id)
}

/// Appends `lines` (whole entry lines, each ending in `\n`) to the session
/// file at `path` in one write, under its append lock, only when the file is
/// exactly `expected_len` bytes long and ends in a newline — that is, when
/// nobody appended since the caller read it. `Ok(false)`: it changed, and
/// nothing was written.
pub fn extend_if_unchanged(path: &Path, expected_len: u64, lines: &[u8]) -> Result<bool> {
    if !lines.is_empty() && !lines.ends_with(b"\n") {
        return Err(SessionError::Argument(
            "lines to append must end in a newline".to_owned(),
        ));
    }
    let io = |e| SessionError::io(path, e);
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    same_regular_file(&f, path)?;
    f.lock().map_err(io)?;
    let result = (|| {
        let len = f.metadata().map_err(io)?.len();
        if len != expected_len || len == 0 {
            return Ok(false);
        }
        let mut last = [0u8; 1];
        f.read_exact_at(&mut last, len - 1).map_err(io)?;
        if last[0] != b'\n' {
            return Ok(false);
        }
        f.write_all(lines).map_err(io)?;
        Ok(true)
    })();
    let unlock = f.unlock().map_err(io);
    let done = result?;
    unlock?;
    Ok(done)
}

/// Cuts the session file at `path` back to `back_to` bytes, under its append
/// lock, only when it is exactly `expected_len` long (nothing was appended
/// after the caller's own writes). `Ok(false)`: it changed, and it is left
/// as it is.
pub fn truncate_if_unchanged(path: &Path, expected_len: u64, back_to: u64) -> Result<bool> {
    let io = |e| SessionError::io(path, e);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    same_regular_file(&f, path)?;
    f.lock().map_err(io)?;
    let result = (|| {
        let len = f.metadata().map_err(io)?.len();
        if len != expected_len || back_to > len {
            return Ok(false);
        }
        f.set_len(back_to).map_err(io)?;
        Ok(true)
    })();
    let unlock = f.unlock().map_err(io);
    let done = result?;
    unlock?;
    Ok(done)
}

/// Refuses `path` unless it is a regular file itself (not a symlink to one)
/// and `f` is that file: the in-place edits above never follow a link
/// planted where the session was.
fn same_regular_file(f: &File, path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let io = |e| SessionError::io(path, e);
    let link = fs_err::symlink_metadata(path).map_err(io)?;
    let open = f.metadata().map_err(io)?;
    if !link.file_type().is_file() || link.dev() != open.dev() || link.ino() != open.ino() {
        return Err(SessionError::io(
            path,
            std::io::Error::other("not a regular file (a symlink or a special file)"),
        ));
    }
    Ok(())
}
