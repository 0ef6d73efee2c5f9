//! The ops, one method each: [`Service::answer`] checks that the request means
//! this server (its store, project and size cap), then hands the op to its
//! step.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bh_checkpoint::{
    AfterCall, Call, Checkpoint, DiffText, EntryCalls, PrunePolicy, RestoreMode, SnapshotRequest,
};
use serde_json::{Value, json};

use super::{Envelope, Failure, Op, PROTOCOL_VERSION, Service, TextKind, fail};

impl Service {
    /// The answer to one parsed request.
    pub(super) fn answer(&self, req: Envelope) -> Result<Value, Failure> {
        self.check_meant(&req)?;
        let cwd = req.cwd.as_deref();
        match req.op {
            Op::Ping => Ok(self.ping()),
            Op::Snapshot {
                tool,
                session,
                entry,
                after,
            } => self.snapshot(tool, session, entry, after),
            Op::After {
                tool,
                session,
                entry,
                call,
                before,
            } => self.after(tool, session, entry, call, &before),
            Op::List { session } => self.list(session.as_deref()),
            Op::Diff {
                checkpoint,
                paths,
                text,
            } => self.diff(&checkpoint, &self.relative(cwd, &paths)?, text),
            Op::Restore {
                checkpoint,
                paths,
                exact,
            } => {
                let outcome = self.live.store().restore(
                    &checkpoint,
                    &self.relative(cwd, &paths)?,
                    mode(exact),
                )?;
                Ok(json!({ "restore": outcome }))
            }
            Op::RestoreToEntry {
                session,
                entry,
                branch,
                exact,
            } => self.restore_to_entry(&session, &entry, &branch, exact),
            Op::Prune {
                keep,
                older_than_secs,
            } => self.prune(keep, older_than_secs),
            Op::Shutdown => Ok(json!({ "shutdown": true })),
        }
    }

    /// The request means this server: its store is still the user's and
    /// closed (an ordinary `bh` checks it on every call, so the server does
    /// too), and the project and size cap it names, if any, are this server's.
    fn check_meant(&self, req: &Envelope) -> Result<(), Failure> {
        let store = self.live.store();
        check_store(store.dir())?;
        if let Some(p) = &req.project {
            let p = fs_err::canonicalize(p).unwrap_or_else(|_| p.clone());
            if p != store.project() {
                return Err(fail(
                    "refused",
                    format!(
                        "this server serves {}, not {}",
                        store.project().display(),
                        p.display()
                    ),
                ));
            }
        }
        if let Some(size) = req.max_file_size
            && size != self.max_file_size
        {
            return Err(fail(
                "refused",
                format!(
                    "this server captures files up to {} bytes, not {size}",
                    self.max_file_size
                ),
            ));
        }
        Ok(())
    }

    /// `paths` (against `cwd`, default the project) as project-relative
    /// bytes; none at all when one of them is the project itself.
    fn relative(&self, cwd: Option<&Path>, paths: &[String]) -> Result<Vec<Vec<u8>>, Failure> {
        let project = self.live.store().project();
        let base = cwd.map_or_else(|| project.to_path_buf(), Path::to_path_buf);
        let mut out = Vec::new();
        for p in paths {
            let r = bh_checkpoint::project_relative(project, &base, Path::new(p))?;
            if r.is_empty() {
                return Ok(Vec::new());
            }
            out.push(r);
        }
        Ok(out)
    }

    /// `ping`: who this server is and how its live store is doing.
    fn ping(&self) -> Value {
        let store = self.live.store();
        let stats = self.live.stats();
        json!({
            "protocol": PROTOCOL_VERSION,
            "project": store.project(),
            "store": store.dir(),
            "pid": std::process::id(),
            "max_file_size": self.max_file_size,
            "live": { "fast": stats.fast, "full": stats.full },
        })
    }

    /// `snapshot`: a checkpoint before a call (journaled when it names its
    /// session and entry), or with `after` the state a call left.
    fn snapshot(
        &self,
        tool: String,
        session: Option<String>,
        entry: Option<String>,
        after: bool,
    ) -> Result<Value, Failure> {
        let request = SnapshotRequest {
            tool: tool.clone(),
            session: session.clone(),
            entry: entry.clone(),
        };
        if after {
            let outcome = self.live.snapshot_after(&request)?;
            return Ok(json!({ "snapshot": outcome }));
        }
        let outcome = self.live.snapshot(&request)?;
        if let (Some(session), Some(entry)) = (session, entry) {
            let size = self.journal.append(&Call {
                commit: outcome.checkpoint.commit.clone(),
                session,
                entry,
                tool,
                created: outcome.created,
            })?;
            // A failed compaction leaves the journal whole (it is replaced
            // by rename) and is retried at the next call; the snapshot
            // itself succeeded.
            if size > self.compact_at.load(Ordering::SeqCst) {
                let _ = self.compact_journal();
            }
        }
        Ok(json!({ "snapshot": outcome }))
    }

    /// `after`: the state a call left, journaled as the after-record of the
    /// checkpoint `before` it (which must be one of this store's).
    fn after(
        &self,
        tool: String,
        session: String,
        entry: String,
        call: Option<String>,
        before: &str,
    ) -> Result<Value, Failure> {
        let known = self.live.store().list()?;
        let Some(before) = known
            .iter()
            .find(|c| c.commit == before || c.id == before)
            .map(|c| c.commit.clone())
        else {
            return Err(fail(
                "not_found",
                format!("no checkpoint {before:?} to pair an after-record with"),
            ));
        };
        let request = SnapshotRequest {
            tool: tool.clone(),
            session: Some(session.clone()),
            entry: Some(entry.clone()),
        };
        let outcome = self.live.snapshot_after(&request)?;
        let record = AfterCall {
            session,
            entry,
            call,
            tool,
            before,
            after: outcome.checkpoint.commit.clone(),
            transcript: None,
            refs: Vec::new(),
        };
        self.journal.append_after(&record)?;
        Ok(json!({ "after": record }))
    }

    /// `list`: every checkpoint, or a session's: tagged with it, or used by
    /// one of its calls (a checkpoint reused from an identical earlier state
    /// keeps the tags of the call that made it).
    fn list(&self, session: Option<&str>) -> Result<Value, Failure> {
        let mut list = self.live.store().list()?;
        if let Some(s) = session {
            let mut used: HashSet<String> = HashSet::new();
            for c in self.journal.calls()? {
                if c.session == s {
                    used.insert(c.commit);
                }
            }
            for a in self.journal.afters()? {
                if a.session == s {
                    used.insert(a.before);
                    used.insert(a.after);
                }
            }
            list.retain(|c| c.session.as_deref() == Some(s) || used.contains(&c.commit));
        }
        Ok(json!({ "checkpoints": list }))
    }

    /// `diff`: a checkpoint against the working tree, with the text asked.
    fn diff(&self, checkpoint: &str, paths: &[Vec<u8>], text: TextKind) -> Result<Value, Failure> {
        let kind = match text {
            TextKind::None => DiffText::None,
            TextKind::Patch => DiffText::Patch,
            TextKind::Stat => DiffText::Stat,
        };
        let outcome = self.live.store().diff(checkpoint, paths, kind)?;
        let text = outcome
            .text
            .as_deref()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        Ok(json!({ "diff": outcome, "text": text }))
    }

    /// `restore_to_entry`: the files as they were at `entry` of `branch`;
    /// nothing when no tagged call followed it.
    fn restore_to_entry(
        &self,
        session: &str,
        entry: &str,
        branch: &[String],
        exact: bool,
    ) -> Result<Value, Failure> {
        let Some(target) = self.checkpoint_after(session, entry, branch)? else {
            return Ok(json!({ "checkpoint": null, "restore": null }));
        };
        let outcome = self
            .live
            .store()
            .restore(&target.commit, &[], mode(exact))?;
        Ok(json!({ "checkpoint": target, "restore": outcome }))
    }

    /// The checkpoint holding the files as they were at `entry`
    /// ([`bh_checkpoint::Store::checkpoint_at_entry`]): `branch` from `entry`
    /// on is the part of its subtree this server is told. `None` when no
    /// tagged call followed.
    fn checkpoint_after(
        &self,
        session: &str,
        entry: &str,
        branch: &[String],
    ) -> Result<Option<Checkpoint>, Failure> {
        let Some(pos) = branch.iter().position(|e| e == entry) else {
            return Err(fail(
                "not_found",
                format!("entry {entry} is not on the branch given"),
            ));
        };
        let subtree: HashSet<&str> = branch[pos..].iter().map(String::as_str).collect();
        Ok(self.live.store().checkpoint_at_entry(&EntryCalls {
            session: Some(session),
            entry,
            subtree: &subtree,
            recorded: &[],
        })?)
    }

    /// `prune`: the store by `keep` and/or age, then the journal compacted
    /// against what is left.
    fn prune(&self, keep: Option<usize>, older_than_secs: Option<u64>) -> Result<Value, Failure> {
        if keep.is_none() && older_than_secs.is_none() {
            return Err(fail("usage", "prune needs keep and/or older_than_secs"));
        }
        let outcome = self.live.store().prune(&PrunePolicy {
            keep,
            older_than: older_than_secs.map(Duration::from_secs),
        })?;
        let journal = self.compact_journal()?;
        Ok(json!({ "prune": outcome, "journal": journal }))
    }
}

/// The store folder is still the current user's and closed to others.
fn check_store(dir: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs_err::symlink_metadata(dir)
        .map_err(|e| fail("internal", format!("cannot inspect {}: {e}", dir.display())))?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me || !meta.is_dir() || meta.mode() & 0o077 != 0 {
        return Err(fail(
            "refused",
            format!(
                "checkpoint store {} changed owner or mode (uid {}, mode {:o}) since this server opened it; refusing to use it",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

fn mode(exact: bool) -> RestoreMode {
    if exact {
        RestoreMode::Exact
    } else {
        RestoreMode::Additive
    }
}
