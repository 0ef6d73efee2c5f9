//! The protocol's requests and their answers (see `PROTOCOL.md`): parsing and
//! access here, the ops in [`ops`].

mod ops;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bh_checkpoint::{CheckpointError, Journal, LiveStore};
use serde::Deserialize;
use serde_json::{Value, json};

/// The call journal is first compacted once it is this large (about 5,000
/// calls); after that, whenever it has doubled since the last compaction.
pub const JOURNAL_COMPACT_BYTES: u64 = 1 << 20;

/// Bumped when a request or response changes incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;

/// What a transport lets its peers ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Every op: the peer is the parent that spawned this server (stdio).
    Full,
    /// `ping` and `snapshot` only: the per-project socket, which any process
    /// of the user that can reach it may connect to. Nothing asked there can
    /// delete work or checkpoints (PROTOCOL.md, "Who may ask what").
    Snapshot,
}

/// The ops [`Access::Snapshot`] admits.
const SOCKET_OPS: &[&str] = &["ping", "snapshot"];

/// What the transport does after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    /// The request was `shutdown`: answer, then stop serving.
    Shutdown,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Op {
    Ping,
    Snapshot {
        #[serde(default)]
        tool: String,
        session: Option<String>,
        entry: Option<String>,
        /// The state a call left (kind `after`), for a caller that keeps
        /// the after-record itself (the Claude Code hook): never journaled.
        #[serde(default)]
        after: bool,
    },
    /// After a mutating call returned: the state it left, and the
    /// after-record tying it to the checkpoint `before` it (what a rewind
    /// attributes to the call).
    After {
        tool: String,
        session: String,
        entry: String,
        /// The tool-call id.
        call: Option<String>,
        /// The commit of the checkpoint `snapshot` answered before the call.
        before: String,
    },
    List {
        session: Option<String>,
    },
    Diff {
        checkpoint: String,
        #[serde(default)]
        paths: Vec<String>,
        #[serde(default)]
        text: TextKind,
    },
    Restore {
        checkpoint: String,
        #[serde(default)]
        paths: Vec<String>,
        #[serde(default)]
        exact: bool,
    },
    RestoreToEntry {
        session: String,
        entry: String,
        /// The entry ids of the branch being left, root first (the target
        /// entry among them).
        branch: Vec<String>,
        #[serde(default = "yes")]
        exact: bool,
    },
    Prune {
        keep: Option<usize>,
        older_than_secs: Option<u64>,
    },
    Shutdown,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum TextKind {
    #[default]
    None,
    Patch,
    Stat,
}

/// Fields every request may carry besides `id` and the op's own.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(flatten)]
    op: Op,
    /// The project the caller means; refused when it is not this server's.
    #[serde(default)]
    project: Option<PathBuf>,
    /// The size cap the caller means; refused when it is not this server's.
    #[serde(default)]
    max_file_size: Option<u64>,
    /// Directory relative paths are resolved against (default: the project).
    #[serde(default)]
    cwd: Option<PathBuf>,
}

struct Failure {
    kind: &'static str,
    message: String,
}

impl From<CheckpointError> for Failure {
    fn from(err: CheckpointError) -> Failure {
        let kind = err.class().as_str();
        Failure {
            kind,
            message: err.to_string(),
        }
    }
}

impl From<crate::ServeError> for Failure {
    fn from(err: crate::ServeError) -> Failure {
        Failure {
            kind: "internal",
            message: err.to_string(),
        }
    }
}

fn fail(kind: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        kind,
        message: message.into(),
    }
}

/// One project's live store behind the protocol. Requests are answered one at
/// a time (the store serialises them anyway).
#[derive(Debug)]
pub struct Service {
    live: LiveStore,
    max_file_size: u64,
    journal: Journal,
    /// The journal size that triggers the next compaction.
    compact_at: AtomicU64,
    /// The size below which the journal is never compacted.
    compact_min: u64,
    shutdown: AtomicBool,
}

impl Service {
    /// `journal` is the per-project call journal ([`crate::Paths::journal`]).
    pub fn new(live: LiveStore, max_file_size: u64, journal: PathBuf) -> Service {
        Service {
            live,
            max_file_size,
            journal: Journal::new(journal),
            compact_at: AtomicU64::new(JOURNAL_COMPACT_BYTES),
            compact_min: JOURNAL_COMPACT_BYTES,
            shutdown: AtomicBool::new(false),
        }
    }

    /// Compacts the call journal from `bytes` on instead of
    /// [`JOURNAL_COMPACT_BYTES`] (a small state folder; tests).
    pub fn with_journal_compaction_at(mut self, bytes: u64) -> Service {
        self.compact_min = bytes;
        self.compact_at = AtomicU64::new(bytes);
        self
    }

    /// Compacts the call journal against the checkpoints the store still
    /// has (`journal` module docs); the next compaction is due when it has
    /// doubled.
    fn compact_journal(&self) -> Result<Value, Failure> {
        let live: HashSet<String> = self
            .live
            .store()
            .list()?
            .into_iter()
            .map(|c| c.commit)
            .collect();
        let done = self.journal.compact(&live)?;
        self.compact_at.store(
            self.compact_min.max(done.bytes.saturating_mul(2)),
            Ordering::SeqCst,
        );
        Ok(json!({ "calls_before": done.before, "calls_after": done.after }))
    }

    /// A `shutdown` request was answered.
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    pub fn project(&self) -> &Path {
        self.live.store().project()
    }

    /// Answers one request line with one response line (no newline), every
    /// op admitted ([`Access::Full`]).
    pub fn handle(&self, line: &[u8]) -> (String, Control) {
        self.handle_as(line, Access::Full)
    }

    /// Answers one request line with one response line (no newline); an op
    /// `access` does not admit is refused without being looked at further.
    pub fn handle_as(&self, line: &[u8], access: Access) -> (String, Control) {
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return (
                    respond(
                        &Value::Null,
                        Err(fail("usage", format!("request is not JSON: {e}"))),
                    ),
                    Control::Continue,
                );
            }
        };
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        let mut body = value;
        if let Some(obj) = body.as_object_mut() {
            obj.remove("id");
        }
        if access == Access::Snapshot {
            let op = body.get("op").and_then(Value::as_str).unwrap_or("");
            if !SOCKET_OPS.contains(&op) {
                let message = format!(
                    "op {} is not served over the socket (only ping and snapshot are); run `bh checkpoint` yourself for it",
                    serde_json::to_string(op).unwrap_or_default()
                );
                return (
                    respond(&id, Err(fail("refused", message))),
                    Control::Continue,
                );
            }
        }
        let envelope: Envelope = match serde_json::from_value(body) {
            Ok(e) => e,
            Err(e) => {
                return (
                    respond(&id, Err(fail("usage", format!("bad request: {e}")))),
                    Control::Continue,
                );
            }
        };
        let control = if matches!(envelope.op, Op::Shutdown) {
            self.shutdown.store(true, Ordering::SeqCst);
            Control::Shutdown
        } else {
            Control::Continue
        };
        (respond(&id, self.answer(envelope)), control)
    }
}

fn respond(id: &Value, result: Result<Value, Failure>) -> String {
    let doc = match result {
        Ok(ok) => json!({ "id": id, "ok": ok }),
        Err(f) => json!({ "id": id, "error": { "kind": f.kind, "message": f.message } }),
    };
    doc.to_string()
}
