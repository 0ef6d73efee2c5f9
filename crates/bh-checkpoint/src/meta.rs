//! What a checkpoint records, and how it is written into (and read back from)
//! the commit message: trailers for the facts, and one exact line per path
//! the snapshot did not capture. Depends on no other module of the crate.

use serde::Serialize;

/// A checkpoint as listed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Checkpoint {
    /// Full commit id in the shadow repository.
    pub commit: String,
    /// Short id shown to people (first 12 hex digits).
    pub id: String,
    /// Tree id of the snapshot.
    pub tree: String,
    /// Monotonic sequence number within the store.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// Tool that was about to run (`Edit`, `write`, `restore`, `manual` …).
    pub tool: String,
    /// Agent session id, if any.
    pub session: Option<String>,
    /// Agent session entry id, if any.
    pub entry: Option<String>,
    /// Files changed since the previous checkpoint.
    pub files_changed: u64,
    /// Files that were not captured (too large, unreadable, nested repository …).
    pub skipped: u64,
    /// Why it was taken; `snapshot` or `pre-restore` in JSON.
    pub kind: CheckpointKind,
}

/// Why a checkpoint was taken (its `Bh-Kind` trailer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointKind {
    /// Before a tool call, or by hand.
    Snapshot,
    /// The state a restore was about to replace (what undoes the restore).
    PreRestore,
    /// The state a mutating call left (its after-record). Never reused as
    /// the checkpoint before a later call, so that one keeps its own tags.
    After,
    /// A kind this version does not know (written by a newer one), kept as
    /// read so a store stays listable.
    Other(String),
}

impl CheckpointKind {
    /// Whether a snapshot of kind `self` may reuse `prev` when nothing
    /// changed: a checkpoint before a call never reuses an after-record.
    pub(crate) fn may_reuse(&self, prev: &CheckpointKind) -> bool {
        !(*self == CheckpointKind::Snapshot && *prev == CheckpointKind::After)
    }

    /// The trailer and JSON value.
    pub fn as_str(&self) -> &str {
        match self {
            CheckpointKind::Snapshot => "snapshot",
            CheckpointKind::PreRestore => "pre-restore",
            CheckpointKind::After => "after",
            CheckpointKind::Other(s) => s,
        }
    }

    fn parse(value: &str) -> CheckpointKind {
        match value {
            "snapshot" => CheckpointKind::Snapshot,
            "pre-restore" => CheckpointKind::PreRestore,
            "after" => CheckpointKind::After,
            other => CheckpointKind::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for CheckpointKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CheckpointKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A path a snapshot did not capture, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Skipped {
    /// Project-relative path, shown git-style (C-quoted when not plain UTF-8).
    pub path: String,
    pub reason: String,
}

/// What to record with a snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotRequest {
    /// The tool about to run (`Edit`, `write`, `bash` …); `manual` by hand.
    pub tool: String,
    pub session: Option<String>,
    pub entry: Option<String>,
}

pub(crate) struct NewMeta<'a> {
    pub seq: u64,
    pub time_ms: i64,
    pub tool: &'a str,
    pub session: Option<&'a str>,
    pub entry: Option<&'a str>,
    pub files_changed: u64,
    pub skipped: &'a [Skipped],
    pub kind: CheckpointKind,
}

impl<'a> NewMeta<'a> {
    /// What a snapshot taken for `request` records (`manual` when it names
    /// no tool).
    pub(crate) fn for_request(
        request: &'a SnapshotRequest,
        seq: u64,
        time_ms: i64,
        files_changed: u64,
        skipped: &'a [Skipped],
        kind: CheckpointKind,
    ) -> NewMeta<'a> {
        NewMeta {
            seq,
            time_ms,
            tool: if request.tool.is_empty() {
                "manual"
            } else {
                &request.tool
            },
            session: request.session.as_deref(),
            entry: request.entry.as_deref(),
            files_changed,
            skipped,
            kind,
        }
    }
}

/// Keeps a trailer value on one line and bounded.
fn clean(value: &str) -> String {
    let mut out: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    out = out.trim().to_owned();
    if out.is_empty() { "-".to_owned() } else { out }
}

pub(crate) fn message(meta: &NewMeta<'_>) -> String {
    let mut msg = format!("checkpoint before {}\n\n", clean(meta.tool));
    if !meta.skipped.is_empty() {
        // Every skipped path, whole: `restore --exact` never deletes one, so
        // the record must name it exactly (git-style quoting is reversible and
        // keeps the line a line; the reason never holds `): `).
        for s in meta.skipped {
            let reason = clean(&s.reason).replace("): ", ") : ");
            msg.push_str(&format!("skipped ({reason}): {}\n", s.path));
        }
        msg.push('\n');
    }
    msg.push_str(&format!("Bh-Seq: {}\n", meta.seq));
    msg.push_str(&format!("Bh-Time: {}\n", meta.time_ms));
    msg.push_str(&format!("Bh-Kind: {}\n", clean(meta.kind.as_str())));
    msg.push_str(&format!("Bh-Tool: {}\n", clean(meta.tool)));
    if let Some(s) = meta.session {
        msg.push_str(&format!("Bh-Session: {}\n", clean(s)));
    }
    if let Some(e) = meta.entry {
        msg.push_str(&format!("Bh-Entry: {}\n", clean(e)));
    }
    msg.push_str(&format!("Bh-Files-Changed: {}\n", meta.files_changed));
    msg.push_str(&format!("Bh-Skipped: {}\n", meta.skipped.len()));
    msg
}

/// The [`Checkpoint`] just written with `meta`.
pub(crate) fn from_new(commit: &str, tree: &str, meta: &NewMeta<'_>) -> Option<Checkpoint> {
    Some(Checkpoint {
        commit: commit.to_owned(),
        id: commit.get(..12)?.to_owned(),
        tree: tree.to_owned(),
        seq: meta.seq,
        time_ms: meta.time_ms,
        tool: clean(meta.tool),
        session: meta.session.map(clean),
        entry: meta.entry.map(clean),
        files_changed: meta.files_changed,
        skipped: meta.skipped.len() as u64,
        kind: meta.kind.clone(),
    })
}

/// Builds a [`Checkpoint`] from a commit id, its tree and its trailer block.
pub(crate) fn parse(commit: &str, tree: &str, trailers: &str) -> Option<Checkpoint> {
    let mut cp = Checkpoint {
        commit: commit.to_owned(),
        id: commit.get(..12)?.to_owned(),
        tree: tree.to_owned(),
        seq: 0,
        time_ms: 0,
        tool: String::new(),
        session: None,
        entry: None,
        files_changed: 0,
        skipped: 0,
        kind: CheckpointKind::Snapshot,
    };
    let mut seen_seq = false;
    for line in trailers.lines() {
        let Some((key, value)) = line.split_once(": ") else {
            continue;
        };
        let value = value.trim();
        match key {
            "Bh-Seq" => {
                cp.seq = value.parse().ok()?;
                seen_seq = true;
            }
            "Bh-Time" => cp.time_ms = value.parse().ok()?,
            "Bh-Kind" => cp.kind = CheckpointKind::parse(value),
            "Bh-Tool" => cp.tool = value.to_owned(),
            "Bh-Session" => cp.session = Some(value.to_owned()),
            "Bh-Entry" => cp.entry = Some(value.to_owned()),
            "Bh-Files-Changed" => cp.files_changed = value.parse().ok()?,
            "Bh-Skipped" => cp.skipped = value.parse().ok()?,
            _ => {}
        }
    }
    seen_seq.then_some(cp)
}

/// The exact paths a checkpoint's message records as not captured.
pub(crate) fn skipped_paths(body: &str) -> Vec<Vec<u8>> {
    body.lines()
        .filter(|l| l.starts_with("skipped ("))
        .filter_map(|l| l.split_once("): ").map(|(_, p)| unquote(p)))
        .collect()
}

/// Reverses [`bh_git::parse::display_path`].
pub(crate) fn unquote(shown: &str) -> Vec<u8> {
    let Some(inner) = shown.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return shown.as_bytes().to_vec();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0'..=b'7' if bytes.len() >= i + 4 => {
                    let oct = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("0");
                    out.push(u8::from_str_radix(oct, 8).unwrap_or(b'?'));
                    i += 4;
                    continue;
                }
                other => out.push(other),
            }
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trips_through_trailers() {
        let skipped = vec![Skipped {
            path: "big.bin".into(),
            reason: "larger than 50MiB".into(),
        }];
        let msg = message(&NewMeta {
            seq: 7,
            time_ms: 1_700_000_000_123,
            tool: "Edit\nInjected: yes",
            session: Some("s-1"),
            entry: None,
            files_changed: 3,
            skipped: &skipped,
            kind: CheckpointKind::Snapshot,
        });
        let trailers: String = msg
            .lines()
            .filter(|l| l.starts_with("Bh-"))
            .map(|l| format!("{l}\n"))
            .collect();
        let cp = parse(&"a".repeat(40), &"b".repeat(40), &trailers).unwrap();
        assert_eq!(cp.seq, 7);
        assert_eq!(cp.tool, "Edit Injected: yes");
        assert_eq!(cp.session.as_deref(), Some("s-1"));
        assert_eq!(cp.entry, None);
        assert_eq!(cp.files_changed, 3);
        assert_eq!(cp.skipped, 1);
        assert_eq!(cp.id, "a".repeat(12));
        assert_eq!(cp.kind, CheckpointKind::Snapshot);
    }

    #[test]
    fn kinds_round_trip_and_an_unknown_one_is_kept() {
        for (kind, text) in [
            (CheckpointKind::Snapshot, "snapshot"),
            (CheckpointKind::PreRestore, "pre-restore"),
            (CheckpointKind::After, "after"),
        ] {
            let msg = message(&NewMeta {
                seq: 1,
                time_ms: 0,
                tool: "t",
                session: None,
                entry: None,
                files_changed: 0,
                skipped: &[],
                kind: kind.clone(),
            });
            assert!(msg.contains(&format!("Bh-Kind: {text}\n")), "{msg}");
            let cp = parse(&"a".repeat(40), &"b".repeat(40), &msg).unwrap();
            assert_eq!(cp.kind, kind);
            assert_eq!(serde_json::to_value(&cp).unwrap()["kind"], text);
        }
        let cp = parse(
            &"a".repeat(40),
            &"b".repeat(40),
            "Bh-Seq: 1\nBh-Kind: later\n",
        )
        .unwrap();
        assert_eq!(cp.kind, CheckpointKind::Other("later".into()));
        assert_eq!(cp.kind.to_string(), "later");
    }

    #[test]
    fn skipped_paths_of_any_length_and_bytes_round_trip() {
        let raw: Vec<Vec<u8>> = vec![
            "l".repeat(250).into_bytes(),
            b"new\nline\ttab\xff\"quote\\".to_vec(),
            b"plain): colon".to_vec(),
            format!("{}/{}", "d".repeat(255), "f".repeat(255)).into_bytes(),
        ];
        let skipped: Vec<Skipped> = raw
            .iter()
            .map(|p| Skipped {
                path: bh_git::parse::display_path(p),
                reason: "unreadable: no (os error 13): x".into(),
            })
            .chain((0..1500).map(|i| Skipped {
                path: format!("many/{i}"),
                reason: "nested repository (submodule)".into(),
            }))
            .collect();
        let msg = message(&NewMeta {
            seq: 1,
            time_ms: 0,
            tool: "t",
            session: None,
            entry: None,
            files_changed: 0,
            skipped: &skipped,
            kind: CheckpointKind::Snapshot,
        });
        let back = skipped_paths(&msg);
        assert_eq!(back.len(), raw.len() + 1500);
        assert_eq!(&back[..raw.len()], raw.as_slice());
        assert_eq!(back[raw.len() + 1499], b"many/1499");
    }
}
