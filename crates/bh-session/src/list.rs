//! Listing the sessions Pi keeps for a project ([P73] `SessionManager.list`).

use std::path::{Path, PathBuf};

use bh_protocol::EntryType;
use bh_protocol::message::Content;
use serde::{Deserialize, Serialize};

use crate::context::iso_to_ms;
use crate::error::{Result, SessionError};
use crate::session::Session;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub path: PathBuf,
    pub id: String,
    pub cwd: Option<String>,
    pub name: Option<String>,
    pub parent_session: Option<String>,
    pub created: Option<String>,
    /// Last activity in Unix ms (Pi: newest user/assistant message timestamp,
    /// else the header timestamp, else the file mtime).
    pub modified_ms: i64,
    pub message_count: usize,
    /// First user prompt's text ("(no messages)" when none, as Pi shows it).
    pub first_message: String,
    pub size: u64,
    pub problems: usize,
}

#[derive(Deserialize)]
struct MsgLine {
    message: MsgContent,
}
#[derive(Deserialize)]
struct MsgContent {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    timestamp: Option<serde_json::Value>,
}

impl Session {
    /// Summary for a session list (`None` when the file has no header).
    pub fn summary(&self, size: u64, mtime_ms: i64) -> Option<SessionSummary> {
        let h = self.header()?;
        let mut first = String::new();
        let mut last_activity: Option<i64> = None;
        let mut count = 0;
        for e in self.entries() {
            if e.kind != EntryType::Message {
                continue;
            }
            count += 1;
            let role = e.role.as_deref();
            if !matches!(role, Some("user" | "assistant")) {
                continue;
            }
            let Ok(m) = serde_json::from_slice::<MsgLine>(self.line_text(e)) else {
                continue;
            };
            let ts = m
                .message
                .timestamp
                .as_ref()
                .and_then(serde_json::Value::as_f64)
                .map(|t| t as i64)
                .or_else(|| iso_to_ms(e.timestamp.as_deref()));
            if let Some(t) = ts {
                last_activity = Some(last_activity.map_or(t, |l| l.max(t)));
            }
            let Some(content) = m.message.content else {
                continue;
            };
            let text = content.plain_text();
            if first.is_empty() && role == Some("user") && !text.is_empty() {
                first = text;
            }
        }
        let modified_ms = last_activity
            .filter(|t| *t > 0)
            .or_else(|| iso_to_ms(h.timestamp.as_deref()))
            .unwrap_or(mtime_ms);
        Some(SessionSummary {
            path: self.path().map(Path::to_path_buf).unwrap_or_default(),
            id: h.id.clone(),
            cwd: h.cwd.clone(),
            name: self.name().map(str::to_owned),
            parent_session: h.parent_session.clone(),
            created: h.timestamp.clone(),
            modified_ms,
            message_count: count,
            first_message: if first.is_empty() {
                "(no messages)".to_owned()
            } else {
                first
            },
            size,
            problems: self.problems().len(),
        })
    }
}

/// Every `*.jsonl` session in `dir` with a valid header, newest first.
/// A missing directory lists nothing.
pub fn list_sessions(dir: &Path) -> Result<Vec<SessionSummary>> {
    let rd = match fs_err::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| SessionError::io(dir, e))?;
        let path = ent.path();
        if path.extension().and_then(|x| x.to_str()) != Some("jsonl") {
            continue;
        }
        let Ok(meta) = ent.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let mtime_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let Ok(session) = Session::load(&path) else {
            continue;
        };
        if let Some(s) = session.summary(meta.len(), mtime_ms) {
            out.push(s);
        }
    }
    out.sort_by(|a, b| b.modified_ms.cmp(&a.modified_ms).then(a.path.cmp(&b.path)));
    Ok(out)
}
