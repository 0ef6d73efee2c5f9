//! The first line of a session file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `{"type":"session","version":3,"id":…,"timestamp":…,"cwd":…,"parentSession"?:…}`
/// ([P73] `docs/session-format.md` "SessionHeader").
///
/// Fields are declared in the order Pi writes them. v1 headers may carry
/// `provider`, `modelId`, `thinkingLevel`, `branchedFrom`; they, and any other
/// unknown key, land in `extra` (serialised after the known keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl SessionHeader {
    /// A fresh v3 header as Pi's `newSession` builds it.
    pub fn new(
        id: impl Into<String>,
        timestamp: impl Into<String>,
        cwd: impl Into<String>,
        parent_session: Option<String>,
    ) -> Self {
        SessionHeader {
            kind: "session".to_owned(),
            version: Some(crate::CURRENT_SESSION_VERSION),
            id: id.into(),
            timestamp: Some(timestamp.into()),
            cwd: Some(cwd.into()),
            parent_session,
            extra: BTreeMap::new(),
        }
    }

    /// Absent `version` means v1.
    pub fn effective_version(&self) -> u64 {
        self.version.unwrap_or(1)
    }
}
