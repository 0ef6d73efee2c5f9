//! Which checkpoint holds the files as they were at a session entry: the one
//! taken before the first mutating call after it. One answer for every rewind
//! (`bh checkpoint restore --session`, the REPL's `/rewind`, the checkpoint
//! server's `restore_to_entry`).
//!
//! **After the entry** means the entry's subtree: the entry and every entry
//! descending from it, on any branch, as far as the caller knows the tree. A
//! session file gives the whole subtree; the checkpoint server is told only
//! the branch being left (Pi's extension rewinds files only to an entry on
//! it), so there it is that branch from the entry on. The first call after
//! the entry is the earliest in time: the earliest journal line, or the
//! lowest sequence number (they only grow).
//!
//! A call's checkpoint is known three ways, all consulted:
//! - the call journal of the checkpoint server (exact, also when a snapshot
//!   was debounced into an older checkpoint, which keeps another call's tags);
//! - `details.checkpoint` of a tool result (`bh agent`; exact likewise);
//! - the store's `Bh-Session`/`Bh-Entry` tags (only the call that created the
//!   checkpoint).
//!
//! Journal lines and tags name the assistant entry that made the call, which
//! was written before the call: they count when that entry is in the subtree,
//! the entry itself included. A tool result's `details.checkpoint` was taken
//! before its own call, so before the tool result was written: it counts only
//! for entries strictly below the one rewound to — rewinding to a tool result
//! keeps its call's effect, as the conversation keeps its result.
//!
//! Undo points (`pre-restore`) never count. Ids from a session file or the
//! journal are matched exactly (full commit or the 12-digit id), never as
//! `latest` or a prefix; the store is listed once.

use std::collections::HashSet;

use crate::{CallSpan, Checkpoint, CheckpointError, CheckpointKind, Result, Store};

/// A checkpoint id a session entry records (a tool result's
/// `details.checkpoint`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub entry: String,
    pub checkpoint: String,
}

/// What a rewind to one entry knows of the calls after it.
#[derive(Debug, Clone, Copy)]
pub struct EntryCalls<'a> {
    /// The session's id; tags and journal lines of other sessions never count.
    pub session: Option<&'a str>,
    /// The entry rewound to.
    pub entry: &'a str,
    /// The entry and its descendants, as far as the caller knows them.
    pub subtree: &'a HashSet<&'a str>,
    /// Checkpoints recorded by entries of the session (any entry: those
    /// outside the subtree, and the entry's own, are ignored here).
    pub recorded: &'a [Recorded],
}

impl Store {
    /// The checkpoint holding the files as they were at `q.entry` (module
    /// docs); `None` when no call with a checkpoint followed it. A checkpoint
    /// that the journal or a tool result names but the store no longer has
    /// is [`CheckpointError::CallCheckpointGone`], never guessed around.
    pub fn checkpoint_at_entry(&self, q: &EntryCalls<'_>) -> Result<Option<Checkpoint>> {
        let list = self.list()?;
        let find = |id: &str| {
            list.iter()
                .find(|c| !id.is_empty() && (c.commit == id || c.id == id))
        };
        let mut best: Option<&Checkpoint> = None;
        // Recorded by tool results below the entry (bh agent).
        for r in q.recorded {
            if r.entry == q.entry || !q.subtree.contains(r.entry.as_str()) {
                continue;
            }
            match find(&r.checkpoint) {
                Some(cp) => earlier(&mut best, cp),
                None => {
                    return Err(CheckpointError::CallCheckpointGone {
                        checkpoint: r.checkpoint.clone(),
                        call: format!("the call whose result is entry {}", r.entry),
                    });
                }
            }
        }
        let Some(session) = q.session else {
            return Ok(best.cloned());
        };
        // The first journaled call of the subtree (the checkpoint server).
        let journal = self.call_journal();
        let first = journal
            .calls()?
            .into_iter()
            .find(|c| c.session == session && q.subtree.contains(c.entry.as_str()));
        if let Some(call) = first {
            match find(&call.commit) {
                Some(cp) => earlier(&mut best, cp),
                None => {
                    return Err(CheckpointError::CallCheckpointGone {
                        checkpoint: call.commit,
                        call: format!(
                            "the {} call of entry {} (journal {})",
                            call.tool,
                            call.entry,
                            journal.path().display()
                        ),
                    });
                }
            }
        }
        // Tagged with the session and an entry of the subtree.
        for cp in &list {
            if cp.session.as_deref() == Some(session)
                && cp.entry.as_deref().is_some_and(|e| q.subtree.contains(e))
            {
                earlier(&mut best, cp);
            }
        }
        Ok(best.cloned())
    }
}

impl Store {
    /// The session's calls after `q.entry`, in call order, for a rewind plan
    /// ([`Store::rewind`]): its after-records in the call journal whose
    /// entry is in the subtree (the entry itself included, as for journal
    /// lines above). A session without any (recorded before after-records)
    /// gets every checkpoint the rules above find, each without an after
    /// checkpoint (the plan then says how it attributed them). Empty when
    /// no call followed the entry.
    pub fn entry_spans(&self, q: &EntryCalls<'_>) -> Result<Vec<CallSpan>> {
        if let Some(session) = q.session {
            let spans: Vec<CallSpan> = self
                .call_journal()
                .afters()?
                .into_iter()
                .filter(|a| a.session == session && q.subtree.contains(a.entry.as_str()))
                .map(|a| CallSpan {
                    tool: a.tool,
                    call: a.call.or(Some(a.entry)),
                    before: a.before,
                    after: Some(a.after),
                    refs: a.refs,
                })
                .collect();
            if !spans.is_empty() {
                return Ok(spans);
            }
        }
        let list = self.list()?;
        let find = |id: &str| {
            list.iter()
                .find(|c| !id.is_empty() && (c.commit == id || c.id == id))
        };
        let mut found: Vec<&Checkpoint> = Vec::new();
        for r in q.recorded {
            if r.entry == q.entry || !q.subtree.contains(r.entry.as_str()) {
                continue;
            }
            match find(&r.checkpoint) {
                Some(cp) => found.push(cp),
                None => {
                    return Err(CheckpointError::CallCheckpointGone {
                        checkpoint: r.checkpoint.clone(),
                        call: format!("the call whose result is entry {}", r.entry),
                    });
                }
            }
        }
        if let Some(session) = q.session {
            for call in self.call_journal().calls()? {
                if call.session == session && q.subtree.contains(call.entry.as_str()) {
                    match find(&call.commit) {
                        Some(cp) => found.push(cp),
                        None => {
                            return Err(CheckpointError::CallCheckpointGone {
                                checkpoint: call.commit,
                                call: format!("the {} call of entry {}", call.tool, call.entry),
                            });
                        }
                    }
                }
            }
            found.extend(list.iter().filter(|cp| {
                cp.session.as_deref() == Some(session)
                    && cp.entry.as_deref().is_some_and(|e| q.subtree.contains(e))
            }));
        }
        found.retain(|cp| cp.kind == CheckpointKind::Snapshot);
        found.sort_by_key(|cp| cp.seq);
        found.dedup_by_key(|cp| cp.seq);
        Ok(found
            .into_iter()
            .map(|cp| CallSpan {
                tool: cp.tool.clone(),
                call: None,
                before: cp.commit.clone(),
                after: None,
                refs: Vec::new(),
            })
            .collect())
    }
}

/// Keeps the earlier of `best` and `cp`; undo points never count.
fn earlier<'l>(best: &mut Option<&'l Checkpoint>, cp: &'l Checkpoint) {
    if cp.kind == CheckpointKind::Snapshot && best.is_none_or(|b| cp.seq < b.seq) {
        *best = Some(cp);
    }
}
