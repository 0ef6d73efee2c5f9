//! The call journal: one line per tagged snapshot request, in call order,
//! naming the checkpoint that stood before the call — also when the snapshot
//! was debounced into an older checkpoint, which the store's own tags cannot
//! say (a reused checkpoint keeps the tags of the call that created it).
//!
//! After-records ([`AfterCall`]) follow a call once it returned: the
//! checkpoints before and after it, which is what a rewind plan attributes
//! paths with.
//!
//! It is bounded by [`Journal::compact`], which drops a repeated call of a
//! (session, entry) naming a checkpoint already journalled for it (the first
//! is what `restore_to_entry` looks up, and a repeat names no other state
//! for a rewind plan), a repeated identical after-record, and every call and
//! after-record of a session none of whose checkpoints is left (the store's
//! tags then know nothing of it either, so nothing can be guessed instead).
//! A session keeps its calls whose checkpoints were pruned while any of its
//! checkpoints lives, so that rewinding to such a call is refused by name
//! rather than answered with a later checkpoint. The journal thus stays
//! proportional to the distinct states the live sessions' calls saw.
//!
//! Appends and compactions of every server of the project are serialised by
//! an exclusive `flock` on the journal file; a compaction replaces the file
//! by rename, so an appender that waited re-opens it when the path names
//! another file than the one it holds.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use serde::{Deserialize, Serialize};

use crate::error::{CheckpointError, Result};

/// One tagged snapshot request: the checkpoint that stood before the call
/// `tool` of `entry` (the assistant entry making it) in `session`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Call {
    pub commit: String,
    pub session: String,
    pub entry: String,
    pub tool: String,
    pub created: bool,
}

/// What one mutating call changed: the checkpoint before it and the one
/// after it (an *after-record*), written once the call returned. Journalled
/// as `{"after": {...}}`, a line [`Journal::calls`] skips.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AfterCall {
    pub session: String,
    /// The entry that made the call (bh/Pi: the assistant entry; Claude Code:
    /// the tool-use id).
    pub entry: String,
    /// The tool-call id, when it differs from `entry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub tool: String,
    /// The checkpoint that stood before the call.
    pub before: String,
    /// The checkpoint of the state the call left.
    pub after: String,
    /// The agent's transcript, when it has one apart from a session file
    /// (Claude Code's `transcript_path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    /// The refs the call moved (bash's commits from the sandbox).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<crate::RefMove>,
}

#[derive(Serialize, Deserialize)]
struct AfterLine {
    after: AfterCall,
}

/// What a [`Journal::compact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub before: usize,
    pub after: usize,
    /// The file's size afterwards.
    pub bytes: u64,
}

/// One project's call journal (`<state>/serve/<key>.calls`, see
/// [`crate::Store::call_journal`]).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: PathBuf) -> Journal {
        Journal { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal opened for appending and locked, created if missing; the
    /// file the path names once the lock is held (a compaction may have
    /// replaced it meanwhile).
    ///
    /// Never through a symlink (`O_NOFOLLOW`), only a regular file of the
    /// current user, and a bounded number of retries when the path keeps
    /// naming another file than the one locked.
    fn open_locked(&self) -> Result<fs::File> {
        if let Some(dir) = self.path.parent()
            && !dir.exists()
        {
            bh_fs::create_dir_all_mode(dir, 0o700)
                .map_err(|e| CheckpointError::io(format!("cannot create {}", dir.display()), e))?;
        }
        for _ in 0..OPEN_RETRIES {
            let file = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&self.path)
                .map_err(|e| jio("cannot open the call journal", &self.path, e))?;
            check_regular(&self.path, &file)?;
            file.file()
                .lock()
                .map_err(|e| jio("cannot lock the call journal", &self.path, e))?;
            let held = file
                .metadata()
                .map_err(|e| jio("cannot inspect the call journal", &self.path, e))?;
            match fs::symlink_metadata(&self.path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => return Ok(file),
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(jio("cannot inspect the call journal", &self.path, e));
                }
            }
        }
        Err(jio(
            "the call journal keeps being replaced while it is opened",
            &self.path,
            std::io::Error::other(format!("gave up after {OPEN_RETRIES} tries")),
        ))
    }

    /// Appends one call with a single `write(2)` (`O_APPEND`, under the
    /// journal's lock); returns the journal's size afterwards.
    pub fn append(&self, call: &Call) -> Result<u64> {
        let mut line = serde_json::to_vec(call)
            .map_err(|e| jio("cannot encode a journal line for", &self.path, e.into()))?;
        line.push(b'\n');
        let mut file = self.open_locked()?;
        file.write_all(&line)
            .map_err(|e| jio("cannot append to the call journal", &self.path, e))?;
        Ok(file.metadata().map(|m| m.len()).unwrap_or(0))
    }

    /// Appends one after-record (see [`AfterCall`]).
    pub fn append_after(&self, after: &AfterCall) -> Result<u64> {
        let mut line = serde_json::to_vec(&AfterLine {
            after: after.clone(),
        })
        .map_err(|e| jio("cannot encode a journal line for", &self.path, e.into()))?;
        line.push(b'\n');
        let mut file = self.open_locked()?;
        file.write_all(&line)
            .map_err(|e| jio("cannot append to the call journal", &self.path, e))?;
        Ok(file.metadata().map(|m| m.len()).unwrap_or(0))
    }

    /// Every readable after-record, in call order.
    pub fn afters(&self) -> Result<Vec<AfterCall>> {
        Ok(self.lines()?.1)
    }

    fn lines(&self) -> Result<(Vec<Call>, Vec<AfterCall>)> {
        let file = match fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&self.path)
        {
            Ok(f) => {
                check_regular(&self.path, &f)?;
                f
            }
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(e) => {
                return Err(jio("cannot open the call journal", &self.path, e));
            }
        };
        read_lines(file, &self.path)
    }

    /// Every readable call, in call order (a torn or foreign line is skipped).
    pub fn calls(&self) -> Result<Vec<Call>> {
        Ok(self.lines()?.0)
    }

    /// Drops what no answer depends on (see the module docs); `live` holds
    /// the commits of every checkpoint the store still has.
    pub fn compact(&self, live: &HashSet<String>) -> Result<Compacted> {
        let file = self.open_locked()?;
        let (calls, afters) = read_lines(&file, &self.path)?;
        let alive: HashSet<&str> = calls
            .iter()
            .filter(|c| live.contains(&c.commit))
            .map(|c| c.session.as_str())
            .chain(
                afters
                    .iter()
                    .filter(|a| live.contains(&a.before) || live.contains(&a.after))
                    .map(|a| a.session.as_str()),
            )
            .collect();
        let encode = |out: &mut Vec<u8>, line: serde_json::Result<Vec<u8>>| -> Result<()> {
            let line =
                line.map_err(|e| jio("cannot encode a journal line for", &self.path, e.into()))?;
            out.extend_from_slice(&line);
            out.push(b'\n');
            Ok(())
        };
        let mut out = Vec::new();
        let mut kept = 0;
        // Of a live session: the first call of each (entry, checkpoint) —
        // a repeat names no other state — and each distinct after-record.
        let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
        for c in calls.iter().filter(|c| alive.contains(c.session.as_str())) {
            if seen.insert((&c.session, &c.entry, &c.commit)) {
                encode(&mut out, serde_json::to_vec(c))?;
                kept += 1;
            }
        }
        let mut seen: HashSet<(&str, &str, &str, &str)> = HashSet::new();
        for a in afters.iter().filter(|a| alive.contains(a.session.as_str())) {
            if seen.insert((&a.session, &a.entry, &a.before, &a.after)) {
                encode(
                    &mut out,
                    serde_json::to_vec(&AfterLine { after: a.clone() }),
                )?;
                kept += 1;
            }
        }
        // Replaced by rename while the old file's lock is held: appenders
        // waiting on it then find the path naming the new file.
        bh_fs::write_atomic(&self.path, &out, 0o600)
            .map_err(|e| jio("cannot rewrite the call journal", &self.path, e))?;
        drop(file);
        Ok(Compacted {
            before: calls.len() + afters.len(),
            after: kept,
            bytes: out.len() as u64,
        })
    }
}

/// An I/O error of the journal at `path`.
/// How often [`Journal::open_locked`] reopens a journal replaced under it.
const OPEN_RETRIES: usize = 64;

/// The opened journal is a regular file of the current user.
fn check_regular(path: &Path, file: &fs::File) -> Result<()> {
    let meta = file
        .metadata()
        .map_err(|e| jio("cannot inspect the call journal", path, e))?;
    let me = nix::unistd::getuid().as_raw();
    if !meta.is_file() || meta.uid() != me {
        return Err(jio(
            "refusing the call journal",
            path,
            std::io::Error::other(format!(
                "not a regular file of uid {me} (uid {}, {})",
                meta.uid(),
                if meta.is_file() {
                    "file"
                } else {
                    "not a regular file"
                }
            )),
        ));
    }
    Ok(())
}

fn jio(context: &str, path: &Path, source: std::io::Error) -> CheckpointError {
    CheckpointError::io(format!("{context} {}", path.display()), source)
}

fn read_lines(file: impl std::io::Read, path: &Path) -> Result<(Vec<Call>, Vec<AfterCall>)> {
    let mut calls = Vec::new();
    let mut afters = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| jio("cannot read the call journal", path, e))?;
        if let Ok(call) = serde_json::from_slice::<Call>(&line) {
            calls.push(call);
        } else if let Ok(a) = serde_json::from_slice::<AfterLine>(&line) {
            afters.push(a.after);
        }
    }
    Ok((calls, afters))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn call(commit: &str, session: &str, entry: &str) -> Call {
        Call {
            commit: commit.into(),
            session: session.into(),
            entry: entry.into(),
            tool: "edit".into(),
            created: true,
        }
    }

    #[test]
    fn a_symlinked_or_fifo_journal_is_refused_not_followed_or_spun_on() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, "").unwrap();
        let j = Journal::new(dir.path().join("j.calls"));
        fs_err::os::unix::fs::symlink(&target, j.path()).unwrap();
        let err = j.append(&call("c0", "A", "a1")).unwrap_err().to_string();
        assert!(err.contains("j.calls"), "{err}");
        assert!(j.calls().is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "", "not followed");
        fs::remove_file(j.path()).unwrap();
        nix::unistd::mkfifo(j.path(), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = j.calls().unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(j.append(&call("c0", "A", "a1")).is_err());
    }

    #[test]
    fn compact_keeps_the_calls_of_sessions_with_a_live_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path().join("j.calls"));
        // Session A: all pruned; session B: c1 pruned, c2 alive.
        for c in [
            call("c0", "A", "a1"),
            call("c1", "B", "b1"),
            call("c2", "B", "b2"),
            call("c3", "B", "b2"),
            call("c3", "B", "b2"),
            call("c4", "A", "a2"),
        ] {
            j.append(&c).unwrap();
        }
        let after = |session: &str, before: &str, after: &str| AfterCall {
            session: session.into(),
            entry: "e".into(),
            call: Some("t1".into()),
            tool: "bash".into(),
            before: before.into(),
            after: after.into(),
            transcript: None,
            refs: Vec::new(),
        };
        j.append_after(&after("B", "c2", "c3")).unwrap();
        j.append_after(&after("B", "c2", "c3")).unwrap();
        j.append_after(&after("A", "c0", "c4")).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .unwrap()
            .write_all(b"{torn\n")
            .unwrap();
        let live: HashSet<String> = ["c2".to_owned(), "c3".to_owned()].into();
        let done = j.compact(&live).unwrap();
        assert_eq!((done.before, done.after), (9, 4));
        assert_eq!(
            j.calls().unwrap(),
            [
                call("c1", "B", "b1"),
                call("c2", "B", "b2"),
                call("c3", "B", "b2")
            ]
        );
        assert_eq!(j.afters().unwrap(), [after("B", "c2", "c3")]);
        assert_eq!(fs::metadata(j.path()).unwrap().len(), done.bytes);
        let mode = fs::metadata(j.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Appending after a compaction goes to the new file.
        j.append(&call("c5", "B", "b3")).unwrap();
        assert_eq!(j.calls().unwrap().len(), 4);
    }

    #[test]
    fn an_appender_holding_the_replaced_file_reopens_it() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path().join("j.calls"));
        j.append(&call("c1", "S", "e1")).unwrap();
        let held = j.open_locked().unwrap();
        let other = Journal::new(j.path().to_owned());
        let t = std::thread::spawn(move || {
            // Waits for the lock, then finds the path replaced.
            other.append(&call("c2", "S", "e2")).unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        bh_fs::write_atomic(j.path(), b"", 0o600).unwrap();
        drop(held);
        t.join().unwrap();
        assert_eq!(j.calls().unwrap(), [call("c2", "S", "e2")]);
    }
}
