//! Entry types and typed entries in the key order Pi writes them
//! ([P73] `dist/core/session-manager.js` `append*` methods).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The `type` of a line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryType {
    Session,
    Message,
    ModelChange,
    ThinkingLevelChange,
    Compaction,
    BranchSummary,
    Custom,
    CustomMessage,
    Label,
    SessionInfo,
    /// Pi ≥ 0.86.
    Usage,
    /// Pi ≥ 0.87.
    ContextEdit,
    /// Anything else; kept verbatim.
    Unknown(String),
}

impl EntryType {
    pub fn from_type(s: &str) -> EntryType {
        match s {
            "session" => EntryType::Session,
            "message" => EntryType::Message,
            "model_change" => EntryType::ModelChange,
            "thinking_level_change" => EntryType::ThinkingLevelChange,
            "compaction" => EntryType::Compaction,
            "branch_summary" => EntryType::BranchSummary,
            "custom" => EntryType::Custom,
            "custom_message" => EntryType::CustomMessage,
            "label" => EntryType::Label,
            "session_info" => EntryType::SessionInfo,
            "usage" => EntryType::Usage,
            "context_edit" => EntryType::ContextEdit,
            other => EntryType::Unknown(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            EntryType::Session => "session",
            EntryType::Message => "message",
            EntryType::ModelChange => "model_change",
            EntryType::ThinkingLevelChange => "thinking_level_change",
            EntryType::Compaction => "compaction",
            EntryType::BranchSummary => "branch_summary",
            EntryType::Custom => "custom",
            EntryType::CustomMessage => "custom_message",
            EntryType::Label => "label",
            EntryType::SessionInfo => "session_info",
            EntryType::Usage => "usage",
            EntryType::ContextEdit => "context_edit",
            EntryType::Unknown(s) => s,
        }
    }

    pub fn is_known(&self) -> bool {
        !matches!(self, EntryType::Unknown(_))
    }
}

/// `{"type":"message","id","parentId","timestamp","message"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub message: Box<RawValue>,
}

/// `{"type":"model_change","id","parentId","timestamp","provider","modelId"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelChangeEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub provider: String,
    pub model_id: String,
}

/// `{"type":"thinking_level_change","id","parentId","timestamp","thinkingLevel"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingLevelChangeEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub thinking_level: String,
}

/// `{"type":"custom","customType","data","id","parentId","timestamp"}` (custom keys first, as Pi).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub custom_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
}

/// `{"type":"custom_message","customType","content","display","details"?,"id","parentId","timestamp"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessageEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub custom_type: String,
    pub content: Value,
    pub display: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
}

/// `{"type":"label","id","parentId","timestamp","targetId","label"?}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    /// Pi copies the label's original timestamp when it re-creates labels;
    /// `undefined` is dropped by `JSON.stringify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub target_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `{"type":"session_info","id","parentId","timestamp","name"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfoEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub name: String,
}

/// `{"type":"compaction","id","parentId","timestamp","summary","firstKeptEntryId","tokensBefore","details"?,"fromHook"?}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
}

/// `{"type":"branch_summary","id","parentId","timestamp","fromId","summary","details"?,"fromHook"?}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub from_id: String,
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
}

/// 1.x `{"type":"context_edit","id","parentId","timestamp","targetId","replacement"}`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEditEntry {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub target_id: String,
    /// `null` omits the target; `{"content": …}` replaces its content.
    pub replacement: Option<Value>,
}
